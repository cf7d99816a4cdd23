"""sglang_diagnosis's serving probe against a server of the service user's that answers the generate with 401 and
echoes the API key it was sent in every spelling it can: JSON-escaped (every character as \\uXXXX, in either case
of hex), URL-encoded, in base64 alone and inside Basic credentials. The result quotes the answer with the key
masked in each, whichever the module was given the key by: the recorded command line, not a no_log option."""
import base64
import json
import os
import socket
import subprocess
import time
from urllib.parse import quote

import hostile_harness

MODULE = "sglang_diagnosis"
MASK = "********"
# With what JSON and URLs escape ('/', '+'); the pid keeps it this run's.
KEY = "sk-echo/%d+Zq~" % os.getpid()
ECHO_SERVER = r'''import base64, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import quote

class Echo(BaseHTTPRequestHandler):
    def answer(self, status, data):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(200, b"{}")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = (self.headers.get("Authorization") or "").partition(" ")[2]
        self.answer(401, json.dumps({
            "error": "invalid api key " + "".join("\\u%04x" % ord(character) for character in key),
            "upper": "".join("\\u%04X" % ord(character) for character in key),
            "query": "/v1/models?key=" + quote(key, safe=""),
            "basic": "Basic " + base64.b64encode(("admin:" + key).encode()).decode(),
            "token": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        }).replace("\\\\u", "\\u").encode())

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Echo).serve_forever()
'''


def echoed_forms():
    """What the server sends of KEY, as the result must show none of it."""
    return {
        "JSON-escaped": "".join("\\u%04x" % ord(character) for character in KEY),
        "JSON-escaped, upper-case hex": "".join("\\u%04X" % ord(character) for character in KEY),
        "URL-encoded": quote(KEY, safe=""),
        "base64 of admin:key": base64.b64encode(("admin:" + KEY).encode()).decode()[len("admin:") * 8 // 6:],
        "url-safe base64": base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
        "as it is": KEY,
    }


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_time(pid):
    """The process's start time in clock ticks since boot, as sglang_server records it."""
    with open("/proc/%d/stat" % pid) as handle:
        return int(handle.read().rpartition(")")[2].split()[19])


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as handle:
        return handle.read().strip()


def listening(port, process, deadline=10):
    end = time.monotonic() + deadline
    while time.monotonic() < end and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def test_a_401_that_echoes_the_api_key_escaped_shows_it_in_no_spelling(hostile):
    case = hostile(MODULE, "401 echoing the api key JSON-escaped, URL-encoded, in base64")
    script = case.home / "echo_server.py"
    script.write_text(ECHO_SERVER)
    case.chown(script)
    log = case.user_dir("logs") / "sglang.log"
    case.replace(log, "file", "[2026-12-01 10:00:00] The server is fired up and ready to roll!\n")
    port = free_port()
    # The server's command line as sglang_server records it: the probe sends the key of its --api-key.
    argv = ["/usr/bin/python3", str(script), "--api-key", KEY, "--port", str(port)]
    server = subprocess.Popen(argv, user=case.user.uid, group=case.user.gid, extra_groups=[], cwd=str(case.home),
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert listening(port, server), "the echo server did not listen on 127.0.0.1:%d" % port
        state_dir = case.root_dir("state", 0o750)
        state = dict(pid=server.pid, start_time=start_time(server.pid), argv=argv, env_digest="0" * 64,
                     log_path=str(log), offset=0, uid=case.user.uid, boot_id=boot_id())
        (state_dir / "sglang.json").write_text(json.dumps(state))
        os.chmod(str(state_dir / "sglang.json"), 0o600)
        run = case.module(MODULE, dict(state_dir=str(state_dir), kernel_log=False, gpu_processes=False,
                                       probe="generate", probe_timeout=5, server_url="http://127.0.0.1:%d" % port))
    finally:
        server.kill()
        server.wait()
    generate = (((run.result or {}).get("serving") or {}).get("generate") or {})
    problem = generate.get("problem") or ""
    problems = []
    if generate.get("status") != 401:
        problems.append("the probe did not get the server's 401: %r" % (generate,))
    elif problem.count(MASK) < 5:
        problems.append("the 401's body is not quoted with its 5 echoes masked: %s" % problem)
    shown = list(hostile_harness.strings(run.result or {}))
    problems += ["the result shows the key %s" % name for name, form in echoed_forms().items()
                 if any(form in text for text in shown) or form in run.stdout]
    case.check(run, "ok", problems=problems)
    case.finish()
