"""Serving: a generate that brings back a token, within one deadline for all of it, against real HTTP servers on
the loopback (threads of this process) that answer, hang, trickle, fail or close."""
import json
import re
import socket
import threading
import time

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import MASK, masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import serving as core

KEY = "sk-serving-5d1c"
# Slack for a deadline: thread switches and a slow, busy test machine.
SLACK = 0.5


def json_answer(document, status=200, reason="OK"):
    body = json.dumps(document).encode()
    return (("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
        status, reason, len(body))).encode() + body)


GENERATED = json_answer({"text": " Paris.", "meta_info": {"completion_tokens": 2}})
HEALTHY = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class Server(object):
    """An HTTP server on the loopback whose answer to each request is behaviour(server, connection, request): it
    writes what it likes and may hang. It records each request, and in events when it came and when its answer
    began (a client can only send its next request after that)."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.requests = []
        self.events = []
        self.release = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _address = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _sep, body = data.partition(b"\r\n\r\n")
            length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")]
            while length and len(body) < length[0]:
                body += connection.recv(65536)
            request = {"head": head.decode("latin-1"), "body": body, "path": head.split(b" ")[1].decode()}
            self.requests.append(request)
            self.events.append(("request", request["path"]))
            self.behaviour(self, connection, request)
        except OSError:
            pass
        finally:
            connection.close()

    def close(self):
        self.release.set()
        self.listener.close()


@pytest.fixture
def server():
    started = []

    def start(behaviour):
        started.append(Server(behaviour))
        return started[-1]
    yield start
    for each in started:
        each.close()


def answering(generate=GENERATED, health=HEALTHY):
    def behaviour(server, connection, request):
        server.events.append(("answer", request["path"]))
        connection.sendall(health if request["path"] == "/health" else generate)
    return behaviour


def hanging_generate(server, connection, request):
    if request["path"] == "/health":
        connection.sendall(HEALTHY)
    else:
        server.release.wait(30)  # the scheduler behind it is dead: no answer


def test_a_generate_that_brings_back_text_serves(server):
    up = server(answering())
    result = core.generate(up.url + "/generate", 5)
    assert result["serving"] is True and result["reason"] is None and result["problem"] is None
    assert (result["status"], result["text"], result["tokens"]) == (200, " Paris.", 2)
    assert 0 <= result["seconds"] < 5
    request = json.loads(up.requests[0]["body"])
    assert request["text"] == core.PROMPT
    assert request["sampling_params"] == {"max_new_tokens": core.MAX_NEW_TOKENS, "temperature": 0}
    assert 1 <= core.MAX_NEW_TOKENS <= 8
    assert up.requests[0]["head"].startswith("POST /generate HTTP/1.1\r\n")
    assert "Authorization" not in up.requests[0]["head"]


def test_a_generate_that_hangs_does_not_serve_and_ends_at_its_deadline(server):
    up = server(hanging_generate)
    started = time.monotonic()
    result = core.generate(up.url + "/generate", 0.5)
    took = time.monotonic() - started
    assert (result["serving"], result["status"], result["reason"]) == (False, None, "timeout")
    assert result["problem"] == "POST /generate gave no answer within 0.5 s"
    assert 0.5 <= took < 0.5 + SLACK and 0.5 <= result["seconds"] < 0.5 + SLACK


def test_the_deadline_is_for_the_whole_answer_not_for_each_read(server):
    """A server that sends its answer a byte every 0.03 s (about 3 s for all of it) never lets a read wait for its
    timeout: only a deadline for the whole answer ends the wait at 1 s."""
    def trickle(server, connection, request):
        for byte in GENERATED:
            if server.release.is_set():
                return
            connection.sendall(bytes([byte]))
            time.sleep(0.03)
    up = server(trickle)
    started = time.monotonic()
    result = core.generate(up.url + "/generate", 1.0)
    assert result["reason"] == "timeout" and result["serving"] is False
    assert time.monotonic() - started < 1.0 + SLACK


@pytest.mark.parametrize("answer, reason, words", [
    (json_answer({"object": "error", "message": "Internal server error", "code": 500}, 500, "Internal Server Error"),
     "http_status", 'POST /generate answered HTTP 500: {"object": "error", "message": "Internal server error"'),
    (json_answer({"text": "", "meta_info": {"completion_tokens": 0}}), "empty_text",
     'POST /generate answered 200 without generated text: {"text": ""'),
    (json_answer({"meta_info": {}}), "empty_text", "POST /generate answered 200 without generated text"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!", "empty_text",
     "POST /generate answered 200 without generated text: not json!"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"text\": \"cut", "connection",
     "POST /generate got no whole answer: the connection closed in the middle of it (HTTP 200)"),
    (b"", "connection", "POST /generate got no answer: the connection closed before an HTTP answer came"),
    (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "connection", "POST /generate answered with something that is not HTTP: SSH-2.0"),
])
def test_a_generate_without_text_says_why(server, answer, reason, words):
    up = server(answering(generate=answer))
    result = core.generate(up.url + "/generate", 5)
    assert (result["serving"], result["reason"]) == (False, reason)
    assert result["problem"].startswith(words), result["problem"]


def test_an_end_of_sequence_token_alone_is_a_token(server):
    up = server(answering(generate=json_answer({"text": "", "meta_info": {"completion_tokens": 1}})))
    result = core.generate(up.url + "/generate", 5)
    assert result["serving"] is True and (result["text"], result["tokens"]) == ("", 1)


def test_a_chunked_answer_is_read_whole(server):
    body = json.dumps({"text": " Paris is", "meta_info": {"completion_tokens": 3}}).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    up = server(answering(generate=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked))
    result = core.generate(up.url + "/generate", 5)
    assert result["serving"] is True and result["text"] == " Paris is"


def test_an_answer_without_a_length_ends_with_the_connection(server):
    up = server(answering(generate=b"HTTP/1.0 200 OK\r\n\r\n" + json.dumps({"text": "x"}).encode()))
    assert core.generate(up.url + "/generate", 5)["serving"] is True


@pytest.mark.parametrize("head", [b"HTTP/1.1 \xc2\xb200 OK\r\n\r\n", b"HTTP/1.1 " + b"2" * 5000 + b" OK\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n{}"])
def test_an_answer_with_numbers_out_of_bounds_is_no_answer_not_a_traceback(server, head):
    up = server(answering(generate=head))
    result = core.generate(up.url + "/generate", 5)
    assert result["serving"] is False and result["problem"], result


def test_an_endless_answer_is_read_up_to_a_bound(server):
    def endless(server, connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        while not server.release.is_set():
            connection.sendall(b"x" * 65536)
    up = server(endless)
    result = core.generate(up.url + "/generate", 10)
    assert result["reason"] == "connection" and result["seconds"] < 10
    assert result["problem"] == "POST /generate sent an answer longer than %d bytes" % core.ANSWER_LIMIT


def test_nothing_listening_is_refused_at_once():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = core.generate("http://127.0.0.1:%d/generate" % port, 5)
    assert (result["serving"], result["reason"]) == (False, "refused") and result["seconds"] < 1
    assert result["problem"] == "POST /generate was refused: nothing listens on 127.0.0.1:%d" % port


def test_the_api_key_is_sent_as_the_bearer_token_and_never_returned(server):
    def echoing_unauthorized(server, connection, request):
        connection.sendall(json_answer({"error": "Unauthorized", "seen": request["head"]}, 401, "Unauthorized"))
    up = server(echoing_unauthorized)
    result = core.generate(up.url + "/generate", 5, api_key=KEY)
    assert "Authorization: Bearer %s\r\n" % KEY in up.requests[0]["head"] + "\r\n"
    assert (result["status"], result["reason"]) == (401, "http_status")
    assert KEY not in json.dumps(result) and MASK in result["problem"]


def test_the_launchs_secrets_are_masked_in_what_the_server_answers(server):
    up = server(answering(generate=json_answer({"text": "token hf_live_0a9b and --api-key=other-key"})))
    result = core.generate(up.url + "/generate", 5, mask=lambda text: masked_text(text, values=("hf_live_0a9b",)))
    assert result["serving"] is True and result["text"] == "token %s and --api-key=%s" % (MASK, MASK)


def test_an_api_key_that_would_end_the_header_is_refused(server):
    up = server(answering())
    with pytest.raises(ValueError, match="control character"):
        core.generate(up.url + "/generate", 5, api_key="key\r\nX-Injected: 1")
    assert up.requests == []


def test_what_the_server_says_is_shown_as_one_short_line(server):
    up = server(answering(generate=json_answer({"text": "\x1b[31mred\x1b[0m\nnext line " + "y" * 5000})))
    result = core.generate(up.url + "/generate", 5)
    assert result["text"].startswith("red next line y") and "\x1b" not in result["text"]
    assert len(result["text"].encode()) < core.SHOWN_BYTES + 40 and result["text"].endswith("bytes cut]")


def test_health_then_generate_both_named_when_the_generate_hangs(server):
    up = server(hanging_generate)
    started = time.monotonic()
    found = core.serves(up.url, 1.0, api_key=KEY)
    assert time.monotonic() - started < 1.0 + SLACK
    assert found["serving"] is False and found["url"] == up.url
    assert found["health"] == {"status": 200, "seconds": found["health"]["seconds"], "reason": None, "problem": None}
    assert found["generate"]["reason"] == "timeout"
    assert re.fullmatch(r"/health answered 200 in 0\.0 s, but POST /generate gave no answer within (0\.9|1\.0) s",
                        found["message"]), found["message"]
    assert [request["path"] for request in up.requests] == ["/health", "/generate"]


def test_a_server_that_serves(server):
    up = server(answering())
    found = core.serves(up.url + "/", 5)
    assert found["serving"] is True and found["generate"]["text"] == " Paris."
    assert found["message"] == '/health answered 200 in 0.0 s and POST /generate returned " Paris." (2 tokens) ' \
        'in 0.0 s'


def test_a_health_that_hangs_is_not_serving_and_no_generate_piles_on(server):
    def stuck(server, connection, request):
        server.release.wait(30)
    up = server(stuck)
    started = time.monotonic()
    found = core.serves(up.url, 2.0, health_timeout=0.5)
    assert time.monotonic() - started < 0.5 + SLACK
    assert found["serving"] is False and found["generate"] is None
    assert found["health"]["reason"] == "timeout"
    assert found["message"] == "/health gave no answer within 0.5 s"
    assert up.events == [("request", "/health")]


def test_a_health_that_is_not_200_asks_no_generate(server):
    up = server(answering(health=b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"))
    found = core.serves(up.url, 5)
    assert (found["serving"], found["message"], found["generate"]) == (False, "/health answered HTTP 503", None)


def test_health_gets_at_most_half_the_deadline(server):
    def stuck(server, connection, request):
        server.release.wait(30)
    up = server(stuck)
    found = core.serves(up.url, 0.6, health_timeout=10)
    assert found["message"] == "/health gave no answer within 0.3 s" and found["seconds"] < 0.3 + SLACK


def test_health_alone_when_no_generate_is_asked(server):
    up = server(hanging_generate)
    found = core.serves(up.url, 5, generate_text=False)
    assert found["serving"] is True and found["generate"] is None
    assert found["message"] == "/health answered 200 in 0.0 s (no generate asked)"


def test_one_request_in_flight_at_a_time(server):
    up = server(answering())
    for _attempt in range(5):
        assert core.serves(up.url, 5)["serving"] is True
    assert up.events == [("request", "/health"), ("answer", "/health"), ("request", "/generate"),
                         ("answer", "/generate")] * 5


@pytest.mark.parametrize("argv, url, rank", [
    (["python", "-m", "sglang.launch_server", "--model-path", "/m"], "http://127.0.0.1:30000", 0),
    # `sglang serve`, as sglang_server starts it: the console script's path and `serve` come before the flags.
    (["/opt/ml-env/bin/python", "/opt/ml-env/bin/sglang", "serve", "--model-path", "/m", "--host", "10.0.0.5",
      "--port", "30001", "--node-rank", "1"], "http://10.0.0.5:30001", 1),
    (["p", "--host", "0.0.0.0", "--port", "38242"], "http://127.0.0.1:38242", 0),
    (["p", "--host", "::", "--port", "1"], "http://127.0.0.1:1", 0),
    (["p", "--host", "10.0.0.5", "--port", "30000", "--port=30001", "--node-rank", "2"], "http://10.0.0.5:30001", 2),
    (["p", "--host=fd00::5", "--node-rank", "x"], "http://[fd00::5]:30000", 0),
])
def test_the_address_and_rank_of_a_recorded_command_line(argv, url, rank):
    assert (core.server_url(argv), core.node_rank(argv)) == (url, rank)
    assert core.url_problem(url) is None


def test_the_api_key_of_a_recorded_command_line():
    assert core.flag_value(["p", "--api-key", "a", "--api-key=b"], "--api-key") == "b"
    assert core.flag_value(["p", "--api-key"], "--api-key") is None


@pytest.mark.parametrize("url, words", [
    ("127.0.0.1:30000", "is not an http:// or https:// URL with a host"),
    ("ftp://h:1", "is not an http:// or https:// URL with a host"),
    ("http://h:99999", "is not a URL"),
    ("http://user:pw@h:1", "holds a user, a query or a fragment"),
    ("http://h:1/?x=1", "holds a user, a query or a fragment"),
])
def test_a_url_that_is_no_servers_base_url_is_named(url, words):
    assert words in core.url_problem(url)
