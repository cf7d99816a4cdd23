"""After site: the server answers, from the stack the profile names, with CUDA and the environment in effect."""
import json

testinfra_hosts = ["docker://site-node"]
VENV = "/opt/ml-env"


def test_server_answers_health(host):
    status = host.check_output("python3 -c \"import urllib.request as u; "
                               "print(u.urlopen('http://127.0.0.1:28300/health').status)\"")
    assert status == "200"


def test_server_runs_from_the_virtualenv_with_the_reference_flags(host):
    argv = json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)["argv"]
    assert argv[:3] == [VENV + "/bin/python", "-m", "sglang.launch_server"]
    assert "--trust-remote-code" in argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_stack_is_the_cu130_profile(host):
    report = host.check_output(
        VENV + "/bin/python -c \"import torch, sglang, flashinfer; "
        "print(torch.__version__, torch.version.cuda, sglang.__version__, flashinfer.__version__)\"")
    assert report.split() == ["2.9.1+cu130", "13.0", "0.5.9", "0.6.4"]


def test_runtime_environment_takes_effect_from_an_empty_environment(host):
    seen = host.check_output("env -i " + VENV + "/bin/python -c \"import os; print(os.environ['CUDA_HOME'], "
                             "os.environ['NCCL_PROTO'], os.environ['SGLANG_DISABLE_CUDNN_CHECK'])\"")
    assert seen.split() == ["/usr/local/cuda-13.0", "LL", "1"]


def test_cuda_13_resolves_for_the_linker(host):
    lines = [line for line in host.check_output("ldconfig -p").splitlines() if line.strip().startswith("libcudart.so.13 ")]
    assert lines
    for line in lines:
        assert host.check_output("realpath " + line.split(" => ")[1]).startswith("/usr/local/cuda-13.0/")
    assert host.check_output("realpath /usr/local/cuda") == "/usr/local/cuda-13.0"
