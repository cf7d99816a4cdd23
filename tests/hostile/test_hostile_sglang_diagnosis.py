"""sglang_diagnosis against a launch whose log the service user controls: a FIFO, a link to /dev/zero, an 8 GiB
sparse file, a single line of 4 MiB with terminal escapes; and a state directory the user can write, where it
forges a launch whose log is a file only root may read. The diagnosis reads the log bounded, shows each line cut
to 2 KiB without an escape character, and shows nothing of root's."""
import json
import os
import re
import time

import pytest

import hostile_harness

MODULE = "sglang_diagnosis"
LINE_LIMIT = 2048
CUT = re.compile(r" \[\.\.\. \d+ bytes cut\]$")
TRACEBACK = ("[2026-12-01 10:00:00] Traceback (most recent call last):\n"
             "  File \"/srv/sglang/launch_server.py\", line 1, in <module>\n"
             "RuntimeError: cuDNN version is too old\n")
SECRET = "HOSTILE-SUITE-ROOT-ONLY-%d" % os.getpid()


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as handle:
        return handle.read().strip()


def launches(log_path):
    """The launch history sglang_server keeps, one launch of a server long gone, whose log is log_path."""
    return json.dumps([{"pid": 4194000, "start_time": 1, "offset": 0, "log_path": str(log_path),
                        "started_at": time.time() - 60, "boot_id": boot_id()}])


def setting(case):
    """(the user's log path, the module's arguments): root's state_dir records one launch logging there."""
    logs = case.user_dir("logs")
    state_dir = case.root_dir("state", 0o750)
    (state_dir / "sglang.launches.json").write_text(launches(logs / "sglang.log"))
    os.chmod(str(state_dir / "sglang.launches.json"), 0o600)
    return logs / "sglang.log", dict(state_dir=str(state_dir), kernel_log=False, gpu_processes=False)


def shown_bounded(run):
    """Problems with what the result shows of the log: a line over 2 KiB (its cut marker aside), an escape."""
    problems = []
    if "\\u001b" in run.stdout or "\x1b" in run.stdout:
        problems.append("the result carries an ESC character")
    for text in hostile_harness.strings((run.result or {}).get("log")):
        for line in text.split("\n"):
            if len(CUT.sub("", line).encode("utf-8")) > LINE_LIMIT:
                problems.append("a shown line of %d bytes" % len(line.encode("utf-8")))
                return problems
    return problems


def test_control_diagnoses_a_traceback(hostile):
    case = hostile(MODULE, "control")
    log, args = setting(case)
    case.replace(log, "file", TRACEBACK)
    run = case.module(MODULE, args)
    failure = ((run.result or {}).get("log") or {}).get("failure")
    case.check(run, "ok", problems=[] if failure else ["no failure found in a log with a traceback"])
    case.finish()


LOGS = {
    "log FIFO": ("fifo", None),
    "log -> /dev/zero": ("link", "/dev/zero"),
    "log -> /etc/shadow": ("link", "/etc/shadow"),
    "log sparse 8 GiB": ("sparse", None),
}


@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_hostile_log_is_read_bounded_or_not_at_all(hostile, name):
    case = hostile(MODULE, name)
    log, args = setting(case)
    kind, target = LOGS[name]
    case.replace(log, kind, target)
    run = case.module(MODULE, args)
    case.check(run, "bounded", problems=shown_bounded(run))
    case.finish()


def test_a_4_mib_line_with_terminal_escapes_is_shown_cut_and_clean(hostile):
    case = hostile(MODULE, "4 MiB single line + ANSI escapes")
    log, args = setting(case)
    line = "\x1b[31m" + "A" * (4 << 20) + "\x1b[0m\x1b]0;owned\x07\n"
    case.replace(log, "file", "\x1b[2J\x1b[H" + line + TRACEBACK.replace("cuDNN", "\x1b[1mcuDNN\x1b[0m") + line)
    run = case.module(MODULE, args)
    case.check(run, "bounded", problems=shown_bounded(run))
    case.finish()


def test_a_state_dir_the_user_can_write_shows_nothing_of_roots(hostile):
    case = hostile(MODULE, "state_dir the user can write, forged launch logging to a root-only file")
    secret = case.root_dir("secrets", 0o700) / "root-only.txt"
    secret.write_text("Traceback (most recent call last):\nRuntimeError: %s\n" % SECRET)
    os.chmod(str(secret), 0o600)
    state_dir = case.user_dir("state", 0o750)
    case.replace(state_dir / "sglang.launches.json", "file", launches(secret))
    run = case.module(MODULE, dict(state_dir=str(state_dir), kernel_log=False, gpu_processes=False))
    problems = ["the result shows the content of root's 0600 file %s" % secret] if SECRET in run.stdout else []
    case.check(run, "refused", needle="state_dir", problems=problems)
    case.finish()
