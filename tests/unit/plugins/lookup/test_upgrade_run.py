"""The upgrade_run lookup: this run's identity, and a run called gone only when its process on this controller
is."""
import os
import socket
import subprocess

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.blackwell.gpu_node.plugins.lookup.upgrade_run import LookupModule, process_started
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


def test_a_term_that_is_no_run_is_an_error():
    with pytest.raises(AnsibleLookupError, match="upgrade_run: a run must be a dict"):
        LookupModule().run(["me"])
