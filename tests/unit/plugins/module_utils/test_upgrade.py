"""_stack/upgrade.py: the plan prepare makes, the node lock's decisions and the shapes of a lock and a record, and
the gates a switch takes across an interruption."""
import re

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import upgrade

CU128 = {"venv": "ml-env.cu128-1a2b3c4d", "profile": "cu128"}
CU130 = {"venv": "ml-env.cu130-5e6f7a8b", "profile": "cu130"}
RUN = "9f0c2e4b6a8d4f10b2c3d4e5f6a7b8c9"
OWNER = {"id": RUN, "controller": "ops-1", "pid": 4242, "pid_started": "8812731", "user": "ops", "started": 1000.0}
RECORD = {"run": RUN, "from": "cu128", "to": "cu130", "from_venv": CU128["venv"], "to_venv": CU130["venv"],
          "stopped_at": 2000.0}
CANARY = ("ready", "generate", "benchmark")
# The canary's measurement on cu128 before the stop, as benchmark_measure.yml keeps it.
BASELINE = {"host": "gpu-1", "time": "2026-12-07T16:00:00Z", "workload": {"name": "chat", "prompts": 4},
            "metrics": {"output_throughput": 200.0, "completed": 4, "failed": 0, "errors": []},
            "stack_profile": "cu128"}
# A canary's switch killed just before its new server was measured: ready and generate passed, benchmark not.
GATED = dict(RECORD, gates=list(CANARY), passed=["ready", "generate"], before={"benchmark": BASELINE})


def test_a_node_on_the_target_that_serves_is_unchanged_and_nothing_is_recorded():
    decided = upgrade.plan(CU130, CU130, None, True)
    assert decided == {"from": "cu130", "to": "cu130", "needed": False, "resumed": False, "outcome": "unchanged",
                       "snapshot": False, "stopped_at": None, "recorded_stop": None, "from_venv": CU130["venv"],
                       "to_venv": CU130["venv"], "gates": [], "passed": [], "pending": [], "before": {},
                       "note": None, "seconds_to_ready": None, "diagnosis": None, "timeline": [],
                       "readahead": None, "capacity": None, "halts": False, "message": "cu130 -> cu130: unchanged"}


def test_a_node_on_the_old_stack_is_switched_from_a_new_snapshot():
    decided = upgrade.plan(CU128, CU130, None, True)
    assert (decided["needed"], decided["outcome"], decided["snapshot"], decided["stopped_at"]) == (
        True, "prepared", True, None)
    assert (decided["from"], decided["from_venv"], decided["note"]) == ("cu128", CU128["venv"], None)


def test_a_node_whose_link_moved_but_which_does_not_serve_is_switched_again_not_unchanged():
    """The link alone said 'unchanged' after an interruption between the link and the gate."""
    decided = upgrade.plan(CU130, CU130, None, False)
    assert (decided["needed"], decided["outcome"], decided["snapshot"]) == (True, "prepared", False)
    assert decided["note"] == "the node runs cu130 but did not answer a generation: it is started and gated again"


@pytest.mark.parametrize("running", [CU128, CU130], ids=["stopped before the link", "stopped after the link"])
def test_a_switch_left_by_an_interrupted_run_is_finished_from_its_snapshot_and_counts_its_outage(running):
    decided = upgrade.plan(running, CU130, RECORD, False)
    assert (decided["needed"], decided["snapshot"], decided["stopped_at"]) == (True, False, 2000.0)
    assert (decided["from"], decided["from_venv"]) == ("cu128", CU128["venv"])
    assert decided["note"] == ("a switch to cu130 begun by run 9f0c2e4b did not end: it is finished from the "
                               "snapshot that run took")


def test_a_record_of_a_node_that_serves_on_the_target_is_upgraded_without_a_new_switch():
    """Its probe just now is the ready and generate gates; the record names no other."""
    decided = upgrade.plan(CU130, CU130, RECORD, True)
    assert (decided["needed"], decided["resumed"], decided["outcome"], decided["stopped_at"]) == (
        False, True, "upgraded", None)
    assert (decided["gates"], decided["passed"], decided["pending"], decided["recorded_stop"]) == (
        ["ready", "generate"], ["ready", "generate"], [], 2000.0)
    assert decided["note"] == "switched by run 9f0c2e4b, which was interrupted after the new server passed every gate"


def test_going_back_after_a_run_interrupted_past_the_link_abandons_its_switch_and_names_the_real_move():
    decided = upgrade.plan(CU130, CU128, RECORD, False)
    assert (decided["from"], decided["to"], decided["needed"], decided["outcome"]) == ("cu130", "cu128", True,
                                                                                       "prepared")
    assert (decided["snapshot"], decided["stopped_at"], decided["from_venv"]) == (False, 2000.0, CU128["venv"])
    assert decided["note"] == ("a switch from cu128 to cu130 begun by run 9f0c2e4b did not end and left the node on "
                               "cu130, not serving: that switch is abandoned, and the node goes back to cu128")


def test_going_back_after_a_run_interrupted_before_the_link_restarts_the_old_stack():
    decided = upgrade.plan(CU128, CU128, RECORD, False)
    assert (decided["from"], decided["to"], decided["needed"]) == ("cu128", "cu128", True)
    assert decided["note"] == ("a switch from cu128 to cu130 begun by run 9f0c2e4b did not end and left the node on "
                               "cu128, not serving: that switch is abandoned, and the node goes back to cu128")


def test_a_switch_abandoned_for_a_third_profile_is_a_switch_to_it():
    cu129 = {"venv": "ml-env.cu129-9a8b7c6d", "profile": "cu129"}
    decided = upgrade.plan(CU130, cu129, RECORD, True)
    assert (decided["from"], decided["to"], decided["stopped_at"]) == ("cu130", "cu129", None)
    assert decided["note"].endswith("left the node on cu130, serving: that switch is abandoned, and the node is "
                                    "switched to cu129")


def test_a_node_still_serving_the_target_that_an_interrupted_switch_was_to_leave_is_unchanged():
    decided = upgrade.plan(CU128, CU128, RECORD, True)
    assert (decided["from"], decided["needed"], decided["resumed"], decided["outcome"]) == (
        "cu128", False, True, "unchanged")
    assert decided["note"] == ("a switch from cu128 to cu130 begun by run 9f0c2e4b did not end, and the node serves "
                               "cu128: that switch is abandoned")


def test_a_record_of_a_node_still_serving_its_old_stack_starts_the_outage_anew():
    decided = upgrade.plan(CU128, CU130, RECORD, True)
    assert (decided["needed"], decided["snapshot"], decided["stopped_at"]) == (True, False, None)


def test_an_unknown_profile_is_named_so():
    assert upgrade.plan({"venv": None, "profile": None}, CU130, None, False)["from"] == "unknown"


@pytest.mark.parametrize("holder,gone_run,decision", [
    (None, None, "take"),
    (OWNER, None, "keep"),
    (dict(OWNER, id="0" * 32), None, "refuse"),
    (dict(OWNER, id="0" * 32), "0" * 32, "replace"),
    (dict(OWNER, id="0" * 32), "1" * 32, "refuse"),
])
def test_the_lock_is_taken_kept_replaced_only_when_proved_gone_or_refused(holder, gone_run, decision):
    assert upgrade.lock_decision(holder, OWNER, gone_run) == decision


def test_a_run_is_gone_only_on_its_own_controller_when_its_process_is():
    assert upgrade.gone(OWNER, "ops-1", lambda pid: None) is True
    assert upgrade.gone(OWNER, "ops-1", lambda pid: "999") is True  # the id was taken by another process
    assert upgrade.gone(OWNER, "ops-1", lambda pid: "8812731") is False
    assert upgrade.gone(OWNER, "ops-2", lambda pid: None) is False
    assert upgrade.gone(dict(OWNER, pid_started=None), "ops-1", lambda pid: "") is False


LOCK = "/var/lib/blackwell-gpu-node/upgrade/lock.json"
# A run of another controller: an AWX job's pod has a host name of its own.
ELSEWHERE = dict(OWNER, id="0" * 32, controller="awx-job-17-x2b9q")


def test_the_refusal_names_the_holder_its_age_and_the_way_out():
    message = upgrade.refusal(ELSEWHERE, OWNER, None, 1065.9, LOCK)
    assert message == (
        "Another upgrade holds this node: run 00000000 of ops on awx-job-17-x2b9q (process 4242), 65 s old, a run of "
        "another controller: from ops-1 it cannot be told whether that run is still at it or was interrupted. Wait "
        "for it to end. Only a run from awx-job-17-x2b9q takes that lock over by itself. To take the node over from "
        "ops-1, first make sure that run is gone (process 4242 on awx-job-17-x2b9q no longer runs; an AWX job's pod "
        "ends with its job), then remove its lock as root on the node (rm %s), and run the upgrade again. This run "
        "changed nothing on the node" % LOCK)


def test_a_refusal_says_what_the_node_runs_when_no_switch_is_under_way():
    message = upgrade.refusal(ELSEWHERE, OWNER, None, 1065.9, LOCK, dict(CU128, serving=True))
    assert ". No switch is under way on it: its stable link is on cu128 (ml-env.cu128-1a2b3c4d) and its server " \
           "answers. Wait for it to end." in message
    assert "Nothing was changed" not in message and message.endswith("This run changed nothing on the node")


def test_a_refusal_over_another_controllers_lock_says_the_node_is_half_switched_and_how_to_take_over():
    message = upgrade.refusal(ELSEWHERE, OWNER, dict(RECORD, run=ELSEWHERE["id"]), 2030, LOCK)
    assert ("A switch from cu128 (ml-env.cu128-1a2b3c4d) to cu130 (ml-env.cu130-5e6f7a8b) that run 00000000 began "
            "30 s ago, stopping the node's server, has not ended: unless that run is still at it, the node is "
            "half-switched and serves nothing.") in message
    assert message.endswith(
        "remove its lock as root on the node (rm %s), not the switch record beside it, from which the next run "
        "finishes or abandons that switch, and run the upgrade again: with -e stack_profile=cu130 it finishes that "
        "switch from the snapshot its run took, taking every gate its new server had not passed (rolled back if one "
        "fails), with -e stack_profile=cu128 it abandons it and goes back. This run changed nothing on the node"
        % LOCK)
    assert "Nothing was changed" not in message
    unknown = upgrade.refusal(ELSEWHERE, OWNER, dict(RECORD, run=ELSEWHERE["id"], **{"from": "unknown",
                                                                                     "from_venv": None}), 2030, LOCK)
    assert "A switch from unknown to cu130 (ml-env.cu130-5e6f7a8b) that run" in unknown
    assert unknown.endswith("(rolled back if one fails). This run changed nothing on the node")


def test_a_refusal_over_a_stale_lock_of_another_controller_says_in_what_state_its_run_left_the_node():
    """An AWX job killed past the link move: its switch record, the link on the target, no server answering."""
    message = upgrade.refusal(ELSEWHERE, OWNER, dict(GATED, run=ELSEWHERE["id"]), 2030, LOCK,
                              dict(CU130, serving=False))
    assert ("has not ended (its new server passed ready, generate, not benchmark): its stable link is on cu130 "
            "(ml-env.cu130-5e6f7a8b), the switch's target, and its server does not answer: the node is out of "
            "service.") in message
    assert "a run of another controller: from ops-1 it cannot be told whether that run is still at it or was " \
           "interrupted" in message
    assert "first make sure that run is gone (process 4242 on awx-job-17-x2b9q no longer runs" in message
    before_the_link = upgrade.refusal(ELSEWHERE, OWNER, GATED, 2030, LOCK, dict(CU128, serving=True))
    assert "its stable link is on cu128 (ml-env.cu128-1a2b3c4d), the stack the switch began from, and its server " \
           "answers: the node serves, half-switched." in before_the_link


def test_a_refusal_over_a_lock_of_this_controller_waits_for_the_take_over_by_itself():
    message = upgrade.refusal(dict(ELSEWHERE, controller="ops-1"), OWNER, RECORD, 2030, LOCK)
    assert "the node is half-switched and serves nothing" in message
    assert "another controller" not in message
    assert message.endswith("Wait for it to end: once its process is gone, a run from this controller takes its "
                            "lock over by itself; run the upgrade again: with -e stack_profile=cu130 it finishes "
                            "that switch from the snapshot its run took, taking every gate its new server had not "
                            "passed (rolled back if one fails), with -e stack_profile=cu128 it abandons it and goes "
                            "back. This run changed nothing on the node")
    assert "rm " not in message


def test_a_node_held_by_another_run_is_reported_with_what_it_runs_not_as_untouched():
    """The row named 'unknown -> cu130' and said nothing was changed, of a node another controller left half-way."""
    refused = upgrade.refusal(ELSEWHERE, OWNER, dict(GATED, run=ELSEWHERE["id"]), 2030, LOCK,
                              dict(CU130, serving=False))
    record, message = upgrade.transition(None, "not_prepared", {
        "task": "Ensure no other upgrade runs on the node", "msg": refused, "from": "cu130", "to": "cu130",
        "held": True})
    assert (record["from"], record["outcome"], record["halts"]) == ("cu130", "not prepared", True)
    assert record["diagnosis"] == "Ensure no other upgrade runs on the node: " + refused
    assert "not touched" not in record["diagnosis"] and "Nothing was changed" not in record["diagnosis"]
    assert "the node is out of service" in message and "awx-job-17-x2b9q" in message


def test_what_is_left_behind_tells_another_playbook_what_to_do():
    assert upgrade.left_behind(None, None, 0, "/l") == ""
    assert upgrade.left_behind(None, RECORD, 2030, "/l") == (
        "A switch from cu128 to cu130 that began 30 s ago did not end here: run the upgrade again "
        "(-e stack_profile=cu130) to finish it or roll it back")
    assert upgrade.left_behind(None, GATED, 2030, "/l") == (
        "A switch from cu128 to cu130 that began 30 s ago did not end here (its new server passed ready, generate, "
        "not benchmark): run the upgrade again (-e stack_profile=cu130) to finish it or roll it back")
    assert upgrade.left_behind(OWNER, None, 1010, "/l").startswith(
        "An upgrade holds this node: run 9f0c2e4b of ops on ops-1 (process 4242), 10 s old.")


@pytest.mark.parametrize("owner,problem", [
    ("ops", "owner must be a dict"),
    ({k: v for k, v in OWNER.items() if k != "pid"}, "owner lacks pid"),
    (dict(OWNER, id="ABC"), "owner.id must be 32 lowercase hex digits"),
    (dict(OWNER, pid=True), "owner.pid must be a process id"),
    (dict(OWNER, pid=0), "owner.pid must be a process id"),
    (dict(OWNER, started="now"), "owner.started must be a time in seconds"),
    (dict(OWNER, user="o\nps"), "owner.user must be a printable name"),
    (dict(OWNER, pid_started=5), "owner.pid_started must be a string or null"),
])
def test_an_owner_of_another_shape_is_refused(owner, problem):
    assert any(found.startswith(problem) for found in upgrade.owner_problems(owner))


@pytest.mark.parametrize("record,problem", [
    ([], "the record must be a dict"),
    (dict(RECORD, run="x"), "record.run must be a run's id"),
    (dict(RECORD, to=""), "record.to must be a printable name"),
    (dict(RECORD, from_venv=3), "record.from_venv must be a name or null"),
    (dict(RECORD, stopped_at=0), "record.stopped_at must be a time in seconds"),
    ({"run": RUN}, "the record lacks from, to, from_venv, to_venv, stopped_at"),
    (dict(GATED, gates=["ready", "warmup"]), "record.gates must be a list of ready, generate, benchmark, gateway"),
    (dict(GATED, gates="ready"), "record.gates must be a list"),
    (dict(GATED, passed=["gateway"]), "record.passed must be a list of the record's gates"),
    (dict(GATED, before={"generate": BASELINE}), "record.before must map benchmark or gateway to a measurement"),
    (dict(GATED, before={"benchmark": 200.0}), "record.before must map benchmark or gateway to a measurement"),
    (dict(GATED, before={"benchmark": dict(BASELINE, argv=["x" * 17000])}), "the record must be at most 16384 bytes"),
])
def test_a_record_of_another_shape_is_refused(record, problem):
    assert any(found.startswith(problem) for found in upgrade.record_problems(record))
    assert upgrade.owner_problems(OWNER) == [] and upgrade.record_problems(RECORD) == []
    assert upgrade.record_problems(GATED) == []


def test_a_lock_is_read_back_as_written_and_anything_else_is_named():
    assert upgrade.decoded(upgrade.encoded(OWNER).encode(), "lock", upgrade.owner_problems) == OWNER
    with pytest.raises(upgrade.BadState, match="the lock is not JSON"):
        upgrade.decoded(b"\xff", "lock", upgrade.owner_problems)
    with pytest.raises(upgrade.BadState, match="the lock is not one the upgrade writes: owner lacks"):
        upgrade.decoded(b"{}", "lock", upgrade.owner_problems)


# The node's transitions: transition(record, event, evidence) -> (record, message).
PREPARED = upgrade.plan(CU128, CU130, None, True)
FAILED_TASK = {"task": "Verify the target's virtualenv again", "msg": "sgl_kernel does not import"}
# The new server's ready line, /health and one generation, as upgrade_gate.yml notes them.
STARTED = ("passed", {"gates": ["ready", "generate"]})


def _walk(*steps, record=None):
    record = PREPARED if record is None else record
    for event, evidence in steps:
        record, _message = upgrade.transition(record, event, evidence)
    return record


def test_a_node_ready_on_the_new_stack_is_upgraded_counting_from_its_stop():
    record, message = upgrade.transition(_walk(STARTED), "ready", {"stopped_at": 100.0, "now": 112.34})
    assert (record["outcome"], record["seconds_to_ready"], record["halts"]) == ("upgraded", 12.3, False)
    assert message == "cu128 -> cu130 upgraded: ready on the new stack 12.3 s after the stop"
    assert PREPARED["outcome"] == "prepared", "the record given is never changed"


def test_a_switch_an_interrupted_run_began_counts_from_the_recorded_stop():
    resumed = upgrade.plan(CU128, CU130, RECORD, False)
    record, _message = upgrade.transition(_walk(STARTED, record=resumed), "ready", {"stopped_at": 2100.0, "now": 2150.0})
    assert record["seconds_to_ready"] == 150.0


def test_a_node_refused_before_its_stop_is_not_prepared_and_halts_the_batches():
    record, message = upgrade.transition(PREPARED, "not_prepared", FAILED_TASK)
    assert (record["outcome"], record["needed"], record["halts"]) == ("not prepared", False, True)
    assert record["diagnosis"] == ("Verify the target's virtualenv again: sgl_kernel does not import"
                                   " The old server was not touched.")
    assert message == "cu128 -> cu130 not switched: " + record["diagnosis"]


def test_a_node_that_failed_before_it_had_a_plan_is_named_from_the_evidence():
    record, _message = upgrade.transition(None, "not_prepared", dict(FAILED_TASK, **{"from": "cu128", "to": "cu130"}))
    assert (record["from"], record["to"], record["outcome"], record["seconds_to_ready"]) == (
        "cu128", "cu130", "not prepared", None)


@pytest.mark.parametrize("known, diagnosis", [
    ({"cause": "flashinfer's JIT cache is not writable.", "fix": "set HOME"},
     "flashinfer's JIT cache is not writable. Fix: set HOME"),
    (None, "Start the server: not ready after 600 s"),
])
def test_a_failed_switch_rolls_back_with_the_known_diagnosis_first(known, diagnosis):
    record, message = upgrade.transition(PREPARED, "switch_failed", {
        "task": "Start the server", "msg": "not ready after 600 s", "known": known})
    assert (record["outcome"], record["diagnosis"], record["halts"]) == ("rolling back", diagnosis, True)
    assert message == "cu128 -> cu130 failed, rolling back: " + diagnosis


def test_a_canary_that_failed_its_gate_after_ready_is_rolled_back_not_reported_upgraded():
    record = _walk(STARTED, ("ready", {"stopped_at": 0, "now": 5}),
                   ("switch_failed", {"task": "Ensure the canary serves no slower", "msg": "12% slower"}),
                   ("rolled_back", {"stopped_at": 0, "now": 40,
                                    "restored": {"actions": ["link"], "msg": "restored", "source": "file"}}))
    assert (record["outcome"], record["seconds_to_ready"], record["restored"]) == ("rolled back", 40.0, ["link"])
    assert record["diagnosis"] == "Ensure the canary serves no slower: 12% slower"


def test_a_rollback_from_a_fallback_says_the_next_upgrade_records_the_node_again():
    record = _walk(("switch_failed", {"task": "Start", "msg": "died"}),
                   ("rolled_back", {"stopped_at": 0, "now": 1, "restored": {
                       "actions": [], "msg": "the snapshot file was lost: the run's own was restored", "source": "run"}}))
    assert record["diagnosis"] == ("Start: died | the snapshot file was lost: the run's own was restored; the next "
                                   "upgrade records the node again")


def test_a_failed_rollback_says_loudly_that_the_node_does_not_serve():
    record, message = upgrade.transition(_walk(("switch_failed", {"task": "Start", "msg": "died"})),
                                         "rollback_failed", {"task": "Start the old server", "msg": "died too",
                                                             "host": "node-3"})
    assert (record["outcome"], record["halts"]) == ("ROLLBACK FAILED", True)
    assert record["diagnosis"] == "Start: died | Rollback: Start the old server: died too"
    assert message.startswith("node-3 IS NOT SERVING: the upgrade to cu130 failed and so did the rollback to cu128.")


def test_a_failed_prune_keeps_the_outcome_and_says_so():
    record, _message = upgrade.transition(_walk(STARTED, ("ready", {"stopped_at": 0, "now": 1})), "prune_failed",
                                          {"msg": "busy"})
    assert (record["outcome"], record["diagnosis"], record["halts"]) == (
        "upgraded", "old virtualenvs not pruned: busy", False)


@pytest.mark.parametrize("steps, event", [
    # A node rolled back must never be reported upgraded.
    ([("switch_failed", {}), ("rolled_back", {"stopped_at": 0, "now": 1,
                                              "restored": {"actions": [], "msg": "", "source": "file"}})], "ready"),
    ([("switch_failed", {})], "ready"),
    # Ready before its new server answered a generation.
    ([], "ready"),
    ([("passed", {"gates": ["ready"]})], "ready"),
    ([], "rolled_back"),
    ([], "rollback_failed"),
    ([("not_prepared", {})], "ready"),
    ([("not_prepared", {})], "switch_failed"),
    ([], "prune_failed"),
    ([], "upgraded"),
])
def test_an_event_the_node_cannot_be_in_is_refused(steps, event):
    with pytest.raises(ValueError):
        upgrade.transition(_walk(*steps), event, {"stopped_at": 0, "now": 1, "task": "t", "msg": "m"})


def test_an_interrupted_node_is_switched_again_by_the_next_run_not_skipped():
    """A run killed after the link moved left the record; the node does not serve: the next run switches it."""
    record = upgrade.plan(CU130, CU130, RECORD, False)
    assert (record["needed"], record["outcome"], record["halts"]) == (True, "prepared", False)
    assert _walk(STARTED, ("ready", {"stopped_at": 0, "now": 2001.0}), record=record)["seconds_to_ready"] == 1.0


# Gates across an interruption: the canary's benchmark gate, which a run killed before it had not passed.


def test_an_interrupted_canary_whose_benchmark_gate_had_not_passed_is_not_declared_upgraded():
    """The re-run found the link on cu130 and one generation answered: it said upgraded, and the slow server
    stayed. The gate the record says was not passed is taken now, with the baseline the record kept, even by a
    re-run whose own settings do not ask for it."""
    for gates in (CANARY, ("ready", "generate")):
        decided = upgrade.plan(CU130, CU130, GATED, True, gates)
        assert (decided["needed"], decided["resumed"], decided["outcome"], decided["halts"]) == (
            False, True, "prepared", False)
        assert (decided["gates"], decided["passed"], decided["pending"]) == (
            list(CANARY), ["ready", "generate"], ["benchmark"])
        assert (decided["before"], decided["from"], decided["recorded_stop"]) == (
            {"benchmark": BASELINE}, "cu128", 2000.0)
        assert decided["note"] == ("switched by run 9f0c2e4b, which was interrupted before the new server passed "
                                   "benchmark: the node serves cu130 and takes that gate now")
    with pytest.raises(ValueError, match="a node that has not passed benchmark cannot be ready"):
        upgrade.transition(decided, "ready", {"stopped_at": None, "now": 3000.0})


def test_an_interrupted_canary_that_serves_slower_is_rolled_back_as_in_an_uninterrupted_run():
    resumed = upgrade.plan(CU130, CU130, GATED, True, CANARY)
    failed = _walk(("switch_failed", {"task": "Ensure the canary serves no slower on the new stack",
                                      "msg": "the canary serves slower on cu130 than on cu128"}), record=resumed)
    assert (failed["outcome"], failed["halts"]) == ("rolling back", True)
    record = _walk(("rolled_back", {"stopped_at": 3000.0, "now": 3012.0, "restored": {
        "actions": ["link"], "msg": "restored", "source": "file"}}), record=failed)
    # It served on cu130 until this run's rollback: out of service since the rollback, not the old stop.
    assert (record["outcome"], record["seconds_to_ready"], record["halts"]) == ("rolled back", 12.0, True)
    assert record["diagnosis"].startswith("Ensure the canary serves no slower on the new stack: the canary serves")
    with pytest.raises(ValueError, match="a node whose upgrade is rolled back cannot be ready"):
        upgrade.transition(record, "ready", {"stopped_at": None, "now": 3020.0})


def test_an_interrupted_canary_that_passes_its_last_gate_is_upgraded():
    resumed = upgrade.plan(CU130, CU130, GATED, True, CANARY)
    record, message = upgrade.transition(_walk(("passed", {"gates": ["benchmark"]}), record=resumed), "ready",
                                         {"stopped_at": None, "now": 3000.0})
    assert (record["outcome"], record["pending"], record["seconds_to_ready"]) == ("upgraded", [], None)
    assert message == ("cu128 -> cu130 upgraded: it served on the new stack already and has passed ready, generate, "
                       "benchmark")


def test_a_lost_baseline_leaves_its_gate_to_take_and_fail_rather_than_passed():
    """The record of a canary's switch kept no baseline, or names no gates at all: the old stack that could be
    measured again no longer runs, so the gate stays, without a baseline, for the playbook to fail and roll back."""
    for record in (dict(GATED, before={}), RECORD):
        decided = upgrade.plan(CU130, CU130, record, True, CANARY)
        assert (decided["outcome"], decided["pending"], decided["before"]) == ("prepared", ["benchmark"], {})


def test_a_switch_begun_now_takes_a_baselined_gate_only_when_the_old_server_can_be_measured():
    every = ("ready", "generate", "benchmark", "gateway")
    assert upgrade.plan(CU128, CU130, None, True, every)["pending"] == list(every)
    assert upgrade.plan(CU128, CU130, None, False, every)["pending"] == ["ready", "generate"]
    assert upgrade.plan(CU130, CU130, None, True, every)["gates"] == []
    with pytest.raises(ValueError, match="no such gate warmup"):
        upgrade.plan(CU128, CU130, None, True, ("ready", "warmup"))


def test_an_interrupted_switch_whose_node_does_not_serve_takes_every_gate_again_with_the_kept_baseline():
    decided = upgrade.plan(CU130, CU130, GATED, False, ("ready", "generate"))
    assert (decided["needed"], decided["passed"], decided["pending"]) == (True, [], list(CANARY))
    assert decided["before"] == {"benchmark": BASELINE}


def test_the_baseline_keeps_what_the_gate_compares_and_is_measured_only_for_a_gate_the_switch_takes():
    prepared = upgrade.plan(CU128, CU130, None, True, CANARY)
    measured = dict(BASELINE, argv=["python", "-m", "sglang.launch_server"], env_digest="ab12", client="builtin")
    record, _message = upgrade.transition(prepared, "measured", {"gate": "benchmark", "figures": measured})
    assert record["before"] == {"benchmark": BASELINE}
    assert upgrade.record_problems(dict(RECORD, gates=record["gates"], passed=[], before=record["before"])) == []
    with pytest.raises(ValueError, match="does not take the gateway gate"):
        upgrade.transition(prepared, "measured", {"gate": "gateway", "figures": measured})


def test_a_gate_is_passed_once_and_only_one_the_switch_takes():
    started = _walk(STARTED, record=upgrade.plan(CU128, CU130, None, True, CANARY))
    assert (started["passed"], started["pending"]) == (["ready", "generate"], ["benchmark"])
    for gates in (["generate"], ["gateway"], []):
        with pytest.raises(ValueError, match="a node that still has to pass benchmark cannot pass"):
            upgrade.transition(started, "passed", {"gates": gates})


def test_going_back_after_an_interruption_past_the_link_reports_the_move_from_the_profile_at_the_link():
    """-e stack_profile=cu128 after a run to cu130 was killed past the link: the row read 'cu128 -> cu128
    upgraded', a switch to cu130 finished."""
    decided = upgrade.plan(CU130, CU128, GATED, False)
    assert (decided["from"], decided["to"], decided["pending"], decided["before"]) == (
        "cu130", "cu128", ["ready", "generate"], {})
    record, message = upgrade.transition(_walk(STARTED, record=decided), "ready", {"stopped_at": 0, "now": 2041.0})
    assert (record["from"], record["to"], record["outcome"], record["seconds_to_ready"]) == (
        "cu130", "cu128", "upgraded", 41.0)
    assert message == "cu130 -> cu128 upgraded: ready on the new stack 41.0 s after the stop"
    assert "is finished" not in record["diagnosis"] and "goes back to cu128" in record["diagnosis"]


# The timeline of a node's outage: each step once, in the order STEPS gives, from the outcome the node has there.

# model_readahead's result for /srv/models/tiny, as model_readahead.yml registers it.
READ_AHEAD = {"changed": False, "summary": "Read 1.2 kB ...", "path": "/srv/models/tiny", "files": [{"name": "x"}],
              "total_bytes": 2100000000, "read_bytes": 2000000000, "read_seconds": 0.95, "seconds": 1.0,
              "gbps": 2.1, "warm_before_bytes": 100000000, "warm_after_bytes": 2100000000, "stopped": None,
              "mem_available_before": 10 ** 11}
# wait_for_server's capacity of a start beside a process that held most of the GPU.
CAPACITY = {"kv_tokens": 405968, "avail_mem_gb": 1.55, "share": 0.0198, "degraded_ratio": 0.5,
            "below_last_good": True, "beside_holders": True, "degraded": True, "message": "a long warning",
            "last_good": {"kv_tokens": 20542816, "avail_mem_gb": 70.1, "pid": 3, "start_time": "1", "started_at": 1.0,
                          "recorded_at": 2.0},
            "last_good_is_this_launch": False, "recorded_as_good": False,
            "holders": [{"pid": 4242, "user": "bob", "command": "python train.py", "used_memory_mib": 78000,
                         "gpu_uuid": "GPU-1"}]}


def _step(name, at, **more):
    return ("step", dict(more, name=name, at=at))


def test_a_switch_keeps_each_step_of_its_outage_with_what_the_read_ahead_warmed_and_the_memory_the_server_got():
    record = _walk(_step("readahead", 990.0, readahead=READ_AHEAD), _step("drain", 1000.0), _step("stop", 1003.1),
                   _step("start", 1003.5), _step("ready", 1050.2, capacity=CAPACITY), _step("generate", 1051.4),
                   STARTED, ("ready", {"stopped_at": 1000.0, "now": 1051.5}), _step("undrain", 1051.7))
    assert record["timeline"] == [{"step": "readahead", "at": 990.0}, {"step": "drain", "at": 1000.0},
                                  {"step": "stop", "at": 1003.1}, {"step": "start", "at": 1003.5},
                                  {"step": "ready", "at": 1050.2}, {"step": "generate", "at": 1051.4},
                                  {"step": "undrain", "at": 1051.7}]
    assert record["readahead"] == {"total_bytes": 2100000000, "read_bytes": 2000000000, "seconds": 1.0, "gbps": 2.1,
                                   "warm_before_bytes": 100000000, "warm_after_bytes": 2100000000, "stopped": None}
    assert record["capacity"] == {"kv_tokens": 405968, "avail_mem_gb": 1.55, "share": 0.0198, "degraded_ratio": 0.5,
                                  "below_last_good": True, "beside_holders": True, "degraded": True,
                                  "last_good_kv_tokens": 20542816,
                                  "holders": [{"pid": 4242, "user": "bob", "command": "python train.py",
                                               "used_memory_mib": 78000}]}
    assert (record["outcome"], record["seconds_to_ready"]) == ("upgraded", 51.5)
    assert PREPARED["timeline"] == [], "the record given is never changed"


def test_a_step_says_how_long_after_the_one_before_it_came():
    record, message = upgrade.transition(_walk(_step("stop", 1000.0)), "step", {"name": "start", "at": 1003.25})
    assert message == "cu128 -> cu130: start 3.2 s after the stop"
    assert record["message"] == message
    assert upgrade.transition(PREPARED, "step", {"name": "drain", "at": 1000.0})[1] == "cu128 -> cu130: drain"


def test_a_read_ahead_that_failed_keeps_its_message_and_a_start_without_a_reading_keeps_none():
    record = _walk(_step("readahead", 990.0, readahead={"failed": False, "msg": "path=/srv/models/x: no such file"}),
                   _step("stop", 1000.0), _step("start", 1001.0), _step("ready", 1002.0, capacity=None))
    assert record["readahead"] == {"msg": "path=/srv/models/x: no such file"}
    assert record["capacity"] is None
    assert upgrade.kept_capacity(dict(CAPACITY, holders=None, last_good=None))["holders"] is None


def test_a_rollback_keeps_the_old_servers_steps_after_the_new_ones_and_the_memory_of_a_start_that_failed_on_it():
    record = _walk(_step("drain", 1000.0), _step("stop", 1001.0), _step("start", 1002.0),
                   ("switch_failed", {"task": "Wait until the server is ready", "msg": "degraded", "capacity": CAPACITY}),
                   _step("rollback_drain", 1100.0), _step("rollback_start", 1101.0), _step("rollback_ready", 1140.0),
                   _step("rollback_generate", 1141.0),
                   ("rolled_back", {"stopped_at": 1000.0, "now": 1141.5,
                                    "restored": {"actions": [], "msg": "restored", "source": "file"}}),
                   _step("rollback_undrain", 1142.0))
    assert [step["step"] for step in record["timeline"]] == [
        "drain", "stop", "start", "rollback_drain", "rollback_start", "rollback_ready", "rollback_generate",
        "rollback_undrain"]
    assert record["outcome"] == "rolled back"
    assert record["capacity"]["kv_tokens"] == 405968
    # A failure that read no memory leaves what the ready step kept.
    kept = _walk(_step("stop", 1.0), _step("start", 2.0), _step("ready", 3.0, capacity=CAPACITY),
                 ("switch_failed", {"task": "Ask the new server for one generation", "msg": "no text"}))
    assert kept["capacity"]["kv_tokens"] == 405968


def test_a_step_the_controllers_clock_put_before_the_last_took_no_time():
    # A clock stepped back mid-switch must not fail the switch (that would roll a healthy node back).
    record = _walk(_step("stop", 1000.0), _step("start", 999.9))
    assert [(step["step"], step["at"]) for step in record["timeline"]] == [("stop", 1000.0), ("start", 1000.0)]


@pytest.mark.parametrize("steps, step, problem", [
    ([], {"name": "warmup", "at": 1.0}, "no such step 'warmup'"),
    ([], {"name": "stop", "at": True}, "the stop step's time must be a time in seconds"),
    ([], {"name": "stop", "at": "1000"}, "the stop step's time must be a time in seconds"),
    ([], {"name": "stop", "at": 0}, "the stop step's time must be a time in seconds"),
    # Out of order, or twice.
    ([_step("stop", 1000.0)], {"name": "drain", "at": 1001.0}, "a node past the stop step cannot take the drain step"),
    ([_step("stop", 1000.0)], {"name": "stop", "at": 1001.0}, "a node past the stop step cannot take the stop step"),
    ([_step("stop", 1000.0), _step("start", 1001.0)], {"name": "readahead", "at": 1002.0, "readahead": READ_AHEAD},
     "a node past the start step cannot take the readahead step"),
    # From an outcome it does not come from: undrained before it was declared upgraded, a rollback's step before the
    # switch failed, the new server's after it did, the rollback's undrain before the old server passed its gate.
    ([STARTED], {"name": "undrain", "at": 1.0}, "a node whose upgrade is prepared cannot take the undrain step"),
    ([], {"name": "rollback_start", "at": 1.0}, "a node whose upgrade is prepared cannot take the rollback_start"),
    ([("switch_failed", {})], {"name": "ready", "at": 1.0},
     "a node whose upgrade is rolling back cannot take the ready step"),
    ([("switch_failed", {})], {"name": "rollback_undrain", "at": 1.0},
     "a node whose upgrade is rolling back cannot take the rollback_undrain step"),
])
def test_a_step_the_node_cannot_take_is_refused(steps, step, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        upgrade.transition(_walk(*steps), "step", step)


@pytest.mark.parametrize("outcome", ["not prepared", "unchanged", "ROLLBACK FAILED"])
def test_a_node_that_takes_no_step_is_refused_one(outcome):
    with pytest.raises(ValueError, match="a node whose upgrade is %s cannot be step" % outcome):
        upgrade.transition(dict(PREPARED, outcome=outcome), "step", {"name": "drain", "at": 1.0})


def test_a_node_that_failed_before_it_had_a_plan_has_an_empty_timeline():
    record, _message = upgrade.transition(None, "not_prepared", dict(FAILED_TASK, **{"from": "cu128", "to": "cu130"}))
    assert (record["timeline"], record["readahead"], record["capacity"]) == ([], None, None)
