# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Whether an SGLang server serves: a generate request brought back a token.

A ``/health`` 200 says that SGLang's HTTP server answers, not that its scheduler works: SGLang's health endpoint
has answered 200 after the scheduler had died, while every generate hung. So serving is proven by one real
``POST /generate`` (a short prompt, a few new tokens, greedy) that comes back with generated text.

Each request has one deadline for all of it: the connection, sending the request and every read of the answer
end by then, however slowly the server sends its bytes, and no more than ANSWER_LIMIT bytes of an answer are
read. Only resolving a host name is not bounded by it (give an address). One request is in flight at a time, so a
server that is already slow is asked once, never piled on. What the server sent is returned masked (``mask``)
and cut to a line, as a result may show it; the API key is sent in a header and never returned.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import socket
import ssl
import time
from urllib.parse import urlsplit

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import (
    bounded_int,
    control_character_problem,
    printable_text,
    result_line,
)

PROMPT = "The capital of France is"
MAX_NEW_TOKENS = 8
# /health is asked first, for at most this many seconds and at most half of the whole deadline; the rest is the
# generate's.
HEALTH_TIMEOUT = 10.0
# An answer to a generate of a few tokens is a few hundred bytes.
ANSWER_LIMIT = 1 << 20
READ_SIZE = 1 << 16
# How much of an answer a result quotes.
SHOWN_BYTES = 300
# SGLang's defaults; a server bound to every address is reached through the loopback.
DEFAULT_HOST = "127.0.0.1"
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
REASONS = ("timeout", "refused", "connection", "http_status", "empty_text")


class NoAnswer(Exception):
    """No HTTP answer came: ``reason`` is ``timeout``, ``refused`` or ``connection``; the message says why."""

    def __init__(self, reason, message):
        Exception.__init__(self, message)
        self.reason = reason


def url_problem(url):
    """Why url is no base URL of a server (an http:// or https:// URL with a host, no user, query or fragment),
    or None."""
    try:
        parts = urlsplit(url)
        _port = parts.port  # one out of range raises ValueError
    except ValueError as exc:
        return "%r is not a URL: %s" % (url, exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "%r is not an http:// or https:// URL with a host" % (url,)
    if parts.username is not None or parts.query or parts.fragment:
        return "%r holds a user, a query or a fragment: give the server's base URL, such as " \
            "http://%s:%d" % (url, DEFAULT_HOST, SERVER_PORT)
    return None


def flag_value(argv, flag):
    """The value argv gives flag (`--flag VALUE` or `--flag=VALUE`; the last one wins, as in argparse), or None."""
    found = None
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            found = argv[index + 1]
        elif word.startswith(flag + "="):
            found = word[len(flag) + 1:]
    return found


def server_url(argv):
    """The base URL of the server that argv (a recorded command line, `-m sglang.launch_server` or `sglang serve`,
    whose flags are the same) starts."""
    host = flag_value(argv, "--host")
    host = DEFAULT_HOST if host is None or host in WILDCARD_HOSTS else host
    port = flag_value(argv, "--port") or str(SERVER_PORT)
    return "http://%s:%s" % ("[%s]" % host if ":" in host else host, port)


def node_rank(argv):
    """The server's node rank (`--node-rank`), 0 when not given or not a number."""
    rank = flag_value(argv, "--node-rank")
    return int(rank) if rank is not None and rank.isdigit() else 0


def _left(deadline, clock):
    left = deadline - clock()
    if left <= 0:
        raise socket.timeout("the deadline has passed")
    return left


def _connect(host, port, deadline, clock):
    last = None
    for family, kind, protocol, _name, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        connection = socket.socket(family, kind, protocol)
        try:
            connection.settimeout(_left(deadline, clock))
            connection.connect(address)
            return connection
        except (socket.timeout, TimeoutError):
            connection.close()
            raise
        except OSError as exc:
            connection.close()
            last = exc
    raise last or OSError("%s resolves to no address" % host)


def _split(data):
    """(status, headers, body) of the bytes read so far; status None while the head is incomplete."""
    head, found, body = data.partition(b"\r\n\r\n")
    if not found:
        return None, {}, b""
    lines = head.decode("iso-8859-1").split("\r\n")
    words = lines[0].split(None, 2)
    status = bounded_int(words[1], 3) if len(words) >= 2 else None
    if status is None or not words[0].startswith("HTTP/"):
        raise NoAnswer("connection", "answered with something that is not HTTP: %s" % lines[0])
    headers = {}
    for line in lines[1:]:
        name, _colon, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def _dechunked(body):
    """(the data, whether the last chunk came) of a chunked body."""
    data = b""
    position = 0
    while True:  # each pass takes one chunk, so the passes are fewer than the bytes
        end = body.find(b"\r\n", position)
        if end < 0:
            return data, False
        try:
            size = int(body[position:end].split(b";")[0].strip() or b"x", 16)
        except ValueError:
            raise NoAnswer("connection", "sent a broken chunked body")
        if size == 0:
            return data, True
        start = end + 2
        if len(body) < start + size + 2:
            return data, False
        data += body[start:start + size]
        position = start + size + 2


def _answer(data, ended):
    """(status, body) once data holds a whole answer (ended: the server closed the connection), else None."""
    status, headers, body = _split(data)
    if status is None:
        if ended:
            raise NoAnswer("connection", "got no answer: the connection closed before an HTTP answer came")
        return None
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body, complete = _dechunked(body)
    elif bounded_int(headers.get("content-length", "")) is not None:
        length = bounded_int(headers["content-length"])
        complete = len(body) >= length
        body = body[:length]
    else:
        complete = ended
    if not complete and ended:
        raise NoAnswer("connection", "got no whole answer: the connection closed in the middle of it (HTTP %d)"
                       % status)
    return (status, body) if complete else None


def exchange(url, method="GET", body=None, headers=(), timeout=10.0, clock=time.monotonic, limit=ANSWER_LIMIT):
    """(status, body bytes) of one HTTP/1.1 request to url, all of it within timeout seconds; NoAnswer when no
    whole answer came by then, or none at all, or one longer than limit bytes. headers: (name, value) pairs."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    deadline = clock() + timeout
    path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    payload = b"" if body is None else body
    head = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % parts.netloc, "User-Agent: blackwell.gpu_node",
            "Accept: application/json", "Connection: close"]
    if body is not None:
        head.append("Content-Length: %d" % len(payload))
    head += ["%s: %s" % pair for pair in headers]
    request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload
    connection = None
    try:
        connection = _connect(parts.hostname, port, deadline, clock)
        if parts.scheme == "https":
            # The server's own certificate is often self-signed; the probe proves it serves, not who it is.
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            connection.settimeout(_left(deadline, clock))
            connection = context.wrap_socket(connection, server_hostname=parts.hostname)
        connection.settimeout(_left(deadline, clock))
        connection.sendall(request)
        data = b""
        # Bounded: each pass reads at least a byte (or ends), within the deadline, up to limit bytes.
        while True:
            connection.settimeout(_left(deadline, clock))
            chunk = connection.recv(READ_SIZE)
            data += chunk
            answer = _answer(data, ended=not chunk)
            if answer is not None:
                return answer
            if len(data) >= limit:
                raise NoAnswer("connection", "sent an answer longer than %d bytes" % limit)
    except (socket.timeout, TimeoutError):
        raise NoAnswer("timeout", "gave no answer within %.1f s" % timeout)
    except ConnectionRefusedError:
        raise NoAnswer("refused", "was refused: nothing listens on %s" % parts.netloc)
    except socket.gaierror as exc:
        raise NoAnswer("connection", "got no answer: cannot resolve host %s (%s)"
                       % (parts.hostname, exc.strerror or exc))
    except (OSError, ssl.SSLError) as exc:
        raise NoAnswer("connection", "got no answer: %s"
                       % (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__))
    finally:
        if connection is not None:
            connection.close()


def _shown(text, mask):
    """text as a result shows it: one line, secrets masked, at most SHOWN_BYTES bytes."""
    return result_line(mask(printable_text(text)), SHOWN_BYTES)


def _unanswered(exc, what, mask):
    # Its words can quote what the server sent: masked and cut as that is.
    return _shown("%s %s" % (what, exc), mask)


def health(url, timeout, clock=time.monotonic, mask=masked_text):
    """GET url (the server's /health) within timeout seconds: {'status' (None without an answer), 'seconds',
    'reason' (None when it answered 200; else one of REASONS), 'problem' (None, or what happened in words)}."""
    start = clock()
    path = urlsplit(url).path or "/"
    try:
        status, _body = exchange(url, timeout=timeout, clock=clock)
    except NoAnswer as exc:
        return {"status": None, "seconds": round(clock() - start, 3), "reason": exc.reason,
                "problem": _unanswered(exc, path, mask)}
    return {"status": status, "seconds": round(clock() - start, 3), "reason": None if status == 200 else "http_status",
            "problem": None if status == 200 else "%s answered HTTP %d" % (path, status)}


def generate(url, timeout, api_key=None, prompt=PROMPT, max_new_tokens=MAX_NEW_TOKENS, clock=time.monotonic,
             mask=masked_text):
    """POST url (the server's /generate, SGLang's native endpoint) a short greedy request, within timeout seconds
    in all, with api_key as the bearer token when given. Serving means that it answered 200 with generated text (or
    counted at least one completion token: an end-of-sequence token comes back as no text).

    {'serving', 'status' (None without an answer), 'seconds', 'reason' (None when serving; else one of REASONS),
    'problem' (None, or what happened in words), 'text' (what was generated, masked and cut; None without it),
    'tokens' (the completion tokens SGLang counted, None when it did not say)}. ValueError when api_key holds a
    control character (it would end the header)."""
    if api_key and control_character_problem(api_key, "api_key"):
        raise ValueError("api_key holds a control character, which would end the request's header")
    start = clock()
    path = urlsplit(url).path or "/"
    what = "POST " + path
    shown = masked(mask, api_key)
    request = json.dumps({"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}})
    headers = [("Content-Type", "application/json")]
    if api_key:
        headers.append(("Authorization", "Bearer " + api_key))
    result = {"serving": False, "status": None, "seconds": None, "reason": None, "problem": None, "text": None,
              "tokens": None}
    try:
        status, body = exchange(url, "POST", request.encode("utf-8"), headers, timeout, clock)
    except NoAnswer as exc:
        result.update(seconds=round(clock() - start, 3), reason=exc.reason, problem=_unanswered(exc, what, shown))
        return result
    result.update(status=status, seconds=round(clock() - start, 3))
    answer_text = body.decode("utf-8", "replace")
    if status != 200:
        result.update(reason="http_status", problem="%s answered HTTP %d: %s" % (
            what, status, _shown(answer_text, shown) or "(no body)"))
        return result
    try:
        answer = json.loads(answer_text)
    except ValueError:
        answer = None
    if isinstance(answer, list) and answer:
        answer = answer[0]  # a batch's answer: the first request's
    text = answer.get("text") if isinstance(answer, dict) else None
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    tokens = meta.get("completion_tokens") if isinstance(meta, dict) else None
    result["tokens"] = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    if isinstance(text, str):
        result["text"] = _shown(text, shown)
    if isinstance(text, str) and (text or (result["tokens"] or 0) >= 1):
        result["serving"] = True
        return result
    result.update(reason="empty_text", problem="%s answered 200 without generated text: %s" % (
        what, _shown(answer_text, shown) or "(no body)"))
    return result


def masked(mask, api_key):
    """mask, and the API key masked too."""
    if not api_key:
        return mask

    def both(text):
        return masked_text(mask(text), values=(api_key,))
    return both


def serves(base_url, timeout, api_key=None, generate_text=True, health_timeout=HEALTH_TIMEOUT, clock=time.monotonic,
           mask=masked_text, **request):
    """Whether the server at base_url serves, within timeout seconds in all: GET /health (for at most
    health_timeout seconds and half of timeout), then, when it answered 200 and generate_text, one generate
    (generate()) with the time left. request: generate()'s prompt and max_new_tokens.

    {'serving', 'url', 'seconds', 'health' (health()'s result), 'generate' (generate()'s result; None when not
    asked), 'message' (one line: what /health said and what the generate did)}. Without generate_text, serving
    is /health's 200 alone."""
    start = clock()
    deadline = start + timeout
    base = base_url.rstrip("/")
    shown = masked(mask, api_key)
    found = {"serving": False, "url": base, "seconds": None, "health": None, "generate": None, "message": None}
    found["health"] = asked = health(base + "/health", min(health_timeout, timeout / 2.0) if generate_text else timeout,
                                     clock, shown)
    if asked["status"] != 200:
        found["message"] = asked["problem"]
    elif not generate_text:
        found["serving"] = True
        found["message"] = "/health answered 200 in %.1f s (no generate asked)" % asked["seconds"]
    else:
        said = "/health answered 200 in %.1f s" % asked["seconds"]
        left = max(deadline - clock(), 0.001)
        found["generate"] = made = generate(base + "/generate", left, api_key, clock=clock, mask=shown, **request)
        found["serving"] = made["serving"]
        if made["serving"]:
            tokens = " (%d tokens)" % made["tokens"] if made["tokens"] is not None else ""
            found["message"] = "%s and POST /generate returned %s%s in %s s" % (
                said, json.dumps(made["text"], ensure_ascii=False), tokens, round(made["seconds"], 1))
        else:
            found["message"] = "%s, but %s" % (said, made["problem"])
    found["seconds"] = round(clock() - start, 3)
    found["message"] = result_line(found["message"])
    return found
