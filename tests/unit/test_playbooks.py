"""The playbooks' structure where it decides what a live fleet goes through."""
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import STEP_NAMES

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
ROLES = ["blackwell.gpu_node.%s" % name
         for name in ("preflight", "cuda", "service_user", "ml_stack", "runtime_env", "monitoring", "sglang_server")]


def plays(name):
    return yaml.safe_load((PLAYBOOKS / name).read_text())


def tasks(name):
    return yaml.safe_load((PLAYBOOKS / "tasks" / name).read_text())


def imported(task_list, here=PLAYBOOKS):
    """task_list with each import_tasks replaced by the tasks of the file it names, as Ansible imports them."""
    found = []
    for task in task_list:
        if "ansible.builtin.import_tasks" in task:
            path = here / task["ansible.builtin.import_tasks"]
            for step in imported(yaml.safe_load(path.read_text()), path.parent):
                if "when" in task:
                    own = step.get("when")
                    step = dict(step, when=task["when"] if own is None else [task["when"]] + (
                        own if isinstance(own, list) else [own]))
                found.append(step)
            continue
        task = dict(task)
        for part in ("block", "rescue", "always"):
            if part in task:
                task[part] = imported(task[part], here)
        found.append(task)
    return found


def upgrade_plays():
    return [dict(play, tasks=imported(play["tasks"])) for play in plays("upgrade.yml")]


def health_plays():
    return [dict(play, tasks=imported(play["tasks"])) for play in plays("health.yml")]


def test_site_switches_a_nodes_stack_in_the_same_batch_as_its_server():
    """With gpu_node_serial, a node's stack must not move before its own turn: one play, serial, every role."""
    play, _gateway, service_discovery = plays("site.yml")
    assert service_discovery["ansible.builtin.import_playbook"] == "prometheus_sd.yml"
    assert play["serial"] == "{{ gpu_node_serial | default('100%') }}"
    assert play["max_fail_percentage"] == 0
    assert [role["role"] for role in play["roles"]] == ROLES


def test_the_gateway_runs_only_on_the_hosts_of_the_gateway_group_after_the_nodes():
    _nodes, gateway, _service_discovery = plays("site.yml")
    assert gateway["hosts"] == "{{ groups['gateway'] | default([]) }}"
    assert [role["role"] for role in gateway["roles"]] == ["blackwell.gpu_node.gateway"]


def test_provision_honours_gpu_node_serial():
    (play,) = plays("provision.yml")
    assert play["serial"] == "{{ gpu_node_serial | default('100%') }}"


def test_the_profile_comment_names_a_playbook_that_exists():
    stack_defaults = (PLAYBOOKS.parent / "roles" / "stack" / "defaults" / "main.yml").read_text()
    assert "playbooks/upgrade.yml" in stack_defaults
    assert (PLAYBOOKS / "upgrade.yml").is_file()


def test_the_upgrade_switches_before_it_reports_and_never_reincludes_roles_to_roll_back():
    prepare, switch, release, report = upgrade_plays()
    assert switch["serial"] == "{{ __gpu_node_upgrade_serial }}"
    assert release["tasks"][0]["blackwell.gpu_node.upgrade_state"]["state"] == "released"
    assert report["hosts"] == "localhost"
    (switching,) = [task for task in switch["tasks"] if task["name"] == "Switch the node"]
    rollback = switching["rescue"][1]
    (restore,) = [task for task in rollback["block"] if "blackwell.gpu_node.node_snapshot" in task]
    assert restore["blackwell.gpu_node.node_snapshot"]["state"] == "restored"
    rolled_back_roles = [task["ansible.builtin.include_role"]["name"] for task in rollback["block"]
                         if "ansible.builtin.include_role" in task]
    assert rolled_back_roles == ["blackwell.gpu_node.sglang_server"]


@pytest.mark.parametrize("path", sorted(PLAYBOOKS.glob("*.yml")), ids=lambda path: path.name)
def test_every_playbook_is_a_table_of_contents(path):
    """A playbook shows its plays and their steps at a glance; a step's tasks live in playbooks/tasks/."""
    length = len(path.read_text().splitlines())
    assert length <= 150, "%s has %d lines, over 150: move coherent steps into playbooks/tasks/ (import_tasks)" % (
        path.name, length)


def test_the_upgrade_playbook_is_a_table_of_contents_and_its_record_changes_only_by_transition():
    text = (PLAYBOOKS / "upgrade.yml").read_text()
    assert len(text.splitlines()) <= 150
    steps = [PLAYBOOKS / "upgrade.yml"] + sorted((PLAYBOOKS / "tasks").glob("upgrade_*.yml"))
    for path in steps:
        body = path.read_text()
        assert "combine(" not in body and "&" not in body.replace("&&", ""), path.name
        for match in re.finditer(r"gpu_node_upgrade: >-\n\s*\{\{ (.*)", body):
            assert match.group(1).startswith(("gpu_node_upgrade | blackwell.gpu_node.upgrade_transition(",
                                              "gpu_node_upgrade | default(none) | blackwell.gpu_node.upgrade_transition(",
                                              "__gpu_node_upgrade_running | blackwell.gpu_node.upgrade_plan(")), path.name
    assert "outcome" not in (PLAYBOOKS / "vars" / "upgrade.yml").read_text()


def test_the_upgrade_switch_is_recorded_before_the_stop_and_ended_only_after_the_gate_or_the_rollback():
    _prepare, switch, _release, _report = upgrade_plays()
    (switching,) = [task for task in switch["tasks"] if task["name"] == "Switch the node"]
    names = [task["name"] for task in switching["block"]]
    assert names.index("Record the switch on the node before its server stops") < names.index("Stop the server")
    assert names[-1] == "End the record of the switch"
    rollback = switching["rescue"][1]
    assert rollback["block"][-1]["name"] == "End the record of the switch"
    assert "End the record of the switch" not in [task["name"] for task in rollback["rescue"]]


def test_the_rollback_falls_back_to_the_runs_snapshot_and_to_the_virtualenv_the_switch_record_names():
    _prepare, switch, _release, _report = upgrade_plays()
    (switching,) = [task for task in switch["tasks"] if task["name"] == "Switch the node"]
    (record,) = [task for task in switching["block"] if task["name"].startswith("Record the switch")]
    (restore,) = [task["blackwell.gpu_node.node_snapshot"] for task in switching["rescue"][1]["block"]
                  if "blackwell.gpu_node.node_snapshot" in task]
    assert restore["snapshot"] == "{{ __gpu_node_upgrade_recorded.snapshot | default(omit) }}"
    recorded_from = record["blackwell.gpu_node.upgrade_state"]["record"]["from_venv"]
    assert restore["fallback_venv"] == recorded_from.replace(" }}", " | default(omit, true) }}")


def test_only_the_linker_and_the_link_change_while_the_server_is_down_and_login_shells_follow_the_gate():
    _prepare, switch, _release, _report = upgrade_plays()
    (switching,) = [task for task in switch["tasks"] if task["name"] == "Switch the node"]
    names = [task["name"] for task in switching["block"]]
    down = switching["block"][names.index("Stop the server") + 1:names.index(
        "Start the server on the new stack and wait for the ready line and /health")]
    # Beside them, only the note of the start in the node's timeline, which changes nothing on the node.
    assert [task["ansible.builtin.include_role"].get("tasks_from") for task in down
            if "ansible.builtin.set_fact" not in task] == ["linker.yml", "link.yml"]
    assert [list(task["ansible.builtin.set_fact"]) for task in down if "ansible.builtin.set_fact" in task] == [
        ["gpu_node_upgrade"]]
    assert names.index("Give login shells the target's CUDA") == names.index("Note that the node serves on the new stack") + 1


def test_a_switch_an_interrupted_run_left_serving_takes_the_gates_it_had_not_passed_and_is_rolled_back_if_one_fails():
    """The re-run of a canary killed before its measurement on the new stack skipped that gate and kept the slow
    server: a node that serves on the target went past the gate, which ran only for a node to switch."""
    _prepare, switch, _release, _report = upgrade_plays()
    (switching,) = [task for task in switch["tasks"] if task["name"] == "Switch the node"]
    assert switching["when"] == ("gpu_node_upgrade.needed or (gpu_node_upgrade.resumed and gpu_node_upgrade.outcome "
                                 "!= 'not prepared')")
    switched = tasks("upgrade_switch.yml")
    for task in switching["block"][:len(switched)]:
        assert "gpu_node_upgrade.needed" in ([task["when"]] if isinstance(task["when"], str) else task["when"])
    gate = switching["block"][len(switched):]
    assert [task["name"] for task in gate] == [task["name"] for task in tasks("upgrade_gate.yml")]
    steps = dict((task["name"], task) for task in gate)
    benchmark = ["Ensure the canary's baseline on the old stack was kept", "Measure the canary's server on the new stack",
                 "Ensure the canary serves no slower on the new stack", "Keep on the node that the canary serves no slower"]
    names = [task["name"] for task in gate]
    assert [names.index(name) for name in benchmark] == sorted(names.index(name) for name in benchmark)
    assert names.index(benchmark[-1]) < names.index("Note that the node serves on the new stack")
    for name in benchmark:
        assert steps[name]["when"] == "'benchmark' in gpu_node_upgrade.pending"
    # The baseline is the node's record's, which the switch record on the node keeps: not the killed run's memory.
    assert "benchmark_compare(gpu_node_upgrade.before.benchmark," in (
        steps[benchmark[2]]["vars"]["__gpu_node_upgrade_benchmark_change"])
    assert steps[benchmark[0]]["ansible.builtin.assert"]["that"] == "'benchmark' in gpu_node_upgrade.before"
    assert steps["Ask the new server for one generation"]["when"] == "'generate' in gpu_node_upgrade.pending"
    assert steps["Note that the node serves on the new stack"]["when"] == "gpu_node_upgrade.outcome == 'prepared'"
    assert names[-1] == "End the record of the switch"
    # A gate it fails is the switch's failure: the rescue rolls the node back.
    assert "upgrade_transition('switch_failed'" in switching["rescue"][0]["ansible.builtin.set_fact"]["gpu_node_upgrade"]
    assert not (PLAYBOOKS / "tasks" / "upgrade_finish.yml").exists()


def test_every_gate_passed_and_the_baselines_are_kept_in_the_switch_record_on_the_node():
    (recorded,) = [task for task in tasks("upgrade_switch.yml") if task["name"].startswith("Record the switch")]
    record = recorded["blackwell.gpu_node.upgrade_state"]["record"]
    for key in ("gates", "passed", "before"):
        assert record[key] == "{{ gpu_node_upgrade.%s }}" % key
    note, kept = tasks("upgrade_passed.yml")
    assert "upgrade_transition('passed', {'gates': __gpu_node_upgrade_gates})" in note["ansible.builtin.set_fact"][
        "gpu_node_upgrade"]
    rewritten = kept["blackwell.gpu_node.upgrade_state"]
    assert rewritten["state"] == "switching" and set(rewritten["record"]) == set(record)
    assert rewritten["record"]["stopped_at"] == (
        "{{ __gpu_node_upgrade_stopped_at | default(gpu_node_upgrade.recorded_stop) | float }}")
    passes = [task for task in tasks("upgrade_gate.yml") if task.get("ansible.builtin.include_tasks") == "upgrade_passed.yml"]
    assert [task["vars"]["__gpu_node_upgrade_gates"] for task in passes] == [
        "{{ ['ready', 'generate'] | select('in', gpu_node_upgrade.pending) | list }}", ["benchmark"], ["gateway"]]
    prepare = dict((task["name"], task) for task in tasks("upgrade_prepare.yml"))
    for name, gate in (("Keep it as the canary's baseline", "benchmark"),
                       ("Keep it as the fleet's baseline through the gateway", "gateway")):
        noted = " ".join(prepare[name]["ansible.builtin.set_fact"]["gpu_node_upgrade"].split())
        assert "upgrade_transition('measured', { 'gate': '%s'," % gate in noted


def test_a_node_another_run_holds_is_reported_with_what_it_runs_and_the_state_that_run_left():
    prepare, _switch, _release, _report = upgrade_plays()
    (preparing,) = [task for task in prepare["tasks"] if task["name"] == "Prepare the node"]
    names = [task["name"] for task in preparing["block"]]
    lock = names.index("Take the node's upgrade lock")
    assert names.index("Look at the stack the node runs") < lock
    assert names.index("Ask the node's server for one generation, to know whether it serves") < lock
    running = preparing["block"][lock]["blackwell.gpu_node.upgrade_state"]["running"]
    assert running["serving"] == "{{ __gpu_node_upgrade_serves }}"
    assert running["venv"] == "{{ __gpu_node_upgrade_current.current.venv.target }}"
    held = preparing["block"][names.index("Ensure no other upgrade runs on the node")]["ansible.builtin.assert"]
    assert held["that"] == "not __gpu_node_upgrade_held"
    noted = preparing["rescue"][0]["ansible.builtin.set_fact"]["gpu_node_upgrade"]
    assert "'held': __gpu_node_upgrade_held | default(false)" in noted
    assert "'from': __gpu_node_upgrade_current.current.venv.profile" in noted


def test_the_upgrades_settings_are_read_through_default_so_that_inventory_reaches_them():
    """A play's vars_files outrank group_vars and host_vars: a setting defined there silently ignores inventory."""
    for name in ("upgrade.yml", "benchmark.yml", "health.yml"):
        settings = yaml.safe_load((PLAYBOOKS / "vars" / name).read_text())
        assert [key for key in settings if not key.startswith("__")] == [], name


def test_diagnose_reads_every_node_at_once_and_reports_on_the_controller():
    diagnose, report, gateway = plays("diagnose.yml")
    assert diagnose["strategy"] == "free" and "serial" not in diagnose
    write = next(task for task in report["tasks"] if "ansible.builtin.copy" in task)
    assert write["delegate_to"] == "localhost" and write["run_once"] is True
    # The gateway's view: once, on the gateway's host, only when the group gateway has one.
    ask = gateway["tasks"][0]
    assert ask["when"] == "__gpu_node_gateway_host | length > 0" and ask["run_once"] is True
    assert ask["block"][0]["delegate_to"] == "{{ __gpu_node_gateway_host or inventory_hostname }}"
    assert "blackwell.gpu_node.gateway_info" in ask["block"][0]


def test_no_playbook_wires_the_roles_together():
    """The roles read the shared settings themselves: a team's own playbook needs no file copied from ours."""
    assert not (PLAYBOOKS / "vars" / "wiring.yml").exists()
    for playbook in sorted(PLAYBOOKS.glob("*.yml")):
        for play in yaml.safe_load(playbook.read_text()):
            assert set(play.get("vars_files", [])) <= {"vars/upgrade.yml", "vars/benchmark.yml", "vars/gateway.yml",
                                                       "vars/health.yml", "vars/readahead.yml"}, playbook.name


def test_service_user_runs_once_per_play_as_a_stage_and_as_a_dependency():
    """Ansible runs a role once per play only when every listing is the same, tags included: listed with tags, it
    ran a second time as ml_stack's dependency. Its stage tags live on its tasks instead."""
    for name in ("site.yml", "provision.yml"):
        play = plays(name)[0]
        assert {"role": "blackwell.gpu_node.service_user"} in play["roles"], name
    for role in ("ml_stack", "sglang_server"):
        meta = yaml.safe_load((PLAYBOOKS.parent / "roles" / role / "meta" / "main.yml").read_text())
        assert {"role": "blackwell.gpu_node.service_user"} in meta["dependencies"], role
    (_core_check, tasks) = yaml.safe_load(
        (PLAYBOOKS.parent / "roles" / "service_user" / "tasks" / "main.yml").read_text())
    assert set(tasks["tags"]) == {"service_user", "ml_stack"}


def test_every_role_that_reads_the_stack_profile_depends_on_the_role_that_chooses_it():
    """stack_selected is set by the stack role only: a role that reads it and runs alone (serve.yml runs
    sglang_server alone) would read it undefined, or another profile's."""
    roles = PLAYBOOKS.parent / "roles"
    for role in sorted(path for path in roles.iterdir() if path.name != "stack"):
        read = [path.name for folder in ("defaults", "vars", "tasks", "templates") for path in (role / folder).rglob("*")
                if path.is_file() and "stack_selected" in path.read_text()]
        if read:
            meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
            assert {"role": "blackwell.gpu_node.stack"} in meta["dependencies"], (role.name, read)


def test_monitoring_is_opt_in_and_the_service_discovery_file_is_written_once_on_the_controller():
    (site, _gateway, _service_discovery) = plays("site.yml")
    monitoring = next(role for role in site["roles"] if role["role"] == "blackwell.gpu_node.monitoring")
    assert monitoring["when"] == "gpu_node_monitoring | default(false) | bool"
    for name in ("site.yml", "serve.yml"):
        assert plays(name)[-1]["ansible.builtin.import_playbook"] == "prometheus_sd.yml", name
    (play,) = plays("prometheus_sd.yml")
    tasks = {task["name"]: task for task in play["tasks"]}
    write = tasks["Ensure the service-discovery file lists every node's metrics endpoints"]
    alert_rules = tasks["Write the alert rules for the nodes' GPU and SGLang metrics"]
    assert write["delegate_to"] == "localhost" and write["run_once"] is True and write["become"] is False
    # The whole fleet from the inventory, not the hosts of a --limit run: they would drop the others' targets.
    assert "query('ansible.builtin.inventory_hostnames'" in play["vars"]["__gpu_node_prometheus_nodes"]
    assert "__gpu_node_prometheus_nodes | blackwell.gpu_node.prometheus_sd_targets" in write["ansible.builtin.copy"][
        "content"]
    assert write["when"] == "gpu_node_prometheus_sd_file | default('', true) | length > 0"
    # The alert rules are opt-in too, and the role's entry point writes them once on the controller.
    assert alert_rules["ansible.builtin.include_role"] == {
        "name": "blackwell.gpu_node.monitoring", "tasks_from": "alert_rules"}
    assert alert_rules["when"] == "monitoring_alert_rules_file | default('', true) | length > 0"
    (check, template) = yaml.safe_load(
        (PLAYBOOKS.parent / "roles" / "monitoring" / "tasks" / "alert_rules.yml").read_text())
    assert check["run_once"] is True
    assert template["delegate_to"] == "localhost" and template["run_once"] is True and template["become"] is False


def test_health_reads_every_node_at_once_and_reports_on_the_controller_as_diagnose_does():
    _evidence, nodes, _remediation, report = health_plays()
    assert nodes["strategy"] == "free" and "serial" not in nodes
    assert nodes["hosts"] == report["hosts"] == (
        "{{ [] if gpu_node_health_evidence is defined else gpu_node_hosts | default('gpu_nodes') }}")
    (reading,) = [task for task in nodes["tasks"] if task["name"] == "Read the node's GPU health"]
    assert reading["block"][0]["ansible.builtin.include_tasks"] == "tasks/gpu_health_read.yml"
    (read,) = tasks("gpu_health_read.yml")
    include = read["ansible.builtin.include_role"]
    assert (include["name"], include["tasks_from"]) == ("blackwell.gpu_node.preflight", "gpu_health")
    # One node that cannot be read must not hide the others' report.
    assert reading["rescue"][0]["ansible.builtin.set_fact"]["preflight_gpu_health"]["verdict"] == "not checked"
    write = next(task for task in report["tasks"] if "ansible.builtin.copy" in task)
    assert (write["delegate_to"], write["run_once"], write["check_mode"]) == ("localhost", True, False)
    assert write["ansible.builtin.copy"]["mode"] == "0600"
    assert "gpu_node_health_report | default(lookup('ansible.builtin.env', 'PWD') ~ '/gpu-node-health.json')" in (
        report["vars"]["__gpu_node_health_report_path"])


def test_health_assesses_saved_evidence_on_the_controller_alone_and_no_node():
    evidence, nodes, _remediation, report = health_plays()
    assert (evidence["hosts"], evidence["connection"], evidence["become"]) == ("localhost", "local", False)
    (assess,) = evidence["tasks"]
    assert assess["when"] == "gpu_node_health_evidence is defined"
    refuse, read, write, _say = assess["block"]
    assert refuse["ansible.builtin.assert"]["that"] == "(gpu_node_health_remediate | default('off', true) | string) == 'off'"
    assert read["blackwell.gpu_node.gpu_health_info"]["evidence_path"] == "{{ gpu_node_health_evidence }}"
    assert (write["check_mode"], write["ansible.builtin.copy"]["mode"]) == (False, "0600")
    assert all(play["hosts"].startswith("{{ [] if gpu_node_health_evidence is defined else ")
               for play in (nodes, report))


def test_health_drains_only_an_unhealthy_node_and_only_when_asked_with_the_upgrades_hook():
    _evidence, nodes, _remediation, _report = health_plays()
    (drain,) = [task for task in nodes["tasks"] if task["name"] == "Drain the unhealthy node"]
    assert drain["when"] == ["gpu_node_health_drain | default(false) | bool",
                             "preflight_gpu_health.verdict == 'unhealthy'"]
    assert drain["block"][0]["ansible.builtin.include_tasks"] == "tasks/node_drain.yml"
    names = [task["name"] for task in nodes["tasks"]]
    assert names.index("Read the node's GPU health") < names.index("Drain the unhealthy node")


def test_the_upgrade_reads_the_gpus_health_again_before_it_drains_and_leaves_a_sick_node_unswitched():
    prepare, switch, _release, _report = upgrade_plays()
    (preparing,) = [task for task in prepare["tasks"] if task["name"] == "Prepare the node"]
    assert "blackwell.gpu_node.preflight" in [task["ansible.builtin.include_role"]["name"]
                                              for task in preparing["block"] if "ansible.builtin.include_role" in task]
    names = [task["name"] for task in switch["tasks"]]
    recheck = switch["tasks"][names.index("Check the node again, drain it and verify the target's virtualenv just "
                                          "before the stop")]
    assert names.index(recheck["name"]) < names.index("Switch the node")
    assert recheck["when"] == "gpu_node_upgrade.needed"
    steps = [task["name"] for task in recheck["block"]]
    include = recheck["block"][0]["ansible.builtin.include_role"]
    assert (include["name"], include["tasks_from"]) == ("blackwell.gpu_node.preflight", "gpu_health")
    assert recheck["block"][1]["ansible.builtin.assert"]["that"] == "preflight_gpu_health.verdict != 'unhealthy'"
    assert steps.index("Ensure no GPU of the node is unhealthy") < steps.index("Drain the node")
    # Undrained only when the drain was begun; a node refused for its GPUs was never drained.
    assert steps.index("Note that the node leaves the rotation, for an undrain if what follows fails") < steps.index(
        "Drain the node")
    undrain, note = recheck["rescue"]
    assert "__gpu_node_upgrade_drained | default(false) | bool" in undrain["when"]
    assert "upgrade_transition('not_prepared'" in note["ansible.builtin.set_fact"]["gpu_node_upgrade"]


def test_serve_drains_each_node_around_its_server_only_in_a_rolling_run():
    serving, _service_discovery = plays("serve.yml")
    assert serving["vars"]["__gpu_node_serve_drains"] == "{{ gpu_node_serial is defined }}"
    (drain,) = [task for task in serving["pre_tasks"] if task["name"] == "Drain the node"]
    (undrain,) = serving["post_tasks"]
    assert drain["ansible.builtin.include_tasks"]["file"] == "tasks/node_drain.yml"
    assert undrain["ansible.builtin.include_tasks"]["file"] == "tasks/node_undrain.yml"
    assert drain["when"].endswith(" and __gpu_node_has_drain | bool")
    assert undrain["when"].endswith(" and __gpu_node_has_undrain | bool")
    for task in (drain, undrain):
        assert task["when"].startswith("__gpu_node_serve_drains | bool and ")
    assert [role["role"] for role in serving["roles"]] == ["blackwell.gpu_node.sglang_server"]


def test_a_drain_runs_the_users_hook_else_the_gateway_roles_entry_point_with_its_arguments():
    specs = yaml.safe_load((PLAYBOOKS.parent / "roles" / "gateway" / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]
    for name, entry in (("node_drain.yml", "drain"), ("node_undrain.yml", "undrain")):
        hook, gateway = tasks(name)
        assert hook["ansible.builtin.include_tasks"]["file"] == "{{ gpu_node_upgrade_%s_tasks }}" % entry
        assert hook["when"] == "gpu_node_upgrade_%s_tasks | default(none) is not none" % entry
        assert gateway["ansible.builtin.include_role"]["name"] == "blackwell.gpu_node.gateway"
        assert gateway["ansible.builtin.include_role"]["tasks_from"] == entry
        assert gateway["when"] == "__gpu_node_gateway_builtin | bool"
        options = specs[entry]["options"]
        assert {option for option in options if options[option].get("required")} <= set(gateway["vars"]) <= set(
            options), name
    settings = yaml.safe_load((PLAYBOOKS / "vars" / "gateway.yml").read_text())
    assert "__gpu_node_drain_tasks" not in settings and "__gpu_node_undrain_tasks" not in settings
    assert {"__gpu_node_has_drain", "__gpu_node_has_undrain", "__gpu_node_gateway_builtin"} <= set(settings)
    assert not (PLAYBOOKS / "tasks" / "gateway_drain.yml").exists()


def test_serve_and_health_check_the_gateway_through_its_role_where_the_drain_built_in_applies():
    serving, _service_discovery = plays("serve.yml")
    _evidence, nodes, _remediation, _report = health_plays()
    checks = [task for task in serving["pre_tasks"] + nodes["tasks"]
              if task["name"].startswith("Ensure the model gateway can be asked to drain")]
    assert len(checks) == 2
    for check in checks:
        assert check["ansible.builtin.include_role"]["name"] == "blackwell.gpu_node.gateway"
        assert check["ansible.builtin.include_role"]["tasks_from"] == "check"
        assert check["vars"] == {"gateway_inventory_host": "{{ __gpu_node_gateway_host }}",
                                 "gateway_admin_key": "{{ __gpu_node_gateway_admin_key }}"}
        assert "__gpu_node_gateway_builtin | bool" in str(check["when"])


def test_health_plans_a_remediation_only_when_asked_and_acts_only_with_apply_after_refusing_bad_input():
    _evidence, nodes, _remediation, _report = health_plays()
    names = [task["name"] for task in nodes["tasks"]]
    (known,) = [task for task in nodes["tasks"] if task["name"].startswith("Ensure the remediation asked for is known")]
    assert "__gpu_node_health_remediate in ['off', 'plan', 'apply']" in known["ansible.builtin.assert"]["that"]
    # Refused before the health is read, and planned only once it was.
    assert names.index(known["name"]) < names.index("Read the node's GPU health") < names.index(
        "Plan what to do about the node's GPU health")
    (planning,) = [task for task in nodes["tasks"] if task["name"] == "Plan what to do about the node's GPU health"]
    assert planning["when"] == "__gpu_node_health_remediate != 'off'"
    group = next(task for task in tasks("gpu_health_plan.yml") if "ansible.builtin.group_by" in task)
    assert group["when"] == "__gpu_node_health_remediate == 'apply' and __gpu_node_health_noted.plan.acts"


def test_the_remediation_goes_in_the_upgrades_batches_and_stops_after_a_node_that_did_not_come_back():
    _evidence, _nodes, remediation, _report = health_plays()
    # The upgrade's batch rule, read from vars/upgrade.yml, never copied; the acting nodes alone, canaries first.
    assert remediation["serial"] == "{{ __gpu_node_upgrade_serial }}"
    assert "vars/upgrade.yml" in remediation["vars_files"] and remediation["max_fail_percentage"] == 0
    assert remediation["hosts"].startswith("{{ __gpu_node_upgrade_hosts_canary_first | select('in', "
                                           "groups['gpu_node_health_remediation']")
    stop, carry_out = remediation["tasks"]
    assert stop["ansible.builtin.meta"] == "end_play" and "select('equalto', 'not recovered')" in stop["when"]
    assert carry_out["ansible.builtin.include_tasks"] == "tasks/gpu_health_remediate.yml"
    (remediate,) = tasks("gpu_health_remediate.yml")
    assert remediate["rescue"][0]["ansible.builtin.set_fact"]["__gpu_node_health_noted"].count("'not recovered'") == 1


def test_a_node_is_drained_first_and_undrained_only_after_its_health_its_server_and_a_generation():
    (remediate,) = tasks("gpu_health_remediate.yml")
    assert remediate["block"][0]["ansible.builtin.include_tasks"] == "node_drain.yml"
    keep_out, back = remediate["block"][2:]
    assert keep_out["when"] == "__gpu_node_health_plan.action == 'keep_out'"
    assert back["when"] == "__gpu_node_health_plan.action in ['reset_gpu', 'reboot']"
    names = [task["name"] for task in back["block"]]
    order = ["Stop the server", "Reset the GPUs the findings name", "Read each GPU's health again",
             "Ensure the node came back healthy", "Start the server and wait for the ready line and /health",
             "Ask the server for one generation", "Undrain the node"]
    assert [name for name in names if name in order] == order
    steps = dict((task["name"], task) for task in back["block"])
    assert steps["Stop the server"]["ansible.builtin.include_role"]["name"] == "blackwell.gpu_node.sglang_server"
    assert steps["Reset the GPUs the findings name"]["blackwell.gpu_node.gpu_reset"]["gpus"] == (
        "{{ __gpu_node_health_plan.reset }}")
    assert steps["Reboot the node"]["when"] == "__gpu_node_health_plan.action == 'reboot'"
    assert steps["Ask the server for one generation"]["ansible.builtin.include_tasks"] == "upgrade_generate.yml"
    assert steps["Undrain the node"]["ansible.builtin.include_tasks"] == "node_undrain.yml"


def test_a_node_reads_its_model_ahead_in_its_own_turn_before_its_drain():
    """The upgrade and a rolling serve warm the page cache while the old server still serves: in each node's turn
    (a later batch would lose pages read at the start), before the drain (the read must not hold the node out)."""
    recheck = yaml.safe_load((PLAYBOOKS / "tasks" / "upgrade_recheck.yml").read_text())
    names = [task["name"] for task in recheck]
    readahead = names.index("Read the model into the page cache while the old server serves")
    assert readahead < names.index("Drain the node")
    assert recheck[readahead]["ansible.builtin.include_tasks"] == "model_readahead.yml"
    serve = plays("serve.yml")[0]
    names = [task["name"] for task in serve["pre_tasks"]]
    readahead = names.index("Read the model into the page cache while the server still serves")
    assert readahead < names.index("Drain the node")
    assert serve["pre_tasks"][readahead]["when"] == "__gpu_node_serve_drains | bool and __gpu_node_readahead | bool"
    assert "vars/readahead.yml" in serve["vars_files"]
    switching = [play for play in plays("upgrade.yml") if "vars/readahead.yml" in play.get("vars_files", [])]
    assert len(switching) == 1 and "upgrade_recheck.yml" in yaml.safe_dump(switching[0])
    tasks = yaml.safe_load((PLAYBOOKS / "tasks" / "model_readahead.yml").read_text())
    assert tasks[0]["failed_when"] is False and "blackwell.gpu_node.model_readahead" in tasks[0]


def _steps_noted(task_list):
    """The steps of the node's timeline that task_list notes, in order, each with its task."""
    found = []
    for task in task_list:
        noted = " ".join(str(task.get("ansible.builtin.set_fact", {}).get("gpu_node_upgrade", "")).split())
        step = re.search(r"upgrade_transition\('step', \{ ?'name': '(\w+)', 'at': now\(\)\.timestamp\(\)", noted)
        if step:
            found.append((step.group(1), task))
    return found


def test_each_step_of_a_nodes_outage_is_noted_in_its_timeline_where_it_happens_in_the_order_the_record_takes():
    _prepare, switch, _release, _report = upgrade_plays()
    names = [task["name"] for task in switch["tasks"]]
    recheck = switch["tasks"][names.index("Check the node again, drain it and verify the target's virtualenv just "
                                          "before the stop")]
    (switching,) = [task for task in switch["tasks"] if task["name"] == "Switch the node"]
    rollback = switching["rescue"][1]["block"]
    forward = _steps_noted(recheck["block"]) + _steps_noted(switching["block"])
    backward = _steps_noted(rollback)
    assert [name for name, _task in forward + backward] == list(STEP_NAMES)

    def around(task_list, step, offset):
        """The task offset places from the one that notes step."""
        notes = [task for name, task in _steps_noted(task_list) if name == step]
        return task_list[[id(task) for task in task_list].index(id(notes[0])) + offset]

    # Each note beside what it times, and under the same condition.
    for task_list, step, offset, neighbour in (
            (recheck["block"], "readahead", -1, "Read the model into the page cache while the old server serves"),
            (recheck["block"], "drain", 1, "Drain the node"),
            (switching["block"], "stop", 1, "Stop the server"),
            (switching["block"], "start", 1, "Start the server on the new stack and wait for the ready line and /health"),
            (switching["block"], "ready", -1, "Start the server on the new stack and wait for the ready line and /health"),
            (switching["block"], "generate", -1, "Ask the new server for one generation"),
            (switching["block"], "undrain", -1, "Undrain the node"),
            (rollback, "rollback_drain", 1, "Drain the node again"),
            (rollback, "rollback_start", 1, "Start the old server and wait for the ready line and /health"),
            (rollback, "rollback_ready", -1, "Start the old server and wait for the ready line and /health"),
            (rollback, "rollback_generate", -1, "Ask the old server for one generation"),
            (rollback, "rollback_undrain", -1, "Undrain the node")):
        beside = around(task_list, step, offset)
        assert beside["name"] == neighbour, step
        noted = [task for name, task in _steps_noted(task_list) if name == step][0]
        assert noted.get("when") == beside.get("when"), step
    ready = [task for name, task in forward if name == "ready"][0]["ansible.builtin.set_fact"]["gpu_node_upgrade"]
    assert "'capacity': sglang_server_ready.capacity | default(none)" in ready
    readahead = [task for name, task in forward if name == "readahead"][0]["ansible.builtin.set_fact"]
    assert "'readahead': __gpu_node_readahead_result" in readahead["gpu_node_upgrade"]
    # A start that failed its readiness gate on the GPU memory it got (sglang_server_degraded_start: fail) keeps it.
    failed = switching["rescue"][0]["ansible.builtin.set_fact"]["gpu_node_upgrade"]
    assert "'capacity': ansible_failed_result.capacity | default(none)" in failed


def test_the_report_prints_each_nodes_outage_after_the_table():
    (printed,) = [task for task in tasks("upgrade_report.yml") if task["name"].startswith("Print the table")]
    assert printed["ansible.builtin.debug"]["msg"] == (
        "{{ __gpu_node_upgrade_report.table + __gpu_node_upgrade_report.outages }}")


def test_an_upgraded_node_gets_the_dcgm_of_its_cuda_as_site_would_give_it_and_only_once_it_passed_every_gate():
    """Site installs DCGM for the stack's CUDA major (monitoring_dcgm_package): after an upgrade to another major,
    the first site was no no-op while the upgrade left that to it."""
    site, _gateway, _service_discovery = plays("site.yml")
    (in_site,) = [role for role in site["roles"] if role["role"] == "blackwell.gpu_node.monitoring"]
    gate = tasks("upgrade_gate.yml")
    names = [task["name"] for task in gate]
    (monitoring,) = [task for task in gate if task.get("ansible.builtin.include_role", {}).get(
        "name") == "blackwell.gpu_node.monitoring"]
    assert monitoring["when"] == in_site["when"] and "vars" not in monitoring and "vars" not in in_site
    assert "tasks_from" not in monitoring["ansible.builtin.include_role"]
    # After the last gate, while the switch record still stands: a failure rolls the node back.
    assert names.index(monitoring["name"]) > names.index("Keep on the node that the fleet serves no slower through "
                                                         "the gateway")
    assert names.index(monitoring["name"]) == names.index("End the record of the switch") - 1
    # Never in prepare, whose rollback would not take DCGM back.
    assert "blackwell.gpu_node.monitoring" not in (PLAYBOOKS / "tasks" / "upgrade_prepare.yml").read_text()
