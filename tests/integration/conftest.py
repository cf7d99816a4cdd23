"""Run the modules for real against real processes on this machine.

`run_module` runs a module as Ansible runs it on a host and returns its result (on timeout, it kills every process
the module started); the playbook tests run Ansible itself; `standin` starts the `sglang` stand-in from
tests/fixtures.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from process_tree import run_bounded

CHECKOUT = Path(__file__).resolve().parents[2]
STANDIN = CHECKOUT / "tests" / "fixtures" / "sglang_standin"
COLLECTIONS = CHECKOUT / ".build" / "collections"


def run_module(module_name, check_mode=False, run_timeout=300, prefix=(), **args):
    """The module's result; AssertionError, after killing the whole tree of its processes, when it takes longer
    than run_timeout seconds (`timeout` is an option of some modules). prefix: the argv of a command that runs the
    module's Python (such as a private mount namespace).

    The module runs as Ansible runs it on a host, in a Python of its own with the options in a file named on its
    command line, the collection's module_utils imported from the collection (the toolchain's link to the checkout),
    as the hostile suite runs them; without Ansible's controller, whose start costs ten times the run of most
    modules. The playbook tests here and the scenarios run the modules through the controller."""
    params = dict(args, _ansible_check_mode=check_mode, _ansible_module_name="blackwell.gpu_node." + module_name)
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([str(COLLECTIONS)] + (
        [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="args-", delete=False) as params_file:
        json.dump({"ANSIBLE_MODULE_ARGS": params}, params_file)
    try:
        completed = run_bounded(
            list(prefix) + [sys.executable, "-m", "ansible_collections.blackwell.gpu_node.plugins.modules." + module_name,
                            params_file.name],
            timeout=run_timeout, env=environ, cwd=tempfile.gettempdir(),
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("%s did not return within %ss; its processes were killed" % (module_name, run_timeout))
    finally:
        os.unlink(params_file.name)
    try:
        result = json.loads(completed.stdout)
    except ValueError:
        raise AssertionError("the module printed no JSON:\n%s\n%s" % (completed.stdout, completed.stderr))
    # What the controller makes of the module's warnings: their messages.
    if "warnings" in result:
        result["warnings"] = [warning["event"]["msg"] if isinstance(warning, dict) else warning
                              for warning in result["warnings"]]
    return result


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
