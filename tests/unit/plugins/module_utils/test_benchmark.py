import errno
import json
import os
import re

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import benchmark as bench
from ansible_collections.blackwell.gpu_node.plugins.modules import benchmark as module


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
                metrics=dict(completed=completed, failed=0, output_throughput=throughput,
                             request_throughput=throughput / 512,
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


def test_the_named_workloads_are_fixed():
    assert bench.WORKLOADS == {
        "decode-heavy": dict(prompt_tokens=128, output_tokens=512, prompts=16, concurrency=1),
        "decode-batch": dict(prompt_tokens=128, output_tokens=256, prompts=64, concurrency=16),
        "prefill-heavy": dict(prompt_tokens=2048, output_tokens=64, prompts=32, concurrency=8),
    }
    assert bench.workload("prefill-heavy") == dict(prompt_tokens=2048, output_tokens=64, prompts=32, concurrency=8,
                                                   name="prefill-heavy")


def test_overrides_skip_none_and_accept_one():
    chosen = bench.workload("decode-batch", dict(prompts=None, concurrency=1, output_tokens=1))
    assert chosen == dict(prompt_tokens=128, output_tokens=1, prompts=64, concurrency=1, name="decode-batch")


def test_prompts_are_numbered_words_that_wrap_at_a_hundred():
    assert bench.prompt(3, 4) == "request 3: word0 word1 word2 word3"
    assert bench.prompt(0, 102).split()[2:] == ["word%d" % (index % 100) for index in range(102)]
    assert bench.prompt(0, 102).split()[-3:] == ["word99", "word0", "word1"]


def test_the_request_bodies_of_both_apis():
    chosen = bench.workload("decode-heavy", dict(prompt_tokens=2, output_tokens=3))
    common = {"model": "m", "max_tokens": 3, "temperature": 0.0, "stream": True, "ignore_eos": True,
              "stream_options": {"include_usage": True}}
    assert bench.request_body("completions", "m", chosen, 5) == dict(common, prompt="request 5: word0 word1")
    assert bench.request_body("chat", "m", chosen, 5) == dict(
        common, messages=[{"role": "user", "content": "request 5: word0 word1"}])


def test_the_text_of_every_choice_in_a_chunk_counts():
    assert bench.chunk_text({"choices": [{"text": "a"}, {"delta": {"content": "b"}}, {"text": ""}]}) == "ab"
    assert bench.chunk_text({"choices": None}) == ""


def test_a_line_that_is_not_utf8_is_read_with_replacement():
    timing = bench.read_stream([b": \xff\xfe comment", event("x")], 0.0, Clock(1.0))
    assert timing == dict(ok=True, ttft=1.0, itl=[], latency=1.0, output_tokens=1)


def test_the_run_sends_to_the_api_path_with_the_default_timeout_and_times_the_wall_clock():
    chosen = bench.workload("decode-heavy", dict(prompts=2))
    sent = []

    def send(url, body, api_key, timeout):
        sent.append((url, api_key, timeout, sorted(body)))
        return dict(ok=True, ttft=0.0, itl=[], latency=0.0, output_tokens=1)

    results, duration = bench.run("http://NODEX/", "chat", "m", chosen, send=send, clock=Clock(10.0, 12.5))
    assert duration == 2.5 and len(results) == 2
    assert sent == [("http://NODEX/v1/chat/completions", None, 600.0,
                     ["ignore_eos", "max_tokens", "messages", "model", "stream", "stream_options", "temperature"])] * 2


def test_the_summary_rounds_to_three_decimals_and_lists_five_errors():
    done = dict(ok=True, ttft=0.0123456, itl=[0.0011111], latency=0.1, output_tokens=1)
    failures = [dict(ok=False, error="error %d" % index) for index in range(6)]
    assert bench.summary([done] + failures, 0.7777777) == dict(
        completed=1, failed=6, errors=["error 0", "error 1", "error 2", "error 3", "error 4"],
        failures=[dict(index=index + 1, reason="error %d" % index) for index in range(6)],
        duration_s=0.778, output_tokens=1, output_throughput=1.286, request_throughput=1.286,
        ttft_ms_median=12.346, ttft_ms_p99=12.346, itl_ms_median=1.111, itl_ms_p99=1.111)


def test_a_run_of_no_time_has_no_throughput():
    metrics = bench.summary([], 0.0)
    assert metrics["output_throughput"] is None and metrics["request_throughput"] is None
    assert metrics["ttft_ms_median"] is None and metrics["itl_ms_p99"] is None


def test_bench_serving_output_is_rounded_and_counts_the_prompts_not_completed():
    line = dict(completed=16, num_prompts=20, duration=87.65432, total_output_tokens=8192,
                output_throughput=93.54321, request_throughput=0.18254, median_ttft_ms=40.12345,
                p99_ttft_ms=55.00051, median_itl_ms=10.60061, p99_itl_ms=11.90071)
    assert bench.from_bench_serving(line) == dict(
        completed=16, failed=4, errors=[], failures=[], duration_s=87.654, output_tokens=8192, output_throughput=93.543,
        request_throughput=0.183, ttft_ms_median=40.123, ttft_ms_p99=55.001, itl_ms_median=10.601,
        itl_ms_p99=11.901)


def test_the_whole_bench_serving_command_line():
    assert bench.bench_serving_argv("/py", "http://NODEX/", "/models/m", bench.workload("decode-heavy"), "/o.jsonl") == [
        "/py", "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", "http://NODEX",
        "--model", "/models/m", "--dataset-name", "random", "--random-input-len", "128",
        "--random-output-len", "512", "--random-range-ratio", "1", "--num-prompts", "16", "--max-concurrency", "1",
        "--output-file", "/o.jsonl"]


def test_every_metric_is_compared_with_its_direction():
    comparison = bench.compare(result(100.0, ttft=40.0), result(50.0, ttft=50.0), 5)
    assert comparison["baseline"] == "earlier.json"
    assert comparison["changes"] == dict(
        output_throughput=dict(before=50.0, after=100.0, change_percent=100.0, higher_is_better=True),
        request_throughput=dict(before=50.0 / 512, after=100.0 / 512, change_percent=100.0, higher_is_better=True),
        ttft_ms_median=dict(before=50.0, after=40.0, change_percent=-20.0, higher_is_better=False),
        ttft_ms_p99=dict(before=50.0, after=40.0, change_percent=-20.0, higher_is_better=False),
        itl_ms_median=dict(before=10.0, after=10.0, change_percent=0.0, higher_is_better=False),
        itl_ms_p99=dict(before=12.0, after=12.0, change_percent=0.0, higher_is_better=False))


def test_a_metric_missing_before_is_not_compared_and_unmeasured_throughput_is_said():
    previous = result(0.0)
    del previous["metrics"]["ttft_ms_median"]
    comparison = bench.compare(result(90.0), previous, 5)
    assert comparison["changes"]["ttft_ms_median"] == dict(before=None, after=50.0, change_percent=None,
                                                           higher_is_better=False)
    assert comparison["regression"] is False
    assert comparison["message"] == "output throughput not measured"


def test_the_regression_edges():
    assert bench.compare(result(95.0), result(100.0), 5)["regression"] is False  # exactly the allowed drop
    assert bench.compare(result(100.0, completed=1), result(100.0), 5)["regression"] is False
    unknown = result(100.0)
    del unknown["metrics"]["completed"]
    assert bench.compare(unknown, result(100.0), 5)["regression"] is True


def test_the_whole_message_of_different_workloads():
    with pytest.raises(bench.BenchmarkError) as raised:
        bench.compare(result(92.6), result(400.0, name="decode-batch"), 5)
    assert str(raised.value) == ("the baseline earlier.json ran workload decode-batch, this run decode-heavy: "
                                 "compare runs of one workload")


def test_the_whole_table():
    current = dict(result(80.0), stack_profile="cu130")
    assert bench.table([("gpu-1", current, bench.compare(current, result(92.6), 5)), ("gpu-2", {}, None)]) == [
        "host   workload      profile  tok/s  req/s    TTFT p50/p99 ms  ITL p50/p99 ms  vs baseline",
        "gpu-1  decode-heavy  cu130    80.0   0.15625  50.0/50.0        10.0/12.0       -13.6% REGRESSION",
        "gpu-2  -             -        None   None     None/None        None/None       -",
    ]


def test_the_request_headers_and_the_root_path():
    answers = Answers(200, event(" a") + b"\n\ndata: [DONE]\n\n")
    try:
        timing = bench.stream_one(answers.url, {}, None, 10)
    finally:
        answers.close()
    assert timing["ok"]
    path, headers, _body = answers.requests[0]
    assert path == "/" and headers["Content-Type"] == "application/json" and headers["Accept"] == "text/event-stream"
    assert "Authorization" not in headers


def test_https_is_spoken_to_an_https_url_and_a_refusal_keeps_its_message():
    answers = Answers(200, event(" a") + b"\n\ndata: [DONE]\n\n")
    try:
        spoken = bench.stream_one(answers.url.replace("http:", "https:") + "/v1/completions", {}, None, 10)
    finally:
        answers.close()
    assert spoken["ok"] is False and answers.requests == []
    refused = bench.stream_one(answers.url + "/v1/completions", {}, None, 10)
    assert refused == dict(ok=False, error="[Errno %d] %s" % (errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED)))


# The built-in client against a hostile server: a real TCP server on 127.0.0.1 that reads each request and then
# answers with bytes of its choosing. Every test bounds its own time: the server gives up after SERVER_GIVES_UP_S,
# so a client without its fix ends then too, and the test's elapsed-time assertion fails instead of hanging.
SERVER_GIVES_UP_S = 4.0
STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


class Hostile(object):
    """A server on 127.0.0.1 whose answer(connection) writes what it likes once a request was read; requests
    holds the first line of each request it read, sent the bytes its answers sent."""

    def __init__(self, answer):
        import socket
        import threading
        self.answer, self.requests, self.sent = answer, [], 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        import socket
        import threading
        while not self.closed.is_set():
            try:
                connection, _peer = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self.handle, args=(connection,), daemon=True).start()

    def handle(self, connection):
        connection.settimeout(SERVER_GIVES_UP_S)
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536) or b"\r\n\r\n"
            head, _separator, body = data.partition(b"\r\n\r\n")
            length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(
                b"content-length:")]
            while length and len(body) < length[0]:
                body += connection.recv(65536)
            self.requests.append(head.split(b"\r\n")[0].decode())
            self.answer(self, connection)
        except OSError:
            pass  # the client hung up, as it should on a hostile answer
        finally:
            connection.close()

    def send(self, connection, data):
        connection.sendall(data)
        self.sent += len(data)

    def close(self):
        self.closed.set()
        self.listener.close()


@pytest.fixture
def hostile():
    servers = []

    def start(answer):
        servers.append(Hostile(answer))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def timed(call, *args, **options):
    import time
    begin = time.monotonic()
    outcome = call(*args, **options)
    return outcome, time.monotonic() - begin


def drip_forever(server, connection, head=STREAM_HEAD, line=b"data: x"):
    """head and then line, each a byte at a time, 20 bytes a second, until SERVER_GIVES_UP_S."""
    import time
    end = time.monotonic() + SERVER_GIVES_UP_S
    data = head + line * 10000
    for index in range(len(data)):
        if time.monotonic() > end:
            return
        server.send(connection, data[index:index + 1])
        time.sleep(0.05)


def events_forever(server, connection):
    """A valid stream, a chunk every 50 ms, for SERVER_GIVES_UP_S: each read is quick, the whole is not."""
    import time
    server.send(connection, STREAM_HEAD)
    end = time.monotonic() + SERVER_GIVES_UP_S
    while time.monotonic() < end:
        server.send(connection, event(" a") + b"\n\n")
        time.sleep(0.05)


@pytest.mark.parametrize("answer", [
    drip_forever,
    lambda server, connection: drip_forever(server, connection, head=b"", line=b"HTTP/1.1 200 OK\r\nX: y\r\n"),
    events_forever,
], ids=["a line dripped", "headers dripped", "chunks forever"])
def test_a_request_ends_at_its_deadline_however_the_server_drips(hostile, answer):
    server = hostile(answer)
    timing, elapsed = timed(bench.stream_one, server.url + "/v1/completions", {}, None, 0.5)
    assert timing == dict(ok=False, error="no complete answer within request_timeout=0.5s")
    assert elapsed < 1.5


def test_a_server_that_goes_quiet_just_before_the_deadline_is_waited_for_only_until_it(hostile):
    import time

    def quiet(server, connection):
        time.sleep(0.8)
        server.send(connection, STREAM_HEAD + event(" a") + b"\n\n")
        time.sleep(SERVER_GIVES_UP_S)

    server = hostile(quiet)
    timing, elapsed = timed(bench.stream_one, server.url, {}, None, 1.0)
    assert timing == dict(ok=False, error="no complete answer within request_timeout=1s")
    assert elapsed < 1.5  # not the 0.8 s and a whole request_timeout more


def test_a_line_longer_than_the_bound_is_a_failure_naming_the_bound(hostile):
    server = hostile(lambda server, connection: server.send(connection, STREAM_HEAD + b"data: " + b"x" * 4096 + b"\n"))
    assert bench.stream_one(server.url, {}, None, 5, line_limit=1024) == dict(
        ok=False, error="a line of the answer is longer than the 1024 bytes a line may have")


def test_a_line_as_long_as_the_bound_is_read(hostile):
    line = b"data: " + json.dumps({"choices": [{"text": "x" * (1024 - 40)}]}).encode()
    line += b" " * (1024 - len(line))
    server = hostile(lambda server, connection: server.send(connection, STREAM_HEAD + line + b"\r\n\r\n"))
    assert bench.stream_one(server.url, {}, None, 5, line_limit=1024)["ok"] is True


def test_a_64_mib_line_is_refused_at_the_default_bound_without_reading_it_whole(hostile):
    block = b"x" * (1 << 20)

    def huge(server, connection):
        server.send(connection, STREAM_HEAD + b"data: ")
        for _block in range(64):
            server.send(connection, block)

    server = hostile(huge)
    timing, elapsed = timed(bench.stream_one, server.url, {}, None, 30)
    assert timing == dict(ok=False, error="a line of the answer is longer than the 1048576 bytes a line may have")
    assert elapsed < 5
    server.close()
    server.thread.join(5)
    assert server.sent < 32 << 20  # the client hung up: the server could not send the rest


@pytest.mark.parametrize("data,reason", [
    (b"{not json", "a chunk of the answer is not JSON (Expecting property name enclosed in double quotes: line 1 "
                   "column 2 (char 1))"),
    (b"[" * 200000, "a chunk of the answer is not JSON (nested too deep)"),
    (b"[1, 2]", "a chunk is a list, not an object"),
    (b"7", "a chunk is a number, not an object"),
    (b"\"text\"", "a chunk is a string, not an object"),
    (b"null", "a chunk is null, not an object"),
    (b"{\"choices\": \"a\"}", "a chunk's choices is a string, not a list"),
    (b"{\"choices\": {}}", "a chunk's choices is an object, not a list"),
    (b"{\"choices\": [1]}", "a chunk's choice is a number, not an object"),
    (b"{\"choices\": [{\"text\": 5}]}", "a choice's text is a number, not a string"),
    (b"{\"choices\": [{\"delta\": []}]}", "a choice's delta is a list, not an object"),
    (b"{\"choices\": [{\"delta\": {\"content\": true}}]}", "a choice's delta's content is a boolean, not a string"),
    (b"{\"choices\": [], \"usage\": [7]}", "a chunk's usage is a list, not an object"),
    (b"{\"choices\": [], \"usage\": {\"completion_tokens\": \"7\"}}",
     "usage's completion_tokens is a string, not a count"),
    (b"{\"choices\": [], \"usage\": {\"completion_tokens\": true}}",
     "usage's completion_tokens is a boolean, not a count"),
    (b"{\"choices\": [], \"usage\": {\"completion_tokens\": 1.5}}",
     "usage's completion_tokens is a number, not a count"),
    (b"{\"choices\": [], \"usage\": {\"completion_tokens\": -1}}",
     "usage's completion_tokens is a number, not a count"),
])
def test_every_request_of_a_run_that_gets_a_bad_chunk_fails_with_the_reason(hostile, data, reason):
    good = event(" a") + b"\n\n"
    server = hostile(lambda server, connection: server.send(connection, STREAM_HEAD + good + b"data: " + data + b"\n\n"
                                                            + good + b"data: [DONE]\n\n"))
    chosen = bench.workload("decode-heavy", dict(prompts=3, concurrency=2, output_tokens=2))
    (results, _duration), elapsed = timed(bench.run, server.url, "completions", "m", chosen, timeout=5)
    assert len(server.requests) == 3 and elapsed < 5
    metrics = bench.summary(results, 1.0)
    assert metrics["completed"] == 0 and metrics["failed"] == 3
    assert metrics["failures"] == [dict(index=index, reason=reason) for index in range(3)]
    assert metrics["errors"] == [reason]


def test_a_request_that_raises_is_its_own_failure_and_the_worker_goes_on():
    chosen = bench.workload("decode-heavy", dict(prompts=4, concurrency=1))

    def send(url, body, api_key, timeout):
        if body["prompt"].startswith("request 1:"):
            raise RuntimeError("boom")
        return dict(ok=True, ttft=0.01, itl=[], latency=0.01, output_tokens=1)

    results, _duration = bench.run("http://h:1", "completions", "m", chosen, send=send)
    metrics = bench.summary(results, 1.0)
    assert metrics["completed"] == 3 and metrics["failures"] == [dict(index=1, reason="RuntimeError: boom")]


def test_the_failures_listed_are_bounded_and_all_are_counted():
    metrics = bench.summary([dict(ok=False, error="e%d" % index) for index in range(50)], 1.0)
    assert metrics["failed"] == 50 and len(metrics["failures"]) == bench.FAILURES_SHOWN == 20
    assert metrics["failures"][-1] == dict(index=19, reason="e19")


def test_a_redirect_is_a_failure_with_its_status_and_is_not_followed(hostile):
    elsewhere = hostile(lambda server, connection: server.send(connection, STREAM_HEAD + event(" a") + b"\n\n"))
    redirect = ("HTTP/1.1 307 Temporary Redirect\r\nLocation: %s/v1/completions\r\nContent-Length: 0\r\n\r\n"
                % elsewhere.url).encode()
    server = hostile(lambda server, connection: server.send(connection, redirect))
    assert bench.stream_one(server.url + "/v1/completions", {}, "sk-1", 5) == dict(
        ok=False, error="HTTP 307 Temporary Redirect: redirects are not followed")
    assert len(server.requests) == 1 and elsewhere.requests == []


def test_an_answer_that_is_not_http_is_a_failure(hostile):
    server = hostile(lambda server, connection: server.send(connection, b"SSH-2.0-OpenSSH_9.6\r\n"))
    timing = bench.stream_one(server.url, {}, None, 5)
    assert timing["ok"] is False and "SSH-2.0" in timing["error"]


def test_a_refused_connection_fails_every_request_quickly_without_a_traceback(capfd):
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chosen = bench.workload("decode-heavy", dict(prompts=3, concurrency=3))
    (results, _duration), elapsed = timed(bench.run, "http://127.0.0.1:%d" % port, "chat", "m", chosen, timeout=5)
    metrics = bench.summary(results, 1.0)
    assert metrics["failed"] == 3 and elapsed < 5
    assert [failure["reason"] for failure in metrics["failures"]] == ["[Errno %d] %s" % (
        errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))] * 3
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("url,problem", [
    ("ftp://127.0.0.1:30000", "url=ftp://127.0.0.1:30000: the scheme must be http or https"),
    ("127.0.0.1:30000", "url=127.0.0.1:30000: the scheme must be http or https"),
    ("http:///v1", "url=http:///v1 names no host"),
    ("http://:30000", "url=http://:30000 names no host"),
    ("http://127.0.0.1:0", "url=http://127.0.0.1:0: port 0 is no server's port"),
    ("http://127.0.0.1:70000", "url=http://127.0.0.1:70000 is not a URL with a port from 1 to 65535"),
    ("http://127.0.0.1:30k", "url=http://127.0.0.1:30k is not a URL with a port from 1 to 65535"),
    ("http://[::1:30000", "url=http://[::1:30000 is not a URL with a port from 1 to 65535"),
    ("http://127.0.0.1:30000/?x=1", "url=http://127.0.0.1:30000/?x=1 has a query or fragment"),
    ("http://127.0.0.1:30000#top", "url=http://127.0.0.1:30000#top has a query or fragment"),
    ("http://127.0.0.1:30000/\nHost: x", "url holds a space or a control character"),
    ("http://127.0.0.1:30000/ a", "url holds a space or a control character"),
])
def test_bad_urls_are_refused_before_anything_is_sent_naming_the_option(url, problem):
    def send(*_args):
        raise AssertionError("sent")

    with pytest.raises(bench.BenchmarkError) as raised:
        bench.run(url, "completions", "m", bench.workload("decode-heavy"), send=send)
    assert str(raised.value).startswith(problem)


@pytest.mark.parametrize("url", [
    "http://bench-user:s3cr3t-pw@127.0.0.1:%d",
    "https://s3cr3t-pw@127.0.0.1:%d/v1",
    "ftp://bench-user:s3cr3t-pw@127.0.0.1:%d",
    "http://bench-user:s3cr3t-pw@127.0.0.1:%d0000",
    "bench-user:s3cr3t-pw@127.0.0.1:%d",
    "http://bench-user:s3cr3t%%2Dpw@127.0.0.1:%d",
    "http://@127.0.0.1:%d",
])
def test_credentials_in_the_url_are_refused_and_never_repeated(hostile, url):
    server = hostile(lambda server, connection: server.send(connection, STREAM_HEAD))
    url = url % server.port
    with pytest.raises(bench.BenchmarkError) as raised:
        bench.run(url, "completions", "m", bench.workload("decode-heavy", dict(prompts=1)), timeout=5)
    message = str(raised.value)
    assert message.startswith("url holds credentials (user:password@ before the host), which are never sent")
    assert "s3cr3t" not in message and "bench-user" not in message and ":%d" % server.port not in message
    assert server.requests == []


def test_the_credentials_of_a_url_are_found_for_masking_as_written_and_decoded():
    assert bench.url_credentials("http://bench-user:s3cr3t%2Dpw@h:1/p@q") == [
        "bench-user:s3cr3t%2Dpw", "bench-user:s3cr3t-pw", "s3cr3t%2Dpw", "bench-user", "s3cr3t-pw"]
    assert bench.url_credentials("http://h:1/a@b") == [] and bench.url_credentials("http://@h") == []


@pytest.mark.parametrize("timeout", [0, -1.0, float("inf"), float("nan"), True, "5"])
def test_a_request_timeout_that_is_no_positive_number_is_refused(timeout):
    sent = []
    with pytest.raises(bench.BenchmarkError, match=r"^request_timeout=.* must be a positive number of seconds"):
        bench.run("http://h:1", "completions", "m", bench.workload("decode-heavy", dict(prompts=1)), timeout=timeout,
                  send=lambda *args: sent.append(args))
    assert sent == []


def failed_run(throughput=100.0, failed=2):
    run = result(throughput)
    run["metrics"].update(failed=failed, errors=["HTTP 503 Service Unavailable"])
    return run


def test_a_run_with_a_failed_request_is_never_a_baseline():
    comparison = bench.compare(failed_run(), None, 5)
    assert comparison == dict(baseline=None, changes={}, regression=True, message=(
        "2 of 18 requests failed (HTTP 503 Service Unavailable): a run with a failed request neither passes nor "
        "becomes a baseline"))
    with pytest.raises(bench.BenchmarkError) as raised:
        bench.compare(result(100.0), dict(failed_run(), file="b.json"), 5)
    assert str(raised.value) == ("the baseline b.json is no baseline: 2 of 18 requests failed (HTTP 503 Service "
                                 "Unavailable). Compare with a run in which every request completed")


def test_a_run_with_a_failed_request_never_passes_even_when_faster():
    comparison = bench.compare(failed_run(200.0, failed=1), result(100.0), 5)
    assert comparison["regression"] is True and comparison["changes"]["output_throughput"]["change_percent"] == 100.0
    assert comparison["message"] == (
        "output throughput 100.0 -> 200.0 tok/s (+100.0%); 1 of 17 requests failed (HTTP 503 Service Unavailable): "
        "a run with a failed request neither passes nor becomes a baseline")


def test_a_run_that_does_not_count_its_failures_is_no_measurement():
    unknown = result(100.0)
    del unknown["metrics"]["failed"]
    assert bench.compare(unknown, None, 5)["regression"] is True
    with pytest.raises(bench.BenchmarkError, match="does not say how many of its requests completed and failed"):
        bench.compare(result(100.0), unknown, 5)


BENCH_SERVING_LINE = dict(completed=16, num_prompts=16, duration=87.6, total_output_tokens=8192, output_throughput=93.5,
                          request_throughput=0.18, median_ttft_ms=40.1, p99_ttft_ms=55.0, median_itl_ms=10.6,
                          p99_itl_ms=11.9)


@pytest.mark.parametrize("change,problem", [
    (dict(completed="16"), "has a string for completed, not a count"),
    (dict(completed=16.0), "has a number for completed, not a count"),
    (dict(num_prompts=True), "has a boolean for num_prompts, not a count"),
    (dict(duration=None), "has null for duration, not a number"),
    (dict(p99_itl_ms=[1]), "has a list for p99_itl_ms, not a number"),
    (dict(output_throughput=float("inf")), "has a number for output_throughput, not a number"),
    (dict(num_prompts=10), "says 16 of 10 prompts completed"),
    (dict(completed=-1), "says -1 of 16 prompts completed"),
])
def test_a_bench_serving_result_of_wrong_types_is_refused_naming_the_field(change, problem):
    with pytest.raises(bench.BenchmarkError, match="^the result of sglang.bench_serving " + re.escape(problem)):
        bench.from_bench_serving(dict(BENCH_SERVING_LINE, **change))


def test_the_last_line_of_a_bench_serving_output_file_is_the_result():
    first = json.dumps(dict(BENCH_SERVING_LINE, output_throughput=1.0))
    data = (first + "\n" + json.dumps(BENCH_SERVING_LINE) + "\n\n").encode()
    assert bench.from_bench_serving_output(data)["output_throughput"] == 93.5
    for bad, problem in ((b"", "file of sglang.bench_serving is empty"), (b"\xff\xfe", "is not JSON lines"),
                         (b"{", "is not JSON lines"), (b"[1]", "is a list, not an object")):
        with pytest.raises(bench.BenchmarkError, match=problem):
            bench.from_bench_serving_output(bad)


# One run of 8 requests whose request 3 got a broken stream: a chunk that is not JSON.
URL = "http://127.0.0.1:30000"
BROKEN = bench.read_stream([b"data: {\"choices\": [{\"text\": \"a"], 0.0, Clock())


def streamed(count=8, broken=()):
    """The results of count requests, those at the indexes broken with BROKEN's stream."""
    done = bench.read_stream([event(" a"), event(" b", usage=2)], 0.0, Clock(0.1, 0.2))
    return [BROKEN if index in broken else done for index in range(count)]


def test_a_run_with_a_broken_stream_fails_naming_the_request_and_why():
    assert BROKEN["ok"] is False and BROKEN["error"].startswith("a chunk of the answer is not JSON (")
    failure = bench.run_failure(bench.summary(streamed(broken={3}), 2.0), URL)
    assert failure == ("1 of 8 requests to %s failed (request 3: %s): a server whose requests fail is not healthy, "
                       "so the run is no measurement of it and never a baseline" % (URL, BROKEN["error"]))


def test_a_run_whose_every_request_completed_does_not_fail():
    assert bench.run_failure(bench.summary(streamed(), 2.0), URL) is None


def test_a_run_that_completed_nothing_fails_with_the_reasons():
    assert bench.run_failure(bench.summary(streamed(2, broken={0, 1}), 2.0), URL) == (
        "no request to %s completed: %s" % (URL, BROKEN["error"]))


def test_the_failed_requests_beyond_those_listed_are_counted_and_bench_serving_gives_no_reasons():
    many = bench.run_failure(bench.summary(streamed(30, broken=set(range(1, 26))), 2.0), URL)
    assert many.startswith("25 of 30 requests to %s failed (request 1: a chunk" % URL)
    assert "; request 20: a chunk" in many and "request 21:" not in many and "; 5 more): a server" in many
    from_client = bench.from_bench_serving(dict(BENCH_SERVING_LINE, completed=15))
    assert bench.run_failure(from_client, URL) == (
        "1 of 16 requests to %s failed (sglang.bench_serving gives no reasons): a server whose requests fail is not "
        "healthy, so the run is no measurement of it and never a baseline" % URL)


def run_module(capsys, monkeypatch, results):
    """The benchmark module's result for a run of 8 prompts whose requests give results."""
    monkeypatch.setattr(module, "run", lambda *args, **options: (results, 2.0))
    args = dict(url=URL, prompts=8)
    # How a module receives its arguments on every supported core, ansible-core 2.15 on Python 3.9 included.
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # ansible-core 2.19 decodes them by a named profile; older cores have none.
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_fails_a_run_with_a_broken_stream_and_returns_its_metrics(capsys, monkeypatch):
    result = run_module(capsys, monkeypatch, streamed(broken={3}))
    assert result["failed"] is True and "warnings" not in result
    assert result["msg"].startswith("1 of 8 requests to %s failed (request 3: a chunk of the answer is not JSON ("
                                    % URL)
    assert result["metrics"]["completed"] == 7 and result["metrics"]["failed"] == 1
    assert result["metrics"]["failures"] == [dict(index=3, reason=BROKEN["error"])]
    assert result["workload"]["prompts"] == 8 and result["client"] == "builtin"


def test_the_module_passes_a_run_whose_every_request_completed(capsys, monkeypatch):
    result = run_module(capsys, monkeypatch, streamed())
    assert result.get("failed") is None and "warnings" not in result
    assert result["metrics"]["completed"] == 8 and result["metrics"]["failures"] == []
