"""The real cu128 stack, as far as a machine without GPU can check it: versions, the CUDA torch was built
for, the imports, and pip check's lines explained."""
import json
import re
import shlex

LINK = "/home/sglang/ml-env"
PYTHON = LINK + "/bin/python"
CU128 = {"torch": "2.9.1", "sgl-kernel": "0.3.21", "flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.4",
         "sglang": "0.5.9"}


def run(host, *argv):
    result = host.run(shlex.join(argv))
    assert result.rc == 0, result.stderr
    return result.stdout


def test_every_pinned_package_has_exactly_the_profiles_version(host):
    code = "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in %r}))" % sorted(CU128)
    assert json.loads(run(host, PYTHON, "-c", code)) == CU128


def test_torch_is_pypis_cuda_12_8_build(host):
    code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    assert json.loads(run(host, PYTHON, "-c", code)) == ["2.9.1+cu128", "12.8"]


def test_flashinfer_and_sglang_import(host):
    code = "import flashinfer, sglang; print(flashinfer.__version__, sglang.__version__)"
    assert run(host, PYTHON, "-c", code).split() == ["0.6.4", "0.5.9"]


def test_sgl_kernel_fails_to_load_only_for_want_of_the_gpu_driver(host):
    # Its kernels link libcuda.so.1, which only an NVIDIA driver provides; every other library is there.
    attempt = host.run(shlex.join([PYTHON, "-c", "import sgl_kernel"]))
    assert attempt.rc != 0
    missing = sorted(set(re.findall(r"(lib[\w.-]+\.so[\d.]*): cannot open shared object file", attempt.stderr)))
    assert missing == ["libcuda.so.1"]


def test_the_system_library_sgl_kernel_links_is_installed(host):
    assert host.package("libnuma1").is_installed


def test_pip_check_reports_only_the_lines_explained_in_the_virtualenv(host):
    checked = host.run(shlex.join([PYTHON, "-m", "pip", "check"]))
    explained = [line for line in host.file(LINK + "/ml-stack-pip-check.txt").content_string.splitlines()
                 if not line.startswith("#")]
    assert sorted(line for line in checked.stdout.splitlines() if line != "No broken requirements found.") == explained


def test_pip_in_the_virtualenv_refuses_to_replace_torch(host):
    command = ["env", "PIP_CERT=/etc/ssl/certs/controller-ca-certificates.crt", LINK + "/bin/pip", "install",
               "--dry-run", "torch==2.10.0"]
    refused = host.run(shlex.join(command))
    assert refused.rc != 0
    assert "ResolutionImpossible" in refused.stderr
