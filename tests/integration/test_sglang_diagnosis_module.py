"""sglang_diagnosis, run through Ansible after real launches of the sglang stand-in by sglang_server."""
import json
import sys
from pathlib import Path

import pytest

from conftest import STANDIN, free_port, run_module


@pytest.fixture
def server(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    params = dict(
        python=sys.executable, model_path=str(model), tensor_parallel_size=2, port=free_port(),
        log_path=str(tmp_path / "server.log"), state_dir=str(tmp_path / "state"), stop_timeout=5,
        gpu_release_timeout=1, manager="module", api_key="k-diagnose-5e1",
    )
    yield params
    run_module("sglang_server", state="stopped", state_dir=params["state_dir"], stop_timeout=5)


def launch(server, scenario, generation):
    params = dict(server, env={"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01",
                               "SGLANG_STANDIN_SCENARIO": scenario, "GENERATION": str(generation)})
    started = run_module("sglang_server", **params)
    assert started["changed"] is True, started
    waited = run_module("wait_for_server", log_path=server["log_path"], offset=started["offset"], pid=started["pid"],
                        timeout=60, mask=[server["api_key"]])
    assert waited["ready"] is (scenario == "ready"), waited.get("msg")


def test_the_crash_two_launches_ago_is_named_and_the_latest_launch_is_running(server):
    launch(server, "traceback", 1)
    launch(server, "ready", 2)
    launch(server, "ready", 3)

    crash = run_module("sglang_diagnosis", state_dir=server["state_dir"], launch=2, kernel_log=False)
    assert crash["changed"] is False and crash["launches"] == 3
    assert crash["log"]["failure"]["diagnosis"]["id"] == "cudnn_check"
    assert "Traceback (most recent call last)" in crash["log"]["failure"]["traceback"]
    assert crash["launch"]["end"] is not None and crash["state"]["running"] is True
    assert "the launch 2 before the latest failed: RuntimeError" in crash["verdict"]
    assert "SGLANG_DISABLE_CUDNN_CHECK" in crash["verdict"]
    assert "k-diagnose-5e1" not in str(crash)

    latest = run_module("sglang_diagnosis", check_mode=True, state_dir=server["state_dir"])
    assert latest["log"]["failure"] is None and latest["log"]["ready_line"]
    assert latest["verdict"].startswith("running (pid %d)" % latest["state"]["pid"])
    assert latest["kernel"]["readable"] is True or latest["kernel"]["problem"].startswith("kernel log not readable")


def test_a_launch_beyond_the_history_is_named(server):
    launch(server, "ready", 1)
    failed = run_module("sglang_diagnosis", state_dir=server["state_dir"], launch=4)
    assert failed["failed"] is True and "launch=4: only 1 launch(es) are recorded" in failed["msg"]


def test_no_server_recorded_is_a_verdict_not_a_failure(tmp_path):
    found = run_module("sglang_diagnosis", state_dir=str(tmp_path / "none"), kernel_log=False)
    assert found.get("failed") is not True and found["launch"] is None
    assert found["verdict"].startswith("no launch recorded: no server sglang is recorded")


def test_a_stopped_servers_secrets_stay_masked_from_the_launch_history_alone(server):
    hub_token = "hf-diagnose-b7d2"
    params = dict(server, secret_env={"HF_TOKEN": hub_token},
                  env={"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01", "SGLANG_STANDIN_LOG_ENV": "HF_TOKEN"})
    started = run_module("sglang_server", **params)
    waited = run_module("wait_for_server", log_path=server["log_path"], offset=started["offset"], pid=started["pid"],
                        timeout=60)
    assert waited["ready"] is True, waited.get("msg")
    with open(server["log_path"]) as log:
        logged = log.read()
    assert hub_token in logged and server["api_key"] in logged  # the log holds both: the test can see a leak
    stopped = run_module("sglang_server", state="stopped", state_dir=server["state_dir"], stop_timeout=5)
    assert stopped["changed"] is True and not (Path(server["state_dir"]) / "sglang.json").exists()

    found = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False)
    assert found["state"]["recorded"] is False and found["launches"] == 1
    assert any(line.endswith("] environment: HF_TOKEN=********") for line in found["log"]["last_lines"])
    shown = json.dumps(found)
    assert hub_token not in shown and server["api_key"] not in shown
    assert sorted(found["launch"]) == ["back", "boot_id", "end", "log_path", "offset", "pid", "start_time",
                                       "started_at"]
