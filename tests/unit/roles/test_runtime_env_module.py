"""The Python module the runtime_env role renders, rendered here and run against a fake environ.

The rule "a value already in the environment wins, unless the name is forced" is the core's
apply_environment (tests/unit/plugins/module_utils/test_runtime_env.py); these tests check that the
module the role renders carries it and applies it at interpreter start-up. The template is rendered by
Jinja with Ansible's filters and the collection's own, under the FQCN the role calls it by (Ansible's
templar would need the collection loader, which the unit tests' plain sys.path import rules out).
"""
import os
import runpy
from pathlib import Path

import pytest
import jinja2
from ansible.plugins.filter.core import FilterModule as AnsibleFilters

from ansible_collections.blackwell.gpu_node.plugins.filter.runtime_environment import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import build_environment

TEMPLATE = Path(__file__).resolve().parents[3] / "roles" / "runtime_env" / "templates" / "_blackwell_gpu_node_env.py.j2"
SETTINGS = dict(cuda_home="/usr/local/cuda-13.0", triton_ptxas_path="/usr/local/cuda-13.0/bin/ptxas",
                nccl_profile="none", nccl_profiles={"none": {}}, extra_env={"HF_HUB_OFFLINE": 1})


CACHES = dict(cache_root="/var/lib/sglang/.cache/blackwell-gpu-node", hf_home="/var/lib/sglang/.cache/huggingface",
              stack_profile={"name": "cu130", "cuda": {"version": "13.0.1"},
                             "python": {"torch": {"version": "2.9.1+cu130", "cuda": "13.0"}}})


def render(venv_path="/opt/ml-env", force=(), ansible_managed="Ansible managed", **more):
    settings = build_environment(venv_path=venv_path if more else "/opt/ml-env", force=list(force),
                                 **dict(SETTINGS, **more))
    environment = jinja2.Environment(keep_trailing_newline=True)
    environment.filters.update(AnsibleFilters().filters())
    environment.filters.update(("blackwell.gpu_node." + name, function) for name, function in FilterModule().filters().items())
    return environment.from_string(TEMPLATE.read_text()).render(
        ansible_managed=ansible_managed, runtime_env_venv_path=venv_path, __runtime_env_settings=settings)


def run(source, tmp_path, monkeypatch, environ):
    """Execute the rendered module as the .pth hook would, with environ as os.environ."""
    module = tmp_path / "_blackwell_gpu_node_env.py"
    module.write_text(source)
    monkeypatch.setattr(os, "environ", environ)
    runpy.run_path(str(module), run_name="_blackwell_gpu_node_env")
    return environ


def test_rendered_values_fill_an_empty_environment(tmp_path, monkeypatch):
    environ = run(render(), tmp_path, monkeypatch, {})
    assert environ == {"CUDA_HOME": "/usr/local/cuda-13.0", "FLASHINFER_DISABLE_VERSION_CHECK": "1",
                       "HF_HUB_OFFLINE": "1", "SGLANG_DISABLE_CUDNN_CHECK": "1",
                       "TRITON_PTXAS_PATH": "/usr/local/cuda-13.0/bin/ptxas"}


def test_a_value_already_in_the_environment_wins(tmp_path, monkeypatch):
    environ = run(render(), tmp_path, monkeypatch, {"HF_HUB_OFFLINE": "0", "CUDA_HOME": "/opt/cuda"})
    assert environ["HF_HUB_OFFLINE"] == "0" and environ["CUDA_HOME"] == "/opt/cuda"


def test_a_forced_value_replaces_the_one_in_the_environment(tmp_path, monkeypatch):
    environ = run(render(force=["HF_HUB_OFFLINE"]), tmp_path, monkeypatch, {"HF_HUB_OFFLINE": "0", "CUDA_HOME": "/opt/cuda"})
    assert environ["HF_HUB_OFFLINE"] == "1" and environ["CUDA_HOME"] == "/opt/cuda"


@pytest.mark.parametrize("venv_path", [
    "/opt/ml-env.cu130-0123456789ab",
    "/opt/ml-env/",
    "/opt/ml-env\nimport os; os.environ['INJECTED'] = '1'\n#",
])
def test_the_text_is_the_same_whatever_path_the_virtualenv_is_named_by(venv_path):
    # The upgrade renders into the target's own directory, site through the stable link: a text that differs
    # restarts the server on the next site (the digest of what it runs from covers the module). Nor can a hostile
    # path add code, whether or not the role refused it first.
    assert render(venv_path=venv_path) == render(venv_path="/opt/ml-env")


@pytest.mark.parametrize("ansible_managed", [
    "Ansible managed: _blackwell_gpu_node_env.py.j2 modified on 2026-12-08 09:14:02 by root on awx-job-7f3c",
    "Managed by the upgrade playbook",
    "",
])
def test_the_text_is_the_same_whatever_the_controllers_ansible_managed(ansible_managed):
    # The upgrade's run and site's (or two controllers, an AWX job's pod among them) can have their own
    # ansible_managed; the text that decides a restart follows from the settings alone. Its first line is what the
    # default gives, so that a module rendered with the default stays as it is.
    assert render(ansible_managed=ansible_managed) == render()
    assert render().startswith("# Ansible managed\n# Rendered by the blackwell.gpu_node.runtime_env role.\n")


@pytest.mark.parametrize("venv_path", ["/var/lib/sglang/venvs/cu130-0123456789ab", "/var/lib/sglang/ml-env"])
def test_the_jit_caches_reach_the_process_and_the_text_is_the_same_whichever_virtualenv(venv_path, tmp_path,
                                                                                        monkeypatch):
    text = render(venv_path=venv_path, **CACHES)
    assert text == render(venv_path="/opt/ml-env", **CACHES)
    environ = run(text, tmp_path, monkeypatch, {})
    assert environ["HF_HOME"] == "/var/lib/sglang/.cache/huggingface"
    assert environ["TORCHINDUCTOR_CACHE_DIR"].startswith("/var/lib/sglang/.cache/blackwell-gpu-node/cu130-")
    assert environ["TORCHINDUCTOR_CACHE_DIR"].endswith("/inductor")
