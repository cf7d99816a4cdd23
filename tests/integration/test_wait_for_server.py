"""wait_for_server, run through Ansible against the sglang stand-in writing its log over time."""
import os
import signal
import threading
import time

from conftest import run_module

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


def test_truncation_mid_wait(standin):
    standin.start(step=0.4)

    def copytruncate():
        time.sleep(1.5)
        with open(standin.log_path, "r+") as log:
            log.truncate(0)

    threading.Thread(target=copytruncate).start()
    result = wait(standin, timeout=60)
    assert result["ready"] is True, result.get("msg")
    assert result["offset"] < os.path.getsize(standin.log_path) + 1


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
        diagnoses=[{"id": "xid", "pattern": r"Xid", "cause": "The GPU reported an Xid error.", "fix": "Drain the node."}],
    )
    assert result["failure"]["cause"] == "NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off the bus."
    assert result["failure"]["diagnosis"] == {"id": "xid", "cause": "The GPU reported an Xid error.",
                                              "fix": "Drain the node."}
