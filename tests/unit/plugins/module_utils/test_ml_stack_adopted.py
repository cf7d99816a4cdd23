"""The ml_stack core with a locked profile that adopts the host's torch (ml_stack_torch_from): what the adopted tree
stands in for is left out of the requirements and the wheelhouse, the virtualenv sees the tree through a .pth file
the role keeps, the tree is part of the virtualenv's name, and the virtualenv is compared with the lock and the
tree."""
import copy
import json
from pathlib import Path

import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import PTH_NAME
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import wheels_for
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    build_decision,
    build_plan,
    file_groups,
    managed_files,
    verdict,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
PROFILE = resolve("sglang-0.5.17-cu130", PROFILES)
LOCK = dict(json.loads((ROOT / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()),
            path="/srv/locks/sglang-0.5.17-cu130.json")
TREE = "/opt/torch/.venv"
SITE = TREE + "/lib/python3.11/site-packages"
SETTINGS = {
    "venv_path": "/home/sglang/ml-env", "venv_owner": "sglang", "python": "/usr/bin/python3",
    "index_url": "https://pypi.org/simple", "index_mirrors": {}, "pip_environment": {}, "offline": False,
    "wheelhouse_path": "/var/cache/blackwell-gpu-node/wheelhouse", "wheelhouse_controller_path": None,
    "torch_from": TREE,
}
HOST = {
    "python": {"version": "3.11.2", "implementation": "cpython", "machine": "x86_64", "glibc": "2.36", "venv_error": None},
    "owner": True,
    "venv_path": {"exists": False, "islnk": False},
    "parent_exists": True,
}
WHEELS = wheels_for(LOCK, "cp311-x86_64")
# Torch's closure in the lock for cp311-x86_64 (filelock and sympy are sglang's too): what the tree stands in for.
CLOSURE = ["nvidia-cublas", "torch", "triton"]
# A torch image's virtualenv: the profile's torch, triton at another release than the lock's, and no nvidia-cublas.
DISTRIBUTIONS = {"torch": "2.11.0+cu130", "triton": "3.5.1", "filelock": "3.19.1", "pip": "25.2"}


def adoption(site_packages=SITE, torch="2.11.0+cu130", distributions=None):
    """What adopt_torch.decide returns for an adoptable tree, as the plan reads it."""
    distributions = dict(DISTRIBUTIONS, torch=torch) if distributions is None else distributions
    return {"ok": True, "site_packages": site_packages, "torch": {"ok": True, "distribution": torch},
            "distributions": distributions}


def plan_of(adopted=None, lock=..., **settings):
    lock = LOCK if lock is ... else lock
    return build_plan(dict(SETTINGS, **settings), PROFILE, copy.deepcopy(HOST), lock,
                      adoption() if adopted is None else adopted)


def lines(text):
    return [line for line in text.splitlines() if not line.startswith("#")]


# The plan.

def test_the_requirements_leave_out_what_the_tree_stands_in_for_and_keep_what_it_lacks():
    plan = plan_of()
    assert plan["problems"] == []
    assert sorted(line.split("==")[0].split(" @ ")[0] for line in lines(plan["requirements"])) == [
        "filelock", "flashinfer-python", "huggingface-hub", "mpmath", "numpy", "nvidia-cublas", "sglang",
        "sglang-kernel", "sympy"]
    assert "# Left out, as the adopted torch (ml_stack_torch_from) stands in for them: torch, triton.\n" in (
        plan["requirements"])
    assert [wheel["distribution"] for wheel in plan["lock"]["wheels"]] == [
        wheel["distribution"] for wheel in WHEELS if wheel["distribution"] not in ("torch", "triton")]
    assert (plan["adoption"]["skip"], plan["adoption"]["install"]) == (["torch", "triton"], ["nvidia-cublas"])


def test_what_the_tree_stands_in_for_is_pinned_at_its_versions_and_its_other_distributions_are_not():
    constraints = lines(plan_of()["constraints"])
    assert "torch===2.11.0+cu130" in constraints and "triton===3.5.1" in constraints
    assert "filelock===3.20.0" in constraints and "pip===25.2" not in constraints
    names = [line.split("===")[0] for line in constraints]
    assert names == sorted(names)


def test_the_pth_file_is_one_of_the_pins_root_s_in_the_virtualenvs_site_packages():
    plan = plan_of()
    pth = {"name": "lib/python3.11/site-packages/" + PTH_NAME, "content": SITE + "\n", "root": True}
    assert plan["pins"][-1] == pth
    assert [entry["name"] for entry in managed_files(plan, "")] == [
        "ml-stack-constraints.txt", "pip.conf", "ml-stack-requirements.txt", pth["name"], "ml-stack-pip-check.txt",
        "ml-stack.json"]
    assert plan["files"]["pth"] == plan["venv_dir"] + "/" + pth["name"]
    # venv_files writes it into the site-packages, before the virtualenv's own files and their marker.
    groups = file_groups(managed_files(plan, ""))
    assert [group["directory"] for group in groups] == ["lib/python3.11/site-packages", ""]
    assert groups[0]["files"] == [dict(pth, name=PTH_NAME)]
    assert groups[1]["files"][-1]["name"] == "ml-stack.json"
    assert all(entry.get("name") != PTH_NAME for entry in managed_files(plan_of(torch_from=None), ""))


def test_the_virtualenv_is_named_after_the_adopted_tree_and_its_torch():
    names = set([plan_of()["venv_name"], plan_of(torch_from=None)["venv_name"],
                 plan_of(adoption(torch="2.11.0+cu130.post1"))["venv_name"],
                 plan_of(adoption(site_packages="/opt/other/lib/python3.11/site-packages"))["venv_name"]])
    assert len(names) == 4
    assert plan_of()["venv_name"] == plan_of(copy.deepcopy(adoption()))["venv_name"]
    assert plan_of()["marker"]["adopted"] == {"site_packages": SITE, "torch": "2.11.0+cu130"}
    assert "adopted" not in plan_of(torch_from=None)["marker"]


def test_without_ml_stack_torch_from_an_adoption_is_not_used():
    plan, own = plan_of(torch_from=None), build_plan(dict(SETTINGS, torch_from=None), PROFILE, HOST, LOCK)
    assert plan["adoption"] is None and plan["venv_name"] == own["venv_name"]
    assert plan["requirements"] == own["requirements"]


def test_the_virtualenv_runs_the_trees_torch_and_asks_the_inspection_for_the_trees_distributions():
    plan = plan_of()
    assert plan["versions"] == {"torch": "2.11.0+cu130", "sglang-kernel": "0.4.5", "flashinfer-python": "0.6.15.post1",
                                "sglang": "0.5.17"}
    assert [package["distribution"] for package in plan["packages"]] == ["sglang-kernel", "flashinfer-python", "sglang"]
    assert plan["inspect"]["adopted"] == SITE
    assert "adopted" not in plan_of(torch_from=None)["inspect"]
    # No index is asked for the torch the host has.
    assert [probe["project"] for probe in plan["sources"]] == [None, "flashinfer-python", "sglang"]


def test_adopting_without_a_lock_is_refused_naming_both_variables():
    assert plan_of(lock=None)["problems"] == [
        "ml_stack_torch_from=%s adopts a torch only into a locked stack profile, and stack profile "
        "sglang-0.5.17-cu130 has no lock (python.lock): without one there is no closure of torch to leave out of "
        "the virtualenv. Choose a locked profile (stack_profile), give this one a lock (make stack-lock "
        "(hacking/stack_lock.py), then stack_profiles_custom.sglang-0.5.17-cu130.python.lock), or set "
        "ml_stack_torch_from to null" % TREE]
    assert plan_of(lock=None, torch_from=None)["problems"] == []


# Offline: the wheelhouse leaves out what the tree stands in for too.

def test_the_wheelhouse_leaves_out_what_the_tree_stands_in_for():
    plan = plan_of(offline=True)
    kept = [wheel["wheel"] for wheel in WHEELS if wheel["distribution"] not in ("torch", "triton")]
    assert verdict(plan, {"wheelhouse": kept})["problems"] == []
    assert verdict(plan_of(offline=True, torch_from=None), {"wheelhouse": kept})["problems"]
    download = plan_of(offline=True, wheelhouse_controller_path="/srv/wheelhouses")["download"]
    assert lines(download["requirements"]["content"]) == lines(plan_of()["requirements"])
    assert download["folder"] != plan_of(offline=True, wheelhouse_controller_path="/srv/wheelhouses",
                                         torch_from=None)["download"]["folder"]


# The virtualenv against the lock and the tree.

def state(plan, own=None, seen=None):
    """What inspect_stack.py reports of the virtualenv: its own distributions, and the tree's as it sees them."""
    installed = dict((wheel["distribution"], wheel["version"]) for wheel in plan["lock"]["wheels"])
    installed.update(pip="23.0.1", setuptools="66.1.1")
    installed.update(own or {})
    found = {"versions": dict((name, installed.get(name) or DISTRIBUTIONS.get(name)) for name in plan["versions"]),
             "direct_urls": dict((name, None) for name in plan["versions"]),
             "installed": installed, "marker": plan["marker"],
             "adopted": dict(DISTRIBUTIONS) if seen is None else seen}
    found["direct_urls"]["sglang-kernel"] = [wheel["url"] for wheel in WHEELS if wheel["distribution"] == "sglang-kernel"][0]
    return found


def test_the_lock_without_what_the_tree_stands_in_for_and_the_trees_own_seen_through_the_pth_file_is_exact():
    plan = plan_of()
    assert verdict(plan, {"state": state(plan), "marker": plan["marker"]}) == {
        "exact": True, "ok": True, "problems": [], "notes": []}


def test_a_torch_of_the_virtualenvs_own_is_named_and_uninstalled_by_a_repair():
    plan = plan_of()
    found = state(plan, own={"torch": "2.11.0"})
    assert verdict(plan, {"state": found, "marker": plan["marker"]})["problems"] == [
        "torch 2.11.0 is installed in the virtualenv itself, where the adopted tree's (ml_stack_torch_from=%s) "
        "stands in for it" % TREE]
    assert build_decision(plan, {"exists": True, "owner": "sglang"}, found, "sglang")["remove"] == ["torch"]


def test_a_virtualenv_that_does_not_see_the_tree_as_planned_is_not_exact():
    plan = plan_of()
    problem = ("the virtualenv does not see torch 2.11.0+cu130 of the adopted tree %s (it sees %s there): its %s is "
               "missing or names another directory, or the tree changed")
    unseen = verdict(plan, {"state": state(plan, seen={}), "marker": plan["marker"]})
    assert not unseen["exact"] and problem % (SITE, "none", PTH_NAME) in unseen["problems"]
    changed = verdict(plan, {"state": state(plan, seen=dict(DISTRIBUTIONS, torch="2.11.0")), "marker": plan["marker"]})
    assert changed["problems"] == [problem % (SITE, "2.11.0", PTH_NAME)]
    partial = state(plan)
    del partial["adopted"]
    assert verdict(plan, {"state": partial, "marker": plan["marker"]})["problems"] == [
        "the inspection did not list the distributions of the adopted tree %s" % SITE]


def test_a_distribution_the_tree_has_at_another_version_than_the_lock_is_said_not_refused():
    plan = plan_of()
    modules = {"torch": {"ok": True, "version": "2.11.0+cu130", "cuda": "13.0"}, "sgl_kernel": {"ok": True},
               "flashinfer": {"ok": True}, "sglang": {"ok": True}}
    result = verdict(plan, {"verification": {"modules": modules, "pip_check": "No broken requirements found.\n"}})
    assert result["ok"]
    assert result["notes"] == ["triton 3.5.1 of the adopted tree (ml_stack_torch_from) stands in for the lock's 3.6.0"]
