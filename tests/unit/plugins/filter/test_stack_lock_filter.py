"""The stack_lock filter, and where the stack role's task that feeds it reads the lock: a name without a path in the
role's files/locks, an absolute path as it is."""
import json
from pathlib import Path

import ansible.template
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.blackwell.gpu_node.plugins.filter.stack_lock import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
PROFILE = resolve("sglang-0.5.17-cu130", PROFILES)
TEXT = (ROOT / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()
stack_lock = FilterModule().filters()["stack_lock"]


def test_a_lock_that_fits_comes_back_with_the_file_it_was_read_from():
    assert stack_lock(TEXT, PROFILE, "/srv/locks/a.json") == dict(json.loads(TEXT), path="/srv/locks/a.json")


@pytest.mark.parametrize("text, named", [
    (None, "does not exist on the controller, or cannot be read"),
    (TEXT.replace('"2.11.0"', '"2.10.0"'), "it has torch 2.10.0, the profile pins 2.11.0"),
])
def test_a_lock_that_cannot_be_used_is_a_filter_error_naming_the_file_and_the_fix(text, named):
    with pytest.raises(AnsibleFilterError) as refused:
        stack_lock(text, PROFILE, "/srv/locks/a.json")
    assert str(refused.value).startswith("The lock /srv/locks/a.json (python.lock=sglang-0.5.17-cu130.json")
    assert named in str(refused.value) and "make stack-lock" in str(refused.value)


def lock_path(lock):
    tasks = DataLoader().load_from_file(str(ROOT / "roles" / "stack" / "tasks" / "main.yml"))
    task = [task for task in tasks if "stack_selected_lock" in task.get("ansible.builtin.set_fact", {})][0]
    profile = dict(PROFILE, python=dict(PROFILE["python"], lock=lock))
    # ansible-core 2.19 renders only trusted templates, which a role's own files are; older cores have no trust.
    template = getattr(ansible.template, "trust_as_template", lambda text: text)(task["vars"]["__stack_lock_path"])
    return Templar(loader=DataLoader(), variables={"stack_selected": profile, "role_path": "/c/roles/stack"}).template(
        template)


def test_the_stack_role_reads_a_shipped_lock_from_its_files_and_another_by_its_absolute_path():
    assert lock_path("sglang-0.5.17-cu130.json") == "/c/roles/stack/files/locks/sglang-0.5.17-cu130.json"
    assert lock_path("/srv/locks/site.json") == "/srv/locks/site.json"
