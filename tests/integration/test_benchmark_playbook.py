"""The benchmark playbook on this machine (local connection) against the stand-in launched by sglang_server.

The stand-in streams at the token rate it is given: the first run is the baseline, a faster one passes and reports
the gain, a slower one fails the play naming the drop. Its numbers mean nothing beyond these settings."""
import http.server
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import COLLECTIONS, STANDIN, free_port, run_module
from process_tree import run_bounded


@pytest.fixture
def node(tmp_path):
    (tmp_path / "model").mkdir()
    venv = tmp_path / "ml-env"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "ml-stack.json").write_text(json.dumps({"profile": "cu130"}))
    server = dict(python=str(venv / "bin" / "python"), model_path=str(tmp_path / "model"), port=free_port(),
                  log_path=str(tmp_path / "server.log"), state_dir=str(tmp_path / "state"), manager="module",
                  stop_timeout=5, gpu_release_timeout=1)
    yield dict(tmp=tmp_path, venv=str(venv), server=server)
    run_module("sglang_server", state="stopped", state_dir=server["state_dir"], stop_timeout=5)


def serve(node, tokens_per_s):
    env = {"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01", "SGLANG_STANDIN_TOKENS_PER_S": str(tokens_per_s),
           "SGLANG_STANDIN_FIRST_TOKEN_S": "0.01"}
    launched = run_module("sglang_server", env=env, **node["server"])
    ready = run_module("wait_for_server", log_path=node["server"]["log_path"], offset=launched["offset"],
                       pid=launched["pid"], health_url="http://127.0.0.1:%d/health" % node["server"]["port"], timeout=60)
    assert ready["ready"] is True, ready.get("msg")


def benchmark(node, **settings):
    """(exit status, output) of the playbook on localhost; settings: further host variables."""
    inventory = node["tmp"] / "inventory.json"
    inventory.write_text(json.dumps({"gpu_nodes": {"hosts": {"gpu-a": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gpu_node_become": False,
        "ml_stack_venv_path": node["venv"], "sglang_server_port": node["server"]["port"],
        "sglang_server_state_dir": node["server"]["state_dir"], "gpu_node_benchmark_prompts": 4,
        "gpu_node_benchmark_output_tokens": 40, "gpu_node_benchmark_concurrency": 2,
        "gpu_node_benchmark_dir": str(node["tmp"] / "results"), **settings}}}}))
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    try:
        completed = run_bounded([str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory),
                                 "blackwell.gpu_node.benchmark"], timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("the benchmark playbook did not return within 300 s; its processes were killed")
    return completed.returncode, completed.stdout + completed.stderr


def results(node, pattern="*-decode-heavy.json"):
    return [json.loads(path.read_text()) for path in sorted((node["tmp"] / "results" / "gpu-a").glob(pattern))]


def modes(node):
    """The permission bits of the node's result directory and of each file in it."""
    directory = node["tmp"] / "results" / "gpu-a"
    files = set(stat.S_IMODE(path.stat().st_mode) for path in directory.iterdir())
    return stat.S_IMODE(directory.stat().st_mode), files


def test_baseline_then_faster_passes_then_slower_fails_the_play(node):
    serve(node, 100)
    status, output = benchmark(node)
    assert status == 0, output
    assert "no earlier result for this node and workload: this run is the baseline" in output
    (first,) = results(node)
    assert first["stack_profile"] == "cu130" and first["workload"]["name"] == "decode-heavy"
    assert first["argv"][:3] == [node["server"]["python"], "-m", "sglang.launch_server"]
    assert len(first["env_digest"]) == 64 and first["client"] == "builtin"
    assert 50 < first["metrics"]["output_throughput"] < 220
    # They carry the server's command line: the controller's user alone reads them.
    assert modes(node) == (0o700, {0o600})

    serve(node, 400)
    status, output = benchmark(node)
    assert status == 0, output
    faster = results(node)[-1]
    assert faster["comparison"]["regression"] is False and faster["comparison"]["changes"]["output_throughput"][
        "change_percent"] > 50
    gain = (first["metrics"]["output_throughput"], faster["metrics"]["output_throughput"])
    assert "output throughput %s -> %s tok/s (+" % gain in output

    serve(node, 100)
    status, output = benchmark(node)
    assert status != 0
    slower = results(node)[-1]
    assert slower["comparison"]["regression"] is True
    assert slower["comparison"]["baseline"].endswith(".json") and len(results(node)) == 3
    drop = (faster["metrics"]["output_throughput"], slower["metrics"]["output_throughput"])
    assert "gpu-a: output throughput %s -> %s tok/s (-" % drop in output
    assert "a drop beyond the allowed 5%" in output and "REGRESSION" in output


class Flaky(object):
    """A server on the node's port that streams 40 tokens at once, and answers the workload's prompt numbered
    fail_request with 503 while fail_request is set."""

    def __init__(self, port):
        flaky = self
        self.fail_request = None

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if flaky.fail_request is not None and body["prompt"].startswith("request %d:" % flaky.fail_request):
                    self.send_error(503)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for _token in range(40):
                    self.wfile.write(b'data: {"choices": [{"text": " t"}]}\n\n')
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_run_with_a_failed_request_fails_naming_the_node_and_is_never_a_baseline(node):
    flaky = Flaky(node["server"]["port"])
    try:
        flaky.fail_request = 1
        status, output = benchmark(node)
        assert status != 0
        assert "gpu-a: 1 of 4 requests failed (HTTP 503 Service Unavailable): a run with a failed request neither " \
               "passes nor becomes a baseline" in output
        (failed,) = results(node, "*-decode-heavy.failed.json")
        assert failed["metrics"]["failed"] == 1 and failed["comparison"]["regression"] is True
        assert failed["metrics"]["failures"] == [dict(index=1, reason="HTTP 503 Service Unavailable")]
        assert results(node) == [] and modes(node) == (0o700, {0o600})

        flaky.fail_request = None
        status, output = benchmark(node)
        assert status == 0, output
        assert "no earlier result for this node and workload: this run is the baseline" in output

        baseline = next((node["tmp"] / "results" / "gpu-a").glob("*.failed.json"))
        status, output = benchmark(node, gpu_node_benchmark_baseline=str(baseline))
        assert status != 0
        assert "the baseline %s is no baseline: 1 of 4 requests failed (HTTP 503 Service Unavailable)" % baseline \
            in output
    finally:
        flaky.close()
