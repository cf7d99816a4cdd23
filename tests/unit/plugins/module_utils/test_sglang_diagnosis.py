"""The diagnosis core: which bytes are a launch's log, how it is classified, and the verdict's one line."""
import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils import _sglang_diagnosis as core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._log_follower import LogPathError

LOGS = Path(__file__).resolve().parents[3] / "data" / "sglang_logs"
CUDNN = (LOGS / "failure-cudnn-check-torch291-partial.log").read_bytes()
READY = (LOGS / "success-tp1-qwen25-05b-docs-notebook-ci.log").read_bytes()


def launch(offset, pid=10, log_path="/var/log/sglang.log"):
    return dict(pid=pid, start_time=100, offset=offset, log_path=log_path, started_at=1.0, boot_id="b")


def test_an_earlier_launch_ends_where_the_next_one_begins():
    history = [launch(300, 3), launch(200, 2), launch(100, 1, "/old.log")]
    assert core.launch_window(history, 0) == (history[0], None)
    assert core.launch_window(history, 1) == (history[1], 300)
    # In another log (log_path changed) the next launch's offset says nothing about this one's end.
    assert core.launch_window(history, 2) == (history[2], None)


@pytest.mark.parametrize("history, back, words", [
    ([], 0, "launch=0: no launch of this server is recorded"),
    ([launch(0)], 3, "launch=3: only 1 launch(es) are recorded; ask for 0 (the latest) to 0"),
])
def test_a_launch_that_is_not_recorded_is_named(history, back, words):
    with pytest.raises(core.NoSuchLaunch, match=words.replace("(", r"\(").replace(")", r"\)")):
        core.launch_window(history, back)


def test_the_crash_two_launches_ago_is_classified_from_its_own_bytes(tmp_path):
    """A crash, then two good launches in the same log: launch 2 is the crash, launches 1 and 0 got ready."""
    log = tmp_path / "server.log"
    log.write_bytes(CUDNN + READY + READY)
    starts = [0, len(CUDNN), len(CUDNN) + len(READY)]
    history = [launch(starts[2]), launch(starts[1]), launch(starts[0])]
    verdicts = []
    for back in (2, 1, 0):
        chosen, end = core.launch_window(history, back)
        head, tail, left_out, note = core.read_launch_log(str(log), chosen["offset"], end)
        verdicts.append(core.classify_launch(head, tail))
    crash, first, second = verdicts
    assert crash["failure"]["diagnosis"]["id"] == "cudnn_check" and crash["ready_line"] is None
    assert first["failure"] is None and first["ready_line"] and second["failure"] is None


def test_a_log_shorter_than_the_offset_was_rotated(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"x\n")
    head, tail, left_out, note = core.read_launch_log(str(log), 100)
    assert (head, tail) == ([], []) and "less than this launch's offset 100: it was rotated" in note


def test_a_long_log_is_read_as_a_bounded_head_and_tail(tmp_path):
    """A server that ran for weeks: its start and its end are read, not the gigabytes between."""
    log = tmp_path / "server.log"
    with open(log, "wb") as handle:
        handle.write(b"[2026-01-01 00:00:00] start\n" + b"request line\n" * 2000 + b"RuntimeError: the end\n")
    head, tail, left_out, note = core.read_launch_log(str(log), 0, head_bytes=1000, tail_bytes=500)
    assert head[0] == "[2026-01-01 00:00:00] start" and "RuntimeError: the end" in tail
    assert left_out == os.path.getsize(log) - 1500 and note is None
    assert core.classify_launch(head, tail)["failure"]["cause"] == "RuntimeError: the end"


def test_only_a_regular_file_is_read_as_a_log(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LogPathError, match="is a FIFO"):
        core.read_launch_log(str(tmp_path / "fifo"), 0)


def test_secrets_in_the_launch_log_are_masked():
    found = core.classify_launch(["server_args=ServerArgs(api_key='k-123')", "RuntimeError: boom k-123"],
                                 mask=lambda text: text.replace("k-123", "********"))
    assert "k-123" not in str(found)


def report(**parts):
    base = dict(state={"running": False, "pid": 10}, launch=dict(launch(0), back=0),
                log={"ready_line": None, "failure": None}, kernel={"readable": True, "oom_kills": [], "xids": []})
    base.update(parts)
    return base


OOM = {"pid": 4242, "name": "python3", "scope": "memory cgroup", "anon_rss_kb": 123, "server": "pid"}
XID = {"xid": 79, "device": "0000:2b:00", "meaning": "GPU has fallen off the bus", "action": "Reboot", "server": False}


def test_the_verdict_names_the_cause_line_the_diagnosis_and_the_fix():
    failure = {"cause": "RuntimeError: cuDNN", "diagnosis": {"id": "cudnn_check", "fix": "Set X=1."}}
    line = core.verdict(report(log={"failure": failure}))
    assert line == "not running; the latest launch failed: RuntimeError: cuDNN [cudnn_check] Fix: Set X=1."


def test_the_verdict_names_the_oom_kill_when_the_log_has_no_traceback():
    line = core.verdict(report(kernel={"readable": True, "oom_kills": [OOM], "xids": [XID]}))
    assert "was killed by the kernel's OOM killer (memory cgroup: pid 4242 python3, 123 kB resident)" in line


def test_the_verdict_says_when_an_oom_kill_was_matched_by_process_name_only():
    by_name = dict(OOM, server="process name")
    line = core.verdict(report(kernel={"readable": True, "oom_kills": [by_name], "xids": []}))
    assert "(memory cgroup: pid 4242 python3, 123 kB resident; matched by process name only, so possibly " \
        "another process of that name)" in line


def test_the_verdict_names_an_xid_with_its_meaning_and_what_to_do():
    kernel = {"readable": True, "oom_kills": [], "xids": [XID]}
    line = core.verdict(report(launch=dict(launch(0), back=2), kernel=kernel))
    assert line == ("not running; GPU 0000:2b:00 reported Xid 79 since the launch 2 before the latest: GPU has "
                    "fallen off the bus. Reboot")


def test_the_verdict_says_when_the_kernel_log_could_not_be_read():
    line = core.verdict(report(kernel={"readable": False, "problem": "kernel log not readable: dmesg: EPERM"}))
    assert line.endswith("shows no failure and no ready line (kernel log not readable: dmesg: EPERM)")


def test_the_verdict_of_a_running_ready_server():
    line = core.verdict(report(state={"running": True, "pid": 7, "restarts": 2}, log={"ready_line": "ready"}))
    assert line == "running (pid 7, 2 restarts by systemd); the latest launch got ready"


def test_gpu_processes_from_nvidia_smi():
    def smi(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, "4242, python3, 81234, GPU-abc\n", "")

    assert core.gpu_processes(run=smi) == ([{"pid": 4242, "name": "python3", "used_memory_mib": 81234,
                                             "gpu_uuid": "GPU-abc"}], None)

    def broken(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 9, "NVIDIA-SMI has failed because it couldn't communicate", "")

    assert core.gpu_processes(run=broken) == (None, "nvidia-smi failed: NVIDIA-SMI has failed because it "
                                                    "couldn't communicate")
