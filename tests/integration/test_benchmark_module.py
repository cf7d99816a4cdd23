"""The benchmark module against the stand-in streaming at a configured token rate.

The stand-in's numbers are its settings: these tests check the plumbing (streaming, counting, timing), not SGLang."""
import json
import os
import shutil
import tempfile
import time
import urllib.request

import pytest
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


# A stand-in for the stack's virtualenv, of nobody's: its "python" answers `-m sglang.bench_serving` as SGLang's
# client would (one JSON line in --output-file, its output tokens the uid it ran as), and says who ran it, in what
# environment, in ran-as.json; with a file `plant` beside it, it puts a link to the path written there instead.
FAKE_PYTHON = r'''#!/usr/bin/python3
import json, os, sys
venv = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
output = sys.argv[sys.argv.index("--output-file") + 1]
with open(os.path.join(venv, "ran-as.json"), "w") as handle:
    json.dump(dict(uid=os.getuid(), euid=os.geteuid(), gid=os.getgid(), environ=sorted(os.environ),
                   argv=sys.argv[1:]), handle)
if os.path.exists(os.path.join(venv, "plant")):
    os.symlink(open(os.path.join(venv, "plant")).read(), output)
else:
    prompts = int(sys.argv[sys.argv.index("--num-prompts") + 1])
    with open(output, "a") as handle:
        handle.write(json.dumps(dict(completed=prompts, num_prompts=prompts, duration=1.0,
                                     total_output_tokens=os.getuid(), output_throughput=10.0, request_throughput=1.0,
                                     median_ttft_ms=1.0, p99_ttft_ms=2.0, median_itl_ms=1.0, p99_itl_ms=2.0)) + "\n")
'''
NOBODY = 65534


@pytest.fixture
def nobodys_venv():
    """A virtualenv of nobody's where nobody can reach it (pytest's tmp_path is root's alone)."""
    top = tempfile.mkdtemp(prefix="blackwell-benchmark-test-")
    os.chmod(top, 0o755)
    venv = os.path.join(top, "ml-env")
    os.makedirs(os.path.join(venv, "bin"))
    os.mkdir(os.path.join(venv, "lib"))
    with open(os.path.join(venv, "bin", "python"), "w") as handle:
        handle.write(FAKE_PYTHON)
    os.chmod(os.path.join(venv, "bin", "python"), 0o755)
    for path in (venv, os.path.join(venv, "bin"), os.path.join(venv, "bin", "python"), os.path.join(venv, "lib")):
        os.chown(path, NOBODY, NOBODY)
    yield venv
    shutil.rmtree(top)


def ran_as(venv):
    with open(os.path.join(venv, "ran-as.json")) as handle:
        return json.load(handle)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the client as another user, as root does on a node")
def test_bench_serving_runs_as_the_venvs_owner_never_as_root(nobodys_venv):
    result = run_module("benchmark", url="http://127.0.0.1:9/", client="bench_serving", venv_path=nobodys_venv,
                        model_path="/models/m", prompts=3)
    assert result.get("failed") is not True, result.get("msg")
    assert result["metrics"]["completed"] == 3 and result["metrics"]["output_tokens"] == NOBODY
    who = ran_as(nobodys_venv)
    assert (who["uid"], who["euid"], who["gid"]) == (NOBODY, NOBODY, NOBODY)
    assert set(who["environ"]) <= {"PATH", "LC_CTYPE"}  # Python sets LC_CTYPE itself in the C locale
    assert who["argv"][:2] == ["-m", "sglang.bench_serving"]
    output = who["argv"][who["argv"].index("--output-file") + 1]
    assert output.endswith("/output/result.jsonl") and not os.path.exists(os.path.dirname(output))


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the client as another user, as root does on a node")
def test_a_link_the_owner_plants_for_the_result_is_not_followed_by_root(nobodys_venv, tmp_path):
    secret = tmp_path / "root-only"
    secret.write_text("ROOT-ONLY-CONTENT\n")
    os.chmod(str(secret), 0o600)
    with open(os.path.join(nobodys_venv, "plant"), "w") as handle:
        handle.write(str(secret))
    result = run_module("benchmark", url="http://127.0.0.1:9/", client="bench_serving", venv_path=nobodys_venv,
                        model_path="/models/m", prompts=1)
    assert result["failed"] is True
    assert result["msg"].startswith("the result of sglang.bench_serving is not read: result.jsonl is a symbolic link")
    assert "ROOT-ONLY" not in json.dumps(result)


def test_bench_serving_needs_the_venv_and_the_model(standin):
    result = run_module("benchmark", url="http://127.0.0.1:%d" % standin.port, client="bench_serving")
    assert result["failed"] is True
    assert result["msg"] == "client is bench_serving but all of the following are missing: venv_path, model_path"


def test_credentials_in_the_url_are_refused_and_appear_nowhere_in_the_result(standin):
    result = run_module("benchmark", url="http://bench-user:s3cr3t-pw@127.0.0.1:%d" % standin.port)
    assert result["failed"] is True
    assert result["msg"].startswith("url holds credentials (user:password@ before the host), which are never sent")
    assert "invocation" in result and "s3cr3t-pw" not in json.dumps(result) and "bench-user" not in json.dumps(result)
