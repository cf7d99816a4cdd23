"""runtime_env_nccl_profile=auto through the role: gpu_facts asked, the choice printed and rendered."""
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_bounded

from conftest import CHECKOUT, COLLECTIONS

FAKE = CHECKOUT / "tests" / "fixtures" / "fake_nvidia_smi"
PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.gpu_node.runtime_env
      vars:
        runtime_env_venv_path: {venv}
        runtime_env_cuda_home: /usr/local/cuda-13.0
        runtime_env_cache_root: {caches}
        runtime_env_cache_owner: {owner}
"""


def converge(tmp_path, fake_mode):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(venv=venv, caches=tmp_path / "caches", owner=pwd.getpwuid(os.getuid()).pw_name))
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_STDOUT_CALLBACK="json",
                   ANSIBLE_LOAD_CALLBACK_PLUGINS="1", FAKE_NVIDIA_SMI=fake_mode,
                   PATH="%s:%s" % (FAKE, os.environ["PATH"]))
    completed = run_bounded(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-c", "local", "-i", "localhost,", "-e",
         "ansible_python_interpreter=" + sys.executable, str(playbook)], timeout=300, env=environ)
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stdout[-4000:]
    # The json callback names a role's task "<role> : <name>".
    tasks = dict((task["task"]["name"].split(" : ")[-1], task["hosts"]["localhost"])
                 for task in report["plays"][0]["tasks"])
    seen = subprocess.run(
        ["env", "-i", str(venv / "bin" / "python"), "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
        capture_output=True, text=True, check=True)
    return tasks, json.loads(seen.stdout)


@pytest.mark.parametrize("fake_mode, said", [
    ("h200", "runtime_env_nccl_profile=auto: none (2 GPUs with NVLink between them (GPU0-GPU1 NV18): "
             "NCCL's defaults suit it)"),
    ("no_driver", "runtime_env_nccl_profile=auto: none (no GPU visible (gpu_facts state: no_driver): NCCL's "
                  "defaults; once the driver is up, the next run chooses again, or name a profile in "
                  "runtime_env_nccl_profile)"),
])
def test_auto_asks_the_hosts_gpus_and_says_what_it_chose(tmp_path, fake_mode, said):
    tasks, environ = converge(tmp_path, fake_mode)
    assert tasks["Say which NCCL profile the host's GPUs chose"]["msg"] == said
    assert environ["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert not [name for name in environ if name.startswith("NCCL_")]
