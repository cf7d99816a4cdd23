"""The preflight role on this machine: one call observes and decides (beside the fact that publishes the node's
place and the line that says what was checked), with the messages the separate observe and decide tasks gave;
each input changed alone is seen, and the facts the later roles read (distribution, Python, GPUs) are set."""
import json
import os
import socket
import sys
from pathlib import Path

import pytest
import yaml
from process_tree import run_bounded

from conftest import COLLECTIONS

CHECK = "Know the host, its GPUs and what holds the server's port; refuse it naming every problem"
REPORT = "Report what was checked"
PUBLISH = "Publish this node's place in a multi-node server"
SETTINGS = dict(preflight_gpus_required=False, preflight_venv_min_free_gib=1, preflight_venv_python=sys.executable,
                preflight_server_state_dir="/nonexistent/preflight-state")


@pytest.fixture(name="run_role")
def fixture_run_role(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([
        {"hosts": "localhost", "gather_facts": False, "roles": ["blackwell.gpu_node.preflight"],
         "tasks": [{"name": "Show the facts the later roles read",
                    "ansible.builtin.debug": {"msg": {"distribution": "{{ ansible_facts.distribution }}",
                                                      "python": "{{ ansible_facts.python.executable }}",
                                                      "gpu": "{{ ansible_facts.gpu.state }}"}}}]}]))

    def run_role(check_mode=False, **changes):
        """(tasks that ran, name -> result; whether the play failed), with these extra vars."""
        # Read at each run: a test may put a stand-in on PATH first.
        environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_STDOUT_CALLBACK="json",
                       ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
        extra = dict(SETTINGS, preflight_model_path=str(tmp_path / "model"), preflight_venv_path=str(tmp_path / "env"),
                     preflight_port=free_port())
        extra.update(changes)
        completed = run_bounded(
            [str(Path(sys.executable).with_name("ansible-playbook")), "-c", "local", "-i", "localhost,", "-e",
             "ansible_python_interpreter=" + sys.executable, "-e", json.dumps(extra), str(playbook)]
            + (["--check"] if check_mode else []),
            timeout=300, env=environ)
        report = json.loads(completed.stdout)
        tasks = dict((task["task"]["name"].split(" : ")[-1], task["hosts"]["localhost"])
                     for task in report["plays"][0]["tasks"] if not task["hosts"]["localhost"].get("skipped"))
        return tasks, completed.returncode != 0

    run_role.tmp_path = tmp_path
    return run_role


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("check_mode", [False, True])
def test_an_accepted_host_costs_three_tasks_and_says_what_was_checked(run_role, check_mode):
    tasks, failed = run_role(check_mode=check_mode)
    assert not failed, tasks
    # Besides the argument specs of preflight and stack: stack's checks of the core and the profile first, the facts
    # shown last.
    ran = [name for name in tasks if not name.startswith("Validating arguments against arg spec")]
    assert ran == ["Refuse an ansible-core older than the collection supports",
                   "Ensure the chosen stack profile is known and complete",
                   "Remember that the chosen stack profile has no lock",
                   PUBLISH, CHECK, REPORT, "Show the facts the later roles read"]
    assert not any(task.get("changed") for task in tasks.values())
    said = tasks[REPORT]["msg"]
    model = str(run_role.tmp_path / "model")
    assert said[0] == "GPUs not required (preflight_gpus_required: false)"
    assert "model %s has config.json" % model in said
    assert any(line.startswith("%s (Python " % sys.executable) and line.endswith("can create virtualenvs")
               for line in said), said
    assert any(line.endswith(" is free") and line.startswith("port 127.0.0.1:") for line in said), said
    assert any(line.endswith("for a new virtualenv") for line in said), said
    shown = tasks["Show the facts the later roles read"]["msg"]
    assert shown["python"] and shown["distribution"] and shown["gpu"] in ("no_nvidia_smi", "ok", "no_driver")


# One input at a time, and the refusal the separate observe and decide tasks gave for it.
REFUSALS = [
    ({"preflight_model_path": "/nonexistent/model"}, "preflight_model_path=/nonexistent/model does not exist on this host"),
    ({"preflight_venv_min_free_gib": 1000000}, "less than preflight_venv_min_free_gib=1000000"),
    ({"preflight_venv_python": "/usr/bin/python3.99"},
     "preflight_venv_python=/usr/bin/python3.99 (ml_stack_python) cannot run on this host"),
    ({"service_user_name": "nobody-here", "service_user_create": False},
     "service_user_name=nobody-here (preflight_service_user_name) is not a user on this host"),
    ({"preflight_gpus_required": True}, "GPUs are required (preflight_gpus_required: true) but gpu_facts says"),
    ({"preflight_tensor_parallel_size": 0}, "preflight_tensor_parallel_size"),
]


@pytest.mark.parametrize("changes, expected", REFUSALS)
def test_each_input_alone_refuses_the_host_with_its_message(run_role, changes, expected):
    if changes.get("preflight_gpus_required") and Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    tasks, failed = run_role(**changes)
    assert failed and REPORT not in tasks
    message = tasks[CHECK]["msg"]
    assert message.startswith("Preflight refused localhost; nothing was changed on it. 1 problem(s): (1) "), message
    assert expected in message, message


def test_a_port_held_by_another_process_refuses_the_host(run_role):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        tasks, failed = run_role(preflight_port=port)
    assert failed
    assert "preflight_port 127.0.0.1:%d is in use by another process" % port in tasks[CHECK]["msg"]


def test_a_server_name_that_would_name_files_elsewhere_is_refused_before_anything_is_read(run_role):
    tasks, failed = run_role(preflight_server_name="../elsewhere")
    assert failed
    assert tasks[CHECK]["msg"].startswith("Nothing was changed: name='../elsewhere' must be 1 to 64 letters"), tasks[CHECK]


FAKE_NVIDIA_SMI = Path(__file__).resolve().parents[1] / "fixtures" / "fake_nvidia_smi"


@pytest.fixture(name="replayed")
def fixture_replayed(monkeypatch):
    """nvidia-smi on PATH replays the recorded 2x H200 host, FAKE_NVIDIA_SMI picking how its nvidia-smi -q reads."""
    monkeypatch.setenv("PATH", "%s:%s" % (FAKE_NVIDIA_SMI, os.environ["PATH"]))

    def replayed(mode):
        monkeypatch.setenv("FAKE_NVIDIA_SMI", mode)
    return replayed


def test_an_unhealthy_gpu_refuses_the_host_naming_the_gpu_the_finding_its_evidence_and_the_action(run_role, replayed):
    replayed("h200_row_remap_failure")
    tasks, failed = run_role(preflight_gpus_required=True)
    assert failed and REPORT not in tasks
    assert tasks[CHECK]["msg"] == (
        "Preflight refused localhost; nothing was changed on it. 1 problem(s): (1) GPU 1 (00000000:00:07.0) is "
        "unhealthy: row_remap_failure, Row remapping failed: a bank has no spare row left (NVIDIA's RMA criterion). "
        "Evidence: Remapped Rows > Remapping Failure Occurred: Yes. Action drain_and_open_case: Drain the node and "
        "open a case with NVIDIA or the system's vendor (RMA). Run again once it is done; to let the node serve with "
        "it anyway, set preflight_gpu_health_severity_overrides: {row_remap_failure: degraded}. ")
    assert tasks[CHECK]["gpu_health"]["verdict"] == "unhealthy"


def test_a_finding_the_inventory_counts_as_degraded_is_a_warning(run_role, replayed):
    replayed("h200_row_remap_failure")
    tasks, failed = run_role(preflight_gpus_required=True,
                             preflight_gpu_health_severity_overrides={"row_remap_failure": "degraded"})
    assert not failed, tasks[CHECK].get("msg")
    warning = ("GPU 1 (00000000:00:07.0) is degraded: row_remap_failure, Row remapping failed: a bank has no spare row "
               "left (NVIDIA's RMA criterion). Evidence: Remapped Rows > Remapping Failure Occurred: Yes. Action "
               "drain_and_open_case: Drain the node and open a case with NVIDIA or the system's vendor (RMA).")
    assert tasks[CHECK]["warnings"] == [warning]
    assert warning in tasks[REPORT]["msg"]


def test_healthy_gpus_are_said_to_be_checked_and_cost_no_further_task(run_role, replayed):
    replayed("h200_health")
    tasks, failed = run_role(preflight_gpus_required=True)
    assert not failed, tasks[CHECK].get("msg")
    assert "GPU health: 2 GPU(s), no unhealthy or degraded finding" in tasks[REPORT]["msg"]
    assert not tasks[CHECK].get("warnings")
    assert [name for name in tasks if not name.startswith("Validating arguments")][-3:] == [
        CHECK, REPORT, "Show the facts the later roles read"]


def test_an_override_of_no_known_finding_refuses_the_host_naming_the_setting(run_role, replayed):
    replayed("h200_health")
    tasks, failed = run_role(preflight_gpus_required=True, preflight_gpu_health_severity_overrides={"pcie": "info"})
    assert failed
    assert "(1) preflight_gpu_health_severity_overrides: 'pcie' is no finding id; known ids: " in tasks[CHECK]["msg"]
