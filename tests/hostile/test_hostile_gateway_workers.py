"""gateway_workers (and gateway_info) against a gateway on 127.0.0.1 that answers as badly as it can: a listing
whose worker id would take the admin key's request out of /workers/ (`../../shutdown?now=1`), names and ids with
terminal sequences, more workers than any fleet, an answer of 64 MiB, and errors that echo the admin key and a
worker's key, as sent and JSON-escaped. Root sends no request outside /workers and /workers/<one id of the
gateway's shape>, shows no key, and returns bounded."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

MODULE = "gateway_workers"
INFO = "gateway_info"
ADMIN_KEY = "adm-hostile-51c0e2"
WORKER_KEY = "key-gpu01-hostile-9d3b"
HOSTILE_ID = "../../shutdown?now=1"
WORKERS = [{"name": "gpu01", "url": "http://127.0.0.1:9", "api_key": WORKER_KEY}]
# The requests the module may send: the list, or one worker by the id the gateway gave it (a UUID).
ALLOWED_PATH = re.compile(r"/workers(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?\Z")
BIG_ANSWER = 64 << 20


def hostile_entries():
    return [
        {"id": HOSTILE_ID, "url": "http://127.0.0.99:30000", "is_healthy": True,
         "metadata": {"node": "evil\x1b[2J\x1b]0;owned\x07\r\nfake: line"}},
        {"id": "\x1b[31m5b0c8e1e-7c1d-4c5e-9f39-2a0f3c7b2f10\x1b[0m", "url": "http://127.0.0.98:30000",
         "is_healthy": False, "metadata": {"node": "\u009b1;1H" + "n" * 200000}},
    ]


def echo(key):
    """An error body that quotes the key it was sent: as it is, and JSON-escaped (its first character \\uXXXX)."""
    escaped = "\\u%04x" % ord(key[0]) + key[1:]
    return ('{"error": "invalid admin key %s", "received": "%s", "worker": "%s", "note": "\x1b[31mdenied\x1b[0m"}'
            % (key, escaped, WORKER_KEY)).encode()


class HostileGateway(object):
    """An HTTP server on 127.0.0.1 (a free port) in a thread; answer(method, path, authorization) -> (status, body,
    or an int: that many bytes streamed). Records every request's method and raw path."""

    def __init__(self, answer):
        self.requests = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(min(length, 1 << 20))
                gateway.requests.append((self.command, self.path))
                status, body = answer(self.command, self.path, self.headers.get("Authorization", ""))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(body if isinstance(body, int) else len(body)))
                self.end_headers()
                try:
                    if isinstance(body, int):
                        chunk = b"[" * (1 << 16)
                        for _index in range(body // len(chunk)):
                            self.wfile.write(chunk)
                    else:
                        self.wfile.write(body)
                except OSError:  # the module stopped reading: what it is meant to do
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def stray_requests(self):
        """Problems for each request outside /workers and /workers/<a UUID>."""
        return ["sent %s %s, outside /workers/<one id>" % (method, path) for method, path in self.requests
                if not ALLOWED_PATH.match(path)]


def listing_answer(entries):
    def answer(method, path, _authorization):
        if path == "/workers" and method == "GET":
            return 200, json.dumps({"workers": entries, "total": len(entries)}).encode()
        if path == "/workers" and method == "POST":
            return 202, b'{"status": "accepted"}'
        return 404, b'{"code": "WORKER_NOT_FOUND"}'
    return answer


def no_key_shown(run):
    """Problems for each key, or its JSON-escaped form, that the run's output shows."""
    shown = run.stdout + run.stderr
    return ["its output shows %s" % what for what, text in (
        ("the admin key", ADMIN_KEY), ("the admin key JSON-escaped", ADMIN_KEY[1:]), ("the worker's key", WORKER_KEY))
        if text in shown]


def args_for(gateway, **changes):
    args = dict(gateway_url=gateway.url, admin_key=ADMIN_KEY, workers=WORKERS, workers_file=None, wait_timeout=0,
                timeout=5)
    args.update(changes)
    return args


def test_control_a_plain_listing(hostile):
    case = hostile(MODULE, "control: a gateway without workers")
    with HostileGateway(listing_answer([])) as gateway:
        run = case.module(MODULE, args_for(gateway), check_mode=True)
    changes = (run.result or {}).get("changes")
    case.check(run, "ok", problems=gateway.stray_requests() + no_key_shown(run) + (
        [] if changes == ["add http://127.0.0.1:9 (gpu01)"] else ["changes: %r" % (changes,)]))
    case.finish()


def test_a_listed_id_that_would_leave_workers_is_never_sent(hostile):
    case = hostile(MODULE, "listing: id ../../shutdown?now=1, escapes")
    kept = case.root_dir("gateway") / "workers.json"
    with HostileGateway(listing_answer(hostile_entries())) as gateway:
        run = case.module(MODULE, args_for(gateway, workers_file=str(kept)))
    problems = gateway.stray_requests() + no_key_shown(run)
    problems += ["sent %s %s" % request for request in gateway.requests if request[0] != "GET"]
    problems += ["wrote the workers file of a run that changed nothing"] if kept.exists() else []
    case.check(run, "refused", needle=HOSTILE_ID, problems=problems)
    case.finish()


def test_a_hostile_listing_left_alone_is_shown_cleaned(hostile):
    case = hostile(MODULE, "listing left alone (exclusive=false): escapes, 200 kB name")
    with HostileGateway(listing_answer(hostile_entries())) as gateway:
        run = case.module(MODULE, args_for(gateway, exclusive=False), diff=True)
    shown = dict((worker.get("url"), worker) for worker in (run.result or {}).get("workers") or [])
    problems = gateway.stray_requests() + no_key_shown(run)
    if (shown.get("http://127.0.0.99:30000") or {}).get("name") != "evil fake: line":
        problems.append("the hostile name is not shown cleaned: %r" % (shown.get("http://127.0.0.99:30000"),))
    if len(run.stdout) > 64 << 10:
        problems.append("a result of %d bytes" % len(run.stdout))
    case.check(run, "ok", problems=problems)
    case.finish()


def test_the_info_module_shows_a_hostile_listing_cleaned(hostile):
    case = hostile(INFO, "listing: id ../../shutdown?now=1, escapes")
    with HostileGateway(listing_answer(hostile_entries())) as gateway:
        run = case.module(INFO, dict(gateway_url=gateway.url, admin_key=ADMIN_KEY, workers=WORKERS, workers_file=None,
                                     timeout=5))
    problems = gateway.stray_requests() + no_key_shown(run)
    problems += ["a result of %d bytes" % len(run.stdout)] if len(run.stdout) > 64 << 10 else []
    case.check(run, "ok", problems=problems)
    case.finish()


@pytest.mark.parametrize("name, answer, needle", [
    ("listing of 5000 workers", 5000, "more than the 4096"),
    ("answer of 64 MiB", BIG_ANSWER, "longer than"),
])
def test_a_listing_too_big_is_refused_bounded(hostile, name, answer, needle):
    case = hostile(MODULE, name)
    if answer == BIG_ANSWER:
        def serve(_method, _path, _authorization):
            return 200, BIG_ANSWER
    else:
        serve = listing_answer([{"id": "5b0c8e1e-7c1d-4c5e-9f39-%012d" % index, "url": "http://10.1.%d.%d:1"
                                 % (index // 250, index % 250), "metadata": {"node": "n\x1b[1m"}}
                                for index in range(answer)])
    with HostileGateway(serve) as gateway:
        run = case.module(MODULE, args_for(gateway))
    case.check(run, "refused", needle=needle, problems=gateway.stray_requests() + no_key_shown(run))
    case.finish()


@pytest.mark.parametrize("status", [401, 500])
def test_an_error_that_echoes_the_keys_is_shown_masked(hostile, status):
    case = hostile(MODULE, "error %d echoing the admin key (as sent, JSON-escaped)" % status)

    def answer(_method, _path, authorization):
        return status, echo(authorization.partition(" ")[2] or ADMIN_KEY)
    with HostileGateway(answer) as gateway:
        run = case.module(MODULE, args_for(gateway))
    problems = gateway.stray_requests() + no_key_shown(run)
    problems += [] if gateway.requests else ["the gateway was never asked: the echo was not tested"]
    case.check(run, "refused", needle="HTTP %d" % status, problems=problems)
    case.finish()
