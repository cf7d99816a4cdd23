"""The ml_stack role's converged check: observe_stack on a virtualenv laid out in tmp_path (the interpreters it
runs answered by a fake), stack_unconverged_reasons on what it saw. Each input of the role, and each thing on
the host the role's tasks would change, makes it not converged with a reason that names it; the others leave it
converged."""
import copy
import importlib.util
import json
import os
from pathlib import Path

import pytest
import yaml

from ansible.plugins.filter.core import to_nice_json

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import adopt_torch as _adopt_torch
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import ml_stack as _ml_stack
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import PTH_NAME, adopted
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.cudnn import cudnn_check, cudnn_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    build_plan,
    converged_report,
    marker_text,
    managed_files,
    observe_stack,
    stack_unconverged_reasons,
    verdict,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
CU130 = resolve("cu130", PROFILES)
LOCKED = resolve("sglang-0.5.17-cu130", PROFILES)
LOCK = dict(json.loads((ROOT / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()),
            path="/srv/locks/sglang-0.5.17-cu130.json")
LOCKED_KERNEL_URL = ("https://github.com/sgl-project/whl/releases/download/v0.4.5/"
                     "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl")
SGL_KERNEL_CU130_WHEEL = "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"
SCRIPTS = {"inspect_python.py": "# inspect python", "inspect_stack.py": "# inspect stack",
           "inspect_torch.py": "# inspect torch"}
# A torch image the host has, root's: what inspect_torch.py reads of it without importing torch.
TREE = "/opt/torch-image"
TREE_SITE = TREE + "/lib/python3.11/site-packages"
TREE_DISTRIBUTIONS = {"torch": "2.11.0+cu130", "triton": "3.6.0", "pip": "25.2"}
TREE_REPORT = {"executable": TREE + "/bin/python", "python": "3.11.2", "path": TREE, "candidates": [TREE_SITE],
               "site_packages": TREE_SITE, "distributions": TREE_DISTRIBUTIONS, "distributions_complete": True,
               "torch_distribution": "2.11.0+cu130", "import": None}
ROOTS = {"exists": True, "isdir": True, "islnk": False, "uid": 0, "pw_name": "root", "mode": "0755"}
PYTHON = {"executable": "/usr/bin/python3.11", "version": "3.11.2", "implementation": "cpython", "machine": "x86_64",
          "glibc": "2.36", "venv_error": None}
PIP_CHECK = "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4.\n"
DPKG = "ii  libnuma1\nii  python3-apt\n"
OWNER = {"uid": os.getuid(), "gid": os.getgid()}
# torch 2.9.1+cu130 requires the cuDNN it was built with, older than SGLang's check accepts.
CU130_CUDNN = "9.13.0.50"
CU130_CUDNN_NOTE = cudnn_problem(cudnn_check(CU130), {"nvidia-cudnn-cu13": CU130_CUDNN})
# The role's own script reads the marker: its reader, loaded without running it.
_SPEC = importlib.util.spec_from_file_location(
    "inspect_stack", str(Path(__file__).resolve().parents[4] / "roles" / "ml_stack" / "files" / "inspect_stack.py"))
INSPECT_STACK = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(INSPECT_STACK)


class Host:
    """A host laid out under tmp_path as the role leaves it, and the answers of the programs the check runs."""

    def __init__(self, tmp_path, monkeypatch, profile=None, lock=None, torch_from=None):
        profile = CU130 if profile is None else profile
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.settings = {
            "venv_path": str(self.home / "ml-env"), "venv_owner": "sglang", "python": "/usr/bin/python3",
            "index_url": "https://pypi.org/simple", "index_mirrors": {}, "pip_environment": {}, "offline": False,
            "wheelhouse_path": "/var/cache/blackwell-gpu-node/wheelhouse", "wheelhouse_controller_path": None,
            "system_packages": ["libnuma1"], "torch_from": torch_from,
        }
        # The adopted tree: what its script reports, the levels root looks at, what find prints in it, and what
        # the virtualenv sees of it through its .pth file.
        self.tree = copy.deepcopy(TREE_REPORT)
        self.levels = {}
        self.find = (0, "", "")
        self.seen = dict(TREE_DISTRIBUTIONS)
        monkeypatch.setattr(_adopt_torch, "level_state", lambda path, user_name: self.levels.get(path, ROOTS))
        self.profile = copy.deepcopy(profile)
        self.lock = lock
        self.python = dict(PYTHON)
        self.dpkg = DPKG
        self.users = {"sglang": dict(OWNER)}
        self.pythons = ["/usr/bin/python3", "/usr/bin/python3.12"]
        self.ran = []
        # The tests run as whoever runs them: the pins are "root's" when they are that user's.
        monkeypatch.setattr(_ml_stack, "PINS_OWNER", dict(OWNER))
        self.plan = self.plan_now()
        venv = Path(self.plan["venv_dir"])
        (venv / "bin").mkdir(parents=True)
        for directory in (venv, venv / "bin"):
            os.chmod(str(directory), 0o755)  # whatever the umask of the tests: writable by its owner alone
        self.stack = {
            "versions": dict(self.plan["versions"]),
            "direct_urls": dict((name, None) for name in self.plan["versions"]),
            "modules": {"torch": {"ok": True, "version": "2.9.1+cu130", "cuda": "13.0"}, "sgl_kernel": {"ok": True},
                        "flashinfer": {"ok": True}, "sglang": {"ok": True}},
            "pip_check": PIP_CHECK,
        }
        if lock is None:
            self.stack["direct_urls"]["sgl-kernel"] = "file:///srv/wheels/" + SGL_KERNEL_CU130_WHEEL
            self.stack["versions"]["nvidia-cudnn-cu13"] = CU130_CUDNN
        else:
            # Exactly the lock's wheels for cp311-x86_64, and what ensurepip put there; one consistent resolution.
            self.stack["direct_urls"]["sglang-kernel"] = LOCKED_KERNEL_URL
            self.stack["pip_check"] = "No broken requirements found.\n"
            # Of an adopted torch, what the tree stands in for is the tree's alone.
            self.stack["installed"] = dict(((wheel["distribution"], wheel["version"])
                                            for wheel in self.plan["lock"]["wheels"]), pip="23.0.1",
                                           setuptools="66.1.1")
        explanation = verdict(self.plan, {"state": dict(self.stack, adopted=self.seen),
                                          "verification": self.stack})["explanation"]
        for entry in managed_files(self.plan, explanation):
            path = os.path.join(self.plan["venv_dir"], entry["name"])
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(entry["content"])
            os.chmod(path, 0o644)
        os.symlink(self.plan["venv_name"], self.settings["venv_path"])

    def plan_now(self):
        return build_plan(self.settings, self.profile, {
            "python": self.python, "owner": True, "venv_path": {"exists": True, "islnk": True}, "parent_exists": True,
            "dpkg": self.dpkg}, self.lock, adopted(self.tree) if self.settings["torch_from"] else None)

    def run(self, argv):
        self.ran.append(argv)
        if argv[:2] == ["dpkg-query", "--show"]:
            return 0, self.dpkg, ""
        if SCRIPTS["inspect_torch.py"] in argv:
            return (0, json.dumps(self.tree), "") if isinstance(self.tree, dict) else self.tree
        if argv[0] == "find":
            return self.find
        if argv[-1] == SCRIPTS["inspect_python.py"]:
            return (0, json.dumps(self.python), "") if argv[0] in self.pythons else (127, "", "not found")
        request = json.loads(argv[-1])
        python = Path(argv[argv.index("-B") - 1])
        if not python.parent.is_dir():
            return 127, "", "%s: No such file or directory" % python
        report = {"versions": dict((name, self.stack["versions"].get(name)) for name in request["distributions"]),
                  "direct_urls": dict((name, self.stack["direct_urls"].get(name)) for name in request["distributions"]),
                  "marker": INSPECT_STACK.marker(request["marker"])}
        report.update(modules=self.stack["modules"], pip_check=self.stack["pip_check"])
        if request["every_distribution"]:
            report["installed"] = self.stack["installed"]
        if request.get("adopted"):
            report["adopted"] = self.seen
        return 0, json.dumps(report), ""

    def user_name(self, uid):
        return next((name for name, user in self.users.items() if user["uid"] == uid), None)

    def check(self, activate=True, keep=None, gpus_required=True):
        observed = observe_stack(self.settings, self.profile, SCRIPTS, self.run, self.users.get, self.user_name,
                                 self.lock)
        return observed, stack_unconverged_reasons(observed, self.settings["venv_owner"], activate, keep, gpus_required)

    def reasons(self, **options):
        return self.check(**options)[1]["reasons"]


@pytest.fixture(name="host")
def fixture_host(tmp_path, monkeypatch):
    return Host(tmp_path, monkeypatch)


def test_a_host_as_the_role_leaves_it_is_converged_and_reported_as_activate_yml_reports_it(host):
    observed, checked = host.check()
    assert checked["reasons"] == []
    assert converged_report(observed, True, checked) == {
        "venv_path": host.settings["venv_path"], "venv_dir": host.plan["venv_dir"], "profile": "cu130",
        "built": False, "active": True, "build_reasons": [], "repaired": [], "versions": host.plan["versions"],
        "torch_cuda": "13.0", "deliberate_pip_check": [PIP_CHECK.strip()], "notes": [CU130_CUDNN_NOTE]}


def test_a_converged_cu130_with_cudnn_9_15_has_nothing_to_note(host):
    host.stack["versions"]["nvidia-cudnn-cu13"] = "9.15.0.57"
    observed, checked = host.check()
    assert (checked["reasons"], converged_report(observed, True, checked)["notes"]) == ([], [])


def test_the_virtualenv_is_inspected_as_its_owner_in_an_empty_environment_importing_everything(host):
    os.chown(host.plan["venv_dir"], 65534, 65534)
    host.check()
    inspect = host.ran[-1]
    assert inspect[:7] == ["runuser", "-u", "nobody", "--", "env", "-i",
                           "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    assert inspect[7:10] == [host.plan["venv_dir"] + "/bin/python", "-B", "-c"]
    assert json.loads(inspect[-1]) == {"distributions": list(host.plan["versions"]) + ["nvidia-cudnn-cu13"],
                                       "marker": host.plan["files"]["marker"],
                                       "every_distribution": False,
                                       "imports": ["torch", "sgl_kernel", "flashinfer", "sglang"]}


def test_a_virtualenv_of_another_users_is_never_run_as_root_even_without_an_owner_setting(host):
    host.settings["venv_owner"] = None
    os.chown(host.plan["venv_dir"] + "/bin", 65534, 65534)
    host.check()
    assert host.ran[-1][:4] == ["runuser", "-u", "nobody", "--"]


def test_root_as_the_owner_inspects_without_runuser(host):
    host.users["sglang"]["uid"] = 0
    host.check()
    assert host.ran[-1][:2] == ["env", "-i"]


def test_the_marker_is_written_as_ansibles_to_nice_json_writes_it():
    marker = {"profile": "cu130", "packages": {"torch": "2.9.1+cu130", "sglang": "0.5.9"}, "wheels": {}, "x": "é"}
    assert marker_text(marker) == to_nice_json(marker) + "\n"


# Each input of the role, changed alone.

def set_setting(name, value):
    def change(host):
        host.settings[name] = value
    return change


def set_profile(key, field, value):
    def change(host):
        host.profile["python"][key][field] = value
    return change


INPUT_CHANGES = [
    (set_setting("venv_path", "/elsewhere/ml-env"), "ml_stack_venv_path"),
    (set_setting("venv_owner", "mlserve"), "ml_stack_venv_owner=mlserve"),
    (set_setting("python", "/usr/bin/python3.12"), "there is no "),
    (set_setting("index_url", "pypi.internal"), "ml_stack_index_url=pypi.internal"),
    (set_setting("index_mirrors", {"https://pypi.org/simple": "pypi.internal"}), "ml_stack_index_mirrors"),
    (set_setting("pip_environment", {"PIP_TIMEOUT": 5}), "ml_stack_pip_environment"),
    (set_setting("wheelhouse_path", "wheels"), "ml_stack_wheelhouse_path"),
    (set_setting("wheelhouse_controller_path", "wheels"), "ml_stack_wheelhouse_controller_path"),
    (set_setting("system_packages", ["libnuma1", "libfoo1"]), "ml_stack_system_packages: libfoo1 not installed"),
    (set_setting("venv_path", "/srv/ml-env\n"), "ml_stack_venv_path"),
    (set_profile("torch", "version", "2.9.2+cu130"), "there is no "),
    (set_profile("torch", "cuda", "12.9"), "the profile expects 12.9 (python.torch.cuda)"),
    (set_profile("sgl_kernel", "source", "https://example.org/whl/sgl_kernel-0.3.21+cu130-cp310-abi3-"
                                         "manylinux2014_x86_64.whl"), None),
]


@pytest.mark.parametrize("change, named", INPUT_CHANGES)
def test_each_input_of_the_role_changed_alone_makes_it_act_naming_it(host, change, named):
    change(host)
    reasons = host.reasons()
    if named is None:
        # The same wheel from another URL is the same build: the role would not act either.
        assert reasons == []
    else:
        assert reasons and any(named in reason for reason in reasons), reasons


def test_a_profile_of_another_name_is_another_virtualenv(host):
    host.profile["name"] = "site"
    assert host.reasons() == ["there is no %s/ml-env.site-%s" % (host.home, host.plan_now()["digest"])]


def test_another_python_release_on_the_host_is_another_virtualenv(host):
    host.python["version"] = "3.12.1"
    assert host.reasons()[0].startswith("there is no %s/ml-env.cu130-" % host.home)


def test_an_interpreter_that_does_not_run_names_the_variable(host):
    host.settings["python"] = "/usr/bin/python3.99"
    assert "ml_stack_python=/usr/bin/python3.99 cannot run on this host (not found)" in host.reasons()[0]


def test_inputs_a_converged_virtualenv_does_not_depend_on_leave_it_converged(host):
    host.settings.update(index_url="https://pypi.internal/simple", pip_environment={"PIP_TIMEOUT": "5"},
                         index_mirrors={"https://pypi.org/simple": "https://pypi.internal/simple"})
    assert host.reasons() == []
    host.settings.update(offline=True, wheelhouse_path="/srv/wheels", wheelhouse_controller_path="/srv/controller")
    assert host.reasons() == []


def test_activate_false_leaves_the_stable_path_alone(host):
    os.remove(host.settings["venv_path"])
    os.symlink("ml-env.cu128-00000000", host.settings["venv_path"])
    assert host.reasons() == ["%s does not point at %s" % (host.settings["venv_path"], host.plan["venv_name"])]
    assert host.reasons(activate=False) == []


def old_virtualenvs(host, *names):
    for name in names:
        (host.home / name).mkdir()


def test_keep_makes_it_act_only_when_there_is_something_to_prune(host):
    old_virtualenvs(host, "ml-env.cu128-00000000", "ml-env.cu128-11111111", "ml-env.notours")
    assert host.reasons(keep=2) == []
    assert sorted(host.check(keep=2)[1]["kept"]) == sorted(
        [str(host.home / "ml-env.cu128-00000000"), str(host.home / "ml-env.cu128-11111111")])
    reasons = host.reasons(keep=1)
    assert len(reasons) == 1 and reasons[0].startswith("old virtualenvs beyond ml_stack_keep=1: ")
    assert host.reasons(keep=None) == []
    # The role prunes only what it activates.
    assert host.reasons(keep=0, activate=False) == []


def test_a_keep_that_is_no_count_names_the_variable(host):
    assert "ml_stack_keep='1' must be a whole number" in host.reasons(keep="1")[0]


def test_gpus_required_decides_whether_an_import_needing_the_driver_is_a_reason(host):
    error = "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    host.stack["modules"]["sgl_kernel"] = {"ok": False, "error": error}
    assert host.reasons()[0].startswith("import sgl_kernel failed: " + error)
    observed, checked = host.check(gpus_required=False)
    assert checked["reasons"] == []
    assert converged_report(observed, True, checked)["notes"][0].startswith("import sgl_kernel needs the NVIDIA driver")


# The host changed behind the role's back, one thing at a time.

def edit(name, content=None, mode=None, remove=False):
    def change(host):
        path = host.plan["files"][name]
        if remove:
            os.remove(path)
        if content is not None:
            Path(path).write_text(Path(path).read_text() + content)
        if mode is not None:
            os.chmod(path, mode)
    return change


def replace_with_link(name):
    def change(host):
        path = host.plan["files"][name]
        os.rename(path, path + ".real")
        os.symlink(path + ".real", path)
    return change


def stack_change(key, name, value):
    def change(host):
        host.stack[key][name] = value
    return change


def link_to(target):
    def change(host):
        os.remove(host.settings["venv_path"])
        os.symlink(target, host.settings["venv_path"])
    return change


HOST_CHANGES = [
    (edit("marker", content=" "), "ml-stack.json is not what the role writes there"),
    (edit("marker", remove=True), "it is not marked complete for this profile"),
    (edit("marker", mode=0o664), "has mode 0664, not 0644"),
    (edit("pip_check", content="# edited\n"), "ml-stack-pip-check.txt is not what the role writes there"),
    (edit("pip_check", remove=True), "ml-stack-pip-check.txt is missing or not a regular file"),
    (edit("constraints", content="torch\n"), "ml-stack-constraints.txt is not what the role writes there"),
    (edit("pip_conf", mode=0o666), "pip.conf has mode 0666, not 0644"),
    (replace_with_link("pip_conf"), "pip.conf is missing or not a regular file"),
    (stack_change("versions", "flashinfer-python", "0.6.3"), "flashinfer-python is 0.6.3, the profile pins 0.6.4"),
    (stack_change("direct_urls", "sgl-kernel", None), "sgl-kernel was installed from an index"),
    (stack_change("modules", "sgl_kernel", {"ok": False, "error": "ImportError: libnvrtc.so.12: cannot open shared "
                                            "object file: No such file or directory"}),
     "import sgl_kernel failed: ImportError: libnvrtc.so.12"),
    (stack_change("modules", "torch", {"ok": True, "version": "2.9.1+cu128", "cuda": "12.8"}),
     "torch 2.9.1+cu128 reports torch.version.cuda 12.8"),
    (lambda host: host.stack.update(pip_check=PIP_CHECK + "xgrammar 0.1.27 requires ninja, which is not installed.\n"),
     "pip check reports problems the profile does not explain"),
    (link_to("ml-env.cu128-00000000"), "does not point at"),
    (lambda host: setattr(host, "dpkg", "rc  libnuma1\nii  python3-apt\n"),
     "ml_stack_system_packages: libnuma1 not installed"),
    (lambda host: os.rename(host.plan["venv_dir"], host.plan["venv_dir"] + ".moved"), "there is no "),
    (lambda host: os.rmdir(Path(host.plan["venv_dir"]) / "bin"), "its interpreter does not run"),
]


@pytest.mark.parametrize("change, named", HOST_CHANGES)
def test_each_change_on_the_host_makes_it_act_naming_it(host, change, named):
    change(host)
    reasons = host.reasons()
    assert any(named in reason for reason in reasons), reasons


def test_each_file_the_role_declares_edited_alone_is_named_and_nothing_else(host):
    names = [entry["name"] for entry in managed_files(host.plan, "")]
    assert names == ["ml-stack-constraints.txt", "pip.conf", "ml-stack-pip-check.txt", "ml-stack.json"]
    for name in names:
        path = os.path.join(host.plan["venv_dir"], name)
        with open(path) as handle:
            kept = handle.read()
        # A blank line: the marker still parses as the same marker, and every file differs from what is declared.
        with open(path, "a") as handle:
            handle.write("\n")
        assert host.reasons() == ["%s is not what the role writes there" % path]
        with open(path, "w") as handle:
            handle.write(kept)
        assert host.reasons() == []


def test_a_virtualenv_of_another_user_makes_it_act(host):
    host.users["sglang"]["uid"] = OWNER["uid"] + 1
    host.users["other"] = dict(OWNER)
    # The role hands the virtualenv over and repairs it.
    assert host.reasons() == ["it belongs to other, not to ml_stack_venv_owner=sglang"]


def test_a_link_of_another_owner_makes_it_act(host, monkeypatch):
    real_link = _ml_stack._link

    def link_of_another_owner(path):
        return dict(real_link(path), uid=OWNER["uid"] + 1)

    monkeypatch.setattr(_ml_stack, "_link", link_of_another_owner)
    assert host.reasons() == ["the link %s does not belong to its owner" % host.settings["venv_path"]]
    assert host.reasons(activate=False) == []


def test_a_file_of_another_owner_makes_it_act(host, monkeypatch):
    real_file = _ml_stack.file_state

    def marker_of_another_owner(path, limit):
        found = real_file(path, limit)
        return dict(found, gid=OWNER["gid"] + 1) if path.endswith("ml-stack.json") else found

    monkeypatch.setattr(_ml_stack, "file_state", marker_of_another_owner)
    assert host.reasons() == ["%s does not belong to its owner" % host.plan["files"]["marker"]]


def test_without_an_owner_setting_whoever_runs_the_role_may_own_the_files(host, monkeypatch):
    host.settings["venv_owner"] = None
    monkeypatch.setattr(_ml_stack, "PINS_OWNER", {"uid": OWNER["uid"] + 1, "gid": 0})
    assert host.reasons()[0].endswith("ml-stack-constraints.txt does not belong to its owner")


def test_an_entry_of_the_virtualenv_others_can_change_makes_it_act_naming_the_first(host, tmp_path):
    venv = Path(host.plan["venv_dir"])
    module = venv / "lib" / "python3.11" / "site-packages" / "some.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    os.chmod(str(module), 0o646)
    named = "a user other than the virtualenv's owner can change the code it runs: "
    assert host.reasons() == [named + "%s is writable by its group or others (mode 0646)" % module]
    os.chmod(str(module), 0o644)
    os.chown(str(module), 1, 1)
    assert host.reasons() == [named + "%s is owned by uid 1 (daemon)" % module]
    os.chown(str(module), OWNER["uid"], OWNER["gid"])
    # A link is never followed: what it points at is not the virtualenv's.
    outside = tmp_path / "outside"
    outside.write_text("")
    os.chmod(str(outside), 0o666)
    os.symlink(str(outside), str(venv / "bin" / "link"))
    assert host.reasons() == []
    os.chmod(str(venv / "bin"), 0o775)
    assert host.reasons() == [named + "%s is writable by its group or others (mode 0775)" % (venv / "bin")]


def test_a_virtualenv_too_large_or_gone_to_walk_makes_it_act(host, monkeypatch):
    monkeypatch.setattr(_ml_stack, "foreign_writable", lambda root, limit: (OWNER["uid"], [], False))
    assert host.reasons() == ["%s holds more than the 500000 entries the check looks at" % host.plan["venv_dir"]]

    def removed_meanwhile(root, limit):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(_ml_stack, "foreign_writable", removed_meanwhile)
    assert host.reasons() == ["%s could not be walked: No such file or directory" % host.plan["venv_dir"]]


def test_a_dpkg_that_fails_is_a_reason(host):
    host.dpkg = None

    def failing(argv):
        return (2, "", "dpkg-query: error") if argv[0] == "dpkg-query" else Host.run(host, argv)

    host.run = failing
    assert host.reasons() == ["dpkg-query failed (exit status 2): dpkg-query: error"]


def test_an_inspection_that_reports_nothing_usable_is_a_reason(host):
    answer = host.run

    def reporting_nothing(argv):
        return (0, "{}", "") if SCRIPTS["inspect_stack.py"] in argv else answer(argv)

    host.run = reporting_nothing
    assert host.reasons() == ["its interpreter does not run: exit status 0"]


def test_an_owner_that_is_no_name_is_a_reason(host):
    host.settings["venv_owner"] = 1000
    assert host.reasons() == ["ml_stack_venv_owner=1000 is not a user name"]


def test_a_marker_swapped_for_a_fifo_or_a_huge_file_is_read_no_further_and_makes_it_act(host):
    marker = host.plan["files"]["marker"]
    os.unlink(marker)
    os.mkfifo(marker)
    assert host.reasons() == ["it is not marked complete for this profile"]
    os.unlink(marker)
    with open(marker, "wb") as sparse:
        sparse.truncate(8 << 30)
    assert host.reasons() == ["it is not marked complete for this profile"]
    os.unlink(marker)
    os.symlink("/dev/zero", marker)
    assert host.reasons() == ["it is not marked complete for this profile"]


# A locked profile: every distribution of the virtualenv against the lock.

@pytest.fixture(name="locked")
def fixture_locked(tmp_path, monkeypatch):
    return Host(tmp_path, monkeypatch, LOCKED, LOCK)


def test_a_virtualenv_exactly_as_its_lock_is_converged_inspected_for_every_distribution(locked):
    assert locked.reasons() == []
    # Its torch is 2.11, which SGLang's cuDNN check leaves alone: the lock has no cuDNN wheel to note.
    observed, checked = locked.check()
    assert converged_report(observed, True, checked)["notes"] == []
    assert json.loads(locked.ran[-1][-1])["every_distribution"] is True


@pytest.mark.parametrize("changes, reason", [
    ({"numpy": "2.3.4"}, "numpy is 2.3.4, the lock pins 2.3.5"),
    ({"requests": "2.32.5"}, "requests 2.32.5 is installed, and the lock has no requests"),
    ({"setuptools": "80.9.0"}, None),
])
def test_one_distribution_of_a_locked_virtualenv_changed_or_added_makes_it_act_naming_it(locked, changes, reason):
    locked.stack["installed"].update(changes)
    # ensurepip's own setuptools is not the lock's business on a Python whose lock has none.
    assert locked.reasons() == ([reason] if reason else [])


def test_a_distribution_of_a_locked_virtualenv_removed_makes_it_act_naming_it(locked):
    del locked.stack["installed"]["mpmath"]
    assert locked.reasons() == ["mpmath is not installed (the lock pins 1.3.0)"]


def test_the_requirements_file_of_a_locked_virtualenv_is_kept_as_the_role_writes_it(locked):
    path = locked.plan["files"]["requirements"]
    with open(path, "a") as handle:
        handle.write("requests==2.32.5\n")
    assert locked.reasons() == ["%s is not what the role writes there" % path]


def test_another_lock_of_the_profile_is_another_virtualenv(locked):
    locked.lock = copy.deepcopy(LOCK)
    locked.lock["distributions"]["mpmath"]["wheels"]["mpmath-1.3.0-py3-none-any.whl"]["sha256"] = "0" * 64
    assert locked.reasons() == ["there is no %s" % locked.plan_now()["venv_dir"]]


# A locked profile that adopts the host's torch: the tree weighed again, cheaply, and the virtualenv on it.

@pytest.fixture(name="adopting")
def fixture_adopting(tmp_path, monkeypatch):
    return Host(tmp_path, monkeypatch, LOCKED, LOCK, torch_from=TREE)


def test_a_virtualenv_on_the_adopted_torch_as_the_role_leaves_it_is_converged(adopting):
    observed, checked = adopting.check()
    assert checked["reasons"] == []
    assert "torch" not in adopting.stack["installed"] and "triton" not in adopting.stack["installed"]
    assert converged_report(observed, True, checked)["versions"]["torch"] == "2.11.0+cu130"
    # The tree's metadata, read as the virtualenv's owner in an empty environment without importing torch; root's
    # walk of the tree; and the virtualenv asked for what it sees of the tree.
    inspect_torch = [argv for argv in adopting.ran if SCRIPTS["inspect_torch.py"] in argv]
    assert inspect_torch == [["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                              "/usr/bin/python3", "-I", "-S", "-B", "-c", SCRIPTS["inspect_torch.py"], TREE,
                              "--metadata-only"]]
    assert [argv[:3] for argv in adopting.ran if argv[0] == "find"] == [["find", "-H", TREE]]
    assert json.loads(adopting.ran[-1][-1])["adopted"] == TREE_SITE


def test_the_pth_file_is_a_file_the_check_compares_and_the_role_keeps(adopting):
    observed, checked = adopting.check()
    pth = os.path.join(adopting.plan["venv_dir"], "lib", "python3.11", "site-packages", PTH_NAME)
    assert pth in [os.path.join(observed["plan"]["venv_dir"], entry["name"]) for entry in checked["verdict"]["files"]]
    with open(pth, "a") as handle:
        handle.write("/home/sglang/planted\n")
    assert adopting.reasons() == ["%s is not what the role writes there" % pth]


def test_a_torch_replaced_in_the_adopted_tree_is_another_virtualenv(adopting):
    adopting.tree["torch_distribution"] = adopting.seen["torch"] = "2.11.0"
    assert adopting.reasons() == ["there is no %s" % adopting.plan_now()["venv_dir"]]
    assert adopting.plan_now()["venv_dir"] != adopting.plan["venv_dir"]


def test_a_torch_of_another_release_in_the_adopted_tree_is_refused_naming_both(adopting):
    adopting.tree["torch_distribution"] = "2.12.0+cu130"
    reasons = adopting.reasons()
    assert len(reasons) == 1 and ("ml_stack_torch_from=%s has torch 2.12.0+cu130, stack profile sglang-0.5.17-cu130 "
                                  "wants torch 2.11.0" % TREE) in reasons[0]


def test_what_the_virtualenv_sees_of_the_tree_must_be_the_tree(adopting):
    adopting.seen = {}
    reasons = adopting.reasons()
    assert reasons and reasons[0].startswith("the virtualenv does not see torch 2.11.0+cu130 of the adopted tree")


def test_a_torch_of_the_virtualenvs_own_beside_the_adopted_one_makes_it_act(adopting):
    adopting.stack["installed"]["torch"] = "2.11.0"
    assert adopting.reasons() == ["torch 2.11.0 is installed in the virtualenv itself, where the adopted tree's "
                                  "(ml_stack_torch_from=%s) stands in for it" % TREE]


def test_an_adopted_tree_another_user_could_change_makes_it_act_naming_it(adopting):
    adopting.levels["/opt"] = dict(ROOTS, mode="0777")
    reasons = adopting.reasons()
    assert len(reasons) == 1 and "/opt is writable by its group or others (owner root, mode 0777)" in reasons[0]
    adopting.levels.clear()
    adopting.find = (0, TREE_SITE + "/torch/__init__.py\tsglang\t1000\t644\n", "")
    reasons = adopting.reasons()
    assert len(reasons) == 1 and "belongs to another user than root (owner sglang, uid 1000" in reasons[0]


def test_an_adopted_tree_that_cannot_be_inspected_makes_it_act(adopting):
    adopting.tree = (1, "", "PermissionError: [Errno 13] Permission denied: '/opt/torch-image'")
    reasons = adopting.reasons()
    assert len(reasons) == 1 and ("ml_stack_torch_from=/opt/torch-image could not be inspected as the service user: "
                                  "PermissionError") in reasons[0]


def test_adopting_without_a_lock_makes_it_act_naming_the_variable(adopting):
    adopting.lock = None
    reasons = adopting.reasons()
    assert len(reasons) == 1 and "ml_stack_torch_from=/opt/torch-image adopts a torch only into a locked" in reasons[0]
    assert not [argv for argv in adopting.ran if SCRIPTS["inspect_torch.py"] in argv]


def test_a_path_that_names_no_tree_makes_it_act_before_anything_runs(adopting):
    adopting.settings["torch_from"] = "opt/torch"
    assert adopting.reasons() == ["the settings or the host do not fit the profile: ml_stack_torch_from='opt/torch' "
                                  "is not the absolute path of a virtualenv (like /opt/torch/.venv) or of a "
                                  "site-packages directory: name one, or set it to null to install the profile's torch"]
    assert adopting.ran == []


def test_the_adopted_tree_is_read_as_the_virtualenvs_owner_never_as_root(adopting):
    adopting.users["sglang"]["uid"] = 65534
    adopting.check()
    inspect_torch = [argv for argv in adopting.ran if SCRIPTS["inspect_torch.py"] in argv]
    assert inspect_torch[0][:4] == ["runuser", "-u", "nobody", "--"]
