"""The ml_stack_adopt filters: the adopt_torch core as the role's adopt_torch.yml calls it."""
import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.ml_stack_adopt import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

FILTERS = FilterModule().filters()
ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
VENV = "/opt/torch/.venv"
SITE = VENV + "/lib/python3.12/site-packages"
REPORT = {"executable": VENV + "/bin/python", "python": "3.12.3", "path": VENV, "candidates": [SITE],
          "site_packages": SITE, "distributions": {"torch": "2.11.0"}, "distributions_complete": True,
          "torch_distribution": "2.11.0",
          "import": {"ok": True, "version": "2.11.0+cu130", "cuda": "13.0", "file": SITE + "/torch/__init__.py"}}
INSPECTION = {"rc": 0, "stdout": json.dumps(REPORT), "stderr": ""}
ROOTS = {"exists": True, "isdir": True, "islnk": False, "uid": 0, "pw_name": "root", "mode": "0755"}


def test_the_filters_the_role_calls():
    assert sorted(FILTERS) == ["ml_stack_adopt_levels", "ml_stack_adopt_torch", "ml_stack_torch_from_problems"]
    assert FILTERS["ml_stack_torch_from_problems"](None) == []


def test_the_levels_are_those_of_the_reported_site_packages_or_of_the_named_path():
    assert FILTERS["ml_stack_adopt_levels"](VENV, INSPECTION)[-1] == SITE
    failed = {"rc": 1, "stdout": "", "stderr": "PermissionError: denied"}
    assert FILTERS["ml_stack_adopt_levels"](VENV, failed) == ["/", "/opt", "/opt/torch", VENV]


def test_the_decision_from_what_the_role_registered():
    observed = {"torch_from": VENV, "inspection": INSPECTION, "levels": [ROOTS] * 7,
                "inside": {"rc": 0, "stdout": "", "stderr": ""}}
    profile = resolve("sglang-0.5.17-cu130", PROFILES)
    result = FILTERS["ml_stack_adopt_torch"](observed, profile, "3.12.3")
    assert (result["decision"], result["pth"]["content"]) == ("match", SITE + "\n")
    theirs = dict(observed, inside={"rc": 0, "stdout": SITE + "/torch\tsglang\t999\t755\n", "stderr": ""})
    assert FILTERS["ml_stack_adopt_torch"](theirs, profile, "3.12.3")["decision"] == "untrusted"
    with pytest.raises(AnsibleFilterError, match="ml_stack_adopt_torch: incomplete input"):
        FILTERS["ml_stack_adopt_torch"](dict(observed, levels=[ROOTS]), profile, "3.12.3")
    with pytest.raises(AnsibleFilterError, match="ml_stack_adopt_levels: incomplete input"):
        FILTERS["ml_stack_adopt_levels"](VENV, {})
