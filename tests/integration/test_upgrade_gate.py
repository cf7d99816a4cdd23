"""The upgrade's last gate step (playbooks/tasks/upgrade_generate.yml), run for real against launches of the sglang
stand-in: a server serves when a generate brings back text, as sglang_diagnosis decides for validate and diagnose;
prepare's probe only notes the answer."""
import json
import os
import subprocess
import sys

import pytest

from conftest import CHECKOUT, COLLECTIONS, STANDIN, free_port, run_module
from process_tree import run_bounded

PLAY = """
- hosts: localhost
  gather_facts: false
  vars:
    __gpu_node_upgrade_generate: {generate}
    __gpu_node_upgrade_generate_timeout: 3
  tasks:
    - name: The gate
      ansible.builtin.include_tasks: {tasks}
      vars:
        __gpu_node_upgrade_probe: {probe}

    - name: Say whether it serves
      ansible.builtin.debug:
        msg: "{{{{ __gpu_node_upgrade_serves }}}}"
"""


@pytest.fixture
def server(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    params = dict(python=sys.executable, model_path=str(model), port=free_port(), log_path=str(tmp_path / "server.log"),
                  state_dir=str(tmp_path / "state"), stop_timeout=5, gpu_release_timeout=1, manager="module",
                  api_key="k-gate-91c3")
    yield params
    run_module("sglang_server", state="stopped", state_dir=params["state_dir"], stop_timeout=5)


def launch(server, **env):
    params = dict(server, env=dict({"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01"}, **env))
    started = run_module("sglang_server", **params)
    waited = run_module("wait_for_server", log_path=server["log_path"], offset=started["offset"], pid=started["pid"],
                        timeout=60, health_url="http://127.0.0.1:%d/health" % server["port"])
    assert waited["ready"] is True, waited.get("msg")


def gate(server, tmp_path, generate=True, probe=False):
    """(exit code, the gate's failure message or None, whether it noted the server serves, ansible's output)."""
    playbook = tmp_path / "gate.yml"
    playbook.write_text(PLAY.format(generate=str(generate).lower(), probe=str(probe).lower(),
                                    tasks=CHECKOUT / "playbooks" / "tasks" / "upgrade_generate.yml"))
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_STDOUT_CALLBACK="json")
    argv = [str(CHECKOUT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", "sglang_server_state_dir=" + server["state_dir"],
            "-e", "sglang_server_port=%d" % server["port"], "-e", "sglang_server_api_key=" + server["api_key"],
            str(playbook)]
    try:
        completed = run_bounded(argv, timeout=120, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("the gate did not end within 120 s; its processes were killed")
    results = dict((task["task"]["name"], task["hosts"].get("localhost", {}))
                   for play in json.loads(completed.stdout)["plays"] for task in play["tasks"])
    failed = results.get("Ensure the server generated text", {})
    serves = results.get("Say whether it serves", {}).get("msg")
    return completed.returncode, failed.get("msg") if failed.get("failed") else None, serves, completed.stdout


def test_the_gate_passes_a_server_that_brings_back_text(server, tmp_path):
    launch(server)
    returncode, failure, serves, output = gate(server, tmp_path)
    assert (returncode, failure, serves) == (0, None, True), output
    assert server["api_key"] not in output


def test_the_gate_fails_a_server_whose_scheduler_died_naming_the_generate_and_the_logs_cause(server, tmp_path):
    launch(server, SGLANG_STANDIN_GENERATE="scheduler-dies")
    returncode, failure, serves, output = gate(server, tmp_path)
    assert returncode != 0 and failure is not None, output
    assert failure.startswith("The server on localhost does not serve: running but not serving (pid ")
    assert "/health answered 200 in 0.0 s, but POST /generate gave no answer within " in failure
    assert "; the latest launch failed: torch.AcceleratorError: CUDA error: device-side assert triggered" in failure
    assert server["api_key"] not in output


def test_prepares_probe_only_notes_it_and_health_alone_without_generate(server, tmp_path):
    launch(server, SGLANG_STANDIN_GENERATE="error")
    returncode, failure, serves, _output = gate(server, tmp_path, probe=True)
    assert (returncode, failure, serves) == (0, None, False)
    # gpu_node_upgrade_generate: false asks /health alone, which a failing generate does not spoil.
    returncode, failure, serves, _output = gate(server, tmp_path, generate=False, probe=True)
    assert (returncode, failure, serves) == (0, None, True)


def test_prepares_probe_of_a_node_without_a_server_notes_that_it_does_not_serve(server, tmp_path):
    returncode, failure, serves, _output = gate(server, tmp_path, probe=True)
    assert (returncode, failure, serves) == (0, None, False)
