"""The node serves on cu128: before the upgrade, and again after the rollback."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from node import assert_runs  # noqa: E402 (after its directory is on the path)

testinfra_hosts = ["docker://upgrade-node"]


def test_the_node_runs_cu128_with_the_cudnn_check_disabled(node):
    environment = assert_runs(node, "cu128")
    assert environment["SGLANG_DISABLE_CUDNN_CHECK"] == "1"


@pytest.mark.parametrize("name", ["987_cuda-12.conf"])
def test_cuda_12_linker_files_are_enabled(node, name):
    assert node.host.file("/etc/ld.so.conf.d/" + name).exists
