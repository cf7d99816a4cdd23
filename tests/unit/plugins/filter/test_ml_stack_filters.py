import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.ml_stack import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

FILTERS = FilterModule().filters()


def test_the_filters_are_registered():
    assert sorted(FILTERS) == [
        "ml_stack_decision", "ml_stack_dependencies", "ml_stack_file_groups", "ml_stack_plan", "ml_stack_prune",
        "ml_stack_verdict"]


SETTINGS = {"venv_path": "/srv/ml-env", "python": "/usr/bin/python3", "wheelhouse_path": "/srv/wheels",
            "index_url": "https://pypi.org/simple", "index_mirrors": {}, "pip_environment": {}}


def test_settings_missing_are_problems_naming_the_variables():
    problems = FILTERS["ml_stack_plan"]({}, {"name": "cu130"}, {})["problems"]
    assert problems[0] == "ml_stack_venv_path=None is not an absolute path below /"


def test_incomplete_host_input_is_a_filter_error_not_a_crash():
    with pytest.raises(AnsibleFilterError, match=r"ml_stack_plan: incomplete input, KeyError: 'python'"):
        FILTERS["ml_stack_plan"](SETTINGS, {"name": "cu130"}, {})


def test_incomplete_verdict_input_is_a_filter_error_not_a_crash():
    with pytest.raises(AnsibleFilterError, match=r"ml_stack_verdict: incomplete input, KeyError: 'versions'"):
        FILTERS["ml_stack_verdict"]({}, {"state": {}})


def test_dependencies_filter_keeps_what_is_not_pinned():
    assert FILTERS["ml_stack_dependencies"](["torch==2.9.1", "uvicorn"], ["torch"]) == ["uvicorn"]


def test_incomplete_decision_input_is_a_filter_error_not_a_crash():
    with pytest.raises(AnsibleFilterError, match=r"ml_stack_decision: incomplete input, KeyError: 'exists'"):
        FILTERS["ml_stack_decision"]({}, {}, {}, None)


def test_the_verdict_filter_requires_gpus_unless_told_not_to():
    plan = {"imports": ["sgl_kernel"], "cuda": "13.0", "versions": {}, "profile": "cu130", "constraints": "",
            "pip_conf": "", "marker_text": "{}\n", "files": dict((key, "/opt/ml-env.cu130-1/" + key) for key in (
                "constraints", "pip_conf", "pip_check", "marker"))}
    error = "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    observed = {"verification": {"modules": {"sgl_kernel": {"ok": False, "error": error}}, "pip_check": []}}
    assert FILTERS["ml_stack_verdict"](plan, observed)["ok"] is False
    assert FILTERS["ml_stack_verdict"](plan, observed, False)["ok"] is True


@pytest.mark.parametrize("name,args,message", [
    ("ml_stack_plan", (SETTINGS, {"name": "cu130"}, {}), "ml_stack_plan: incomplete input, KeyError: 'python'"),
    ("ml_stack_verdict", ({}, {"state": {}}), "ml_stack_verdict: incomplete input, KeyError: 'versions'"),
    ("ml_stack_decision", ({}, {}, {}, None), "ml_stack_decision: incomplete input, KeyError: 'exists'"),
])
def test_the_whole_message_of_incomplete_input(name, args, message):
    with pytest.raises(AnsibleFilterError) as raised:
        FILTERS[name](*args)
    assert str(raised.value) == message


def test_the_plan_filter_plans_a_locked_profile_with_its_lock():
    root = Path(__file__).resolve().parents[4]
    profiles = yaml.safe_load((root / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
    lock = dict(json.loads((root / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()),
                path="/srv/locks/sglang-0.5.17-cu130.json")
    host = {"python": {"version": "3.12.3", "implementation": "cpython", "machine": "x86_64", "glibc": "2.39",
                       "venv_error": None}, "owner": True, "venv_path": {"exists": False}, "parent_exists": True}
    settings = dict(SETTINGS, venv_owner="sglang", offline=False, wheelhouse_controller_path=None)
    plan = FILTERS["ml_stack_plan"](settings, resolve("sglang-0.5.17-cu130", profiles), host, lock)
    assert plan["problems"] == [] and plan["lock"]["environment"] == "cp312-x86_64"
