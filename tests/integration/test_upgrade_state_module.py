"""upgrade_state, as root: the node lock one run holds at a time, taken over only from a run proved
gone, and the record of a switch kept until the switch ends."""
import json
import os

from conftest import run_module

RUN_A = "a" * 32
RUN_B = "b" * 32
OWNER_A = {"id": RUN_A, "controller": "ops-1", "pid": 4242, "pid_started": "1", "user": "ops", "started": 1000.0}
OWNER_B = dict(OWNER_A, id=RUN_B, pid=4343)
SWITCH = {"from": "cu128", "to": "cu130", "from_venv": "ml-env.cu128-1a2b3c4d", "to_venv": "ml-env.cu130-5e6f7a8b",
          "stopped_at": 2000.0}


def state_dir(tmp_path):
    path = tmp_path / "state"
    os.chmod(str(tmp_path), 0o755)
    return str(path)


def test_one_run_holds_the_node_and_a_second_is_refused_naming_it(tmp_path):
    directory = state_dir(tmp_path)
    taken = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_A)
    assert (taken["changed"], taken["locked"], taken["holder"], taken["record"]) == (True, True, OWNER_A, None), taken
    lock = tmp_path / "state" / "upgrade" / "lock.json"
    assert json.loads(lock.read_text()) == OWNER_A and oct(os.stat(str(lock)).st_mode & 0o777) == "0o600"
    assert oct(os.stat(str(lock.parent)).st_mode & 0o777) == "0o700"
    again = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_A)
    assert (again["changed"], again["locked"]) == (False, True)
    refused = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_B)
    assert (refused["changed"], refused["locked"], refused["holder"]) == (False, False, OWNER_A), refused
    assert refused["message"].startswith("Another upgrade holds this node: run aaaaaaaa of ops on ops-1 (process 4242)")
    assert json.loads(lock.read_text()) == OWNER_A
    taken_over = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_B, gone_run=RUN_A)
    assert (taken_over["changed"], taken_over["locked"]) == (True, True)
    assert json.loads(lock.read_text()) == OWNER_B


def test_the_record_is_written_under_the_lock_kept_by_a_release_and_removed_when_the_switch_ends(tmp_path):
    directory = state_dir(tmp_path)
    unlocked = run_module("upgrade_state", state="switching", state_dir=directory, owner=OWNER_A, record=SWITCH)
    assert unlocked.get("failed") and "does not hold the node's upgrade lock" in unlocked["msg"], unlocked
    run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_A)
    written = run_module("upgrade_state", state="switching", state_dir=directory, owner=OWNER_A, record=SWITCH)
    assert written["changed"] and written["record"] == dict(SWITCH, run=RUN_A), written
    released = run_module("upgrade_state", state="released", state_dir=directory, owner=OWNER_A)
    assert (released["changed"], released["holder"], released["record"]) == (True, None, dict(SWITCH, run=RUN_A))
    busy = run_module("upgrade_state_info", state_dir=directory, require_free=True)
    assert busy.get("failed") and busy["msg"].startswith("A switch from cu128 to cu130 that began"), busy
    retaken = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_B)
    assert retaken["locked"] and retaken["record"] == dict(SWITCH, run=RUN_A)
    ended = run_module("upgrade_state", state="ended", state_dir=directory, owner=OWNER_B)
    assert (ended["changed"], ended["locked"], ended["record"]) == (True, True, None)
    assert run_module("upgrade_state", state="released", state_dir=directory, owner=OWNER_B)["holder"] is None
    assert os.listdir(str(tmp_path / "state" / "upgrade")) == []
    free = run_module("upgrade_state_info", state_dir=directory, require_free=True)
    assert not free.get("failed") and free["message"] == "", free


def test_check_mode_takes_nothing_and_a_forged_or_linked_lock_is_refused(tmp_path):
    directory = state_dir(tmp_path)
    checked = run_module("upgrade_state", check_mode=True, state="locked", state_dir=directory, owner=OWNER_A)
    assert checked["changed"] and not (tmp_path / "state").exists(), checked
    run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_A)
    lock = tmp_path / "state" / "upgrade" / "lock.json"
    lock.write_text('{"id": "me"}\n')
    forged = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_B)
    assert forged.get("failed") and "lock.json: the lock is not one the upgrade writes" in forged["msg"], forged
    lock.unlink()
    os.symlink("/etc/shadow", str(lock))
    linked = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_B)
    assert linked.get("failed") and "is a symbolic link" in linked["msg"], linked
    assert os.readlink(str(lock)) == "/etc/shadow"


def test_a_state_directory_another_user_can_write_is_refused(tmp_path):
    directory = state_dir(tmp_path)
    os.makedirs(directory)
    os.chmod(directory, 0o777)
    refused = run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_A)
    assert refused.get("failed") and "state_dir=" in refused["msg"] and "chmod go-w" in refused["msg"], refused
    assert os.listdir(directory) == []


def test_the_info_module_reads_the_lock_and_the_record_and_changes_nothing(tmp_path):
    directory = state_dir(tmp_path)
    nothing = run_module("upgrade_state_info", state_dir=directory)
    assert (nothing["changed"], nothing["holder"], nothing["record"], nothing["message"]) == (False, None, None, "")
    assert not (tmp_path / "state").exists()
    run_module("upgrade_state", state="locked", state_dir=directory, owner=OWNER_A)
    for check_mode in (True, False):
        held = run_module("upgrade_state_info", check_mode=check_mode, state_dir=directory)
        assert not held.get("failed") and not held["changed"] and held["holder"] == OWNER_A, held
        assert held["message"].startswith("An upgrade holds this node: run aaaaaaaa"), held
    refused = run_module("upgrade_state_info", state_dir=directory, require_free=True)
    assert refused.get("failed") and refused["msg"] == refused["message"] and refused["holder"] == OWNER_A, refused
    (tmp_path / "state" / "upgrade" / "lock.json").write_text('{"id": "me"}\n')
    forged = run_module("upgrade_state_info", state_dir=directory)
    assert forged.get("failed") and "lock.json: the lock is not one the upgrade writes" in forged["msg"], forged


def test_the_module_that_changes_the_lock_has_no_state_that_only_reads(tmp_path):
    for state in ({}, {"state": "current"}):
        refused = run_module("upgrade_state", state_dir=state_dir(tmp_path), owner=OWNER_A, **state)
        assert refused.get("failed") and "state" in refused["msg"], refused
