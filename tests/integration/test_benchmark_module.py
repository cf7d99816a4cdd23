"""The benchmark module through Ansible against the stand-in streaming at a configured token rate.

The stand-in's numbers are its settings: these tests check the plumbing (streaming, counting, timing), not SGLang."""
import time
import urllib.request

from conftest import run_module


def ready(standin, deadline=30):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if urllib.request.urlopen(standin.health_url, timeout=2).status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the stand-in did not get ready: see %s" % standin.log_path)


def bench(standin, **options):
    return run_module("benchmark", url="http://127.0.0.1:%d" % standin.port, prompts=4, output_tokens=20, **options)


def test_the_stand_ins_rate_and_first_token_delay_are_measured(standin):
    standin.start(step=0.01, tp=1, SGLANG_STANDIN_TOKENS_PER_S="100", SGLANG_STANDIN_FIRST_TOKEN_S="0.2")
    ready(standin)
    result = bench(standin, concurrency=2)
    assert result.get("failed") is not True, result.get("msg")
    metrics = result["metrics"]
    assert metrics["completed"] == 4 and metrics["failed"] == 0 and metrics["output_tokens"] == 80
    assert 180 <= metrics["ttft_ms_median"] <= 400
    assert 8 <= metrics["itl_ms_median"] <= 30  # 10 ms a token
    # Two requests of 20 tokens at a time, each 0.2 s + 19 x 10 ms: about 100 tok/s in all.
    assert 60 <= metrics["output_throughput"] <= 110
    assert result["workload"] == dict(name="decode-heavy", prompt_tokens=128, output_tokens=20, prompts=4,
                                      concurrency=2)
    assert result["client"] == "builtin" and result["client_cpu_seconds"] >= 0


def test_chat_streams_too_and_a_faster_stand_in_measures_faster(standin):
    standin.start(step=0.01, tp=1, SGLANG_STANDIN_TOKENS_PER_S="400", SGLANG_STANDIN_FIRST_TOKEN_S="0.01")
    ready(standin)
    result = bench(standin, api="chat", concurrency=1)
    assert result["metrics"]["completed"] == 4, result
    assert result["metrics"]["output_throughput"] > 150


def test_a_server_that_does_not_answer_fails_naming_the_url(standin):
    result = bench(standin, request_timeout=5)
    assert result["failed"] is True
    assert result["msg"].startswith("no request to http://127.0.0.1:%d completed: " % standin.port)


def test_check_mode_sends_nothing(standin):
    result = run_module("benchmark", check_mode=True, url="http://127.0.0.1:%d" % standin.port)
    assert result["changed"] is False and "metrics" not in result
