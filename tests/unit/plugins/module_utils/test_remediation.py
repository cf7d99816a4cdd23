"""What the health playbook does about a node's GPU health (the remediation core): each bucket's action, only the
GPUs named reset, the node's strongest action, whether a node came back after a reset or a reboot, and the report
of a run that stops at a node that did not come back. The health results are gpu_health_info's shape, with each
finding's NVIDIA resolution bucket."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import remediation as core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import xid_catalogue

BUS = ["00000000:3B:00.0", "00000000:5E:00.0"]
GONE = "00000000:86:00.0"
GATEWAY = "the model gateway on gw-1"
SEVERITIES = ("unhealthy", "degraded", "info")


def finding(finding_id="xid_119", bucket="RESET_GPU", severity="unhealthy", gpu=BUS[0], **more):
    return dict(dict(id=finding_id, severity=severity, summary="what %s means" % finding_id, bucket=bucket,
                     evidence="evidence of %s" % finding_id, action="reset_gpu", advice="advice", gpu=gpu), **more)


def health(*findings, **more):
    """A two-GPU node's health with findings, each on its GPU or (gpu None) the node's."""
    every = list(findings)
    verdict = next(({"info": "healthy"}.get(severity, severity) for severity in SEVERITIES
                    if severity in [each["severity"] for each in every]), "healthy")
    gpus = [dict(index=index, bus_id=bus_id, findings=[each for each in every if each["gpu"] == bus_id])
            for index, bus_id in enumerate(BUS)]
    result = dict(verdict=verdict, summary="%s: ..." % verdict, gpus=gpus,
                  findings=[each for each in every if each["gpu"] not in BUS])
    result.update(more)
    return result


def plan(*findings, **settings):
    return core.plan(health(*findings), settings.get("allow_reboot", False), settings.get("drain", GATEWAY))


def test_a_reset_gpu_finding_drains_the_node_stops_its_server_and_resets_that_gpu_alone():
    planned = plan(finding())
    assert (planned["action"], planned["acts"], planned["reset"]) == ("reset_gpu", True, [dict(index=0, bus_id=BUS[0])])
    assert planned["stops"] == ["its place in rotation (the model gateway on gw-1)", "its server",
                                "GPU 0 (00000000:3B:00.0)"]
    (step,) = planned["findings"]
    assert (step["id"], step["bucket"], step["action"], step["gpus"], step["where"]) == (
        "xid_119", "RESET_GPU", "reset_gpu", [dict(index=0, bus_id=BUS[0])], "GPU 0 (00000000:3B:00.0)")
    assert step["why"] == "what xid_119 means: NVIDIA's RESET_GPU asks to reset the GPU"
    assert planned["line"] == (
        "reset_gpu with nvidia-smi -r -i 0; stops its place in rotation (the model gateway on gw-1); its server; GPU 0 "
        "(00000000:3B:00.0). reset the GPUs, check them again and bring the node back: xid_119 on GPU 0 "
        "(00000000:3B:00.0) (RESET_GPU): what xid_119 means: NVIDIA's RESET_GPU asks to reset the GPU")


@pytest.mark.parametrize("bucket", ["WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR"])
def test_the_workflows_whose_first_step_is_a_reset_reset_the_gpu(bucket):
    planned = plan(finding(bucket=bucket, gpu=BUS[1]))
    assert (planned["action"], planned["reset"]) == ("reset_gpu", [dict(index=1, bus_id=BUS[1])])


def test_only_the_gpus_the_findings_name_are_reset_each_once_in_index_order():
    planned = plan(finding("xid_95", gpu=BUS[1]), finding("xid_119", gpu=BUS[0]), finding("xid_120", gpu=BUS[1]),
                   finding("nvlink_errors", bucket="RESET_GPU", severity="degraded", gpu=BUS[0]))
    assert planned["reset"] == [dict(index=0, bus_id=BUS[0]), dict(index=1, bus_id=BUS[1])]
    assert "nvidia-smi -r -i 0, nvidia-smi -r -i 1;" in planned["line"]


def test_a_degraded_finding_alone_is_not_reset_and_a_reset_does_not_reach_its_gpu():
    planned = plan(finding("row_remap_pending", severity="degraded", gpu=BUS[1]), finding(gpu=BUS[0]))
    assert planned["reset"] == [dict(index=0, bus_id=BUS[0])]


def test_a_finding_of_the_node_resets_the_gpus_it_names():
    planned = plan(finding("xid_79_like", gpu=None, gpus=[BUS[1]]))
    assert (planned["action"], planned["reset"]) == ("reset_gpu", [dict(index=1, bus_id=BUS[1])])


@pytest.mark.parametrize("gone", [dict(gpu=GONE), dict(gpu=None, gpus=[]), dict(gpu=None, gpus=[BUS[0], GONE])])
def test_a_reset_without_an_index_to_reset_needs_a_reboot(gone):
    planned = plan(finding(**gone), allow_reboot=True)
    assert (planned["action"], planned["reset"]) == ("reboot", [])
    assert "so the node is rebooted instead" in planned["findings"][0]["why"]
    kept = plan(finding(**gone))
    assert kept["action"] == "keep_out"
    assert kept["findings"][0]["why"].endswith(
        "it needs a reboot, which gpu_node_health_allow_reboot (false) does not allow: the node stays out")


def test_restart_bm_reboots_the_node_only_where_allowed_and_else_keeps_it_out():
    rebooted = plan(finding("xid_79", bucket="RESTART_BM"), allow_reboot=True)
    assert (rebooted["action"], rebooted["acts"]) == ("reboot", True)
    assert rebooted["stops"] == ["its place in rotation (the model gateway on gw-1)", "its server",
                                 "the node (reboot)"]
    assert rebooted["line"].startswith("reboot; stops its place in rotation")
    kept = plan(finding("xid_79", bucket="RESTART_BM"))
    assert (kept["action"], kept["acts"], kept["stops"]) == (
        "keep_out", True, ["its place in rotation (the model gateway on gw-1)"])
    assert "gpu_node_health_allow_reboot (false) does not allow" in kept["why"]


@pytest.mark.parametrize("bucket, asked", [
    ("CONTACT_SUPPORT", "NVIDIA's CONTACT_SUPPORT asks to open a case with NVIDIA or the system's vendor"),
    ("CHECK_MECHANICALS", "NVIDIA's CHECK_MECHANICALS asks to check the GPU's seating, cables, cooling and power"),
    ("UPDATE_SWFW", "NVIDIA's UPDATE_SWFW asks to update the firmware and software to their latest versions"),
    ("WORKFLOW_NVLINK5_ERR", "NVIDIA's WORKFLOW_NVLINK5_ERR asks to decode the NVLink5 error's registers with "
                             "NVIDIA's decode sheet"),
])
def test_a_node_that_needs_a_person_is_drained_and_stays_out_saying_why(bucket, asked):
    planned = plan(finding("row_remap_failure", bucket=bucket))
    assert (planned["action"], planned["acts"], planned["reset"]) == ("keep_out", True, [])
    assert planned["stops"] == ["its place in rotation (the model gateway on gw-1)"]
    assert planned["why"] == ("the node stays out of rotation: row_remap_failure on GPU 0 (00000000:3B:00.0) (%s): "
                              "what row_remap_failure means: %s" % (bucket, asked))


def test_every_bucket_the_assessment_gives_has_its_action():
    assert set(core.BUCKETS) == set(xid_catalogue.BUCKETS)


@pytest.mark.parametrize("bucket, action", [("CHECK_UVM", "reset_gpu"), ("RESTART_VM", "reboot")])
def test_a_uvm_check_resets_the_gpu_and_a_vm_restart_reboots_the_node_it_is(bucket, action):
    assert plan(finding(bucket=bucket), allow_reboot=True)["action"] == action


@pytest.mark.parametrize("bucket", ["IGNORE", "RESTART_APP", "WORKFLOW_XID_45"])
def test_findings_nvidia_resolves_without_touching_the_gpu_are_reported_only(bucket):
    planned = plan(finding("xid_45", bucket=bucket))
    assert (planned["action"], planned["acts"], planned["stops"], planned["reset"]) == ("report", False, [], [])
    assert planned["line"].startswith("report: reported only: xid_45 on GPU 0")


def test_a_degraded_finding_is_reported_with_how_to_have_it_acted_on():
    planned = plan(finding("row_remap_pending", severity="degraded"))
    assert (planned["verdict"], planned["action"], planned["acts"]) == ("degraded", "report", False)
    assert planned["findings"][0]["why"].endswith(
        "; degraded, not acted on (preflight_gpu_health_severity_overrides makes a finding unhealthy)")


def test_a_healthy_node_is_never_touched_and_its_info_findings_are_not_listed():
    planned = plan(finding("pcie_replays", bucket="IGNORE", severity="info"), allow_reboot=True)
    assert (planned["verdict"], planned["action"], planned["acts"], planned["findings"], planned["stops"]) == (
        "healthy", "none", False, [], [])
    assert planned["line"] == "none: no unhealthy or degraded finding: nothing to do"


@pytest.mark.parametrize("verdict", ["unknown", "not checked"])
def test_a_node_whose_health_was_not_read_is_not_acted_on(verdict):
    planned = core.plan(dict(verdict=verdict, summary="not checked: unreachable"), True, GATEWAY)
    assert (planned["action"], planned["acts"]) == ("none", False)
    assert planned["why"] == "not acted on: the GPUs' health was not read (not checked: unreachable)"


@pytest.mark.parametrize("buckets, action", [
    (["RESET_GPU", "RESTART_BM"], "reboot"),
    (["RESTART_BM", "CONTACT_SUPPORT", "RESET_GPU"], "keep_out"),
    (["IGNORE", "RESET_GPU"], "reset_gpu"),
    (["RESTART_APP", "IGNORE"], "report"),
])
def test_the_node_takes_its_strongest_findings_action(buckets, action):
    planned = plan(*[finding("f%d" % number, bucket=bucket) for number, bucket in enumerate(buckets)],
                   allow_reboot=True)
    assert planned["action"] == action
    # A reboot resets every GPU, and a node kept out is not reset: only a reset lists GPUs.
    assert bool(planned["reset"]) == (action == "reset_gpu")


def test_without_a_drain_the_plan_says_it_is_not_applied():
    planned = plan(finding(), drain=None)
    assert planned["stops"][0] == (
        "nothing takes it out of rotation (no drain hook, no model gateway): it is not applied")


@pytest.mark.parametrize("bucket", ["RESET_NODE", None])
def test_a_finding_without_a_bucket_of_the_table_is_refused_naming_it(bucket):
    with pytest.raises(ValueError) as raised:
        plan(finding(bucket=bucket))
    assert str(raised.value).startswith("finding xid_119 has the resolution bucket %r; known buckets: "
                                        "CHECK_MECHANICALS, CHECK_UVM, " % bucket)


# After the action: whether the node came back.

def test_a_node_healthy_after_its_reset_came_back():
    before = health(finding(count=1))
    assert core.recovered(core.plan(before, False, GATEWAY), before, health()) == dict(
        recovered=True, why="no unhealthy finding after the GPU reset")


def test_an_xid_logged_before_the_reset_and_read_again_is_not_new():
    before = health(finding(count=2), finding("ecc_uncorrectable"))
    after = health(finding(count=2))
    assert core.recovered(core.plan(before, False, GATEWAY), before, after) == dict(
        recovered=True, why="no new unhealthy finding after the GPU reset; the kernel log still holds what it logged "
                            "before (xid_119), as it does until the node reboots")


@pytest.mark.parametrize("after", [
    health(finding(count=3)),
    health(finding(count=2), finding("gpu_reset_required")),
    health(finding(count=2), finding("xid_119", gpu=BUS[1], count=1)),
])
def test_a_grown_count_or_a_new_unhealthy_finding_after_the_reset_did_not_come_back(after):
    before = health(finding(count=2))
    back = core.recovered(core.plan(before, False, GATEWAY), before, after)
    assert back["recovered"] is False and back["why"].startswith("still unhealthy after the GPU reset: ")


def test_after_a_reboot_every_finding_is_new():
    before = health(finding("xid_79", bucket="RESTART_BM", count=1))
    back = core.recovered(core.plan(before, True, GATEWAY), before, before)
    assert back == dict(recovered=False, why="still unhealthy after the reboot: xid_79 on GPU 0 (00000000:3B:00.0) "
                                             "(evidence of xid_79)")


def test_a_gpu_nvidia_smi_no_longer_lists_did_not_come_back():
    before = health(finding(count=1))
    after = health()
    after["gpus"] = after["gpus"][:1]
    assert core.recovered(core.plan(before, False, GATEWAY), before, after) == dict(
        recovered=False, why="nvidia-smi no longer lists GPU 1 (00000000:5E:00.0) after the GPU reset")


def test_a_health_that_cannot_be_read_after_the_reset_did_not_come_back():
    before = health(finding(count=1))
    after = dict(verdict="unknown", summary="unknown: no driver")
    assert core.recovered(core.plan(before, False, GATEWAY), before, after) == dict(
        recovered=False, why="the GPUs' health could not be read after the GPU reset: unknown: no driver")


# The report of a run.

HOSTS = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]


def noted():
    reset = core.plan(health(finding()), False, GATEWAY)
    return {
        "gpu-1": dict(plan=core.plan(health(), False, GATEWAY)),
        "gpu-2": dict(plan=reset, outcome="not recovered", why="Ensure the node came back healthy: still unhealthy",
                      steps=[dict(step="drained")]),
        "gpu-3": dict(plan=reset, outcome=None),
    }


def test_a_plan_run_says_what_each_node_would_get_and_fails_nothing():
    notes = noted()
    del notes["gpu-2"]["outcome"]
    found = core.report("plan", HOSTS, notes)
    assert [(host, found["nodes"][host]["outcome"]) for host in HOSTS] == [
        ("gpu-1", "no action"), ("gpu-2", "planned"), ("gpu-3", "planned"), ("gpu-4", "not planned")]
    assert found["nodes"]["gpu-3"]["why"] == found["nodes"]["gpu-3"]["plan"]["line"]
    assert found["problems"] == []


def test_a_node_that_did_not_come_back_leaves_the_later_ones_alone_and_fails_the_run():
    found = core.report("apply", HOSTS, noted())
    assert [(host, found["nodes"][host]["outcome"]) for host in HOSTS] == [
        ("gpu-1", "no action"), ("gpu-2", "not recovered"), ("gpu-3", "left alone"), ("gpu-4", "not planned")]
    assert found["nodes"]["gpu-3"]["why"] == "the remediation stopped before its turn: gpu-2 did not come back"
    assert found["nodes"]["gpu-2"]["steps"] == [dict(step="drained")]
    assert found["problems"] == [
        "gpu-2: not recovered: Ensure the node came back healthy: still unhealthy",
        "gpu-3: left alone: the remediation stopped before its turn: gpu-2 did not come back"]
    assert found["lines"][0] == "gpu-1: no action: no unhealthy or degraded finding: nothing to do"


@pytest.mark.parametrize("outcome, problem", [("recovered", False), ("kept out", False), ("checked", False),
                                              (None, True)])
def test_a_node_acted_on_fails_the_run_only_where_it_did_not_come_back_or_was_not_reached(outcome, problem):
    notes = {"gpu-1": dict(plan=core.plan(health(finding()), False, GATEWAY), outcome=outcome, why="said")}
    found = core.report("apply", ["gpu-1"], notes)
    assert bool(found["problems"]) == problem
    if outcome is None:
        assert found["nodes"]["gpu-1"]["outcome"] == "not reached"
