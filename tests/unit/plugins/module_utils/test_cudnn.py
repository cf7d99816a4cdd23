"""SGLang's cuDNN check on torch 2.9.1, read from the distributions of a profile's virtualenv."""
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.cudnn import (
    cudnn_check,
    cudnn_distribution,
    cudnn_problem,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
CU130, CU128 = resolve("cu130", PROFILES), resolve("cu128", PROFILES)


def test_torch_2_9_1_with_the_cudnn_its_wheel_pins_is_refused_naming_the_profile_and_both_ways_past_it():
    assert cudnn_problem(cudnn_check(CU130), {"torch": "2.9.1+cu130", "nvidia-cudnn-cu13": "9.13.0.50"}) == (
        "torch 2.9.1+cu130 of stack profile cu130 (stack_profiles.cu130.python.torch.version) has nvidia-cudnn-cu13 "
        "9.13.0.50: SGLang refuses to serve a multimodal model on torch 2.9.1 with a cuDNN older than 9.15, where "
        "nn.Conv3d is slow and takes excess memory, unless SGLANG_DISABLE_CUDNN_CHECK=1 is set "
        "(runtime_env_sglang_disable_cudnn_check: true, the runtime_env role's default, silences the check, not the "
        "cause) or nvidia-cudnn-cu13 9.15 or newer is installed (a custom stack profile, or its lock, that has it)")


def test_the_check_is_plain_data_naming_the_profile_its_torch_and_the_cudnn_wheel():
    assert cudnn_check(CU128) == {"profile": "cu128", "torch": CU128["python"]["torch"]["version"],
                                  "distribution": "nvidia-cudnn-cu12"}


@pytest.mark.parametrize("profile, installed, refused", [
    (CU130, {"nvidia-cudnn-cu13": "9.15.0.57"}, False),
    (CU130, {"nvidia-cudnn-cu13": "9.16.0.29"}, False),
    (CU130, {"nvidia-cudnn-cu13": "10.0.0.1"}, False),
    (CU130, {"nvidia-cudnn-cu13": "9.14.0.64"}, True),
    # The CUDA 12 wheel does not serve a CUDA 13 torch.
    (CU130, {"nvidia-cudnn-cu12": "9.16.0.29"}, True),
    (CU130, {"nvidia_cudnn_cu13": "9.16.0.29"}, False),
    (CU128, {"nvidia-cudnn-cu12": "9.10.2.21"}, True),
    (CU128, {"nvidia-cudnn-cu12": "9.16.0.29"}, False),
    (CU128, {}, True),
])
def test_cudnn_9_15_or_newer_of_the_torchs_cuda_passes_by_itself(profile, installed, refused):
    assert (cudnn_problem(cudnn_check(profile), installed) is not None) is refused


def test_a_missing_cudnn_wheel_is_named():
    assert "has no nvidia-cudnn-cu12: SGLang refuses" in cudnn_problem(cudnn_check(CU128), {"torch": "2.9.1"})


@pytest.mark.parametrize("name", ["sglang-0.5.17-cu130", "sglang-0.5.23-cu130"])
def test_other_torch_releases_are_not_checked(name):
    assert cudnn_check(resolve(name, PROFILES)) is None
    assert cudnn_problem(None, {"nvidia-cudnn-cu13": "9.13.0.50"}) is None


def test_the_cudnn_wheel_follows_the_cuda_torch_was_built_for():
    assert (cudnn_distribution("13.0"), cudnn_distribution("12.8")) == ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12")
