"""The ml_stack role's inspect_stack.py, run against installed distributions, and its report judged by the core.

The versions it reports must keep their local label (2.9.1+cu130): PyPI's torch 2.9.1 is a CUDA 12.8 build and
must not pass for the profile's 2.9.1+cu130.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import build_plan, verdict
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "roles" / "ml_stack" / "files" / "inspect_stack.py"
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
SETTINGS = dict(venv_path="/home/sglang/ml-env", venv_owner="sglang", python="/usr/bin/python3",
                index_url="https://pypi.org/simple", index_mirrors={}, pip_environment={}, offline=False,
                wheelhouse_path="/var/cache/blackwell-gpu-node/wheelhouse", wheelhouse_controller_path=None)
HOST = dict(python=dict(version="3.11.2", implementation="cpython", machine="x86_64", glibc="2.36", venv_error=None),
            owner=True, venv_path=dict(exists=False, islnk=False), parent_exists=True)


def install(site, distribution, version, url=None):
    """A distribution as pip leaves it in site-packages: its .dist-info, and direct_url.json for a wheel by URL."""
    info = site / ("%s-%s.dist-info" % (distribution.replace("-", "_"), version))
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (distribution, version))
    if url:
        (info / "direct_url.json").write_text(json.dumps({"url": url, "archive_info": {}}))


def inspect(site, plan):
    request = {"marker": "/nonexistent/marker.json", "distributions": list(plan["versions"]), "imports": []}
    run = subprocess.run([sys.executable, "-S", str(SCRIPT), json.dumps(request)], capture_output=True, text=True,
                         check=True, timeout=60, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    return json.loads(run.stdout)


@pytest.mark.parametrize("torch, exact", [("2.9.1+cu130", True), ("2.9.1", False), ("2.9.1+cu128", False)])
def test_only_the_profiles_own_build_of_torch_counts_as_installed(tmp_path, torch, exact):
    plan = build_plan(SETTINGS, resolve("cu130", PROFILES), HOST)
    for package in plan["packages"]:
        version = torch if package["distribution"] == "torch" else plan["versions"][package["distribution"]]
        url = "file:///srv/wheels/%s" % package["wheel"] if package["wheel"] else None
        install(tmp_path, package["distribution"], version, url)
    report = inspect(tmp_path, plan)
    assert report["versions"]["torch"] == torch
    result = verdict(plan, {"state": report, "marker": plan["marker"]})
    assert result["exact"] is exact
    assert exact or "torch is %s, the profile pins 2.9.1+cu130" % torch in result["problems"]


def test_a_locked_profile_gets_every_distribution_by_its_normalized_name_and_none_from_the_current_directory(tmp_path):
    site, elsewhere = tmp_path / "site", tmp_path / "cwd"
    install(site, "Huggingface_Hub", "0.36.0")
    install(site, "torch", "2.11.0")
    install(elsewhere, "planted", "1.0")
    request = {"marker": "/nonexistent/marker.json", "distributions": ["torch"], "imports": [],
               "every_distribution": True}
    run = subprocess.run([sys.executable, "-S", "-c", SCRIPT.read_text(), json.dumps(request)], capture_output=True,
                         text=True, check=True, timeout=60, cwd=str(elsewhere),
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    report = json.loads(run.stdout)
    assert report["installed"] == {"huggingface-hub": "0.36.0", "torch": "2.11.0"}
    assert report["versions"] == {"torch": "2.11.0"}


def test_the_adopted_site_packages_is_reported_apart_from_the_virtualenvs_own_distributions(tmp_path):
    site, tree = tmp_path / "site", tmp_path / "tree"
    install(site, "sglang", "0.5.17")
    install(tree, "torch", "2.11.0+cu130")
    install(tree, "pip", "25.2")
    request = {"marker": "/nonexistent/marker.json", "distributions": ["torch"], "imports": [],
               "every_distribution": True, "adopted": str(tree)}

    def report(path):
        run = subprocess.run([sys.executable, "-S", "-c", SCRIPT.read_text(), json.dumps(request)], capture_output=True,
                             text=True, check=True, timeout=60, env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})
        return json.loads(run.stdout)

    # As the virtualenv's .pth file appends it: after the virtualenv's own.
    seen = report("%s:%s" % (site, tree))
    assert seen["installed"] == {"sglang": "0.5.17"}
    assert seen["adopted"] == {"torch": "2.11.0+cu130", "pip": "25.2"}
    assert seen["versions"] == {"torch": "2.11.0+cu130"}
    unseen = report(str(site))
    assert (unseen["installed"], unseen["adopted"]) == ({"sglang": "0.5.17"}, {})
