"""plugins/modules/wait_for_server.py with name: a server that got ready is judged on the GPU memory it started
with (capacity.gate): a warning for a degraded start, a failure with degraded_start=fail, and its last good launch
recorded when it was not degraded."""
import json
import os
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import capacity
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import Instance
from ansible_collections.blackwell.gpu_node.plugins.modules import wait_for_server as module

MEMORY = Path(__file__).resolve().parents[3] / "data" / "sglang_logs" / "memory"
ARGV = ["/opt/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/srv/models/tiny"]
HOLDER = {"pid": 4242, "user": "alice", "command": "python3 train.py --api-key sk-hold-1", "used_memory_mib": 79000,
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


def launched(tmp_path, log_name, holders=()):
    """A launch of this process (alive for the whole wait) recorded as sglang_server records it, its log being the
    built one; the module's arguments."""
    log = tmp_path / "server.log"
    offset = log.stat().st_size if log.exists() else 0
    with open(str(log), "a") as handle:
        handle.write((MEMORY / log_name).read_text())
    Instance(str(tmp_path / "state"), "sglang").record_launch(dict(
        pid=os.getpid(), start_time=offset, offset=offset, log_path=str(log), started_at=0.0, boot_id="b",
        argv_digest=capacity.command_digest(ARGV), gpu_holders=list(holders)))
    return {"log_path": str(log), "offset": offset, "pid": os.getpid(), "timeout": 5, "name": "sglang",
            "state_dir": str(tmp_path / "state")}


def test_a_clean_start_is_recorded_as_the_last_good_launch(tmp_path, capsys, monkeypatch):
    result = result_of(launched(tmp_path, "built-0.5.17-h100-tp1-clean.log"), capsys, monkeypatch)
    assert result["ready"] is True and "failed" not in result and result["warned"] == []
    assert result["capacity"]["kv_tokens"] == 20542816 and result["capacity"]["recorded_as_good"] is True
    records = Instance(str(tmp_path / "state"), "sglang").capacity_records()
    assert records[capacity.command_digest(ARGV)]["kv_tokens"] == 20542816


def test_a_start_beside_a_holder_warns_with_the_holder_and_both_figures(tmp_path, capsys, monkeypatch):
    result_of(launched(tmp_path, "built-0.5.17-h100-tp1-clean.log"), capsys, monkeypatch)
    args = dict(launched(tmp_path, "built-0.5.17-h100-tp1-beside-holder.log", [HOLDER]), mask=["sk-hold-1"])
    result = result_of(args, capsys, monkeypatch)
    assert result["ready"] is True and "failed" not in result
    (warning,) = result["warned"]
    assert warning == result["capacity"]["message"] and not result["capacity"]["last_good_is_this_launch"]
    for text in ("405968 tokens, 2.0% of the 20542816 tokens", "pid 4242 (user alice: python3 train.py",
                 "79000 MiB", "1.66 GB (78.37 GB at the last good launch)"):
        assert text in warning
    assert "sk-hold-1" not in json.dumps(result)
    assert result["capacity"]["recorded_as_good"] is False


def test_degraded_start_fail_fails_the_ready_server(tmp_path, capsys, monkeypatch):
    args = dict(launched(tmp_path, "built-0.5.17-h100-tp1-beside-holder.log", [HOLDER]), degraded_start="fail")
    result = result_of(args, capsys, monkeypatch)
    assert result["failed"] is True and result["ready"] is True and result["capacity"]["degraded"] is True
    assert result["msg"].startswith("Degraded start of the SGLang server: its KV cache holds 405968 tokens; this "
                                    "command line has no earlier good launch on this node")
    assert result["msg"].endswith("The server was left running; degraded_start=fail (the role's "
                                  "sglang_server_degraded_start) makes this a failure.")


def test_without_name_nothing_is_judged_or_written(tmp_path, capsys, monkeypatch):
    args = launched(tmp_path, "built-0.5.17-h100-tp1-beside-holder.log", [HOLDER])
    del args["name"]
    result = result_of(dict(args, degraded_start="fail"), capsys, monkeypatch)
    assert result["ready"] is True and "capacity" not in result and "failed" not in result
    assert not (tmp_path / "state" / "sglang.capacity.json").exists()


@pytest.mark.parametrize("args, message", [
    ({"degraded_ratio": 2.0}, "degraded_ratio=2.0: give the share"),
    ({"name": "../x"}, "name='../x' must be 1 to 64 letters"),
])
def test_bad_capacity_options_fail_before_the_wait(tmp_path, capsys, monkeypatch, args, message):
    result = result_of(dict({"log_path": str(tmp_path / "none.log"), "timeout": 5}, **args), capsys, monkeypatch)
    assert result["failed"] is True and result["msg"].startswith(message)


def test_a_state_dir_others_can_write_fails_the_judgement_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    args = launched(tmp_path, "built-0.5.17-h100-tp1-clean.log")
    os.chmod(args["state_dir"], 0o777)
    result = result_of(args, capsys, monkeypatch)
    assert result["failed"] is True and result["ready"] is True
    assert result["msg"].startswith("The server is ready, but the GPU memory it started with could not be judged: "
                                    "state_dir=%s: " % args["state_dir"])
    assert not (tmp_path / "state" / "sglang.capacity.json").exists()
