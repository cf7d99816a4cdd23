"""After the failed upgrade: rolled back, and nothing deleted; the new stack is left beside the old one."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from node import VENV  # noqa: E402 (after its directory is on the path)

testinfra_hosts = ["docker://upgrade-node"]


def test_both_virtualenvs_are_there(node):
    names = node.run("sh", "-c", "cd /opt && ls -d ml-env.*").split()
    assert [name.split(".")[1].split("-")[0] for name in names] == ["cu128", "cu130"]


def test_the_new_virtualenv_has_the_environment_that_failed(node):
    new = node.run("sh", "-c", "ls -d /opt/ml-env.cu130-*")
    seen = node.run("env", "-i", new + "/bin/python", "-c", "import os; print(os.environ.get('SGLANG_DISABLE_CUDNN_CHECK'))")
    assert seen == "None"


def test_the_failed_start_is_in_the_log_with_the_cudnn_check(node):
    state, _cmdline, _log = node.server()
    assert "PyTorch 2.9.1+cu130 | CuDNN 9.13" in node.host.file(state["log_path"]).content_string


def test_the_snapshot_is_root_only(node):
    snapshot = node.host.file("/var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json")
    assert snapshot.mode == 0o600 and snapshot.user == "root"
    assert snapshot.content_string.count(VENV) >= 1
