"""plugins/modules/sglang_diagnosis.py: the launch looked at is judged on the GPU memory it started with, as the
readiness gate judged it (capacity.judge_launch), and a degraded start is warned about and ends the verdict."""
import json
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import capacity
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import Instance
from ansible_collections.blackwell.gpu_node.plugins.modules import sglang_diagnosis as module

MEMORY = Path(__file__).resolve().parents[3] / "data" / "sglang_logs" / "memory"
ARGV = ["/opt/ml-env/bin/python", "-m", "sglang.launch_server", "--api-key", "sk-diag-2"]
HOLDER = {"pid": 4242, "user": "alice", "command": "python3 serve.py --api-key sk-diag-2", "used_memory_mib": 79000,
          "gpu_uuid": "GPU-0"}


def result_of(args, capsys, monkeypatch):
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    # What the module warns, as it warned it: a module's warnings reach its result only where no controller code was
    # imported into the process (ansible-core 2.19), which other tests do.
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning, **kwargs: warned.append(warning))
    with pytest.raises(SystemExit):
        module.main()
    return dict(json.loads(capsys.readouterr().out), warned=warned)


def two_launches(tmp_path):
    """A clean launch recorded as the last good one, then a launch of the same command beside a holder; neither
    runs (pids no process has)."""
    instance = Instance(str(tmp_path / "state"), "sglang")
    log = tmp_path / "server.log"
    offset = 0
    for pid, name, holders in ((999991, "built-0.5.17-h100-tp1-clean.log", []),
                               (999992, "built-0.5.17-h100-tp1-beside-holder.log", [HOLDER])):
        text = (MEMORY / name).read_text()
        with open(str(log), "a") as handle:
            handle.write(text)
        launch = dict(pid=pid, start_time=pid, offset=offset, log_path=str(log), started_at=0.0, boot_id="b",
                      argv=ARGV, env_digest="e", argv_digest=capacity.command_digest(ARGV), gpu_holders=holders)
        instance.save(launch)
        instance.record_launch(launch)
        capacity.gate(instance, instance.launch_of(pid, offset), capacity.startup_memory(text.splitlines()))
        offset += len(text)
    return {"state_dir": str(tmp_path / "state"), "probe": "none", "kernel_log": False, "gpu_processes": False}


def test_a_launch_beside_a_holder_is_reported_degraded_with_both_figures(tmp_path, capsys, monkeypatch):
    result = result_of(two_launches(tmp_path), capsys, monkeypatch)
    found = result["capacity"]
    assert found["degraded"] and found["kv_tokens"] == 405968 and found["last_good"]["kv_tokens"] == 20542816
    assert found["holders"][0]["command"] == "python3 serve.py --api-key ********"
    assert "sk-diag-2" not in json.dumps(result)
    assert result["verdict"].endswith("; " + found["message"])
    assert result["verdict"].startswith("not running; the latest launch got ready, then ended")
    assert result["warned"] == [found["message"]]


def test_the_launch_before_is_its_own_last_good_launch(tmp_path, capsys, monkeypatch):
    result = result_of(dict(two_launches(tmp_path), launch=1), capsys, monkeypatch)
    found = result["capacity"]
    assert found["last_good_is_this_launch"] and not found["degraded"] and found["message"] is None
    assert "Degraded" not in result["verdict"] and result["warned"] == []


def test_a_ratio_outside_0_to_1_is_refused(tmp_path, capsys, monkeypatch):
    result = result_of(dict(two_launches(tmp_path), degraded_ratio=-1.0), capsys, monkeypatch)
    assert result["failed"] is True and "degraded_ratio=-1.0: give the share" in result["msg"]
