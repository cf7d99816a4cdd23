"""plugins/modules/sglang_server.py: a tensor-parallel size above the GPUs the server would see is refused before
anything is started or written, on the GPUs nvidia-smi lists (the recorded 2x H200 host, replayed by
tests/fixtures/fake_nvidia_smi) narrowed by CUDA_VISIBLE_DEVICES."""
import json
import os
import socket
import sys
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.modules import sglang_server as module

FAKE_NVIDIA_SMI = Path(__file__).resolve().parents[3] / "fixtures" / "fake_nvidia_smi"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def result_of(args, capsys, monkeypatch):
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def server(tmp_path, monkeypatch):
    """The options of a server started by the module itself on the replayed 2x H200 host."""
    monkeypatch.setenv("PATH", "%s:%s" % (FAKE_NVIDIA_SMI, os.environ["PATH"]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (tmp_path / "model").mkdir()
    return dict(state="started", manager="module", python=sys.executable, model_path=str(tmp_path / "model"),
                log_path=str(tmp_path / "logs" / "server.log"), state_dir=str(tmp_path / "state"), port=free_port(),
                host="127.0.0.1")


def test_more_ranks_than_the_gpus_the_server_sees_fail_before_anything_changes(server, tmp_path, capsys, monkeypatch):
    result = result_of(dict(server, tensor_parallel_size=2, env={"CUDA_VISIBLE_DEVICES": "GPU-7c14"}), capsys,
                       monkeypatch)
    assert result["failed"] and result["msg"] == (
        "Nothing was changed: tensor_parallel_size=2 needs 2 GPU(s) on this node, but the server would see 1 (GPU(s) "
        "GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014 of the host's 2, as CUDA_VISIBLE_DEVICES='GPU-7c14' in env "
        "(sglang_server_env in the role) leaves visible): lower tensor_parallel_size (sglang_server_tensor_parallel_size "
        "in the role) to 1 or less, or name more of the host's GPUs (indices or UUIDs) in CUDA_VISIBLE_DEVICES, or "
        "leave it unset for all of them")
    assert not (tmp_path / "state").exists() and not (tmp_path / "logs").exists()


def test_ranks_that_each_have_a_gpu_pass_the_check(server, capsys, monkeypatch):
    result = result_of(dict(server, tensor_parallel_size=2, _ansible_check_mode=True), capsys, monkeypatch)
    assert not result.get("failed") and result["changed"], result


def test_without_nvidia_smi_sglang_judges_the_size(server, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(module.AnsibleModule, "get_bin_path", lambda self, name, *args, **kwargs: None)
    result = result_of(dict(server, tensor_parallel_size=8, _ansible_check_mode=True), capsys, monkeypatch)
    assert not result.get("failed"), result
