"""The benchmark playbook on this machine (local connection) against the stand-in launched by sglang_server.

The stand-in streams at the token rate it is given: the first run is the baseline, a faster one passes and reports
the gain, a slower one fails the play naming the drop. Its numbers mean nothing beyond these settings."""
import json
import os
import subprocess
import sys
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


def benchmark(node):
    """(exit status, output) of the playbook on localhost."""
    inventory = node["tmp"] / "inventory.json"
    inventory.write_text(json.dumps({"gpu_nodes": {"hosts": {"gpu-a": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gpu_node_become": False,
        "ml_stack_venv_path": node["venv"], "sglang_server_port": node["server"]["port"],
        "sglang_server_state_dir": node["server"]["state_dir"], "gpu_node_benchmark_prompts": 4,
        "gpu_node_benchmark_output_tokens": 40, "gpu_node_benchmark_concurrency": 2,
        "gpu_node_benchmark_dir": str(node["tmp"] / "results")}}}}))
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    try:
        completed = run_bounded([str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory),
                                 "blackwell.gpu_node.benchmark"], timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("the benchmark playbook did not return within 300 s; its processes were killed")
    return completed.returncode, completed.stdout + completed.stderr


def results(node):
    return [json.loads(path.read_text()) for path in sorted((node["tmp"] / "results" / "gpu-a").glob("*.json"))]


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
