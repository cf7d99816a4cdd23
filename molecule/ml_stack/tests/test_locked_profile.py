"""The online host's locked profile: exactly the fixture lock's wheels for its Python (cp311-x86_64), installed
by their sha256 from the requirements file the role keeps in the virtualenv, and nothing else but what ensurepip
put there; pip check finds nothing to explain."""
import json
import os
import re
import shlex

testinfra_hosts = ["docker://ml-stack-online"]

LINK = "/home/sglang/ml-env-locked"
PYTHON = LINK + "/bin/python"
ENVIRONMENT = "cp311-x86_64"
with open(os.path.join(os.environ["BLACKWELL_STACK_INDEX"], "locks", "sglang-0.5.17-cu130.json")) as lock_file:
    LOCK = json.load(lock_file)
WHEELS = dict((name, (distribution["version"], wheel["sha256"]))
              for name, distribution in LOCK["distributions"].items()
              for wheel in distribution["wheels"].values() if ENVIRONMENT in wheel["environments"])
PINNED = {"torch": "2.11.0", "sglang-kernel": "0.4.5", "flashinfer-python": "0.6.15.post1", "sglang": "0.5.17"}


def run(host, *argv):
    result = host.run(shlex.join(argv))
    assert result.rc == 0, result.stderr
    return result.stdout


def test_the_lock_holds_the_profiles_pins_for_this_python():
    assert dict((name, version) for name, (version, _sha256) in WHEELS.items()) == PINNED


def test_the_virtualenv_holds_exactly_the_lock_and_ensurepips_own(host):
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps(dict((d.metadata['Name'], d.version) for d in m.distributions())))")
    found = dict((re.sub(r"[-_.]+", "-", name).lower(), version)
                 for name, version in json.loads(run(host, PYTHON, "-c", code)).items())
    assert sorted(set(found) - set(PINNED)) == ["pip", "setuptools"]
    assert dict((name, found[name]) for name in PINNED) == PINNED


def test_the_requirements_file_pins_each_wheel_by_its_sha256_and_is_roots(host):
    requirements = host.file(LINK + "/ml-stack-requirements.txt")
    assert (requirements.user, requirements.group, requirements.mode) == ("root", "root", 0o644)
    lines = [line for line in requirements.content_string.splitlines() if not line.startswith("#")]
    assert lines == ["%s==%s --hash=sha256:%s" % (name, version, sha256)
                     for name, (version, sha256) in sorted(WHEELS.items())]


def test_pip_check_finds_nothing_and_torch_is_the_cuda_13_build(host):
    assert run(host, PYTHON, "-m", "pip", "check").strip() == "No broken requirements found."
    code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    assert json.loads(run(host, PYTHON, "-c", code)) == ["2.11.0+cu130", "13.0"]


def test_the_virtualenv_is_marked_complete_for_the_locked_profile(host):
    assert host.file(LINK).linked_to.startswith("/home/sglang/ml-env-locked.sglang-0.5.17-cu130-")
    marker = json.loads(host.file(LINK + "/ml-stack.json").content_string)
    assert (marker["profile"], marker["packages"], marker["wheels"]) == ("sglang-0.5.17-cu130", PINNED, {})
