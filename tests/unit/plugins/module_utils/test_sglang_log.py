import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import (
    StartupClassifier,
    catalogue_entry,
    diagnose,
    parse_line,
)


def classify(lines, final=False, **options):
    classifier = StartupClassifier(**options)
    for line in lines:
        classifier.feed(line)
    classifier.end_of_data(final=final)
    return classifier


@pytest.mark.parametrize(
    "line,ranks,message,prefixed",
    [
        ("[2026-01-01 12:00:00] hello", "", "hello", True),
        ("[2026-01-01 12:00:00 TP3] hello", "TP3", "hello", True),
        ("[2026-01-01 12:00:00.123 DP0 TP7 EP7] hello", "DP0 TP7 EP7", "hello", True),
        ("\x1b[32m[2026-01-01 12:00:00 TP1]\x1b[0m hi", "TP1", "hi", True),
        ('  File "x.py", line 1, in <module>', "", '  File "x.py", line 1, in <module>', False),
    ],
)
def test_parse_line(line, ranks, message, prefixed):
    assert parse_line(line) == (ranks, message, prefixed)


def test_ready_line():
    classifier = classify(["[2026-01-01 12:00:00] The server is fired up and ready to roll!"])
    assert classifier.failure is None
    assert classifier.ready_line.endswith("ready to roll!")


@pytest.mark.parametrize(
    "line",
    [
        "[2026-01-01 12:00:00] Failed to import deep_gemm, falling back to triton. (error: No module named x)",
        "[2026-01-01 12:00:00 TP0] WARNING: DeepGEMM scale format check failed, using fp32 scales",
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated",
        "[2026-01-01 12:00:00] Health check failed. Server couldn't get a response from detokenizer",
        "[2026-01-01 12:00:00] INFO: exception handling configured; error rate 0",
        "NCCL INFO NET/IB : No device found.",
    ],
)
def test_harmless_lines_do_not_fail(line):
    classifier = classify([line], final=True)
    assert classifier.failure is None and classifier.ready_line is None


@pytest.mark.parametrize(
    "line",
    [
        "[2026-01-01 12:00:00] Received sigquit from a child process. It usually means the child failed.",
        "[2026-01-01 12:00:00 TP0] Initialization failed. warmup error: boom",
        "[2026-01-01 12:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "terminate called after throwing an instance of 'c10::Error'",
        "[2026-01-01 12:00:00 TP2] NCCL WARN Cuda failure 'out of memory'",
        "[2026-01-01 12:00:00] ERROR:   [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 30000): address already in use",
        "Fatal Python error: Segmentation fault",
        # Each of these matches one fatal pattern only, so that each pattern is needed.
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: see the lines above",
        "[2026-01-01 12:00:00] DetokenizerManager hit an exception: see the lines above",
        "[2026-01-01 12:00:00] TokenizerManager hit an exception: see the lines above",
        "[2026-01-01 12:00:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "Fatal Python error: Aborted",
        "/bin/sh: line 1:  4242 Segmentation fault      python3 -m sglang.launch_server",
        "Aborted (core dumped)",
        "[2026-01-01 12:00:00 TP1] CUDA out of memory. Tried to allocate 2.00 GiB",
        "[2026-01-01 12:00:00 TP1] caught torch.OutOfMemoryError in the warm-up",
        "[2026-01-01 12:00:00 TP1] CUDA error: an illegal memory access was encountered",
        "[2026-01-01 12:00:00 TP1] NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled cuda error",
        "[2026-01-01 12:00:00 TP1] Call to CUDA function failed: ncclUnhandledCudaError",
        "[2026-01-01 12:00:00 TP1] init failed with ncclSystemError",
        "[2026-01-01 12:00:00 TP1] init failed with ncclInternalError",
        "[2026-01-01 12:00:00 TP1] init failed with ncclInvalidUsage",
        "[2026-01-01 12:00:00 TP1] peer failed: ncclRemoteError",
    ],
)
def test_fatal_lines_without_traceback_fail(line):
    classifier = classify([line])
    assert classifier.failure is not None
    assert classifier.failure.cause == parse_line(line)[1].strip()


def test_user_fatal_pattern():
    assert classify(["NVRM: Xid 79, GPU has fallen off the bus"], fatal_patterns=[r"Xid \d+"]).failure


INTERLEAVED = [
    "[2026-01-01 12:00:00 TP0] Capture cuda graph begin.",
    "[2026-01-01 12:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "scheduler.py", line 2950, in run_scheduler_process',
    "    scheduler = Scheduler(...)",
    "[2026-01-01 12:00:01 TP1] Capture cuda graph end. Time elapsed: 5.31 s.",
    '  File "cuda_graph_runner.py", line 390, in capture',
    "    out = run_once()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "[2026-01-01 12:00:02] Received sigquit from a child process. It usually means the child failed.",
]


def test_interleaved_traceback_is_reported_whole_and_alone():
    failure = classify(INTERLEAVED).failure
    assert failure.ranks == "TP3"
    assert failure.cause == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert failure.lines == [
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "scheduler.py", line 2950, in run_scheduler_process',
        "    scheduler = Scheduler(...)",
        '  File "cuda_graph_runner.py", line 390, in capture',
        "    out = run_once()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    report = failure.as_dict()
    assert report["traceback"].split("\n") == failure.lines
    assert report["cause"].startswith("[TP3] torch.OutOfMemoryError")
    assert report["diagnosis"]["id"] == "cuda_out_of_memory"


def test_chained_traceback_stays_one_failure():
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in <module>',
        "RuntimeError: sgl_kernel could not be loaded",
    ]
    failure = classify(lines).failure
    assert failure.cause == "RuntimeError: sgl_kernel could not be loaded"
    assert failure.lines == lines
    assert failure.as_dict()["diagnosis"]["id"] == "cuda12_library_on_cuda13"


def test_traceback_waits_for_its_exception_line_unless_the_process_is_gone():
    lines = ["[2026-01-01 12:00:00 TP0] Traceback (most recent call last):", '  File "a.py", line 1']
    assert classify(lines).failure is None
    assert classify(lines, final=True).failure.cause == (
        "Python traceback (traceback cut off before its exception line)"
    )


def test_exception_line_without_the_start_of_its_traceback_fails():
    lines = ['  File "parallel_state.py", line 255, in __init__', "    raise RuntimeError(f\"NCCL error: {e}\")",
             "RuntimeError: NCCL error: unhandled system error"]
    assert classify(lines).failure.cause == "RuntimeError: NCCL error: unhandled system error"


@pytest.mark.parametrize("line", ["Exception: flashinfer_python is installed with version 0.6.3", "KeyError: 'x'",
                                  "torch.OutOfMemoryError: CUDA out of memory.", "ImportError:"])
def test_bare_exception_lines_fail(line):
    assert classify([line]).failure.cause == line


@pytest.mark.parametrize("line", ["Exceptional throughput today", "ErrorRate: 0", "  ValueError: quoted in a frame"])
def test_lines_that_only_look_like_exceptions_do_not_fail(line):
    assert classify([line], final=True).failure is None


def test_prefix_after_a_progress_bar_still_names_the_rank():
    line = "Capturing batches (bs=256):   0%|  | 0/51 [00:00<?, ?it/s][2026-05-08 14:34:42 TP3] Scheduler hit an exception"
    assert parse_line(line) == ("TP3", "Scheduler hit an exception", True)


def test_ready_line_after_a_failure_does_not_count():
    classifier = classify(INTERLEAVED + ["[2026-01-01 12:00:03] The server is fired up and ready to roll!"])
    assert classifier.failure is not None and classifier.ready_line is None


def test_custom_ready_pattern():
    assert classify(["[2026-01-01 12:00:00 TP0] Load weight end."], ready_pattern=r"Load weight end").ready_line


@pytest.mark.parametrize(
    "text,expected",
    [
        ("RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected", "cudnn_check"),
        ("ImportError: libcudart.so.12: cannot open shared object file", "cuda12_library_on_cuda13"),
        (
            "ImportError: /x/sgl_kernel/common_ops.abi3.so: undefined symbol: "
            "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib",
            "torch_abi_mismatch",
        ),
        (
            "RuntimeError: flashinfer-cubin version (0.6.3) does not match flashinfer version (0.6.4). Please "
            "install the same version of both packages. Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check.",
            "flashinfer_version_check",
        ),
        (
            "Exception: sgl-kernel is installed with version 0.3.16, which is less than the minimum required "
            "version 0.3.21. Please reinstall the latest version with `pip install sgl-kernel --force-reinstall`",
            "sgl_kernel_version",
        ),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 26.00 MiB.", "cuda_out_of_memory"),
        (
            "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, unhandled cuda error\n"
            "ncclUnhandledCudaError: Call to CUDA function failed.",
            "nccl",
        ),
        ("[Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
         "port_in_use"),
        (
            "OSError: /shared/kimi is not a local folder and is not a valid model identifier listed on "
            "'https://huggingface.co/models'",
            "model_path",
        ),
        # Real lines from tests/data/sglang_logs (SOURCES.md names their reports).
        ("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2", "invalid_argument"),
        ("ImportError: DeepEP is not installed. Please install DeepEP package from "
         "https://github.com/deepseek-ai/deepep.", "optional_dependency_missing"),
        ("AssertionError: 16 is not divisible by 6", "tensor_parallel_not_divisible"),
        ("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\"",
         "gpu_architecture_unsupported"),
        ("RuntimeError: TopKTopPSamplingFromProbs failed with error code no kernel image is available for "
         "execution on the device", "gpu_architecture_unsupported"),
        ("ERROR 03-27 12:41:06 [core.py:344] ptxas /tmp/tmp6qa78v4o.ptx, line 661; error   : Modifier "
         "'.evict_last' cannot be combined with modifier '.cg'", "kernel_compilation"),
        ('(SGLangEngine pid=3061557)   File "/root/anaconda3/envs/_slime_/lib/python3.11/site-packages/triton/'
         'compiler/compiler.py", line 310, in compile', "kernel_compilation"),
        ("Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not "
         "supported between these two devices'", "gpu_peer_access"),
        ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "nccl"),
        ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
         "port: 42173, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", "port_in_use"),
        ("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version", "cuda_driver"),
        ("RuntimeError: The NVIDIA driver on your system is too old (found version 11060).", "cuda_driver"),
        ("ValueError: Loading tiiuae/falcon-7b-instruct requires you to execute the configuration file in that repo "
         "on your local machine.", "trust_remote_code"),
        ("Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-2-7b-chat-hf/resolve/main/"
         "config.json.", "hf_gated_model"),
        ("OSError: You are trying to access a gated repo.", "hf_gated_model"),
        ("RuntimeError: something nobody has seen before", "not_in_catalogue"),
    ],
)
def test_diagnosis_catalogue(text, expected):
    found = diagnose(text)
    assert found["id"] == expected and found["fix"] and found["component"]


@pytest.mark.parametrize("prog", [
    "launch_server.py",  # SGLang 0.5.9, python -m sglang.launch_server
    "sglang",  # SGLang 0.5.9, sglang serve
    "sglang serve",  # SGLang 0.5.10 on, either entrypoint
])
def test_an_argparse_error_is_the_cause_and_names_the_flag(prog):
    line = "%s: error: unrecognized arguments: --reasoning_parser kimi_k2" % prog
    failure = classify([line]).failure
    assert failure.cause == line
    assert failure.as_dict()["diagnosis"]["id"] == "invalid_argument"


def test_the_warning_of_python_m_sglang_launch_server_is_no_failure():
    # SGLang 0.5.10 on, as Python's warnings module writes it to stderr before the start-up's own lines.
    lines = ["/opt/ml-env/lib/python3.12/site-packages/sglang/launch_server.py:56: UserWarning: 'python -m "
             "sglang.launch_server' is still supported, but 'sglang serve' is the recommended entrypoint.",
             "  Example: sglang serve --model-path <model> [options]",
             "  warnings.warn("]
    assert classify(lines, final=True).failure is None


def test_catalogue_ids_are_unique_and_every_entry_has_a_cause_and_a_fix():
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES

    ids = [entry["id"] for entry in DIAGNOSES]
    assert len(ids) == len(set(ids))
    for entry in DIAGNOSES:
        assert entry["cause"] and entry["fix"], entry["id"]


def test_harmless_warnings_name_no_diagnosis():
    # SGLang logs this on successful start-ups where DeepGEMM is absent: it is no missing dependency.
    assert catalogue_entry("[2026-01-01 12:00:00] Failed to import deep_gemm, falling back to triton kernels. "
                           "(error: No module named 'deep_gemm')") is None


# Lines of start-ups that went well (tests/data/sglang_logs), each naming a component.
HARMLESS_NAMING_A_COMPONENT = [
    "[2026-01-01 12:00:00] Failed to import deep_gemm, falling back to triton kernels. "
    "(error: No module named 'deep_gemm')",
    "[2025-09-11 10:24:40 TP0] All deep_gemm operations loaded successfully!",
    "[2026-01-01 12:00:00] server_args=ServerArgs(model_path='/m', attention_backend='flashinfer', "
    "disaggregation_transfer_backend='mooncake', moe_a2a_backend='deepep')",
    "[2026-01-01 12:00:00] Attention backend not set. Use flashinfer backend by default.",
    "[2026-01-01 12:00:00 TP0] Init torch distributed begin.",
    "[2026-01-01 12:00:01 TP0] Init torch distributed ends. mem usage=0.98 GB",
    "[2026-01-01 12:00:02 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=62.33 GB",
    "[2026-01-01 12:00:02] Downcasting torch.float32 to torch.float16.",
    "[2025-09-11 10:25:47 TP3] Config file not found at /sgl-workspace/sglang/python/sglang/srt/layers/moe/"
    "fused_moe_triton/configs/triton_3_4_0/E=8,N=2048,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json. "
    "Fallback to triton version 3.1.0 and use MoE kernel config from /sgl-workspace/sglang/python/sglang/srt/",
    "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is "
    "deprecated. Please install nvidia-ml-py instead.",
    "W0911 10:24:10.440000 1 torch/utils/cpp_extension.py:2425] TORCH_CUDA_ARCH_LIST is not set, all archs for "
    "visible cards are included for compilation.",
    "W0911 10:24:10.440000 1 torch/utils/cpp_extension.py:2425] If this is not desired, please set "
    "os.environ['TORCH_CUDA_ARCH_LIST'] to specific architectures.",
]


@pytest.mark.parametrize("line", HARMLESS_NAMING_A_COMPONENT)
def test_a_harmless_line_chooses_neither_the_component_nor_the_diagnosis(line):
    last_lines = "\n".join([line, "[2026-01-01 12:00:03 TP0] Load weight begin. avail mem=94.21 GB"])
    for diagnosis in (diagnose(last_lines), diagnose("a failure without a traceback", context=last_lines)):
        assert (diagnosis["id"], diagnosis["component"]) == ("not_in_catalogue", "SGLang")


def test_a_line_that_names_a_component_still_names_it_beside_a_harmless_one():
    last_lines = "\n".join(HARMLESS_NAMING_A_COMPONENT + ["[2026-01-01 12:00:03 TP0] NCCL INFO Bootstrap : Using eth0"])
    assert diagnose(last_lines)["component"] == "NCCL"


def test_how_the_process_ended_explains_what_no_catalogue_entry_does():
    ended = {"id": "killed_by_signal", "cause": "killed", "fix": "find who"}
    last_lines = "\n".join(HARMLESS_NAMING_A_COMPONENT)
    assert diagnose(last_lines, ended=ended) == dict(ended, component="SGLang", exception=None, raised_in=None)
    assert diagnose(last_lines + "\n16 is not divisible by 6", ended=ended)["id"] == "tensor_parallel_not_divisible"


def test_the_failures_own_lines_outrank_a_known_cause_named_earlier_in_the_log():
    classifier = classify([
        "[2026-01-01 12:00:00] WARNING: SGLANG_DISABLE_CUDNN_CHECK is set; skipping the cuDNN check",
        "[2026-01-01 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "scheduler.py", line 2950, in run_scheduler_process',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ], final=True)
    context = ["[2026-01-01 12:00:00] WARNING: SGLANG_DISABLE_CUDNN_CHECK is set; skipping the cuDNN check"]
    assert classifier.failure.as_dict(context=context)["diagnosis"]["id"] == "cuda_out_of_memory"


def test_a_blank_line_inside_a_traceback_is_not_its_exception_line():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "",
             "RuntimeError: the real cause"]
    failure = classify(lines).failure
    assert failure.cause == "RuntimeError: the real cause"
    assert failure.as_dict()["ranks"] == ""


def test_a_cut_off_traceback_is_named_by_its_opening_as_it_is():
    lines = ["[2026-01-01 12:00:00 TP0] Worker X: Traceback (most recent call last):", '  File "a.py", line 1']
    failure = classify(lines, final=True).failure
    assert failure.cause == "Worker X (traceback cut off before its exception line)"
    assert failure.as_dict()["ranks"] == "TP0"


def test_a_line_indented_by_one_space_is_quoted_source_not_a_failure():
    assert classify([" raise RuntimeError('CUDA error: %s' % reason)"], final=True).failure is None


def test_the_context_is_read_line_by_line_for_a_diagnosis():
    # The argparse entry matches at the start of a line only: an indented quote of such a line is no cause.
    failure = classify(["Fatal Python error: Aborted"], final=True).failure
    context = ["usage: launch_server.py [-h]", "  launch_server.py: error: unrecognized arguments: --x"]
    assert failure.as_dict(context=context)["diagnosis"]["id"] == "not_in_catalogue"


def test_output_after_a_closed_traceback_does_not_join_it():
    classifier = classify(["[2026-01-01 12:00:00 TP0] Traceback (most recent call last):", '  File "a.py", line 1',
                           "RuntimeError: first", "[2026-01-01 12:00:01 TP0] shutting down"])
    reported = list(classifier.failure.lines)
    classifier.feed("plain output of another process")
    classifier.end_of_data(final=True)
    assert classifier.failure.lines == reported == [
        "Traceback (most recent call last):", '  File "a.py", line 1', "RuntimeError: first"]


def test_end_of_data_waits_for_a_cut_traceback_by_default():
    classifier = StartupClassifier()
    classifier.feed("Traceback (most recent call last):")
    classifier.end_of_data()
    assert classifier.failure is None


# Python 3.11 prints an exception group's traceback with every line indented, its exception line too: the chained
# line after it is the first unindented one, and must not be taken for the exception line.
EXCEPTION_GROUP = [
    "  + Exception Group Traceback (most recent call last):",
    '  |   File "/opt/ml-env/bin/x.py", line 2, in <module>',
    '  |     raise ExceptionGroup("eg", [ValueError("x")])',
    "  | ExceptionGroup: eg (1 sub-exception)",
    "  +-+---------------- 1 ----------------",
    "    | ValueError: x",
    "    +------------------------------------",
    "",
]


@pytest.mark.parametrize("chained", [
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
])
def test_a_chained_line_after_an_exception_group_waits_for_the_next_traceback(chained):
    lines = EXCEPTION_GROUP + [chained, ""]
    assert classify(lines).failure is None
    complete = lines + ["Traceback (most recent call last):", '  File "/opt/ml-env/bin/x.py", line 4, in <module>',
                        '    raise RuntimeError("y")', "RuntimeError: y"]
    assert classify(complete).failure.cause == "RuntimeError: y"


def test_a_traceback_of_a_million_lines_is_kept_as_its_first_and_last_lines():
    lines = ["Traceback (most recent call last):"] + ['  File "a.py", line %d, in f' % n for n in range(10 ** 6)]
    failure = classify(lines + ["RecursionError: deep"]).failure.as_dict()
    kept = failure["traceback"].split("\n")
    assert failure["cause"] == "RecursionError: deep" and len(kept) == 201
    assert kept[:100] == lines[:100] and kept[-1] == "RecursionError: deep"
    assert kept[100] == "[... %d lines of the traceback left out]" % (10 ** 6 + 2 - 200)
    assert kept[101:-1] == lines[-99:]
