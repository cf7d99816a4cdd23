import json

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils import _benchmark as bench


class Clock(object):
    """A clock that reads the times it is given, in order."""

    def __init__(self, *times):
        self.times = list(times)

    def __call__(self):
        return self.times.pop(0)


def event(text=None, usage=None, chat=False):
    chunk = {"choices": []}
    if text is not None:
        chunk["choices"] = [{"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}]
    if usage is not None:
        chunk["usage"] = {"completion_tokens": usage}
    return ("data: " + json.dumps(chunk)).encode()


def test_percentile_interpolates_as_numpy():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert bench.percentile(values, 50) == 3.0
    assert bench.percentile(values, 99) == pytest.approx(9.76)  # numpy.percentile(values, 99)
    assert bench.percentile([5.0], 99) == 5.0
    assert bench.percentile([], 50) is None


def test_a_stream_gives_first_token_gaps_and_the_servers_token_count():
    lines = [b": keep-alive", event(" a"), b"", event(" b"), event(""), event(" c"), event(usage=7), b"data: [DONE]",
             event(" after done")]
    timing = bench.read_stream(lines, 10.0, Clock(10.5, 10.6, 10.8))
    assert timing["ok"] and timing["output_tokens"] == 7
    assert timing["ttft"] == pytest.approx(0.5) and timing["latency"] == pytest.approx(0.8)
    assert timing["itl"] == pytest.approx([0.1, 0.2])


def test_chat_chunks_count_and_without_usage_each_chunk_is_a_token():
    timing = bench.read_stream([event("x", chat=True), event("y", chat=True)], 0.0, Clock(1.0, 2.0))
    assert timing["output_tokens"] == 2 and timing["itl"] == [1.0]


def test_a_stream_without_text_is_a_failure():
    assert bench.read_stream([event(usage=0), b"data: [DONE]"], 0.0, Clock()) == dict(
        ok=False, error="the answer streamed no text")


def test_summary_of_a_run():
    done = dict(ok=True, ttft=0.1, itl=[0.01, 0.02, 0.03], latency=0.16, output_tokens=4)
    slow = dict(ok=True, ttft=0.3, itl=[0.05], latency=0.35, output_tokens=2)
    metrics = bench.summary([done, slow, dict(ok=False, error="HTTP 503 Service Unavailable"), None], 2.0)
    assert metrics["completed"] == 2 and metrics["failed"] == 2
    assert metrics["errors"] == ["HTTP 503 Service Unavailable"]
    assert metrics["output_tokens"] == 6 and metrics["output_throughput"] == 3.0
    assert metrics["request_throughput"] == 1.0
    assert metrics["ttft_ms_median"] == 200.0 and metrics["ttft_ms_p99"] == pytest.approx(298.0)
    assert metrics["itl_ms_median"] == 25.0 and metrics["itl_ms_p99"] == pytest.approx(49.4)


def test_the_run_sends_every_prompt_with_at_most_concurrency_in_flight():
    chosen = bench.workload("decode-batch", dict(prompts=7, concurrency=3, output_tokens=5))
    seen, in_flight, peak = [], [0], [0]
    import threading
    import time
    lock = threading.Lock()

    def send(url, body, api_key, timeout):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            seen.append((url, body["max_tokens"], body["prompt"].split(":")[0], api_key))
        time.sleep(0.02)
        with lock:
            in_flight[0] -= 1
        return dict(ok=True, ttft=0.01, itl=[], latency=0.01, output_tokens=5)

    results, duration = bench.run("http://h:1/", "completions", "m", chosen, api_key="k", send=send)
    assert len(results) == 7 and all(result["ok"] for result in results) and duration > 0
    assert peak[0] == 3
    assert sorted(prompt for _url, _tokens, prompt, _key in seen) == sorted("request %d" % index for index in range(7))
    assert set((url, tokens, key) for url, tokens, _prompt, key in seen) == {("http://h:1/v1/completions", 5, "k")}


def test_requests_are_the_same_for_a_workload_and_differ_per_prompt():
    chosen = bench.workload("decode-heavy")
    first = bench.request_body("chat", "m", chosen, 0)
    assert first == bench.request_body("chat", "m", chosen, 0)
    assert first["messages"][0]["content"] != bench.request_body("chat", "m", chosen, 1)["messages"][0]["content"]
    assert first["stream"] is True and first["ignore_eos"] is True and first["max_tokens"] == 512
    assert len(bench.prompt(0, 128).split()) == 128 + 2


@pytest.mark.parametrize("name,overrides,problem", [
    ("nope", {}, "workload=nope is not a known workload: use one of decode-batch, decode-heavy, prefill-heavy"),
    ("decode-heavy", dict(prompts=0), "prompts=0 must be a positive integer"),
    ("decode-heavy", dict(concurrency=True), "concurrency=True must be a positive integer"),
])
def test_bad_workloads_are_named(name, overrides, problem):
    with pytest.raises(bench.BenchmarkError, match="^" + problem):
        bench.workload(name, overrides)


def result(throughput, name="decode-heavy", completed=16, ttft=50.0):
    return dict(workload=dict(name=name), file="earlier.json",
                metrics=dict(completed=completed, output_throughput=throughput, request_throughput=throughput / 512,
                             ttft_ms_median=ttft, ttft_ms_p99=ttft, itl_ms_median=10.0, itl_ms_p99=12.0))


def test_the_reference_box_eagle3_gain_is_reported():
    comparison = bench.compare(result(96.1), result(54.1), 5)
    assert comparison["regression"] is False
    assert comparison["changes"]["output_throughput"] == dict(before=54.1, after=96.1, change_percent=77.6,
                                                              higher_is_better=True)
    assert comparison["message"] == "output throughput 54.1 -> 96.1 tok/s (+77.6%)"


def test_a_drop_beyond_the_threshold_is_a_regression_and_within_it_is_not():
    assert bench.compare(result(89.5), result(92.6), 5)["regression"] is False  # -3.3%
    dropped = bench.compare(result(80.0), result(92.6), 5)
    assert dropped["regression"] is True
    assert dropped["message"] == "output throughput 92.6 -> 80.0 tok/s (-13.6%): a drop beyond the allowed 5%"


def test_a_run_that_completed_nothing_is_a_regression():
    assert bench.compare(result(0.0, completed=0), result(92.6), 5)["regression"] is True


def test_without_a_baseline_nothing_is_compared():
    assert bench.compare(result(92.6), None, 5) == dict(
        baseline=None, changes={}, regression=False,
        message="no earlier result for this node and workload: this run is the baseline")


def test_results_of_different_workloads_are_not_compared():
    with pytest.raises(bench.BenchmarkError, match="ran workload decode-batch, this run decode-heavy"):
        bench.compare(result(92.6), result(400.0, name="decode-batch"), 5)


def test_bench_serving_output_becomes_the_same_metrics():
    line = dict(completed=16, num_prompts=16, duration=87.6, total_output_tokens=8192, output_throughput=93.5,
                request_throughput=0.18, median_ttft_ms=40.1, p99_ttft_ms=55.0, median_itl_ms=10.6, p99_itl_ms=11.9)
    metrics = bench.from_bench_serving(line)
    assert set(metrics) == set(bench.summary([], 1.0))
    assert metrics["output_throughput"] == 93.5 and metrics["failed"] == 0 and metrics["itl_ms_p99"] == 11.9
    argv = bench.bench_serving_argv("/opt/ml-env/bin/python", "http://127.0.0.1:30000/", "/models/m",
                                    bench.workload("decode-heavy"), "/tmp/out.jsonl")
    assert argv[:3] == ["/opt/ml-env/bin/python", "-m", "sglang.bench_serving"]
    assert argv[argv.index("--base-url") + 1] == "http://127.0.0.1:30000"
    assert argv[argv.index("--max-concurrency") + 1] == "1" and argv[argv.index("--num-prompts") + 1] == "16"


def test_the_table_marks_a_regression():
    current = dict(result(80.0), stack_profile="cu130")
    lines = bench.table([("gpu-1", current, bench.compare(current, result(92.6), 5)),
                         ("gpu-2", dict(result(92.6), stack_profile="cu128"), None)])
    assert lines[0].split()[:4] == ["host", "workload", "profile", "tok/s"]
    assert lines[1].startswith("gpu-1") and lines[1].endswith("-13.6% REGRESSION")
    assert lines[2].startswith("gpu-2") and lines[2].endswith("-")


class Answers(object):
    """A local HTTP server answering each POST with status and body, recording the requests."""

    def __init__(self, status, body):
        import http.server
        import threading
        answers = self
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                answers.requests.append((self.path, dict(self.headers),
                                         json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_streamed_answer_is_read_with_the_key_sent_as_bearer():
    answers = Answers(200, event(" a") + b"\n\n" + event(" b") + b"\n\n" + event(usage=2) + b"\n\ndata: [DONE]\n\n")
    try:
        timing = bench.stream_one(answers.url + "/v1/completions", {"prompt": "p"}, "sk-1", 10)
    finally:
        answers.close()
    assert timing["ok"] and timing["output_tokens"] == 2 and len(timing["itl"]) == 1
    path, headers, body = answers.requests[0]
    assert path == "/v1/completions" and body == {"prompt": "p"} and headers["Authorization"] == "Bearer sk-1"


def test_a_refused_request_and_a_dead_port_are_failures_with_the_reason():
    answers = Answers(401, b"")
    try:
        assert bench.stream_one(answers.url + "/v1/completions", {}, None, 10) == dict(
            ok=False, error="HTTP 401 Unauthorized")
    finally:
        answers.close()
    refused = bench.stream_one(answers.url + "/v1/completions", {}, None, 10)
    assert refused["ok"] is False and "refused" in refused["error"].lower()


def test_an_answer_that_is_not_json_is_a_failure():
    answers = Answers(200, b"data: {not json\n\n")
    try:
        timing = bench.stream_one(answers.url + "/v1/completions", {}, None, 10)
    finally:
        answers.close()
    assert timing["ok"] is False and timing["error"]
