"""After the fixed upgrade (and a third run): the node serves on cu130; one old stack is kept."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from node import VENV, assert_runs  # noqa: E402 (after its directory is on the path)

testinfra_hosts = ["docker://upgrade-node"]


def test_the_node_runs_cu130(node):
    environment = assert_runs(node, "cu130")
    assert environment["SGLANG_DISABLE_CUDNN_CHECK"] == "1"


def test_cuda_12_linker_files_are_disabled(node):
    assert not node.host.file("/etc/ld.so.conf.d/987_cuda-12.conf").exists
    assert node.host.file("/etc/ld.so.conf.d/987_cuda-12.conf.disabled-by-blackwell-gpu-node").exists


def test_the_old_stack_is_kept_for_the_next_rollback(node):
    names = node.run("sh", "-c", "cd /opt && ls -d ml-env.*").split()
    assert [name.split(".")[1].split("-")[0] for name in names] == ["cu128", "cu130"]


def test_the_snapshot_is_of_the_old_stack_serving_and_no_switch_or_lock_is_left(node):
    """Three interrupted runs before the fixed one: none took the snapshot again of the half-switched node."""
    snapshot = json.loads(node.host.file("/var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json").content_string)
    assert snapshot["venv"]["profile"] == "cu128"
    assert snapshot["server"]["argv"][:3] == [VENV + "/bin/python", "-m", "sglang.launch_server"]
    assert node.run("ls", "-A", "/var/lib/blackwell-gpu-node/upgrade") == ""


def test_the_snapshot_spoiled_before_a_rollback_was_set_aside_by_the_next_recording(node):
    spoiled = node.run("sh", "-c", "ls /var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json.refused-*").split()
    assert len(spoiled) == 1 and node.host.file(spoiled[0]).mode == 0o666
