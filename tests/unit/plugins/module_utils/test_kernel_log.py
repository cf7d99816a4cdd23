"""The kernel's view of a server, on kernel log lines recorded from public reports (tests/data/kernel_log)."""
import errno
import itertools
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import kernel_log as core

DATA = Path(__file__).resolve().parents[3] / "data" / "kernel_log"


def lines(name):
    return (DATA / name).read_text().splitlines()


@pytest.mark.parametrize("name, xid, device, pid, process", [
    ("xid-13-unknown-process-dmesg-ctime.txt", 13, "0000:cb:00", None, None),
    ("xid-45-after-xid-149-journal.txt", 45, "0000:dc:00", 1818990, "python3"),
    ("xid-79-fallen-off-the-bus-journal.txt", 79, "0000:2b:00", None, None),
    ("xid-63-row-remapper.txt", 63, "0000:10:1c", 1896, None),
    ("xid-31-before-pci-prefix-syslog.txt", 31, "0000:01:00", None, None),
    ("xid-94-contained-ecc.txt", 94, "0000:9b:00", 1234, "python3"),
    ("xid-119-gsp-timeout.txt", 119, "0000:65:00", None, None),
])
def test_xid_lines_give_the_code_device_process_and_meaning(name, xid, device, pid, process):
    first = core.kernel_events(lines(name))["xids"][0]
    assert (first["xid"], first["device"], first["pid"], first["name"]) == (xid, device, pid, process)
    assert first["meaning"] and first["action"]
    assert not first["detail"].startswith("pid=")


def test_every_common_xid_has_a_meaning_and_an_action():
    assert sorted(core.XID_MEANINGS) == [13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119]
    assert all(meaning and action for meaning, action in core.XID_MEANINGS.values())


def test_an_xid_outside_the_catalogue_is_still_reported_without_a_meaning():
    xids = core.kernel_events(lines("xid-13-unknown-process-dmesg-ctime.txt"))["xids"]
    assert [event["xid"] for event in xids] == [13, 13, 13, 109]
    assert xids[-1]["meaning"] is None and xids[-1]["name"] == "pt_main_thread"


@pytest.mark.parametrize("name, pid, process, scope, rss", [
    ("oom-system-syslog-docker.txt", 15784, "python3", "system", 4288),
    ("oom-memory-cgroup-dmesg.txt", 140339, "python3", "memory cgroup", 15596),
    ("oom-old-kernel-syslog.txt", 18177, "palo_be", "system", 45563572),
    ("oom-dmesg-ctime-grouped-digits.txt", 7899, "python", "system", 15370088),
    ("oom-memory-cgroup-kmsg-dev-machine.txt", 21928, "python3", "memory cgroup", 130176),
])
def test_oom_kills_name_the_process(name, pid, process, scope, rss):
    first = core.kernel_events(lines(name))["oom_kills"][0]
    assert (first["pid"], first["name"], first["scope"], first["anon_rss_kb"]) == (pid, process, scope, rss)


def test_a_reaped_process_is_not_a_second_kill_and_a_comm_may_hold_parentheses():
    found = core.kernel_events(lines("oom-system-syslog-docker.txt"))
    killed = [(event["pid"], event["name"]) for event in found["oom_kills"]]
    assert killed == [(15784, "python3"), (15925, "(resolved)")]


def test_since_the_launch_keeps_only_dated_lines_at_or_after_it():
    syslog = lines("oom-system-syslog-docker.txt")
    assert [event["pid"] for event in core.kernel_events(syslog, since=518.06)["oom_kills"]] == [15925]
    # A line with a wall-clock time only cannot be dated against a launch.
    assert core.kernel_events(lines("xid-79-fallen-off-the-bus-journal.txt"), since=0)["xids"] == []


def test_kmsg_records_are_dated_by_their_microseconds():
    records = lines("oom-memory-cgroup-kmsg-dev-machine.txt")
    (event,) = core.kernel_events(records, since=12867.2)["oom_kills"]
    assert event["time"] == pytest.approx(12867.298791) and event["line"].startswith("Memory cgroup")
    assert core.kernel_events(records, since=12867.3)["oom_kills"] == []


def test_the_server_is_concluded_by_pid_only_and_a_name_or_sglang_title_is_reported_as_such():
    text = ["[10.0] Out of memory: Killed process 7 (python3) anon-rss:1kB",
            "[11.0] Out of memory: Killed process 8 (sglang::schedul) anon-rss:1kB",
            "[12.0] Out of memory: Killed process 9 (postgres) anon-rss:1kB",
            "[13.0] NVRM: Xid (PCI:0000:9b:00): 94, pid=9, name=postgres, Contained ECC error"]
    found = core.kernel_events(text, server_pids=[9])
    assert [(event["server"], event["matched_by"]) for event in found["oom_kills"] + found["xids"]] == [
        (False, None), (False, "sglang process title"), (True, "pid"), (True, "pid")]
    found = core.kernel_events(text, server_names=["python3"])
    assert [(event["server"], event["matched_by"]) for event in found["oom_kills"] + found["xids"]] == [
        (False, "process name"), (False, "sglang process title"), (False, None), (False, None)]


def test_an_oom_kill_of_another_users_sglang_scheduler_is_matched_by_title_and_not_concluded():
    # Another user's SGLang on the same host: its scheduler has the same title as the server's, not its pid.
    (event,) = core.kernel_events([
        "[20.0] Memory cgroup out of memory: Killed process 5151 (sglang::schedul) total-vm:1kB, anon-rss:9kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:1001 pgtables:1kB oom_score_adj:0"], server_pids=[4242, 4243])["oom_kills"]
    assert (event["pid"], event["server"], event["matched_by"]) == (5151, False, "sglang process title")


@pytest.mark.parametrize("line", [
    # A process's file name is the user's to choose, and a trap names the file the process faulted in.
    "[ 42.000000] traps: python3[4242] general protection fault ip:7f0e5a1b2c3d sp:7ffd0e1f2a3b error:0 in "
    "NVRM: Xid (PCI:0000:01:00): 79, pid=4242, name=python3, GPU has fallen off the bus.[7f0e5a000000+2000]",
    "6,900,42000000,-;traps: python3[4242] trap invalid opcode ip:7f0e5a1b2c3d sp:7ffd0e1f2a3b error:0 in "
    "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.[7f0e5a000000+2000]",
    # A program's own syslog line is no kernel message, whatever it says.
    "May 18 19:02:39 node7 myprog[99]: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.",
    "[ 42.000000] audit: comm=\"NVRM: Xid (PCI:0000:01:00): 79, x\" exe=\"/tmp/a\"",
])
def test_an_xid_quoted_inside_another_message_is_no_xid(line):
    assert core.kernel_events([line], server_pids=[4242]) == {
        "oom_kills": [], "xids": [], "oom_kill_count": 0, "xid_count": 0}


@pytest.mark.parametrize("line", [
    # The file a process faulted in is named by the kernel, and its name is the user's to choose.
    "[ 42.000000] python3[4242]: segfault at 0 ip 0 sp 0 error 4 in Out of memory: Killed process 4242 "
    "(python3) anon-rss:1kB[7f0e5a000000+2000]",
    "6,901,42000000,-;python3[4242]: segfault at 0 ip 0 sp 0 error 4 in Killed process 4242 (python3), UID 0"
    "[7f0e5a000000+2000]",
    "[ 42.000000] oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
])
def test_an_oom_kill_quoted_inside_another_message_is_no_kill(line):
    assert core.kernel_events([line], server_pids=[4242])["oom_kills"] == []


@pytest.mark.parametrize("line, seconds, message", [
    # dmesg -x, dmesg --time-format iso (with -x or without), dmesg -r, journalctl -k in Polish, -o short-iso,
    # -o short-precise.
    ("kern  :warn  : [  123.456000] NVRM: x", 123.456, "NVRM: x"),
    ("kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: x", None, "NVRM: x"),
    ("2024-05-01T10:00:00,123456+00:00 NVRM: x", None, "NVRM: x"),
    ("<4>[ 1126.635824] NVRM: x", 1126.635824, "NVRM: x"),
    ("kwi 15 07:56:59 testowy kernel: NVRM: x", None, "NVRM: x"),
    ("2026-03-25T13:14:27+0100 host kernel: NVRM: x", None, "NVRM: x"),
    ("May 01 10:00:00.123456 host kernel: NVRM: x", None, "NVRM: x"),
    ("May 15 23:09:30 host-1 kernel: [  518.050606] Out of memory: x", 518.050606, "Out of memory: x"),
    ("May 18 19:02:39 kernel: NVRM: x", None, "NVRM: x"),
    ("kernel: NVRM: x", None, "NVRM: x"),
    ("[  518.050606] host-1 kernel: Out of memory: x", 518.050606, "Out of memory: x"),
    ("2026-05-18T19:02:39.123456+00:00 host-1 kernel: NVRM: x", None, "NVRM: x"),
    ("[Sun Mar 30 08:24:00 2025] Out of memory: x", None, "Out of memory: x"),
    ("6,452,12867298760,-;NVRM: x", 12867.29876, "NVRM: x"),
    ("NVRM: x", None, "NVRM: x"),
    # Only the line's start is a prefix: a time or a "kernel:" further on is the message's.
    ("traps: kernel: [5.0] NVRM: x", None, "traps: kernel: [5.0] NVRM: x"),
    # A program's own line, with an ISO time: no kernel message.
    ("2026-05-18T19:02:39 node7 myprog[99]: NVRM: x", None, "node7 myprog[99]: NVRM: x"),
])
def test_the_prefixes_are_taken_from_the_lines_start_only(line, seconds, message):
    assert core.split_line(line) == (seconds, message)


def test_an_events_texts_are_cut_and_rid_of_terminal_escapes():
    (event,) = core.kernel_events(["[5.0] NVRM: Xid (PCI:0000:01:00): 13, pid=7, name=py\x1b[2Jthon, "
                                   "\x1b[31mGraphics Exception " + "x" * (4 << 20)])["xids"]
    for text in (event["line"], event["detail"]):
        assert "\x1b" not in text and len(text.encode()) < 2100 and text.endswith(" bytes cut]")
    assert event["name"] == "python"


def test_an_xid_storm_is_bounded_and_counted():
    storm = lines("xid-13-unknown-process-dmesg-ctime.txt")[1:2] * (core.MAX_EVENTS + 10)
    found = core.kernel_events(storm)
    assert len(found["xids"]) == 50 and found["xid_count"] == core.MAX_EVENTS + 10


def test_an_unreadable_kernel_log_says_why(tmp_path):
    def refused(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")

    found, source, problem = core.read_kernel_log(str(tmp_path / "kmsg"), run=refused)
    assert found is None and source is None
    assert problem.startswith("kernel log not readable: ")
    assert "kmsg: No such file or directory" in problem and "Operation not permitted" in problem


def test_dmesg_is_the_fallback(tmp_path):
    def dmesg(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, "[1.0] a\n[2.0] b\n", "")

    assert core.read_kernel_log(str(tmp_path / "kmsg"), run=dmesg) == (["[1.0] a", "[2.0] b"], "dmesg", None)


def test_each_common_xid_has_the_reviewed_meaning_and_action():
    reviewed = json.loads((DATA.parent / "what_operators_read" / "xid_meanings.json").read_text(encoding="utf-8"))
    for number, texts in reviewed.items():
        (event,) = core.kernel_events(["[5.0] NVRM: Xid (PCI:0000:01:00): %s, pid=1, name=python3, details" % number])[
            "xids"]
        assert {"meaning": event["meaning"], "action": event["action"]} == texts, number
    assert sorted(int(number) for number in reviewed) == sorted(core.XID_MEANINGS)


def test_a_line_is_cut_at_its_line_end_only():
    assert core.split_line("[  5.000000] NVRM: GPU at PCI:0000:01:00: GPU-X\r\n") == (
        5.0, "NVRM: GPU at PCI:0000:01:00: GPU-X")


def test_no_event_counts_nothing():
    assert core.kernel_events(["[1.0] usb 1-1: new high-speed USB device"]) == {
        "oom_kills": [], "xids": [], "oom_kill_count": 0, "xid_count": 0}


def test_an_event_at_the_launch_time_itself_counts():
    (event,) = core.kernel_events(["[518.5] Out of memory: Killed process 7 (python3)"], since=518.5)["oom_kills"]
    assert event["pid"] == 7


def test_a_long_server_name_matches_the_kernels_comm_of_15_characters():
    found = core.kernel_events(["[1.0] Out of memory: Killed process 7 (python3.11-sgla)"],
                               server_names=["python3.11-sglang"])
    assert found["oom_kills"][0]["matched_by"] == "process name"


class FakeKmsg:
    """os.read of /dev/kmsg: one record per read, errors as OSError(errno)."""

    def __init__(self, answers):
        self.answers = iter(answers)

    def read(self, descriptor, size):
        answer = next(self.answers)
        if isinstance(answer, int):
            raise OSError(answer, "fake")
        return answer


def fake_kmsg(monkeypatch, tmp_path, answers):
    path = tmp_path / "kmsg"
    path.write_bytes(b"")
    monkeypatch.setattr(core.os, "read", FakeKmsg(answers).read)
    return str(path)


def test_kmsg_records_are_read_one_per_read_and_an_overrun_is_skipped(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, [
        b"6,1,100,-;first\n SUBSYSTEM=pci\n DEVICE=+pci:0000:01:00.0\n", b"4,2,200,-;bad \xff byte\n",
        errno.EPIPE, b"6,9,900,-;after the overrun\n", b"", b"6,10,1000,-;after the end"])
    assert core.read_kmsg(path) == ["6,1,100,-;first", "4,2,200,-;bad \ufffd byte", "6,9,900,-;after the overrun"]


def test_kmsg_reading_stops_at_the_buffers_end(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, [b"6,1,100,-;first\n", errno.EAGAIN, b"6,2,200,-;not yet written\n"])
    assert core.read_kmsg(path) == ["6,1,100,-;first"]


def test_a_kmsg_read_error_other_than_an_overrun_or_the_end_is_raised(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, [errno.EIO])
    with pytest.raises(OSError):
        core.read_kmsg(path)


def test_kmsg_reading_is_bounded_in_records(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, itertools.repeat(b"6,1,100,-;again\n"))
    monkeypatch.setattr(core, "MAX_KMSG_RECORDS", 2)
    assert core.read_kmsg(path, clock=itertools.count().__next__) == ["6,1,100,-;again"] * 2


def test_kmsg_reading_is_bounded_in_time(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, itertools.repeat(b"6,1,100,-;again\n"))
    # The deadline, 10 s, is taken at 0; reads start at 0 and 9.9; at the deadline itself reading stops.
    clock = iter([0, 0, 9.9, 10, 11]).__next__
    assert core.read_kmsg(path, clock=clock) == ["6,1,100,-;again"] * 2


def test_kmsg_is_read_without_blocking(tmp_path):
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that never writes: a blocking read would wait for ever
    result = []
    reader = threading.Thread(target=lambda: result.append(core.read_kmsg(str(fifo))), daemon=True)
    reader.start()
    reader.join(5)
    waited = reader.is_alive()
    os.close(writer)  # lets a blocked read end, so that a failure does not leave the thread behind
    reader.join(5)
    assert not waited and result == [[]]


def fake_dmesg(monkeypatch, tmp_path, script):
    folder = tmp_path / "bin"
    folder.mkdir()
    if script is not None:
        (folder / "dmesg").write_text("#!/bin/sh\n" + script)
        (folder / "dmesg").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return str(tmp_path / "kmsg")


def test_dmesg_output_is_text_with_undecodable_bytes_replaced(monkeypatch, tmp_path):
    kmsg = fake_dmesg(monkeypatch, tmp_path, "printf '[1.0] a\\n[2.0] b \\377\\n'\n")
    assert core.read_kernel_log(kmsg) == (["[1.0] a", "[2.0] b \ufffd"], "dmesg", None)


@pytest.mark.parametrize("script, dmesg_problem", [
    ("echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n",
     "dmesg: read kernel buffer failed: Operation not permitted"),
    ("exit 1\n", "exit code 1"),
    (None, "No such file or directory"),
])
def test_the_whole_problem_when_neither_kmsg_nor_dmesg_can_be_read(monkeypatch, tmp_path, script, dmesg_problem):
    kmsg = fake_dmesg(monkeypatch, tmp_path, script)
    assert core.read_kernel_log(kmsg) == (None, None, (
        "kernel log not readable: %s: No such file or directory; dmesg: %s (it needs root with CAP_SYSLOG, and "
        "/dev/kmsg in a container)" % (kmsg, dmesg_problem)))


def test_kmsg_reading_stops_after_a_million_records(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, itertools.repeat(b"6,1,100,-;again\n"))
    assert len(core.read_kmsg(path, clock=lambda: 0)) == 1 << 20


def test_the_kernel_log_is_read_from_dev_kmsg_by_default(monkeypatch):
    opened = []

    def refuse(path, flags, *args):
        opened.append(path)
        raise OSError(errno.EACCES, "Permission denied")

    def refused(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")

    monkeypatch.setattr(core.os, "open", refuse)
    assert core.read_kernel_log(run=refused)[2].startswith("kernel log not readable: /dev/kmsg: Permission denied; ")
    with pytest.raises(OSError):
        core.read_kmsg()
    assert opened == ["/dev/kmsg", "/dev/kmsg"]


HUGE = "9" * 4400  # int() refuses strings of more than 4300 digits


@pytest.mark.parametrize("line, xids, kills", [
    ("NVRM: Xid (PCI:0000:01:00): %s, pid=1, name=x, y" % HUGE, 0, 0),
    ("%s,1,%s,-;Killed process %s (python3), anon-rss:%skB" % (HUGE, HUGE, HUGE, HUGE), 0, 0),
    ("[%s.%s] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, y" % (HUGE, HUGE), 0, 0),
    ("[5.0] NVRM: Xid (PCI:0000:01:00): 79, pid=%s, name=x, y" % HUGE, 1, 0),
    ("Out of memory: Killed process 7 (python3) total-vm:1kB, anon-rss:%skB" % HUGE, 0, 1),
])
def test_a_number_of_more_than_20_digits_is_no_number_and_raises_nothing(line, xids, kills):
    found = core.kernel_events([line])
    assert (len(found["xids"]), len(found["oom_kills"])) == (xids, kills)
    for event in found["xids"]:
        assert (event["time"], event["pid"], event["detail"][:4]) == (5.0, None, "pid=")
    for event in found["oom_kills"]:
        assert (event["pid"], event["anon_rss_kb"]) == (7, None)


def test_the_largest_numbers_the_kernel_writes_are_read():
    found = core.kernel_events(["6,1,18446744073709551615,-;Out of memory: Killed process 4194304 (python3) "
                                "anon-rss:18,446,744,073,709,551,615kB"])
    (event,) = found["oom_kills"]
    assert (event["time"], event["pid"], event["anon_rss_kb"]) == (
        18446744073709.551615, 4194304, 18446744073709551615)


@pytest.mark.parametrize("line", [
    "1,1," + "1" * (1 << 20),
    "2024-01-01T" + "1" * (1 << 20),
    "Jan  1 00:00:00 " + "a" * (1 << 20),
    "[" + " " * (1 << 20),
    "[ 1." + "1" * (1 << 20),
    "NVRM: Xid (PCI:0000:00:00): 79, pid=1, name=" + "a" * (1 << 20),
    "Killed process 1 (" + "a)" * (1 << 19),
    "Killed process 1 (a) anon-rss:" + "1," * (1 << 19),
])
def test_a_1_mib_line_is_read_in_linear_time_and_cut(line):
    start = time.monotonic()
    found = core.kernel_events([line] * 20)
    assert time.monotonic() - start < 5
    assert all(len(event["line"]) < 2100 for event in found["xids"] + found["oom_kills"])


def test_a_line_is_parsed_up_to_its_first_16_kib_only():
    # A comm whose closing parenthesis lies past them ends no kill.
    found = core.kernel_events(["Out of memory: Killed process 7 (" + "a" * (16 << 10) + ") total-vm:1kB",
                                "NVRM: Xid (PCI:0000:01:00): 79, " + "x" * (1 << 20)])
    assert (found["oom_kill_count"], found["xid_count"]) == (0, 1)
    assert found["xids"][0]["detail"].endswith(" [... %d bytes cut]" % (core.LINE_CHARS - 2048 - 32))


def test_the_kernel_log_takes_no_longer_than_the_caller_has_left(monkeypatch, tmp_path):
    kmsg, dmesg = [], []

    def read_kmsg(path, seconds):
        kmsg.append(seconds)
        raise OSError(errno.EACCES, "Permission denied")

    def run(argv, **kwargs):
        dmesg.append(kwargs["timeout"])
        return subprocess.CompletedProcess(argv, 1, "", "\x1b[31mdmesg: denied\x1b[0m\n")

    monkeypatch.setattr(core, "read_kmsg", read_kmsg)
    assert core.read_kernel_log(run=run, seconds=5)[2] == (
        "kernel log not readable: /dev/kmsg: Permission denied; dmesg: dmesg: denied (it needs root with CAP_SYSLOG, "
        "and /dev/kmsg in a container)")
    core.read_kernel_log(run=run, seconds=20)
    core.read_kernel_log(run=run)
    assert (kmsg, dmesg) == ([5, 10, 10], [5, 20, 30])


def test_kmsg_reading_is_bounded_in_the_time_given(monkeypatch, tmp_path):
    path = fake_kmsg(monkeypatch, tmp_path, itertools.repeat(b"6,1,100,-;again\n"))
    # Taken at 0, a deadline of 2 s: a read at 1, none at 2.
    assert core.read_kmsg(path, clock=itertools.count().__next__, seconds=2) == ["6,1,100,-;again"]


GPU_HEALTH = DATA.parent / "gpu_health"


@pytest.mark.parametrize("name, expected", [
    # Plain dmesg, dmesg -x --time-format iso, dmesg -T, journalctl -k with a Polish month, bare messages.
    ("kernel-dmesg-xid79-h100.txt", [(79, "0000:5d:00", 4254.19786)]),
    ("kernel-dmesg-x-iso-xid13-xid43.txt", [(13, "0000:38:00", None)] * 16 + [(43, "0000:38:00", None)]),
    ("kernel-dmesg-ctime-xid119-h100.txt", [(119, "0000:9b:00", None)]),
    ("kernel-journal-polish-month-xid38-xid109.txt", [(38, "0000:07:00", None)] + [(109, "0000:07:00", None)] * 5),
    ("kernel-xid79-xid154-pf-flr-r610.txt", [(79, "0000:01:00", None), (154, "0000:01:00", None)]),
    # The driver's "fallen off the bus" without an Xid line, over three lines (dmesg's continuation lines, the
    # journal's): its Xid 79.
    ("kernel-dmesg-fallen-off-the-bus-no-xid-h100.txt", [(79, "0000:5d:00.0", 14387.209961)]),
    ("kernel-dmesg-fallen-off-the-bus-no-xid-open-570.txt", [(79, "0000:b3:00.0", 1843.308145)]),
    ("kernel-journalctl-k-fallen-off-the-bus-no-xid-b200.txt", [(79, "0000:18:00.0", None)]),
    # "GPU 0000:06:00.0: GPU has fallen off the bus." after the Xid 79 line of that GPU: the same event.
    ("kernel-xid79-no-pid-rtx5090.txt", [(79, "0000:06:00", None)]),
    # Module loading, NVSwitch device opens, a PCIe link a switch limits: none.
    ("kernel-dmesg-r-module-load.txt", []),
    ("kernel-kmsg-nvswitch-open.txt", []),
    ("kernel-dmesg-pcie-limited-by-gen4-switch.txt", []),
])
def test_the_kernel_log_is_read_in_each_of_its_shapes(name, expected):
    found = core.kernel_events((GPU_HEALTH / name).read_text().splitlines())
    assert [(event["xid"], event["device"], event["time"]) for event in found["xids"]] == expected
    assert found["xid_count"] == len(expected)


def test_a_gpu_fallen_off_the_bus_in_one_kmsg_record_is_its_xid_79():
    record = ("4,812,14387209961,-;NVRM: The NVIDIA GPU 0000:5d:00.0\\x0aNVRM: (PCI ID: 10de:2330) installed in this "
              "system has\\x0aNVRM: fallen off the bus and is not responding to commands.\\x0a")
    (event,) = core.kernel_events([record])["xids"]
    assert (event["xid"], event["device"], event["pid"], event["detail"]) == (
        79, "0000:5d:00.0", None, "GPU has fallen off the bus (the driver's message, no Xid line)")


@pytest.mark.parametrize("lines", [
    # The words quoted by someone else, a GPU named without the driver's next lines, too far from them.
    ["[ 1.0] audit: comm=\"NVRM: The NVIDIA GPU 0000:5d:00.0 has fallen off the bus and is not responding to "
     "commands\""],
    ["[ 1.0] NVRM: The NVIDIA GPU 0000:5d:00.0", "[ 2.0] usb 1-1: new device", "[ 3.0] usb 1-1: gone",
     "[ 4.0] usb 1-2: new device", "[ 5.0] NVRM: fallen off the bus and is not responding to commands."],
    ["[ 1.0] NVRM: The NVIDIA GPU not-an-address", "NVRM: fallen off the bus and is not responding to commands."],
])
def test_fallen_off_the_bus_counts_only_as_the_driver_says_it(lines):
    assert core.kernel_events(lines)["xids"] == []
