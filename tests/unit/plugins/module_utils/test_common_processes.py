"""_common/processes.py: what /proc/<pid>/stat says of a process, read after the last `)` of its name."""
import os
import signal
import subprocess
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import processes


def write_stat(proc_root, pid, state, comm="python", exit_code=0, group=None):
    """A /proc/<pid>/stat line as the kernel writes it: pgrp is field 5, starttime field 22, exit_code field 52."""
    group = str(group or pid)
    fields = [state, "1", group, group] + ["0"] * 15 + ["8150432"] + ["0"] * 29 + [str(exit_code)]
    (proc_root / str(pid)).mkdir(parents=True)
    (proc_root / str(pid) / "stat").write_text("%d (%s) %s\n" % (pid, comm, " ".join(fields)))


def test_a_zombie_or_a_dead_process_has_no_start_time(tmp_path):
    write_stat(tmp_path, 1234, "Z")
    write_stat(tmp_path, 1235, "X")
    write_stat(tmp_path, 1236, "S")
    assert [processes.process_start_time(pid, str(tmp_path)) for pid in (1234, 1235, 1236, 1237)] == [
        None, None, 8150432, None]


def test_the_state_is_read_after_the_last_parenthesis_of_the_name(tmp_path):
    write_stat(tmp_path, 1234, "R", comm="a) Z (b")
    write_stat(tmp_path, 1235, "Z", comm="a) R (b")
    assert processes.stat_fields(1234, str(tmp_path))[0] == "R"
    assert processes.process_start_time(1234, str(tmp_path)) == 8150432
    assert processes.process_start_time(1235, str(tmp_path)) is None


def test_a_stat_without_a_closing_parenthesis_is_not_read(tmp_path):
    (tmp_path / "1234").mkdir()
    (tmp_path / "1234" / "stat").write_text("1234 (cut")
    assert processes.stat_fields(1234, str(tmp_path)) is None


def test_the_exit_status_is_read_from_a_zombie_alone(tmp_path):
    write_stat(tmp_path, 1234, "Z", exit_code=int(signal.SIGKILL))
    write_stat(tmp_path, 1235, "Z", comm="a) S (b", exit_code=256)
    write_stat(tmp_path, 1236, "S", exit_code=9)
    # What a reader not allowed to trace the process reads.
    write_stat(tmp_path, 1237, "Z", exit_code=0)
    assert [processes.exit_status(pid, str(tmp_path)) for pid in (1234, 1235, 1236, 1237, 1238)] == [
        9, 256, None, None, None]


def test_the_exit_status_of_a_real_process_killed_and_not_yet_collected():
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while processes.exit_status(child.pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert processes.exit_status(child.pid) == signal.SIGKILL
        assert processes.process_start_time(child.pid) is None
    finally:
        child.wait()


def test_group_members_leave_out_zombies(tmp_path):
    write_stat(tmp_path, 1234, "S")
    write_stat(tmp_path, 1235, "Z", group=1234)
    write_stat(tmp_path, 1236, "S", comm="a) Z (b", group=1234)
    write_stat(tmp_path, 1237, "S")
    (tmp_path / "self").mkdir()
    assert processes.group_members(1234, str(tmp_path)) == [1234, 1236]
