"""Offline, the gateway role fills the host's wheelhouse as ml_stack does: its wheelhouse tasks describe one pip
download of the pins of the profile's gateway release (sglang-router or smg) for the host's Python and machine,
and ml_stack's own wheelhouse tasks run it once on the controller and copy the wheels to the host. Here the index
is a local one made of the cached wheels of both releases (tests/fixtures/gateway_wheels), and controller and host
are this machine."""
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHECKOUT, COLLECTIONS
from process_tree import run_bounded

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Run the gateway role's wheelhouse tasks
      ansible.builtin.include_role:
        name: blackwell.gpu_node.gateway
        tasks_from: wheelhouse.yml
      vars:
        __gateway_python_version: {stdout: "%(series)s %(machine)s"}
        __gateway_release: {requirements: %(requirements)s}
        gateway_wheelhouse_controller_path: %(root)s/controller
        gateway_wheelhouse_path: %(root)s/host
        gateway_index_url: file://%(root)s/simple
        gateway_controller_python: %(python)s
"""


def project(wheel_name):
    return re.sub(r"[-_.]+", "-", wheel_name.split("-")[0]).lower()


def local_index(root):
    """A PEP 503 index on disk of every release's pinned wheels, downloaded once by the fixture's script."""
    wheels = Path(run_bounded(["bash", str(CHECKOUT / "tests" / "fixtures" / "gateway_wheels" / "build.sh")],
                              timeout=300, env=dict(os.environ, PYTHON=sys.executable)).stdout.strip())
    for wheel in sorted(wheels.glob("*.whl")):
        folder = root / "simple" / project(wheel.name)
        folder.mkdir(parents=True, exist_ok=True)
        with open(str(folder / "index.html"), "a") as page:
            page.write('<a href="%s">%s</a>\n' % (wheel.as_uri(), wheel.name))
    return sorted(wheel.name for wheel in wheels.glob("*.whl"))


def run_play(root, requirements):
    playbook = root / "play.yml"
    playbook.write_text(PLAY % {"series": "%d.%d" % sys.version_info[:2], "machine": platform.machine(),
                                "root": root, "python": sys.executable, "requirements": requirements})
    try:
        return run_bounded([str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c",
                            "local", "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                           timeout=300, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS)))
    except subprocess.TimeoutExpired:
        raise AssertionError("ansible-playbook did not end within 300 s; its processes were killed")


@pytest.mark.parametrize("requirements", ["requirements-sglang-router-0.3.2.txt", "requirements-smg-1.13.0.txt"])
def test_the_controller_downloads_the_gateways_wheels_once_and_the_host_gets_them(tmp_path, requirements):
    text = (CHECKOUT / "roles" / "gateway" / "files" / requirements).read_text()
    names = set(re.sub(r"[-_.]+", "-", name).lower() for name in re.findall(r"(?m)^([A-Za-z0-9][\w.-]*)==", text))
    pinned = [wheel for wheel in local_index(tmp_path) if project(wheel) in names]
    assert len(pinned) == len(names)
    first = run_play(tmp_path, requirements)
    assert first.returncode == 0, first.stdout
    assert "Download the wheels of the spec's own pip commands" in first.stdout
    assert sorted(os.listdir(str(tmp_path / "host"))) == pinned
    (folder,) = os.listdir(str(tmp_path / "controller"))
    assert folder.startswith("gateway-") and folder.endswith("-cp%d%d-%s" % (sys.version_info[:2] + (platform.machine(),)))
    again = run_play(tmp_path, requirements)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout
