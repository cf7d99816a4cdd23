"""The upgrade playbook's report."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import upgrade
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade_report import NOT_SWITCHED, report, rows

RUN = "9f0c2e4b6a8d4f10b2c3d4e5f6a7b8c9"
RECORD = {"run": RUN, "from": "cu128", "to": "cu130", "from_venv": "ml-env.cu128-1a2b3c4d",
          "to_venv": "ml-env.cu130-5e6f7a8b", "stopped_at": 2000.0}

NOTED = {
    "gpu-1": {"from": "cu128", "to": "cu130", "outcome": "rolled back", "seconds_to_ready": 12.34,
              "diagnosis": "SGLang refuses torch 2.9.1 with cuDNN < 9.15. Fix: runtime_env_sglang_disable_cudnn_check: true",
              "restored": ["/home/sglang/ml-env -> ml-env.cu128-1a2b3c4d"]},
    "gpu-2": {"from": "cu128", "to": "cu130", "outcome": "prepared", "seconds_to_ready": None, "diagnosis": None},
    "gpu-4": {"from": "cu130", "to": "cu130", "outcome": "unchanged", "seconds_to_ready": None, "diagnosis": None},
}


def test_the_table_names_each_outcome_and_the_diagnosis():
    found = report(["gpu-1", "gpu-2", "gpu-3", "gpu-4"], NOTED, "cu130")
    assert [row["outcome"] for row in found["rows"]] == ["rolled back", NOT_SWITCHED, "not reached", "unchanged"]
    assert found["table"][0].startswith("host  | from -> to")
    cells = [cell.strip() for cell in found["table"][1].split(" | ")]
    assert cells == ["gpu-1", "cu128 -> cu130", "upgrade failed, rolled back, ready on the old stack", "12.3 s",
                     NOTED["gpu-1"]["diagnosis"]]
    assert [cell.strip() for cell in found["table"][4].split("|")][3:] == ["-", ""]
    assert found["rows"][0]["restored"] == ["/home/sglang/ml-env -> ml-env.cu128-1a2b3c4d"]


def test_only_nodes_on_the_target_pass():
    found = report(["gpu-1", "gpu-2", "gpu-3", "gpu-4"], NOTED, "cu130")
    assert [line.split(":")[0] for line in found["problems"]] == ["gpu-1", "gpu-2", "gpu-3"]
    assert report(["gpu-4"], NOTED, "cu130")["problems"] == []


def test_a_failed_rollback_is_loud():
    noted = {"gpu-1": dict(NOTED["gpu-1"], outcome="ROLLBACK FAILED")}
    assert "NOT SERVING" in report(["gpu-1"], noted, "cu130")["problems"][0]


def test_the_whole_report_of_each_outcome():
    noted = dict(NOTED, **{"gpu-5": dict(NOTED["gpu-1"], outcome="ROLLBACK FAILED", diagnosis=None),
                           "gpu-6": dict(NOTED["gpu-4"], outcome="upgraded", seconds_to_ready=80)})
    found = report(["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6"], noted, "cu130")
    assert found["table"] == [
        "host  | from -> to       | outcome                                             | time to ready | diagnosis",
        "gpu-1 | cu128 -> cu130   | upgrade failed, rolled back, ready on the old stack | 12.3 s        | "
        + NOTED["gpu-1"]["diagnosis"],
        "gpu-2 | cu128 -> cu130   | not switched (the upgrade stopped before its turn)  | -             |",
        "gpu-3 | unknown -> cu130 | not reached                                         | -             |",
        "gpu-4 | cu130 -> cu130   | unchanged                                           | -             |",
        "gpu-5 | cu128 -> cu130   | UPGRADE AND ROLLBACK FAILED: NOT SERVING            | 12.3 s        |",
        "gpu-6 | cu130 -> cu130   | upgraded                                            | 80.0 s        |",
    ]
    assert found["problems"] == [
        "gpu-1: upgrade failed, rolled back, ready on the old stack (%s)" % NOTED["gpu-1"]["diagnosis"],
        "gpu-2: not switched (the upgrade stopped before its turn)",
        "gpu-3: not reached",
        "gpu-5: UPGRADE AND ROLLBACK FAILED: NOT SERVING",
    ]


def test_a_node_that_noted_nothing_is_not_reached():
    assert rows(["gpu-3"], {}, "cu130") == [{"host": "gpu-3", "from": "unknown", "to": "cu130", "outcome": "not reached",
                                             "message": "not reached", "seconds_to_ready": None, "diagnosis": None,
                                             "restored": [], "timeline": [], "out_of_rotation": None,
                                             "out_of_service": None, "readahead": None, "capacity": None,
                                             "outage": ""}]
    assert report(["gpu-3"], {}, "cu130")["outages"] == []


def test_going_back_after_an_interrupted_switch_reports_the_real_move():
    """-e stack_profile=cu128 after a run to cu130 was interrupted past the link: the node ran cu130 and did not
    serve, and serves cu128 at the end."""
    decided = upgrade.plan({"venv": RECORD["to_venv"], "profile": "cu130"},
                           {"venv": RECORD["from_venv"], "profile": "cu128"}, RECORD, False)
    # As the playbook notes it: the plan with its note as the diagnosis, then the outcome of the switch.
    noted = {"gpu-1": dict(decided, diagnosis=decided["note"], outcome="upgraded", seconds_to_ready=41.0)}
    assert report(["gpu-1"], noted, "cu128")["table"][1] == (
        "gpu-1 | cu130 -> cu128 | upgraded | 41.0 s        | a switch from cu128 to cu130 begun by run 9f0c2e4b did "
        "not end and left the node on cu130, not serving: that switch is abandoned, and the node goes back to cu128")


def test_a_node_refused_over_another_controllers_lock_is_not_said_to_be_unchanged():
    holder = {"id": "0" * 32, "controller": "awx-job-17-x2b9q", "pid": 4242, "pid_started": "8812731",
              "user": "ops", "started": 1000.0}
    refused = upgrade.refusal(holder, dict(holder, id=RUN, controller="ops-1"), dict(RECORD, run="0" * 32), 2030,
                              "/var/lib/blackwell-gpu-node/upgrade/lock.json")
    # As the playbook notes a node whose lock it could not take.
    noted = {"gpu-1": {"from": "unknown", "to": "cu130", "needed": False, "resumed": False, "outcome": "not prepared",
                       "seconds_to_ready": None, "diagnosis": "Ensure no other upgrade runs on the node: " + refused}}
    found = report(["gpu-1"], noted, "cu130")
    assert "the node is half-switched and serves nothing" in found["table"][1]
    assert "Nothing was changed" not in found["table"][1]
    assert found["problems"][0].startswith("gpu-1: not prepared (Ensure no other upgrade runs on the node: ")


# A node's outage, as the switch play notes it in the node's record (upgrade_transition's step events).

READ_AHEAD = {"total_bytes": 2100000000, "read_bytes": 2000000000, "seconds": 12.04, "gbps": 2.1,
              "warm_before_bytes": 100000000, "warm_after_bytes": 2100000000, "stopped": None}
CAPACITY = {"kv_tokens": 20542816, "avail_mem_gb": 70.12, "share": 1.0, "degraded_ratio": 0.5,
            "below_last_good": False, "beside_holders": False, "degraded": False, "last_good_kv_tokens": 20542816,
            "holders": []}
DEGRADED = {"kv_tokens": 405968, "avail_mem_gb": 1.55, "share": 0.0198, "degraded_ratio": 0.5,
            "below_last_good": True, "beside_holders": True, "degraded": True, "last_good_kv_tokens": 20542816,
            "holders": [{"pid": 4242, "user": "bob", "command": "python train.py", "used_memory_mib": 78000}]}


def _switched(*steps, **more):
    """A node's record through a switch that took steps ((name, at), ...)."""
    walked = upgrade.plan({"venv": RECORD["from_venv"], "profile": "cu128"},
                          {"venv": RECORD["to_venv"], "profile": "cu130"}, None, True)
    for name, at in steps:
        evidence = {"name": name, "at": at}
        if name == "readahead":
            evidence["readahead"] = dict(READ_AHEAD, summary="Read 2.00 GB", files=[])
        if name == "ready":
            # As wait_for_server returns it.
            kept = more.get("capacity", CAPACITY)
            evidence["capacity"] = dict(kept, last_good={"kv_tokens": kept["last_good_kv_tokens"]}, message=None)
        if name == "undrain":
            walked, _message = upgrade.transition(walked, "passed", {"gates": ["ready", "generate"]})
            walked, _message = upgrade.transition(walked, "ready", {"stopped_at": 1000.0, "now": at})
        if name.startswith("rollback_") and walked["outcome"] != "rolling back" and name != "rollback_undrain":
            walked, _message = upgrade.transition(walked, "switch_failed", {"task": "t", "msg": "m"})
        if name == "rollback_undrain":
            walked, _message = upgrade.transition(walked, "rolled_back", {
                "stopped_at": 1000.0, "now": at, "restored": {"actions": [], "msg": "", "source": "file"}})
        walked, _message = upgrade.transition(walked, "step", evidence)
    return walked


SWITCH = (("readahead", 999.5), ("drain", 1000.0), ("stop", 1003.1), ("start", 1003.5), ("ready", 1050.2),
          ("generate", 1051.4), ("undrain", 1051.7))


def test_an_upgraded_node_tells_each_step_of_its_outage_its_time_out_and_what_was_read_ahead():
    found = report(["gpu-1"], {"gpu-1": _switched(*SWITCH)}, "cu130")
    (row,) = found["rows"]
    assert row["outage"] == (
        "drain 0.0 s, stop +3.1 s, start +0.4 s, ready +46.7 s, generate +1.2 s, undrain +0.3 s; "
        "out of rotation 51.7 s, out of service 47.1 s; "
        "model read ahead in 12.0 s, 0.5 s before the drain: 2.00 GB read (2.10 GB/s), 100% of its 2.10 GB warm "
        "(4% before); new server's KV cache 20,542,816 tokens (100% of the last good launch's 20,542,816), 70.12 GB "
        "of GPU memory free at its weights' load")
    assert found["outages"] == ["gpu-1: " + row["outage"]]
    assert (row["out_of_rotation"], row["out_of_service"]) == (51.7, 47.1)
    assert [(step["step"], step["after"]) for step in row["timeline"]] == [
        ("readahead", None), ("drain", 0.5), ("stop", 3.1), ("start", 0.4), ("ready", 46.7), ("generate", 1.2),
        ("undrain", 0.3)]
    assert row["timeline"][1]["at"] == 1000.0
    assert (row["readahead"], row["capacity"]) == (READ_AHEAD, CAPACITY)
    # The table stays the table; the outage comes after it.
    assert len(found["table"]) == 2 and "drain" not in found["table"][1]


def test_a_slow_start_is_seen_beside_the_gpu_memory_it_got_and_who_held_the_rest():
    noted = _switched(("stop", 1000.0), ("start", 1001.0), ("ready", 1181.0), capacity=DEGRADED)
    assert report(["gpu-1"], {"gpu-1": noted}, "cu130")["rows"][0]["outage"] == (
        "stop 0.0 s, start +1.0 s, ready +180.0 s; out of service 181.0 s; new server's KV cache 405,968 tokens (2% of "
        "the last good launch's 20,542,816), 1.55 GB of GPU memory free at its weights' load, a DEGRADED START: below "
        "50% of the last good launch's KV cache and beside pid 4242 of bob holding 78000 MiB (python train.py)")


def test_a_rolled_back_node_counts_each_time_out_of_rotation_and_out_of_service():
    """The canary served on the new stack, back in rotation, until the fleet's measurement through the gateway
    failed: two times out of rotation and two out of service, not one from the first drain to the last undrain."""
    noted = _switched(("drain", 1000.0), ("stop", 1001.0), ("start", 1002.0), ("ready", 1040.0), ("generate", 1041.0),
                      ("undrain", 1042.0), ("rollback_drain", 1200.0), ("rollback_start", 1201.0),
                      ("rollback_ready", 1231.0), ("rollback_generate", 1232.0), ("rollback_undrain", 1233.0))
    (row,) = report(["gpu-1"], {"gpu-1": noted}, "cu130")["rows"]
    assert row["outcome"] == "rolled back"
    assert (row["out_of_rotation"], row["out_of_service"]) == (75.0, 69.0)
    assert row["outage"].startswith(
        "drain 0.0 s, stop +1.0 s, start +1.0 s, ready +38.0 s, generate +1.0 s, undrain +1.0 s, rollback drain "
        "+158.0 s, rollback start +1.0 s, rollback ready +30.0 s, rollback generate +1.0 s, rollback undrain +1.0 s; "
        "out of rotation 75.0 s, out of service 69.0 s; new server's KV cache")


def test_a_new_server_that_never_got_ready_is_out_of_service_until_the_old_one_is():
    noted = _switched(("drain", 1000.0), ("stop", 1001.0), ("start", 1002.0), ("rollback_drain", 1100.0),
                      ("rollback_start", 1101.0), ("rollback_ready", 1131.0), ("rollback_undrain", 1132.0))
    (row,) = report(["gpu-1"], {"gpu-1": noted}, "cu130")["rows"]
    assert (row["out_of_rotation"], row["out_of_service"]) == (132.0, 130.0)


def test_a_node_not_back_has_no_time_out_to_tell():
    """A failed rollback, or a node refused after its drain: the report does not make up an end."""
    noted = _switched(("drain", 1000.0), ("stop", 1001.0), ("start", 1002.0), ("rollback_start", 1101.0))
    (row,) = report(["gpu-1"], {"gpu-1": dict(noted, outcome="ROLLBACK FAILED")}, "cu130")["rows"]
    assert (row["out_of_rotation"], row["out_of_service"]) == (None, None)
    assert row["outage"] == "drain 0.0 s, stop +1.0 s, start +1.0 s, rollback start +99.0 s"


def test_a_node_an_interrupted_run_stopped_counts_its_outage_from_that_stop_and_says_which_steps_this_run_saw():
    """The fixed run after three interrupted ones: the server was down since the first of them stopped it."""
    resumed = upgrade.plan({"venv": RECORD["to_venv"], "profile": "cu130"},
                           {"venv": RECORD["to_venv"], "profile": "cu130"}, RECORD, False)
    for name, at in (("readahead", 2299.0), ("stop", 2300.0), ("start", 2300.5), ("ready", 2340.5),
                     ("generate", 2341.0)):
        resumed, _message = upgrade.transition(resumed, "step", dict(
            {"name": name, "at": at}, **({"readahead": READ_AHEAD} if name == "readahead" else {})))
    (row,) = report(["gpu-1"], {"gpu-1": resumed}, "cu130")["rows"]
    assert row["out_of_service"] == 340.5
    assert row["outage"].startswith(
        "an interrupted run stopped its server 300.0 s before this run's first step; this run saw stop 0.0 s, start "
        "+0.5 s, ready +40.0 s, generate +0.5 s; out of service 340.5 s; model read ahead in 12.0 s, 1.0 s before the "
        "stop")


def test_a_node_an_interrupted_run_left_serving_says_this_run_saw_only_what_was_left():
    gated = dict(RECORD, gates=["ready", "generate", "benchmark"], passed=["ready", "generate"])
    resumed = upgrade.plan({"venv": RECORD["to_venv"], "profile": "cu130"},
                           {"venv": RECORD["to_venv"], "profile": "cu130"}, gated, True,
                           ("ready", "generate", "benchmark"))
    for event, evidence in (("passed", {"gates": ["benchmark"]}), ("ready", {"stopped_at": None, "now": 3000.0}),
                            ("step", {"name": "undrain", "at": 3000.5})):
        resumed, _message = upgrade.transition(resumed, event, evidence)
    (row,) = report(["gpu-1"], {"gpu-1": resumed}, "cu130")["rows"]
    assert row["outage"] == "an interrupted run switched it; this run saw undrain 0.0 s"
    assert (row["out_of_rotation"], row["out_of_service"]) == (None, None)


@pytest.mark.parametrize("readahead, said", [
    ({"msg": "path=/srv/models/x: no such file"}, "read-ahead failed: path=/srv/models/x: no such file"),
    (dict(READ_AHEAD, read_bytes=0, gbps=0.0, warm_before_bytes=2100000000),
     "model read ahead in 12.0 s, 0.5 s before the stop: nothing read, 100% of its 2.10 GB warm (100% before)"),
    (dict(READ_AHEAD, warm_before_bytes=None, warm_after_bytes=None),
     "model read ahead in 12.0 s, 0.5 s before the stop: 2.00 GB read (2.10 GB/s), how much of its 2.10 GB is warm "
     "is unknown"),
    (dict(READ_AHEAD, warm_after_bytes=2099999999, stopped="deadline"),
     "model read ahead in 12.0 s, 0.5 s before the stop: 2.00 GB read (2.10 GB/s), 99% of its 2.10 GB warm (4% "
     "before), stopped at its timeout"),
    (dict(READ_AHEAD, total_bytes=0, read_bytes=0, warm_before_bytes=0, warm_after_bytes=0),
     "model read ahead in 12.0 s, 0.5 s before the stop: nothing read, no file of the model to read"),
])
def test_the_read_ahead_says_what_it_warmed_or_why_not(readahead, said):
    noted = {"from": "cu128", "to": "cu130", "outcome": "not prepared", "readahead": readahead,
             "timeline": [{"step": "readahead", "at": 999.5}, {"step": "stop", "at": 1000.0}]}
    assert report(["gpu-1"], {"gpu-1": noted}, "cu130")["rows"][0]["outage"] == "stop 0.0 s; " + said
