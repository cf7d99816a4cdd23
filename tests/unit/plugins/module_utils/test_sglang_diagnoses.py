"""The diagnosis catalogue: every message each entry promises to recognise, and the whole texts operators read."""
import json
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import diagnose

# The causes and fixes as reviewed; a change to what the operator reads is deliberate and updates this file.
TEXTS = json.loads((Path(__file__).resolve().parents[3] / "data" / "what_operators_read" / "sglang_diagnoses.json")
                   .read_text(encoding="utf-8"))

# One message per alternative of each pattern, holding that alternative only: a pattern that stops recognising
# any one of them fails here.
MESSAGES = [
    ("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2", "invalid_argument"),
    ("launch_server.py: error: argument --tp-size: invalid int value: 'four'", "invalid_argument"),
    ("launch_server.py: error: the following arguments are required: --model-path", "invalid_argument"),
    ("launch_server.py: error: ambiguous option: --tp could match --tp-size, --tp-rank", "invalid_argument"),
    ("Traceback (most recent call last):\nlaunch_server.py: error: unrecognized arguments: --x", "invalid_argument"),
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
    ("OSError: [Errno 12] Cannot allocate memory", "host_out_of_memory"),
    ("torch.cuda: CUDA out of memory. Tried to allocate 26.00 MiB.", "cuda_out_of_memory"),
    ("torch.OutOfMemoryError", "cuda_out_of_memory"),
    ("cudaErrorMemoryAllocation", "cuda_out_of_memory"),
    ("RuntimeError: CUDA error: out of memory", "cuda_out_of_memory"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "cuda_out_of_memory"),
    ("ValueError: insufficient device memory for the KV cache", "cuda_out_of_memory"),
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
    assert diagnose(text) == dict(id=expected, **TEXTS[expected])


@pytest.mark.parametrize("text", [
    "  launch_server.py: error: unrecognized arguments: --x",  # argparse writes its error at a line's start
    "No module named 'deep_epx'",  # another package than DeepEP's
    "CUDA arch < sm89",
    "libcudart.so.13: cannot open shared object file",
])
def test_near_misses_get_no_diagnosis(text):
    assert diagnose(text) is None


def test_every_entry_is_recognised_by_some_message_and_its_texts_are_the_reviewed_ones():
    assert {expected for text, expected in MESSAGES} == {entry["id"] for entry in DIAGNOSES}
    assert {entry["id"]: {"cause": entry["cause"], "fix": entry["fix"]} for entry in DIAGNOSES} == TEXTS
