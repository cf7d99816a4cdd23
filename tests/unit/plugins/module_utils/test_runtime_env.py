import ast
import json
import os
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    HOOK_FILE,
    INSPECT_PATH,
    MODULE_FILE,
    RuntimeEnvError,
    apply_environment,
    build_environment,
    inspect_argv,
    module_code,
    observe_venv,
    unconverged_reasons,
    venv_owner,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

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
    # It is written into a comment of the rendered Python module: a newline there would start a statement.
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
    # ansible_managed, the venv path in its comment, FORCE: inputs that only the rendered text shows.
    assert unconverged_reasons(converged_observation(), ENVIRONMENT, dict(FILES, **{MODULE_FILE: "FORCE = 1\n"}))


@pytest.mark.parametrize("change", [
    lambda seen: seen["venv"].update(in_venv=False),
    lambda seen: seen["venv"].update(hook=None),
    lambda seen: seen["venv"]["environ"].update(NCCL_PROTO=None),
    lambda seen: seen["files"].pop(MODULE_FILE),
    lambda seen: seen["files"].pop(HOOK_FILE),
    lambda seen: seen["files"][MODULE_FILE].update(mode=0o664),
    lambda seen: seen["files"][HOOK_FILE].update(uid=1000),
    lambda seen: seen["files"][HOOK_FILE].update(gid=1000),
    lambda seen: seen["files"][MODULE_FILE].update(content=MODULE_TEXT + "# edited\n"),
    lambda seen: seen.update(error="the virtualenv's interpreter did not report"),
], ids=["not a venv", "no hook", "value not seen", "module missing", "hook missing", "module mode",
        "hook owner", "hook group", "module edited", "not observed"])
def test_a_changed_host_is_not_converged(change):
    observed = converged_observation()
    change(observed)
    assert unconverged_reasons(observed, ENVIRONMENT, FILES) != []


def make_venv(root, owner_uid=0):
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "bin" / "python").write_text("#!/bin/sh\n")
    (root / "bin" / "python").chmod(0o755)
    purelib = root / "lib" / "site-packages"
    purelib.mkdir(parents=True)
    return purelib


def reporting(purelib, calls):
    def run(argv):
        calls.append(argv)
        return 0, json.dumps({"in_venv": True, "purelib": str(purelib), "hook": None, "environ": {}}), ""
    return run


def test_observe_runs_the_interpreter_as_the_owner_in_an_empty_environment(tmp_path):
    purelib = make_venv(tmp_path / "venv")
    (purelib / HOOK_FILE).write_text(HOOK_TEXT)
    (purelib / MODULE_FILE).symlink_to(purelib / HOOK_FILE)
    calls = []
    observed = observe_venv(str(tmp_path / "venv"), "print(1)", ["CUDA_HOME"], reporting(purelib, calls),
                            lambda uid: "mlserve")
    owner = os.getuid()
    assert calls == [(["runuser", "-u", "mlserve", "--"] if owner else [])
                     + ["env", "-i", INSPECT_PATH, str(tmp_path / "venv") + "/bin/python", "-B", "-c", "print(1)",
                        "CUDA_HOME"]]
    # A link at a destination is never read through: the role replaces it.
    assert set(observed["files"]) == {HOOK_FILE}
    assert observed["files"][HOOK_FILE]["content"] == HOOK_TEXT


def test_observe_reports_what_preflight_refuses(tmp_path):
    assert "error" in observe_venv(str(tmp_path / "absent"), "", [], reporting(tmp_path, []), lambda uid: "x")
    (tmp_path / "plain").mkdir()
    assert "error" in observe_venv(str(tmp_path / "plain"), "", [], reporting(tmp_path, []), lambda uid: "x")
    make_venv(tmp_path / "venv")
    failing = observe_venv(str(tmp_path / "venv"), "", [], lambda argv: (1, "", "boom\n"), lambda uid: "x")
    assert failing == {"error": "the virtualenv's interpreter did not report (exit status 1): boom"}


def test_the_owner_is_the_first_of_link_and_directory_that_is_not_roots():
    class Stat:
        def __init__(self, uid):
            self.st_uid = uid
    names = {1000: "mlserve"}
    assert venv_owner([Stat(0), Stat(1000)], names.get) == (1000, "mlserve")
    assert venv_owner([Stat(1001), Stat(1000)], names.get) == (1001, None)
    assert venv_owner([Stat(0), Stat(0)], names.get) == (0, "root")


# What the role's own tasks name (vars/main.yml): the core's constants must be the same names and argv.

ROLE_VARS = Path(__file__).resolve().parents[4] / "roles" / "runtime_env" / "vars" / "main.yml"


def role_vars():
    return yaml.safe_load(ROLE_VARS.read_text())


def test_the_files_observed_are_the_files_the_role_writes():
    variables = role_vars()
    assert variables["__runtime_env_module_dest"] == "{{ __runtime_env_venv.purelib }}/" + MODULE_FILE
    assert variables["__runtime_env_hook_dest"] == "{{ __runtime_env_venv.purelib }}/" + HOOK_FILE


@pytest.mark.parametrize("owner", [{"uid": 1000, "pw_name": "mlserve"}, {"uid": 0, "pw_name": "root"}])
def test_the_inspection_argv_is_the_roles(owner):
    variables = role_vars()
    render = jinja2.Environment().from_string
    as_owner = render(variables["__runtime_env_as_owner"]).render(__runtime_env_owner=owner)
    expected = render("{{ %s | list }}" % variables["__runtime_env_inspect_argv"].strip()[2:-2]).render(
        __runtime_env_as_owner=ast.literal_eval(as_owner), runtime_env_venv_path="/opt/ml-env",
        lookup=lambda kind, name: "SCRIPT", __runtime_env_settings={"environment": {"CUDA_HOME": "/c"}})
    assert inspect_argv("/opt/ml-env", owner["uid"], owner["pw_name"], "SCRIPT", ["CUDA_HOME"]) \
        == ast.literal_eval(expected)


def test_the_inspection_runs_as_a_non_root_owner_through_runuser():
    assert inspect_argv("/opt/ml-env", 1000, "mlserve", "S", ["A", "B"]) == [
        "runuser", "-u", "mlserve", "--", "env", "-i",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "/opt/ml-env/bin/python", "-B", "-c", "S", "A", "B"]


def test_each_unconverged_reason_says_what_differs():
    observed = converged_observation()
    observed["venv"].update(in_venv=False, hook=None)
    observed["venv"]["environ"]["NCCL_PROTO"] = "Simple"
    observed["files"][MODULE_FILE].update(content="edited")
    observed["files"][HOOK_FILE].update(mode=0o664)
    assert unconverged_reasons(observed, dict(ENVIRONMENT, NCCL_ALGO="Ring"), FILES) == [
        "the interpreter does not run as a virtualenv",
        "the hook does not import the environment module",
        "NCCL_ALGO is None, not 'Ring'",
        "NCCL_PROTO is 'Simple', not 'LL'",
        "00-blackwell-gpu-node-env.pth is not root's with mode 0644",
        "_blackwell_gpu_node_env.py differs from what the role renders",
    ]
    observed["files"].pop(HOOK_FILE)
    assert "00-blackwell-gpu-node-env.pth is missing or not a regular file" in unconverged_reasons(
        observed, ENVIRONMENT, FILES)


def test_observe_returns_the_report_and_each_files_owner_mode_and_text(tmp_path):
    purelib = make_venv(tmp_path / "venv")
    (purelib / MODULE_FILE).write_text(MODULE_TEXT)
    (purelib / MODULE_FILE).chmod(0o640)
    observed = observe_venv(str(tmp_path / "venv"), "", [], reporting(purelib, []), lambda uid: "mlserve")
    assert observed == {
        "venv": {"in_venv": True, "purelib": str(purelib), "hook": None, "environ": {}},
        "files": {MODULE_FILE: {"uid": os.getuid(), "gid": os.getgid(), "mode": 0o640, "content": MODULE_TEXT}},
    }


def test_observe_names_the_variable_and_the_reason_it_refuses(tmp_path):
    venv = tmp_path / "venv"
    assert observe_venv(str(venv), "", [], reporting(tmp_path, []), lambda uid: "x") == {
        "error": "runtime_env_venv_path=%s: No such file or directory" % venv}
    make_venv(venv)
    (venv / "bin" / "python").unlink()
    # pyvenv.cfg alone is not a virtualenv: its interpreter must be there too.
    assert observe_venv(str(venv), "", [], reporting(tmp_path, []), lambda uid: "x") == {
        "error": "runtime_env_venv_path=%s is not a virtualenv" % venv}


def test_observe_refuses_a_virtualenv_whose_owner_has_no_user(tmp_path, monkeypatch):
    make_venv(tmp_path / "venv")
    real_stat = os.stat

    def stat_owned_by_4242(path, *args, **kwargs):
        found = real_stat(path, *args, **kwargs)
        return os.stat_result((found.st_mode, found.st_ino, found.st_dev, found.st_nlink, 4242) + tuple(found)[5:])
    monkeypatch.setattr(os, "lstat", stat_owned_by_4242)
    assert observe_venv(str(tmp_path / "venv"), "", [], reporting(tmp_path, []), lambda uid: None) == {
        "error": "the virtualenv belongs to uid 4242, which has no user"}
