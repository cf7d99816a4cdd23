"""wait_for_server, run against the sglang stand-in writing its log over time."""
import json
import os
import signal
import threading
import time

import pytest
from conftest import free_port, run_module

READY_LINE = "The server is fired up and ready to roll!"


def wait(standin, **args):
    args.setdefault("log_path", standin.log_path)
    args.setdefault("pid", standin.process.pid)
    return run_module("wait_for_server", **args)


def test_ready_with_health(standin):
    standin.start()
    result = wait(standin, health_url=standin.health_url, timeout=60)
    assert result["ready"] is True, result.get("msg")
    assert result["health_status"] == 200
    assert result["ready_line"].endswith(READY_LINE)
    assert result["offset"] == os.path.getsize(standin.log_path)
    assert result["changed"] is False


def test_harmless_error_words_do_not_fail_it(standin):
    standin.start()
    result = wait(standin, timeout=60)
    assert result["ready"] is True
    assert any("Failed to import deep_gemm" in line for line in result["last_lines"])


def test_traceback_fails_fast_with_diagnosis(standin):
    standin.start(scenario="traceback")
    result = wait(standin, timeout=600)
    assert result["failed"] is True
    assert result["elapsed"] < 5
    assert result["failure"]["diagnosis"]["id"] == "cudnn_check"
    assert "SGLANG_DISABLE_CUDNN_CHECK=1" in result["msg"]
    assert result["failure"]["traceback"].startswith("Traceback (most recent call last):")


def test_rank_traceback_is_reported_without_other_ranks_lines(standin):
    standin.start(scenario="oom")
    result = wait(standin, timeout=600)
    failure = result["failure"]
    assert failure["cause"].startswith("[TP3] torch.OutOfMemoryError: CUDA out of memory.")
    assert failure["diagnosis"]["id"] == "cuda_out_of_memory"
    assert "Capture cuda graph end" not in failure["traceback"]
    assert failure["traceback"].count("\n") == 5


def test_silent_death_fails_at_once(standin):
    standin.start(scenario="silent-death")
    result = wait(standin, timeout=600)
    assert result["failure"]["cause"].startswith("process %d exited before the server was ready" % standin.process.pid)
    assert result["elapsed"] < 5
    # Its parent, this test, collects it only at the end: the module reads how it ended from its zombie. Its last
    # lines name DeepGEMM (absent, harmless) and torch.distributed (a step of SGLang's).
    assert result["failure"]["cause"].endswith("it was killed by signal 9 (SIGKILL)")
    assert (result["failure"]["diagnosis"]["id"], result["failure"]["diagnosis"]["component"]) == (
        "killed_by_signal", "SGLang")
    assert "SGLANG_ENABLE_JIT_DEEPGEMM" not in result["msg"]


def test_sigkill_from_outside_while_waiting(standin):
    standin.start(scenario="hang")
    threading.Timer(1.0, os.killpg, (standin.process.pid, signal.SIGKILL)).start()
    started = time.monotonic()
    result = wait(standin, timeout=600)
    assert result["failed"] is True
    assert "exited before the server was ready" in result["failure"]["cause"]
    assert time.monotonic() - started < 10


def test_hang_times_out_with_the_last_lines(standin):
    standin.start(scenario="hang")
    result = wait(standin, timeout=1.5)
    assert result["failure"]["cause"].startswith("no ready line within the timeout of 1.5s")
    assert result["last_lines"][-1].endswith("Load weight begin. avail mem=94.21 GB")


def test_stale_ready_line_before_the_offset_does_not_count(standin):
    with open(standin.log_path, "w") as log:
        log.write("[2026-01-01 00:00:00] %s\n" % READY_LINE)
    offset = os.path.getsize(standin.log_path)
    standin.start(scenario="hang")
    assert wait(standin, offset=0, timeout=1.5)["ready"] is True  # the trap wait_for falls into
    result = wait(standin, offset=offset, timeout=1.5)
    assert result["failed"] is True
    assert "no ready line" in result["failure"]["cause"]


def holders(path):
    """Pids of the processes that have path open, from /proc/<pid>/fd."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            descriptors = os.listdir("/proc/%s/fd" % pid)
            if any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) == path for fd in descriptors):
                found.add(int(pid))
        except OSError:
            continue  # exited meanwhile, or not ours to look into
    return found


def test_truncation_mid_wait(tmp_path):
    # The log is truncated in place (copytruncate) after the module has read it, and the ready
    # line comes in what is written next: far fewer bytes than the module had read. A follower
    # that missed the truncation would wait at its old offset and never see the ready line.
    log = tmp_path / "server.log"
    log.write_text("".join("[2026-11-30 10:00:00 TP0] Load weight begin. %06d\n" % n for n in range(1000)))
    read_before = log.stat().st_size

    def copytruncate():
        deadline = time.monotonic() + 60
        while not holders(str(log)) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # several polls: the module has read the whole log
        with open(log, "r+") as handle:
            handle.truncate(0)
            handle.write("[2026-11-30 10:00:09] %s\n" % READY_LINE)

    truncator = threading.Thread(target=copytruncate)
    truncator.start()
    result = run_module("wait_for_server", log_path=str(log), timeout=30)
    truncator.join()
    assert result["ready"] is True, result.get("msg")
    assert result["offset"] == log.stat().st_size < read_before


def test_check_mode_does_not_wait(tmp_path):
    result = run_module("wait_for_server", log_path=str(tmp_path / "none.log"), timeout=600, check_mode=True)
    assert result["ready"] is None
    assert result["msg"].startswith("check mode: not waiting")


def test_bad_regular_expression_names_the_option(tmp_path):
    result = run_module("wait_for_server", log_path=str(tmp_path / "x.log"), fatal_patterns=["(unclosed"])
    assert result["failed"] is True
    assert result["msg"].startswith("fatal_patterns: '(unclosed' is not a valid regular expression")


def test_pid_path_names_the_process_to_watch(standin, tmp_path):
    standin.start(scenario="silent-death")
    pid_file = tmp_path / "server.pid"
    pid_file.write_text("%d\n" % standin.process.pid)
    result = run_module("wait_for_server", log_path=standin.log_path, pid_path=str(pid_file), timeout=600)
    assert result["failure"]["cause"].startswith("process %d exited" % standin.process.pid)


def test_a_pid_path_that_is_a_fifo_or_a_link_to_dev_zero_fails_at_once(tmp_path):
    os.mkfifo(str(tmp_path / "fifo.pid"))
    os.symlink("/dev/zero", str(tmp_path / "zero.pid"))
    for name in ("fifo.pid", "zero.pid"):
        result = run_module("wait_for_server", log_path=str(tmp_path / "x.log"), pid_path=str(tmp_path / name),
                            run_timeout=60)
        assert result["failed"] and result["msg"].startswith("pid_path=%s does not hold a pid" % (tmp_path / name))


def test_unreadable_pid_path_fails_clearly(tmp_path):
    result = run_module("wait_for_server", log_path=str(tmp_path / "x.log"), pid_path=str(tmp_path / "missing.pid"))
    assert result["failed"] is True
    assert result["msg"].startswith("pid_path=%s does not hold a pid" % (tmp_path / "missing.pid"))


def test_user_fatal_pattern_and_diagnosis(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-11-30 10:00:00 TP0] Load weight begin.\nNVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off the bus.\n")
    result = run_module(
        "wait_for_server", log_path=str(log), timeout=600,
        fatal_patterns=[r"Xid \(PCI"],
        diagnoses=[{"id": "xid", "pattern": r"Xid", "cause": "The GPU reported an Xid error.", "fix": "Drain the node.",
                    "component": "NVIDIA driver"}],
    )
    assert result["failure"]["cause"] == "NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off the bus."
    assert result["failure"]["diagnosis"] == {"id": "xid", "cause": "The GPU reported an Xid error.",
                                              "fix": "Drain the node.", "component": "NVIDIA driver",
                                              "exception": None, "raised_in": None}


def test_dev_zero_fails_at_once_naming_log_path():
    # It used to read zeros until Ansible was killed: the timeout never came.
    result = run_module("wait_for_server", log_path="/dev/zero", timeout=5, run_timeout=60)
    assert result["failed"] is True
    assert result["failure"]["cause"].startswith("log_path /dev/zero is a character device, not a regular file")
    assert result["elapsed"] < 1


def test_fifo_fails_at_once_naming_log_path(tmp_path):
    # It used to block in open() until a writer came, past any timeout.
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    result = run_module("wait_for_server", log_path=str(fifo), timeout=5, run_timeout=60)
    assert result["failure"]["cause"].startswith("log_path %s is a FIFO, not a regular file" % fifo)
    assert result["elapsed"] < 1


def test_directory_fails_naming_log_path(tmp_path):
    result = run_module("wait_for_server", log_path=str(tmp_path), timeout=5)
    assert result["failure"]["cause"].startswith("log_path %s is a directory, not a regular file" % tmp_path)


def test_deadline_holds_while_the_log_grows_faster_than_it_is_read(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    stop = threading.Event()

    def flood():
        line = b"[2026-11-30 10:00:00 TP0] Capturing batches (bs=160 avail_mem=9.13 GB): 12%\n" * 10000
        with open(log, "ab") as handle:
            while not stop.is_set() and handle.tell() < 4 * 1024 ** 3:
                handle.write(line)

    flooder = threading.Thread(target=flood)
    flooder.start()
    try:
        started = time.monotonic()
        result = run_module("wait_for_server", log_path=str(log), timeout=3, run_timeout=120)
        took = time.monotonic() - started
    finally:
        stop.set()
        flooder.join()
    assert result["failure"]["cause"].startswith("no ready line within the timeout of 3.0s")
    assert result["elapsed"] < 4.5, result["elapsed"]
    assert took < 30


def test_server_args_api_key_is_masked(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-11-30 10:00:00] server_args=ServerArgs(model_path='/models/test', api_key='sk-live-7a6b5c', "
        "admin_api_key='adm-0f1e2d', hf_token='hf_q9w8e7', port=30000)\n"
        "[2026-11-30 10:00:05] %s\n" % READY_LINE)
    result = run_module("wait_for_server", log_path=str(log), timeout=30, secret_flags=["--hf-token"])
    assert result["ready"] is True
    shown = json.dumps(result)
    for secret in ("sk-live-7a6b5c", "adm-0f1e2d", "hf_q9w8e7"):
        assert secret not in shown
    assert "api_key='********'" in result["last_lines"][0] and "hf_token='********'" in result["last_lines"][0]


@pytest.mark.parametrize("option, value, message", [
    ("last_lines", -1, "last_lines must be 0 (return no log lines) or more, not -1"),
    ("pid", 0, "pid must be a process id (1 or more), not 0"),
    ("pid", -1, "pid must be a process id (1 or more), not -1"),
    ("health_url", "127.0.0.1:30000/health", "health_url must be an http:// or https:// URL with a host"),
    ("secret_flags", ["hf-token"], "secret_flags: 'hf-token' is not a flag such as --hf-token"),
])
def test_bad_option_names_the_option(tmp_path, option, value, message):
    result = run_module("wait_for_server", log_path=str(tmp_path / "x.log"), timeout=5, **{option: value})
    assert result["failed"] is True
    assert result["msg"].startswith(message), result["msg"]


def test_pid_path_holding_no_process_id_fails_clearly(tmp_path):
    pid_file = tmp_path / "server.pid"
    pid_file.write_text("0\n")
    result = run_module("wait_for_server", log_path=str(tmp_path / "x.log"), pid_path=str(pid_file), timeout=5)
    assert result["failed"] is True
    assert result["msg"].startswith("pid_path=%s holds 0, not a pid" % pid_file)


def test_no_last_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-11-30 10:00:05] %s\n" % READY_LINE)
    result = run_module("wait_for_server", log_path=str(log), timeout=30, last_lines=0)
    assert result["ready"] is True and result["last_lines"] == []


def test_unresolvable_health_url_says_so(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-11-30 10:00:05] %s\n" % READY_LINE)
    url = "http://no-such-host.invalid:30000/health"
    result = run_module("wait_for_server", log_path=str(log), timeout=1.5, health_url=url)
    assert result["failed"] is True
    assert result["failure"]["cause"].startswith(
        "the health URL gave no HTTP answer within the timeout of 1.5s: health_url %s: cannot resolve host "
        "no-such-host.invalid" % url), result["failure"]["cause"]


def test_refused_health_url_says_so(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-11-30 10:00:05] %s\n" % READY_LINE)
    url = "http://127.0.0.1:%d/health" % free_port()
    result = run_module("wait_for_server", log_path=str(log), timeout=1.5, health_url=url)
    assert result["failure"]["cause"].endswith("health_url %s: connection refused (nothing listens there yet)" % url)
