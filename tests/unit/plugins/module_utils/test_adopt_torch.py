"""Adopting a host's torch into a stack profile's virtualenv: the decision, and the pieces of the plan."""
import json
import os
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import CLEAN_PATH
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import (
    PTH_NAME,
    decide,
    inside_argv,
    inspect_argv,
    inspected_state,
    interpreter,
    level_state,
    levels,
    looked_at,
    parse_inside,
    skip_plan,
    torch_from_problems,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
# PyPI's torch 2.11.0 is the CUDA 13.0 build.
SGLANG_0_5_17 = resolve("sglang-0.5.17-cu130", PROFILES)
VENV = "/opt/torch/.venv"
SITE = VENV + "/lib/python3.12/site-packages"


def report(**changes):
    """What inspect_torch.py prints for a virtualenv with download.pytorch.org's torch 2.11.0+cu130."""
    base = {"executable": VENV + "/bin/python", "python": "3.12.3", "path": VENV, "candidates": [SITE],
            "site_packages": SITE, "distributions": {"torch": "2.11.0+cu130", "nvidia-cudnn-cu13": "9.19.0.56"},
            "distributions_complete": True, "torch_distribution": "2.11.0+cu130",
            "import": {"ok": True, "version": "2.11.0+cu130", "cuda": "13.0", "file": SITE + "/torch/__init__.py",
                       "extension": True, "cudnn": 91900, "nccl": "2.28.9"}}
    base.update(changes)
    return base


def root_dir(mode="0755"):
    return {"exists": True, "isdir": True, "islnk": False, "uid": 0, "pw_name": "root", "mode": mode}


def stats(path=SITE, **special):
    """ansible.builtin.stat's stat of each level of path: root's 0755 directories, but for those given."""
    return [special.get(level, root_dir()) for level in levels(path)]


def adopt(profile=None, torch_from=VENV, inspected=None, seen=None, inside=None, python="3.12.3"):
    profile = SGLANG_0_5_17 if profile is None else profile
    inspected = report() if inspected is None else inspected
    return decide(profile, torch_from, inspected, stats(looked_at(torch_from, inspected)) if seen is None else seen,
                  inside, python)


def test_a_cuda_13_0_torch_of_the_profiles_release_matches_whatever_its_local_label():
    result = adopt()
    assert (result["decision"], result["ok"], result["problems"]) == ("match", True, [])
    assert result["pth"] == {"name": PTH_NAME, "content": SITE + "\n"}
    assert result["site_packages"] == SITE
    assert result["distributions"] == {"torch": "2.11.0+cu130", "nvidia-cudnn-cu13": "9.19.0.56"}
    assert result["torch"]["distribution"] == "2.11.0+cu130" and result["torch"]["cudnn"] == 91900
    assert adopt(inspected=report(torch_distribution="2.11.0"))["ok"] is True


def test_another_torch_release_is_refused_naming_both_versions_and_the_variable():
    result = adopt(inspected=report(torch_distribution="2.10.0+cu130"))
    assert result["decision"] == "version_mismatch" and "pth" not in result
    assert result["problems"] == [
        "ml_stack_torch_from=/opt/torch/.venv has torch 2.10.0+cu130, stack profile sglang-0.5.17-cu130 wants torch "
        "2.11.0 (stack_profiles.sglang-0.5.17-cu130.python.torch.version): adopt a tree with torch 2.11.0, or set "
        "ml_stack_torch_from to null to install it"]


def test_a_torch_built_for_another_cuda_is_refused_naming_both_and_the_variable():
    imported = dict(report()["import"], version="2.11.0+cu128", cuda="12.8")
    result = adopt(inspected=report(torch_distribution="2.11.0+cu128", **{"import": imported}))
    assert result["decision"] == "cuda_mismatch"
    assert result["problems"] == [
        "ml_stack_torch_from=/opt/torch/.venv has torch 2.11.0+cu128 built for CUDA 12.8 (torch.version.cuda), stack "
        "profile sglang-0.5.17-cu130 wants CUDA 13.0 (stack_profiles.sglang-0.5.17-cu130.python.torch.cuda): adopt a "
        "torch built for CUDA 13.0, or set ml_stack_torch_from to null to install the profile's"]


def test_a_torch_that_does_not_import_is_refused_with_its_error():
    error = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    result = adopt(inspected=report(**{"import": {"ok": False, "error": error}}))
    assert result["decision"] == "not_importable"
    assert result["problems"] == [
        "ml_stack_torch_from=/opt/torch/.venv: import torch fails for the service user: %s. Make the tree importable "
        "(the service user must read it; the libraries it loads must be there), or set ml_stack_torch_from to null"
        % error]


def test_a_virtualenv_the_service_user_could_write_is_refused_naming_the_path_its_owner_and_mode():
    theirs = dict(root_dir(), uid=999, pw_name="sglang")
    result = adopt(seen=stats(**{VENV: theirs}))
    assert result["decision"] == "untrusted" and result["ok"] is False
    assert result["problems"] == [
        "/opt/torch/.venv belongs to sglang (uid 999, mode 0755), not to root: chown root: /opt/torch/.venv; chmod "
        "go-w /opt/torch/.venv, or adopt a tree that only root can change (the service user runs it, and every "
        "profile that adopts it loads it)"]


def test_a_group_writable_parent_directory_is_refused():
    result = adopt(seen=stats(**{"/opt/torch": root_dir("0775")}))
    assert result["decision"] == "untrusted"
    assert result["problems"] == [
        "/opt/torch is writable by its group or others (owner root, mode 0775): chown root: /opt/torch; chmod go-w "
        "/opt/torch, or adopt a tree that only root can change (the service user runs it, and every profile that "
        "adopts it loads it)"]


def test_an_entry_inside_the_tree_that_another_user_could_change_is_refused():
    theirs = parse_inside(0, SITE + "/torch/__init__.py\tsglang\t999\t644\n", "")
    writable = parse_inside(0, SITE + "/torch\troot\t0\t777\n", "")
    assert adopt(inside=theirs)["problems"] == [
        "%s/torch/__init__.py, in the adopted tree /opt/torch/.venv, belongs to another user than root (owner sglang, "
        "uid 999, mode 644): chown -R root: /opt/torch/.venv; chmod -R go-w /opt/torch/.venv, or adopt a tree that "
        "only root can change" % SITE]
    assert "is writable by its group or others (owner root, uid 0, mode 777)" in adopt(inside=writable)["problems"][0]


def test_a_tree_that_find_could_not_walk_whole_is_refused_unless_a_level_says_why_already():
    unwalked = parse_inside(1, "", "find: '/opt/torch/.venv/lib': Permission denied\n")
    assert adopt(inside=unwalked)["problems"] == [
        "/opt/torch/.venv could not be walked whole, so it is not known that only root can change it: find: "
        "'/opt/torch/.venv/lib': Permission denied"]
    missing = dict(root_dir(), exists=False)
    result = adopt(inspected={"error": "No such file or directory"}, seen=stats(VENV, **{VENV: missing}),
                   inside=parse_inside(1, "", "find: '/opt/torch/.venv': No such file or directory"))
    assert result["problems"] == [
        "/opt/torch/.venv does not exist: fix ml_stack_torch_from",
        "ml_stack_torch_from=/opt/torch/.venv could not be inspected as the service user: No such file or directory"]


def test_a_link_on_the_way_is_refused_and_the_levels_below_it_are_not_weighed():
    link = dict(root_dir(), islnk=True, isdir=False, lnk_source="/srv/torch", uid=999)
    assert adopt(seen=stats(**{"/opt/torch": link}))["problems"] == [
        "/opt/torch is a symbolic link (to /srv/torch): name the tree by its real path in ml_stack_torch_from, whose "
        "every level root owns"]


def test_a_tree_of_another_python_is_refused():
    result = adopt(python="3.11.2")
    assert result["decision"] == "python_mismatch"
    assert result["problems"] == [
        "ml_stack_torch_from=/opt/torch/.venv is for Python 3.12.3, the profile's virtualenv is made with Python "
        "3.11.2 (ml_stack_python): torch's extension modules load in one Python X.Y only; adopt a tree of Python "
        "3.11, or set ml_stack_python to an interpreter of 3.12"]


def test_a_path_that_is_neither_a_virtualenv_nor_a_site_packages_directory_is_refused():
    result = adopt(torch_from="/opt/torch", inspected=report(path="/opt/torch", site_packages=None))
    assert result["decision"] == "not_importable"
    assert result["problems"] == [
        "ml_stack_torch_from=/opt/torch is neither a virtualenv nor a site-packages directory of "
        "/opt/torch/.venv/bin/python (its site-packages: %s): name one of them" % SITE]


def test_a_tree_without_torch_and_a_torch_imported_from_elsewhere_are_refused():
    assert "has no torch distribution in %s" % SITE in adopt(inspected=report(torch_distribution=None))["problems"][0]
    elsewhere = dict(report()["import"], file="/usr/lib/python3/dist-packages/torch/__init__.py")
    assert adopt(inspected=report(**{"import": elsewhere}))["problems"] == [
        "ml_stack_torch_from=/opt/torch/.venv: import torch takes /usr/lib/python3/dist-packages/torch/__init__.py, "
        "not the torch of %s: remove the other torch from the interpreter's path" % SITE]


def test_the_system_interpreters_site_packages_is_adopted_as_it_is():
    system = "/usr/lib/python3/dist-packages"
    inspected = report(executable="/usr/bin/python3", path=system, site_packages=system,
                       candidates=["/usr/local/lib/python3.12/dist-packages", system],
                       **{"import": dict(report()["import"], file=system + "/torch/__init__.py")})
    result = adopt(torch_from=system, inspected=inspected)
    assert result["ok"] is True and result["pth"]["content"] == system + "\n"


def test_a_site_packages_path_that_would_add_a_line_to_the_pth_file_is_refused():
    odd = SITE + "\nimport os"
    inspected = report(site_packages=odd)
    result = decide(SGLANG_0_5_17, VENV, inspected, stats(odd), None, "3.12.3")
    assert result["decision"] == "untrusted" and "pth" not in result
    assert result["problems"][-1].startswith("the adopted site-packages: the value holds the control character U+000A")


def test_what_the_script_printed_or_why_it_printed_nothing_usable():
    assert inspected_state(0, json.dumps(report()), "") == report()
    assert inspected_state(1, "", "Traceback\n  ...\nPermissionError: [Errno 13] Permission denied: '/opt/torch'\n") == {
        "error": "PermissionError: [Errno 13] Permission denied: '/opt/torch'"}
    assert inspected_state(126, "", "") == {"error": "exit status 126 and no error text"}
    assert inspected_state(0, "[1]", "") == {"error": "it printed no JSON object: [1]"}
    assert inspected_state(0, "x" * (1 << 21), "") == {"error": "it printed more than 1048576 bytes"}
    assert looked_at(VENV, {"error": "x"}) == VENV and looked_at(VENV, report()) == SITE


def test_an_inspection_that_failed_is_refused_after_the_levels_of_the_named_path():
    result = adopt(inspected={"error": "PermissionError: [Errno 13] Permission denied: '/opt/torch'"})
    assert result["decision"] == "not_importable" and result["site_packages"] is None
    assert result["problems"] == ["ml_stack_torch_from=/opt/torch/.venv could not be inspected as the service user: "
                                  "PermissionError: [Errno 13] Permission denied: '/opt/torch'"]


def test_stats_that_do_not_match_the_levels_are_a_callers_mistake():
    with pytest.raises(ValueError):
        decide(SGLANG_0_5_17, VENV, report(), stats()[:-1], None, "3.12.3")


def test_levels_and_the_interpreter():
    assert levels("/opt/torch/.venv/") == ["/", "/opt", "/opt/torch", "/opt/torch/.venv"]
    assert levels("/") == ["/"]
    assert interpreter(VENV, True, "/usr/bin/python3") == VENV + "/bin/python"
    assert interpreter("/usr/lib/python3/dist-packages", False, "/usr/bin/python3") == "/usr/bin/python3"


@pytest.mark.parametrize("stdout, found", [
    ("/t/a\tsglang\t999\t644\n/t/b\troot\t0\t777\n", {"path": "/t/a", "owner": "sglang", "uid": 999, "mode": "644"}),
    ("/t/with\ttab\troot\t0\t775\n", {"path": "/t/with\ttab", "owner": "root", "uid": 0, "mode": "775"}),
    ("", None),
    ("/t/a\tsglang\t\u00b2\t644\n", None),
])
def test_the_first_entry_find_printed(stdout, found):
    assert parse_inside(0, stdout, "") == found


@pytest.mark.parametrize("value, problem", [
    (None, None),
    (VENV, None),
    ("/usr/lib/python3/dist-packages/", None),
    ("opt/torch", "ml_stack_torch_from='opt/torch' is not the absolute path of a virtualenv (like /opt/torch/.venv) "
                  "or of a site-packages directory: name one, or set it to null to install the profile's torch"),
    ("/", "ml_stack_torch_from='/' is not the absolute path"),
    (5, "ml_stack_torch_from=5 is not the absolute path"),
    ("/opt/torch/../venv", "ml_stack_torch_from=/opt/torch/../venv holds '.' or '..': name the tree by its own path"),
    ("/opt/torch\n/.venv", "ml_stack_torch_from: the value holds the control character U+000A"),
])
def test_what_ml_stack_torch_from_may_name(value, problem):
    problems = torch_from_problems(value)
    assert problems == [] if problem is None else (len(problems) == 1 and problems[0].startswith(problem))


LOCK = {"distributions": {
    "torch": {"version": "2.11.0", "requires": ["nvidia-cudnn-cu13", "triton", "filelock"]},
    "nvidia-cudnn-cu13": {"version": "9.19.0.56", "requires": []},
    "triton": {"version": "3.6.0", "requires": []},
    "nvidia-nvshmem-cu13": {"version": "3.4.5", "requires": []},
}}


def test_the_lock_distributions_the_tree_stands_in_for_and_those_whose_versions_differ():
    closure = ["nvidia-cudnn-cu13", "nvidia-nvshmem-cu13", "torch", "triton"]
    tree = {"torch": "2.11.0+cu130", "nvidia_cudnn_cu13": "9.19.0.56", "Triton": "3.5.1", "numpy": "2.3.4"}
    assert skip_plan(closure, tree, LOCK) == {
        "skip": ["nvidia-cudnn-cu13", "torch", "triton"],
        "versions": {"nvidia-cudnn-cu13": "9.19.0.56", "torch": "2.11.0+cu130", "triton": "3.5.1"},
        "install": ["nvidia-nvshmem-cu13"],
        "differences": ["triton 3.5.1 of the adopted tree (ml_stack_torch_from) stands in for the lock's 3.6.0"]}


# The converged check's and preflight's view of the tree: adopt_torch.yml's commands, without importing torch.

TASKS = yaml.safe_load((ROOT / "roles" / "ml_stack" / "tasks" / "adopt_torch.yml").read_text())


def task(name):
    return next(entry for entry in TASKS if entry["name"] == name)


def test_the_check_walks_the_tree_with_adopt_torch_yml_s_own_find():
    argv = task("Find the first entry of the tree that is not root's or that its group or others can write")[
        "ansible.builtin.command"]["argv"]
    assert [VENV if item == "{{ ml_stack_torch_from }}" else item for item in argv] == inside_argv(VENV)


def test_the_check_runs_adopt_torch_yml_s_inspection_with_the_trees_interpreter_asking_for_the_metadata_alone():
    argv = task("Ask the tree's interpreter, as the service user, which torch it has and whether it imports")[
        "ansible.builtin.command"]["argv"]
    assert " ".join(argv.split()) == (
        "{{ __ml_stack_as_owner + __ml_stack_clean_env + [__ml_stack_adopt_python, '-I', '-S', '-B', '-c', "
        "lookup('ansible.builtin.file', 'inspect_torch.py'), ml_stack_torch_from] }}")
    # The check's prefix, owner_argv's: the owner (runuser), then an empty environment but for the search path.
    role_vars = yaml.safe_load((ROOT / "roles" / "ml_stack" / "vars" / "main.yml").read_text())
    assert role_vars["__ml_stack_clean_env"] == ["env", "-i", CLEAN_PATH]
    assert inspect_argv(VENV, True, "/usr/bin/python3", "# script") == [
        VENV + "/bin/python", "-I", "-S", "-B", "-c", "# script", VENV]
    assert inspect_argv(VENV, False, "/usr/bin/python3", "# script", imports=False) == [
        "/usr/bin/python3", "-I", "-S", "-B", "-c", "# script", VENV, "--metadata-only"]


def test_without_what_importing_said_the_tree_is_weighed_on_everything_else():
    metadata = report(**{"import": None})
    assert adopt(inspected=metadata)["decision"] == "not_importable"
    checked = decide(SGLANG_0_5_17, VENV, metadata, stats(), None, "3.12.3", imports=False)
    assert (checked["decision"], checked["pth"]) == ("match", {"name": PTH_NAME, "content": SITE + "\n"})
    assert checked["torch"] == {"distribution": "2.11.0+cu130"}
    older = decide(SGLANG_0_5_17, VENV, dict(metadata, torch_distribution="2.10.0"), stats(), None, "3.12.3",
                   imports=False)
    assert older["decision"] == "version_mismatch"
    opened = decide(SGLANG_0_5_17, VENV, metadata, stats(**{"/opt": root_dir("0777")}), None, "3.12.3", imports=False)
    assert opened["decision"] == "untrusted"


def test_the_check_sees_each_level_as_ansibles_stat_reports_it(tmp_path):
    directory, link = tmp_path / "tree", tmp_path / "link"
    directory.mkdir()
    os.chmod(str(directory), 0o750)
    link.symlink_to(directory)
    names = {os.getuid(): "owner"}
    assert level_state(str(directory), names.get) == {"exists": True, "islnk": False, "isdir": True,
                                                      "uid": os.getuid(), "mode": "0750", "pw_name": "owner"}
    linked = level_state(str(link), names.get)
    assert (linked["islnk"], linked["isdir"], linked["lnk_source"]) == (True, False, str(directory))
    assert level_state(str(tmp_path / "missing"), names.get) == {"exists": False}
    assert decide(SGLANG_0_5_17, str(link), report(site_packages=str(link)), [root_dir()] * (len(levels(str(link))) - 1)
                  + [linked], None, "3.12.3")["decision"] == "untrusted"


def _first_foreign_entry(tree):
    import subprocess
    result = subprocess.run(inside_argv(str(tree)), capture_output=True, text=True, check=False)
    found = parse_inside(result.returncode, result.stdout, result.stderr)
    return found and found["path"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_the_walk_passes_over_uvs_lock_file_alone(tmp_path):
    # The lent H100's /opt/torch/.venv, built by uv: .lock at the root, mode 666, everything else root's and 644.
    tree = tmp_path / "venv"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "torch.py").write_text("")
    lock = tree / ".lock"
    lock.write_text("")
    for path in (tmp_path, tree, tree / "lib"):
        path.chmod(0o755)
    lock.chmod(0o666)
    assert _first_foreign_entry(tree) is None

    (tree / "lib" / ".lock").mkdir(mode=0o755)
    (tree / "lib" / ".lock").chmod(0o777)
    assert _first_foreign_entry(tree) == str(tree / "lib" / ".lock")
    (tree / "lib" / ".lock").rmdir()

    os.link(lock, tree / "lib" / "second-name")
    assert _first_foreign_entry(tree) in (str(lock), str(tree / "lib" / "second-name"))
    (tree / "lib" / "second-name").unlink()

    os.chown(lock, 65534, 0)
    assert _first_foreign_entry(tree) == str(lock)
    os.chown(lock, 0, 0)

    (tree / "lib" / "torch.py").chmod(0o666)
    assert _first_foreign_entry(tree) == str(tree / "lib" / "torch.py")
