# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Known causes of a failed SGLang start-up, and what to do about each; and, for a failure none of them
explains, what the component it came from usually means.

Data only. The first entry whose ``pattern`` (a regular expression) occurs in the
failure's traceback, fatal line or last log lines is the diagnosis, so specific
entries come before general ones; an entry with a ``where`` (a regular expression
too) needs it to occur in the same text, for a failure whose words alone are not
its class: an errno is, in a JIT compiler's frames. Users extend it with the ``diagnoses`` option of
wait_for_server, whose entries are tried first. The entries are grouped by class of
failure, and their patterns key on what stays the same across releases: the
exception's type, errno names, and the libraries' own error prefixes rather than a
release's wording. An entry's ``component`` names what failed when the class itself
says it; without one, the component is the package the failure was raised in.

A failure no entry matches still gets a diagnosis (see log.py): from the innermost
frame of its traceback under one of COMPONENTS' packages, or from the first of their
signs in its lines, and the GENERIC_ADVICE for that component.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

DIAGNOSES = (
    # The command line.
    {
        "id": "invalid_argument",
        "component": "SGLang (its command line)",
        # argparse's own words: "<prog>: error: unrecognized arguments: ..." and friends, prog being
        # "launch_server.py", "sglang" or "sglang serve" (log.py's FATAL_LINES); the cause line is that
        # line, which names the flag.
        "pattern": r"(?m)^\S[^\n]*?: error: (unrecognized arguments: |argument -"
        r"|the following arguments are required: |ambiguous option: )",
        "cause": "SGLang refused its command line: a flag it does not know (a typo, underscores instead of "
        "dashes, or a flag of another SGLang release) or a value a flag does not accept.",
        "fix": "Correct or remove the flag named in the cause line; the collection's flags come from its "
        "variables (sglang_server_tensor_parallel_size, sglang_server_port, ...) and anything else from "
        "sglang_server_extra_args. `python -m sglang.launch_server --help` in the server's virtualenv lists "
        "what the installed release accepts.",
    },
    # The software stack: start-up checks, missing packages, builds for another CUDA or torch.
    {
        "id": "cudnn_check",
        "component": "SGLang (its start-up check)",
        "pattern": r"PyTorch 2\.9\.1 & CuDNN Compatibility Issue|SGLANG_DISABLE_CUDNN_CHECK",
        "cause": "SGLang refuses to start with torch 2.9.1 and a cuDNN older than 9.15 (its check for "
        "multimodal models, against a Conv3d bug in that torch).",
        "fix": "Set SGLANG_DISABLE_CUDNN_CHECK=1 (runtime_env_sglang_disable_cudnn_check: true, the "
        "default of the blackwell.gpu_node.runtime_env role) and restart the server.",
    },
    {
        "id": "optional_dependency_missing",
        "pattern": r"DeepEP is not installed|No module named '(deep_ep|mooncake|nvshmem|nixl)\b"
        r"|Please install mooncake|DeepGEMM is not (installed|available)|lib(nvshmem\w*|mooncake\w*)\.so[.\d]*: "
        r"cannot open shared object file",
        "cause": "A feature chosen in the server's flags needs a package the stack does not install: DeepEP "
        "(--moe-a2a-backend deepep), Mooncake (--disaggregation-transfer-backend mooncake, elastic EP), NVSHMEM "
        "(DeepEP's transport) or DeepGEMM (FP8 GEMM kernels).",
        "fix": "Remove the flag from sglang_server_extra_args, or install the package named in the cause line "
        "(deep_ep, mooncake-transfer-engine, nvidia-nvshmem, deep_gemm) into the server's virtualenv at the "
        "version this SGLang release pins, built for the stack profile's CUDA (stack_profile).",
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
        "component": "flashinfer",
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
        "component": "sgl-kernel",
        "pattern": r"sgl-kernel (is installed with version|with minimum required version)",
        "cause": "The installed sgl-kernel is not the version this SGLang needs.",
        "fix": "Install the sgl-kernel version of the stack profile (0.3.21+cu130 for SGLang 0.5.9).",
    },
    # The service user's files: the caches the JIT compilers write.
    {
        "id": "jit_cache_not_writable",
        "component": "a JIT compiler's cache directory",
        # The errno of a directory that cannot be made or written (os.makedirs names the first one it could not
        # make: HOME itself where HOME does not exist), or DeepGEMM's C++ "Failed to make directory: <path>, created:
        # 0, value: <errno>"; where: the code that makes a JIT cache, or a cache's own path.
        "pattern": r"\[Errno (?:13|30)\] (?:Permission denied|Read-only file system)|Failed to make directory: ",
        "where": r"flashinfer/jit/|triton/runtime/cache\.py|torch/_inductor/|torch/utils/cpp_extension\.py|tvm_ffi/"
        r"|tilelang/|cutlass/base_dsl/|sglang/srt/compilation/|custom_all_reduce_utils\.py|deep_gemm|/\.cache/"
        r"|/\.triton|/\.tilelang|/\.nv/ComputeCache|torchinductor_|cutlass_python_cache",
        "cause": "A JIT compiler could not make or write its cache directory: flashinfer, Triton, torch (Inductor, "
        "extensions), DeepGEMM, tvm-ffi, TileLang, CuTe DSL and SGLang keep their caches under the server user's "
        "HOME (~/.cache, ~/.triton, ~/.deep_gemm) or /tmp unless a variable of their own names another place, and "
        "that HOME does not exist or is not the user's (the cause line names the first directory that could not "
        "be made).",
        "fix": "Give each cache a directory of the server's user: the blackwell.gpu_node.runtime_env role renders "
        "FLASHINFER_WORKSPACE_BASE, TRITON_HOME, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR, "
        "DG_JIT_CACHE_DIR, SGLANG_DG_CACHE_DIR, SGLANG_CACHE_DIR, TVM_FFI_CACHE_DIR, TILELANG_CACHE_DIR, "
        "CUTE_DSL_CACHE_DIR, CUDA_CACHE_PATH and XDG_CACHE_HOME into the server's virtualenv, a directory per stack "
        "profile under runtime_env_cache_root (owned by runtime_env_cache_owner), and HF_HOME from "
        "runtime_env_hf_home. Run it with runtime_env_cache_root on a filesystem that user can write, then restart "
        "the server.",
    },
    # Resources: host and GPU memory.
    {
        "id": "host_out_of_memory",
        "component": "the host's memory",
        "pattern": r"\[Errno 12\] Cannot allocate memory",
        "cause": "The host, not the GPU, ran out of memory (RAM or a memory ulimit) while starting worker processes.",
        "fix": "Free host memory or raise the service's memory limit (ulimit -v, the container's or the systemd "
        "unit's MemoryMax); each tensor-parallel rank is a process of its own.",
    },
    {
        "id": "cuda_out_of_memory",
        "component": "GPU memory",
        "pattern": r"CUDA out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|CUDA error: out of memory"
        r"|Not enough memory|insufficient (GPU|device) memory",
        "cause": "The GPU ran out of memory while loading weights, allocating the KV cache or capturing CUDA graphs.",
        "fix": "Free the GPUs (nvidia-smi shows who holds them; the sglang_server module stops its own server), "
        "lower --mem-fraction-static (sglang_server_extra_args) or sglang_server_cuda_graph_max_bs, or raise "
        "sglang_server_tensor_parallel_size.",
    },
    # The model against the parallelism asked for.
    {
        "id": "tensor_parallel_exceeds_gpus",
        "component": "the GPUs the server sees",
        # CUDA's words for a device index past the last visible GPU, as torch and NCCL print them (HIP's are the
        # same), torch's hint under them and CUDA's name for the error.
        "pattern": r"invalid device ordinal|GPU device may be out of range|cudaErrorInvalidDevice",
        "cause": "A rank asked for a GPU that the server does not see: its ranks need more GPUs on this node than "
        "the host has, or than CUDA_VISIBLE_DEVICES in the server's environment leaves visible. A server takes "
        "tensor-parallel size x pipeline-parallel size GPUs per node (x the data-parallel size without "
        "--enable-dp-attention), counted from --base-gpu-id.",
        "fix": "Count the GPUs the server sees: nvidia-smi -L lists the host's, and CUDA_VISIBLE_DEVICES in "
        "sglang_server_env (indices or UUIDs; empty means none) narrows them. Lower "
        "sglang_server_tensor_parallel_size (or --pp-size, --dp-size, --base-gpu-id in sglang_server_extra_args) to "
        "fit, or make more GPUs visible. Fewer GPUs in nvidia-smi -L than the host holds means one was lost: the "
        "kernel log's Xid says why.",
    },
    {
        "id": "tensor_parallel_not_divisible",
        # SGLang's ensure_divisibility() says "<n> is not divisible by <tp>"; quantized MoE layers say
        # "... is not divisible by weight quantization block_n".
        "pattern": r"\b\d+ is not divisible by \d+|ensure_divisibility|is not divisible by weight quantization"
        r"|must be divisible by (the )?(tensor[ _-]parallel|tp)[ _-]?size",
        "cause": "The tensor-parallel size does not divide one of the model's dimensions (attention or key/value "
        "heads, a vision tower's heads, or the MoE expert/intermediate size per quantization block).",
        "fix": "Choose a sglang_server_tensor_parallel_size that divides the model's num_attention_heads, "
        "num_key_value_heads (and the vision config's heads) and moe_intermediate_size / weight_block_size in "
        "its config.json; for MoE models expert parallelism (--ep-size) or --enable-dp-attention in "
        "sglang_server_extra_args split the experts differently.",
    },
    # The GPU and its kernels.
    {
        "id": "gpu_too_old",
        "component": "the GPU",
        "pattern": r"SGLang only supports sm\d+ and above",
        "cause": "The GPU's compute capability is below what SGLang supports.",
        "fix": "Run on a supported GPU (Blackwell sm_100/sm_120, Hopper sm_90 and so on); check CUDA_VISIBLE_DEVICES.",
    },
    {
        "id": "gpu_architecture_unsupported",
        "pattern": r"not supported in this architecture|fp8e4nv data type is not supported|CUDA arch < \d+"
        r"|no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice",
        "cause": "A kernel or data type the server uses is not available for this GPU's architecture: FP8 "
        "(fp8e4nv) needs sm_89 or newer (Ada, Hopper, Blackwell), and \"no kernel image\" means a package was "
        "built without code for this GPU (for example a wheel without sm_120 on an RTX PRO 6000).",
        "fix": "On a GPU older than sm_89 serve a BF16/FP16 checkpoint or a quantization it supports and drop "
        "--quantization fp8 / --kv-cache-dtype fp8_e4m3 from sglang_server_extra_args; for \"no kernel image\" "
        "install the stack profile built for this GPU (stack_profile, the cu130 wheels for Blackwell).",
    },
    {
        "id": "gpu_kernel_assert",
        # The device-side assert's own line, CUDA's name for it, and the host-side check of DeepGEMM's and
        # sgl-kernel's JIT ("Assertion error (<file>:<line>): <condition>"). The component is the asserting file's.
        "pattern": r"Assertion failed: \S+\.cuh?:\d+|device-side assert triggered|cudaErrorAssert|CUDA_ERROR_ASSERT"
        r"|Assertion `[^`]*' failed|Assertion error \(\S+\.(hpp|cuh?|h):\d+\)",
        "cause": "A GPU kernel's own check failed (a device-side assert, or its launcher's check): the kernel got "
        "input it does not accept, most often a version mismatch between SGLang and the kernel library (DeepGEMM, "
        "sgl-kernel, flashinfer) or a checkpoint format the kernel does not expect.",
        "fix": "Install the kernel library at the version the stack profile pins with this SGLang (stack_profile); "
        "or avoid the kernel: SGLANG_ENABLE_JIT_DEEPGEMM=0 in sglang_server_env for DeepGEMM, another "
        "sglang_server_attention_backend for attention kernels. CUDA_LAUNCH_BLOCKING=1 in sglang_server_env "
        "locates it; report it upstream with the cause line.",
    },
    {
        "id": "kernel_compilation",
        "pattern": r"CompilationError|Internal Triton PTX codegen error|ptxas\b[^\n]*\berror\b|ptxas fatal"
        r"|triton/compiler/compiler\.py\", line \d+, in compile\b|nvcc fatal|Ninja is required"
        r"|Error building extension",
        "cause": "A GPU kernel failed to compile at start-up (Triton, DeepGEMM or flashinfer JIT); the compiler's "
        "own message is in the cause line or the traceback.",
        "fix": "Use the Triton and CUDA toolkit of the stack profile (stack_profile): Triton must run the stack's "
        "ptxas (runtime_env_triton_ptxas_path) and JIT builds its nvcc (runtime_env_cuda_home); clear the server "
        "user's stale caches (~/.triton/cache, ~/.cache/flashinfer), or avoid the kernel (another "
        "sglang_server_attention_backend, or --disable-cuda-graph in sglang_server_extra_args).",
    },
    # Communication between GPUs and nodes, and the server's ports.
    {
        "id": "gpu_peer_access",
        "component": "PCIe peer-to-peer between the GPUs",
        "pattern": r"peer access is not supported between these two devices|cudaErrorPeerAccessUnsupported"
        r"|peer mapping resources exhausted",
        "cause": "The GPUs cannot reach each other's memory directly over PCIe: peer-to-peer is blocked (IOMMU "
        "or PCIe ACS) or not supported by these GPUs, and SGLang's custom all-reduce or NCCL's P2P path needs it.",
        "fix": "Set sglang_server_disable_custom_all_reduce: true (the reference PCIe box sets it), and let NCCL "
        "go through host memory: NCCL_P2P_DISABLE=1 in runtime_env_nccl_overrides. To enable P2P instead, put "
        "the IOMMU in passthrough (iommu=pt) and disable ACS on the PCIe switches, then check with nvidia-smi "
        "topo -p2p r.",
    },
    {
        "id": "nccl",
        "component": "NCCL",
        "pattern": r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage"
        r"|ncclRemoteError|NCCL WARN",
        "cause": "NCCL failed to set up or run collective communication between the GPUs (\"unhandled system "
        "error\" is a failed system call: shared memory, sockets, or PCIe peer access).",
        "fix": "Rerun with NCCL_DEBUG=INFO (runtime_env_nccl_overrides) to see the failing step. On PCIe-only "
        "boxes use the pcie_blackwell NCCL profile (runtime_env_nccl_profile; its NCCL_P2P_LEVEL=SYS) and, if "
        "peer access is blocked by the IOMMU or ACS, NCCL_P2P_DISABLE=1 in runtime_env_nccl_overrides; in "
        "containers give /dev/shm room (--shm-size or --ipc=host); check that no other process holds the GPUs, "
        "and for multi-node runs that the first node's sglang_server_dist_init_port is reachable.",
    },
    {
        "id": "nvshmem_init",
        "component": "NVSHMEM (DeepEP's transport)",
        # NVSHMEM's own messages: "<source file>:<line>: non-zero status: <n> <what failed>" and its state errors.
        # An init function is named by up to three words before "init" ("nvshmemi_common_init"), each ending at its
        # underscore: a word that could hold "init" itself would make the pattern backtrack over a long name.
        "pattern": r"nvshmem/src/\S+:\d+:? non-zero status: \d+|NVSHMEM API called before NVSHMEM initialization"
        r"|nvshmem (setup connections|initialization) failed|\bnvshmemi?_(?:[a-z]+_){0,3}init[a-z_]* failed",
        "cause": "NVSHMEM, the GPU-initiated transport DeepEP's all-to-all runs on (--moe-a2a-backend deepep), could "
        "not set up its connections between the GPUs or nodes: its InfiniBand/RoCE queue pairs (ibv_modify_qp), "
        "endpoints (ep_connect) or bootstrap failed.",
        "fix": "Check the RDMA network the cause line names (ibv_devinfo; in a container the IB devices, "
        "IPC_LOCK and a large memlock limit), and tell NVSHMEM which NIC each GPU uses: NVSHMEM_HCA_PE_MAPPING or "
        "NVSHMEM_IB_GID_INDEX (RoCE) in sglang_server_env. Without such a network, remove --moe-a2a-backend deepep "
        "from sglang_server_extra_args.",
    },
    {
        "id": "transfer_engine",
        "component": "Mooncake transfer engine",
        "pattern": r"Mooncake Transfer Engine initialization failed|SocketHandShakePlugin: .*(\[\d+\]|failed)"
        r"|Mooncake memory registration failed|use IPv4 address instead",
        "cause": "Mooncake's transfer engine, which moves the KV cache between prefill and decode servers "
        "(--disaggregation-mode) or to a hierarchical cache store, could not start or reach its peer: an IPv6 "
        "host address it split as host:port, a name it cannot resolve, a port it may not bind, or RDMA memory "
        "registration.",
        "fix": "Give the server an IPv4 address for the transfer engine (--host / --disaggregation-ib-device in "
        "sglang_server_extra_args), or enable Mooncake's IPv6 support with MC_USE_IPV6=1 in sglang_server_env; "
        "check the MOONCAKE_* settings in sglang_server_env; without disaggregation, remove "
        "--disaggregation-mode and --disaggregation-transfer-backend from sglang_server_extra_args.",
    },
    {
        "id": "port_in_use",
        # The errno by its number and names, and SGLang's own check of a port before it binds it.
        "pattern": r"[Aa]ddress already in use|\[Errno 98\]|EADDRINUSE|port at \d+ is not available"
        r"|port is used by a process already",
        "cause": "Another process already listens on a port the server needs: its HTTP port, the metrics port, "
        "the torch.distributed/NCCL port (--dist-init-addr, --nccl-port) or one of its ZMQ ports; the cause "
        "line names it.",
        "fix": "Find the holder of the port named in the cause line (ss -ltnp) and stop it (a previous server: "
        "state: stopped with the sglang_server module), or move the server: sglang_server_port for HTTP, "
        "sglang_server_dist_init_port for multi-node start-up, --nccl-port or --metrics-port in "
        "sglang_server_extra_args.",
    },
    # The running server.
    {
        "id": "warmup_request",
        "component": "SGLang (its warm-up request)",
        "pattern": r"warmup error",
        "cause": "The server started, but SGLang's own warm-up request to it failed (an HTTP proxy in between, "
        "an API key, or a crash while serving it).",
        "fix": "Make local traffic bypass proxies (no_proxy=127.0.0.1,localhost in sglang_server_env), "
        "check sglang_server_api_key, and read the traceback for a crash.",
    },
    # The driver.
    {
        "id": "cuda_driver",
        "component": "the NVIDIA driver",
        "pattern": r"Error 802|system not yet initialized|driver version is insufficient"
        r"|cudaErrorInsufficientDriver|Error 804|forward compatibility was attempted"
        r"|NVIDIA driver on your system is too old",
        "cause": "The NVIDIA driver cannot serve this CUDA runtime (a driver older than the runtime, or on NVSwitch "
        "systems nvidia-fabricmanager not running).",
        "fix": "Check nvidia-smi: CUDA 13 needs driver branch 580 or newer. Install a driver the stack profile "
        "supports (cuda_driver_install: true, cuda_driver_branch) or choose a stack_profile whose CUDA the "
        "installed driver serves; on NVSwitch (HGX) systems start nvidia-fabricmanager at the driver's exact "
        "version.",
    },
    # The model and where it comes from.
    {
        "id": "model_type_unknown",
        # Each layer's own words, the same in SGLang 0.5.9, 0.5.17 and 0.5.23: transformers' for a config.json
        # model_type it does not know (AutoConfig); SGLang's model loader's for an architecture that neither it nor
        # transformers implements (resolve_transformers_arch); its registry's for one it cannot resolve at all. The
        # component is the layer that raised it.
        "pattern": r"has model type `[^`]+` but Transformers does not recognize this architecture"
        r"|Cannot find model module\. '[^'\n]*' is not a registered model|Model architectures \[[^\]\n]*\] are not "
        r"supported for now",
        "cause": "Neither this SGLang nor its transformers knows the model's architecture (config.json's model_type "
        "or architectures): a model newer than the stack, a wrong or mistyped config.json, or a custom model "
        "without the code its auto_map names.",
        "fix": "Serve it with a stack_profile whose SGLang and transformers support the model (SGLang's list of "
        "supported models names the architectures), and check that sglang_server_model_path points at the model "
        "you meant and its config.json is the model's own; a model with code of its own needs that code beside "
        "its config.json and sglang_server_trust_remote_code: true.",
    },
    {
        "id": "trust_remote_code",
        "component": "transformers",
        "pattern": r"contains custom code which must be executed|requires you to execute (the configuration file"
        r"|some code) in that repo",
        "cause": "The model ships its own Python code (a custom architecture or tokenizer) and the server was "
        "not allowed to run it.",
        "fix": "Read the model repository's code, then set sglang_server_trust_remote_code: true (the code runs "
        "as the server's user).",
    },
    {
        "id": "hf_gated_model",
        "component": "the Hugging Face Hub",
        "pattern": r"GatedRepoError|[Cc]annot access gated repo|You are trying to access a gated repo"
        r"|Access to model \S+ is restricted|(401|403) Client Error",
        "cause": "The model is gated (or private) on Hugging Face and the server's download had no token with "
        "access to it.",
        "fix": "Accept the model's terms on huggingface.co with the account whose token the server uses and pass "
        "the token as HF_TOKEN in sglang_server_secret_env (not sglang_server_env, which is not masked); or "
        "download the model beforehand and set sglang_server_model_path to the local directory.",
    },
    {
        "id": "model_path",
        "component": "the model path",
        "pattern": r"is not a local folder and is not a valid model identifier|Repository Not Found"
        r"|RepositoryNotFoundError|does not appear to have a file named config\.json|Can't load the configuration of"
        r"|No such file or directory: .*(config\.json|safetensors)|HFValidationError",
        "cause": "The model path does not exist or is not a model directory (config.json missing).",
        "fix": "Check sglang_server_model_path: it must be a local directory with config.json and the weights, "
        "readable by the server's user, or a Hugging Face id (sglang_server_model_is_hub_id) with network access "
        "and HF_HUB_OFFLINE unset.",
    },
)

# What a failure can come from: the package directory its frames run in (None: no Python package of its own),
# the name an operator knows it by, and its signs in a log without a traceback, most specific first (the first
# that occurs in the failure's lines, then in the last log lines, names the component).
COMPONENTS = (
    ("nvshmem", "NVSHMEM (DeepEP's transport)", r"\bnvshmem|NVSHMEM"),
    ("deep_ep", "DeepEP", r"\bdeep_ep\b|DeepEP"),
    ("deep_gemm", "DeepGEMM", r"deep_gemm|DeepGEMM|[Dd]eep[Gg]emm"),
    ("mooncake", "Mooncake transfer engine", r"[Mm]ooncake|transfer_engine\.cpp|transfer_metadata\w*\.cpp"),
    (None, "NCCL", r"\bNCCL\b|\bnccl[A-Z]\w*"),
    ("flashinfer", "flashinfer", r"flashinfer"),
    ("sgl_kernel", "sgl-kernel", r"sgl_kernel|sgl-kernel"),
    ("triton", "Triton", r"\btriton\b|Triton"),
    ("transformers", "transformers", r"\btransformers\b"),
    ("huggingface_hub", "the Hugging Face Hub", r"huggingface_hub"),
    ("vllm", "vLLM (imported by SGLang)", r"\bvllm\b"),
    ("torch_npu", "torch_npu (Ascend)", r"torch_npu|\bNPU\b"),
    ("torch", "PyTorch", r"\btorch\b|\bc10\b"),
    ("sglang", "SGLang", r"sglang|Scheduler hit an exception|[Rr]eceived sigquit|SIGQUIT received"),
)
# The component of a failure whose log names none of them: the server itself.
SERVER_COMPONENT = "SGLang"

# Lines that start-ups which go well log too, naming a component (or a catalogue entry's words) without a failure
# of it: they never choose the component or the diagnosis. Each is searched for in one line.
HARMLESS_LINES = (
    # SGLang without DeepGEMM uses Triton's kernels instead.
    r"Failed to import deep_gemm, falling back to triton",
    r"All deep_gemm operations loaded successfully",
    # The settings, which name every backend and transfer engine, chosen or not.
    r"server_args=ServerArgs\(",
    r"Attention backend not set\. Use \w+ backend by default",
    # SGLang's steps, which name torch.distributed and the weights' torch dtype.
    r"Init torch distributed (begin|ends)\.",
    r"Load weight end\. type=",
    r"Downcasting torch\.\w+ to torch\.\w+\.",
    # No MoE kernel config tuned for this Triton release: another release's is used.
    r"Config file not found at .* Fallback to triton version",
    # torch's warnings on import and before it compiles an extension.
    r"FutureWarning: The pynvml package is deprecated",
    r"TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included",
    r"If this is not desired, please set os\.environ\['TORCH_CUDA_ARCH_LIST'\]",
)

# For a failure no catalogue entry explains: what its component means and the first step to take, by component
# and, within it, by where in the traceback it happened (the first row whose ``where`` occurs in the traceback,
# or that has none).
GENERIC_ADVICE = (
    {
        "component": "SGLang",
        "where": r"cuda_graph_runner|graph_runner\.py|[Cc]apture cuda graph|Capturing batches",
        "cause": "SGLang failed while capturing CUDA graphs: a bug in SGLang or a mismatch between it and the "
        "kernels it captures (this build's platform, sgl-kernel, flashinfer).",
        "fix": "Start without CUDA graphs to confirm: --disable-cuda-graph in sglang_server_extra_args (slower "
        "decoding), or fewer batch sizes with sglang_server_cuda_graph_max_bs; then report it to SGLang with the "
        "traceback and the versions of the stack profile.",
    },
    {
        "component": "SGLang",
        "where": r"sglang/srt/speculative/",
        "cause": "SGLang failed while setting up speculative decoding (its draft model or draft worker).",
        "fix": "Start without speculative decoding to confirm (unset sglang_server_speculative_algorithm), check "
        "sglang_server_speculative_draft_model_path, and report it to SGLang with the traceback.",
    },
    {
        "component": "SGLang",
        "where": r"sglang/srt/layers/attention/",
        "cause": "SGLang's attention backend failed.",
        "fix": "Choose another sglang_server_attention_backend (triton works everywhere), and report it to SGLang "
        "with the traceback.",
    },
    {
        "component": "SGLang",
        "where": r"sglang/srt/layers/(moe|quantization)/",
        "cause": "SGLang's MoE or quantization layer failed on this model, parallelism or GPU.",
        "fix": "Try another --moe-runner-backend or without --quantization in sglang_server_extra_args, or another "
        "sglang_server_tensor_parallel_size; report it to SGLang with the traceback.",
    },
    {
        "component": "SGLang",
        "where": None,
        "cause": "SGLang itself raised it: a bug, or a mismatch between this SGLang and the packages or flags it "
        "was given.",
        "fix": "Check that the virtualenv holds the stack profile's versions (the ml_stack role) and that "
        "sglang_server_extra_args holds only flags of this release; then report it to SGLang with the traceback.",
    },
    {
        "component": "sgl-kernel",
        "where": None,
        "cause": "An sgl-kernel kernel failed: sgl-kernel not built for this GPU, torch or CUDA, or a kernel bug.",
        "fix": "Install the sgl-kernel of the stack profile (stack_profile) built for this CUDA and GPU; report it "
        "to SGLang (sgl-kernel) with the traceback.",
    },
    {
        "component": "flashinfer",
        "where": None,
        "cause": "A flashinfer kernel failed (attention, sampling or MoE).",
        "fix": "Install the flashinfer versions of the stack profile, or avoid it: another "
        "sglang_server_attention_backend, or --sampling-backend pytorch in sglang_server_extra_args; report it to "
        "flashinfer with the traceback.",
    },
    {
        "component": "DeepGEMM",
        "where": None,
        "cause": "DeepGEMM, the FP8 GEMM kernels SGLang compiles at start-up, failed.",
        "fix": "Set SGLANG_ENABLE_JIT_DEEPGEMM=0 in sglang_server_env to use other FP8 kernels, or install the "
        "DeepGEMM this SGLang pins; its JIT needs the stack's CUDA toolkit (runtime_env_cuda_home).",
    },
    {
        "component": "DeepEP",
        "where": None,
        "cause": "DeepEP, the expert-parallel all-to-all, failed.",
        "fix": "Remove --moe-a2a-backend deepep from sglang_server_extra_args to confirm, and check the RDMA "
        "network it runs on.",
    },
    {
        "component": "NVSHMEM (DeepEP's transport)",
        "where": None,
        "cause": "NVSHMEM, DeepEP's transport, failed.",
        "fix": "Check the RDMA network and NVSHMEM's settings in sglang_server_env, or remove --moe-a2a-backend "
        "deepep from sglang_server_extra_args.",
    },
    {
        "component": "Mooncake transfer engine",
        "where": None,
        "cause": "Mooncake's transfer engine failed.",
        "fix": "Check its address and MOONCAKE_* settings in sglang_server_env, or remove the disaggregation "
        "flags from sglang_server_extra_args.",
    },
    {
        "component": "NCCL",
        "where": None,
        "cause": "NCCL failed.",
        "fix": "Rerun with NCCL_DEBUG=INFO (runtime_env_nccl_overrides) to see the failing step.",
    },
    {
        "component": "Triton",
        "where": None,
        "cause": "A Triton kernel failed to compile or run.",
        "fix": "Use the stack profile's Triton and ptxas (runtime_env_triton_ptxas_path), clear ~/.triton/cache of "
        "the server's user, or avoid the kernel (another sglang_server_attention_backend).",
    },
    {
        "component": "PyTorch",
        "where": None,
        "cause": "PyTorch raised it, called by SGLang: a GPU, driver or memory problem, or a torch other than the "
        "one this SGLang was built against.",
        "fix": "Check that torch is the stack profile's (the ml_stack role) and the GPUs are healthy (nvidia-smi); "
        "the SGLang frames of the traceback say which step called it.",
    },
    {
        "component": None,
        "where": None,
        "cause": "A package SGLang depends on raised it.",
        "fix": "Install the versions of the stack profile (the ml_stack role); report it to that package with "
        "the traceback.",
    },
)
