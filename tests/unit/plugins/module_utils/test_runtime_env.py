import json
import os

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    HOOK_FILE,
    MODULE_FILE,
    RuntimeEnvError,
    VenvRefused,
    apply_environment,
    build_environment,
    effect_problem,
    inspect_argv,
    module_code,
    observe_venv,
    render,
    site_packages_below,
    to_write,
    unconverged_reasons,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.jit_caches import CACHE_VARIABLES

PCIE_BLACKWELL = {
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MIN_NCHANNELS": 16,
    "NCCL_MAX_NCHANNELS": 16,
    "NCCL_BUFFSIZE": 16777216,
    "NCCL_NTHREADS": 512,
}
PROFILES = {"pcie_blackwell": PCIE_BLACKWELL, "none": {}}


def build(**changes):
    settings = dict(
        venv_path="/opt/ml-env",
        cuda_home="/usr/local/cuda-13.0",
        triton_ptxas_path="/usr/local/cuda-13.0/bin/ptxas",
        nccl_profile="pcie_blackwell",
        nccl_profiles=PROFILES,
    )
    settings.update(changes)
    return build_environment(**settings)


def problems(**changes):
    with pytest.raises(RuntimeEnvError) as raised:
        build(**changes)
    return raised.value.problems


def test_reference_box_environment():
    assert build()["environment"] == {
        "CUDA_HOME": "/usr/local/cuda-13.0",
        "FLASHINFER_DISABLE_VERSION_CHECK": "1",
        "NCCL_ALGO": "Ring",
        "NCCL_BUFFSIZE": "16777216",
        "NCCL_MAX_NCHANNELS": "16",
        "NCCL_MIN_NCHANNELS": "16",
        "NCCL_NTHREADS": "512",
        "NCCL_P2P_LEVEL": "SYS",
        "NCCL_PROTO": "LL",
        "SGLANG_DISABLE_CUDNN_CHECK": "1",
        "TRITON_PTXAS_PATH": "/usr/local/cuda-13.0/bin/ptxas",
    }


def test_environment_is_sorted_by_name():
    environment = build(extra_env={"A_FIRST": "x"})["environment"]
    assert list(environment) == sorted(environment)


def test_profile_none_renders_no_nccl_variable():
    environment = build(nccl_profile="none")["environment"]
    assert not [name for name in environment if name.startswith("NCCL_")]


def test_overrides_replace_add_and_remove_profile_values():
    environment = build(nccl_overrides={"NCCL_NTHREADS": 256, "NCCL_DEBUG": "INFO", "NCCL_ALGO": None})[
        "environment"
    ]
    assert environment["NCCL_NTHREADS"] == "256"
    assert environment["NCCL_DEBUG"] == "INFO"
    assert "NCCL_ALGO" not in environment


def test_flashinfer_switch_off_leaves_the_variable_out_not_zero():
    # flashinfer skips its version check for ANY non-empty value, "0" included.
    assert "FLASHINFER_DISABLE_VERSION_CHECK" not in build(flashinfer_disable_version_check=False)["environment"]


def test_cudnn_switch_off_leaves_the_variable_out():
    assert "SGLANG_DISABLE_CUDNN_CHECK" not in build(sglang_disable_cudnn_check=False)["environment"]


def test_extra_env_values_become_strings():
    assert build(extra_env={"HF_HUB_OFFLINE": 1, "RATIO": 0.5})["environment"]["RATIO"] == "0.5"


@pytest.mark.parametrize("threads", [64, 128, 256, 512, "512"])
def test_nccl_nthreads_accepted(threads):
    assert build(nccl_overrides={"NCCL_NTHREADS": threads})["environment"]["NCCL_NTHREADS"] == str(threads)


@pytest.mark.parametrize("threads", [0, 32, 100, 1024, "512 "])
def test_nccl_nthreads_refused(threads):
    assert problems(nccl_overrides={"NCCL_NTHREADS": threads}) == [
        "runtime_env_nccl_overrides.NCCL_NTHREADS: %r is not one of 64, 128, 256, 512" % str(threads)
    ]


@pytest.mark.parametrize("name", ["NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"])
@pytest.mark.parametrize("value", [0, -1, "16M", "1.5", ""])
def test_positive_integer_variables_refuse_other_values(name, value):
    assert problems(nccl_profile="none", nccl_overrides={name: value}) == [
        "runtime_env_nccl_overrides.%s: %r is not a positive integer" % (name, str(value))
    ]


def test_min_channels_above_max_is_refused():
    found = problems(nccl_overrides={"NCCL_MIN_NCHANNELS": 32})
    assert found == [
        "runtime_env_nccl_profile/runtime_env_nccl_overrides: NCCL_MIN_NCHANNELS (32) is larger than "
        "NCCL_MAX_NCHANNELS (16)"
    ]


@pytest.mark.parametrize("value", ["LL", "ll128", "Simple", "LL,LL128", "^LL128", "^ll,simple"])
def test_nccl_proto_accepted(value):
    assert build(nccl_overrides={"NCCL_PROTO": value})["environment"]["NCCL_PROTO"] == value


@pytest.mark.parametrize("value,bad", [("LL256", "LL256"), ("LL,", ""), ("^", ""), ("Simple,Fast", "Fast")])
def test_nccl_proto_refused(value, bad):
    assert problems(nccl_overrides={"NCCL_PROTO": value}) == [
        "runtime_env_nccl_overrides.NCCL_PROTO: %r is not one of LL, LL128, Simple "
        "(comma-separated, case-insensitive, a leading '^' excludes)" % bad
    ]


@pytest.mark.parametrize(
    "value", ["Ring", "tree,ring", "^NVLS", "NVLSTree", "PAT", "CollnetDirect", "CollnetChain",
              "allreduce:tree,ring;broadcast:ring"]
)
def test_nccl_algo_accepted(value):
    assert build(nccl_overrides={"NCCL_ALGO": value})["environment"]["NCCL_ALGO"] == value


@pytest.mark.parametrize("value,bad", [("Star", "Star"), ("allreduce:ring;broadcast:mesh", "mesh"),
                                       # One collective per part: a second ':' is part of the list, and no name.
                                       ("allreduce:ring:tree", "ring:tree")])
def test_nccl_algo_refused(value, bad):
    (problem,) = problems(nccl_overrides={"NCCL_ALGO": value})
    assert problem.startswith("runtime_env_nccl_overrides.NCCL_ALGO: %r is not one of Ring, Tree," % bad)


@pytest.mark.parametrize("value", ["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "sys", 0, 1, 2, 3, 4, 5])
def test_nccl_p2p_level_accepted(value):
    assert build(nccl_overrides={"NCCL_P2P_LEVEL": value})["environment"]["NCCL_P2P_LEVEL"] == str(value)


@pytest.mark.parametrize("value", ["PCIE", 6, "NVLINK"])
def test_nccl_p2p_level_refused(value):
    (problem,) = problems(nccl_overrides={"NCCL_P2P_LEVEL": value})
    assert problem.startswith("runtime_env_nccl_overrides.NCCL_P2P_LEVEL: %r is not one of LOC, NVL," % str(value))


def test_profile_values_are_checked_and_named_by_profile():
    profiles = dict(PROFILES, mine={"NCCL_NTHREADS": 100})
    assert problems(nccl_profile="mine", nccl_profiles=profiles) == [
        "runtime_env_nccl_profiles.mine.NCCL_NTHREADS: '100' is not one of 64, 128, 256, 512"
    ]


def test_unknown_profile_lists_the_known_ones():
    assert problems(nccl_profile="nvlink") == [
        "runtime_env_nccl_profile: 'nvlink' is not a known NCCL profile; known: none, pcie_blackwell, "
        "or auto to choose by the host's GPUs (add one to runtime_env_nccl_profiles)"
    ]


def test_non_nccl_variable_in_overrides_is_refused():
    assert problems(nccl_overrides={"CUDA_VISIBLE_DEVICES": "0"}) == [
        "runtime_env_nccl_overrides.CUDA_VISIBLE_DEVICES: only NCCL_* variables belong here; "
        "put others in runtime_env_extra_env"
    ]


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A B", "", "A=B"])
def test_invalid_variable_names_are_refused(name):
    (problem,) = problems(extra_env={name: "x"})
    assert problem == (
        "runtime_env_extra_env.%s: %r is not a valid environment variable name "
        "(letters, digits and '_', not starting with a digit)" % (name, name)
    )


@pytest.mark.parametrize(
    "name,option",
    [
        ("CUDA_HOME", "set it with runtime_env_cuda_home instead"),
        ("SGLANG_DISABLE_CUDNN_CHECK", "set it with runtime_env_sglang_disable_cudnn_check instead"),
        ("TRITON_PTXAS_PATH", "set it with runtime_env_triton_ptxas_path instead"),
        ("FLASHINFER_DISABLE_VERSION_CHECK", "set it with runtime_env_flashinfer_disable_version_check instead"),
        ("NCCL_DEBUG", "set NCCL variables with runtime_env_nccl_overrides instead"),
    ],
)
def test_extra_env_may_not_set_variables_with_an_option_of_their_own(name, option):
    assert problems(extra_env={name: "x"}) == ["runtime_env_extra_env.%s: %s" % (name, option)]


@pytest.mark.parametrize("value", [True, None, ["a"], {"a": 1}])
def test_values_must_be_strings_or_numbers(value):
    (problem,) = problems(extra_env={"SOME_VAR": value})
    assert problem.startswith("runtime_env_extra_env.SOME_VAR: %r is a " % (value,))
    assert problem.endswith("an environment value must be a string or a number (quote it in YAML)")


def test_cuda_paths_must_be_absolute():
    assert problems(cuda_home="cuda", triton_ptxas_path="bin/ptxas") == [
        "runtime_env_cuda_home: 'cuda' must be an absolute path",
        "runtime_env_triton_ptxas_path: 'bin/ptxas' must be an absolute path",
    ]


def test_force_names_rendered_variables_only():
    assert build(force=["NCCL_PROTO", "NCCL_PROTO", "CUDA_HOME"])["force"] == ["CUDA_HOME", "NCCL_PROTO"]
    (problem,) = problems(force=["NOT_RENDERED"], nccl_profile="none")
    assert problem == ("runtime_env_force: 'NOT_RENDERED' is not a variable this role renders; rendered: CUDA_HOME, "
                       "FLASHINFER_DISABLE_VERSION_CHECK, SGLANG_DISABLE_CUDNN_CHECK, TRITON_PTXAS_PATH")


def test_every_problem_is_reported_at_once():
    found = problems(
        nccl_overrides={"NCCL_NTHREADS": 3, "NCCL_PROTO": "X"},
        extra_env={"BAD NAME": "x"},
        cuda_home="relative",
    )
    assert len(found) == 4


@pytest.mark.parametrize("name", ["SOME_VAR\n", "NCCL_DEBUG\n"])
def test_a_name_with_a_trailing_newline_is_refused(name):
    option = "runtime_env_nccl_overrides" if name.startswith("NCCL_") else "runtime_env_extra_env"
    (problem,) = problems(**{option[len("runtime_env_"):]: {name: "x"}})
    assert problem.startswith("%s.%s" % (option, name))


@pytest.mark.parametrize("value", ["a\nimport os", "a\rb", "a\x1bb", "a\x7fb", "a\x85b", "a\u2028b", "a\0b"])
def test_control_characters_in_values_are_refused_naming_the_variable(value):
    assert problems(extra_env={"SOME_VAR": value}) == [control_character_problem(value, "runtime_env_extra_env.SOME_VAR")]


@pytest.mark.parametrize("name,value", [("NCCL_PROTO", "LL\n"), ("NCCL_DEBUG", "INFO\nX"), ("NCCL_ALGO", "Ring\r")])
def test_control_characters_in_nccl_values_are_refused(name, value):
    assert problems(nccl_overrides={name: value}) == [
        control_character_problem(value, "runtime_env_nccl_overrides.%s" % name)]


def test_control_characters_in_cuda_paths_are_refused():
    assert problems(cuda_home="/usr/local/cuda\nimport os") == [
        control_character_problem("/usr/local/cuda\nimport os", "runtime_env_cuda_home")]


@pytest.mark.parametrize("value", ["\u0661\u0666", "\u00b2", "\uff11\uff16", "1\u00b2"])
@pytest.mark.parametrize("name", ["NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"])
def test_unicode_digits_are_not_a_positive_integer(name, value):
    # str.isdigit() is true for these, and int() fails on some and reads others as ASCII digits.
    assert problems(nccl_profile="none", nccl_overrides={name: value}) == [
        "runtime_env_nccl_overrides.%s: %r is not a positive integer" % (name, value)]


def test_unicode_digits_in_both_channel_bounds_are_messages_not_a_crash():
    found = problems(nccl_profile="none", nccl_overrides={"NCCL_MIN_NCHANNELS": "\u00b2", "NCCL_MAX_NCHANNELS": "\u00b9"})
    assert len(found) == 2 and all("is not a positive integer" in problem for problem in found)


def test_the_virtualenv_path_must_be_absolute():
    assert problems(venv_path="opt/ml-env") == ["runtime_env_venv_path: 'opt/ml-env' must be an absolute path"]


def test_the_virtualenv_path_may_not_hold_a_control_character():
    # It reaches the module's argv and its messages; the rendered text does not name it.
    path = "/opt/ml-env\nimport os"
    assert problems(venv_path=path) == [control_character_problem(path, "runtime_env_venv_path")]


@pytest.mark.parametrize("force", ["CUDA_HOME", [["CUDA_HOME"]], [None], {"CUDA_HOME": 1}])
def test_force_must_be_a_list_of_names(force):
    (problem,) = problems(force=force)
    assert problem.startswith("runtime_env_force: ")


def test_profile_names_of_any_type_are_listed_not_a_crash():
    assert problems(nccl_profile="nvlink", nccl_profiles={1: {}, "none": {}}) == [
        "runtime_env_nccl_profile: 'nvlink' is not a known NCCL profile; known: 1, none, "
        "or auto to choose by the host's GPUs (add one to runtime_env_nccl_profiles)"]


def test_the_virtualenv_path_is_optional_for_the_filter_on_its_own():
    settings = dict(cuda_home="/c", triton_ptxas_path="/c/bin/ptxas", nccl_profile="none", nccl_profiles=PROFILES)
    assert build_environment(**settings)["environment"]["CUDA_HOME"] == "/c"


def test_a_value_already_in_the_environment_wins_unless_its_name_is_forced():
    environ = {"CUDA_HOME": "/opt/cuda", "NCCL_PROTO": "Simple", "UNRELATED": "x"}
    apply_environment(environ, {"CUDA_HOME": "/usr/local/cuda-13.0", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"},
                      frozenset(["NCCL_PROTO"]))
    assert environ == {"CUDA_HOME": "/opt/cuda", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "UNRELATED": "x"}


def test_an_empty_value_in_the_environment_still_wins():
    # Set to "" on purpose is set: only an absent name takes the rendered value.
    environ = {"NCCL_ALGO": ""}
    apply_environment(environ, {"NCCL_ALGO": "Ring"}, frozenset())
    assert environ == {"NCCL_ALGO": ""}


def run_module_code(settings, environ):
    """Execute the code as the rendered module does: its definitions, then the call the template makes."""
    exec(compile(module_code(settings) + "\napply_environment(environ, ENVIRONMENT, FORCE)\n", "<module>", "exec"),
         {"environ": environ})
    return environ


def test_the_module_code_carries_the_values_the_forced_names_and_the_rule():
    settings = build(force=["NCCL_PROTO"], extra_env={"QUOTE": "it's \\ \"x\" \u00e9"})
    environ = run_module_code(settings, {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Tree"})
    assert environ == dict(settings["environment"], NCCL_ALGO="Tree")
    assert environ["NCCL_PROTO"] == "LL" and environ["QUOTE"] == "it's \\ \"x\" \u00e9"


def test_the_error_text_is_one_problem_a_line():
    with pytest.raises(RuntimeEnvError) as raised:
        build(cuda_home="cuda", triton_ptxas_path="ptxas")
    assert str(raised.value).splitlines() == raised.value.problems and len(raised.value.problems) == 2


@pytest.mark.parametrize("name", ["NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"])
def test_one_is_a_positive_integer(name):
    assert build(nccl_profile="none", nccl_overrides={name: 1})["environment"][name] == "1"


def test_profiles_that_are_not_a_mapping_list_no_known_profile():
    assert problems(nccl_profiles=["pcie_blackwell"]) == [
        "runtime_env_nccl_profile: 'pcie_blackwell' is not a known NCCL profile; known: none, "
        "or auto to choose by the host's GPUs (add one to runtime_env_nccl_profiles)"]


def test_extra_env_that_is_not_a_mapping_is_refused():
    assert problems(extra_env=["HF_HUB_OFFLINE=1"]) == [
        "runtime_env_extra_env: must be a mapping of variable names to values"]


def test_a_bad_layer_or_entry_does_not_hide_the_problems_after_it():
    # Every problem at once: a profile that is not a mapping, then overrides with a bad name, a removal and
    # bad values after them, are all reported.
    assert problems(nccl_profile="bad", nccl_profiles={"bad": ["NCCL_PROTO=LL"]},
                    nccl_overrides={"CUDA_VISIBLE_DEVICES": "0", "NCCL_PROTO": None, "NCCL_NTHREADS": 3}) == [
        "runtime_env_nccl_profiles.bad: must be a mapping of NCCL variable names to values",
        "runtime_env_nccl_overrides.CUDA_VISIBLE_DEVICES: only NCCL_* variables belong here; "
        "put others in runtime_env_extra_env",
        "runtime_env_nccl_overrides.NCCL_NTHREADS: '3' is not one of 64, 128, 256, 512"]


def test_the_module_code_is_the_same_text_for_the_same_settings():
    # The text is the rendered file's content: any change to it (indentation, order, escaping) rewrites the module
    # on every host and restarts every server, whose digest covers it.
    code = module_code({"environment": {"NCCL_PROTO": "LL", "HF_HOME": "/srv/hf é"}, "force": ["NCCL_PROTO"]})
    assert code.split("\n\n\n")[0] == (
        'ENVIRONMENT = {\n    "HF_HOME": "/srv/hf é",\n    "NCCL_PROTO": "LL"\n}\nFORCE = frozenset(["NCCL_PROTO"])')


# The converged check: everything runtime_env writes in place and in effect, and each input that changes makes it
# act again.

ENVIRONMENT = {"CUDA_HOME": "/usr/local/cuda-13.0", "NCCL_PROTO": "LL"}
MODULE_TEXT = "ENVIRONMENT = {}\n"
HOOK_TEXT = "import _blackwell_gpu_node_env\n"
FILES = {MODULE_FILE: MODULE_TEXT, HOOK_FILE: HOOK_TEXT}


def converged_observation():
    return {
        "venv": {"in_venv": True, "purelib": "/opt/ml-env/lib/python3.11/site-packages",
                 "hook": "/opt/ml-env/lib/python3.11/site-packages/_blackwell_gpu_node_env.py",
                 "environ": dict(ENVIRONMENT)},
        "files": {name: {"uid": 0, "gid": 0, "mode": 0o644, "content": text} for name, text in FILES.items()},
    }


def test_everything_in_place_is_converged():
    assert unconverged_reasons(converged_observation(), ENVIRONMENT, FILES) == []


@pytest.mark.parametrize("environment", [
    dict(ENVIRONMENT, NCCL_PROTO="Simple"),
    dict(ENVIRONMENT, NCCL_ALGO="Ring"),
    {"CUDA_HOME": "/usr/local/cuda-13.0"},
], ids=["a value changed", "a variable added", "a variable removed"])
def test_a_changed_environment_is_not_converged(environment):
    observed = converged_observation()
    files = dict(FILES, **{MODULE_FILE: json.dumps(environment)})
    observed["venv"]["environ"] = {name: ENVIRONMENT.get(name) for name in environment}
    assert unconverged_reasons(observed, environment, files) != []


def test_a_changed_module_text_alone_is_not_converged():
    # FORCE: an input that only the rendered text shows.
    assert unconverged_reasons(converged_observation(), ENVIRONMENT, dict(FILES, **{MODULE_FILE: "FORCE = 1\n"}))


@pytest.mark.parametrize("change", [
    lambda seen: seen["venv"].update(hook=None),
    lambda seen: seen["venv"].update(hook="/usr/lib/python3/dist-packages/_blackwell_gpu_node_env.py"),
    lambda seen: seen["venv"]["environ"].update(NCCL_PROTO=None),
    lambda seen: seen["files"].pop(MODULE_FILE),
    lambda seen: seen["files"].pop(HOOK_FILE),
    lambda seen: seen["files"][MODULE_FILE].update(mode=0o664),
    lambda seen: seen["files"][HOOK_FILE].update(uid=1000),
    lambda seen: seen["files"][HOOK_FILE].update(gid=1000),
    lambda seen: seen["files"][MODULE_FILE].update(content=MODULE_TEXT + "# edited\n"),
    lambda seen: seen.update(error="the virtualenv's interpreter did not report"),
], ids=["no hook", "another hook", "value not seen", "module missing", "hook missing", "module mode",
        "hook owner", "hook group", "module edited", "not observed"])
def test_a_changed_host_is_not_converged(change):
    observed = converged_observation()
    change(observed)
    assert unconverged_reasons(observed, ENVIRONMENT, FILES) != []


NOBODY = 65534
CLEAN_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def make_venv(root, owner=0, series="3.11"):
    """A virtualenv's layout (pyvenv.cfg, bin/python, lib/pythonX.Y/site-packages), every level owner's."""
    purelib = root / "lib" / ("python" + series) / "site-packages"
    purelib.mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "bin" / "python").write_text("#!/bin/sh\n")
    (root / "bin" / "python").chmod(0o755)
    for path in [root] + list(root.rglob("*")):
        os.chown(str(path), owner, owner)
    return purelib


def reporting(purelib, calls, environ=None, hook=None):
    def run(argv):
        calls.append(argv)
        return 0, json.dumps({"in_venv": True, "prefix": str(purelib.parents[2]), "purelib": str(purelib),
                              "hook": hook, "environ": environ or {}}), ""
    return run


def test_observe_runs_the_interpreter_as_the_owner_in_an_empty_environment(tmp_path):
    purelib = make_venv(tmp_path / "venv", NOBODY)
    calls = []
    observe_venv(str(tmp_path / "venv"), "print(1)", ["CUDA_HOME"], reporting(purelib, calls))
    assert calls == [["runuser", "-u", "nobody", "--", "env", "-i", CLEAN_PATH, str(tmp_path / "venv") + "/bin/python",
                      "-B", "-c", "print(1)", "CUDA_HOME"]]


def test_a_virtualenv_of_roots_alone_is_inspected_as_root():
    assert inspect_argv("/opt/ml-env", 0, "S", ["A", "B"]) == ["env", "-i", CLEAN_PATH, "/opt/ml-env/bin/python",
                                                               "-B", "-c", "S", "A", "B"]


def test_the_owner_is_whoever_owns_the_link_or_what_decides_the_code(tmp_path):
    purelib = make_venv(tmp_path / "ml-env.cu130")
    os.symlink("ml-env.cu130", str(tmp_path / "ml-env"))
    os.chown(str(tmp_path / "ml-env"), NOBODY, NOBODY, follow_symlinks=False)
    calls = []
    observed = observe_venv(str(tmp_path / "ml-env"), "", [], reporting(purelib, calls))
    assert calls[0][:4] == ["runuser", "-u", "nobody", "--"]
    # The link is nobody's, the directory it names root's: root renders into none but the owner's own tree.
    assert "belongs to root, not to the virtualenv's owner nobody" in observed["error"]


def test_observe_returns_the_report_and_each_files_owner_mode_and_text(tmp_path):
    purelib = make_venv(tmp_path / "venv", NOBODY)
    (purelib / MODULE_FILE).write_text(MODULE_TEXT)
    (purelib / MODULE_FILE).chmod(0o640)
    observed = observe_venv(str(tmp_path / "venv"), "", [], reporting(purelib, []))
    assert observed["files"] == {MODULE_FILE: {"uid": 0, "gid": 0, "mode": 0o640, "content": MODULE_TEXT}}
    assert (observed["owner"], observed["site_packages"], observed["not_regular"]) == (
        NOBODY, "lib/python3.11/site-packages", [])


def test_links_fifos_and_huge_files_at_the_destinations_are_never_read_and_are_refused(tmp_path):
    purelib = make_venv(tmp_path / "venv", NOBODY)
    (purelib / MODULE_FILE).symlink_to("/etc/shadow")
    os.mkfifo(str(purelib / HOOK_FILE))
    observed = observe_venv(str(tmp_path / "venv"), "", [], reporting(purelib, []))
    assert observed["files"] == {} and sorted(observed["not_regular"]) == [HOOK_FILE, MODULE_FILE]
    with pytest.raises(VenvRefused) as refused:
        to_write(str(tmp_path / "venv"), observed, FILES)
    assert str(refused.value).startswith("%s/%s, %s/%s in the virtualenv runtime_env_venv_path=%s are not a regular "
                                         "file" % (purelib, HOOK_FILE, purelib, MODULE_FILE, tmp_path / "venv"))
    (purelib / HOOK_FILE).unlink()
    with open(str(purelib / HOOK_FILE), "wb") as sparse:
        sparse.truncate(8 << 30)
    observed = observe_venv(str(tmp_path / "venv"), "", [], reporting(purelib, []))
    assert HOOK_FILE in observed["not_regular"]


def test_an_interpreter_that_names_another_site_packages_is_refused(tmp_path):
    purelib = make_venv(tmp_path / "venv", NOBODY)
    lying = tmp_path / "usr" / "lib" / "python3" / "dist-packages"
    lying.mkdir(parents=True)
    observed = observe_venv(str(tmp_path / "venv"), "", [], reporting(lying, []))
    assert observed["error"].startswith("the interpreter of runtime_env_venv_path=%s says its site-packages is %s, "
                                        "not the virtualenv's own lib/python3.N/site-packages" % (tmp_path / "venv",
                                                                                                  lying))
    assert purelib.exists()


@pytest.mark.parametrize("purelib, expected", [
    ("/home/s/ml-env/lib/python3.11/site-packages", "lib/python3.11/site-packages"),
    ("/home/s/ml-env.cu130-1a2b3c4d/lib/python3.12/site-packages", "lib/python3.12/site-packages"),
    ("/home/s/ml-env/lib/python3.11/site-packages/../../../..", None),
    ("/home/s/ml-env/lib/python3.11/site-packages/x", None),
    ("/home/s/ml-env/lib/python3/dist-packages", None),
    ("/home/s/ml-envX/lib/python3.11/site-packages", None),
    ("/usr/lib/python3/dist-packages", None),
    (None, None),
])
def test_only_the_virtualenvs_own_site_packages_is_accepted(purelib, expected):
    assert site_packages_below("/home/s/ml-env/", "/home/s/ml-env.cu130-1a2b3c4d", purelib) == expected


def test_a_level_of_another_users_is_refused(tmp_path):
    purelib = make_venv(tmp_path / "venv", NOBODY)
    os.chown(str(purelib), 1, 1)
    observed = observe_venv(str(tmp_path / "venv"), "", [], reporting(purelib, []))
    assert "lib/python3.11/site-packages below the virtualenv belongs to another user" in observed["error"]


def test_render_writes_roots_files_through_the_directory_and_never_through_a_swapped_level(tmp_path):
    venv = tmp_path / "venv"
    purelib = make_venv(venv, NOBODY)
    observed = observe_venv(str(venv), "", [], reporting(purelib, []))
    written = []
    render(str(venv), observed, FILES, to_write(str(venv), observed, FILES), written)
    assert written == [HOOK_FILE, MODULE_FILE]
    for name, text in FILES.items():
        info = os.lstat(str(purelib / name))
        assert (info.st_uid, info.st_gid, info.st_mode & 0o7777, (purelib / name).read_text()) == (0, 0, 0o644, text)
    # Between the look and the write the owner swaps site-packages for a link to a directory root's Python reads.
    elsewhere = tmp_path / "dist-packages"
    elsewhere.mkdir()
    (purelib / HOOK_FILE).unlink()
    os.rename(str(purelib), str(tmp_path / "moved"))
    os.symlink(str(elsewhere), str(purelib))
    with pytest.raises(VenvRefused):
        render(str(venv), observed, FILES, [HOOK_FILE], [])
    assert list(elsewhere.iterdir()) == []


def test_a_virtualenv_that_is_not_one_is_refused_naming_the_variable(tmp_path):
    venv = tmp_path / "venv"
    assert observe_venv(str(venv), "", [], reporting(tmp_path, [])) == {
        "error": "venv_path=%s: No such file or directory" % venv}
    make_venv(venv)
    (venv / "bin" / "python").unlink()
    assert observe_venv(str(venv), "", [], reporting(tmp_path, []))["error"].startswith(
        "runtime_env_venv_path=%s is not a virtualenv: it needs pyvenv.cfg (found) and an executable bin/python "
        "(missing)" % venv)
    (venv / "bin" / "python").write_text("")
    (venv / "bin" / "python").chmod(0o755)
    failing = observe_venv(str(venv), "", [], lambda argv: (1, "", "boom\n"))
    assert failing == {"error": "the virtualenv's interpreter did not report (exit status 1): boom"}


def test_a_virtualenv_whose_owner_has_no_user_is_refused(tmp_path):
    make_venv(tmp_path / "venv", 4242)
    assert observe_venv(str(tmp_path / "venv"), "", [], reporting(tmp_path, []))["error"].startswith(
        "runtime_env_venv_path belongs to uid 4242, which has no user on this host")


def test_each_unconverged_reason_says_what_differs():
    observed = converged_observation()
    observed["venv"].update(hook=None)
    observed["venv"]["environ"]["NCCL_PROTO"] = "Simple"
    observed["files"][MODULE_FILE].update(content="edited")
    observed["files"][HOOK_FILE].update(mode=0o664)
    assert unconverged_reasons(observed, dict(ENVIRONMENT, NCCL_ALGO="Ring"), FILES) == [
        "the hook does not import the environment module "
        "/opt/ml-env/lib/python3.11/site-packages/_blackwell_gpu_node_env.py (imported: None)",
        "NCCL_ALGO is None, not 'Ring'",
        "NCCL_PROTO is 'Simple', not 'LL'",
        "00-blackwell-gpu-node-env.pth is not root's with mode 0644",
        "_blackwell_gpu_node_env.py differs from what the role renders",
    ]
    observed["files"].pop(HOOK_FILE)
    assert "00-blackwell-gpu-node-env.pth is missing or not a regular file" in unconverged_reasons(
        observed, ENVIRONMENT, FILES)


def test_the_proof_names_every_variable_that_does_not_take_effect_and_a_foreign_hook():
    module = "/v/lib/python3.11/site-packages/" + MODULE_FILE
    seen = {"hook": module, "environ": dict(ENVIRONMENT)}
    assert effect_problem(seen, "/v", ENVIRONMENT, module) is None
    seen = {"hook": "/elsewhere/" + MODULE_FILE, "environ": dict(ENVIRONMENT, NCCL_PROTO="Simple")}
    assert effect_problem(seen, "/v", ENVIRONMENT, module) == (
        "The rendered environment does not take effect in /v. The hook did not import %s (it imported "
        "/elsewhere/%s): is the interpreter started with -S, or are .pth files disabled? Variables missing or "
        "different (expected -> seen): NCCL_PROTO=LL -> Simple. Something that runs after the hook (a "
        "sitecustomize.py, another .pth file) may overwrite them." % (module, MODULE_FILE))


def test_an_interpreter_that_does_not_report_names_the_startup_files_that_hang_or_never_end(tmp_path):
    purelib = make_venv(tmp_path / "venv", NOBODY)
    os.mkfifo(str(purelib / "00-blackwell-gpu-node-env.pth"))
    os.symlink("/dev/zero", str(purelib / "zz.pth"))
    (purelib / "fine.pth").write_text("import os\n")
    failing = observe_venv(str(tmp_path / "venv"), "", [], lambda argv: (-9, "", "killed\n"))
    assert failing["error"].startswith("the virtualenv's interpreter did not report (exit status -9): killed. It "
                                       "reads every .pth file of site-packages whole as it starts")
    assert failing["error"].endswith(": %s/00-blackwell-gpu-node-env.pth, %s/zz.pth; find out who put them there "
                                     "and remove them" % (purelib, purelib))


CU130 = {"name": "cu130", "cuda": {"version": "13.0.1"}, "python": {"torch": {"version": "2.9.1+cu130", "cuda": "13.0"}}}
CACHE_ROOT = "/var/lib/sglang/.cache/blackwell-gpu-node"
HF_HOME = "/var/lib/sglang/.cache/huggingface"


def build_cached(**changes):
    settings = dict(cache_root=CACHE_ROOT, hf_home=HF_HOME, stack_profile=CU130)
    settings.update(changes)
    return build(**settings)


def test_the_jit_caches_and_hf_home_are_rendered_beside_the_rest():
    built = build_cached()
    (profile_directory,) = [path for path in built["cache"]["directories"] if "/" not in path]
    assert profile_directory.startswith("cu130-") and built["cache"]["root"] == CACHE_ROOT
    cached = dict((name, value) for name, value in built["environment"].items()
                  if value.startswith(CACHE_ROOT + "/" + profile_directory + "/"))
    assert sorted(cached) == sorted(CACHE_VARIABLES)
    assert cached["FLASHINFER_WORKSPACE_BASE"] == "%s/%s/flashinfer" % (CACHE_ROOT, profile_directory)
    assert built["environment"]["HF_HOME"] == HF_HOME
    assert dict((name, built["environment"][name]) for name in build()["environment"]) == build()["environment"]


def test_two_profiles_whose_torch_differs_render_into_two_directories():
    other = dict(CU130, python={"torch": {"version": "2.11.0", "cuda": "13.0"}})
    first, second = build_cached()["environment"], build_cached(stack_profile=other)["environment"]
    assert first["TRITON_CACHE_DIR"] != second["TRITON_CACHE_DIR"]
    assert first["HF_HOME"] == second["HF_HOME"]
    assert build_cached()["environment"] == first


def test_without_a_cache_root_nor_hf_home_nothing_of_theirs_is_rendered():
    built = build_cached(cache_root=None, hf_home=None)
    assert built["environment"] == build()["environment"] and built["cache"] == {"root": None, "directories": []}


@pytest.mark.parametrize("name, option", [("XDG_CACHE_HOME", "runtime_env_cache_root"),
                                          ("FLASHINFER_WORKSPACE_BASE", "runtime_env_cache_root"),
                                          ("HF_HOME", "runtime_env_hf_home")])
def test_extra_env_may_not_set_what_the_cache_options_render(name, option):
    with pytest.raises(RuntimeEnvError) as raised:
        build_cached(extra_env={name: "/srv/x"})
    assert raised.value.problems == ["runtime_env_extra_env.%s: %s renders it; set that instead, or set %s to null "
                                     "to set %s here" % (name, option, option, name)]


def test_with_its_option_null_extra_env_sets_it():
    environment = build_cached(cache_root=None, hf_home=None,
                               extra_env={"XDG_CACHE_HOME": "/srv/x", "HF_HOME": "/srv/hf"})["environment"]
    assert (environment["XDG_CACHE_HOME"], environment["HF_HOME"]) == ("/srv/x", "/srv/hf")


def test_bad_cache_settings_are_reported_with_every_other_problem():
    with pytest.raises(RuntimeEnvError) as raised:
        build_cached(cache_root="/srv/jit caches", hf_home="hf", stack_profile={"name": "cu130"},
                     cuda_home="cuda")
    assert [problem.split(" ")[0] for problem in raised.value.problems] == [
        "runtime_env_cuda_home:", "runtime_env_cache_root='/srv/jit", "stack_selected", "runtime_env_hf_home='hf'"]


def test_the_rendered_module_is_the_same_whichever_virtualenv_it_is_rendered_into():
    # The upgrade renders into the target's own virtualenv, site through the stable link: the cache paths come from
    # the profile and the inventory alone.
    assert module_code(build_cached(venv_path="/var/lib/sglang/venvs/cu130")) == module_code(
        build_cached(venv_path="/var/lib/sglang/ml-env"))
