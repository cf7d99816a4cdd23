"""The collection's public surface: the modules and filters a playbook of the user's own calls. Every other module,
filter and lookup says in its documentation that it is internal, and names the roles or playbooks that call it,
so that nobody mistakes it for part of the compatibility promise; the README names the public ones."""
import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

PUBLIC_MODULES = {
    "benchmark", "gateway_info", "gpu_facts", "gpu_health_info", "nccl_smoke_info", "node_snapshot",
    "node_snapshot_info", "sglang_diagnosis", "sglang_server", "sglang_server_info", "wait_for_server",
}
PUBLIC_FILTERS = {"benchmark_compare", "stack_profile"}
PUBLIC_LOOKUPS = set()

INTERNAL_LINE = re.compile(r"^Internal to (?P<callers>.+), which calls? it; not meant for playbooks of your own\.$")
CALLER = re.compile(r"C\(blackwell\.gpu_node\.(\w+)\)")


def python_documentation(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["DOCUMENTATION"]:
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no DOCUMENTATION" % path)


def plugins():
    found = []
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        found.append(pytest.param("module", path.stem, python_documentation(path), PUBLIC_MODULES,
                                  id="module-" + path.stem))
    for path in sorted((ROOT / "plugins" / "filter").glob("*.yml")):
        found.append(pytest.param("filter", path.stem, yaml.safe_load(path.read_text())["DOCUMENTATION"],
                                  PUBLIC_FILTERS, id="filter-" + path.stem))
    for path in sorted((ROOT / "plugins" / "lookup").glob("*.py")):
        found.append(pytest.param("lookup", path.stem, python_documentation(path), PUBLIC_LOOKUPS,
                                  id="lookup-" + path.stem))
    return found


def callers_exist(callers):
    return all((ROOT / "roles" / name).is_dir() or (ROOT / "playbooks" / (name + ".yml")).is_file()
               for name in callers)


@pytest.mark.parametrize("kind, name, documentation, public", plugins())
def test_each_plugin_is_public_or_says_it_is_internal_and_who_calls_it(kind, name, documentation, public):
    description = documentation["description"]
    first = " ".join((description[0] if isinstance(description, list) else description).split())
    internal = INTERNAL_LINE.match(first)
    if name in public:
        assert not internal and "internal" not in documentation["short_description"].lower(), (kind, name)
        return
    assert internal, "%s %s: the description begins with %r" % (kind, name, first)
    assert documentation["short_description"].endswith(" (internal)"), (kind, name)
    callers = CALLER.findall(internal.group("callers"))
    assert callers and callers_exist(callers), (kind, name, callers)


def test_the_readme_names_the_public_modules_and_filters_and_no_other():
    readme = " ".join((ROOT / "README.md").read_text().split())
    sentence = re.search(r"Their modules work in playbooks of your own too: (.+?)\. The others say", readme)
    assert sentence, "README.md lost the sentence that names the public modules"
    assert set(re.findall(r"`(\w+)`", sentence.group(1))) == PUBLIC_MODULES | PUBLIC_FILTERS
