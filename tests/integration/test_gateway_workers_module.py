"""The gateway_workers module against the real SGLang model gateway (sglang-router 0.3.2 from PyPI's wheels,
installed offline from the cached wheelhouse of tests/fixtures/gateway_wheels), started by the gateway role's
launcher on 127.0.0.1 in front of two `sglang` stand-ins: one gateway for the whole file."""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import CHECKOUT, COLLECTIONS, STANDIN, free_port, run_module
from process_tree import kill_tree, run_bounded

# The workers file is written as the role writes it, by the collection's own core (the tree Ansible runs).
sys.path.insert(0, str(COLLECTIONS))
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway.workers import registration  # noqa: E402

LAUNCHER = CHECKOUT / "roles" / "gateway" / "files" / "gateway_launch.py"
REQUIREMENTS = CHECKOUT / "roles" / "gateway" / "files" / "requirements-sglang-router-0.3.2.txt"
ADMIN_KEY = "adm-7c41e9"
# The second stand-in answers each /generate after this long: a request that is still running on it.
SLOW_S = 2.0


def gateway_venv():
    """A virtualenv with the pinned gateway, built once per wheelhouse (offline) beside it in .cache."""
    wheels = Path(run_bounded(["bash", str(CHECKOUT / "tests" / "fixtures" / "gateway_wheels" / "build.sh")],
                              timeout=300, env=dict(os.environ, PYTHON=sys.executable)).stdout.strip())
    venv = wheels.with_name(wheels.name.replace("wheels", "venv"))
    if not (venv / ".complete").exists():
        staging = venv.with_name("." + venv.name + ".partial")
        shutil.rmtree(str(staging), ignore_errors=True)
        run_bounded([sys.executable, "-m", "venv", str(staging)], timeout=120)
        run_bounded([str(staging / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                     "--no-index", "--find-links", str(wheels), "--require-hashes", "-r", str(REQUIREMENTS)],
                    timeout=300)
        (staging / ".complete").touch()
        # A virtualenv's scripts name its path: it is built where it stays, under the staging name, and moved.
        shutil.rmtree(str(venv), ignore_errors=True)
        staging.rename(venv)
    return venv


def call(url, document=None, key=None, timeout=30):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = None if document is None else json.dumps(document).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=timeout) as got:
            return got.status, json.loads(got.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def listening(url):
    """Whether the gateway at url answers /liveness (200 `OK`, with or without workers)."""
    try:
        with urllib.request.urlopen(url + "/liveness", timeout=5) as got:
            return got.status == 200
    except (OSError, urllib.error.URLError):
        return False


class Fleet(object):
    def __init__(self, root):
        self.root = root
        self.processes = []
        self.workers = []

    def spawn(self, argv, log_name, **environment):
        log = open(str(self.root / log_name), "ab")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=dict(os.environ, **environment))
        log.close()
        self.processes.append(process)
        return process

    def spawn_standin(self, name, key, **environment):
        """(its process, its worker) for a new stand-in, which self.workers does not list."""
        port = free_port()
        process = self.spawn([sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/tiny", "--port",
                              str(port), "--api-key", key], name + ".log", PYTHONPATH=str(STANDIN),
                             SGLANG_STANDIN_STEP="0.01", **environment)
        return process, {"name": name, "url": "http://127.0.0.1:%d" % port, "api_key": key}

    def standin(self, name, key, **environment):
        self.workers.append(self.spawn_standin(name, key, **environment)[1])

    def gateway(self, venv, registered_at_start):
        self.port, metrics_port = free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        secrets, self.workers_file = self.root / "secrets.json", self.root / "workers.json"
        secrets.write_text(json.dumps({"admin_key": ADMIN_KEY, "api_key": None}))
        # As the gateway_workers module writes it.
        self.workers_file.write_text(json.dumps({"workers": [registration(worker) for worker in registered_at_start],
                                                 "out": []}))
        self.gateway_argv = [
            str(venv / "bin" / "python"), str(LAUNCHER), "--secrets", str(secrets), "--workers",
            str(self.workers_file), "--", "--host", "127.0.0.1", "--port", str(self.port), "--prometheus-host",
            "127.0.0.1", "--prometheus-port", str(metrics_port), "--policy", "round_robin",
            "--health-check-interval-secs", "1", "--health-failure-threshold", "2", "--log-level", "warn"]
        self.gateway_process = self.spawn(self.gateway_argv, "gateway.log")

    def restart_gateway(self):
        """Stop the gateway (and with it every worker it registered) and start it again from its files."""
        kill_tree(self.gateway_process.pid)
        self.gateway_process.wait()
        self.processes.remove(self.gateway_process)
        self.gateway_process = self.spawn(self.gateway_argv, "gateway.log")

    def listening(self):
        return listening(self.url)

    def registered(self):
        status, answer = call(self.url + "/workers", key=ADMIN_KEY)
        assert status == 200, answer
        return sorted((worker["url"], worker["is_healthy"]) for worker in answer["workers"])

    def stop(self):
        for process in self.processes:
            kill_tree(process.pid)
            process.wait()


def wait_until(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within %s s" % timeout
        time.sleep(0.1)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    venv = gateway_venv()
    running = Fleet(tmp_path_factory.mktemp("gateway"))
    try:
        running.standin("w1", "key-w1")
        running.standin("w2", "key-w2", SGLANG_STANDIN_GENERATE_S=str(SLOW_S))
        running.gateway(venv, running.workers[:1])
        yield running
    finally:
        running.stop()


def reconcile(fleet, check_mode=False, **options):
    return run_module("gateway_workers", check_mode=check_mode, run_timeout=120, gateway_url=fleet.url,
                      admin_key=ADMIN_KEY, **options)


def test_the_launcher_registers_the_workers_of_its_file_at_start(fleet):
    def listed():
        try:
            return fleet.registered() == [(fleet.workers[0]["url"], True)]
        except (OSError, urllib.error.URLError):
            return False
    wait_until(listed)
    assert "key-w1" not in " ".join(Path("/proc/%d/cmdline" % fleet.gateway_process.pid).read_text().split("\0"))


def test_the_module_adds_the_fleet_and_the_gateway_answers_through_it(fleet):
    result = reconcile(fleet, workers=fleet.workers)
    assert result["changed"] is True, result
    assert result["changes"] == ["add %s (w2)" % fleet.workers[1]["url"]]
    assert sorted((worker["name"], worker["healthy"]) for worker in result["workers"]) == [("w1", True), ("w2", True)]
    assert "key-w" not in json.dumps(result)
    # The launcher's registration and the module's agree: w1 was not added again, nor updated.
    status, answer = call(fleet.url + "/generate", {"text": "The capital of France is"})
    assert status == 200 and answer["text"] == " Paris."


def test_a_second_run_changes_nothing(fleet):
    result = reconcile(fleet, workers=fleet.workers)
    assert result["changed"] is False and result["changes"] == [], result


def test_check_mode_reports_a_removal_and_sends_none(fleet):
    before = fleet.registered()
    result = reconcile(fleet, check_mode=True, workers=fleet.workers, out=["w2"])
    assert result["changed"] is True and result["changes"] == ["remove %s (w2)" % fleet.workers[1]["url"]]
    assert fleet.registered() == before


def test_a_worker_taken_out_finishes_the_request_it_runs_and_gets_no_other(fleet):
    answers = []

    def ask():
        started = time.monotonic()
        answers.append((call(fleet.url + "/generate", {"text": "hi"})[0], time.monotonic() - started))
    # Round robin: of two requests, one runs on the slow w2.
    askers = [threading.Thread(target=ask) for _asker in range(2)]
    for asker in askers:
        asker.start()
    time.sleep(0.5)
    result = reconcile(fleet, workers=fleet.workers, out=["w2"])
    for asker in askers:
        asker.join(30)
    assert result["changed"] is True and result["out"] == [fleet.workers[1]["url"]], result
    assert fleet.registered() == [(fleet.workers[0]["url"], True)]
    assert sorted(status for status, _seconds in answers) == [200, 200]
    assert max(seconds for _status, seconds in answers) >= SLOW_S
    started = time.monotonic()
    assert call(fleet.url + "/generate", {"text": "hi"})[0] == 200 and time.monotonic() - started < SLOW_S


def test_a_worker_put_back_is_registered_again(fleet):
    result = reconcile(fleet, workers=fleet.workers, out=[])
    assert result["changed"] is True and result["changes"] == ["add %s (w2)" % fleet.workers[1]["url"]]
    assert [healthy for _url, healthy in fleet.registered()] == [True, True]


def test_a_drained_worker_stays_out_when_the_gateway_restarts(fleet):
    result = reconcile(fleet, workers=fleet.workers, out=["w2"], workers_file=str(fleet.workers_file))
    assert result["changed"] is True and result["workers_file"] == str(fleet.workers_file), result
    kept = json.loads(fleet.workers_file.read_text())
    assert kept["out"] == [fleet.workers[1]["url"]]
    assert sorted(body["labels"]["node"] for body in kept["workers"]) == ["w1", "w2"]
    assert oct(fleet.workers_file.stat().st_mode & 0o777) == "0o640"
    fleet.restart_gateway()
    wait_until(fleet.listening)
    wait_until(lambda: fleet.registered() == [(fleet.workers[0]["url"], True)])
    # The launcher posts every worker of its file at once: one posted beside w1 would be listed by now.
    time.sleep(2)
    assert fleet.registered() == [(fleet.workers[0]["url"], True)]
    assert "%s is out (drained): not registered" % fleet.workers[1]["url"] in (fleet.root / "gateway.log").read_text()
    # The role converges the whole fleet with keep_out: a worker out for a drain is not put back by it.
    converged = reconcile(fleet, workers=fleet.workers, keep_out=True, workers_file=str(fleet.workers_file))
    assert converged["changed"] is False and converged["out"] == [fleet.workers[1]["url"]], converged
    # Opened to others by hand, it holds the workers' keys: written again, its text as it was.
    text = fleet.workers_file.read_text()
    fleet.workers_file.chmod(0o666)
    closed = reconcile(fleet, workers=fleet.workers, keep_out=True, workers_file=str(fleet.workers_file))
    assert closed["changes"] == ["write %s (2 workers, out: %s)" % (fleet.workers_file, fleet.workers[1]["url"])]
    assert oct(fleet.workers_file.stat().st_mode & 0o777) == "0o640" and fleet.workers_file.read_text() == text


def test_the_gateways_view_names_a_drained_worker_out_and_a_lost_one_missing(fleet):
    seen = run_module("gateway_info", run_timeout=60, gateway_url=fleet.url, admin_key=ADMIN_KEY,
                      workers=fleet.workers, workers_file=str(fleet.workers_file))
    assert seen["changed"] is False, seen
    assert seen["healthy"] == ["w1 (%s)" % fleet.workers[0]["url"]]
    assert seen["out"] == ["w2 (%s)" % fleet.workers[1]["url"]] and seen["problems"] == []
    assert "key-w" not in json.dumps(seen)
    # Without the file, nothing says w2 is out on purpose.
    lost = run_module("gateway_info", run_timeout=60, gateway_url=fleet.url, admin_key=ADMIN_KEY,
                      workers=fleet.workers, workers_file=None)
    assert lost["missing"] == ["w2 (%s)" % fleet.workers[1]["url"]]
    assert lost["problems"][0].startswith("w2 (%s) is not registered with the gateway" % fleet.workers[1]["url"])


def test_a_worker_put_back_is_kept_in_and_registered_again_after_a_restart(fleet):
    # exclusive=false names w2 only: w1's entry in the file stays as it is.
    result = reconcile(fleet, workers=fleet.workers[1:], out=[], exclusive=False,
                       workers_file=str(fleet.workers_file))
    assert result["changes"][0] == "add %s (w2)" % fleet.workers[1]["url"], result
    kept = json.loads(fleet.workers_file.read_text())
    assert kept["out"] == [] and len(kept["workers"]) == 2
    fleet.restart_gateway()
    wait_until(fleet.listening)
    wait_until(lambda: [healthy for _url, healthy in fleet.registered()] == [True, True])
    assert reconcile(fleet, workers=fleet.workers, workers_file=str(fleet.workers_file))["changed"] is False


@pytest.mark.parametrize("workers, out, named", [
    ([{"name": "a", "url": "ftp://127.0.0.1:1"}], [], "workers[0].url"),
    ([{"name": "a", "url": "http://127.0.0.1:1"}, {"name": "b", "url": "http://127.0.0.1:1/"}], [],
     "workers[1].url"),
    ([{"name": "a", "url": "http://127.0.0.1:1"}], ["gpu09"], "out: gpu09"),
])
def test_bad_input_is_refused_naming_the_variable_and_nothing_changes(fleet, workers, out, named):
    before = fleet.registered()
    result = reconcile(fleet, workers=workers, out=out)
    assert result.get("failed") is True and named in result["msg"] and "Nothing was changed" in result["msg"]
    assert fleet.registered() == before


def test_a_wrong_admin_key_is_named(fleet):
    result = run_module("gateway_workers", run_timeout=60, gateway_url=fleet.url, admin_key="not-the-admin-key-5e2a",
                        workers=fleet.workers)
    assert result.get("failed") is True and "admin key is wrong or missing" in result["msg"]
    assert "key-w" not in json.dumps(result)


def test_a_hung_worker_is_out_of_rotation_within_the_gateways_own_health_settings(fleet):
    # The gateway checks a worker registered through POST /workers with its command line's settings (here a check
    # each second, a 5 s timeout, 2 failures), not with the per-worker defaults of POST /workers (a 30 s timeout,
    # 3 failures), which would hold a hung worker healthy for 90 s: the role's gateway_health_* flags reach it.
    process, worker = fleet.spawn_standin("w3", "key-w3")
    try:
        added = reconcile(fleet, workers=[worker], exclusive=False)
        assert added["changes"] == ["add %s (w3)" % worker["url"]], added
        # Stopped, it still accepts connections (the kernel does) and never answers: a hung node.
        os.killpg(process.pid, signal.SIGSTOP)
        wait_until(lambda: (worker["url"], False) in fleet.registered(), timeout=20)
    finally:
        kill_tree(process.pid)
        process.wait()
        reconcile(fleet, workers=[worker], out=["w3"], exclusive=False)
    assert worker["url"] not in [url for url, _healthy in fleet.registered()]
