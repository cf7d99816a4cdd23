"""The diagnose playbook and validate's server check, run for real on this machine against launches of the
sglang stand-in (the other checks of validate find this machine no GPU node; only the server's line counts)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import CHECKOUT, COLLECTIONS, STANDIN, free_port, run_module
from process_tree import run_bounded


@pytest.fixture
def server(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    params = dict(python=sys.executable, model_path=str(model), port=free_port(), log_path=str(tmp_path / "server.log"),
                  state_dir=str(tmp_path / "state"), stop_timeout=5, gpu_release_timeout=1, manager="module")
    yield params
    run_module("sglang_server", state="stopped", state_dir=params["state_dir"], stop_timeout=5)


def launch(server, scenario, generation, **env):
    params = dict(server, env=dict({"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01",
                                    "SGLANG_STANDIN_SCENARIO": scenario, "GENERATION": str(generation)}, **env))
    started = run_module("sglang_server", **params)
    waited = run_module("wait_for_server", log_path=server["log_path"], offset=started["offset"], pid=started["pid"],
                        timeout=60)
    assert waited["ready"] is (scenario == "ready"), waited.get("msg")


def playbook(name, server, *options):
    """(exit code, the result of each task by name, for localhost)."""
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_STDOUT_CALLBACK="json")
    argv = [str(CHECKOUT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "gpu_node_hosts=localhost", "-e", "gpu_node_become=false",
            "-e", "ansible_python_interpreter=" + sys.executable, "-e", "sglang_server_state_dir=" + server["state_dir"],
            str(CHECKOUT / "playbooks" / name)] + list(options)
    try:
        completed = run_bounded(argv, timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s did not end within 300 s; its processes were killed" % name)
    results = dict((task["task"]["name"], task["hosts"].get("localhost", {}))
                   for play in json.loads(completed.stdout)["plays"] for task in play["tasks"])
    return completed.returncode, results


def test_validate_names_the_cause_of_a_dead_server(server):
    launch(server, "traceback", 1)
    returncode, results = playbook("validate.yml", server)
    assert returncode != 0
    (line,) = [problem for problem in results["Report the node"]["msg"]["problems"] if problem.startswith("server:")]
    assert "is not running (it died: pid" in line
    assert "the latest launch failed: RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN" in line
    assert "[cudnn_check] Fix: Set SGLANG_DISABLE_CUDNN_CHECK=1" in line


def server_problems(results):
    """validate's problems with the server's state and service (who it runs as is another check's)."""
    return [problem for problem in results["Report the node"]["msg"]["problems"]
            if problem.startswith("server: The server ")]


def test_validate_fails_a_server_that_answers_health_but_brings_back_no_token(server):
    launch(server, "ready", 1, SGLANG_STANDIN_GENERATE="scheduler-dies")
    returncode, results = playbook("validate.yml", server, "-e", "sglang_server_port=%d" % server["port"],
                                   "-e", "gpu_node_validate_generate_timeout=3")
    assert returncode != 0
    (line,) = server_problems(results)
    assert line.startswith("server: The server sglang on localhost is running but not serving (pid "), line
    assert "/health answered 200 in 0.0 s, but POST /generate gave no answer within " in line
    assert ("the latest launch failed: torch.AcceleratorError: CUDA error: device-side assert triggered "
            "[gpu_kernel_assert] Fix: ") in line
    assert "The generate may take gpu_node_validate_generate_timeout=3 s" in line
    assert results["Report the node"]["msg"]["serving"]["health"]["status"] == 200


def test_validate_passes_the_server_check_of_a_server_that_serves_and_can_ask_health_alone(server):
    launch(server, "ready", 1)
    _returncode, results = playbook("validate.yml", server, "-e", "sglang_server_port=%d" % server["port"])
    assert server_problems(results) == []
    assert results["Report the node"]["msg"]["serving"]["generate"]["text"] == " Paris."
    # Without a gateway its view is not asked: skipped, not failed and rescued.
    assert results["Read the gateway's view of this node"].get("skipped") is True, results[
        "Read the gateway's view of this node"]
    run_module("sglang_server", state="stopped", state_dir=server["state_dir"], stop_timeout=5)
    launch(server, "ready", 2, SGLANG_STANDIN_GENERATE="hang")
    _returncode, results = playbook("validate.yml", server, "-e", "sglang_server_port=%d" % server["port"],
                                    "-e", "gpu_node_validate_generate=false")
    assert server_problems(results) == []
    assert results["Report the node"]["msg"]["serving"]["generate"] is None


@pytest.mark.parametrize("check", [False, True])
def test_diagnose_names_the_crash_two_launches_ago_in_its_report_on_the_controller(server, tmp_path, check):
    launch(server, "traceback", 1)
    launch(server, "ready", 2)
    launch(server, "ready", 3)
    report_path = tmp_path / "report.json"
    returncode, results = playbook("diagnose.yml", server, "-e", "gpu_node_diagnose_launch=2", "-e",
                                   "gpu_node_diagnose_report=%s" % report_path, *(["--check"] if check else []))
    assert returncode == 0, results
    assert results["Read the gateway's workers"].get("skipped") is True, results["Read the gateway's workers"]
    # The nodes are only read; the report on the controller is written in check mode too.
    report = json.loads(report_path.read_text())
    diagnosis = report["localhost"]["diagnosis"]
    assert diagnosis["log"]["failure"]["diagnosis"]["id"] == "cudnn_check"
    assert diagnosis["state"]["running"] is True and diagnosis["launches"] == 3
    assert "gpu" in report["localhost"]
    verdicts = results["Say each node's verdict"]["msg"]
    assert verdicts[0].startswith("localhost: running and serving (pid %d); the launch 2 before the latest failed: "
                                  "RuntimeError"
                                  % diagnosis["state"]["pid"])
    assert verdicts[1] == "Full report: %s" % report_path


def test_validate_proves_the_runtime_environment_of_the_virtualenv_it_is_given(server):
    # validate computes the environment the inventory asks for before it inspects and starts the virtualenv: a
    # virtualenv that never had it rendered is named for the variable that does not take effect, not for a task
    # that could not run.
    launch(server, "ready", 1)
    returncode, results = playbook("validate.yml", server, "-e", "runtime_env_venv_path=%s" % (CHECKOUT / ".venv"),
                                   "-e", "runtime_env_nccl_profile=none")
    assert returncode != 0
    (line,) = [problem for problem in results["Report the node"]["msg"]["problems"]
               if problem.startswith("runtime_env:")]
    assert "SGLANG_DISABLE_CUDNN_CHECK" in line, line
