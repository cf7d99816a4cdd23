"""Run the modules for real through Ansible, against real processes on this machine.

`run_module` calls `ansible localhost -m <FQCN>` with a local connection and returns the
module's result (on timeout, it kills every process Ansible started, the module included);
`standin` starts the `sglang` stand-in from tests/fixtures.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_bounded

CHECKOUT = Path(__file__).resolve().parents[2]
STANDIN = CHECKOUT / "tests" / "fixtures" / "sglang_standin"
COLLECTIONS = CHECKOUT / ".build" / "collections"


def run_module(module_name, check_mode=False, run_timeout=300, prefix=(), **args):
    """The module's result for localhost; AssertionError, after killing the whole tree of Ansible's processes,
    when it takes longer than run_timeout seconds (`timeout` is an option of some modules). prefix: the argv of
    a command that runs ansible's (such as a private mount namespace)."""
    environ = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
    )
    try:
        completed = run_bounded(
            list(prefix)
            + [str(Path(sys.executable).with_name("ansible")), "localhost", "-c", "local", "-i", "localhost,", "-e",
               "ansible_python_interpreter=" + sys.executable, "-m", "blackwell.gpu_node." + module_name]
            + (["-a", json.dumps(args)] if args else [])
            + (["--check"] if check_mode else []),
            timeout=run_timeout, env=environ,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("%s did not return within %ss; its processes were killed" % (module_name, run_timeout))
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        raise AssertionError("ansible printed no JSON:\n%s\n%s" % (completed.stdout, completed.stderr))
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]


def run_prometheus_sd(inventory, *options):
    """ansible-playbook prometheus_sd against inventory (a path), with this Python for localhost; the completed
    process. AssertionError, after killing every process it started, past 300 s."""
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_FORCE_COLOR="0")
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory),
            "-e", "ansible_python_interpreter=" + sys.executable,
            str(CHECKOUT / "playbooks" / "prometheus_sd.yml")] + list(options)
    try:
        return run_bounded(argv, timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("prometheus_sd did not end within 300 s; its processes were killed")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Standin(object):
    def __init__(self, log_path):
        self.log_path = log_path
        self.process = None
        self.port = free_port()

    def start(self, scenario="ready", step=0.05, tp=4, **settings):
        """settings: further SGLANG_STANDIN_* variables, for example SGLANG_STANDIN_TOKENS_PER_S."""
        environ = dict(os.environ, PYTHONPATH=str(STANDIN), SGLANG_STANDIN_SCENARIO=scenario,
                       SGLANG_STANDIN_STEP=str(step), **settings)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/test", "--tp", str(tp),
                 "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=environ, start_new_session=True,
            )
        return self.process

    @property
    def health_url(self):
        return "http://127.0.0.1:%d/health" % self.port

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()


@pytest.fixture
def standin(tmp_path):
    server = Standin(str(tmp_path / "server.log"))
    yield server
    server.stop()
