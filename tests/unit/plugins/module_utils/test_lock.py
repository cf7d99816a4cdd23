"""Stack locks (plugins/module_utils/_stack/lock.py): read and checked against the profile, the environment a node
needs, the requirement lines with their hashes, torch's own closure, a virtualenv compared with the lock, and
pip's refusal of a wheel whose hash is not the lock's."""
import copy
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import (
    LockError,
    closure,
    compare,
    describe,
    environment,
    environment_problem,
    hash_mismatches,
    indexes,
    problems,
    read,
    requirement_lines,
    wheels_for,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import profile_versions
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
PROFILE = resolve("sglang-0.5.17-cu130", PROFILES)
PINS = profile_versions(PROFILE)
PATH = "/srv/locks/sglang-0.5.17-cu130.json"
TEXT = (ROOT / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()
LOCK = dict(json.loads(TEXT), path=PATH)
TORCH_311 = "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
KERNEL = "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl"
KERNEL_URL = "https://github.com/sgl-project/whl/releases/download/v0.4.5/" + KERNEL
PYTHON_311 = {"version": "3.11.2", "implementation": "cpython", "machine": "x86_64"}


def sha(lock, name, wheel):
    return lock["distributions"][name]["wheels"][wheel]["sha256"]


def changed(change):
    lock = copy.deepcopy(LOCK)
    change(lock)
    return lock


# Read and checked.

def test_a_lock_that_fits_the_profile_is_read_with_its_path():
    assert read(TEXT, PATH, PROFILE, PINS) == LOCK


def test_the_profile_pins_sgl_kernel_under_its_own_distribution_name():
    assert PINS == {"torch": "2.11.0", "sglang-kernel": "0.4.5", "flashinfer-python": "0.6.15.post1",
                    "sglang": "0.5.17"}


def test_a_lock_of_an_alias_of_the_profile_is_the_profiles():
    profile = dict(PROFILE, aliases=["site-stack"])
    assert problems(dict(LOCK, profile="site-stack"), profile, PINS) == []


@pytest.mark.parametrize("text, named", [
    (None, "does not exist on the controller, or cannot be read"),
    ("{", "is not JSON"),
    ("[]", "it is not a JSON object"),
    (json.dumps(dict(json.loads(TEXT), format=2)), "format=2; this collection reads format 1"),
    (json.dumps(dict(json.loads(TEXT), profile="cu130")), "profile='cu130': it is the lock of another profile"),
])
def test_a_lock_that_cannot_be_used_is_refused_naming_the_file_and_the_fix(text, named):
    with pytest.raises(LockError) as refused:
        read(text, PATH, PROFILE, PINS)
    message = str(refused.value)
    assert named in message
    assert message.startswith("The lock %s (python.lock=sglang-0.5.17-cu130.json of stack profile "
                              "sglang-0.5.17-cu130)" % PATH)
    assert message.endswith("Make it with make stack-lock (hacking/stack_lock.py), or set "
                            "stack_profiles_custom.sglang-0.5.17-cu130.python.lock to null to install without a lock.")


def drop(*keys):
    def change(lock):
        value = lock
        for key in keys[:-1]:
            value = value[key]
        del value[keys[-1]]
    return change


def put(value, *keys):
    def change(lock):
        place = lock
        for key in keys[:-1]:
            place = place[key]
        place[keys[-1]] = value
    return change


TORCH_WHEEL = ("distributions", "torch", "wheels", TORCH_311)


@pytest.mark.parametrize("change, named", [
    (drop(*TORCH_WHEEL + ("sha256",)),
     "distributions.torch.wheels[%s].sha256=None is not 64 lowercase hexadecimal digits: the wheel has no hash"
     % TORCH_311),
    (put("ABC", *TORCH_WHEEL + ("sha256",)), "sha256='ABC' is not 64 lowercase hexadecimal digits"),
    (put("https://example.org/a b.whl", *TORCH_WHEEL + ("url",)), "is not an http(s):// or file:// URL"),
    (put("https://mirror.example/simple", *TORCH_WHEEL + ("index",)),
     "index='https://mirror.example/simple' is not null and not one of the lock's indexes"),
    (put(["cp39-x86_64"], *TORCH_WHEEL + ("environments",)), "is not a non-empty list of the lock's environments"),
    (put(["cp311-x86_64", "cp312-x86_64"], *TORCH_WHEEL + ("environments",)),
     "distributions.torch has 2 wheels for cp312-x86_64"),
    (put(["sympy", "cuda-toolkit"], "distributions", "torch", "requires"), "is not a list of the lock's distributions"),
    (put("2.11.0\ntriton==9", "distributions", "torch", "version"), "is not a version"),
    (put({"version": "1.0", "requires": [], "wheels": {"a-1.0-py3-none-any.whl": {}}}, "distributions", "Typing_Ext"),
     "'Typing_Ext' is not a PEP 503-normalized name"),
    (lambda lock: lock["distributions"]["numpy"]["wheels"].update(
        {"scipy-1.0-py3-none-any.whl": lock["distributions"]["numpy"]["wheels"].pop(
            "numpy-2.3.5-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")}),
     "is not the file name of a wheel of numpy"),
    (put("https://example.org/other.whl", "distributions", "sglang-kernel", "wheels", KERNEL, "url"),
     "is installed from that URL, and names another file"),
    (put({}, "distributions", "mpmath", "wheels"), "distributions.mpmath.wheels is not a non-empty mapping"),
    (put("2.10.0", "distributions", "torch", "version"), "it has torch 2.10.0, the profile pins 2.11.0"),
    (lambda lock: lock["environments"].append("cp313-x86_64"), "it has no wheel of sglang for cp313-x86_64"),
    (put(["cp312-x86_64", "cp312-x86_64"], "environments"), "is not a non-empty list of environments like"),
    (put(["cp312-arm64"], "environments"), "is not a non-empty list of environments like"),
    (put(["pypi.org/simple"], "indexes"), "indexes=['pypi.org/simple'] is not a list of http(s):// or file:// URLs"),
    (put([], "requirements"), "requirements=[] is not a non-empty list of requirements"),
    (put({}, "distributions"), "distributions is not a non-empty mapping"),
])
def test_every_field_is_checked_naming_it(change, named):
    found = problems(changed(change), PROFILE, PINS)
    assert any(named in problem for problem in found), found


def test_a_package_the_profile_pins_and_the_lock_lacks_is_named():
    profile = copy.deepcopy(PROFILE)
    profile["python"]["flashinfer_cubin"]["version"] = "0.6.15"
    assert problems(LOCK, profile, profile_versions(profile)) == [
        "it has no flashinfer-cubin, which the profile pins at 0.6.15"]


def test_every_problem_is_named_at_once():
    lock = changed(drop(*TORCH_WHEEL + ("sha256",)))
    lock["distributions"]["numpy"]["version"] = "2.3.5 --hash=sha256:0"
    assert len(problems(lock, PROFILE, PINS)) == 2


# The node's environment.

@pytest.mark.parametrize("python, expected", [
    (PYTHON_311, "cp311-x86_64"),
    ({"version": "3.10.12", "machine": "aarch64"}, "cp310-aarch64"),
    ({"version": "3.13.0rc1", "machine": "x86_64"}, "cp313-x86_64"),
])
def test_the_environment_is_the_interpreters_release_and_machine(python, expected):
    assert environment(python) == expected


def test_an_environment_the_lock_lacks_is_refused_naming_profile_environment_the_locked_ones_and_the_tool():
    python = {"version": "3.13.1", "machine": "x86_64"}
    assert environment_problem(LOCK, "sglang-0.5.17-cu130", python, "/usr/bin/python3.13") == (
        "stack profile sglang-0.5.17-cu130 is locked (%s) for cp311-x86_64, cp312-x86_64, not for cp313-x86_64, "
        "which ml_stack_python=/usr/bin/python3.13 is (Python 3.13.1 on x86_64): make a lock for it too with make "
        "stack-lock (hacking/stack_lock.py), or point ml_stack_python at a Python of one of those" % PATH)
    assert environment_problem(LOCK, "sglang-0.5.17-cu130", PYTHON_311, "/usr/bin/python3") is None


# What a node installs.

def test_each_distribution_installs_the_one_wheel_of_its_environment():
    wheels = wheels_for(LOCK, "cp311-x86_64")
    assert [wheel["distribution"] for wheel in wheels] == [
        "filelock", "flashinfer-python", "huggingface-hub", "mpmath", "numpy", "nvidia-cublas", "sglang",
        "sglang-kernel", "sympy", "torch", "triton"]
    torch = [wheel for wheel in wheels if wheel["distribution"] == "torch"][0]
    assert torch == {"distribution": "torch", "version": "2.11.0", "wheel": TORCH_311,
                     "sha256": sha(LOCK, "torch", TORCH_311), "index": "https://pypi.org/simple",
                     "url": LOCK["distributions"]["torch"]["wheels"][TORCH_311]["url"]}
    # torch needs setuptools from Python 3.12 on only.
    assert "setuptools" in [wheel["distribution"] for wheel in wheels_for(LOCK, "cp312-x86_64")]


def test_requirement_lines_pin_each_wheel_by_its_hash_from_the_index_or_its_url_through_the_mirrors():
    wheels = [wheel for wheel in wheels_for(LOCK, "cp311-x86_64") if wheel["distribution"] in ("torch", "sglang-kernel")]
    mirrors = {"https://github.com/sgl-project/whl/": "https://mirror.example/whl/"}
    assert requirement_lines(wheels, mirrors) == [
        "sglang-kernel @ https://mirror.example/whl/releases/download/v0.4.5/%s --hash=sha256:%s"
        % (KERNEL, sha(LOCK, "sglang-kernel", KERNEL)),
        "torch==2.11.0 --hash=sha256:%s" % sha(LOCK, "torch", TORCH_311),
    ]
    assert requirement_lines(wheels, mirrors, "/srv/wheels")[0] == (
        "sglang-kernel @ file:///srv/wheels/%s --hash=sha256:%s" % (KERNEL, sha(LOCK, "sglang-kernel", KERNEL)))


def test_the_indexes_are_the_lock_s_that_the_wheels_come_from_in_its_order():
    lock = dict(LOCK, indexes=["https://download.pytorch.org/whl/cu130", "https://pypi.org/simple"])
    assert indexes(lock, wheels_for(LOCK, "cp311-x86_64")) == ["https://pypi.org/simple"]
    kernel = [wheel for wheel in wheels_for(LOCK, "cp311-x86_64") if wheel["distribution"] == "sglang-kernel"]
    assert indexes(lock, kernel) == []


# torch's own closure, for adopting a host's torch.

def test_torchs_closure_is_what_only_torch_needs_a_fixpoint():
    # filelock is huggingface-hub's too, sympy sglang's too, and mpmath then sympy's, outside the closure.
    assert closure(LOCK, "torch") == ["nvidia-cublas", "setuptools", "torch", "triton"]
    assert closure(LOCK, "torch", "cp311-x86_64") == ["nvidia-cublas", "torch", "triton"]


def test_a_requirement_only_the_closure_has_stays_in_it_and_another_distribution_has_none():
    lock = changed(put(["filelock", "nvidia-cublas", "sympy", "triton"], "distributions", "torch", "requires"))
    lock["distributions"]["sglang"]["requires"].remove("sympy")
    assert closure(lock, "torch") == ["mpmath", "nvidia-cublas", "sympy", "torch", "triton"]
    assert closure(LOCK, "mpmath") == ["mpmath"]
    assert closure(LOCK, "sglang") == ["filelock", "flashinfer-python", "huggingface-hub", "mpmath", "numpy",
                                       "nvidia-cublas", "setuptools", "sglang", "sglang-kernel", "sympy", "torch",
                                       "triton"]
    assert closure(LOCK, "cuda-toolkit") == []
    assert closure(LOCK, "setuptools", "cp311-x86_64") == []


# A virtualenv against the lock.

def installed_311(**changes):
    found = dict((wheel["distribution"], wheel["version"]) for wheel in wheels_for(LOCK, "cp311-x86_64"))
    found.update(pip="23.0.1", setuptools="66.1.1")
    found.update(changes)
    return dict((name, version) for name, version in found.items() if version is not None)


def test_exactly_the_lock_and_ensurepips_own_distributions_differ_in_nothing():
    assert describe(compare(installed_311(), wheels_for(LOCK, "cp311-x86_64"))) == []


def test_a_missing_a_changed_and_an_extra_distribution_are_each_named():
    found = installed_311(numpy="2.3.4", mpmath=None, requests="2.32.5")
    assert describe(compare(found, wheels_for(LOCK, "cp311-x86_64"))) == [
        "mpmath is not installed (the lock pins 1.3.0)",
        "numpy is 2.3.4, the lock pins 2.3.5",
        "requests 2.32.5 is installed, and the lock has no requests",
    ]


def test_names_are_compared_normalized_and_ensurepips_setuptools_counts_where_the_lock_has_one():
    found = installed_311(**{"Huggingface_Hub": "0.36.0"})
    del found["huggingface-hub"]
    assert compare(found, wheels_for(LOCK, "cp311-x86_64")) == {"missing": [], "changed": [], "extra": []}
    assert compare(found, wheels_for(LOCK, "cp312-x86_64"))["changed"] == [("setuptools", "66.1.1", "80.9.0")]


# pip's refusal of a wheel whose hash is not the lock's, as pip 23 prints it.

GOT = "52c7ef21369d1df28b3ca4af122dc34ab85c55f1d6daa07a64e4c96cc5166087"
EXPECTED = "fa7ae5c89c6966a4cd9c70509470cb94a78844132e7b3183da9a707e4f41abdb"
REFUSED = """ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package \
versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered \
with them.
    flashinfer-python==0.6.15.post1 from file:///opt/index/pypi/files/flashinfer_python-0.6.15.post1-py3-none-any.whl\
#sha256=%s (from -r /home/sglang/ml-env.x/ml-stack-requirements.txt (line 2)):
        Expected sha256 %s
             Got        %s

    sglang-kernel@ https://mirror.example/whl/%s from https://mirror.example/whl/%s (from -r r.txt (line 8)):
        Expected sha256 %s
                     or %s
             Got        %s
""" % (EXPECTED, EXPECTED, GOT, KERNEL, KERNEL, "1" * 64, "2" * 64, "3" * 64)


def test_each_wheel_pip_refused_for_its_hash_is_named_with_both_hashes_and_where_it_came_from():
    assert hash_mismatches(REFUSED) == [
        {"name": "flashinfer-python", "expected": [EXPECTED], "got": GOT,
         "url": "file:///opt/index/pypi/files/flashinfer_python-0.6.15.post1-py3-none-any.whl"},
        {"name": "sglang-kernel", "expected": ["1" * 64, "2" * 64], "got": "3" * 64,
         "url": "https://mirror.example/whl/" + KERNEL},
    ]


def test_other_pip_failures_are_no_hash_mismatch():
    assert hash_mismatches("ERROR: Could not find a version that satisfies the requirement torch==2.11.0") == []
    assert hash_mismatches(None) == []
