"""Each role, alone in a play, reads the shared settings of the inventory itself: no wiring file to copy.

The plays below list one role each and run none of its tasks (they are tagged out); the role's argument-spec
validation still runs (it is tagged always), and a task of the play prints what the role's defaults resolve to.
Nothing on this machine is changed.
"""
import json
import os
import sys
from pathlib import Path

import yaml
from process_tree import run_bounded

COLLECTIONS = Path(__file__).resolve().parents[2] / ".build" / "collections"
SHARED = dict(
    ml_stack_venv_path="/opt/team-env",
    ml_stack_python="/usr/bin/python3.12",
    preflight_gpus_required=False,
    sglang_server_model_path="/srv/models/team",
    sglang_server_tensor_parallel_size=4,
    sglang_server_host="0.0.0.0",
    sglang_server_port=38311,
    sglang_server_name="team",
    sglang_server_state_dir="/var/lib/team-state",
)
# What each role resolves, by the variable its own tasks read.
SHOWN = {
    "preflight": ["preflight_venv_path", "preflight_venv_python", "preflight_tensor_parallel_size",
                  "preflight_model_path", "preflight_host", "preflight_port", "preflight_server_name",
                  "preflight_server_state_dir", "preflight_nnodes", "preflight_node_rank", "preflight_dist_init_addr"],
    "ml_stack": ["ml_stack_gpus_required"],
    "runtime_env": ["runtime_env_venv_path"],
    "sglang_server": ["sglang_server_venv_path"],
}


def resolve_alone(tmp_path, hostvars, nodes_group=None):
    """{role: {variable: value}, or the message of its failure} for the host gpu02, each role alone in its play."""
    inventory = {"all": {"hosts": {name: dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                                              ansible_host="10.0.0.%d" % index, **hostvars)
                                   for index, name in enumerate(["gpu01", "gpu02"], 1)},
                         "children": {"team_nodes": {"hosts": {"gpu01": {}, "gpu02": {}}}}}}
    if nodes_group:
        inventory["all"]["vars"] = {"sglang_server_nodes_group": nodes_group}
    plays = [{"name": role, "hosts": "gpu02", "gather_facts": False,
              # A role that fails leaves the host to the next play.
              "roles": [{"role": "blackwell.gpu_node." + role, "tags": ["role_tasks"], "ignore_errors": True}],
              "tasks": [{"name": "show", "tags": ["show"],
                         "ansible.builtin.debug": {"msg": {name: "{{ %s }}" % name for name in names}}}]}
             for role, names in SHOWN.items()]
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    completed = run_bounded(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(tmp_path / "hosts.yml"),
         str(tmp_path / "play.yml"), "--tags", "show"],
        timeout=180, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                              ANSIBLE_STDOUT_CALLBACK="json"))
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        raise AssertionError("ansible-playbook printed no JSON:\n%s\n%s" % (completed.stdout, completed.stderr))
    resolved = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            result = task["hosts"]["gpu02"]
            if result.get("failed") or task["task"]["name"] == "show":
                resolved.setdefault(play["play"]["name"], result["msg"])
    return resolved


def test_every_role_alone_reads_the_shared_settings_of_the_inventory(tmp_path):
    assert resolve_alone(tmp_path, SHARED) == {
        "preflight": dict(preflight_venv_path="/opt/team-env", preflight_venv_python="/usr/bin/python3.12",
                          preflight_tensor_parallel_size=4, preflight_model_path="/srv/models/team",
                          preflight_host="0.0.0.0", preflight_port=38311, preflight_server_name="team",
                          preflight_server_state_dir="/var/lib/team-state", preflight_nnodes=1,
                          preflight_node_rank=0, preflight_dist_init_addr=None),
        "ml_stack": dict(ml_stack_gpus_required=False),
        "runtime_env": dict(runtime_env_venv_path="/opt/team-env"),
        "sglang_server": dict(sglang_server_venv_path="/opt/team-env"),
    }


def test_preflight_alone_checks_the_place_the_server_gives_the_node(tmp_path):
    preflight = resolve_alone(tmp_path, SHARED, nodes_group="team_nodes")["preflight"]
    assert (preflight["preflight_nnodes"], preflight["preflight_node_rank"], preflight["preflight_dist_init_addr"]) \
        == (2, 1, "10.0.0.1:5757")


def test_a_role_variable_set_in_inventory_still_wins(tmp_path):
    resolved = resolve_alone(tmp_path, dict(SHARED, preflight_port=38312, runtime_env_venv_path="/opt/other-env"))
    assert resolved["preflight"]["preflight_port"] == 38312
    assert resolved["runtime_env"]["runtime_env_venv_path"] == "/opt/other-env"


def test_runtime_env_without_any_virtualenv_names_both_variables(tmp_path):
    unset = {name: value for name, value in SHARED.items() if name != "ml_stack_venv_path"}
    message = resolve_alone(tmp_path, unset)["runtime_env"]
    assert isinstance(message, str)
    assert "Set runtime_env_venv_path, or ml_stack_venv_path, which it defaults to" in message
