from ansible_collections.blackwell.gpu_node.plugins.module_utils._readiness import (
    Waiter,
    process_is_running,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang_log import StartupClassifier

READY = "[2026-01-01 12:00:00] The server is fired up and ready to roll!"


class ScriptedLog(object):
    """A follower whose polls return the given batches of lines, then nothing."""

    def __init__(self, *batches):
        self.batches = list(batches)
        self.offset = 0
        self.closed = False

    def read_lines(self):
        lines = self.batches.pop(0) if self.batches else []
        self.offset += sum(len(line) + 1 for line in lines)
        return iter(lines)

    def pending_partial_line(self):
        return ""

    def close(self):
        self.closed = True


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def wait(log, timeout=10, alive=lambda pid: True, pid=None, **options):
    clock = Clock()
    waiter = Waiter(
        log, StartupClassifier(), timeout=timeout, poll_interval=0.25, pid=pid,
        is_running=alive, clock=clock, sleep=clock.sleep, **options
    )
    return waiter.run()


def test_ready_on_the_ready_line():
    log = ScriptedLog(["[2026-01-01 12:00:00] Load weight begin."], [], [READY])
    result = wait(log)
    assert result["ready"] is True
    assert result["elapsed"] == 0.5
    assert result["ready_line"] == READY
    assert result["offset"] == log.offset
    assert log.closed


def test_health_must_answer_200_after_the_ready_line():
    answers = [None, 503, 200]
    result = wait(ScriptedLog([READY]), health_probe=lambda: answers.pop(0))
    assert result["ready"] is True
    assert result["health_status"] == 200
    assert result["elapsed"] == 0.5


def test_rank_above_zero_is_ready_on_health_alone():
    result = wait(ScriptedLog(["[2026-01-01 12:00:00 TP8] Load weight end."]), health_probe=lambda: 200,
                  require_ready_line=False)
    assert result["ready"] is True


def test_timeout_says_what_was_missing_and_shows_the_last_lines():
    result = wait(ScriptedLog(["line %d" % n for n in range(100)]), timeout=2, last_lines=3)
    assert result["ready"] is False
    assert result["elapsed"] == 2
    assert result["failure"]["cause"].startswith("no ready line within the timeout of 2s")
    assert result["last_lines"] == ["line 97", "line 98", "line 99"]
    assert "Last log lines:\nline 97\nline 98\nline 99" in result["msg"]


def test_timeout_with_ready_line_but_unhealthy():
    result = wait(ScriptedLog([READY]), timeout=1, health_probe=lambda: 503)
    assert result["failure"]["cause"] == "the health URL answered 503, not 200, within the timeout of 1s"


def test_death_without_traceback_is_a_failure_at_once():
    result = wait(ScriptedLog(["[2026-01-01 12:00:00 TP0] Load weight begin."]), pid=4242, alive=lambda pid: False)
    assert result["ready"] is False
    assert result["elapsed"] == 0
    assert result["failure"]["cause"].startswith("process 4242 exited before the server was ready")
    assert "OOM killer" in result["msg"]


def test_traceback_written_before_death_is_reported():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1', "RuntimeError: CUDA error: out of memory"]
    result = wait(ScriptedLog(lines), pid=4242, alive=lambda pid: False)
    assert result["failure"]["cause"] == "RuntimeError: CUDA error: out of memory"
    assert result["failure"]["diagnosis"]["id"] == "cuda_out_of_memory"
    assert result["msg"].startswith("SGLang server failed after 0.0 s: RuntimeError: CUDA error: out of memory\n"
                                    "Diagnosis (cuda_out_of_memory): ")
    assert "Traceback:\nTraceback (most recent call last):" in result["msg"]


def test_user_diagnosis_comes_first():
    mine = {"id": "mine", "pattern": "CUDA error", "cause": "c", "fix": "f"}
    result = wait(ScriptedLog(["[2026-01-01 12:00:00] CUDA error: out of memory"]), catalogue=(mine,))
    assert result["failure"]["diagnosis"] == {"id": "mine", "cause": "c", "fix": "f"}


def test_process_is_running_for_this_process_and_not_for_a_reaped_child():
    import os
    import subprocess

    assert process_is_running(os.getpid())
    child = subprocess.Popen(["true"])
    child.wait()
    assert not process_is_running(child.pid)


def test_zombie_counts_as_gone():
    import subprocess
    import time

    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while process_is_running(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not process_is_running(child.pid)  # exited, not yet reaped: a zombie
    child.wait()
