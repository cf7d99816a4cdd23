"""Role tasks whose modules need a Python library on the host install it first."""
import json
import re
from pathlib import Path

import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.state import REGISTRATION_FILE_MODE

ROLES = Path(__file__).resolve().parents[2] / "roles"


def tasks_in_order(tasks):
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks_in_order(task.get(key))


def test_deb822_repository_comes_after_python3_debian_is_installed():
    """deb822_repository fails on a host without Python's debian module (Debian's python3-debian)."""
    for tasks_file in sorted(ROLES.glob("*/tasks/*.yml")):
        installed = False
        for task in tasks_in_order(yaml.safe_load(tasks_file.read_text())):
            apt = task.get("ansible.builtin.apt") or {}
            names = apt.get("name", [])
            if "python3-debian" in ([names] if isinstance(names, str) else names):
                installed = True
            if "ansible.builtin.deb822_repository" in task:
                assert installed, "%s: %r runs before python3-debian is installed" % (tasks_file, task["name"])


# Where a value of the cuda role's check's declaration reaches its tasks: the declaration itself, or the loop and
# block variables taken from it.
DECLARED = ("__cuda_state.managed", "__cuda_directory.", "__cuda_file.", "__cuda_toolkit.")
KEEPING_MODULES = ("ansible.builtin.apt", "ansible.builtin.file", "ansible.builtin.copy",
                   "ansible.builtin.dpkg_selections")
KEPT_ARGUMENTS = ("name", "path", "dest", "src", "content", "mode", "selection")


def test_the_cuda_repository_and_toolkit_tasks_keep_what_the_check_declares_and_name_none_of_it():
    """A package, directory or file stated in these tasks would be kept without the converged check comparing it."""
    kept = 0
    for tasks_file in (ROLES / "cuda" / "tasks" / "repository.yml", ROLES / "cuda" / "tasks" / "toolkit.yml"):
        for task in tasks_in_order(yaml.safe_load(tasks_file.read_text())):
            if not task["name"].startswith("Ensure"):
                continue
            for module in KEEPING_MODULES:
                for argument, value in (task.get(module) or {}).items():
                    if argument in KEPT_ARGUMENTS:
                        kept += 1
                        assert any(name in str(value) for name in DECLARED), (tasks_file.name, task["name"], argument)
    assert kept >= 10


def test_the_cuda_registration_tasks_write_the_files_the_role_declares_and_name_none_of_them():
    """The upgrade's switch runs register.yml and login_shells.yml without the check: they take the files from the
    role's declaration, which the check compares, and write them with the mode the check expects."""
    declared = yaml.safe_load((ROLES / "cuda" / "vars" / "main.yml").read_text())["__cuda_registration_files"]
    tasks = [task for name in ("register.yml", "login_shells.yml")
             for task in tasks_in_order(yaml.safe_load((ROLES / "cuda" / "tasks" / name).read_text()))]
    text = json.dumps(tasks)
    for file in declared:
        [template] = re.findall(r"'([^']+[.]j2)'", file["content"])
        assert file["path"] not in text and template not in text, file["path"]
    [linker] = [task["blackwell.gpu_node.cuda_linker_entries"] for task in tasks
                if "blackwell.gpu_node.cuda_linker_entries" in task]
    assert (linker["own_file"], linker["own_content"]) == ("{{ __cuda_linker_file.path }}",
                                                           "{{ __cuda_linker_file.content }}")
    [login_shells] = [task for task in tasks if "ansible.builtin.copy" in task]
    assert login_shells["loop"] == "{{ __cuda_registration_files | rejectattr('linker') | list }}"
    assert login_shells["ansible.builtin.copy"]["mode"] == REGISTRATION_FILE_MODE
