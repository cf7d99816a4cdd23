"""The diagnosis catalogue: every message each entry promises to recognise, and the whole texts operators read."""
import json
import re
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.jit_caches import CACHE_VARIABLES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import catalogue_entry, diagnose

# The causes and fixes as reviewed; a change to what the operator reads is deliberate and updates this file.
TEXTS = json.loads((Path(__file__).resolve().parents[3] / "data" / "what_operators_read" / "sglang_diagnoses.json")
                   .read_text(encoding="utf-8"))
ROLE_DEFAULTS = (Path(__file__).resolve().parents[4] / "roles" / "runtime_env" / "defaults" / "main.yml").read_text()

# One message per alternative of each pattern, holding that alternative only: a pattern that stops recognising
# any one of them fails here.
MESSAGES = [
    ("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2", "invalid_argument"),
    ("launch_server.py: error: argument --tp-size: invalid int value: 'four'", "invalid_argument"),
    ("launch_server.py: error: the following arguments are required: --model-path", "invalid_argument"),
    ("launch_server.py: error: ambiguous option: --tp could match --tp-size, --tp-rank", "invalid_argument"),
    ("Traceback (most recent call last):\nlaunch_server.py: error: unrecognized arguments: --x", "invalid_argument"),
    # `sglang serve` of SGLang 0.5.9 names its parser `sglang`; from 0.5.10 on both entrypoints say `sglang serve`.
    ("sglang: error: unrecognized arguments: --reasoning_parser kimi_k2", "invalid_argument"),
    ("sglang serve: error: unrecognized arguments: --reasoning_parser kimi_k2", "invalid_argument"),
    ("sglang serve: error: argument --tp-size: invalid int value: 'four'", "invalid_argument"),
    ("RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected", "cudnn_check"),
    ("or set SGLANG_DISABLE_CUDNN_CHECK=1", "cudnn_check"),
    ("ImportError: DeepEP is not installed.", "optional_dependency_missing"),
    ("ModuleNotFoundError: No module named 'deep_ep'", "optional_dependency_missing"),
    ("ModuleNotFoundError: No module named 'nixl'", "optional_dependency_missing"),
    ("ImportError: Please install mooncake by following the instructions", "optional_dependency_missing"),
    ("RuntimeError: DeepGEMM is not available on this GPU", "optional_dependency_missing"),
    ("OSError: libnvshmem_host.so.3: cannot open shared object file: No such file", "optional_dependency_missing"),
    ("ImportError: libcublasLt.so.12: cannot open shared object file", "cuda12_library_on_cuda13"),
    ("undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib", "torch_abi_mismatch"),
    ("flashinfer-cubin version (0.6.3) does not match flashinfer version (0.6.4)", "flashinfer_version_check"),
    ("Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check.", "flashinfer_version_check"),
    ("Exception: flashinfer_python is installed with version 0.5.2", "flashinfer_version_check"),
    ("flashinfer_python with minimum required version 0.6.3", "flashinfer_version_check"),
    ("Exception: sgl-kernel is installed with version 0.3.16", "sgl_kernel_version"),
    ("sgl-kernel with minimum required version 0.3.21", "sgl_kernel_version"),
    # A cache directory that cannot be made, in the frames of each JIT compiler's code that makes it (their releases
    # of the 0.5.17 profile), or at a cache's own path.
    ('  File "/opt/ml-env/lib/python3.11/site-packages/flashinfer/jit/core.py", line 18, in <module>\n'
     "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/triton/runtime/cache.py", line 45, in __init__\n'
     "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/torch/_inductor/runtime/cache_dir_utils.py", line 18, in '
     "cache_dir\nOSError: [Errno 30] Read-only file system: '/var/tmp/inductor'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2341, in '
     "_write_ninja_file_and_compile_objects\nPermissionError: [Errno 13] Permission denied: '/home/sglang'",
     "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/tvm_ffi/cpp/extension.py", line 698, in _build_impl\n'
     "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/tilelang/cache/kernel_cache.py", line 183, in _create_dirs\n'
     "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/cutlass/base_dsl/cache_helpers.py", line 75, in '
     "get_reusable_temp_dir\nPermissionError: [Errno 13] Permission denied: '/srv/tmp/sglang'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/sglang/srt/compilation/backend.py", line 414, in __call__\n'
     "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable"),
    ('  File "/opt/ml-env/lib/python3.11/site-packages/sglang/srt/distributed/device_communicators/'
     'custom_all_reduce_utils.py", line 266, in gpu_p2p_access_check\n'
     "PermissionError: [Errno 13] Permission denied: '/home/sglang'", "jit_cache_not_writable"),
    ("RuntimeError: Assertion error (/DeepGEMM/csrc/utils/system.hpp:76): Failed to make directory: "
     "/home/sglang/.cache/deep_gemm/tmp, created: 0, value: 13", "jit_cache_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/home/sglang/.cache/tvm-ffi'", "jit_cache_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/home/sglang/.triton'", "jit_cache_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/home/sglang/.tilelang'", "jit_cache_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/home/sglang/.nv/ComputeCache'", "jit_cache_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/tmp/torchinductor_sglang'", "jit_cache_not_writable"),
    ("PermissionError: [Errno 13] Permission denied: '/tmp/sglang/cutlass_python_cache'", "jit_cache_not_writable"),
    ("OSError: [Errno 12] Cannot allocate memory", "host_out_of_memory"),
    ("torch.cuda: CUDA out of memory. Tried to allocate 26.00 MiB.", "cuda_out_of_memory"),
    ("torch.OutOfMemoryError", "cuda_out_of_memory"),
    ("cudaErrorMemoryAllocation", "cuda_out_of_memory"),
    ("RuntimeError: CUDA error: out of memory", "cuda_out_of_memory"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "cuda_out_of_memory"),
    ("ValueError: insufficient device memory for the KV cache", "cuda_out_of_memory"),
    # torch 2.11's words for a device index past the visible GPUs (c10_cuda_check_implementation), NCCL's, and
    # CUDA's name of the error.
    ("[TP1] torch.AcceleratorError: CUDA error: invalid device ordinal", "tensor_parallel_exceeds_gpus"),
    ("GPU device may be out of range, do you have enough GPUs?", "tensor_parallel_exceeds_gpus"),
    ("node1:123:456 [1] NCCL WARN Cuda failure 'invalid device ordinal'", "tensor_parallel_exceeds_gpus"),
    ("cudaErrorInvalidDevice", "tensor_parallel_exceeds_gpus"),
    ("AssertionError: 16 is not divisible by 6", "tensor_parallel_not_divisible"),
    ('File "sglang/srt/utils.py", in ensure_divisibility', "tensor_parallel_not_divisible"),
    ("ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n "
     "= 128.", "tensor_parallel_not_divisible"),
    ("ValueError: num_heads must be divisible by tp_size", "tensor_parallel_not_divisible"),
    ("RuntimeError: SGLang only supports sm75 and above.", "gpu_too_old"),
    ("type fp8e4nv not supported in this architecture.", "gpu_architecture_unsupported"),
    ("AssertionError: fp8e4nv data type is not supported", "gpu_architecture_unsupported"),
    ("ValueError: CUDA arch < 89", "gpu_architecture_unsupported"),
    ("failed with error code no kernel image is available for execution on the device", "gpu_architecture_unsupported"),
    ("cudaErrorNoKernelImageForDevice", "gpu_architecture_unsupported"),
    ("triton.compiler.errors.CompilationError: at 12:4:", "kernel_compilation"),
    ("RuntimeError: Internal Triton PTX codegen error:", "kernel_compilation"),
    ("ptxas /tmp/tmp6qa78v4o.ptx, line 661; error   : Modifier '.evict_last'", "kernel_compilation"),
    ("ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'", "kernel_compilation"),
    ('  File "/venv/lib/python3.11/site-packages/triton/compiler/compiler.py", line 310, in compile',
     "kernel_compilation"),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_120a'", "kernel_compilation"),
    ("RuntimeError: Ninja is required to load C++ extensions", "kernel_compilation"),
    ("RuntimeError: Error building extension 'flashinfer_jit'", "kernel_compilation"),
    ("'peer access is not supported between these two devices'", "gpu_peer_access"),
    ("cudaErrorPeerAccessUnsupported", "gpu_peer_access"),
    ("CUDA error: peer mapping resources exhausted", "gpu_peer_access"),
    ("RuntimeError: NCCL error: unhandled system error", "nccl"),
    ("ncclUnhandledCudaError: Call to CUDA function failed.", "nccl"),
    ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed", "nccl"),
    ("ncclInternalError: Internal check failed.", "nccl"),
    ("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", "nccl"),
    ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
     "nccl"),
    ("node1:123:456 [0] NCCL WARN Cuda failure 'invalid argument'", "nccl"),
    ("OSError: Address already in use", "port_in_use"),
    ("error while attempting to bind on address ('127.0.0.1', 30000): address already in use", "port_in_use"),
    ("OSError: [Errno 98]", "port_in_use"),
    ("name: EADDRINUSE", "port_in_use"),
    ("ValueError: metrics_port at 40290 is not available in 30 seconds.", "port_in_use"),
    ("metrics_port is used by a process already.", "port_in_use"),
    ("/sgl-workspace/nvshmem/src/host/transport/transport.cpp:400: non-zero status: 7 connect EPS failed",
     "nvshmem_init"),
    ("team.cu:nvshmem_team_split_strided:63: NVSHMEM API called before NVSHMEM initialization has completed",
     "nvshmem_init"),
    ("nvshmem setup connections failed", "nvshmem_init"),
    ("nvshmem initialization failed, exiting", "nvshmem_init"),
    ("192-168-183-165:132677:132677 [3] NVSHMEM INFO nvshmemi_common_init failed, continuing", "nvshmem_init"),
    ("nvshmem_init failed", "nvshmem_init"),
    ("nvshmemi_init_thread failed", "nvshmem_init"),
    ("nvshmemi_transport_ibrc_init failed", "nvshmem_init"),
    ("[2025-06-17 14:02:14] Mooncake Transfer Engine initialization failed.", "transfer_engine"),
    ("E0617 14:02:14.685174 355565 transfer_metadata_plugin.cpp:543] SocketHandShakePlugin: bind (port 340): "
     "Permission denied [13]", "transfer_engine"),
    ("SocketHandShakePlugin: failed to get IP address of peer server", "transfer_engine"),
    ("Mooncake memory registration failed.", "transfer_engine"),
    ("check DNS and /etc/hosts, or use IPv4 address instead", "transfer_engine"),
    ("Assertion failed: deep_gemm/include/deep_gemm/impls/smxx_layout.cuh:131, condition: x == 0", "gpu_kernel_assert"),
    ("RuntimeError: CUDA error: device-side assert triggered", "gpu_kernel_assert"),
    ("cudaErrorAssert", "gpu_kernel_assert"),
    ("CUDA_ERROR_ASSERT", "gpu_kernel_assert"),
    ("IndexKernel.cu:92: operator(): block: [0,0,0] Assertion `index < sizes[i]' failed.", "gpu_kernel_assert"),
    ("RuntimeError: Assertion error (/deepgemm/csrc/jit/compiler.hpp:50): not library_root_path.empty()",
     "gpu_kernel_assert"),
    ("AssertionError: warmup error", "warmup_request"),
    ("cudaGetDeviceCount(): Error 802: system not yet initialized", "cuda_driver"),
    ("RuntimeError: system not yet initialized", "cuda_driver"),
    ("CUDA driver version is insufficient for CUDA runtime version", "cuda_driver"),
    ("cudaErrorInsufficientDriver", "cuda_driver"),
    ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 804", "cuda_driver"),
    ("forward compatibility was attempted on non supported HW", "cuda_driver"),
    ("The NVIDIA driver on your system is too old (found version 11060).", "cuda_driver"),
    ("ValueError: The checkpoint you are trying to load has model type `kimi_k2` but Transformers does not "
     "recognize this architecture.", "model_type_unknown"),
    # SGLang's words for an architecture neither it nor transformers has, each release's own (RELEASE_WORDING).
    ("ValueError: Cannot find model module. 'ExampleNextForCausalLM' is not a registered model in the Transformers "
     "library (only relevant if the model is meant to be in Transformers) and 'AutoModel' is not present in the "
     "model config's 'auto_map' (relevant if the model is custom).", "model_type_unknown"),
    ("ValueError: Model architectures ['ExampleNextForCausalLM'] are not supported for now. Supported "
     "architectures: dict_keys(['LlamaForCausalLM', 'Qwen3ForCausalLM'])", "model_type_unknown"),
    ("The repository for x contains custom code which must be executed to correctly load the model.",
     "trust_remote_code"),
    ("Loading tiiuae/falcon-7b requires you to execute the configuration file in that repo", "trust_remote_code"),
    ("Loading tiiuae/falcon-7b requires you to execute some code in that repo", "trust_remote_code"),
    ("huggingface_hub.errors.GatedRepoError: 403", "hf_gated_model"),
    ("Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-2-7b-chat-hf", "hf_gated_model"),
    ("OSError: cannot access gated repo", "hf_gated_model"),
    ("OSError: You are trying to access a gated repo.", "hf_gated_model"),
    ("Access to model meta-llama/Llama-3.2-1B is restricted.", "hf_gated_model"),
    ("requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url", "hf_gated_model"),
    ("requests.exceptions.HTTPError: 403 Client Error: Forbidden for url", "hf_gated_model"),
    ("OSError: /shared/kimi is not a local folder and is not a valid model identifier", "model_path"),
    ("404 Client Error. Repository Not Found for url", "model_path"),
    ("huggingface_hub.errors.RepositoryNotFoundError", "model_path"),
    ("OSError: /models/x does not appear to have a file named config.json.", "model_path"),
    ("OSError: Can't load the configuration of '/models/x'.", "model_path"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/models/x/config.json'", "model_path"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/models/x/model-00001.safetensors'", "model_path"),
    ("huggingface_hub.errors.HFValidationError: Repo id must be in the form", "model_path"),
]


@pytest.mark.parametrize("text,expected", MESSAGES)
def test_each_known_message_gets_its_diagnosis_with_the_whole_cause_and_fix(text, expected):
    found = diagnose(text)
    assert dict((key, found[key]) for key in ("id", "cause", "fix")) == dict(id=expected, **TEXTS[expected])
    assert found["component"]


@pytest.mark.parametrize("text", [
    "  launch_server.py: error: unrecognized arguments: --x",  # argparse writes its error at a line's start
    "  sglang serve: error: unrecognized arguments: --x",
    "No module named 'deep_epx'",  # another package than DeepEP's
    "CUDA arch < sm89",
    "libcudart.so.13: cannot open shared object file",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",  # in every CUDA error torch raises
    "I0617 14:02:14.685145 355565 transfer_engine.cpp:44] Transfer Engine starting. Server: 10.0.0.1",
    "metrics_port=9003",
    # An errno outside a JIT cache: a model file the server's user may not read.
    "PermissionError: [Errno 13] Permission denied: '/models/x/config.json'",
    "Cannot find model module. is not a registered model",
])
def test_near_misses_match_no_entry(text):
    assert catalogue_entry(text) is None and diagnose(text)["id"] == "not_in_catalogue"


@pytest.mark.parametrize("text, component", [
    ("ValueError: metrics_port at 40290 is not available in 30 seconds.",
     "port 40290, the metrics port (SGLang's metrics_port; sglang_server_enable_metrics turns the metrics on)"),
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
     "port: 42173, useIpv6: false, code: -98, name: EADDRINUSE",
     "port 42173, the torch.distributed port (sglang_server_dist_init_port, or --nccl-port in "
     "sglang_server_extra_args)"),
    ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
     "port 30000, the HTTP port (sglang_server_port)"),
    ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1')", "one of SGLang's ZMQ ports"),
    ("OSError: [Errno 98] Address already in use", "a port of the server"),
])
def test_a_port_in_use_is_named_with_which_of_the_servers_ports_it_is(text, component):
    assert diagnose(text)["component"] == component


def test_an_entry_without_a_component_of_its_own_names_the_package_the_failure_came_from():
    traceback = ('  File "/venv/lib/python3.12/site-packages/sglang/srt/layers/moe/ep_moe/layer.py", line 9, in f\n'
                 '  File "/venv/lib/python3.12/site-packages/deep_gemm/jit/compiler.py", line 50, in build\n'
                 "RuntimeError: Assertion error (csrc/jit/compiler.hpp:50): not library_root_path.empty()")
    found = diagnose(traceback)
    assert (found["id"], found["component"], found["exception"], found["raised_in"]) == (
        "gpu_kernel_assert", "DeepGEMM", "RuntimeError", "deep_gemm/jit/compiler.py")
    assert diagnose("RuntimeError: NCCL error: unhandled system error", context="sglang")["component"] == "NCCL"


def test_every_entry_is_recognised_by_some_message_and_its_texts_are_the_reviewed_ones():
    assert {expected for text, expected in MESSAGES} == {entry["id"] for entry in DIAGNOSES}
    assert {entry["id"]: {"cause": entry["cause"], "fix": entry["fix"]} for entry in DIAGNOSES} == TEXTS


CAPTURE_TYPEERROR = "\n".join([
    "[2026-01-04 03:36:56 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 388, in capture',
    "    self.capture_one_batch_size(bs, forward)",
    '  File "/usr/local/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 574, in _fn',
    "    return fn(*args, **kwargs)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/layers/radix_attention.py", line 108, in forward',
    "    return forward_batch.attn_backend.forward(",
    "TypeError: forward() got an unexpected keyword argument 'save_kv_cache'",
])


def test_a_failure_the_catalogue_does_not_know_gets_the_generic_diagnosis_of_where_it_happened():
    found = diagnose(CAPTURE_TYPEERROR)
    assert found == {
        "id": "not_in_catalogue", "component": "SGLang", "exception": "TypeError",
        "raised_in": "sglang/srt/layers/radix_attention.py",
        "cause": "TypeError raised in sglang/srt/layers/radix_attention.py (SGLang), which the catalogue does not "
                 "know. SGLang failed while capturing CUDA graphs: a bug in SGLang or a mismatch between it and the "
                 "kernels it captures (this build's platform, sgl-kernel, flashinfer).",
        "fix": "Start without CUDA graphs to confirm: --disable-cuda-graph in sglang_server_extra_args (slower "
               "decoding), or fewer batch sizes with sglang_server_cuda_graph_max_bs; then report it to SGLang with "
               "the traceback and the versions of the stack profile."}


@pytest.mark.parametrize("text, context, component", [
    # The innermost frame under a known package decides, not a frame of the standard library below it.
    ('  File "/opt/venv/lib/python3.12/site-packages/flashinfer/sampling.py", line 9, in top_k\n'
     '  File "/usr/lib/python3.12/functools.py", line 1, in wrapper\nValueError: bad', "", "flashinfer"),
    # No traceback: the first component whose sign occurs in the failure's lines, then in the last lines.
    ("Fatal Python error: Aborted", "what():  cutlass DSL\n/sgl-workspace/nvshmem/src/init.cu:1: failed", "NVSHMEM "
     "(DeepEP's transport)"),
    ("Fatal Python error: Segmentation fault", "torch_npu/csrc/core/npu/NPUStream.cpp", "torch_npu (Ascend)"),
    # A log that names nothing: the server.
    ("Killed", "", "SGLang"),
])
def test_the_component_comes_from_the_innermost_known_frame_else_the_logs_signs_else_the_server(
        text, context, component):
    assert diagnose(text, context=context)["component"] == component


# SGLang's words for a model architecture it cannot serve, as each release formats them (arch
# 'ExampleNextForCausalLM'): sglang/srt/model_loader/utils.py (resolve_transformers_arch) and
# sglang/srt/models/registry.py (_raise_for_unsupported) of the PyPI wheels; tests/data/sglang_logs/built/SOURCES.md.
NOT_REGISTERED = ("Cannot find model module. 'ExampleNextForCausalLM' is not a registered model in the Transformers "
                  "library (only relevant if the model is meant to be in Transformers) and 'AutoModel' is not present "
                  "in the model config's 'auto_map' (relevant if the model is custom).")
REMOTE_CODE_FAILED = ("Cannot find model module. 'ExampleNextForCausalLM' is not a registered model in the Transformers "
                      "library and loading the custom model from auto_map failed. The remote model code may be "
                      "incompatible with the installed transformers version.")
NOT_SUPPORTED = ("Model architectures ['ExampleNextForCausalLM'] are not supported for now. Supported architectures: "
                 "dict_keys(['LlamaForCausalLM'])")
RELEASE_WORDING = [
    ("0.5.9", "model_loader/utils.py:55", NOT_REGISTERED),
    ("0.5.9", "models/registry.py:49", NOT_SUPPORTED),
    ("0.5.17", "model_loader/utils.py:153", NOT_REGISTERED),
    ("0.5.17", "model_loader/utils.py:161", REMOTE_CODE_FAILED),
    ("0.5.17", "models/registry.py:51", NOT_SUPPORTED),
    ("0.5.23", "model_loader/utils.py:156", NOT_REGISTERED),
    ("0.5.23", "model_loader/utils.py:164", REMOTE_CODE_FAILED),
    ("0.5.23", "models/registry.py:64", NOT_SUPPORTED),
]


@pytest.mark.parametrize("release, source, message", RELEASE_WORDING,
                         ids=["%s %s" % (release, source) for release, source, message in RELEASE_WORDING])
def test_an_architecture_no_layer_knows_is_one_class_in_every_releases_words(release, source, message):
    traceback = ('  File "/opt/ml-env/lib/python3.11/site-packages/sglang/srt/%s", line 1, in f\nValueError: %s'
                 % (source.split(":")[0], message))
    found = diagnose(traceback)
    assert (found["id"], found["component"], found["raised_in"]) == (
        "model_type_unknown", "SGLang", "sglang/srt/" + source.split(":")[0])


def test_an_errno_counts_as_a_jit_cache_only_with_a_jit_cache_in_the_same_text():
    errno = "PermissionError: [Errno 13] Permission denied: '/home/sglang'"
    frame = '  File "/opt/ml-env/lib/python3.11/site-packages/flashinfer/jit/core.py", line 18, in <module>'
    assert catalogue_entry(errno) is None and catalogue_entry(frame) is None
    assert diagnose(errno, context=frame)["id"] == "not_in_catalogue"
    assert diagnose(frame + "\n" + errno)["id"] == "jit_cache_not_writable"


def test_the_jit_cache_fix_names_every_variable_the_runtime_env_role_renders_for_them():
    fix = TEXTS["jit_cache_not_writable"]["fix"]
    names = set(re.findall(r"\b[A-Z][A-Z0-9_]*_[A-Z0-9_]+\b", fix))
    assert names == set(CACHE_VARIABLES) | {"HF_HOME"}
    for variable in ("runtime_env_cache_root", "runtime_env_cache_owner", "runtime_env_hf_home"):
        assert variable in fix and variable in ROLE_DEFAULTS
