"""The readiness gate over real SGLang start-up logs collected from public reports.

tests/data/sglang_logs/SOURCES.md says where each log comes from. Every log there must
be listed below with the verdict a person reading it would give. The held-out logs
(held_out/, their own SOURCES.md) are not: the catalogue is not tuned on them, so only
the guarantees that hold for any log are asserted of them (bench/diagnosis_rate.py
prints their rates). The logs in built/ are a release's failures as its source prints
them, until logs of a real run replace them (built/SOURCES.md): listed in BUILT.
"""
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogFollower
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readiness import Waiter
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier, catalogue_entry

LOGS = Path(__file__).resolve().parents[1] / "data" / "sglang_logs"
HELD_OUT = LOGS / "held_out"
BUILT_LOGS = LOGS / "built"
# The diagnosis of a failure no catalogue entry explains.
GENERIC = "not_in_catalogue"

READY = "ready"
# A log without a traceback or a fatal line: the process is gone, the diagnosis comes from its last lines.
EXITED = "process 1 exited before the server was ready"
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
    "failure-keyerror-cuda-graph-capture-tp8-dcu.log": ("[TP3] KeyError: 'BLOCK_SIZE_M'", GENERIC),
    "failure-nccl-unhandled-system-error-partial.log": ("RuntimeError: NCCL error: unhandled system error", "nccl"),
    "failure-not-enough-memory-tp4.log": ("[TP4] RuntimeError: Not enough memory.", "cuda_out_of_memory"),
    "failure-oserror-cannot-allocate-memory-tp8.log": (
        "OSError: [Errno 12] Cannot allocate memory", "host_out_of_memory"),
    "failure-port-env-typeerror-tp0.log": ("[TP0] TypeError: 'str' object cannot be interpreted as an integer",
                                           GENERIC),
    "failure-sgl-kernel-undefined-symbol-common-ops.log": ("ImportError:", "torch_abi_mismatch"),
    "failure-warmup-error-403-apikey-partial.log": ("Initialization failed. warmup error", "warmup_request"),
    "failure-warmup-error-502-mistral7b.log": ("AssertionError: res=<Response [502]>", "warmup_request"),
    "failure-argparse-unrecognized-reasoning-parser-partial.log": (
        "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2", "invalid_argument"),
    "failure-deepep-not-installed-ep-dispatcher.log": (
        "ImportError: DeepEP is not installed.", "optional_dependency_missing"),
    "failure-tp-not-divisible-vision-heads-16-by-6-ascend.log": (
        "[TP1] Scheduler hit an exception (traceback cut off", "tensor_parallel_not_divisible"),
    "failure-fp8e4nv-not-supported-a10-sm86-partial.log": (EXITED, "gpu_architecture_unsupported"),
    "failure-no-kernel-image-topktopp-sampling-partial.log": (
        "RuntimeError: TopKTopPSamplingFromProbs failed", "gpu_architecture_unsupported"),
    "failure-peer-access-not-supported-custom-allreduce-2xt4.log": (EXITED, "gpu_peer_access"),
    "failure-gated-repo-llama2-launch-server-partial.log": (EXITED, "hf_gated_model"),
    "failure-gated-repo-oserror-llama32-partial.log": ("OSError: You are trying to access a gated repo.", "hf_gated_model"),
    "failure-dist-init-port-eaddrinuse-ascend-partial.log": (
        "torch.distributed.DistNetworkError: The server socket has failed to listen", "port_in_use"),
    "failure-triton-jit-compile-ascend-tp2-partial.log": ("[TP2] ", "kernel_compilation"),
    "failure-ptxas-jit-error-evict-last-vllm-partial.log": (EXITED, "kernel_compilation"),
    "failure-trust-remote-code-falcon-mlserver-partial.log": (
        "ValueError: Loading tiiuae/falcon-7b-instruct requires you to execute", "trust_remote_code"),
    "failure-nvidia-driver-too-old-torch-lazy-init-partial.log": (
        "RuntimeError: The NVIDIA driver on your system is too old", "cuda_driver"),
    "failure-cuda-driver-insufficient-torch-partial.log": (
        "RuntimeError: CUDA error: CUDA driver version is insufficient", "cuda_driver"),
    "failure-metrics-port-not-available-gpustack-partial.log": (
        "ValueError: metrics_port at 40290 is not available in 30 seconds.", "port_in_use"),
    "failure-torch-distributed-port-29500-eaddrinuse-vlm-r1-partial.log": (
        "RuntimeError: The server socket has failed to listen on any local network address. port: 29500",
        "port_in_use"),
    "failure-nvshmem-ibrc-connect-eps-failed-deepep-h20-partial.log": (EXITED, "nvshmem_init"),
    "failure-mooncake-transfer-engine-ipv6-bind-partial.log": (EXITED, "transfer_engine"),
    "failure-deepgemm-device-assert-ue8m0-b200-partial.log": (
        "tvm.error.InternalError: CUDA driver error", "gpu_kernel_assert"),
}
# The component each failure is said to come from, where the log names it (the rest: see test_every_failure_...).
COMPONENTS = {
    "failure-metrics-port-not-available-gpustack-partial.log": "port 40290, the metrics port",
    "failure-torch-distributed-port-29500-eaddrinuse-vlm-r1-partial.log": "port 29500, the torch.distributed port",
    "failure-dist-init-port-eaddrinuse-ascend-partial.log": "port 42173, the torch.distributed port",
    "failure-nvshmem-ibrc-connect-eps-failed-deepep-h20-partial.log": "NVSHMEM (DeepEP's transport)",
    "failure-mooncake-transfer-engine-ipv6-bind-partial.log": "Mooncake transfer engine",
    "failure-deepgemm-device-assert-ue8m0-b200-partial.log": "DeepGEMM",
    "failure-keyerror-cuda-graph-capture-tp8-dcu.log": "SGLang",
    "failure-deepep-not-installed-ep-dispatcher.log": "DeepEP",
}


# file -> (the failure's cause, diagnosis id, component)
BUILT = {
    "failure-0.5.17-jit-cache-permission.log": (
        "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable",
        "a JIT compiler's cache directory"),
    "failure-0.5.17-tp2-on-one-gpu-invalid-device-ordinal.log": (
        "[TP1] torch.AcceleratorError: CUDA error: invalid device ordinal", "tensor_parallel_exceeds_gpus",
        "the GPUs the server sees"),
    "failure-0.5.17-unknown-architecture.log": (
        "ValueError: Cannot find model module. 'ExampleNextForCausalLM' is not a registered model",
        "model_type_unknown", "SGLang"),
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
    assert result["failure"]["diagnosis"]["id"] == diagnosis
    assert result["failure"]["diagnosis"]["component"].startswith(COMPONENTS.get(name, ""))


def test_sources_name_every_log():
    sources = (LOGS / "SOURCES.md").read_text()
    missing = [name for name in EXPECTED if name not in sources]
    assert not missing, missing


def test_the_corpus_meets_the_diagnosis_rate():
    """At least 9 in 10 real failures diagnosed by a catalogue entry (bench/diagnosis_rate.py prints the table)."""
    failures = [name for name in EXPECTED if EXPECTED[name] != READY]
    diagnosed = [name for name in failures if EXPECTED[name][1] != GENERIC]
    assert len(diagnosed) * 10 >= len(failures) * 9


HELD_OUT_LOGS = sorted(path.name for path in HELD_OUT.glob("*.log"))


def test_the_held_out_corpus_has_failures_and_successes_each_with_its_source():
    sources = (HELD_OUT / "SOURCES.md").read_text()
    assert [name for name in HELD_OUT_LOGS if name not in sources] == []
    assert sum(name.startswith("failure-") for name in HELD_OUT_LOGS) >= 6
    assert sum(name.startswith("success-") for name in HELD_OUT_LOGS) >= 2


@pytest.mark.parametrize("name", HELD_OUT_LOGS)
def test_a_held_out_log_is_called_right_and_a_failure_names_its_component(name):
    result = replay(HELD_OUT / name)
    if name.startswith("success-"):
        assert result["ready"] is True, result["msg"]
        return
    assert result["ready"] is False
    assert result["failure"]["diagnosis"]["component"]


def test_every_catalogue_entry_is_exercised_by_a_real_log():
    expected_ids = set(value[1] for value in EXPECTED.values() if value != READY) - {GENERIC}
    catalogue_ids = set(entry["id"] for entry in DIAGNOSES)
    # Entries whose real logs are not in this corpus yet; each has a unit case in test_sglang_log.py.
    without_a_log = {"sgl_kernel_version", "model_path"}
    # Entries whose only logs are built from a release's source (BUILT), until a real run's replace them.
    built_only = set(value[1] for value in BUILT.values()) - expected_ids
    assert built_only == {"jit_cache_not_writable", "tensor_parallel_exceeds_gpus"}
    assert catalogue_ids - expected_ids == without_a_log | built_only


def test_every_built_log_is_listed_with_its_source():
    sources = (BUILT_LOGS / "SOURCES.md").read_text()
    assert sorted(path.name for path in BUILT_LOGS.glob("*.log")) == sorted(BUILT)
    assert [name for name in BUILT if name not in sources] == []


@pytest.mark.parametrize("name", sorted(BUILT))
def test_a_release_failure_built_from_its_source_gets_its_class(name):
    cause, diagnosis, component = BUILT[name]
    result = replay(BUILT_LOGS / name)
    assert result["ready"] is False
    assert result["failure"]["cause"].startswith(cause)
    assert (result["failure"]["diagnosis"]["id"], result["failure"]["diagnosis"]["component"]) == (
        diagnosis, component)


@pytest.mark.parametrize("path", sorted(LOGS.glob("success-*.log")) + sorted(HELD_OUT.glob("success-*.log")),
                         ids=lambda path: path.name)
def test_no_diagnosis_pattern_matches_a_line_of_a_successful_start(path):
    for line in path.read_text().splitlines():
        assert catalogue_entry(line) is None, line
