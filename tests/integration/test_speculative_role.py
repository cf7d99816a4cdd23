"""The sglang_server role's preflight for speculative decoding, through ansible-playbook on this machine.

Preflight changes nothing on the host, so it runs here as it runs on a node (only its tasks, not the launch)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_bounded

COLLECTIONS = Path(__file__).resolve().parents[2] / ".build" / "collections"


def preflight(tmp_path, **role_vars):
    """(exit status, output) of the role's preflight tasks on localhost with these variables."""
    playbook = tmp_path / "preflight.yml"
    role = dict(name="blackwell.gpu_node.sglang_server", tasks_from="preflight.yml")
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [{"ansible.builtin.include_role": role}],
        "vars": dict(sglang_server_venv_path=str(Path(sys.executable).parents[1]), sglang_server_model_path="/m",
                     **role_vars),
    }]))
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    try:
        completed = run_bounded(
            [str(Path(sys.executable).with_name("ansible-playbook")), "-c", "local", "-i", "localhost,", "-e",
             "ansible_python_interpreter=" + sys.executable, str(playbook)], timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("the preflight did not return within 300 s; its processes were killed")
    return completed.returncode, completed.stdout + completed.stderr


def draft(tmp_path):
    path = tmp_path / "draft"
    path.mkdir()
    (path / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    return str(path)


def test_without_a_draft_preflight_passes(tmp_path):
    status, output = preflight(tmp_path)
    assert status == 0, output


def test_a_draft_with_its_config_and_good_settings_passes(tmp_path):
    status, output = preflight(tmp_path, sglang_server_speculative_draft_model_path=draft(tmp_path),
                               sglang_server_speculative_num_steps=3, sglang_server_speculative_eagle_topk=1,
                               sglang_server_speculative_num_draft_tokens=4)
    assert status == 0, output


def test_a_draft_without_config_json_is_refused_naming_the_variable(tmp_path):
    (tmp_path / "empty").mkdir()
    status, output = preflight(tmp_path, sglang_server_speculative_draft_model_path=str(tmp_path / "empty"))
    assert status != 0
    assert "sglang_server_speculative_draft_model_path=%s has no config.json" % (tmp_path / "empty") in output


@pytest.mark.parametrize("role_vars,named", [
    (dict(sglang_server_speculative_eagle_topk=4), "sglang_server_speculative_eagle_topk set without "
                                                   "sglang_server_speculative_num_steps"),
    (dict(sglang_server_speculative_num_steps=0), "sglang_server_speculative_num_steps=0 must be a positive"),
])
def test_settings_sglang_refuses_are_named(tmp_path, role_vars, named):
    status, output = preflight(tmp_path, sglang_server_speculative_draft_model_path=draft(tmp_path), **role_vars)
    assert status != 0 and named in output, output
