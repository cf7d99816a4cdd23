"""The GPU health policy through the playbooks, run for real on this machine against tests/fixtures/fake_nvidia_smi
replaying the recorded 2x H200 host: healthy, or with its second GPU's row remapping failed. The health playbook
reports and drains, the upgrade does not prepare (nor, just before its switch, switch) a node with an unhealthy GPU,
and validate fails naming it."""
import json
import os
import stat
import subprocess
import sys

import pytest
import yaml

from conftest import CHECKOUT, COLLECTIONS, free_port
from process_tree import run_bounded

FAKE_NVIDIA_SMI = CHECKOUT / "tests" / "fixtures" / "fake_nvidia_smi"
RECORDED = CHECKOUT / "tests" / "data" / "gpu_health"
# The module's task, by the name the results carry (with its arguments at -vvv).
READ_HEALTH = ("blackwell.gpu_node.preflight : "
               "Read each GPU's health, weighed with preflight_gpu_health_severity_overrides")
SICK_SUMMARY = ("unhealthy: 1 unhealthy and 0 degraded finding(s): GPU 1 (00000000:00:07.0) row_remap_failure "
                "(Remapped Rows > Remapping Failure Occurred: Yes) -> drain_and_open_case")
SICK_PROBLEM = ("GPU 1 (00000000:00:07.0) is unhealthy: row_remap_failure, Row remapping failed: a bank has no spare "
                "row left (NVIDIA's RMA criterion). Evidence: Remapped Rows > Remapping Failure Occurred: Yes. Action "
                "drain_and_open_case: Drain the node and open a case with NVIDIA or the system's vendor (RMA).")


def playbook(path, mode, *options, **more):
    """(exit code, the result of each task by name, for localhost) of a playbook run on this machine, whose
    nvidia-smi replays the recorded host as FAKE_NVIDIA_SMI=mode says. more: bin_dir, a directory of further fake
    commands, first on PATH."""
    search = [str(more["bin_dir"])] if more.get("bin_dir") else []
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_VERBOSE_TO_STDERR="1", FAKE_NVIDIA_SMI=mode,
                   PATH=":".join(search + [str(FAKE_NVIDIA_SMI), os.environ["PATH"]]))
    argv = [str(CHECKOUT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "gpu_node_hosts=localhost", "-e", "gpu_node_become=false",
            "-e", "ansible_python_interpreter=" + sys.executable, str(path)] + list(options)
    try:
        completed = run_bounded(argv, timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s did not end within 300 s; its processes were killed" % path)
    results = {}
    for play in json.loads(completed.stdout)["plays"]:
        for task in play["tasks"]:
            results.setdefault(task["task"]["name"], task["hosts"].get("localhost", {}))
    return completed.returncode, results


@pytest.fixture(name="hook")
def fixture_hook(tmp_path):
    """A drain hook that leaves a file behind, as a load balancer's would leave the node out of rotation."""
    marker = tmp_path / "drained"
    hook = tmp_path / "drain.yml"
    hook.write_text(yaml.safe_dump([{"name": "Take the node out of rotation", "ansible.builtin.copy": {
        "content": "{{ inventory_hostname }}\n", "dest": str(marker), "mode": "0600"}}]))
    return hook, marker


def health(mode, tmp_path, *options, **more):
    report = tmp_path / "health.json"
    returncode, results = playbook(CHECKOUT / "playbooks" / "health.yml", mode,
                                   "-e", "gpu_node_health_report=%s" % report, *options, **more)
    return returncode, results, report


def test_health_reports_the_unhealthy_gpu_and_drains_the_node_with_the_upgrades_hook(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health("h200_row_remap_failure", tmp_path, "-e", "gpu_node_health_drain=true",
                                              "-e", "gpu_node_upgrade_drain_tasks=%s" % hook)
    assert returncode == 0, results
    assert results["Say each node's verdict"]["msg"] == [
        "localhost: %s [drained]" % SICK_SUMMARY, "Full report: %s" % report_path]
    assert stat.S_IMODE(report_path.stat().st_mode) == 0o600
    report = json.loads(report_path.read_text())["localhost"]
    assert (report["verdict"], report["summary"], report["drain"]) == ("unhealthy", SICK_SUMMARY, "drained")
    (finding,) = report["gpus"][1]["findings"]
    assert (finding["id"], finding["evidence"], finding["action"]) == (
        "row_remap_failure", "Remapped Rows > Remapping Failure Occurred: Yes", "drain_and_open_case")
    assert "invocation" not in report
    assert marker.read_text() == "localhost\n"


def test_health_drains_no_healthy_node_and_writes_its_report_in_check_mode_too(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health("h200_health", tmp_path, "--check", "-e", "gpu_node_health_drain=true",
                                              "-e", "gpu_node_upgrade_drain_tasks=%s" % hook)
    assert returncode == 0, results
    assert results["Say each node's verdict"]["msg"][0] == (
        "localhost: healthy: 2 GPU(s), no unhealthy or degraded finding")
    report = json.loads(report_path.read_text())["localhost"]
    # No dcgmi on this machine: the readiness check says so, and finds nothing.
    assert (report["verdict"], report["drain"], report["dcgm_diag"]["problem"]) == (
        "healthy", None, "dcgmi is not installed (NVIDIA DCGM): no diagnostic ran")
    assert not marker.exists()


def test_health_weighs_findings_with_the_inventorys_severities_and_drains_nothing_unasked(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health(
        "h200_row_remap_failure", tmp_path, "-e", json.dumps({
            "preflight_gpu_health_severity_overrides": {"row_remap_failure": "degraded"},
            "gpu_node_upgrade_drain_tasks": str(hook)}))
    assert returncode == 0, results
    report = json.loads(report_path.read_text())["localhost"]
    assert (report["verdict"], report["drain"]) == ("degraded", None)
    assert results["Say each node's verdict"]["msg"][0] == "localhost: " + SICK_SUMMARY.replace(
        "unhealthy: 1 unhealthy and 0 degraded", "degraded: 0 unhealthy and 1 degraded")
    assert not marker.exists()


def test_health_refuses_a_drain_without_a_hook_before_it_reads_anything(tmp_path):
    returncode, results, report_path = health("h200_row_remap_failure", tmp_path, "-e", "gpu_node_health_drain=true")
    assert returncode != 0
    assert "gpu_node_health_drain is true, but gpu_node_upgrade_drain_tasks names no task file" in results[
        "Ensure a drain asked for has its hook"]["msg"]
    assert READ_HEALTH not in results
    assert not report_path.exists()


def hooks(drain):
    """The options that give the drain hook, and an undrain hook that must not run (it fails)."""
    undrain = drain.with_name("undrain.yml")
    undrain.write_text(yaml.safe_dump([{"name": "Fail: nothing may be undrained", "ansible.builtin.fail": {
        "msg": "undrained"}}]))
    return ["-e", "gpu_node_upgrade_drain_tasks=%s" % drain, "-e", "gpu_node_upgrade_undrain_tasks=%s" % undrain]


def remediation(report_path):
    return json.loads(report_path.read_text())["localhost"]["remediation"]


def test_the_remediation_plan_is_shown_and_changes_nothing(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health("h200_row_remap_failure", tmp_path, "-e",
                                              "gpu_node_health_remediate=plan", "-e",
                                              "gpu_node_upgrade_drain_tasks=%s" % hook)
    assert returncode == 0, results
    assert results["Say the node's plan"]["msg"].startswith(
        "localhost: keep_out; stops its place in rotation (the drain hook %s). the node stays out of rotation: "
        "row_remap_failure on GPU 1 (00000000:00:07.0)" % hook)
    planned = remediation(report_path)
    assert (planned["action"], planned["outcome"], planned["steps"]) == ("keep_out", "planned", [])
    assert results["Say each node's verdict"]["msg"][1:3] == [
        "Remediation (plan):", "localhost: planned: " + planned["plan"]["line"]]
    assert not marker.exists()


def test_an_applied_remediation_drains_a_node_that_needs_a_person_and_keeps_it_out(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health("h200_row_remap_failure", tmp_path, "-e",
                                              "gpu_node_health_remediate=apply", *hooks(hook))
    assert returncode == 0, results
    applied = remediation(report_path)
    assert (applied["outcome"], [step["step"] for step in applied["steps"]]) == ("kept out", ["drained"])
    assert applied["why"] == applied["plan"]["why"]
    assert marker.read_text() == "localhost\n"


def test_an_applied_remediation_in_check_mode_drains_nothing(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health("h200_row_remap_failure", tmp_path, "--check", "-e",
                                              "gpu_node_health_remediate=apply", *hooks(hook))
    assert returncode == 0, results
    assert remediation(report_path)["outcome"] == "checked"
    assert not marker.exists()


def test_a_healthy_node_is_not_touched_by_an_applied_remediation(tmp_path, hook):
    hook, marker = hook
    returncode, results, report_path = health("h200_health", tmp_path, "-e", "gpu_node_health_remediate=apply",
                                              *hooks(hook))
    assert returncode == 0, results
    assert (remediation(report_path)["action"], remediation(report_path)["outcome"]) == ("none", "no action")
    assert not marker.exists()


@pytest.mark.parametrize("options, task, message", [
    (["-e", "gpu_node_health_remediate=fix"], "Ensure the remediation asked for is known, and is not asked for "
     "beside the plain drain", "gpu_node_health_remediate=fix: use plan (show what would be done about each node's "
     "GPU health) or apply (do it), or leave it unset. Nothing was read or changed."),
    (["-e", "gpu_node_health_remediate=apply"], "Ensure a drain asked for has its hook",
     "gpu_node_health_remediate=apply drains each node it acts on, but gpu_node_upgrade_drain_tasks names no task "
     "file to drain a node with and the inventory has no model gateway (group gateway): give the hook's absolute "
     "path (the upgrade's drain hook), or show the plan alone (gpu_node_health_remediate=plan). Nothing was read or "
     "changed."),
    (["-e", "gpu_node_health_remediate=apply", "-e", "gpu_node_upgrade_drain_tasks=/srv/lb/drain.yml"],
     "Ensure an applied remediation can put a node back into rotation", "gpu_node_health_remediate=apply puts each "
     "node it resets or reboots back into rotation, but gpu_node_upgrade_undrain_tasks names no task file to undrain "
     "a node with: give the undrain hook beside the drain hook (gpu_node_upgrade_drain_tasks). Nothing was read or "
     "changed."),
    (["-e", "gpu_node_health_remediate=apply", "-e", "gpu_node_health_drain=true"], "Ensure the remediation asked for "
     "is known, and is not asked for beside the plain drain", "gpu_node_health_drain=true and "
     "gpu_node_health_remediate=apply both drain the unhealthy nodes: leave gpu_node_health_drain off, apply drains "
     "what it acts on. Nothing was read or changed."),
])
def test_a_remediation_that_cannot_be_done_is_refused_naming_the_variable_before_anything_is_read(
        tmp_path, options, task, message):
    returncode, results, report_path = health("h200_row_remap_failure", tmp_path, *options)
    assert returncode != 0
    assert results[task]["msg"] == message
    assert READ_HEALTH not in results
    assert not report_path.exists()


@pytest.fixture(name="dcgmi")
def fixture_dcgmi(tmp_path):
    """fake(recorded) -> (the directory of a dcgmi that prints tests/data/gpu_health/<recorded> whatever it is asked,
    the file where it writes its arguments, a line per call)."""
    def fake(recorded):
        bin_dir, calls = tmp_path / "bin", tmp_path / "dcgmi-calls"
        bin_dir.mkdir()
        command = bin_dir / "dcgmi"
        command.write_text('#!/bin/sh\nprintf "%%s\\n" "$*" >> %s\ncat %s\n' % (calls, RECORDED / recorded))
        command.chmod(0o755)
        return bin_dir, calls
    return fake


def test_health_runs_dcgms_readiness_check_by_default_and_reports_its_results(tmp_path, dcgmi):
    bin_dir, calls = dcgmi("dcgmi-diag-deployment-pass-a10g.txt")
    returncode, results, report_path = health("h200_health", tmp_path, "-vvv", bin_dir=bin_dir)
    assert returncode == 0, results
    assert calls.read_text() == "diag -r 1\n"
    asked = results[READ_HEALTH]["invocation"]["module_args"]
    assert (asked["dcgm_diag"], asked["dcgm_diag_level"], asked["dcgm_diag_allow_long"], asked["timeout"]) == (
        True, 1, False, 120)
    report = json.loads(report_path.read_text())["localhost"]
    assert report["verdict"] == "healthy"
    dcgm = report["dcgm_diag"]
    assert (dcgm["level"], dcgm["rc"], dcgm["problem"]) == (1, 0, None)
    assert [(result["test"], result["result"]) for result in dcgm["results"]][:2] == [
        ("Denylist", "Pass"), ("NVML Library", "Pass")]
    assert {result["result"] for result in dcgm["results"]} == {"Pass"}


def test_a_failed_dcgm_test_makes_the_node_unhealthy_at_a_long_level_allowed(tmp_path, dcgmi):
    bin_dir, calls = dcgmi("dcgmi-diag-r3-deployment-error-pending-row-remap.txt")
    returncode, results, report_path = health(
        "h200_health", tmp_path, "-e", "gpu_node_health_dcgm_diag=true", "-e", "gpu_node_health_dcgm_diag_level=2",
        "-e", "gpu_node_health_dcgm_diag_allow_long=true", "-vvv", bin_dir=bin_dir)
    assert returncode == 0, results
    assert calls.read_text() == "diag -r 2\n"
    # The whole diagnostic, minutes long, within the check's time.
    assert results[READ_HEALTH]["invocation"]["module_args"]["timeout"] == 600
    report = json.loads(report_path.read_text())["localhost"]
    assert report["verdict"] == "unhealthy"
    (finding,) = report["findings"]
    assert (finding["id"], finding["severity"], finding["action"]) == (
        "dcgm_diag_failed", "unhealthy", "read_dcgm_diag")
    assert finding["evidence"] == ("Deployment: Error; GPU 3 has uncorrectable memory errors and row remappings are "
                                   "pending")
    assert "dcgm_diag_failed (Deployment: Error" in results["Say each node's verdict"]["msg"][0]
    assert report["dcgm_diag"]["level"] == 2


def test_a_long_dcgm_level_not_allowed_is_refused_naming_the_variable_before_anything_runs(tmp_path, dcgmi):
    bin_dir, calls = dcgmi("dcgmi-diag-r2-pcie-fail.txt")
    returncode, results, report_path = health(
        "h200_health", tmp_path, "-e", "gpu_node_health_dcgm_diag=true", "-e", "gpu_node_health_dcgm_diag_level=3",
        bin_dir=bin_dir)
    assert returncode != 0
    assert results["Ensure the DCGM diagnostic asked for can run"]["msg"] == (
        "gpu_node_health_dcgm_diag_level=3: this level loads the GPUs for minutes (level 1 is the readiness check): "
        "set gpu_node_health_dcgm_diag_allow_long=true to run it on drained nodes. Nothing was read or changed.")
    assert READ_HEALTH not in results
    assert not calls.exists()
    assert not report_path.exists()


def upgrade(tmp_path, mode):
    report = tmp_path / "upgrade.json"
    returncode, results = playbook(
        CHECKOUT / "playbooks" / "upgrade.yml", mode, "-e", "stack_profile=cu130",
        "-e", "sglang_server_state_dir=%s" % (tmp_path / "state"), "-e", "ml_stack_venv_path=%s" % (tmp_path / "env"),
        "-e", "sglang_server_port=%d" % free_port(), "-e", "preflight_venv_min_free_gib=1",
        "-e", "gpu_node_upgrade_report=%s" % report)
    return returncode, results, json.loads(report.read_text())


def test_the_upgrade_does_not_prepare_a_canary_with_an_unhealthy_gpu_and_names_the_finding(tmp_path):
    returncode, results, report = upgrade(tmp_path, "h200_row_remap_failure")
    assert returncode != 0
    (row,) = report["hosts"]
    assert (row["host"], row["outcome"], row["seconds_to_ready"]) == ("localhost", "not prepared", None)
    assert "Preflight refused localhost; nothing was changed on it. 1 problem(s): (1) %s" % SICK_PROBLEM in (
        row["diagnosis"])
    # Refused before anything of the target was installed, and before its turn to switch.
    assert "Install the target's CUDA beside the running one, unregistered" not in results
    assert "Switch the node" not in results or results["Switch the node"].get("skipped")
    assert not (tmp_path / "env").exists()
    assert not (tmp_path / "state" / "upgrade" / "lock.json").exists()


def switch_check(tmp_path, mode):
    """What the upgrade notes for a node it prepared when, just before its switch, its GPUs read as mode says: the
    upgrade's own tasks for that check, run on a node noted as prepare notes one."""
    (_prepare, switch, _release, _report) = yaml.safe_load((CHECKOUT / "playbooks" / "upgrade.yml").read_text())
    (recheck,) = [task for task in switch["tasks"] if task["name"].startswith("Check the node again, drain it")]
    steps = yaml.safe_load((CHECKOUT / "playbooks" / recheck["block"][0]["ansible.builtin.import_tasks"]).read_text())
    # The GPUs' part of the recheck (before the drain), with the playbook's own rescue.
    health = steps[:[step["name"] for step in steps].index("Ensure no GPU of the node is unhealthy") + 1]
    check = dict(recheck, block=health, when=None)
    del check["when"]
    play = tmp_path / "switch_check.yml"
    note = {"name": "Note the node as prepare does", "ansible.builtin.set_fact": {"gpu_node_upgrade": {
        "from": "cu128", "to": "cu130", "needed": True, "resumed": False, "outcome": "prepared", "diagnosis": None}}}
    show = {"name": "Show the note", "ansible.builtin.debug": {"var": "gpu_node_upgrade"}}
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [note, check, show]}]))
    returncode, results = playbook(play, mode)
    assert returncode == 0, results
    return results["Show the note"]["gpu_node_upgrade"]


def test_a_gpu_unhealthy_since_prepare_leaves_the_node_unswitched_and_says_why(tmp_path):
    noted = switch_check(tmp_path, "h200_row_remap_failure")
    assert (noted["needed"], noted["outcome"]) == (False, "not prepared")
    assert noted["diagnosis"] == ("Ensure no GPU of the node is unhealthy: GPU health %s "
                                  "(preflight_gpu_health_severity_overrides says which findings refuse a node). "
                                  "The old server was not touched." % SICK_SUMMARY)


def test_a_healthy_node_goes_on_to_its_switch(tmp_path):
    noted = switch_check(tmp_path, "h200_health")
    assert (noted["needed"], noted["outcome"]) == (True, "prepared")


def test_validate_fails_naming_the_unhealthy_gpu(tmp_path):
    returncode, results = playbook(CHECKOUT / "playbooks" / "validate.yml", "h200_row_remap_failure",
                                   "-e", "sglang_server_state_dir=%s" % (tmp_path / "state"),
                                   "-e", "sglang_server_port=%d" % free_port())
    assert returncode != 0
    (line,) = [problem for problem in results["Report the node"]["msg"]["problems"] if problem.startswith("preflight:")]
    assert "(1) %s" % SICK_PROBLEM in line
    # The report carries the assessment itself, finding by finding.
    health = results["Report the node"]["msg"]["gpu_health"]
    assert health["verdict"] == "unhealthy"
    assert [finding["id"] for gpu in health["gpus"] for finding in gpu["findings"]
            if finding["severity"] == "unhealthy"] == ["row_remap_failure"]


def test_saved_evidence_is_assessed_on_the_controller_and_a_remediation_of_it_refused(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "nvidia-smi-q.txt").write_text((CHECKOUT / "tests" / "data" / "h200" / "gpu_health_q.txt").read_text())
    (bundle / "dmesg.txt").write_text((RECORDED / "kernel-dmesg-xid79-h100.txt").read_text())
    returncode, results, report_path = health("h200_health", tmp_path, "-e", "gpu_node_health_evidence=%s" % bundle)
    assert returncode == 0, results
    assert READ_HEALTH not in results
    report = json.loads(report_path.read_text())
    assert report["verdict"] == "unhealthy"
    assert [finding["bucket"] for finding in report["findings"] + [
        finding for gpu in report["gpus"] for finding in gpu["findings"]] if finding["id"] == "xid_79"] == ["RESTART_BM"]
    assert report["evidence"]["missing"] == ["nvidia-smi nvlink -e", "nvidia-smi nvlink -s", "dcgmi diag"]
    returncode, results, report_path = health("h200_health", tmp_path, "-e", "gpu_node_health_evidence=%s" % bundle,
                                              "-e", "gpu_node_health_remediate=apply")
    assert returncode != 0
    assert "nothing can be remediated from a bundle" in results["Refuse a remediation of saved outputs"]["msg"]
    assert not report_path.exists() or "Read and weigh the saved outputs" not in results
