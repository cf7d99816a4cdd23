"""What every Python process of the converged virtualenv sees, checked from inside the container."""

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

# The collection as the unit tests import it (tests/unit/conftest.py), for the files its role declares.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / ".build" / "collections"))
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import RENDERED_FILES  # noqa: E402

testinfra_hosts = ["docker://runtime-env-debian-python", "docker://runtime-env-upstream-python"]

VENV = "/opt/ml-env"
PYTHON = VENV + "/bin/python"
SITE_PACKAGES = VENV + "/lib/python3.11/site-packages"
EXPECTED = {
    "CUDA_HOME": "/usr/local/cuda-13.0",
    "TRITON_PTXAS_PATH": "/usr/local/cuda-13.0/bin/ptxas",
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MIN_NCHANNELS": "16",
    "NCCL_MAX_NCHANNELS": "16",
    "NCCL_BUFFSIZE": "16777216",
    "NCCL_NTHREADS": "512",
    "NCCL_DEBUG": "WARN",
    "SGLANG_DISABLE_CUDNN_CHECK": "1",
    "FLASHINFER_DISABLE_VERSION_CHECK": "1",
    "HF_HUB_OFFLINE": "1",
}
NAMES = sorted(EXPECTED) + ["USER_SITECUSTOMIZE_RUNS", "USER_SITECUSTOMIZE_SAW_NCCL_PROTO"]

# Each snippet prints the values of NAMES as one JSON object, as seen by a different process.
DIRECT = "import json, os; print(json.dumps({n: os.environ.get(n) for n in %r}))" % NAMES
SUBPROCESS_CLEAN_ENV = (
    "import subprocess, sys; "
    "print(subprocess.run([sys.executable, '-c', %r], env={}, capture_output=True, text=True, check=True).stdout)"
    % DIRECT
)
# The parent removes every rendered variable before spawning, so the child can only have
# them from its own interpreter start-up, not by inheritance.
SPAWN_CHILD = """
import json, multiprocessing, os

def report(_):
    return {n: os.environ.get(n) for n in %r}

if __name__ == "__main__":
    for name in %r:
        os.environ.pop(name, None)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print(json.dumps(pool.map(report, [0])[0]))
""" % (NAMES, NAMES)


def run_clean(host, *argv, **environ):
    """Run argv with only the given environment; return its standard output."""
    assignments = ["%s=%s" % item for item in environ.items()]
    result = host.run(shlex.join(["env", "-i", *assignments, *argv]))
    assert result.rc == 0, result.stderr
    return result.stdout


def seen(host, code, **environ):
    """What code, run by the virtualenv's interpreter with only the given environment, prints."""
    return json.loads(run_clean(host, PYTHON, "-c", code, **environ))


@pytest.mark.parametrize("code", [DIRECT, SUBPROCESS_CLEAN_ENV], ids=["python -c", "subprocess child"])
def test_rendered_environment_reaches_every_process(host, code):
    environ = seen(host, code)
    assert {n: environ[n] for n in EXPECTED} == EXPECTED


def test_spawn_child_gets_the_environment_from_its_own_startup(host):
    # spawn re-imports the main module by path, so it has to be a file.
    assert host.run(shlex.join(["sh", "-c", 'printf %s "$0" > /tmp/spawn_child.py', SPAWN_CHILD])).rc == 0
    environ = json.loads(run_clean(host, PYTHON, "/tmp/spawn_child.py"))
    assert {n: environ[n] for n in EXPECTED} == EXPECTED


def test_value_already_in_the_environment_wins(host):
    environ = seen(host, DIRECT, NCCL_NTHREADS="256", NCCL_PROTO="Simple")
    assert environ["NCCL_NTHREADS"] == "256"
    assert environ["NCCL_PROTO"] == "Simple"
    assert environ["NCCL_ALGO"] == "Ring"


def test_forced_variable_replaces_the_value_in_the_environment(host):
    environ = seen(host, DIRECT, SGLANG_DISABLE_CUDNN_CHECK="0")
    assert environ["SGLANG_DISABLE_CUDNN_CHECK"] == "1"


def test_users_prior_sitecustomize_runs_once_after_the_environment_is_set(host):
    environ = seen(host, DIRECT)
    assert environ["USER_SITECUSTOMIZE_RUNS"] == "1"
    assert environ["USER_SITECUSTOMIZE_SAW_NCCL_PROTO"] == "LL"
    assert host.file(SITE_PACKAGES + "/sitecustomize.py").contains("The user's own start-up code")


def test_shadowing_is_what_this_platform_has(host):
    """On Debian's Python the system sitecustomize shadows the venv's; upstream's has none."""
    inventory = AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
    shadow = inventory.get_variables(host.backend.hostname)["molecule_shadowing_sitecustomize"]
    found = run_clean(host, PYTHON, "-c", "import sitecustomize; print(sitecustomize.__file__)")
    assert found.strip() == (shadow or SITE_PACKAGES + "/sitecustomize.py")


@pytest.mark.parametrize("name", RENDERED_FILES)
def test_rendered_files_belong_to_root_and_the_venv_owner_cannot_write_them(host, name):
    rendered = host.file(SITE_PACKAGES + "/" + name)
    assert (rendered.user, rendered.group, rendered.mode) == ("root", "root", 0o644)
    edit = host.run(shlex.join(["runuser", "-u", "sglang", "--", "sh", "-c", ": >> \"$0\"", rendered.path]))
    assert edit.rc != 0 and "Permission denied" in edit.stderr


def test_rendered_environment_reaches_the_venv_owners_processes(host):
    result = host.run(shlex.join(["runuser", "-u", "sglang", "--", "env", "-i", PYTHON, "-c", DIRECT]))
    assert result.rc == 0, result.stderr
    environ = json.loads(result.stdout)
    assert {n: environ[n] for n in EXPECTED} == EXPECTED


def test_pth_file_imports_the_module(host):
    assert host.file(SITE_PACKAGES + "/00-blackwell-gpu-node-env.pth").content_string == (
        "import _blackwell_gpu_node_env\n"
    )


# The JIT caches: the stack profile's own directory below the service user's cache root (the service user was made
# without a home directory, as the one whose flashinfer failed at import), each variable's directory below it.
CACHE_ROOT = "/var/lib/sglang/.cache/blackwell-gpu-node"
CACHES = {
    "CUDA_CACHE_PATH": "cuda", "CUTE_DSL_CACHE_DIR": "cute-dsl", "DG_JIT_CACHE_DIR": "deep_gemm",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer", "SGLANG_CACHE_DIR": "sglang", "SGLANG_DG_CACHE_DIR": "deep_gemm",
    "TILELANG_CACHE_DIR": "tilelang", "TORCHINDUCTOR_CACHE_DIR": "inductor", "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TRITON_CACHE_DIR": "triton/cache", "TRITON_HOME": "triton", "TVM_FFI_CACHE_DIR": "tvm-ffi", "XDG_CACHE_HOME": "xdg",
}
EVERYTHING = "import json, os; print(json.dumps(dict(os.environ)))"


def test_every_jit_cache_points_into_the_profiles_own_directory_and_hf_home_is_shared(host):
    environ = seen(host, EVERYTHING)
    (profile,) = set(environ[name][len(CACHE_ROOT) + 1:].split("/")[0] for name in CACHES)
    assert re.fullmatch(r"cu130-[0-9a-f]{12}", profile), profile
    assert dict((name, environ[name]) for name in CACHES) == dict(
        (name, "%s/%s/%s" % (CACHE_ROOT, profile, below)) for name, below in CACHES.items())
    assert environ["HF_HOME"] == "/var/lib/sglang/.cache/huggingface"


def test_the_cache_directories_belong_to_the_service_user_alone(host):
    environ = seen(host, EVERYTHING)
    profile = os.path.dirname(environ["XDG_CACHE_HOME"])
    for path in ["/var/lib/sglang", "/var/lib/sglang/.cache", CACHE_ROOT, profile] + sorted(
            set(environ[name] for name in CACHES)):
        directory = host.file(path)
        assert directory.is_directory and not directory.is_symlink, path
        assert (directory.user, directory.group, directory.mode) == ("sglang", "sglang", 0o700), path


def test_flashinfers_cache_is_made_at_import_by_the_service_user_whose_home_does_not_exist(host):
    # flashinfer/jit/core.py runs os.makedirs(<FLASHINFER_WORKSPACE_BASE or HOME>/.cache/flashinfer/<version>/<archs>)
    # at import: with HOME's directory missing, as for the user whose server failed, the rendered base must serve.
    code = ("import os, pathlib; base = pathlib.Path(os.environ.get('FLASHINFER_WORKSPACE_BASE', pathlib.Path.home())); "
            "(base / '.cache' / 'flashinfer' / '0.0.0' / '120').mkdir(parents=True, exist_ok=True)")
    result = host.run(shlex.join(["runuser", "-u", "sglang", "--", "env", "-i", "HOME=/home/no-such-home", PYTHON, "-c",
                                  code]))
    assert result.rc == 0, result.stderr
