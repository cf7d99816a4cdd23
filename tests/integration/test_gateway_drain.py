"""The drain and undrain built in (the gateway role's drain and undrain, through playbooks/tasks/node_drain.yml and
node_undrain.yml), its check, and the benchmark through the gateway, run by Ansible on this machine against the
real SGLang model gateway (sglang-router 0.3.2, as test_gateway_workers_module starts it) in front of two `sglang`
stand-ins with metrics: node-slow answers each /generate after SLOW_S seconds, node-fast at once. Each test leaves
both nodes in rotation."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import CHECKOUT, COLLECTIONS, STANDIN, free_port
from process_tree import run_bounded
from test_gateway_workers_module import ADMIN_KEY, Fleet, call, gateway_venv, wait_until
from test_health_playbooks import FAKE_NVIDIA_SMI

# Long enough that the drain, however slowly Ansible starts, finds the request still running.
SLOW_S = 10.0
PLAY = """
- hosts: {host}
  gather_facts: false
  vars_files:
    - {checkout}/playbooks/vars/gateway.yml
  tasks:
    - name: Run it
      ansible.builtin.include_tasks: {checkout}/playbooks/tasks/{tasks}.yml
"""


CHECK = """
- hosts: {host}
  gather_facts: false
  vars_files:
    - {checkout}/playbooks/vars/gateway.yml
  tasks:
    - name: Check
      ansible.builtin.include_role:
        name: blackwell.gpu_node.gateway
        tasks_from: check
      vars:
        gateway_inventory_host: "{{{{ __gpu_node_gateway_host }}}}"
        gateway_admin_key: "{{{{ __gpu_node_gateway_admin_key }}}}"
      when: __gpu_node_gateway_builtin | bool
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    venv = gateway_venv()
    running = Fleet(tmp_path_factory.mktemp("gateway-drain"))
    try:
        for name, environment in (("node-slow", {"SGLANG_STANDIN_GENERATE_S": str(SLOW_S)}), ("node-fast", {})):
            port = free_port()
            running.spawn([sys.executable, "-m", "sglang.launch_server", "--model-path", "tiny", "--port", str(port),
                           "--enable-metrics"], name + ".log", PYTHONPATH=str(STANDIN), SGLANG_STANDIN_STEP="0.01",
                          **environment)
            running.workers.append({"name": name, "url": "http://127.0.0.1:%d" % port, "port": port})
        running.gateway(venv, running.workers)
        wait_until(lambda: listed(running) == {"node-slow": True, "node-fast": True}, timeout=60)
        yield running
    finally:
        running.stop()


def listed(fleet):
    """{node name: healthy} of the workers the gateway lists."""
    try:
        status, answer = call(fleet.url + "/workers", key=ADMIN_KEY)
    except OSError:
        return {}
    names = dict((worker["url"], worker["name"]) for worker in fleet.workers)
    return dict((names[worker["url"]], worker["is_healthy"]) for worker in answer["workers"]) if status == 200 else {}


def inventory(fleet, tmp_path, **settings):
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gpu_node_become": False,
            "sglang_server_enable_metrics": True}
    nodes = dict((worker["name"], dict(node, sglang_server_port=worker["port"], gateway_worker_url=worker["url"],
                                       ml_stack_venv_path=str(tmp_path / "ml-env"),
                                       sglang_server_state_dir=str(tmp_path / "state"), **settings))
                 for worker in fleet.workers)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {
        "gpu_nodes": {"hosts": nodes},
        "gateway": {"hosts": {"gw": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                     "gpu_node_become": False, "gateway_admin_key": ADMIN_KEY,
                                     "gateway_port": fleet.port, "gateway_config_dir": str(fleet.root)}}}}}}))
    return path


def playbook(argv, inventory_path, **environment):
    """(exit status, {task name: result of its first host}, output) of ansible-playbook with the json callback;
    environment: more of its environment."""
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_VERBOSE_TO_STDERR="1", **environment)
    try:
        completed = run_bounded([str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory_path)]
                                + argv, timeout=240, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("ansible-playbook did not end within 240 s; its processes were killed")
    results = {}
    for play in json.loads(completed.stdout)["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                results.setdefault(task["task"]["name"].split(" : ")[-1], result)
    return completed.returncode, results, completed.stdout + completed.stderr


def hook(fleet, tmp_path, tasks, host="node-slow", **settings):
    path = tmp_path / (tasks + ".play.yml")
    path.write_text(PLAY.format(host=host, checkout=CHECKOUT, tasks=tasks))
    return playbook(["-e", json.dumps(settings), str(path)] if settings else [str(path)],
                    inventory(fleet, tmp_path))


def generate(fleet, answers):
    started = time.monotonic()
    status, answer = call(fleet.url + "/generate", {"text": "hi"})
    answers.append((status, answer["meta_info"]["standin_port"] if status == 200 else None,
                    time.monotonic() - started))


def slow_request_running(fleet):
    """Threads whose requests run: round robin sends one of two to node-slow."""
    answers = []
    askers = [threading.Thread(target=generate, args=(fleet, answers)) for _asker in range(2)]
    for asker in askers:
        asker.start()
    time.sleep(0.5)
    return askers, answers


def test_the_drain_takes_the_node_out_then_waits_for_its_request_in_flight_and_the_undrain_puts_it_back(
        fleet, tmp_path):
    askers, answers = slow_request_running(fleet)
    started = time.monotonic()
    returncode, results, output = hook(fleet, tmp_path, "node_drain")
    drained_after = time.monotonic() - started
    for asker in askers:
        asker.join(30)
    assert returncode == 0, output
    assert results["Take the node out of the model gateway's rotation"]["changes"] == [
        "remove %s (node-slow)" % fleet.workers[0]["url"],
        "write %s (2 workers, out: %s)" % (fleet.workers_file, fleet.workers[0]["url"])]
    # The request on node-slow ended (200) before the drain did: it waited for it.
    assert sorted(status for status, _port, _seconds in answers) == [200, 200]
    assert drained_after >= SLOW_S - 1.0, drained_after
    assert results["Wait until the node's server has no request in flight, for gateway_drain_timeout at most"]["attempts"] > 1
    assert results["Say that the drain's deadline passed"].get("skipped") is True
    assert listed(fleet) == {"node-fast": True}
    # The gateway's workers file, where its role keeps it, holds the node out: a restart would not add it again.
    assert json.loads(fleet.workers_file.read_text())["out"] == [fleet.workers[0]["url"]]
    later = []
    for _request in range(4):
        generate(fleet, later)
    assert [port for _status, port, _seconds in later] == [fleet.workers[1]["port"]] * 4

    returncode, results, output = hook(fleet, tmp_path, "node_undrain")
    assert returncode == 0, output
    assert results["Put the node back into the model gateway's rotation and wait until the gateway finds it "
                   "healthy"]["changes"][0] == "add %s (node-slow)" % fleet.workers[0]["url"]
    assert listed(fleet) == {"node-slow": True, "node-fast": True}
    assert json.loads(fleet.workers_file.read_text())["out"] == []


def test_past_its_deadline_the_drain_says_so_and_goes_on(fleet, tmp_path):
    askers, answers = slow_request_running(fleet)
    returncode, results, output = hook(fleet, tmp_path, "node_drain", gpu_node_gateway_drain_timeout=1)
    assert returncode == 0, output
    assert "node-slow: requests were still in flight after gateway_drain_timeout=1 s" in results[
        "Say that the drain's deadline passed"]["msg"]
    for asker in askers:
        asker.join(30)
    assert sorted(status for status, _port, _seconds in answers) == [200, 200]
    assert hook(fleet, tmp_path, "node_undrain")[0] == 0
    assert listed(fleet) == {"node-slow": True, "node-fast": True}


def test_a_node_the_gateway_does_not_route_to_is_left_alone(fleet, tmp_path):
    path = tmp_path / "play.yml"
    path.write_text(PLAY.format(host="gw", checkout=CHECKOUT, tasks="node_drain"))
    returncode, results, output = playbook([str(path)], inventory(fleet, tmp_path))
    assert returncode == 0, output
    assert results["Take the node out of the model gateway's rotation"].get("skipped") is True
    assert listed(fleet) == {"node-slow": True, "node-fast": True}


def test_the_check_before_anything_changes_names_the_missing_admin_key(fleet, tmp_path):
    path = tmp_path / "play.yml"
    path.write_text(CHECK.format(host="gpu_nodes", checkout=CHECKOUT))
    returncode, results, output = playbook([str(path), "-e", "gateway_admin_key=''"], inventory(fleet, tmp_path))
    assert returncode != 0
    assert ("The drain built in takes each node out of the model gateway on gw through its admin API, but "
            "gateway_admin_key is not set for that host") in results[
        "Ensure the model gateway's host and admin key are known, for the drain built in"]["msg"]
    path.write_text(CHECK.format(host="gpu_nodes", checkout=CHECKOUT))
    returncode, results, output = playbook([str(path), "-e", "gpu_node_upgrade_drain_tasks=/hooks/drain.yml",
                                            "-e", "gateway_admin_key=''"], inventory(fleet, tmp_path))
    assert returncode == 0, output


def test_the_health_playbook_drains_an_unhealthy_node_through_the_gateway_without_a_hook(fleet, tmp_path):
    report = tmp_path / "health.json"
    settings = {"gpu_node_health_drain": True, "gpu_node_hosts": "node-slow", "gpu_node_health_report": str(report)}
    returncode, _results, output = playbook(
        ["-e", json.dumps(settings), str(CHECKOUT / "playbooks" / "health.yml")], inventory(fleet, tmp_path),
        FAKE_NVIDIA_SMI="h200_row_remap_failure", PATH=str(FAKE_NVIDIA_SMI) + ":" + os.environ["PATH"])
    assert returncode == 0, output
    assert json.loads(report.read_text())["node-slow"]["drain"] == "drained"
    assert listed(fleet) == {"node-fast": True}
    assert hook(fleet, tmp_path, "node_undrain")[0] == 0
    assert listed(fleet) == {"node-slow": True, "node-fast": True}


def test_the_benchmark_measures_through_the_gateway_beside_each_node(fleet, tmp_path):
    venv = tmp_path / "ml-env"
    venv.mkdir()
    (venv / "ml-stack.json").write_text(json.dumps({"profile": "cu130"}))
    results_dir = tmp_path / "results"
    settings = ["-e", json.dumps({"gpu_node_benchmark_through_gateway": True, "gpu_node_benchmark_prompts": 4,
                                  "gpu_node_benchmark_output_tokens": 20, "gpu_node_benchmark_concurrency": 2,
                                  "gpu_node_benchmark_dir": str(results_dir)})]
    returncode, results, output = playbook(settings + ["blackwell.gpu_node.benchmark"], inventory(fleet, tmp_path))
    assert returncode == 0, output
    table = results["Print the table"]["msg"]
    assert sorted(line.split()[0] for line in table[1:3]) == ["node-fast", "node-slow"]
    assert table[3].startswith("through gw  decode-heavy  fleet"), table
    (kept,) = (results_dir / "gateway-gw").glob("*-decode-heavy.json")
    result = json.loads(kept.read_text())
    assert (result["through"], result["url"], result["metrics"]["failed"]) == ("gateway", fleet.url, 0)
    assert result["metrics"]["completed"] == 4


HOOKS = """
- hosts: gpu_nodes
  gather_facts: false
  vars_files:
    - {checkout}/playbooks/vars/gateway.yml
  tasks:
    - name: Say the hooks
      ansible.builtin.debug:
        msg: "{{{{ [__gpu_node_has_drain | bool, __gpu_node_has_undrain | bool] }}}}"
"""


@pytest.mark.parametrize("gateway, settings, hooks", [
    (True, {}, [True, True]),
    (False, {}, [False, False]),
    (True, {"gpu_node_upgrade_drain_tasks": "/hooks/drain.yml"}, [True, False]),
    (True, {"gpu_node_upgrade_undrain_tasks": "/hooks/undrain.yml"}, [False, True]),
])
def test_the_drain_built_in_is_the_default_with_a_gateway_and_the_users_hooks_win(tmp_path, gateway, settings, hooks):
    path = tmp_path / "hooks.yml"
    path.write_text(HOOKS.format(checkout=CHECKOUT))
    groups = {"gpu_nodes": {"hosts": {"gpu-a": {"ansible_connection": "local"}}}}
    if gateway:
        groups["gateway"] = {"hosts": {"gw": {"ansible_connection": "local"}}}
    inventory_path = tmp_path / "inventory.yml"
    inventory_path.write_text(yaml.safe_dump({"all": {"children": groups}}))
    returncode, results, output = playbook(["-e", json.dumps(settings), str(path)], inventory_path)
    assert returncode == 0, output
    assert results["Say the hooks"]["msg"] == hooks
