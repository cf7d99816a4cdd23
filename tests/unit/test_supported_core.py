"""roles/stack/tasks/core.yml: a controller's ansible-core older than the collection supports is refused by name."""
from pathlib import Path

import jinja2
import jinja2.meta
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from test_role_facts import trusted

CHECKOUT = Path(__file__).resolve().parents[2]
ROLES = CHECKOUT / "roles"
PLAYBOOKS = CHECKOUT / "playbooks"
CHECK = yaml.safe_load((ROLES / "stack" / "tasks" / "core.yml").read_text())[0]["ansible.builtin.assert"]


def render(template, full):
    return Templar(loader=DataLoader(), variables={"ansible_version": {"full": full}}).template(trusted(template))


def test_a_core_older_than_the_floor_is_refused_naming_its_version_and_the_fix():
    assert render("{{ %s }}" % CHECK["that"], "2.15.13") is False
    message = render(CHECK["fail_msg"], "2.15.13")
    assert message.startswith("ansible-core 2.15.13 runs this play") and "ansible-core>=2.16" in message


def test_the_floor_and_newer_cores_pass():
    for full in ("2.16.0", "2.18.19", "2.19.14", "2.21.0"):
        assert render("{{ %s }}" % CHECK["that"], full) is True


def test_the_floor_is_the_one_the_collection_and_its_roles_declare():
    requires = yaml.safe_load((CHECKOUT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert requires == ">=2.16.0" and "version('2.16', '>=')" in CHECK["that"]
    for meta in sorted(ROLES.glob("*/meta/main.yml")):
        assert yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"] == "2.16", meta


def test_every_role_meets_the_check_first_through_stack_or_service_user():
    stack = yaml.safe_load((ROLES / "stack" / "tasks" / "main.yml").read_text())
    assert stack[0]["ansible.builtin.import_tasks"] == "core.yml"
    service_user = yaml.safe_load((ROLES / "service_user" / "tasks" / "main.yml").read_text())
    assert service_user[0]["ansible.builtin.import_role"] == {"name": "blackwell.gpu_node.stack", "tasks_from": "core"}
    for meta in sorted(ROLES.glob("*/meta/main.yml")):
        if meta.parent.parent.name in ("stack", "service_user"):
            continue
        roles = [dependency["role"] for dependency in yaml.safe_load(meta.read_text())["dependencies"]]
        assert set(roles) & {"blackwell.gpu_node.stack", "blackwell.gpu_node.service_user"}, meta


def test_every_playbook_meets_the_check_before_its_first_play_does_anything():
    playbooks = sorted(PLAYBOOKS.glob("*.yml"))
    assert len(playbooks) == 10
    for playbook in playbooks:
        first_play = yaml.safe_load(playbook.read_text())[0]
        first_task = (first_play.get("pre_tasks") or first_play["tasks"])[0]
        # Included, not imported: an import would bring the stack role's defaults into the play, and with them a
        # stack_profile, so that the upgrade run without -e stack_profile would target the default profile.
        assert first_task["ansible.builtin.include_role"] == {"name": "blackwell.gpu_node.stack", "tasks_from": "core"}, (
            playbook)
        assert "ansible.builtin.import_role" not in playbook.read_text(), playbook
    specs = yaml.safe_load((ROLES / "stack" / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert specs["core"]["short_description"] == "Refuse an ansible-core older than the collection supports"
    assert not specs["core"]["options"]


def test_the_check_reads_no_variable_the_stack_roles_defaults_could_shadow():
    """The check runs as the stack role's entry point, under the role's defaults: it reads ansible_version alone,
    which no defaults set."""
    environment = jinja2.Environment()
    environment.tests["version"] = lambda value, version, operator: True
    read = set()
    for template in ("{{ %s }}" % CHECK["that"], CHECK["fail_msg"]):
        read |= jinja2.meta.find_undeclared_variables(environment.parse(template))
    assert read == {"ansible_version"}
    assert "ansible_version" not in yaml.safe_load((ROLES / "stack" / "defaults" / "main.yml").read_text())
