"""The files the runtime_env role writes into a virtualenv, declared once (plugins/module_utils/_stack/runtime_env.py,
files_to_render): the role's tasks write exactly these, and the server restarts when any of them changes
(plugins/module_utils/_sglang/runs_from.py).

The role's vars and templates are evaluated with Jinja, Ansible's filters and the collection's own, under the names
the role calls them by (Ansible's templar would need the collection loader, which the unit tests' plain sys.path
import rules out).
"""
import importlib
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as AnsibleFilters

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.runs_from import (
    STACK_PATTERNS,
    runs_from,
    runs_from_digest,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    HOOK_FILE,
    MODULE_FILE,
    RENDERED_FILES,
    RESTARTING_FILES,
    build_environment,
    files_to_render,
)

CHECKOUT = Path(__file__).resolve().parents[3]
ROLE = CHECKOUT / "roles" / "runtime_env"
SETTINGS = build_environment(cuda_home="/usr/local/cuda-13.0", triton_ptxas_path="/usr/local/cuda-13.0/bin/ptxas",
                             nccl_profile="none", nccl_profiles={"none": {}})
# The modules the role's tasks call that write nothing into the virtualenv.
LOOKING = {"ansible.builtin.import_tasks", "ansible.builtin.debug", "ansible.builtin.assert",
           "ansible.builtin.set_fact", "ansible.builtin.include_vars", "blackwell.gpu_node.gpu_facts"}
KEYWORDS = {"name", "vars", "when", "register", "tags", "changed_when", "failed_when", "check_mode", "notify"}


def environment():
    found = jinja2.Environment(keep_trailing_newline=True)
    found.filters.update(AnsibleFilters().filters())
    for path in sorted((CHECKOUT / "plugins" / "filter").glob("*.py")):
        plugin = importlib.import_module("ansible_collections.blackwell.gpu_node.plugins.filter." + path.stem)
        found.filters.update(("blackwell.gpu_node." + name, function)
                             for name, function in plugin.FilterModule().filters().items())
    return found


def rendered_by_the_role(**run):
    """__runtime_env_files as the role's vars evaluate it in a run with the variables run (ansible_managed and
    runtime_env_venv_path by default as site's), and the templates its lookups rendered."""
    jinja, looked_up = environment(), []
    variables = dict(dict(ansible_managed="Ansible managed", runtime_env_venv_path="/opt/ml-env"), **run)
    variables["__runtime_env_settings"] = SETTINGS

    def lookup(plugin, name):
        assert plugin == "ansible.builtin.template", plugin
        looked_up.append(name)
        return jinja.from_string((ROLE / "templates" / name).read_text()).render(**variables)
    expression = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__runtime_env_files"]
    # One expression, which asks the declaration; a mapping would name the files a second time.
    assert isinstance(expression, str) and expression.startswith("{{") and expression.endswith("}}"), expression
    files = jinja.compile_expression(expression[2:-2])(lookup=lookup, **variables)
    return files, looked_up


def test_the_role_writes_exactly_the_declared_files():
    files, looked_up = rendered_by_the_role()
    assert sorted(files) == sorted(RENDERED_FILES)
    assert files == files_to_render(files[MODULE_FILE])
    # Every template of the role is rendered into the file it is named after, and read only for it.
    templates = sorted(path.name for path in (ROLE / "templates").iterdir())
    assert looked_up == templates and all(name[:-len(".j2")] in RENDERED_FILES for name in templates)


def role_tasks():
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()):
            [module] = [key for key in task if key not in KEYWORDS]
            yield path.name, task, module


def test_the_role_writes_into_the_virtualenv_only_through_the_declared_files():
    """runtime_env_state writes the files it is given, and nothing else of the role's writes into the virtualenv."""
    calls = 0
    for name, task, module in role_tasks():
        if module == "blackwell.gpu_node.runtime_env_state":
            calls += 1
            assert task[module]["files"] == "{{ __runtime_env_files }}", (name, task["name"])
        else:
            assert module in LOOKING, "%s: %s: does %s write into the virtualenv?" % (name, task["name"], module)
    # The role's render, and the check that validate runs.
    assert calls == 2


def venv_with(tmp_path, names):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for pattern in STACK_PATTERNS:
        (site / pattern.replace("*", "1.0")).mkdir()
    for name in names:
        (site / name).write_text("# %s\n" % name)
    return site


def test_the_server_runs_from_exactly_the_files_the_role_writes(tmp_path):
    site = venv_with(tmp_path, list(files_to_render("ENVIRONMENT = {}\n")) + ["sitecustomize.py", "other.pth"])
    found = [Path(path).name for path, _sha1 in runs_from(str(tmp_path)) if not path.endswith(".dist-info")]
    assert sorted(found) == sorted(RESTARTING_FILES)
    # Only the hook, whose text follows from the module's name, is left out: servers keep their digest.
    assert set(RENDERED_FILES) - set(RESTARTING_FILES) == {HOOK_FILE}
    assert all(sha1 for path, sha1 in runs_from(str(tmp_path)) if Path(path).parent == site
               and not path.endswith(".dist-info"))


@pytest.mark.parametrize("name", RESTARTING_FILES)
def test_a_change_of_any_file_the_role_writes_restarts_the_server(tmp_path, name):
    site = venv_with(tmp_path, RENDERED_FILES)
    before = runs_from_digest(str(tmp_path))
    with open(str(site / name), "a") as edited:
        edited.write("# edited by hand\n")
    assert runs_from_digest(str(tmp_path)) != before


def test_site_after_the_upgrade_finds_the_files_the_upgrade_rendered_and_keeps_the_servers_digest(tmp_path):
    """The upgrade renders into the target's own directory, from its own run (whose ansible_managed may name another
    controller, time or play); the switch starts the server through the stable link; site then renders through the
    link. Any byte of difference would be written again and would restart the server, outside any drain."""
    target = tmp_path / "ml-env.cu130-0123456789ab"
    site = venv_with(target, [])
    link = tmp_path / "ml-env"
    link.symlink_to(target.name)
    upgrade_files = rendered_by_the_role(runtime_env_venv_path=str(target),
                                         ansible_managed="Ansible managed: upgrade on awx-job-7f3c at 09:14")[0]
    for name, content in upgrade_files.items():
        (site / name).write_text(content)
    started_with = runs_from_digest(str(link))

    site_files = rendered_by_the_role(runtime_env_venv_path=str(link),
                                      ansible_managed="Ansible managed: site on ops-laptop at 11:02")[0]
    found = dict((name, (link / "lib" / "python3.11" / "site-packages" / name).read_text()) for name in RENDERED_FILES)
    assert found == site_files
    for name, content in site_files.items():
        (site / name).write_text(content)
    assert runs_from_digest(str(link)) == started_with
