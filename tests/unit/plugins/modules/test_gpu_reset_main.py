"""plugins/modules/gpu_reset.py: a thin shell over the gpu_reset core, each nvidia-smi call bounded by its timeout,
refusing an empty list of GPUs and failing with what it found when a process holds a GPU."""
import json
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.modules import gpu_reset as module

GPU = {"index": 0, "bus_id": "00000000:3B:00.0"}


def result_of(args, capsys, monkeypatch):
    # How a module receives its arguments on every supported core, ansible-core 2.15 on Python 3.9 included.
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # ansible-core 2.19 decodes them by a named profile; older cores have none.
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def node(monkeypatch):
    """A node with one GPU at index 0; what run_answered was asked (argv, timeout) and device_holders excluded."""
    seen = dict(calls=[], holders={}, excluded=[])

    def run_answered(argv, timeout):
        seen["calls"].append((argv, timeout))
        if argv[1].startswith("--query-gpu"):
            return 0, "0, 00000000:3B:00.0\n", ""
        if argv[1].startswith("--query-compute-apps"):
            return 0, "", ""
        return 0, "GPU 00000000:3B:00.0 was successfully reset.\n", ""

    def device_holders(patterns, exclude):
        seen["excluded"].append(exclude)
        return seen["holders"]
    monkeypatch.setattr(module, "run_answered", run_answered)
    monkeypatch.setattr(module, "device_holders", device_holders)
    monkeypatch.setattr(module, "read_information", lambda key: "Device Minor: \t 0\n")
    monkeypatch.setattr(module, "name_of", lambda pid: "nvidia-persistenced")
    monkeypatch.setattr(module.AnsibleModule, "get_bin_path", lambda self, name, *args, **kwargs: "/usr/bin/" + name)
    return seen


def test_the_gpu_is_reset_each_call_bounded_and_this_process_is_no_holder(node, capsys, monkeypatch):
    result = result_of({"gpus": [GPU], "timeout": 30}, capsys, monkeypatch)
    assert (result["changed"], result["reset"]) == (True, [dict(GPU, output="GPU 00000000:3B:00.0 was successfully "
                                                                            "reset.")])
    assert [timeout for _argv, timeout in node["calls"]] == [30, 30, 30]
    assert node["calls"][-1][0] == ["/usr/bin/nvidia-smi", "-r", "-i", "0"]
    assert node["excluded"] == [(os.getpid(),)]


def test_a_held_gpu_fails_naming_the_holder_and_returns_what_was_found(node, capsys, monkeypatch):
    node["holders"] = {1500: ["/dev/nvidia0"]}
    result = result_of({"gpus": [GPU]}, capsys, monkeypatch)
    assert result["failed"] is True and result["changed"] is False
    assert "pid 1500 (nvidia-persistenced) has /dev/nvidia0" in result["msg"]
    assert result["holders"] == [dict(pid=1500, name="nvidia-persistenced", holds="/dev/nvidia0")]
    assert "problem" not in result


@pytest.mark.parametrize("args, message", [
    ({"gpus": []}, "gpus: name at least one GPU to reset"),
    ({"gpus": [GPU], "timeout": 0}, "timeout=0: give the seconds each nvidia-smi call may take, more than 0"),
])
def test_bad_input_fails_before_anything_runs(node, capsys, monkeypatch, args, message):
    assert result_of(args, capsys, monkeypatch)["msg"] == message
    assert node["calls"] == []
