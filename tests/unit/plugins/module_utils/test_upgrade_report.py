"""The upgrade playbook's report."""

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
                                             "restored": []}]


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
