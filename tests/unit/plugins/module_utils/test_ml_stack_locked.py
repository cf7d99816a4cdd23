"""The ml_stack core with a locked profile: one pip run of exactly the lock's wheels for the host's environment,
each by its hash; every distribution of the virtualenv compared with the lock; the wheelhouse of exactly the lock's
files; and a wheel whose hash is not the lock's explained, naming it."""
import copy
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import ml_stack as _ml_stack
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import wheels_for
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    PIP_OPTIONS,
    build_decision,
    build_plan,
    diagnose,
    managed_files,
    verdict,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
PROFILE = resolve("sglang-0.5.17-cu130", PROFILES)
PATH = "/srv/locks/sglang-0.5.17-cu130.json"
LOCK = dict(json.loads((ROOT / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()), path=PATH)
KERNEL = "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl"
KERNEL_URL = "https://github.com/sgl-project/whl/releases/download/v0.4.5/" + KERNEL
TORCH = "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
SETTINGS = {
    "venv_path": "/home/sglang/ml-env", "venv_owner": "sglang", "python": "/usr/bin/python3",
    "index_url": "https://pypi.org/simple", "index_mirrors": {}, "pip_environment": {}, "offline": False,
    "wheelhouse_path": "/var/cache/blackwell-gpu-node/wheelhouse", "wheelhouse_controller_path": None,
}
HOST = {
    "python": {"version": "3.11.2", "implementation": "cpython", "machine": "x86_64", "glibc": "2.36", "venv_error": None},
    "owner": True,
    "venv_path": {"exists": False, "islnk": False},
    "parent_exists": True,
}
WHEELS = wheels_for(LOCK, "cp311-x86_64")


def plan_of(lock=..., python=None, **settings):
    lock = LOCK if lock is ... else lock
    host = copy.deepcopy(HOST)
    host["python"].update(python or {})
    return build_plan(dict(SETTINGS, **settings), PROFILE, host, lock)


def sha(name):
    return [wheel["sha256"] for wheel in WHEELS if wheel["distribution"] == name][0]


def lines(text):
    return [line for line in text.splitlines() if not line.startswith("#")]


# The plan.

def test_a_locked_profile_is_installed_in_one_pip_run_of_hashed_requirements_without_dependencies():
    plan = plan_of()
    assert plan["problems"] == []
    assert plan["install"] == {"lock": ["install"] + PIP_OPTIONS + [
        "--require-hashes", "--no-deps", "--index-url", "https://pypi.org/simple",
        "-r", plan["venv_dir"] + "/ml-stack-requirements.txt"]}
    assert plan["lock"]["environment"] == "cp311-x86_64"
    assert plan["lock"]["path"] == PATH


def test_the_requirements_file_holds_each_wheel_of_the_environment_by_its_hash_and_is_roots():
    plan = plan_of()
    assert lines(plan["requirements"]) == [
        "filelock==3.20.0 --hash=sha256:" + sha("filelock"),
        "flashinfer-python==0.6.15.post1 --hash=sha256:" + sha("flashinfer-python"),
        "huggingface-hub==0.36.0 --hash=sha256:" + sha("huggingface-hub"),
        "mpmath==1.3.0 --hash=sha256:" + sha("mpmath"),
        "numpy==2.3.5 --hash=sha256:" + sha("numpy"),
        "nvidia-cublas==13.0.0.19 --hash=sha256:" + sha("nvidia-cublas"),
        "sglang==0.5.17 --hash=sha256:" + sha("sglang"),
        "sglang-kernel @ %s --hash=sha256:%s" % (KERNEL_URL, sha("sglang-kernel")),
        "sympy==1.14.0 --hash=sha256:" + sha("sympy"),
        "torch==2.11.0 --hash=sha256:" + sha("torch"),
        "triton==3.6.0 --hash=sha256:" + sha("triton"),
    ]
    assert plan["requirements"].startswith("# Written by blackwell.gpu_node.ml_stack from the lock "
                                           "sglang-0.5.17-cu130.json of stack profile sglang-0.5.17-cu130 for "
                                           "cp311-x86_64")
    assert plan["pins"] == [
        {"name": "ml-stack-constraints.txt", "content": plan["constraints"], "root": True},
        {"name": "pip.conf", "content": plan["pip_conf"], "root": True},
        {"name": "ml-stack-requirements.txt", "content": plan["requirements"], "root": True},
    ]
    assert [entry["name"] for entry in managed_files(plan, "")] == [
        "ml-stack-constraints.txt", "pip.conf", "ml-stack-requirements.txt", "ml-stack-pip-check.txt", "ml-stack.json"]


def test_every_locked_distribution_is_constrained_so_that_no_later_pip_run_replaces_one():
    assert lines(plan_of()["constraints"]) == ["%s===%s" % (wheel["distribution"], wheel["version"]) for wheel in WHEELS]


def test_the_mirrors_apply_to_the_lock_s_indexes_and_urls_and_each_other_index_is_an_extra_one():
    lock = copy.deepcopy(LOCK)
    lock["indexes"].append("https://download.pytorch.org/whl/cu130")
    for wheel in lock["distributions"]["triton"]["wheels"].values():
        wheel["index"] = "https://download.pytorch.org/whl/cu130"
    mirrors = {"https://pypi.org/simple": "http://127.0.0.1:1/pypi/simple",
               "https://github.com/sgl-project/whl/": "http://127.0.0.1:1/whl/"}
    plan = plan_of(lock, index_mirrors=mirrors)
    assert plan["install"]["lock"][len(PIP_OPTIONS) + 3:-2] == [
        "--index-url", "http://127.0.0.1:1/pypi/simple", "--extra-index-url", "https://download.pytorch.org/whl/cu130"]
    assert "sglang-kernel @ http://127.0.0.1:1/whl/releases/download/v0.4.5/%s --hash=sha256:%s" % (
        KERNEL, sha("sglang-kernel")) in lines(plan["requirements"])
    probes = dict((probe["url"], probe["origin"]) for probe in plan["sources"])
    assert probes["http://127.0.0.1:1/whl/releases/download/v0.4.5/" + KERNEL] == (
        "the URL of sglang-kernel in the lock %s=%s through ml_stack_index_mirrors" % (PATH, KERNEL_URL))
    assert probes["https://download.pytorch.org/whl/cu130"] == "an index of the lock %s" % PATH


def test_the_sources_probed_are_the_profiles_pinned_packages_as_the_lock_has_them():
    assert [(probe["url"], probe["project"], probe["version"]) for probe in plan_of()["sources"]] == [
        ("https://pypi.org/simple", "torch", "2.11.0"),
        (KERNEL_URL, None, None),
        ("https://pypi.org/simple", "flashinfer-python", "0.6.15.post1"),
        ("https://pypi.org/simple", "sglang", "0.5.17"),
    ]


def test_without_a_lock_the_profile_installs_as_before_under_its_kernels_distribution_name():
    plan = plan_of(lock=None)
    assert sorted(plan["install"]) == ["sglang", "stack"]
    assert plan["lock"] is None and "requirements" not in plan["files"]
    assert plan["versions"] == {"torch": "2.11.0", "sglang-kernel": "0.4.5", "flashinfer-python": "0.6.15.post1",
                                "sglang": "0.5.17"}
    assert "sglang-kernel===0.4.5" in plan["install"]["stack"]


def test_a_cuda_12_kernel_of_the_renamed_distribution_is_diagnosed_without_sgl_kernels_own_hint():
    error = "ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory"
    assert diagnose("sgl_kernel", error, plan_of()) == (
        "sgl_kernel wants libnvrtc.so.12: a CUDA 12 wheel on this CUDA 13.0 stack (profile sglang-0.5.17-cu130). "
        "Install the package from the profile's source, as this role does.")


def test_the_lock_is_part_of_the_virtualenvs_digest():
    locked, unlocked = plan_of(), plan_of(lock=None)
    assert locked["venv_name"].startswith("ml-env.sglang-0.5.17-cu130-")
    assert locked["digest"] != unlocked["digest"]
    assert plan_of(copy.deepcopy(LOCK))["digest"] == locked["digest"]
    rehashed = copy.deepcopy(LOCK)
    rehashed["distributions"]["mpmath"]["wheels"]["mpmath-1.3.0-py3-none-any.whl"]["sha256"] = "0" * 64
    assert plan_of(rehashed)["digest"] != locked["digest"]


def test_an_environment_the_lock_lacks_is_refused_before_anything_changes():
    assert plan_of(python={"version": "3.13.1"})["problems"] == [
        "stack profile sglang-0.5.17-cu130 is locked (%s) for cp311-x86_64, cp312-x86_64, not for cp313-x86_64, "
        "which ml_stack_python=/usr/bin/python3 is (Python 3.13.1 on x86_64): make a lock for it too with make "
        "stack-lock (hacking/stack_lock.py), or point ml_stack_python at a Python of one of those" % PATH]


def test_a_lock_that_does_not_fit_the_profile_is_a_problem_naming_it():
    lock = copy.deepcopy(LOCK)
    lock["distributions"]["torch"]["version"] = "2.10.0"
    assert plan_of(lock)["problems"] == [
        "the lock %s of stack profile sglang-0.5.17-cu130 cannot be used (it has torch 2.10.0, the profile pins "
        "2.11.0); make it anew with make stack-lock (hacking/stack_lock.py)" % PATH]


def test_a_locked_profile_on_torch_2_11_has_no_cudnn_check_whatever_cudnn_it_holds():
    plan = plan_of()
    assert plan["cudnn"] is None
    assert verdict(plan, {"state": state(**{"nvidia-cudnn-cu13": "9.13.0.50"})})["notes"] == []


def test_the_inspection_lists_every_distribution_of_a_locked_virtualenv():
    plan = plan_of()
    assert plan["inspect"] == {"distributions": list(plan["versions"]), "marker": plan["files"]["marker"],
                               "every_distribution": True}
    assert plan_of(lock=None)["inspect"]["every_distribution"] is False


# Offline: the wheelhouse holds exactly the lock's files.

def test_offline_the_lock_installs_from_the_wheelhouse_alone():
    plan = plan_of(offline=True, wheelhouse_path="/srv/wheels/")
    assert plan["install"]["lock"][len(PIP_OPTIONS) + 3:] == [
        "--no-index", "--find-links", "/srv/wheels", "-r", plan["venv_dir"] + "/ml-stack-requirements.txt"]
    assert "sglang-kernel @ file:///srv/wheels/%s --hash=sha256:%s" % (KERNEL, sha("sglang-kernel")) in lines(
        plan["requirements"])
    assert plan["sources"] == []


def test_the_controller_downloads_exactly_the_locks_files_by_their_hashes():
    plan = plan_of(offline=True, wheelhouse_controller_path="/srv/wheelhouses")
    download = plan["download"]
    assert download["folder"].startswith("/srv/wheelhouses/sglang-0.5.17-cu130-")
    assert download["folder"] != plan_of(lock=None, offline=True,
                                         wheelhouse_controller_path="/srv/wheelhouses")["download"]["folder"]
    assert "sglang" not in download and "stack" not in download
    assert download["requirements"]["path"] == download["folder"] + ".requirements.txt"
    # Online lines: the wheel only at its URL comes from that URL, not from a wheelhouse that has none yet.
    assert lines(download["requirements"]["content"]) == lines(plan_of()["requirements"])
    step = download["steps"][0]
    assert step[:len(PIP_OPTIONS) + 3] == ["download"] + PIP_OPTIONS + ["--dest", download["partial"]]
    assert step[-6:] == ["--require-hashes", "--no-deps", "--index-url", "https://pypi.org/simple",
                         "-r", download["requirements"]["path"]]
    assert ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"] == step[
        step.index("--python-version"):step.index("--python-version") + 6]


def test_a_wheelhouse_lacking_one_of_the_lock_s_files_is_a_problem_naming_the_file():
    plan = plan_of(offline=True)
    present = [wheel["wheel"] for wheel in WHEELS if wheel["distribution"] not in ("torch", "mpmath")]
    assert verdict(plan, {"wheelhouse": present})["problems"] == [
        "ml_stack_wheelhouse_path=/var/cache/blackwell-gpu-node/wheelhouse lacks wheels for: mpmath 1.3.0 "
        "(mpmath-1.3.0-py3-none-any.whl); torch 2.11.0 (%s); add them, or set ml_stack_wheelhouse_controller_path to "
        "have the controller download them" % TORCH]
    # Another torch of the same version is not the locked file.
    assert verdict(plan, {"wheelhouse": present + ["mpmath-1.3.0-py3-none-any.whl",
                                                   "torch-2.11.0-cp311-cp311-linux_x86_64.whl"]})["problems"]
    assert verdict(plan, {"wheelhouse": [wheel["wheel"] for wheel in WHEELS]})["problems"] == []


# The virtualenv against the lock.

def state(**installed):
    plan = plan_of()
    every = dict((wheel["distribution"], wheel["version"]) for wheel in WHEELS)
    every.update(pip="23.0.1", setuptools="66.1.1")
    every.update(installed)
    return {
        "versions": dict((name, every.get(name)) for name in plan["versions"]),
        "direct_urls": dict((name, KERNEL_URL if name == "sglang-kernel" else None) for name in plan["versions"]),
        "installed": dict((name, version) for name, version in every.items() if version is not None),
        "marker": plan["marker"],
    }


def test_exactly_the_lock_with_the_marker_is_exact():
    plan = plan_of()
    assert verdict(plan, {"state": state(), "marker": plan["marker"]}) == {
        "exact": True, "ok": True, "problems": [], "notes": []}


@pytest.mark.parametrize("installed, expected", [
    ({"numpy": "2.3.4"}, "numpy is 2.3.4, the lock pins 2.3.5"),
    ({"mpmath": None}, "mpmath is not installed (the lock pins 1.3.0)"),
    ({"requests": "2.32.5"}, "requests 2.32.5 is installed, and the lock has no requests"),
    ({"torch": "2.11.0+cu128"}, "torch is 2.11.0+cu128, the lock pins 2.11.0"),
])
def test_any_distribution_missing_changed_or_not_in_the_lock_is_not_exact_and_named(installed, expected):
    plan = plan_of()
    result = verdict(plan, {"state": state(**installed), "marker": plan["marker"]})
    assert not result["exact"]
    assert result["problems"] == [expected]


def test_a_locked_virtualenv_inspected_without_its_every_distribution_is_not_exact():
    plan = plan_of()
    partial = dict(state())
    del partial["installed"]
    assert verdict(plan, {"state": partial, "marker": plan["marker"]})["problems"] == [
        "the inspection did not list every distribution of the virtualenv"]


def test_a_wheel_only_at_its_url_installed_from_an_index_is_not_the_locks():
    plan = plan_of()
    found = state()
    found["direct_urls"]["sglang-kernel"] = None
    assert verdict(plan, {"state": found, "marker": plan["marker"]})["problems"] == [
        "sglang-kernel was installed from an index, not from the profile's wheel " + KERNEL]


def test_a_repair_uninstalls_what_the_lock_does_not_name():
    plan = plan_of()
    decision = build_decision(plan, {"exists": True, "owner": "sglang"}, state(requests="2.32.5", numpy="2.3.4"),
                              "sglang")
    assert decision == {"new": False, "build": True, "chown": False, "remove": ["requests"],
                        "reasons": ["numpy is 2.3.4, the lock pins 2.3.5",
                                    "requests 2.32.5 is installed, and the lock has no requests"]}
    assert build_decision(plan, {"exists": False, "owner": None}, {}, "sglang")["remove"] == []


VERIFIED = {"torch": {"ok": True, "version": "2.11.0+cu130", "cuda": "13.0"}, "sgl_kernel": {"ok": True},
            "flashinfer": {"ok": True}, "sglang": {"ok": True}}
# A line the reference profiles cause on purpose: a pinned package at its pinned version.
SGLANG_PIN = "sglang 0.5.17 has requirement flashinfer_python==0.6.14, but you have flashinfer-python 0.6.15.post1.\n"


def test_a_locked_virtualenv_passes_pip_check_with_nothing_on_purpose():
    plan = plan_of()
    clean = verdict(plan, {"verification": {"modules": VERIFIED, "pip_check": "No broken requirements found.\n"}})
    assert clean["ok"] and clean["deliberate"] == []
    conflict = verdict(plan, {"verification": {"modules": VERIFIED, "pip_check": SGLANG_PIN}})
    assert conflict["problems"] == ["pip check reports problems the profile does not explain: " + SGLANG_PIN.strip()]


def test_a_lock_of_a_reference_profile_keeps_its_deliberate_pip_check_lines(monkeypatch):
    monkeypatch.setattr(_ml_stack, "REFERENCE_PROFILES", ("sglang-0.5.17-cu130",))
    result = verdict(plan_of(), {"verification": {"modules": VERIFIED, "pip_check": SGLANG_PIN}})
    assert result["ok"] and result["deliberate"] == [SGLANG_PIN.strip()]


# A wheel tampered with.

def test_a_wheel_whose_hash_is_not_the_lock_s_is_refused_naming_it_both_hashes_and_that_nothing_was_activated():
    got = "52c7ef21369d1df28b3ca4af122dc34ab85c55f1d6daa07a64e4c96cc5166087"
    wheel = "flashinfer_python-0.6.15.post1-py3-none-any.whl"
    url = "file:///opt/cases/tampered/index/pypi/files/" + wheel
    output = ("ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the "
              "package versions, please update the hashes. Otherwise, examine the package contents carefully; someone "
              "may have tampered with them.\n"
              "    flashinfer-python==0.6.15.post1 from %s#sha256=%s (from -r /x/ml-stack-requirements.txt (line 2)):\n"
              "        Expected sha256 %s\n"
              "             Got        %s\n\n" % (url, sha("flashinfer-python"), sha("flashinfer-python"), got))
    assert verdict(plan_of(), {"pip_output": output})["problems"] == [
        "pip refused flashinfer-python: the file it got (%s) has sha256 %s, and the lock %s pins flashinfer-python "
        "0.6.15.post1 as %s with sha256 %s. It is not the file that was locked: someone replaced or tampered with it "
        "at the index, the mirror or the wheelhouse. Nothing was installed from it and nothing was activated. Have "
        "the source serve the locked file, or make the lock anew with make stack-lock (hacking/stack_lock.py) once "
        "the new file is trusted" % (url, got, PATH, wheel, sha("flashinfer-python"))]
    assert verdict(plan_of(), {"pip_output": "ERROR: No matching distribution found for torch==2.11.0"})["problems"] == []
