"""runtime_env on a converged virtualenv: one call that writes nothing; a change in any one of its inputs, or on the
host, makes that call write exactly what differs; an input of another role changes nothing."""
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_bounded

from conftest import COLLECTIONS

PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.gpu_node.runtime_env
      vars:
        runtime_env_venv_path: {venv}
        runtime_env_cuda_home: /usr/local/cuda-13.0
        runtime_env_nccl_profile: pcie_blackwell
        runtime_env_cache_root: {caches}
        runtime_env_cache_owner: {owner}
"""
RENDER = "Render the environment into the virtualenv and prove it takes effect"


@pytest.fixture(name="run_role")
def fixture_run_role(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(venv=venv, caches=tmp_path / "caches", owner=pwd.getpwuid(os.getuid()).pw_name))
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_STDOUT_CALLBACK="json",
                   ANSIBLE_LOAD_CALLBACK_PLUGINS="1")

    def run_role(**settings):
        """The role's tasks that ran (name -> result), with these extra vars."""
        completed = run_bounded(
            [str(Path(sys.executable).with_name("ansible-playbook")), "-c", "local", "-i", "localhost,", "-e",
             "ansible_python_interpreter=" + sys.executable, "-e", json.dumps(settings), str(playbook)],
            timeout=300, env=environ)
        assert completed.returncode == 0, completed.stdout[-4000:]
        report = json.loads(completed.stdout)
        return dict((task["task"]["name"].split(" : ")[-1], task["hosts"]["localhost"])
                    for task in report["plays"][0]["tasks"]
                    if not task["hosts"]["localhost"].get("skipped"))

    run_role.venv = venv
    return run_role


def written(tasks):
    return sorted(path.rsplit("/", 1)[-1] for path in tasks[RENDER]["written"])


def converged(tasks):
    assert tasks[RENDER]["reasons"] == []
    said = tasks["Say that the environment takes effect"]["msg"]
    assert " variables take effect in " in said and said.endswith("/_blackwell_gpu_node_env.py."), said
    return tasks[RENDER]["converged"] and not tasks[RENDER]["changed"] and written(tasks) == []


def acted(tasks):
    return not tasks[RENDER]["converged"] and tasks[RENDER]["changed"] and written(tasks) != []


# One input of the role at a time, each differing from the run before it.
CHANGES = [
    {"runtime_env_cuda_home": "/usr/local/cuda-13.1"},
    {"runtime_env_triton_ptxas_path": "/opt/ptxas"},
    {"runtime_env_nccl_profile": "none"},
    {"runtime_env_nccl_overrides": {"NCCL_PROTO": "Simple"}},
    {"runtime_env_sglang_disable_cudnn_check": False},
    {"runtime_env_flashinfer_disable_version_check": False},
    {"runtime_env_hf_home": "/srv/hf"},
    {"stack_profile": "cu128"},
    {"runtime_env_extra_env": {"HF_HUB_OFFLINE": "1"}},
    {"runtime_env_extra_env": {"HF_HUB_OFFLINE": "1"}, "runtime_env_force": ["HF_HUB_OFFLINE"]},
]


def test_each_input_of_the_role_makes_it_act_and_nothing_else_does(run_role):
    assert acted(run_role())
    assert converged(run_role())
    # Another role's input, and the play's own, leave it converged.
    assert converged(run_role(sglang_server_port=31000, ml_stack_keep=1))
    for change in CHANGES:
        assert acted(run_role(**change)), change
    assert converged(run_role(**CHANGES[-1]))


def test_each_file_the_role_keeps_changed_alone_is_rewritten_alone(run_role):
    # The list is the module's own (managed), made from the files the role declares: a file the role starts to keep
    # is changed here too, with no change to this test.
    tasks = run_role()
    declared = [Path(path) for path in tasks[RENDER]["managed"]]
    assert sorted(path.name for path in declared) == sorted(tasks[RENDER]["invocation"]["module_args"]["files"])
    for path in declared:
        path.write_text(path.read_text() + "# edited by hand\n")
        assert written(run_role()) == [path.name]
        path.chmod(0o664)
        assert written(run_role()) == [path.name]
        path.unlink()
        assert written(run_role()) == [path.name]
    assert converged(run_role())
