"""plugins/module_utils/_common/defaults.py: the SGLang server's default port and the collection's state directory
are each defined there once, and everything in roles/, plugins/ and playbooks/ reads them from there.

Python imports them. A module documents them by extending the doc fragment blackwell.gpu_node.defaults, whose
defaults must be the values, as must every documented default of a module option that takes one. A role or playbook
leaves a module's option out (default(omit)) so that the module's default applies, or asks the lookup
blackwell.gpu_node.defaults where it builds on the value. The sglang_server role's defaults state both for the user,
and the roles' argument specs document them: each must be the value, or say how the role's defaults get it.

Any other statement of either value in code is a copy, and fails here. Documentation may show them: a plugin's
examples, return values and descriptions, a role's argument specs (but for their defaults), READMEs, comments.
"""
import ast
import importlib
import re
from pathlib import Path

import pytest
import yaml
from jinja2.nativetypes import NativeEnvironment

from ansible_collections.blackwell.gpu_node.plugins.doc_fragments.defaults import ModuleDocFragment
from ansible_collections.blackwell.gpu_node.plugins.lookup.defaults import LookupModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT, STATE_DIR

ROOT = Path(__file__).resolve().parents[4]
SCANNED = ("roles", "plugins", "playbooks")
VALUES = (SERVER_PORT, STATE_DIR)
# The port as a number of its own, not digits of a longer word (a hash, a version, a longer number).
PORT_TEXT = re.compile(r"(?<![0-9A-Za-z_.])%d(?![0-9A-Za-z_]|\.[0-9])" % SERVER_PORT)
DEFINITION = "plugins/module_utils/_common/defaults.py"
FRAGMENT = "plugins/doc_fragments/defaults.py"
FRAGMENT_OPTIONS = {"STATE_DIR": ("state_dir", STATE_DIR), "SERVER_STATE_DIR": ("server_state_dir", STATE_DIR),
                    "PORT": ("port", SERVER_PORT)}
# The variables by which the user reads them, in the sglang_server role's defaults.
USER_FACING = {"sglang_server_port": SERVER_PORT, "sglang_server_state_dir": STATE_DIR}
# The same number with another meaning: the gateway package's own --port default (sglang-router's and smg's), which
# the launcher assumes where a command line gives none.
OTHER_MEANING = {"roles/gateway/files/gateway_launch.py": 1}
PLUGIN_DOCUMENTATION = ("DOCUMENTATION", "EXAMPLES", "RETURN")
MISSING = object()


def states(value):
    """Whether value, one scalar, states the port or the state directory."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value == SERVER_PORT
    return isinstance(value, str) and (STATE_DIR in value or bool(PORT_TEXT.search(value)))


def documented_defaults(options, where):
    """(where.option, default) of each option of a documentation's options, suboptions included."""
    found = []
    for name, option in (options or {}).items():
        option = option or {}
        if "default" in option:
            found.append(("%s.%s" % (where, name), option["default"]))
        found += documented_defaults(option.get("suboptions"), "%s.%s" % (where, name))
    return found


def python_copies(path):
    """What a Python file's code states: every constant but its docstrings and plugin documentation, whose
    option defaults count instead (a doc fragment's are all documentation)."""
    tree = ast.parse(path.read_text())
    documentation, skipped = [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        fragment = isinstance(node, ast.ClassDef) and node.name == "ModuleDocFragment"
        for statement in (node.body if isinstance(node, (ast.Module, ast.ClassDef)) else []):
            if not isinstance(statement, ast.Assign) or not isinstance(statement.value, ast.Constant):
                continue
            names = [target.id for target in statement.targets if isinstance(target, ast.Name)]
            if fragment or isinstance(node, ast.Module) and set(names) & set(PLUGIN_DOCUMENTATION):
                skipped.add(id(statement.value))
                if "EXAMPLES" not in names and "RETURN" not in names:
                    documentation.append((statement.lineno, yaml.safe_load(statement.value.value)))
    found = ["line %d: %r" % (node.lineno, node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and id(node) not in skipped and states(node.value)]
    for line, parsed in documentation:
        found += ["line %d: %s default %r" % (line, where, default)
                  for where, default in documented_defaults((parsed or {}).get("options"), "options")
                  if states(default)]
    return found


def yaml_copies(value, where):
    """(where, scalar) of each key and value of loaded YAML that states one of them."""
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            found += [("%s key" % where, key)] if states(key) else []
            found += yaml_copies(item, "%s.%s" % (where, key) if where else str(key))
        return found
    if isinstance(value, list):
        return [copy for index, item in enumerate(value) for copy in yaml_copies(item, "%s[%d]" % (where, index))]
    return [(where, value)] if states(value) else []


def yaml_file_copies(relative, data):
    if relative.startswith("plugins/"):
        # A filter's or test's documentation: its option defaults count, its examples and return values do not.
        documentation = (data or {}).get("DOCUMENTATION") or {}
        return ["%s default %r" % (where, default)
                for where, default in documented_defaults(documentation.get("options"), "DOCUMENTATION.options")
                if states(default)]
    if relative.endswith("/meta/argument_specs.yml"):
        # Documentation, but for a default, which states the value exactly or none (the roles' test checks it).
        return ["%s default %r" % (where, default)
                for entry, spec in ((data or {}).get("argument_specs") or {}).items()
                for where, default in documented_defaults(spec.get("options"), entry)
                if states(default) and default not in VALUES]
    if relative == "roles/sglang_server/defaults/main.yml":
        data = dict((name, value) for name, value in data.items() if name not in USER_FACING)
    return ["%s: %r" % (where, value) for where, value in yaml_copies(data, "")]


def text_copies(path):
    return ["line %d: %s" % (number, line.strip()) for number, line in enumerate(path.read_text().splitlines(), 1)
            if states(line)]


def scanned_files():
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".md", ".pyc"):
                yield path


def copies():
    """{file: [what it states]} of every copy of either value in roles/, plugins/ and playbooks/."""
    found = {}
    for path in scanned_files():
        relative = str(path.relative_to(ROOT))
        if relative in (DEFINITION, FRAGMENT):
            continue
        if path.suffix == ".py":
            stated = python_copies(path)
        elif path.suffix in (".yml", ".yaml"):
            stated = yaml_file_copies(relative, yaml.safe_load(path.read_text()))
        else:
            stated = text_copies(path)
        if len(stated) > OTHER_MEANING.get(relative, 0):
            found[relative] = stated
    return found


def test_no_file_but_defaults_py_states_the_port_or_the_state_directory():
    assert copies() == {}, (
        "Read them from plugins/module_utils/_common/defaults.py: import SERVER_PORT and STATE_DIR in Python; extend "
        "the doc fragment blackwell.gpu_node.defaults in a module's documentation; in YAML leave the module's option "
        "out (default(omit)), or ask lookup('blackwell.gpu_node.defaults', 'server_port' or 'state_dir').")


@pytest.mark.parametrize("text, stated", [
    ("http://127.0.0.1:%d/health" % SERVER_PORT, True),
    ("sglang_server_port | default(%d)" % SERVER_PORT, True),
    ("%s/cuda" % STATE_DIR, True),
    (SERVER_PORT, True),
    ("sha256:ab%dcd" % SERVER_PORT, False),
    ("1%d" % SERVER_PORT, False),
    ("version %d.1" % SERVER_PORT, False),
    (SERVER_PORT + 1, False),
    (True, False),
])
def test_a_copy_is_the_port_as_a_number_of_its_own_or_the_state_directory_in_any_text(text, stated):
    assert states(text) is stated


def test_a_python_file_states_them_in_code_and_option_defaults_not_in_its_prose(tmp_path):
    plugin = tmp_path / "plugin.py"
    text = ('"""Listens on %(port)d."""\n'
            'DOCUMENTATION = r"""\noptions:\n  port:\n    description: Like %(port)d.\n    default: %(port)d\n"""\n'
            'EXAMPLES = r"""\n- port: %(port)d\n"""\n'
            'PORT = %(port)d  # %(port)d\n'
            'URL = "http://127.0.0.1:%(port)d"\n'
            'def f():\n    """At %(state)s."""\n    return "%(state)s/x"\n')
    plugin.write_text(text % dict(port=SERVER_PORT, state=STATE_DIR))
    assert python_copies(plugin) == [
        "line 11: %d" % SERVER_PORT, "line 12: 'http://127.0.0.1:%d'" % SERVER_PORT,
        "line 15: '%s/x'" % STATE_DIR, "line 2: options.port default %d" % SERVER_PORT]


def test_a_role_argument_spec_default_states_the_value_exactly_or_not_at_all():
    specs = {"argument_specs": {"main": {"options": {
        "a": {"default": STATE_DIR, "description": "At %s." % STATE_DIR},
        "b": {"default": "{{ x | default('%s') }}" % STATE_DIR},
        "c": {"type": "dict", "suboptions": {"d": {"default": SERVER_PORT}}}}}}}
    assert yaml_file_copies("roles/r/meta/argument_specs.yml", specs) == [
        "main.b default \"{{ x | default('%s') }}\"" % STATE_DIR]


def fragment_options(variable):
    return yaml.safe_load(getattr(ModuleDocFragment, variable))["options"]


def test_the_doc_fragment_documents_each_value_once_as_defaults_py_defines_it():
    for variable, (option, value) in FRAGMENT_OPTIONS.items():
        assert fragment_options(variable) == {option: dict(fragment_options(variable)[option], default=value)}
        assert type(fragment_options(variable)[option]["default"]) is type(value), variable
    assert sorted(name for name in vars(ModuleDocFragment) if name.isupper()) == sorted(FRAGMENT_OPTIONS)


class Captured(Exception):
    """What a module's main() gave AnsibleModule."""


def argument_spec(name, monkeypatch):
    module = importlib.import_module("ansible_collections.blackwell.gpu_node.plugins.modules." + name)

    def capture(*args, **kwargs):
        raise Captured(kwargs["argument_spec"])
    monkeypatch.setattr(module, "AnsibleModule", capture)
    with pytest.raises(Captured) as captured:
        module.main()
    return captured.value.args[0]


def documented_options(path):
    """A module's options as ansible-doc shows them: each fragment's options, and the module's own keys of an
    option over the fragment's (ansible's add_fragments)."""
    documentation = next(yaml.safe_load(node.value.value) for node in ast.parse(path.read_text()).body
                         if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["DOCUMENTATION"])
    options = documentation.get("options") or {}
    for fragment in documentation.get("extends_documentation_fragment") or []:
        parts = fragment.split(".")
        assert parts[:2] == ["blackwell", "gpu_node"], fragment
        plugin = importlib.import_module("ansible_collections.blackwell.gpu_node.plugins.doc_fragments." + parts[2])
        text = getattr(plugin.ModuleDocFragment, parts[3].upper() if len(parts) > 3 else "DOCUMENTATION")
        for name, option in (yaml.safe_load(text).get("options") or {}).items():
            options[name] = dict(option, **options.get(name, {}))
    return options


def taken_and_documented(spec, documented, where):
    found = []
    for name, option in spec.items():
        here = documented.get(name) or {}
        found.append(("%s%s" % (where, name), option.get("default"), here.get("default")))
        found += taken_and_documented(option.get("options") or {}, here.get("suboptions") or {}, "%s%s." % (where, name))
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "plugins" / "modules").glob("*.py")), ids=lambda path: path.stem)
def test_a_module_documents_the_default_it_takes_from_defaults_py(path, monkeypatch):
    taken_options = argument_spec(path.stem, monkeypatch)
    for option, taken, documented in taken_and_documented(taken_options, documented_options(path), ""):
        if taken in VALUES or documented in VALUES:
            assert (type(documented), documented) == (type(taken), taken), option


def role_options():
    """(role, entry point, option, documented default, the role's defaults' value) of each option of each role's
    argument specs; MISSING where either has none."""
    found = []
    for specs in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        role = specs.parents[1]
        defaults = role / "defaults" / "main.yml"
        given = (yaml.safe_load(defaults.read_text()) if defaults.exists() else None) or {}
        for entry, spec in yaml.safe_load(specs.read_text())["argument_specs"].items():
            for name, option in (spec.get("options") or {}).items():
                found.append((role.name, entry, name, option.get("default", MISSING), given.get(name, MISSING)))
    return found


def without_inventory(value):
    """What a role's default comes to where the inventory sets nothing."""
    if not isinstance(value, str) or "{{" not in value:
        return value
    return NativeEnvironment().from_string(value).render(lookup=lambda plugin, name: LookupModule().run([name])[0])


def reads_a_value(given):
    return given in VALUES or isinstance(given, str) and "lookup('blackwell.gpu_node.defaults'" in given


def test_a_role_documents_each_value_as_its_defaults_give_it():
    checked = []
    for role, entry, name, documented, given in role_options():
        if documented is MISSING or not (states(documented) or given is not MISSING and reads_a_value(given)):
            # An int or bool a template gives is described, not declared (antsibull-docs takes no template there).
            continue
        checked.append(name)
        if given is MISSING:
            assert documented in VALUES, (role, entry, name)
        else:
            assert documented in (given, without_inventory(given)), (role, entry, name, documented, given)
    assert {"sglang_server_port", "sglang_server_state_dir", "gateway_state_dir", "preflight_server_state_dir",
            "cuda_driver_server_state_dir"} <= set(checked)


def test_the_sglang_server_role_states_both_for_the_user_as_defaults_py_defines_them():
    defaults = yaml.safe_load((ROOT / "roles" / "sglang_server" / "defaults" / "main.yml").read_text())
    assert dict((name, defaults[name]) for name in USER_FACING) == USER_FACING
    documented = dict((name, documented) for role, entry, name, documented, _given in role_options()
                      if role == "sglang_server" and entry == "main" and name in USER_FACING)
    assert documented == USER_FACING


@pytest.mark.parametrize("given, resolved", [
    ("{{ lookup('blackwell.gpu_node.defaults', 'state_dir') }}", STATE_DIR),
    ("{{ sglang_server_port | default(lookup('blackwell.gpu_node.defaults', 'server_port')) }}", SERVER_PORT),
    ("{{ lookup('blackwell.gpu_node.defaults', 'state_dir') }}/cuda", STATE_DIR + "/cuda"),
])
def test_a_roles_default_that_asks_the_lookup_comes_to_the_value_without_inventory(given, resolved):
    assert reads_a_value(given) and without_inventory(given) == resolved
