"""roles/cuda/tasks: the tasks keep exactly what the role's check declares (plugins/module_utils/_cuda/state.py,
managed), and name none of it themselves.

The declaration is the one the role's own check computes: check.yml's call of cuda_converged_info, its arguments
evaluated from the role's defaults and vars, given to managed. Each task that changes the host is evaluated the same
way, its loop and conditions included, and what it keeps (a package, a directory, a file, a link, an alternative)
is compared with the declared things. Jinja evaluates them with Ansible's filters and tests and the collection's
own, under the names the role calls them by (Ansible's templar would need the collection loader, which the unit
tests' plain sys.path import rules out).

A task of a module that this test cannot tell keeps something or not fails it, until it is classified here.
"""
import importlib
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as AnsibleFilters
from ansible.plugins.test.core import TestModule as AnsibleTests

from ansible_collections.blackwell.gpu_node.plugins.lookup.defaults import LookupModule as DefaultsLookup
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.state import managed, platform_settings

CHECKOUT = Path(__file__).resolve().parents[3]
ROLE = CHECKOUT / "roles" / "cuda"
# The driver's and Fabric Manager's tasks, which the check leaves out (state.py says so): they run, converged or not.
UNCOVERED = ("driver.yml", "fabric.yml", "persistenced.yml")
KEYWORDS = {"name", "vars", "when", "loop", "loop_control", "register", "changed_when", "failed_when", "check_mode",
            "notify", "tags", "block", "rescue", "always", "become", "no_log", "ignore_errors", "delegate_to",
            "run_once", "environment", "until", "retries", "delay", "listen", "args"}
# Modules that change nothing on the host, or only what a task after them reads in the same run.
LOOKING = {"ansible.builtin.assert", "ansible.builtin.debug", "ansible.builtin.set_fact", "ansible.builtin.stat",
           "ansible.builtin.meta", "ansible.builtin.fail", "ansible.builtin.import_tasks",
           "ansible.builtin.include_tasks", "blackwell.gpu_node.gpu_facts", "blackwell.gpu_node.cuda_converged_info"}
STACK = {"name": "cu130", "operating_systems": ["debian12", "ubuntu2404"], "architectures": ["x86_64"],
         "cuda": {"series": "13.0", "home": "/usr/local/cuda-13.0", "apt_package": "cuda-toolkit-13-0",
                  "apt_version": "13.0.1-1", "driver_branch_min": 580}}
FACTS = {"distribution": "Debian", "distribution_version": "12.8", "architecture": "x86_64",
         "python": {"executable": "/usr/bin/python3"}, "gpu": {"state": "ok", "driver_version": "580.95.05"}}
EXPRESSION = re.compile(r"\{\{(?:(?!\{\{|\}\}).)*\}\}", re.DOTALL)


def environment():
    found = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    # Jinja's own default, which Ansible's replaces on 2.19 with one for its own undefined values.
    for name, function in AnsibleFilters().filters().items():
        found.filters.setdefault(name, function)
    for path in sorted((CHECKOUT / "plugins" / "filter").glob("*.py")):
        plugin = importlib.import_module("ansible_collections.blackwell.gpu_node.plugins.filter." + path.stem)
        found.filters.update(("blackwell.gpu_node." + name, function)
                             for name, function in plugin.FilterModule().filters().items())
    found.tests.update(AnsibleTests().tests())
    return found


JINJA = environment()


def evaluate(value, variables):
    """value as Ansible templates it: a string that is one expression gives its native value."""
    if isinstance(value, dict):
        return dict((key, evaluate(item, variables)) for key, item in value.items())
    if isinstance(value, list):
        return [evaluate(item, variables) for item in value]
    if not isinstance(value, str) or "{{" not in value:
        return value
    if EXPRESSION.fullmatch(value.strip()):
        return JINJA.compile_expression(value.strip()[2:-2].strip(), undefined_to_none=False)(**variables)
    return JINJA.from_string(value).render(**variables)


def condition(when, variables):
    return all(evaluate("{{ %s }}" % test if isinstance(test, str) else test, variables)
               for test in ([] if when is None else when if isinstance(when, list) else [when]))


def load(path):
    return yaml.safe_load(path.read_text()) or []


def undefined(value):
    """Whether value holds an undefined one, as a filter given an undefined argument returns it inside its own."""
    if isinstance(value, dict):
        return any(undefined(item) for item in value.values())
    if isinstance(value, list):
        return any(undefined(item) for item in value)
    return isinstance(value, jinja2.Undefined)


def role_variables(alternative, state=None):
    """The role's defaults and vars, each evaluated once what it reads is, with the facts of a Debian 12 host whose
    update-alternatives has (alternative) or lacks the cuda alternative, and the check's result (state)."""
    variables = dict(stack_selected=STACK, ansible_facts=FACTS, ansible_check_mode=False, ansible_managed="managed",
                     __cuda_alternative=dict(rc=0 if alternative else 2, stdout_lines=[]))
    if state is not None:
        variables["__cuda_state"] = state

    def lookup(plugin, name):
        if plugin == "blackwell.gpu_node.defaults":
            return DefaultsLookup().run([name])[0]
        if plugin == "ansible.builtin.file":
            return (ROLE / "files" / name).read_text()
        return JINJA.from_string((ROLE / "templates" / name).read_text()).render(**variables)
    variables["lookup"] = lookup
    pending = dict(load(ROLE / "defaults" / "main.yml"), **load(ROLE / "vars" / "main.yml"))
    while pending:
        done = {}
        for name, value in pending.items():
            try:
                done[name] = evaluate(value, variables)
            except jinja2.UndefinedError:
                continue
            if undefined(done[name]):
                del done[name]
        if not done:
            # What the play's other roles and the check's result give: none of it is read below without them.
            break
        variables.update(done)
        pending = dict((name, value) for name, value in pending.items() if name not in done)
    return variables


def declared(variables, alternative):
    """The check's call, evaluated as check.yml makes it, and what managed declares for a host with nothing of the
    role's yet (neither the toolkit nor its runtime: nothing to adopt)."""
    [check] = [task for task in load(ROLE / "tasks" / "check.yml") if "blackwell.gpu_node.cuda_converged_info" in task]
    settings = evaluate(check["blackwell.gpu_node.cuda_converged_info"], variables)
    settings.update(platform_settings(settings, FACTS), linker_conf_dir="/etc/ld.so.conf.d")
    things = managed(settings, dict(packages={}, runtime_exists=False, alternative=[] if alternative else None))
    return settings, things


def check_result(settings, things):
    """What check.yml registers, as far as the role's tasks read it."""
    return dict(managed=things, repository=dict(url=settings["repository"]["url"]), adopted=False, converged=False,
                platform=dict((name, settings[name]) for name in ("os_id", "architecture", "repo_architecture")))


def module_of(task):
    [module] = [key for key in task if key not in KEYWORDS]
    return module


def kept(module, arguments, state_dir):
    """(kind, path or name) of each thing a task of module keeps with these arguments; None for a module that
    changes nothing the role keeps."""
    if module == "ansible.builtin.apt":
        names = arguments.get("name", [])
        return [("package", name.split("=")[0]) for name in ([names] if isinstance(names, str) else names)]
    if module == "ansible.builtin.dpkg_selections":
        return [("package", arguments["name"])]
    if module == "ansible.builtin.file":
        state = arguments.get("state", "file")
        # Removes the copies that copy's backup made for the rescue of the same run.
        return [] if state == "absent" else [(state, arguments.get("dest", arguments.get("path")))]
    if module in ("ansible.builtin.copy", "ansible.builtin.template"):
        return [("file", arguments["dest"])]
    if module == "blackwell.gpu_node.cuda_linker_entries":
        return [("file", arguments["own_file"])]
    if module == "ansible.builtin.get_url":
        # The key's download, which the export reads: a working copy in the role's own state directory.
        assert arguments["dest"].startswith(state_dir + "/"), arguments["dest"]
        return []
    if module == "ansible.builtin.apt_key":
        # What apt still trusts of cuda_repo_revoked_key_ids the check asks apt itself.
        return []
    if module == "ansible.builtin.command":
        argv = arguments["argv"]
        if argv[:2] == ["update-alternatives", "--install"]:
            return [("alternative", argv[3])]
        if argv[:2] == ["update-alternatives", "--set"]:
            return [("alternative", argv[2])]
        if argv[0] == "gpg" and "--output" in argv:
            return [("file", argv[argv.index("--output") + 1])]
        return None
    raise AssertionError("classify %s: does it keep something on the host?" % module)


def tasks_of(tasks, variables, inherited=(), evaluated=True):
    """Each task of a block's, with its blocks' variables (evaluated) and conditions; a rescue runs only to undo a
    change that failed, and keeps nothing."""
    for task in tasks:
        if "block" in task:
            scope = dict(variables, **evaluate(task.get("vars", {}), variables)) if evaluated else variables
            yield from tasks_of(task["block"], scope, list(inherited) + ([task["when"]] if "when" in task else []),
                                evaluated)
        else:
            yield task, variables, inherited


def written_in(raw, name):
    """Whether a task's own text (its module's arguments, before Jinja) states name: a path anywhere in it, a
    package's or an alternative's name where a module takes one."""
    if not name.startswith("/"):
        argv = raw.get("argv") if isinstance(raw, dict) else None
        names = [raw.get("name")] if isinstance(raw, dict) else []
        if isinstance(argv, list) and argv[:1] == ["update-alternatives"]:
            names.extend(argv[2:4])
        return any(name == given or isinstance(given, list) and name in given for given in names)
    if isinstance(raw, dict):
        return any(written_in(value, name) for value in raw.values())
    if isinstance(raw, list):
        return any(written_in(value, name) for value in raw)
    return isinstance(raw, str) and name in raw


def keeping(variables):
    """(kind, path or name) -> the task that keeps it, of every task of the covered files."""
    found, registered = {}, {}
    state_dir = variables["__cuda_state_dir"]
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        if path.name in UNCOVERED:
            continue
        for task, scope, conditions in tasks_of(load(path), variables):
            module = module_of(task)
            scope = dict(registered, **scope)
            if module in LOOKING or not all(condition(when, scope) for when in conditions):
                continue
            scope = dict(scope, **evaluate(task.get("vars", {}), scope))
            loop_var = task.get("loop_control", {}).get("loop_var", "item")
            items = evaluate(task["loop"], scope) if "loop" in task else [None]
            for item in items:
                here = dict(scope, **({loop_var: item} if "loop" in task else {}))
                if "when" in task and not condition(task["when"], here):
                    continue
                arguments = evaluate(task[module] or {}, here)
                things = kept(module, arguments, state_dir)
                if module == "ansible.builtin.command" and things is None:
                    assert task.get("changed_when") is False, "classify %s: %s" % (path.name, task["name"])
                for thing in things or []:
                    found.setdefault(thing, "%s: %s" % (path.name, task["name"]))
                # What a later task reads of this one's result; what the host answered is the case's own.
                if "register" in task and task["register"] not in variables:
                    registered[task["register"]] = dict(changed=False, rc=0, stdout="", stdout_lines=[], results=[],
                                                        dest=arguments.get("dest"))
    return found


def stated(names):
    """Each task of the covered files, whatever its module, that states one of names in its own text."""
    found = []
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        if path.name in UNCOVERED:
            continue
        for task, _scope, _conditions in tasks_of(load(path), {}, evaluated=False):
            found.extend("%s: %s: %s" % (path.name, task["name"], name) for name in sorted(names)
                         if written_in(task[module_of(task)], name))
    return found


def identity(thing):
    return thing["kind"], thing.get("path", thing.get("name"))


@pytest.mark.parametrize("alternative", [True, False], ids=["cuda alternative", "no alternative"])
def test_the_tasks_keep_exactly_what_the_check_declares(alternative):
    settings, things = declared(role_variables(alternative), alternative)
    found = keeping(role_variables(alternative, check_result(settings, things)))
    # The keyring is a copy of the key the repository's tasks export: the check reads that too.
    expected = set(identity(thing) for thing in things) | set(
        ("file", thing["source"]) for thing in things if "source" in thing)
    assert sorted(set(found) - expected) == [], "kept by the tasks, not declared by the check"
    assert sorted(expected - set(found)) == [], "declared by the check, kept by no task"
    # Each is read from the declaration, never stated again in a task.
    assert stated(set(name for _kind, name in expected)) == []
    assert {thing["part"] for thing in things} == {"repository", "toolkit", "registration"}
    assert ("alternative", "cuda") in expected if alternative else all(kind != "alternative" for kind, _name in expected)


def test_a_thing_added_to_the_declaration_is_kept_with_no_other_change_and_an_unknown_module_is_refused():
    """A file the check declares for the repository is written by the repository's tasks as they are; a task of a
    module the comparison cannot read fails it rather than pass unseen."""
    settings, things = declared(role_variables(True), True)
    extra = dict(kind="file", part="repository", path="/etc/apt/extra", mode="0644", content="")
    found = keeping(role_variables(True, check_result(settings, things + [extra])))
    assert found[("file", "/etc/apt/extra")].startswith("repository.yml: ")
    assert kept("ansible.builtin.copy", {"dest": "/etc/x"}, "/var/lib/x") == [("file", "/etc/x")]
    with pytest.raises(AssertionError, match="classify ansible.builtin.lineinfile"):
        kept("ansible.builtin.lineinfile", {"path": "/etc/x"}, "/var/lib/x")
