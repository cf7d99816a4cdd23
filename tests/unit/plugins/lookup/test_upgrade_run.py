"""The upgrade_run lookup: this run's identity, and a run called gone only when its process on this controller
is."""
import os
import signal
import socket
import subprocess
import time

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.blackwell.gpu_node.plugins.lookup.upgrade_run import LookupModule, process_started
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import stat_fields
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import owner_problems


def test_this_run_is_named_by_its_controller_process_and_a_fresh_id():
    first, = LookupModule().run([])
    second, = LookupModule().run([])
    assert owner_problems(first) == []
    assert (first["controller"], first["pid"]) == (socket.gethostname(), os.getpid())
    assert first["pid_started"] == process_started(os.getpid()) and first["pid_started"].isdigit()
    assert first["id"] != second["id"]


def test_a_run_whose_process_ended_is_gone_and_a_live_or_foreign_one_is_not():
    ended = subprocess.Popen(["true"])
    ended.wait()
    me, = LookupModule().run([])
    assert LookupModule().run([dict(me, pid=ended.pid), me, dict(me, controller="elsewhere", pid=ended.pid)]) == [
        True, False, False]
    assert LookupModule().run([dict(me, pid_started="1")]) == [True]


def test_a_run_killed_whose_process_is_not_collected_yet_is_gone():
    """Its zombie keeps its pid and start time until its parent collects it: it runs no more all the same."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        me, = LookupModule().run([])
        run = dict(me, pid=child.pid, pid_started=process_started(child.pid))
        assert LookupModule().run([run]) == [False]
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while stat_fields(child.pid)[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert LookupModule().run([run]) == [True]
    finally:
        child.wait()


def test_a_zombie_has_no_start_whatever_its_name(tmp_path):
    pid = os.getpid()  # exists, so that only the stat file says what it is
    for root, stat in (("zombie", "%d (python) Z 1 1 1" % pid), ("running", "%d (a) Z (b) R 1 1 1" % pid),
                       ("named", "%d (a) R (b) Z 1 1 1" % pid)):
        (tmp_path / root / str(pid)).mkdir(parents=True)
        (tmp_path / root / str(pid) / "stat").write_text(stat + " 0" * 15 + " 8812731 0 0\n")
    assert [process_started(pid, str(tmp_path / root)) for root in ("zombie", "running", "named")] == [
        None, "8812731", None]


def test_a_term_that_is_no_run_is_an_error():
    with pytest.raises(AnsibleLookupError, match="upgrade_run: a run must be a dict"):
        LookupModule().run(["me"])
