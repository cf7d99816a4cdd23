"""sglang_diagnosis after real launches of the sglang stand-in by sglang_server."""
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


def launch(server, scenario, generation, **env):
    params = dict(server, env=dict({"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01",
                                    "SGLANG_STANDIN_SCENARIO": scenario, "GENERATION": str(generation)}, **env))
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
    # The stand-in requires the API key, as SGLang does: the recorded one is sent.
    assert latest["verdict"].startswith("running and serving (pid %d); the latest launch got ready"
                                        % latest["state"]["pid"])
    assert latest["serving"]["serving"] is True and latest["serving"]["generate"]["text"] == " Paris."
    assert "k-diagnose-5e1" not in str(latest)
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
    assert sorted(found["launch"]) == ["argv_digest", "back", "boot_id", "end", "log_path", "offset", "pid",
                                       "start_time", "started_at"]


def test_a_server_whose_scheduler_died_answers_health_but_does_not_serve(server):
    """The stand-in's scheduler dies at the first generate (its traceback in the log); /health keeps answering 200
    and every generate hangs: not serving, with what /health said, what the generate did and the log's cause."""
    launch(server, "ready", 1, SGLANG_STANDIN_GENERATE="scheduler-dies")
    found = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False,
                       probe_timeout=3)
    assert found.get("failed") is not True and found["state"]["running"] is True
    serving = found["serving"]
    assert serving["serving"] is False and serving["health"]["status"] == 200
    assert serving["generate"]["reason"] == "timeout" and serving["seconds"] < 3 + 1
    assert found["log"]["failure"]["cause"] == "[TP0] torch.AcceleratorError: CUDA error: device-side assert triggered"
    assert found["verdict"].startswith(
        "running but not serving (pid %d): /health answered 200 in 0.0 s, but POST /generate gave no answer within "
        % found["state"]["pid"])
    assert ("; the latest launch failed: [TP0] torch.AcceleratorError: CUDA error: device-side assert triggered "
            "[gpu_kernel_assert] Fix: " in found["verdict"])


@pytest.mark.parametrize("mode, reason, words", [
    ("error", "http_status", "POST /generate answered HTTP 500: "),
    ("empty", "empty_text", 'POST /generate answered 200 without generated text: {"text": ""'),
])
def test_a_generate_that_fails_is_not_serving(server, mode, reason, words):
    launch(server, "ready", 1, SGLANG_STANDIN_GENERATE=mode)
    found = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False)
    generate = found["serving"]["generate"]
    assert (found["serving"]["serving"], generate["reason"]) == (False, reason)
    assert generate["problem"].startswith(words) and "running but not serving" in found["verdict"]


def test_the_probe_asks_what_it_is_told(server):
    launch(server, "ready", 1, SGLANG_STANDIN_GENERATE="hang")
    # Health alone does not see a generate that hangs; none asks nothing.
    health = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False,
                        probe="health")
    assert health["serving"]["serving"] is True and health["serving"]["generate"] is None
    nothing = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False,
                         probe="none")
    assert nothing["serving"] is None and nothing["verdict"].startswith("running (pid ")
    # Another address and a wrong key: the server's answer is named, the key never shown.
    elsewhere = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False,
                           server_url="http://127.0.0.1:%d" % free_port(), probe_timeout=2)
    assert elsewhere["serving"]["health"]["reason"] == "refused"
    wrong = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False,
                       api_key="k-wrong-77aa", probe_timeout=2)
    assert wrong["serving"]["generate"]["status"] == 401 and "k-wrong-77aa" not in json.dumps(wrong)


def test_a_server_that_does_not_run_is_not_asked(server):
    launch(server, "traceback", 1)
    found = run_module("sglang_diagnosis", state_dir=server["state_dir"], kernel_log=False, gpu_processes=False)
    assert found["serving"] is None and found["verdict"].startswith("not running; the latest launch failed")


@pytest.mark.parametrize("options, words", [
    ({"probe_timeout": 0}, "probe_timeout=0.0: give the seconds the probe may take"),
    ({"server_url": "127.0.0.1:30000"}, "server_url: '127.0.0.1:30000' is not an http:// or https:// URL"),
    ({"api_key": "a\nb"}, "api_key holds a control character"),
])
def test_probe_options_are_checked(tmp_path, options, words):
    found = run_module("sglang_diagnosis", state_dir=str(tmp_path), **options)
    assert found["failed"] is True and words in found["msg"]
