"""Role tasks whose modules need a Python library on the host install it first."""
from pathlib import Path

import yaml

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
