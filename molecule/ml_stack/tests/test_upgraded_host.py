"""The host that had cu128 before: the upgrade kept the old virtualenv, and pip in the new one cannot replace
torch the way a plain virtualenv lets it (the trap of the reference story, reproduced with the same wheels)."""
import json
import os
import shlex

import pytest

testinfra_hosts = ["docker://ml-stack-online"]

INDEX = os.environ["BLACKWELL_STACK_INDEX"]
PYPI = "file://%s/pypi/simple" % INDEX
# What someone does when flashinfer misbehaves: reinstall or upgrade it from PyPI.
NAIVE_FLASHINFER_INSTALLS = {
    "force-reinstall": ["install", "--force-reinstall", "flashinfer-python==0.6.4", "--index-url", PYPI],
    "eager-upgrade": ["install", "-U", "--upgrade-strategy", "eager", "flashinfer-python==0.6.4", "--index-url", PYPI],
}


def run(host, *argv):
    result = host.run(shlex.join(argv))
    assert result.rc == 0, result.stderr
    return result.stdout


def as_user(*argv):
    """argv run as the service user: the virtualenvs are the user's, and a test runs their code as the user too."""
    return ("runuser", "-u", "sglang", "--") + argv


def torch_of(host, python):
    return run(host, *as_user(python, "-c", "import torch; print(torch.__version__, torch.version.cuda)")).split()


def test_code_the_service_user_planted_in_its_virtualenv_never_ran_as_root(host):
    # prepare planted zz_planted.pth in the cu128 virtualenv as the service user, then ran ml_stack (inspection,
    # pip, verification) and runtime_env (inspection, proof) on it again: each interpreter start ran the file.
    uid = host.user("sglang").uid
    assert not host.file("/tmp/planted-ran-as-0").exists
    assert host.file("/tmp/planted-ran-as-%d" % uid).exists


@pytest.mark.parametrize("command", sorted(NAIVE_FLASHINFER_INSTALLS))
def test_a_plain_virtualenv_lets_a_flashinfer_install_replace_the_cu130_torch(host, command):
    naive = "/tmp/naive-" + command
    run(host, "python3", "-m", "venv", "--clear", naive)
    run(host, naive + "/bin/pip", "install", "-q", "torch==2.9.1+cu130", "--index-url", "file://%s/pytorch-cu130/simple" % INDEX)
    assert torch_of(host, naive + "/bin/python") == ["2.9.1+cu130", "13.0"]
    run(host, naive + "/bin/pip", *NAIVE_FLASHINFER_INSTALLS[command])
    # The newest torch of the index (PyPI's 2.14.1, which SGLang 0.5.23 pins) replaces the one the stack pinned.
    assert torch_of(host, naive + "/bin/python") == ["2.14.1+cu130", "13.0"]


@pytest.mark.parametrize("command", sorted(NAIVE_FLASHINFER_INSTALLS))
def test_pip_in_the_roles_virtualenv_keeps_the_cu130_torch(host, command):
    attempt = host.run(shlex.join(as_user("/home/sglang/ml-env/bin/pip", *NAIVE_FLASHINFER_INSTALLS[command])))
    if command == "force-reinstall":
        # Reinstalling torch from PyPI would need a torch the pins forbid: pip refuses the whole install.
        assert attempt.rc != 0 and "ResolutionImpossible" in attempt.stderr
    assert torch_of(host, "/home/sglang/ml-env/bin/python") == ["2.9.1+cu130", "13.0"]


def test_the_cu128_virtualenv_is_kept_beside_the_new_one(host):
    kept = run(host, "find", "/home/sglang", "-maxdepth", "1", "-name", "ml-env.cu128-*").split()
    assert len(kept) == 1
    assert json.loads(host.file(kept[0] + "/ml-stack.json").content_string)["profile"] == "cu128"
    assert torch_of(host, kept[0] + "/bin/python") == ["2.9.1+cu128", "12.8"]
    code = "import importlib.metadata as m; print(m.version('flashinfer-python'), m.version('sglang'))"
    assert run(host, *as_user(kept[0] + "/bin/python", "-c", code)).split() == ["0.6.4", "0.5.9"]


def test_no_index_answered_the_idempotence_run(host):
    # converge stopped the package indexes; the second converge had to succeed without asking one.
    assert not host.socket("tcp://127.0.0.1:28141").is_listening


def test_repairing_a_virtualenv_did_not_hand_a_linked_root_directory_to_its_owner(host):
    # prepare planted site-packages/planted -> /srv/root-owned in the cu128 virtualenv and had the role repair it.
    planted = run(host, "sh", "-c", "ls -d /home/sglang/ml-env.cu128-*/lib/python3.11/site-packages/planted").split()
    assert len(planted) == 1
    assert host.file(planted[0]).is_symlink
    # testinfra's File.user follows links; stat without -L shows the link's own owner, which the chown changed.
    assert run(host, "stat", "-c", "%U:%G", planted[0]).strip() == "sglang:sglang"
    assert run(host, "stat", "-c", "%U:%G", "/srv/root-owned", "/srv/root-owned/file").split() == ["root:root"] * 2
