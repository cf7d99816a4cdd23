"""The ml_stack role's inspect_torch.py, run as the role runs it against a virtualenv with a stand-in torch, and its
report judged by the adopt_torch core."""
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import (
    decide,
    inspected_state,
    levels,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "roles" / "ml_stack" / "files" / "inspect_torch.py"
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]

# What torch answers without a GPU: its version, the CUDA it was built for, its extension, cuDNN's and NCCL's.
TORCH = '''
__version__ = "2.11.0+cu130"
_C = object()


class version:
    cuda = "13.0"


class backends:
    class cudnn:
        @staticmethod
        def version():
            return 91900


class cuda:
    class nccl:
        @staticmethod
        def version():
            raise RuntimeError("NCCL is not loaded")
'''


def make_venv(path, torch=TORCH):
    venv.EnvBuilder(with_pip=False, symlinks=True).create(str(path))
    (site,) = (path / "lib").glob("python3.*/site-packages")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(torch)
    info = site / "torch-2.11.0+cu130.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n")
    triton = site / "triton-3.5.1.dist-info"
    triton.mkdir()
    (triton / "METADATA").write_text("Metadata-Version: 2.1\nName: triton\nVersion: 3.5.1\n")
    return site


def inspect(python, named, *options):
    run = subprocess.run([str(python), "-I", "-S", "-B", "-c", SCRIPT.read_text(), str(named)] + list(options),
                         capture_output=True, text=True, timeout=120, check=False, env={"PATH": "/usr/bin:/bin"})
    return inspected_state(run.returncode, run.stdout, run.stderr), run.stderr


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch") / ".venv"
    site = make_venv(path)
    # A .pth file of the tree must not run before torch is imported on purpose.
    (site / "zz-marker.pth").write_text("import sys; sys.stderr.write('the tree ran first\\n')\n")
    return path, site


def test_a_virtualenv_reports_its_site_packages_distributions_and_what_importing_torch_says(tree):
    path, site = tree
    report, stderr = inspect(path / "bin" / "python", path)
    assert "the tree ran first" not in stderr
    assert report["path"] == os.path.realpath(str(path)) and report["site_packages"] == os.path.realpath(str(site))
    assert report["python"].startswith("%d.%d." % sys.version_info[:2])
    assert report["distributions"] == {"torch": "2.11.0+cu130", "triton": "3.5.1"}
    assert report["distributions_complete"] is True and report["torch_distribution"] == "2.11.0+cu130"
    imported = report["import"]
    assert (imported["ok"], imported["version"], imported["cuda"], imported["extension"], imported["cudnn"]) == (
        True, "2.11.0+cu130", "13.0", True, 91900)
    assert imported["nccl_error"] == "RuntimeError: NCCL is not loaded"
    assert imported["file"] == os.path.join(os.path.realpath(str(site)), "torch", "__init__.py")


def test_its_report_of_the_profiles_torch_is_a_match(tree):
    path, _site = tree
    report, _stderr = inspect(path / "bin" / "python", path)
    root = {"exists": True, "isdir": True, "islnk": False, "uid": 0, "pw_name": "root", "mode": "0755"}
    stats = [root for _level in levels(report["site_packages"])]
    result = decide(resolve("sglang-0.5.17-cu130", PROFILES), str(path), report, stats, None,
                    "%d.%d.0" % sys.version_info[:2])
    assert (result["decision"], result["problems"]) == ("match", [])
    assert result["pth"]["content"] == report["site_packages"] + "\n"


def test_a_torch_that_fails_to_import_is_reported_with_its_error(tmp_path):
    path = tmp_path / ".venv"
    make_venv(path, torch="raise ImportError('libcudnn.so.9: cannot open shared object file')\n")
    report, _stderr = inspect(path / "bin" / "python", path)
    assert report["import"] == {"ok": False, "error": "ImportError: libcudnn.so.9: cannot open shared object file"}


def test_a_path_that_is_neither_a_virtualenv_nor_one_of_the_interpreters_site_packages_names_none(tree, tmp_path):
    path, site = tree
    for named in (tmp_path, site):
        report, _stderr = inspect(path / "bin" / "python", named)
        assert report["site_packages"] is None and "import" not in report and report["candidates"]


def test_asked_for_the_metadata_alone_it_never_imports_torch(tmp_path):
    path = tmp_path / ".venv"
    site = make_venv(path, torch="raise SystemExit('torch was imported')\n")
    report, _stderr = inspect(path / "bin" / "python", path, "--metadata-only")
    assert report["site_packages"] == os.path.realpath(str(site)) and report["import"] is None
    assert (report["torch_distribution"], report["distributions"]) == (
        "2.11.0+cu130", {"torch": "2.11.0+cu130", "triton": "3.5.1"})
    assert inspect(path / "bin" / "python", path)[0]["import"]["ok"] is False


DEBIAN_PYTHON = Path("/usr/bin/python3")


@pytest.mark.skipif(not (DEBIAN_PYTHON.exists() and "dist-packages" in subprocess.run(
    [str(DEBIAN_PYTHON), "-I", "-S", "-c", "import site; print(site.getsitepackages())"],
    capture_output=True, text=True, check=False).stdout), reason="needs a Debian or Ubuntu python3 (dist-packages)")
def test_a_virtualenv_of_debians_python_is_found_at_its_site_packages(tmp_path):
    # Debian's site.getsitepackages() names dist-packages for any prefix; its virtualenvs have site-packages.
    path = tmp_path / ".venv"
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    (site,) = (path / "lib").glob("python3.*/site-packages")
    report, stderr = inspect(path / "bin" / "python", path)
    assert report["site_packages"] == os.path.realpath(str(site)), stderr
