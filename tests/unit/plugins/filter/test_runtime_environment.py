import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.runtime_environment import FilterModule

runtime_environment = FilterModule().filters()["runtime_environment"]

SETTINGS = {
    "venv_path": "/opt/ml-env",
    "cuda_home": "/usr/local/cuda-13.0",
    "triton_ptxas_path": "/usr/local/cuda-13.0/bin/ptxas",
    "nccl_profile": "none",
    "nccl_profiles": {"none": {}},
}


def test_returns_environment_and_force():
    assert runtime_environment(dict(SETTINGS, force=["CUDA_HOME"])) == {
        "environment": {
            "CUDA_HOME": "/usr/local/cuda-13.0",
            "FLASHINFER_DISABLE_VERSION_CHECK": "1",
            "SGLANG_DISABLE_CUDNN_CHECK": "1",
            "TRITON_PTXAS_PATH": "/usr/local/cuda-13.0/bin/ptxas",
        },
        "force": ["CUDA_HOME"],
        "nccl_profile": {"name": "none", "reason": "named by runtime_env_nccl_profile"},
        "cache": {"root": None, "directories": []},
    }


def test_every_problem_becomes_one_filter_error():
    with pytest.raises(AnsibleFilterError) as raised:
        runtime_environment(dict(SETTINGS, cuda_home="cuda", nccl_profile="gone"))
    assert str(raised.value).splitlines() == [
        "Invalid runtime_env settings:",
        "runtime_env_cuda_home: 'cuda' must be an absolute path",
        "runtime_env_nccl_profile: 'gone' is not a known NCCL profile; known: none, "
        "or auto to choose by the host's GPUs (add one to runtime_env_nccl_profiles)",
    ]


def test_unknown_setting_is_an_error_not_a_crash():
    with pytest.raises(AnsibleFilterError) as raised:
        runtime_environment(dict(SETTINGS, venv="/opt/x"))
    assert str(raised.value) == "runtime_environment: build_environment() got an unexpected keyword argument 'venv'"


def test_the_module_filter_writes_the_code_of_the_settings():
    module = FilterModule().filters()["runtime_environment_module"]
    code = module(runtime_environment(dict(SETTINGS, force=["CUDA_HOME"])))
    assert code.startswith('ENVIRONMENT = {\n    "CUDA_HOME": "/usr/local/cuda-13.0",\n')
    assert '\nFORCE = frozenset(["CUDA_HOME"])\n' in code and "\ndef apply_environment(environ, environment, force):" in code
