"""ml_stack_converged_info against the profile's virtualenv made hostile by its owner: the marker and the pins (the
constraints file and pip.conf, root's on a host the role built) swapped for FIFOs, links to /dev/zero and
/etc/shadow, or 8 GiB sparse files, and an interpreter that never finishes starting. The check reads each of
them bounded or not at all, runs the virtualenv's code as its owner only, and returns within its bound."""
import platform
import subprocess

import pytest

import hostile_harness

MODULE = "ml_stack_converged_info"
PLAN = """
import json, sys, yaml
try:
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import profile_virtualenv
except ImportError:  # the layout before module_utils had packages by domain
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack_profile import resolve
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._ml_stack import profile_virtualenv
with open(sys.argv[1]) as handle:
    profile = resolve("cu130", yaml.safe_load(handle)["stack_profiles"])
try:
    venv = profile_virtualenv(sys.argv[2], profile, sys.argv[3], {"version": sys.argv[4]})
except (AttributeError, TypeError):  # releases whose profile_virtualenv took the interpreter's version as text
    venv = profile_virtualenv(sys.argv[2], profile, sys.argv[3], sys.argv[4])
print(json.dumps({"profile": profile, "venv": venv}))
"""
SYSTEM_PYTHON_VERSION = subprocess.run([hostile_harness.SYSTEM_PYTHON, "-c", "import platform; "
                                        "print(platform.python_version())"], capture_output=True, text=True,
                                       check=True).stdout.strip()
# An interpreter that never gets past its site-packages: the owner's .pth spins.
SPIN = "import os; exec('while True: pass')"


def setting(case):
    """(venv, the module's arguments) for the cu130 profile's virtualenv of the user, laid out where the plan
    puts it (its name carries the digest of the profile's pins and of ml_stack_python)."""
    venv_path = case.home / "ml-env"
    planned = case.collection.python(PLAN, str(case.collection.path / "roles" / "stack" / "defaults" / "main.yml"),
                                     str(venv_path), hostile_harness.SYSTEM_PYTHON, SYSTEM_PYTHON_VERSION)
    venv = case.make_venv(planned["venv"]["name"])
    for name in ("ml-stack-constraints.txt", "pip.conf"):
        (venv.path / name).write_text("# root's pins\n")  # root's, as install.yml leaves them
    args = dict(
        settings=dict(venv_path=str(venv_path), venv_owner=case.user.name, python=hostile_harness.SYSTEM_PYTHON,
                      index_url="https://pypi.org/simple", index_mirrors={}, pip_environment={}, offline=False,
                      wheelhouse_path="/var/cache/blackwell-gpu-node/wheelhouse", wheelhouse_controller_path=None,
                      system_packages=[]),
        profile=planned["profile"],
        scripts=dict((name, case.collection.role_file("ml_stack", "files/" + name))
                     for name in ("inspect_python.py", "inspect_stack.py")),
        activate=True, keep=None, gpus_required=False)
    # Below the harness's bound, so that an interpreter the owner made hang is the module's to stop.
    if case.collection.has_option(MODULE, "timeout"):
        args["timeout"] = 5
    return venv, args


def test_control_checks_the_virtualenv_as_its_owner(hostile):
    case = hostile(MODULE, "control")
    _venv, args = setting(case)
    run = case.module(MODULE, args)
    converged = (run.result or {}).get("converged")
    case.check(run, "ok", problems=case.ran_as_owner(run, required=True) + ([] if converged is False else [
        "converged=%r for a virtualenv without the stack" % converged]))
    case.finish()


HOSTILE = {
    "marker FIFO": [("ml-stack.json", "fifo", None)],
    "marker -> /dev/zero": [("ml-stack.json", "link", "/dev/zero")],
    "marker sparse 8 GiB": [("ml-stack.json", "sparse", None)],
    "pins -> /etc/shadow, /dev/zero": [("ml-stack-constraints.txt", "link", "/etc/shadow"),
                                       ("pip.conf", "link", "/dev/zero")],
    "pins FIFOs": [("ml-stack-constraints.txt", "fifo", None), ("pip.conf", "fifo", None)],
    "pins sparse 8 GiB": [("ml-stack-constraints.txt", "sparse", None), ("pip.conf", "sparse", None)],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_marker_or_pin_is_read_bounded_or_not_at_all(hostile, name):
    case = hostile(MODULE, name)
    venv, args = setting(case)
    for file_name, kind, target in HOSTILE[name]:
        case.replace(venv.path / file_name, kind, target)
    run = case.module(MODULE, args)
    converged = (run.result or {}).get("converged")
    case.check(run, "bounded", problems=case.ran_as_owner(run, required=True) + ([] if converged is not True else [
        "converged with %s" % name]))
    case.finish()


def test_an_interpreter_that_never_starts_is_killed_at_the_bound(hostile):
    case = hostile(MODULE, "venv python hangs (.pth spins)")
    venv, args = setting(case)
    venv.pth("00-spin.pth", SPIN)
    run = case.module(MODULE, args)
    case.check(run, "bounded")
    case.finish()


def test_the_machine_is_one_the_renameat2_number_is_known_for():
    assert platform.machine() in hostile_harness.RENAMEAT2
