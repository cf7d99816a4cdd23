import errno
import functools
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
from pathlib import Path

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import readiness as readiness_core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogFollower
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readiness import (
    Waiter,
    probe_failure,
    process_is_running,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import MASK, masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.capacity import StartupMemory
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier, diagnose

LOGS = Path(__file__).resolve().parents[3] / "data" / "sglang_logs"

READY = "[2026-01-01 12:00:00] The server is fired up and ready to roll!"


class ScriptedLog(object):
    """A follower whose polls return the given batches of lines, then nothing."""

    def __init__(self, *batches):
        self.batches = list(batches)
        self.offset = 0
        self.closed = False
        self.behind = False

    def read_lines(self):
        lines = self.batches.pop(0) if self.batches else []
        self.offset += sum(len(line) + 1 for line in lines)
        return iter(lines)

    def pending_partial_line(self):
        return ""

    def close(self):
        self.closed = True


class Clock(object):
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def wait(log, timeout=10, alive=lambda pid: True, pid=None, classifier=None, start=0.0, **options):
    clock = Clock(start)
    options.setdefault("exit_status", lambda pid: None)
    waiter = Waiter(
        log, classifier or StartupClassifier(), timeout=timeout, poll_interval=0.25, pid=pid,
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
    answers = [(None, "connection refused"), (503, None), (200, None)]
    result = wait(ScriptedLog([READY]), health_probe=lambda: answers.pop(0))
    assert result["ready"] is True
    assert result["health_status"] == 200
    assert result["elapsed"] == 0.5


def test_rank_above_zero_is_ready_on_health_alone():
    result = wait(ScriptedLog(["[2026-01-01 12:00:00 TP8] Load weight end."]), health_probe=lambda: (200, None),
                  require_ready_line=False)
    assert result["ready"] is True


def test_timeout_says_what_was_missing_and_shows_the_last_lines():
    result = wait(ScriptedLog(["line %d" % n for n in range(100)]), timeout=2, last_lines=3)
    assert result["ready"] is False
    assert result["elapsed"] == 2
    assert result["failure"]["cause"].startswith("no ready line within the timeout of 2s")
    assert result["last_lines"] == ["line 97", "line 98", "line 99"]
    assert "Last log lines:\nline 97\nline 98\nline 99" in result["msg"]


def test_a_timeout_gets_no_generic_diagnosis_from_lines_that_merely_name_a_component():
    # A server that hangs while loading is no failure of what its last lines mention.
    lines = ["[2026-01-01 12:00:00 TP0] Warning: DeepGEMM JIT is enabled", "[2026-01-01 12:00:01 TP0] Capturing batches"]
    result = wait(ScriptedLog(lines), timeout=1, pid=4242)
    assert result["failure"]["cause"].startswith("no ready line within the timeout of 1s")
    assert result["failure"]["diagnosis"] is None
    assert "Diagnosis" not in result["msg"]
    # The same lines of a server that died are where it failed: they name the component.
    died = wait(ScriptedLog(lines), pid=4242, alive=lambda pid: False)
    assert died["failure"]["diagnosis"]["id"] == "ended_without_traceback"
    assert died["failure"]["diagnosis"]["component"] == "DeepGEMM"


def test_a_timeout_whose_last_lines_a_catalogue_entry_knows_is_diagnosed():
    result = wait(ScriptedLog(["[2026-01-01 12:00:00 TP0] NCCL WARN Call to connect returned Connection refused"]),
                  timeout=1)
    expected = diagnose("NCCL WARN Call to connect returned Connection refused")["id"]
    assert result["failure"]["diagnosis"]["id"] == expected != "not_in_catalogue"


def test_timeout_with_ready_line_but_unhealthy():
    result = wait(ScriptedLog([READY]), timeout=1, health_probe=lambda: (503, None))
    assert result["failure"]["cause"] == "the health URL answered 503, not 200, within the timeout of 1s"


def test_death_without_traceback_is_a_failure_at_once():
    result = wait(ScriptedLog(["[2026-01-01 12:00:00 TP0] Load weight begin."]), pid=4242, alive=lambda pid: False)
    assert result["ready"] is False
    assert result["elapsed"] == 0
    assert result["failure"]["cause"].startswith("process 4242 exited before the server was ready")
    assert "OOM killer" in result["msg"]


# A start-up as SGLang logs it up to a kill during the weights' load: its last lines name DeepGEMM (absent, and
# harmless) and every backend (the settings).
KILLED_WHILE_LOADING = [
    "[2026-01-01 12:00:00] server_args=ServerArgs(model_path='/models/m', attention_backend='flashinfer', "
    "disaggregation_transfer_backend='mooncake', tp_size=1)",
    "[2026-01-01 12:00:00] Init torch distributed begin.",
    "[2026-01-01 12:00:01] Load weight begin. avail mem=94.21 GB",
    "[2026-01-01 12:00:01] Failed to import deep_gemm, falling back to triton kernels. "
    "(error: No module named 'deep_gemm')",
]


def test_a_server_killed_while_it_starts_is_diagnosed_by_the_signal_not_by_a_harmless_line():
    result = wait(ScriptedLog(KILLED_WHILE_LOADING), pid=4242, alive=lambda pid: False,
                  exit_status=lambda pid: signal.SIGKILL)
    failure = result["failure"]
    assert failure["cause"] == ("process 4242 exited before the server was ready, and the log shows no traceback: "
                                "it was killed by signal 9 (SIGKILL)")
    assert (failure["diagnosis"]["id"], failure["diagnosis"]["component"]) == ("killed_by_signal", "SGLang")
    assert failure["diagnosis"]["cause"].startswith("The server's process was killed by signal 9 (SIGKILL) while")
    assert "OOM killer" in failure["diagnosis"]["fix"]
    assert "SGLANG_ENABLE_JIT_DEEPGEMM" not in result["msg"] and "DeepGEMM" not in result["msg"]


def test_a_server_that_exited_with_a_code_says_so():
    result = wait(ScriptedLog(KILLED_WHILE_LOADING), pid=4242, alive=lambda pid: False,
                  exit_status=lambda pid: 3 << 8)
    assert result["failure"]["cause"].endswith("no traceback: it exited with code 3")
    assert result["failure"]["diagnosis"]["id"] == "exited_without_traceback"
    assert "exited with code 3" in result["failure"]["diagnosis"]["cause"]


def test_a_server_collected_before_its_end_was_read_is_not_blamed_on_a_harmless_line():
    result = wait(ScriptedLog(KILLED_WHILE_LOADING), pid=4242, alive=lambda pid: False)
    assert result["failure"]["cause"].endswith("or exited on its own")
    diagnosis = result["failure"]["diagnosis"]
    assert (diagnosis["id"], diagnosis["component"]) == ("ended_without_traceback", "SGLang")
    assert diagnosis["cause"].endswith("it was killed by a signal or exited on its own.")
    assert "OOM killer" in diagnosis["fix"] and "DeepGEMM" not in result["msg"]


def test_a_line_the_catalogue_knows_outranks_the_signal():
    lines = KILLED_WHILE_LOADING + ["16 is not divisible by 6"]
    result = wait(ScriptedLog(lines), pid=4242, alive=lambda pid: False, exit_status=lambda pid: signal.SIGKILL)
    assert result["failure"]["cause"].endswith("it was killed by signal 9 (SIGKILL)")
    assert result["failure"]["diagnosis"]["id"] == "tensor_parallel_not_divisible"


def test_a_real_process_killed_and_not_yet_collected_is_diagnosed_by_its_signal():
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        waiter = Waiter(ScriptedLog(KILLED_WHILE_LOADING), StartupClassifier(), timeout=10, poll_interval=0.01,
                        pid=child.pid)
        result = waiter.run()
    finally:
        child.wait()
    assert result["failure"]["cause"].endswith("it was killed by signal 9 (SIGKILL)")
    assert result["failure"]["diagnosis"]["id"] == "killed_by_signal"


def test_a_real_time_signal_is_named_so():
    assert readiness_core.ending(signal.SIGRTMIN + 2)[0] == "was killed by signal %d (a real-time signal)" % (
        signal.SIGRTMIN + 2)
    assert readiness_core.ending(None)[1]["id"] == "ended_without_traceback"


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
    assert result["failure"]["diagnosis"] == {"id": "mine", "cause": "c", "fix": "f", "component": "SGLang",
                                              "exception": None, "raised_in": None}


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


def test_timeout_says_why_the_health_url_never_answered():
    problem = "health_url http://no-such-host.invalid:30000/health: cannot resolve host no-such-host.invalid"
    result = wait(ScriptedLog([READY]), timeout=1, health_probe=lambda: (None, problem))
    assert result["failure"]["cause"] == "the health URL gave no HTTP answer within the timeout of 1s: " + problem


def test_probe_failures_in_words():
    unresolvable = urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    assert probe_failure(unresolvable, "no-such-host.invalid") == (
        "cannot resolve host no-such-host.invalid (Name or service not known)")
    refused = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    assert probe_failure(refused, "127.0.0.1").startswith("connection refused")
    assert probe_failure(socket.timeout("timed out"), "h") == "no answer within the probe's timeout"


def test_a_log_path_that_is_not_a_regular_file_fails_at_once(tmp_path):
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    result = wait(LogFollower(str(fifo)), timeout=600)
    assert result["ready"] is False and result["elapsed"] == 0
    assert result["failure"]["cause"].startswith("log_path %s is a FIFO, not a regular file" % fifo)


def test_deadline_holds_over_a_backlog_bigger_than_can_be_read_in_time(tmp_path):
    log = tmp_path / "server.log"
    with open(log, "wb") as handle:
        handle.truncate(4 * 1024 ** 3)  # 4 GiB, sparse: far more than can be read in the timeout
    started = time.monotonic()
    result = Waiter(LogFollower(str(log)), StartupClassifier(), timeout=0.5, poll_interval=0.1).run()
    assert time.monotonic() - started < 2
    assert result["failure"]["cause"].startswith("no ready line within the timeout")
    assert 0 < result["offset"] < 4 * 1024 ** 3


def test_a_dead_process_is_judged_on_the_whole_backlog(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 12:00:00 TP0] Capturing batches (bs=160 avail_mem=9.13 GB): 12%\n" * 20000
                   + "Traceback (most recent call last):\n"
                   + '  File "a.py", line 1, in <module>\n'
                   + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    result = wait(LogFollower(str(log), max_bytes_per_call=64 * 1024), pid=4242, alive=lambda pid: False)
    assert result["failure"]["cause"] == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert result["offset"] == log.stat().st_size


def real_server_args_line(api_key):
    """The server_args line of a real SGLang start-up, as if it had been started with --api-key."""
    for line in (LOGS / "success-tp4-qwq32b-l4-ignorable-error-msg.log").read_text().splitlines():
        if "server_args=ServerArgs(" in line:
            assert "api_key=None" in line
            return line.replace("api_key=None", "api_key=%r" % api_key)
    raise AssertionError("no server_args line")


def test_the_api_key_of_the_server_args_line_is_masked_by_default():
    line = real_server_args_line("sk-9f8e7d6c")
    result = wait(ScriptedLog([line, READY]))
    assert "sk-9f8e7d6c" not in repr(result)
    assert "api_key='%s'" % MASK in result["last_lines"][0]
    assert "model_path='/home/model/Qwen/QwQ-32B'" in result["last_lines"][0]


def test_given_values_and_flags_are_masked_in_every_returned_text():
    line = real_server_args_line("sk-9f8e7d6c").replace("ServerArgs(", "ServerArgs(hf_token='hf_Tok3n', ")
    mask = functools.partial(masked_text, values=["p4ssw0rd"],
                             secret_flags=("--api-key", "--admin-api-key", "--hf-token"))
    lines = [
        line,
        "[2026-11-30 10:00:00] Connecting to http://admin:p4ssw0rd@10.0.0.5/ ... ready p4ssw0rd",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "RuntimeError: login with p4ssw0rd refused",
    ]
    classifier = StartupClassifier(ready_pattern=re.escape("ready p4ssw0rd"))
    ready = wait(ScriptedLog(lines[:2]), classifier=classifier, mask=mask)
    assert ready["ready_line"].endswith("ready " + MASK)
    failed = wait(ScriptedLog(lines), mask=mask, pid=4242, alive=lambda pid: False)
    assert failed["failure"]["cause"] == "RuntimeError: login with %s refused" % MASK
    assert MASK in failed["failure"]["traceback"] and MASK in failed["msg"]
    timed_out = wait(ScriptedLog(lines[:2]), timeout=1, mask=mask)
    timed_out_unhealthy = wait(ScriptedLog(lines[:2]), timeout=1, mask=mask, require_ready_line=False,
                               health_probe=lambda: (None, "health_url http://admin:p4ssw0rd@h/health: refused"))
    for result in (ready, failed, timed_out, timed_out_unhealthy):
        shown = repr(result)
        assert "p4ssw0rd" not in shown and "sk-9f8e7d6c" not in shown and "hf_Tok3n" not in shown
    assert "hf_token='%s'" % MASK in timed_out["last_lines"][0]


def test_the_whole_result_of_a_death_without_traceback_with_a_diagnosis_from_any_last_line():
    lines = ["[2026-01-01 12:00:00 TP0] Load weight begin.", "16 is not divisible by 6"]
    result = wait(ScriptedLog(lines), pid=4242, alive=lambda pid: False, start=100.0)
    cause = ("process 4242 exited before the server was ready, and the log shows no traceback: it was killed by a "
             "signal (SIGKILL from the kernel's OOM killer says nothing in the log: the playbook "
             "blackwell.gpu_node.diagnose reads the kernel's log for it, or check `dmesg`) or exited on its own")
    diagnosis = diagnose("16 is not divisible by 6")
    assert diagnosis["id"] == "tensor_parallel_not_divisible"
    assert result == {
        "ready": False, "elapsed": 0, "offset": sum(len(line) + 1 for line in lines),
        "ready_line": None, "health_status": None, "last_lines": lines,
        "failure": {"cause": cause, "ranks": "", "traceback": "", "diagnosis": diagnosis},
        "msg": "SGLang server failed after 0.0 s: %s\nDiagnosis (tensor_parallel_not_divisible): %s Fix: %s\n"
               "Last log lines:\n%s" % (cause, diagnosis["cause"], diagnosis["fix"], "\n".join(lines))}


def test_elapsed_times_count_from_the_start_of_the_wait():
    log = ScriptedLog(["[2026-01-01 12:00:00] Load weight begin."], [], [READY])
    result = wait(log, start=1000.0)
    assert (result["elapsed"], result["msg"]) == (0.5, "SGLang server ready after 0.5 s")
    assert wait(ScriptedLog([READY]), start=1000.0, health_probe=lambda: (200, None))["elapsed"] == 0


def test_a_log_path_error_counts_from_the_start_of_the_wait(tmp_path):
    os.mkfifo(tmp_path / "server.log")
    assert wait(LogFollower(str(tmp_path / "server.log")), start=1000.0)["elapsed"] == 0


def test_the_last_poll_sleeps_only_up_to_the_timeout():
    result = wait(ScriptedLog(), timeout=0.3)
    assert result["elapsed"] == 0.3 and result["failure"]["cause"].startswith("no ready line within the timeout")


def test_elapsed_is_rounded_to_milliseconds():
    times = iter([0.0, 1.23456])
    waiter = Waiter(ScriptedLog([READY]), StartupClassifier(), timeout=10, poll_interval=0.25,
                    clock=lambda: next(times), sleep=lambda seconds: None)
    assert waiter.run()["elapsed"] == 1.235


def test_the_last_40_lines_are_kept_by_default():
    lines = ["line %d" % number for number in range(45)]
    assert wait(ScriptedLog(lines), timeout=0.25)["last_lines"] == lines[5:]


class PartialLineLog(ScriptedLog):
    """The log ends in a line the server has not finished writing."""

    def __init__(self, partial, *batches):
        ScriptedLog.__init__(self, *batches)
        self.partial = partial

    def pending_partial_line(self):
        return self.partial


def test_a_dead_process_s_unfinished_last_line_is_read():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>']
    result = wait(PartialLineLog("RuntimeError: half a line", lines), pid=4242, alive=lambda pid: False)
    assert result["failure"]["cause"] == "RuntimeError: half a line"
    assert result["last_lines"] == lines + ["RuntimeError: half a line"]


def test_a_live_process_s_traceback_and_unfinished_line_are_read_on_until_it_ends():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>']
    log = PartialLineLog("RuntimeError: ha", lines, ["RuntimeError: half a line"])
    result = wait(log, pid=4242)
    assert result["failure"]["cause"] == "RuntimeError: half a line"
    assert result["last_lines"] == lines + ["RuntimeError: half a line"]


def write_stat(proc_root, pid, stat):
    (proc_root / str(pid)).mkdir(parents=True)
    (proc_root / str(pid) / "stat").write_text(stat)


def test_a_dead_or_zombie_process_counts_as_gone_whatever_its_name(tmp_path):
    pid = os.getpid()  # exists, so os.kill says yes; the stat file says what it is
    write_stat(tmp_path / "zombie", pid, "%d (a) b) Z 1 1" % pid)
    write_stat(tmp_path / "dead", pid, "%d (python3) X 1 1" % pid)
    write_stat(tmp_path / "sleeping", pid, "%d (a) Z) S 1 1" % pid)
    assert [process_is_running(pid, str(tmp_path / root)) for root in ("zombie", "dead", "sleeping")] == [
        False, False, True]


def test_without_procfs_a_process_that_exists_is_running(tmp_path):
    assert process_is_running(os.getpid(), str(tmp_path)) is True


def test_a_process_of_another_user_is_judged_by_its_stat(tmp_path, monkeypatch):
    def not_permitted(pid, signal):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(readiness_core.os, "kill", not_permitted)
    write_stat(tmp_path, 1, "1 (systemd) S 0 1")
    assert process_is_running(1, str(tmp_path)) is True


def test_a_probe_failure_without_words_is_named_by_its_type():
    assert probe_failure(RuntimeError("the socket closed"), "h") == "the socket closed"
    assert probe_failure(urllib.error.URLError(OSError()), "h") == "OSError"


def test_every_text_of_a_failure_is_cut_and_rid_of_terminal_escapes():
    lines = ["\x1b[1m[2026-01-01 12:00:00] Load weight begin.\x1b[0m " + "x" * (4 << 20),
             "Traceback (most recent call last):", '  File "a.py", line 1, in <module>\x1b]0;pwned\x07',
             "RuntimeError: \x1b[31mboom\x1b[0m " + "y" * (4 << 20)]
    failed = wait(ScriptedLog(lines), pid=4242, alive=lambda pid: False)
    texts = [failed["failure"]["cause"]] + failed["last_lines"] + failed["failure"]["traceback"].split("\n")
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text and len(text.encode()) < 2100, text[:80]
    # The message's lines are those texts, the first after the words that say how long the wait took.
    for text in failed["msg"].split("\n"):
        assert "\x1b" not in text and "\x07" not in text and len(text.encode()) < 2200, text[:80]
    assert failed["failure"]["cause"].startswith("RuntimeError: boom yyy")
    assert failed["last_lines"][0].startswith("[2026-01-01 12:00:00] Load weight begin. xxx")
    assert len(repr(failed)) < 20 * 2100


def test_a_secret_split_by_a_terminal_escape_or_at_the_cut_is_masked_whole():
    mask = functools.partial(masked_text, values=["p4ssw0rd"])
    at_the_cut = "x" * 2044 + "p4ssw0rd"
    result = wait(ScriptedLog(["[2026-01-01 12:00:00] login p4ss\x1b[0mw0rd", at_the_cut, READY]), mask=mask)
    assert "p4ss" not in repr(result) and "w0rd" not in repr(result)
    assert result["last_lines"][0] == "[2026-01-01 12:00:00] login " + MASK


def test_every_line_read_before_ready_is_fed_to_the_memory_it_is_given():
    memory = StartupMemory()
    lines = (LOGS / "memory" / "built-0.5.17-h100-tp1-beside-holder.log").read_text().splitlines()
    result = wait(ScriptedLog(lines[:1], [], lines[1:]), memory=memory)
    assert result["ready"] is True
    assert memory.summary() == {"kv_tokens": 405968, "avail_mem_gb": 1.66}
