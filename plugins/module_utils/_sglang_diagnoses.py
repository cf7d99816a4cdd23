# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known causes of a failed SGLang start-up, and what to do about each.

Data only. The first entry whose ``pattern`` (a regular expression) occurs in the
failure's traceback, fatal line or last log lines is the diagnosis, so specific
entries come before general ones. Users extend it with the ``diagnoses`` option of
wait_for_server, whose entries are tried first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DIAGNOSES = (
    {
        "id": "cudnn_check",
        "pattern": r"PyTorch 2\.9\.1 & CuDNN Compatibility Issue|SGLANG_DISABLE_CUDNN_CHECK",
        "cause": "SGLang refuses to start with torch 2.9.1 and a cuDNN older than 9.15 (its check for "
        "multimodal models, against a Conv3d bug in that torch).",
        "fix": "Set SGLANG_DISABLE_CUDNN_CHECK=1 (runtime_env_sglang_disable_cudnn_check: true, the "
        "default of the blackwell.gpu_node.runtime_env role) and restart the server.",
    },
    {
        "id": "cuda12_library_on_cuda13",
        "pattern": r"lib(nvrtc|cudart|cublas|cublasLt|cusparse|cufft|curand|nvJitLink)\.so\.12",
        "cause": "A package built for CUDA 12 (a cu12 wheel) is loaded on the CUDA 13 stack.",
        "fix": "Install the cu130 builds of torch, sgl-kernel and flashinfer (the ml_stack role's cu130 "
        "profile) instead of the cu12 wheels, or register CUDA 12's lib64 if you meant to run CUDA 12.",
    },
    {
        "id": "torch_abi_mismatch",
        "pattern": r"undefined symbol: .*(c10_cuda_check_implementation|_ZN3c10|_ZNK3c10|_ZN2at|torch)",
        "cause": "sgl-kernel (or another extension) was built against a different torch than the one installed.",
        "fix": "Pin torch to the version the extension was built for: torch 2.9.1 for sgl-kernel 0.3.21 "
        "(the ml_stack role's profile), and make sure nothing upgraded it (pip install flashinfer pulls another torch).",
    },
    {
        "id": "flashinfer_version_check",
        "pattern": r"does not match flashinfer version|FLASHINFER_DISABLE_VERSION_CHECK"
        r"|flashinfer_python (is installed with version|with minimum required version)",
        "cause": "flashinfer-python, flashinfer-cubin and flashinfer-jit-cache are not the same version, or "
        "flashinfer-python is older than SGLang requires.",
        "fix": "Install the flashinfer versions of the stack profile (the ml_stack role), or set "
        "FLASHINFER_DISABLE_VERSION_CHECK=1 (runtime_env_flashinfer_disable_version_check: true) to skip the "
        "cubin/jit-cache comparison.",
    },
    {
        "id": "sgl_kernel_version",
        "pattern": r"sgl-kernel (is installed with version|with minimum required version)",
        "cause": "The installed sgl-kernel is not the version this SGLang needs.",
        "fix": "Install the sgl-kernel version of the stack profile (0.3.21+cu130 for SGLang 0.5.9).",
    },
    {
        "id": "host_out_of_memory",
        "pattern": r"\[Errno 12\] Cannot allocate memory",
        "cause": "The host, not the GPU, ran out of memory (RAM or a memory ulimit) while starting worker processes.",
        "fix": "Free host memory or raise the service's memory limit (ulimit -v, the container's or the systemd "
        "unit's MemoryMax); each tensor-parallel rank is a process of its own.",
    },
    {
        "id": "cuda_out_of_memory",
        "pattern": r"CUDA out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|CUDA error: out of memory"
        r"|Not enough memory|insufficient (GPU|device) memory",
        "cause": "The GPU ran out of memory while loading weights, allocating the KV cache or capturing CUDA graphs.",
        "fix": "Free the GPUs (nvidia-smi shows who holds them; the sglang_server module stops its own server), "
        "lower --mem-fraction-static or --cuda-graph-max-bs, or raise --tensor-parallel-size.",
    },
    {
        "id": "nccl",
        "pattern": r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage"
        r"|ncclRemoteError|NCCL WARN",
        "cause": "NCCL failed to set up or run collective communication between the GPUs.",
        "fix": "Rerun with NCCL_DEBUG=INFO to see the failing step; on PCIe-only boxes use the pcie_blackwell "
        "NCCL profile (NCCL_P2P_LEVEL=SYS), check that no other process holds the GPUs, and for multi-node "
        "runs that --dist-init-addr is reachable.",
    },
    {
        "id": "port_in_use",
        "pattern": r"[Aa]ddress already in use|\[Errno 98\]",
        "cause": "Another process is already listening on the server's port.",
        "fix": "Stop the other server (state: stopped with the sglang_server module) or choose another --port.",
    },
    {
        "id": "warmup_request",
        "pattern": r"warmup error",
        "cause": "The server started, but SGLang's own warm-up request to it failed (an HTTP proxy in between, "
        "an API key, or a crash while serving it).",
        "fix": "Make local traffic bypass proxies (no_proxy=127.0.0.1,localhost in the server's environment), "
        "check --api-key, and read the traceback for a crash.",
    },
    {
        "id": "cuda_driver",
        "pattern": r"Error 802|system not yet initialized|CUDA driver version is insufficient"
        r"|cudaErrorInsufficientDriver|Error 804|forward compatibility was attempted",
        "cause": "The NVIDIA driver cannot serve this CUDA runtime (a driver older than the runtime, or on NVSwitch "
        "systems nvidia-fabricmanager not running).",
        "fix": "Check nvidia-smi: CUDA 13 needs driver branch 580 or newer; on NVSwitch (HGX) systems start "
        "nvidia-fabricmanager at the driver's exact version.",
    },
    {
        "id": "gpu_too_old",
        "pattern": r"SGLang only supports sm\d+ and above",
        "cause": "The GPU's compute capability is below what SGLang supports.",
        "fix": "Run on a supported GPU (Blackwell sm_100/sm_120, Hopper sm_90 and so on); check CUDA_VISIBLE_DEVICES.",
    },
    {
        "id": "model_type_unknown",
        "pattern": r"has model type `[^`]+` but Transformers does not recognize this architecture",
        "cause": "The installed transformers does not know this model's architecture.",
        "fix": "Use an SGLang and transformers release that supports the model (a newer stack profile), or "
        "check that --model-path points at the model you meant.",
    },
    {
        "id": "model_path",
        "pattern": r"is not a local folder and is not a valid model identifier|Repository Not Found"
        r"|does not appear to have a file named config\.json|Can't load the configuration of"
        r"|No such file or directory: .*(config\.json|safetensors)|HFValidationError",
        "cause": "The model path does not exist or is not a model directory (config.json missing).",
        "fix": "Check --model-path: it must be a local directory with config.json and the weights, readable by "
        "the server's user, or a Hugging Face id with network access and HF_HUB_OFFLINE unset.",
    },
)
