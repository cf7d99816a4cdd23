# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""A throughput benchmark of a running SGLang server: the core of the benchmark module and filters.

The client streams from the server's OpenAI-compatible API (``/v1/completions`` or ``/v1/chat/completions``
with ``stream: true``) with the standard library only, so it runs with any Python on a node. Time to first
token is from sending the request to the first chunk that carries text; the inter-token latencies are the
gaps between the following chunks (as ``sglang.bench_serving`` counts them); the output tokens are what the
server's ``usage`` says, else one per chunk with text.

The server's answer is not trusted: each request has one deadline for all of it (every read of the socket gets only
the time left, so a server that drips a byte at a time cannot stretch it), each line of the answer is read up to a
bound, every chunk is type-checked, a redirect is not followed, and whatever goes wrong with one request is that
request's failure, with its reason, while the others go on. A run with a failed request measured a server that is
not healthy: it fails (run_failure), and is neither a baseline nor a pass of a comparison.

This file imports nothing from Ansible: tests/device/record_benchmark.sh loads it on a GPU host as it is.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import io
import json
import socket
import threading
import time

from http.client import HTTPConnection, HTTPException, HTTPResponse, HTTPSConnection
from urllib.parse import unquote, urlsplit

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT

# Fixed, named workloads: the same name always sends the same requests, so results compare. decode-heavy is the
# reference box's use (one stream, short prompt, long answer: the tok/s a user sees).
WORKLOADS = {
    "decode-heavy": dict(prompt_tokens=128, output_tokens=512, prompts=16, concurrency=1),
    "decode-batch": dict(prompt_tokens=128, output_tokens=256, prompts=64, concurrency=16),
    "prefill-heavy": dict(prompt_tokens=2048, output_tokens=64, prompts=32, concurrency=8),
}
APIS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# The metrics a comparison reports, and whether more is better.
METRICS = (("output_throughput", True), ("request_throughput", True), ("ttft_ms_median", False),
           ("ttft_ms_p99", False), ("itl_ms_median", False), ("itl_ms_p99", False))
# A line of a streamed answer (one chunk of server-sent events) is a few hundred bytes: a longer one is refused
# after this many bytes, never read whole.
LINE_LIMIT = 1 << 20
# The failed requests a result lists by index and reason (the count of all of them is `failed`).
FAILURES_SHOWN = 20
SCHEMES = ("http", "https")
URL_EXAMPLE = "http://127.0.0.1:%d" % SERVER_PORT


class BenchmarkError(Exception):
    """A benchmark that cannot run or cannot be compared: the message names the option and the fix."""


class RequestFailed(Exception):
    """What ended one request early, as its failure says it."""


def url_authority(url):
    """What of url lies between `//` and its path, query or fragment: its host, port and any credentials (all of
    url up to those when it has no `//`, so that credentials are found in whatever was given)."""
    authority = url.partition("//")[2] if "//" in url else url
    for end in "/?#":
        authority = authority.split(end, 1)[0]
    return authority


def url_credentials(url):
    """The user and password a URL carries before its host (as written and percent-decoded), for masking: they
    are never sent and never shown."""
    userinfo = url_authority(url).rpartition("@")[0]
    values = set()
    for value in [userinfo] + userinfo.split(":", 1):
        if value:
            values.update((value, unquote(value)))
    return sorted(values, key=len, reverse=True)


def checked_url(url):
    """url when it is an http or https base URL of a host (a port from 1 to 65535 when one is given) and maybe a
    path; BenchmarkError naming the option url otherwise. A URL with credentials is refused without repeating
    them."""
    if any(character.isspace() or ord(character) < 32 or 127 <= ord(character) < 160 for character in url):
        raise BenchmarkError("url holds a space or a control character: give the server's base URL, for example %s"
                             % URL_EXAMPLE)
    if "@" in url_authority(url):
        raise BenchmarkError("url holds credentials (user:password@ before the host), which are never sent: the "
                             "server takes its key as api_key. Give the base URL alone, for example %s" % URL_EXAMPLE)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise BenchmarkError("url=%s is not a URL with a port from 1 to 65535: give the server's base URL, for "
                             "example %s" % (url, URL_EXAMPLE))
    if parts.scheme not in SCHEMES:
        raise BenchmarkError("url=%s: the scheme must be http or https: give the server's base URL, for example %s"
                             % (url, URL_EXAMPLE))
    if not parts.hostname:
        raise BenchmarkError("url=%s names no host: give the server's base URL, for example %s" % (url, URL_EXAMPLE))
    if port == 0:
        raise BenchmarkError("url=%s: port 0 is no server's port; give a port from 1 to 65535" % url)
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise BenchmarkError("url=%s has a query or fragment: the API's path is appended to the base URL, so give "
                             "it without, for example %s" % (url, URL_EXAMPLE))
    return url


def checked_timeout(timeout):
    """timeout, in seconds, when it is a finite positive number; BenchmarkError naming request_timeout otherwise."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < float("inf")):
        raise BenchmarkError("request_timeout=%r must be a positive number of seconds" % (timeout,))
    return timeout


def workload(name, overrides=None):
    """The named workload with overrides (None values ignored); BenchmarkError for an unknown name or a count
    that is not a positive integer."""
    if name not in WORKLOADS:
        raise BenchmarkError("workload=%s is not a known workload: use one of %s" % (name, ", ".join(sorted(WORKLOADS))))
    chosen = dict(WORKLOADS[name], name=name)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BenchmarkError("%s=%r must be a positive integer" % (key, value))
        chosen[key] = value
    return chosen


def prompt(index, tokens):
    """A deterministic prompt of about `tokens` tokens (one short word is about one token), different per
    request so that no prefix cache serves one request from another's work."""
    return ("request %d: " % index) + " ".join("word%d" % (word % 100) for word in range(tokens))


def request_body(api, model, chosen, index):
    body = {"model": model, "max_tokens": chosen["output_tokens"], "temperature": 0.0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    text = prompt(index, chosen["prompt_tokens"])
    if api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return body


def json_type(value):
    """What a parsed JSON value is, as a message says it."""
    if isinstance(value, bool):
        return "a boolean"
    for kind, name in ((dict, "an object"), (list, "a list"), (str, "a string"), ((int, float), "a number")):
        if isinstance(value, kind):
            return name
    return "null"


def chunk_problem(chunk):
    """Why a parsed chunk is not one the client can count (which value has which wrong type), or None."""
    if not isinstance(chunk, dict):
        return "a chunk is %s, not an object" % json_type(chunk)
    choices = chunk.get("choices")
    if choices is not None and not isinstance(choices, list):
        return "a chunk's choices is %s, not a list" % json_type(choices)
    for choice in choices or []:
        if not isinstance(choice, dict):
            return "a chunk's choice is %s, not an object" % json_type(choice)
        delta = choice.get("delta")
        if delta is not None and not isinstance(delta, dict):
            return "a choice's delta is %s, not an object" % json_type(delta)
        for where, text in (("text", choice.get("text")), ("delta's content", (delta or {}).get("content"))):
            if text is not None and not isinstance(text, str):
                return "a choice's %s is %s, not a string" % (where, json_type(text))
    usage = chunk.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "a chunk's usage is %s, not an object" % json_type(usage)
    tokens = (usage or {}).get("completion_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
        return "usage's completion_tokens is %s, not a count" % json_type(tokens)
    return None


def chunk_text(chunk):
    """The text a streamed chunk carries, from either API ('' for none)."""
    text = ""
    for choice in chunk.get("choices") or []:
        text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    return text


def read_stream(lines, sent, clock):
    """One request's timings from the server-sent event lines of its answer (sent is when it was sent), or ok
    False with the reason: a chunk that is not JSON, or not a chunk (chunk_problem), or no text at all."""
    arrivals = []
    usage_tokens = None
    for raw in lines:
        line = raw.decode("utf-8", "replace").strip() if isinstance(raw, bytes) else raw.strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError) as exc:
            return dict(ok=False, error="a chunk of the answer is not JSON (%s)" % (
                exc if isinstance(exc, ValueError) else "nested too deep"))
        problem = chunk_problem(chunk)
        if problem:
            return dict(ok=False, error=problem)
        if chunk_text(chunk):
            arrivals.append(clock())
        if chunk.get("usage"):
            usage_tokens = chunk["usage"].get("completion_tokens")
    if not arrivals:
        return dict(ok=False, error="the answer streamed no text")
    return dict(ok=True, ttft=arrivals[0] - sent, itl=[later - earlier for earlier, later in zip(arrivals, arrivals[1:])],
                latency=arrivals[-1] - sent, output_tokens=usage_tokens if usage_tokens else len(arrivals))


def overdue(timeout):
    return "no complete answer within request_timeout=%gs" % timeout


class DeadlineReader(io.RawIOBase):
    """A connection's bytes, each read of the socket given only the time left before the request's deadline: the
    socket's own timeout counts per read, so a server dripping a byte at a time would never reach it."""

    def __init__(self, sock, deadline, timeout, clock):
        io.RawIOBase.__init__(self)
        self._sock, self._deadline, self._timeout, self._clock = sock, deadline, timeout, clock
        # A file of the socket, as HTTPResponse would make: it keeps the socket open when the connection lets go.
        self._file = sock.makefile("rb", buffering=0)

    def readable(self):
        return True

    def readinto(self, buffer):
        left = self._deadline - self._clock()
        if left <= 0:
            raise RequestFailed(overdue(self._timeout))
        self._sock.settimeout(left)
        return self._file.readinto(buffer)

    def close(self):
        self._file.close()
        io.RawIOBase.close(self)


class DeadlineSocket(object):
    """What an HTTPResponse reads from: the connection's socket behind a DeadlineReader."""

    def __init__(self, sock, deadline, timeout, clock):
        self._reader = DeadlineReader(sock, deadline, timeout, clock)

    def makefile(self, _mode):
        return io.BufferedReader(self._reader)


def bounded_lines(response, limit):
    """The lines of a response, each at most limit bytes without its line end; RequestFailed naming the bound
    for a longer one, after reading no more than limit + 1 bytes of it."""
    while True:
        line = response.readline(limit + 1)
        if not line:
            return
        if len(line.rstrip(b"\r\n")) > limit:
            raise RequestFailed("a line of the answer is longer than the %d bytes a line may have" % limit)
        yield line


def stream_one(url, body, api_key, timeout, clock=time.monotonic, line_limit=LINE_LIMIT):
    """One request's timings (read_stream), or ok False with the reason, all within timeout seconds from its start
    and no line longer than line_limit bytes. A direct connection: a proxy from the node's environment would
    measure the proxy. A redirect is a failure: the client sends its key to the server it was given, nowhere else."""
    parts = urlsplit(url)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    deadline = clock() + timeout
    connect = HTTPSConnection if parts.scheme == "https" else HTTPConnection
    connection = connect(parts.hostname, parts.port, timeout=timeout)
    connection.response_class = lambda sock, *args, **options: HTTPResponse(
        DeadlineSocket(sock, deadline, timeout, clock), *args, **options)
    sent = clock()
    try:
        connection.request("POST", parts.path or "/", body=json.dumps(body).encode("utf-8"), headers=headers)
        response = connection.getresponse()
        if 300 <= response.status < 400:
            return dict(ok=False, error="HTTP %d %s: redirects are not followed" % (response.status, response.reason))
        if response.status != 200:
            return dict(ok=False, error="HTTP %d %s" % (response.status, response.reason))
        return read_stream(bounded_lines(response, line_limit), sent, clock)
    except RequestFailed as exc:
        return dict(ok=False, error=str(exc))
    except socket.timeout:
        return dict(ok=False, error=overdue(timeout))
    except (OSError, HTTPException, ValueError) as exc:
        # A refused connection, a TLS handshake that failed, an answer cut short or not HTTP.
        return dict(ok=False, error=str(exc) or type(exc).__name__)
    finally:
        connection.close()


def run(base_url, api, model, chosen, api_key=None, timeout=600.0, send=stream_one, clock=time.monotonic):
    """Send the workload's prompts, `concurrency` at a time; (results in order, wall seconds). BenchmarkError
    before anything is sent for a bad url or timeout. Whatever one request raises is its failure: a worker that
    died would leave its share unsent and the run would look complete."""
    url = checked_url(base_url).rstrip("/") + APIS[api]
    checked_timeout(timeout)
    results = [None] * chosen["prompts"]
    pending = list(range(chosen["prompts"]))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                index = pending.pop(0)
            try:
                results[index] = send(url, request_body(api, model, chosen, index), api_key, timeout)
            except Exception as exc:  # pylint: disable=broad-except
                results[index] = dict(ok=False, error="%s: %s" % (type(exc).__name__, exc))

    begin = clock()
    threads = [threading.Thread(target=worker) for _slot in range(min(chosen["concurrency"], chosen["prompts"]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, clock() - begin


def percentile(values, share):
    """The share-th percentile (0-100) of values, interpolated linearly as numpy does; None when empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * share / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(results, duration):
    """The metrics of one run from its requests' results and its wall time in seconds."""
    done = [result for result in results if result and result["ok"]]
    failed = [result for result in results if not (result and result["ok"])]
    itl = [gap for result in done for gap in result["itl"]]
    ttft = [result["ttft"] for result in done]
    output_tokens = sum(result["output_tokens"] for result in done)

    def milliseconds(values, share):
        value = percentile(values, share)
        return None if value is None else round(value * 1000.0, 3)

    failures = [dict(index=index, reason=result["error"] if result else "no result")
                for index, result in enumerate(results) if not (result and result["ok"])]
    return dict(
        completed=len(done), failed=len(failed), errors=sorted(set(result["error"] for result in failed if result))[:5],
        failures=failures[:FAILURES_SHOWN], duration_s=round(duration, 3), output_tokens=output_tokens,
        output_throughput=round(output_tokens / duration, 3) if duration > 0 else None,
        request_throughput=round(len(done) / duration, 3) if duration > 0 else None,
        ttft_ms_median=milliseconds(ttft, 50), ttft_ms_p99=milliseconds(ttft, 99),
        itl_ms_median=milliseconds(itl, 50), itl_ms_p99=milliseconds(itl, 99),
    )


def bench_serving_value(record, field, count=False):
    """The number (count: the integer) record holds for field; BenchmarkError naming field otherwise."""
    value = record.get(field)
    if isinstance(value, bool) or not isinstance(value, int if count else (int, float)) \
            or not -float("inf") < value < float("inf"):
        raise BenchmarkError("the result of sglang.bench_serving has %s for %s, not a %s"
                             % (json_type(value), field, "count" if count else "number"))
    return value


def from_bench_serving(record):
    """The same metrics from one line of `python -m sglang.bench_serving --output-file`; BenchmarkError naming the
    field that is missing or of the wrong type (the virtualenv's owner wrote it: it is not trusted)."""
    if not isinstance(record, dict):
        raise BenchmarkError("the result of sglang.bench_serving is %s, not an object" % json_type(record))
    completed = bench_serving_value(record, "completed", count=True)
    prompts = completed if record.get("num_prompts") is None else bench_serving_value(record, "num_prompts", True)
    if not 0 <= completed <= prompts:
        raise BenchmarkError("the result of sglang.bench_serving says %d of %d prompts completed"
                             % (completed, prompts))

    def rounded(field):
        return round(bench_serving_value(record, field), 3)

    return dict(
        completed=completed, failed=prompts - completed, errors=[], failures=[], duration_s=rounded("duration"),
        output_tokens=bench_serving_value(record, "total_output_tokens", count=True),
        output_throughput=rounded("output_throughput"), request_throughput=rounded("request_throughput"),
        ttft_ms_median=rounded("median_ttft_ms"), ttft_ms_p99=rounded("p99_ttft_ms"),
        itl_ms_median=rounded("median_itl_ms"), itl_ms_p99=rounded("p99_itl_ms"),
    )


def from_bench_serving_output(data):
    """The metrics of the last line of a bench_serving output file (bytes; it appends a line per run)."""
    try:
        lines = [line for line in data.decode("utf-8").splitlines() if line.strip()]
        record = json.loads(lines[-1]) if lines else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BenchmarkError("the result of sglang.bench_serving is not JSON lines")
    if record is None:
        raise BenchmarkError("the result file of sglang.bench_serving is empty")
    return from_bench_serving(record)


def bench_serving_argv(python, base_url, model_path, chosen, output_file):
    """SGLang's own client on the same workload, against the same OpenAI-compatible API."""
    return [python, "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", base_url.rstrip("/"),
            "--model", model_path, "--dataset-name", "random", "--random-input-len", str(chosen["prompt_tokens"]),
            "--random-output-len", str(chosen["output_tokens"]), "--random-range-ratio", "1",
            "--num-prompts", str(chosen["prompts"]), "--max-concurrency", str(chosen["concurrency"]),
            "--output-file", output_file]


def run_failure(metrics, url):
    """Why a run of the benchmark module fails, or None: no request completed, or some failed, each listed by index
    and reason (the first FAILURES_SHOWN; sglang.bench_serving gives no reasons). A server whose requests fail is not
    healthy: the requests that completed measured it no more than those that failed."""
    if metrics["completed"] == 0:
        return "no request to %s completed: %s" % (url, "; ".join(metrics["errors"]))
    if not metrics["failed"]:
        return None
    listed = ["request %d: %s" % (failure["index"], failure["reason"]) for failure in metrics["failures"]]
    if listed and metrics["failed"] > len(listed):
        listed.append("%d more" % (metrics["failed"] - len(listed)))
    return ("%d of %d requests to %s failed (%s): a server whose requests fail is not healthy, so the run is no "
            "measurement of it and never a baseline" % (
                metrics["failed"], metrics["failed"] + metrics["completed"], url,
                "; ".join(listed) or "sglang.bench_serving gives no reasons"))


def run_problem(metrics):
    """Why a run is no measurement to keep as a baseline or to pass a comparison: a failed request, nothing
    completed, or counts it does not give; None when every request completed."""
    completed, failed = metrics.get("completed"), metrics.get("failed")
    if any(isinstance(count, bool) or not isinstance(count, int) for count in (completed, failed)):
        return "the run does not say how many of its requests completed and failed"
    if failed:
        return "%d of %d requests failed (%s)" % (failed, completed + failed,
                                                  "; ".join(metrics.get("errors") or []) or "no reason given")
    if completed == 0:
        return "no request completed"
    return None


def compare(current, previous, max_drop_percent):
    """The change of each metric from previous to current, and whether current is a regression: output throughput
    dropped by more than max_drop_percent, or current has a failed request (run_problem). previous None (no earlier
    result) compares nothing and fails only for such a problem. BenchmarkError for a previous run of another
    workload or with a problem of its own: neither is a baseline."""
    problem = run_problem(current.get("metrics", {}))
    refusal = "%s: a run with a failed request neither passes nor becomes a baseline" % problem
    if previous is None:
        if problem:
            return dict(baseline=None, changes={}, regression=True, message=refusal)
        return dict(baseline=None, changes={}, regression=False,
                    message="no earlier result for this node and workload: this run is the baseline")
    if previous.get("workload", {}).get("name") != current.get("workload", {}).get("name"):
        raise BenchmarkError("the baseline %s ran workload %s, this run %s: compare runs of one workload"
                             % (previous.get("file"), previous.get("workload", {}).get("name"),
                                current.get("workload", {}).get("name")))
    previous_problem = run_problem(previous.get("metrics", {}))
    if previous_problem:
        raise BenchmarkError("the baseline %s is no baseline: %s. Compare with a run in which every request "
                             "completed" % (previous.get("file"), previous_problem))
    changes = {}
    for metric, higher_is_better in METRICS:
        before, after = previous["metrics"].get(metric), current["metrics"].get(metric)
        percent = round((after - before) * 100.0 / before, 1) if before and after is not None else None
        changes[metric] = dict(before=before, after=after, change_percent=percent, higher_is_better=higher_is_better)
    drop = changes["output_throughput"]["change_percent"]
    dropped = drop is not None and -drop > max_drop_percent
    message = ("output throughput %s -> %s tok/s (%+.1f%%)" % (changes["output_throughput"]["before"],
                                                               changes["output_throughput"]["after"], drop)
               if drop is not None else "output throughput not measured")
    if dropped:
        message += ": a drop beyond the allowed %g%%" % max_drop_percent
    if problem:
        message += "; " + refusal
    return dict(baseline=previous.get("file"), changes=changes, regression=dropped or problem is not None,
                message=message)


def table(rows):
    """Lines of a text table, one row per (host, result, comparison)."""
    header = ("host", "workload", "profile", "tok/s", "req/s", "TTFT p50/p99 ms", "ITL p50/p99 ms", "vs baseline")
    lines = [header]
    for host, result, comparison in rows:
        metrics = result.get("metrics", {})
        drop = ((comparison or {}).get("changes", {}).get("output_throughput") or {}).get("change_percent")
        lines.append((host, result.get("workload", {}).get("name", "-"), str(result.get("stack_profile") or "-"),
                      str(metrics.get("output_throughput")), str(metrics.get("request_throughput")),
                      "%s/%s" % (metrics.get("ttft_ms_median"), metrics.get("ttft_ms_p99")),
                      "%s/%s" % (metrics.get("itl_ms_median"), metrics.get("itl_ms_p99")),
                      ("%+.1f%%" % drop if drop is not None else "-")
                      + (" REGRESSION" if (comparison or {}).get("regression") else "")))
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
