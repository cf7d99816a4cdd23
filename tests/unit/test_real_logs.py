"""The readiness gate over real SGLang start-up logs collected from public reports.

tests/data/sglang_logs/SOURCES.md says where each log comes from. Every log there must
be listed below with the verdict a person reading it would give.
"""
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._log_follower import LogFollower
from ansible_collections.blackwell.gpu_node.plugins.module_utils._readiness import Waiter
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang_log import StartupClassifier

LOGS = Path(__file__).resolve().parents[1] / "data" / "sglang_logs"

READY = "ready"
# file -> READY, or (start of the failure's cause, diagnosis id or None)
EXPECTED = {
    "success-tp4-qwq32b-l4-ignorable-error-msg.log": READY,
    "success-tp8-deepseek-r1-k8s-tail.log": READY,
    "success-tp8-grok2-fp8-k8s-h100.log": READY,
    "success-tp2-minimax-m25-nvfp4-blackwell-tail.log": READY,
    "success-dp-attention-tp8-deepseek-r1-mi300x-tail.log": READY,
    "success-tp1-qwen25-05b-docs-notebook-ci.log": READY,
    "success-tp1-gte-qwen2-embedding-docs-notebook-ci.log": READY,
    "success-tp1-eagle-llama2-7b-docs-notebook-ci.log": READY,
    "success-tp1-piecewise-cuda-graph-health-503-excerpt.log": READY,
    "failure-cuda-oom-cuda-graph-capture-dsv4-pro-h200.log": (
        "Exception: Capture cuda graph failed: CUDA out of memory.", "cuda_out_of_memory"),
    "failure-libnvrtc-so12-missing-sgl-kernel-sm120.log": ("ImportError:", "cuda12_library_on_cuda13"),
    "failure-flashinfer-version-too-old-partial.log": (
        "Exception: flashinfer_python is installed with version 0.6.3", "flashinfer_version_check"),
    "failure-transformers-unknown-model-type-glm5-tp8-rocm.log": (
        "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa`", "model_type_unknown"),
    "failure-compute-capability-below-sm75-tp0.log": (
        "[TP0] RuntimeError: SGLang only supports sm75 and above.", "gpu_too_old"),
    "failure-cuda-error-802-tp3.log": ("[TP3] RuntimeError: Unexpected error from cudaGetDeviceCount()", "cuda_driver"),
    "failure-cudnn-check-torch291-partial.log": (
        "RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected", "cudnn_check"),
    "failure-keyerror-cuda-graph-capture-tp8-dcu.log": ("[TP3] KeyError: 'BLOCK_SIZE_M'", None),
    "failure-nccl-unhandled-system-error-partial.log": ("RuntimeError: NCCL error: unhandled system error", "nccl"),
    "failure-not-enough-memory-tp4.log": ("[TP4] RuntimeError: Not enough memory.", "cuda_out_of_memory"),
    "failure-oserror-cannot-allocate-memory-tp8.log": (
        "OSError: [Errno 12] Cannot allocate memory", "host_out_of_memory"),
    "failure-port-env-typeerror-tp0.log": ("[TP0] TypeError: 'str' object cannot be interpreted as an integer", None),
    "failure-sgl-kernel-undefined-symbol-common-ops.log": ("ImportError:", "torch_abi_mismatch"),
    "failure-warmup-error-403-apikey-partial.log": ("Initialization failed. warmup error", "warmup_request"),
    "failure-warmup-error-502-mistral7b.log": ("AssertionError: res=<Response [502]>", "warmup_request"),
}


def replay(path):
    """What wait_for_server concludes from the whole log, the process being gone after a failure log."""
    is_failure = path.name.startswith("failure-")
    waiter = Waiter(
        LogFollower(str(path)), StartupClassifier(), timeout=0, poll_interval=0,
        pid=1 if is_failure else None, is_running=lambda pid: False, sleep=lambda seconds: None,
    )
    return waiter.run()


def test_every_collected_log_has_an_expected_verdict():
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict(name):
    result = replay(LOGS / name)
    if EXPECTED[name] == READY:
        assert result["ready"] is True, result["msg"]
        return
    cause, diagnosis = EXPECTED[name]
    assert result["ready"] is False
    assert result["failure"]["cause"].startswith(cause)
    assert (result["failure"]["diagnosis"] or {}).get("id") == diagnosis


def test_sources_name_every_log():
    sources = (LOGS / "SOURCES.md").read_text()
    missing = [name for name in EXPECTED if name not in sources]
    assert not missing, missing
