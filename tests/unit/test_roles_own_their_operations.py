"""Each role owns its operations: a playbook reaches a role's tasks only through an entry point the role declares
(include_role or import_role with tasks_from, documented in the role's meta/argument_specs.yml), never by a path
into the role, and no plugin reads a host's variables from hostvars: the caller passes the values in."""
import io
import re
import tokenize
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
ROLES = ROOT / "roles"
COLLECTION = "blackwell.gpu_node."


def playbook_files():
    return sorted(path for pattern in ("*.yml", "*.yaml") for path in PLAYBOOKS.rglob(pattern))


def task_files():
    """Every file of tasks the playbooks and roles hold."""
    found = playbook_files()
    for folder in ("tasks", "handlers"):
        found += sorted(path for pattern in ("*.yml", "*.yaml") for path in ROLES.glob("*/%s/**/%s" % (folder, pattern)))
    return found


def role_includes(node):
    """Each include_role or import_role argument mapping in node that names tasks_from."""
    if isinstance(node, dict):
        if "tasks_from" in node and ("name" in node or "role" in node):
            yield node
        for value in node.values():
            yield from role_includes(value)
    elif isinstance(node, list):
        for value in node:
            yield from role_includes(value)


def entry_points(role):
    return yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def tasks_from_targets():
    found = []
    for path in task_files():
        for include in role_includes(yaml.safe_load(path.read_text())):
            found.append((str(path.relative_to(ROOT)), include.get("name", include.get("role")), include["tasks_from"]))
    return found


@pytest.mark.parametrize("path", playbook_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_playbook_reaches_into_a_role_by_its_path(path):
    assert "../roles" not in path.read_text(), "%s names a path into a role: use its entry point" % path


def test_every_tasks_from_is_an_entry_point_its_role_declares():
    targets = tasks_from_targets()
    assert ("playbooks/tasks/node_drain.yml", "blackwell.gpu_node.gateway", "drain") in targets
    undeclared = []
    for path, name, tasks_from in targets:
        assert name.startswith(COLLECTION) and "{{" not in tasks_from, (path, name, tasks_from)
        role = name[len(COLLECTION):]
        entry = re.sub(r"\.ya?ml$", "", tasks_from)
        assert (ROLES / role / "tasks" / (entry + ".yml")).is_file(), (path, name, tasks_from)
        if entry not in entry_points(role):
            undeclared.append("%s: %s tasks_from %s" % (path, name, tasks_from))
    assert undeclared == []


def test_every_entry_point_documents_itself_and_its_options():
    for specs in sorted(ROLES.glob("*/meta/argument_specs.yml")):
        for entry, spec in yaml.safe_load(specs.read_text())["argument_specs"].items():
            where = "%s: %s" % (specs.relative_to(ROOT), entry)
            assert (specs.parent.parent / "tasks" / (entry + ".yml")).is_file(), where
            assert spec["short_description"] and spec["description"] and spec["version_added"], where
            for option, documented in (spec.get("options") or {}).items():
                assert documented["description"] and documented["type"], (where, option)


def code_without_strings_or_comments(path):
    """The Python source of path with every string and comment left out."""
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type not in (tokenize.STRING, tokenize.COMMENT):
            kept.append(token.string)
    return " ".join(kept)


@pytest.mark.parametrize("path", sorted((ROOT / "plugins").rglob("*.py")), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_plugin_reads_a_variable_from_hostvars(path):
    code = code_without_strings_or_comments(path)
    assert not re.search(r"\bhostvars \[|\bhostvars \. get \(", code), "%s reads a variable from hostvars" % path
    assert not re.search(r"\bdef \w+ \([^)]*\bhostvars\b", code), "%s takes hostvars as an argument" % path
