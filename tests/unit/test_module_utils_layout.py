"""plugins/module_utils is packages by domain, each file private, each domain importing only _common; and the
helpers of the trust boundary (readers, writers, owner runs, masking, account lookups) exist once, in _common."""
import ast
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PLUGINS = ROOT / "plugins"
PRIVATE = "# Private to the blackwell.gpu_node collection: not a public API, it may change in any release."
PREFIX = "ansible_collections.blackwell.gpu_node.plugins.module_utils."
# The preflight core runs every role's refusals before anything changes, so it asks those roles' cores for their
# decisions (never for helpers: those live in _common). A snapshot keeps the server's recorded command line, which
# the server's own state files hold; the gateway runs the way the server does, through the server's systemctl calls.
# The server restarts when a file the runtime_env role renders changes, as that role's core declares them.
CROSS_DOMAIN = {
    "_gateway/host.py": {"_sglang.instance"},
    "_node/preflight.py": {"_cuda.driver", "_cuda.fabric", "_sglang.gpus", "_stack.adopt_torch", "_stack.ml_stack"},
    "_sglang/runs_from.py": {"_stack.runtime_env"},
    "_stack/snapshot_node.py": {"_sglang.instance"},
}
# Defined in _common only: a second copy is how each new module got the trust boundary slightly wrong.
COMMON_ONLY = ("user_name", "group_name", "account", "read_text", "read_regular", "file_state", "sha1_regular",
               "write_atomically", "replace_link", "remove", "open_directory", "masked_text", "masked_argv",
               "owner_argv", "run_bounded", "result_line", "control_character_problem")
# Words of code that mark a file opened, a user looked up, or code run as another user, by hand.
COMMON_ONLY_WORDS = ("O_NOFOLLOW", "runuser", "getpwnam", "getpwuid", "getgrouplist")


def core_files():
    return sorted(path for path in MODULE_UTILS.rglob("*.py") if path.name != "__init__.py")


def test_every_core_lies_in_a_domain_package_and_says_it_is_private():
    assert [path.name for path in MODULE_UTILS.glob("*.py")] == []
    for path in core_files():
        assert path.parent.parent == MODULE_UTILS and path.parent.name.startswith("_"), path
        assert PRIVATE in path.read_text().splitlines()[:6], path
    for init in MODULE_UTILS.glob("*/__init__.py"):
        assert init.read_text() == "", init  # ansible-test's empty-init


def imported_domains(path):
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.add(node.module[len(PREFIX):])
    return found


@pytest.mark.parametrize("path", core_files(), ids=lambda path: str(path.relative_to(MODULE_UTILS)))
def test_a_core_imports_its_own_domain_and_the_common_layer_only(path):
    domain = path.parent.name
    relative = str(path.relative_to(MODULE_UTILS))
    foreign = set(module for module in imported_domains(path)
                  if module.split(".")[0] not in (domain, "_common")) - CROSS_DOMAIN.get(relative, set())
    assert foreign == set(), "%s imports %s" % (relative, sorted(foreign))


def python_files():
    return sorted(path for path in PLUGINS.rglob("*.py") if MODULE_UTILS / "_common" not in path.parents)


def code_words(path):
    """The names of a file's code, and its string literals, comments and documentation left out, but for the
    strings that are one word (an argv's command)."""
    words = []
    with open(str(path), "rb") as handle:
        for token in tokenize.tokenize(handle.readline):
            if token.type == tokenize.NAME:
                words.append(token.string)
            elif token.type == tokenize.STRING and re.fullmatch(r"[rbu]?['\"][A-Za-z_-]+['\"]", token.string):
                words.append(token.string.strip("rbu'\""))
    return words


@pytest.mark.parametrize("path", python_files(), ids=lambda path: str(path.relative_to(PLUGINS)))
def test_the_trust_boundarys_helpers_are_defined_in_the_common_layer_only(path):
    tree = ast.parse(path.read_text())
    defined = set(node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef)))
    assert defined & set(COMMON_ONLY) == set(), path
    assert [word for word in code_words(path) if word in COMMON_ONLY_WORDS] == [], path
