# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""SGLang's model gateway (sglang-router 0.3.2, or its successor smg 1.13.0; how they differ is
releases.GATEWAYS): its settings, the fleet's workers and the plan that brings the running gateway's workers to them.

The gateway keeps its workers in memory only and changes them through its admin API: POST /workers (answered 202,
registered in the background once the worker's /health and /server_info answered), an update of one worker's
api_key and labels (sglang-router: PUT /workers/<id>; smg: PATCH, as its PUT replaces the whole worker), DELETE
/workers/<id> (a request already running on the worker ends normally, and it gets no new one; smg lists it as
draining until then, which is as good as gone here). GET /workers lists the registered workers only: one still being
registered, or one that never answers, is not listed. A worker's API key is never shown by the gateway, so each
worker carries a label with a digest of its URL and key (KEY_LABEL): a key that changed is seen without the key
being read back.

Health checks: the gateway checks every worker, those of POST /workers included, with its command line's settings
(--health-check-*, --health-*-threshold: the role's gateway_health_*). A per-worker health setting would take that
worker out of the command line's governance, so no request carries one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import hashlib
import json
import os
import re
import time
from urllib.parse import quote, urlsplit

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    path_kind,
    read_regular,
    trusted_directory,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import (
    control_character_problem,
    printable_text,
    result_line,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import releases

NODE_LABEL = "node"
KEY_LABEL = "blackwell_key_digest"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
# A worker's base URL, as the messages show one.
URL_EXAMPLE = "http://10.0.0.11:%d" % SERVER_PORT
# How long the gateway may take to answer one admin request, and what such an answer may weigh.
REQUEST_TIMEOUT = 10.0
LISTING_LIMIT = 4 << 20
POLL_INTERVAL = 0.25
# More workers than one gateway fronts in any fleet (each is a GPU node's server); a listing of more is not taken,
# so that what a result shows of it stays bounded.
WORKERS_LIMIT = 4096
# A number in the gateway's answers is a count, a port, a load or a cost: more characters than this is none of them,
# and int() of a long run of digits takes time that grows with the square of its length (past 4,300 digits it
# raises). JSON's grammar leaves only ASCII digits, a sign, a point and an exponent: the length is what is bounded.
NUMBER_CHARACTERS = 32
# How much of one text from the gateway (an id, a URL, a label, an error's body) a result shows.
SHOWN_BYTES = 300
# Both gateways name each worker they register by a UUID, written hyphenated (sglang-router 0.3.2: Uuid::new_v4;
# smg 1.13.0: Uuid::now_v7, worker/registry.rs, and it refuses a path id that is no UUID). An id of another shape
# did not come from the gateway, and is never put into a request's path, where `../` or `?` would send the admin
# key elsewhere.
WORKER_ID = re.compile(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")


def url_problem(url, variable):
    """Why url cannot be a worker's base URL (http or https, a host and a port that parse, no user, path, query
    or fragment), naming variable; None when it can."""
    problem = control_character_problem(url, variable)
    if problem:
        return problem
    if not isinstance(url, str) or not url:
        return "%s: give the worker's base URL, such as %s" % (variable, URL_EXAMPLE)
    try:
        parts = urlsplit(url)
        _port = parts.port  # one out of range raises ValueError
    except ValueError as exc:
        return "%s=%s is not a URL: %s" % (variable, url, exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "%s=%s is not an http:// or https:// URL with a host" % (variable, url)
    if parts.username is not None or parts.path.strip("/") or parts.query or parts.fragment:
        return ("%s=%s holds a user, a path, a query or a fragment: give the server's base URL, such as %s"
                % (variable, url, URL_EXAMPLE))
    return None


def normalized_url(url):
    """url as the gateway should get it and as two URLs are compared: scheme and host in lower case, the default
    port written out, no trailing slash (the gateway keeps a URL as given, and adds paths to it)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname.lower()
    return "%s://%s:%d" % (parts.scheme.lower(), "[%s]" % host if ":" in host else host, port)


def _port_problem(variable, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return "%s=%r is not a port (1 to 65535)" % (variable, value)
    return None


def _count_problem(variable, value, least):
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        return "%s=%r is not a whole number of at least %d" % (variable, value, least)
    return None


# The gateway's numeric settings: variable suffix -> the least value it takes.
COUNTS = (("health_check_interval", 1), ("health_check_timeout", 1), ("health_failure_threshold", 1),
          ("health_success_threshold", 1), ("retry_max_retries", 1), ("request_timeout", 1),
          ("worker_startup_timeout", 1), ("shutdown_grace_period", 0))


def settings_problems(settings, prefix="gateway_"):
    """Every problem of the gateway's settings, each naming its variable (prefix + key): host, port, metrics_host,
    metrics_port, policy (one the package's gateway runs, see releases.GATEWAYS), admin_key, api_key (None: clients
    need none), the COUNTS, and server_ports (variable -> port of every other listener on the gateway's host, which
    neither of the gateway's ports may take). package: a key of releases.GATEWAYS (default sglang-router)."""
    def name(key):
        return prefix + key
    problems = []
    for key in ("host", "metrics_host"):
        value = settings.get(key)
        if not isinstance(value, str) or not value.strip():
            problems.append("%s=%r: give the address to listen on, such as 127.0.0.1" % (name(key), value))
        else:
            problems.append(control_character_problem(value, name(key)))
    for key in ("port", "metrics_port"):
        problems.append(_port_problem(name(key), settings.get(key)))
    package = settings.get("package") or releases.DEFAULT_PACKAGE
    policies = releases.gateway(package)["policies"]
    if settings.get("policy") not in policies:
        problems.append("%s=%r is not a policy the role runs %s with: choose one of %s"
                        % (name("policy"), settings.get("policy"), package, ", ".join(policies)))
    admin_key = settings.get("admin_key")
    if not isinstance(admin_key, str) or not admin_key:
        problems.append("%s is not set: without it the gateway's admin API (its workers) is open to anyone who "
                        "reaches its port; set it (from a vault)" % name("admin_key"))
    elif ":" in admin_key or admin_key != admin_key.strip():
        problems.append("%s holds a colon or surrounding whitespace, which --control-plane-api-keys "
                        "(id:name:role:key) cannot carry: choose another key" % name("admin_key"))
    for key in ("admin_key", "api_key"):
        if isinstance(settings.get(key), str) and control_character_problem(settings[key], name(key)):
            problems.append("%s holds a control character: choose another key" % name(key))
    for key, least in COUNTS:
        problems.append(_count_problem(name(key), settings.get(key), least))
    ports = [(name("port"), settings.get("port")), (name("metrics_port"), settings.get("metrics_port"))]
    ports += sorted((settings.get("server_ports") or {}).items())
    seen = {}
    for variable, port in ports:
        if port in seen and port is not None:
            problems.append("%s and %s are both %s on this host: give the gateway ports no other listener of "
                            "the host takes" % (seen[port], variable, port))
        seen.setdefault(port, variable)
    return [problem for problem in problems if problem]


def key_digest(url, api_key):
    """The label that tells whether a registered worker has api_key (which the gateway never shows): a digest of
    the URL and the key, not the key. Empty for a worker without a key."""
    if not api_key:
        return ""
    text = "blackwell.gpu_node gateway worker\0%s\0%s" % (normalized_url(url), api_key)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def worker_problems(workers, variable="workers"):
    """Every problem of a worker list ([{name, url, api_key}]): URLs that are not http(s) base URLs, a URL or a
    name given twice. Each names the variable and the worker's place in it."""
    problems, urls, names = [], {}, {}
    if not isinstance(workers, list):
        return ["%s must be a list of workers ({name, url, api_key}), not %r" % (variable, type(workers).__name__)]
    for index, worker in enumerate(workers):
        where = "%s[%d]" % (variable, index)
        if not isinstance(worker, dict):
            problems.append("%s must be a mapping with name, url and api_key" % where)
            continue
        problem = url_problem(worker.get("url"), where + ".url")
        if problem:
            problems.append(problem)
        else:
            url = normalized_url(worker["url"])
            if url in urls:
                problems.append("%s.url=%s is the worker %s.url already: each worker once" % (where, url, urls[url]))
            urls.setdefault(url, where)
        name = worker.get("name")
        if name is not None:
            problems.append(control_character_problem(name, where + ".name"))
            if name in names:
                problems.append("%s.name=%s is the name of %s already: names tell workers apart" % (
                    where, name, names[name]))
            names.setdefault(name, where)
        api_key = worker.get("api_key")
        if api_key is not None and (not isinstance(api_key, str) or control_character_problem(api_key, "")):
            problems.append("%s.api_key is not one line of text" % where)
    return [problem for problem in problems if problem]


def _node_value(node, key, default=None):
    value = node.get(key)
    return default if value is None or value == "" else value


def fleet_workers(nodes, gateway_host):
    """(workers, problems) for nodes, as the gateway on the inventory host gateway_host reaches them. Each node is
    a mapping of its own settings, None or empty where unset: name (its inventory name), worker_url (its
    gateway_worker_url), server_host and server_port (its sglang_server_host and sglang_server_port), address (its
    ansible_host) and api_key (its sglang_server_api_key); the problems name those variables.

    A node's worker: worker_url when set; else http://ADDRESS:server_port, where ADDRESS is server_host when the
    server listens on one address, else the node's address or name. A server that listens on the loopback only is
    reached from a gateway on the same host alone. The key is api_key; the worker's name the node's."""
    workers, problems = [], []
    for node in nodes:
        hostname = node["name"]
        url = _node_value(node, "worker_url")
        if url is None:
            port = _node_value(node, "server_port", SERVER_PORT)
            port = int(port) if isinstance(port, str) and port.isdigit() else port
            listen = _node_value(node, "server_host", "127.0.0.1")
            if listen in LOOPBACK_HOSTS and hostname != gateway_host:
                problems.append("host %s: sglang_server_host=%s listens on the loopback only, which the gateway on "
                                "%s cannot reach: set sglang_server_host to an address of the node (or 0.0.0.0), "
                                "or gateway_worker_url" % (hostname, listen, gateway_host))
                continue
            address = listen if listen not in WILDCARD_HOSTS else _node_value(node, "address", hostname)
            if hostname == gateway_host and listen in WILDCARD_HOSTS + LOOPBACK_HOSTS:
                address = "127.0.0.1"
            if _port_problem("sglang_server_port", port):
                problems.append("host %s: %s" % (hostname, _port_problem("sglang_server_port", port)))
                continue
            url = "http://%s:%d" % ("[%s]" % address if ":" in address else address, port)
            variable = "host %s: the URL from sglang_server_host/ansible_host and sglang_server_port" % hostname
        else:
            variable = "host %s: gateway_worker_url" % hostname
        problem = url_problem(url, variable)
        if problem:
            problems.append(problem)
            continue
        api_key = _node_value(node, "api_key")
        workers.append({"name": hostname, "url": normalized_url(url), "api_key": api_key})
    problems += worker_problems(workers, "the workers from the inventory") if not problems else []
    return workers, problems


def registration(worker):
    """The body of POST /workers for worker ({name, url, api_key}): its URL, key and labels (its name, the key's
    digest). Labels become the registered worker's metadata."""
    url = normalized_url(worker["url"])
    labels = {KEY_LABEL: key_digest(url, worker.get("api_key"))}
    if worker.get("name"):
        labels[NODE_LABEL] = worker["name"]
    body = {"url": url, "labels": labels}
    if worker.get("api_key"):
        body["api_key"] = worker["api_key"]
    return body


def registered(listing, package=releases.DEFAULT_PACKAGE):
    """The workers of package's GET /workers answer (its parsed JSON): [{id, url (normalized), labels, healthy}],
    each value as the gateway gave it (shown() cleans what a result shows); a worker the gateway drains after its
    removal is left out, as it gets no new request. ValueError when the answer is not the gateway's listing (an
    entry whose labels are where another gateway lists them: the gateway is not package's), or lists more than
    WORKERS_LIMIT workers; its message quotes the entry whole, for the caller to mask before it is cut."""
    table = releases.gateway(package)
    others = set(entry["labels"] for entry in releases.GATEWAYS.values()) - set([table["labels"]])
    if not isinstance(listing, dict) or not isinstance(listing.get("workers"), list):
        raise ValueError("GET /workers did not answer with the gateway's worker list")
    if len(listing["workers"]) > WORKERS_LIMIT:
        raise ValueError("GET /workers listed %d workers, more than the %d one gateway fronts"
                         % (len(listing["workers"]), WORKERS_LIMIT))
    found = []
    for entry in listing["workers"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or url_problem(entry.get("url"), "url"):
            raise ValueError("GET /workers listed a worker without an id or a URL: %s" % json.dumps(entry))
        labels = entry.get(table["labels"])
        if not isinstance(labels, dict) and any(isinstance(entry.get(field), dict) for field in others):
            raise ValueError("GET /workers lists a worker's labels as another gateway than %s does (not in %r): "
                             "the gateway is not package=%s: %s"
                             % (package, table["labels"], package, json.dumps(entry)))
        if table["draining"] is not None and entry.get("status") == table["draining"]:
            continue
        found.append({"id": entry["id"], "url": normalized_url(entry["url"]),
                      "labels": labels if isinstance(labels, dict) else {}, "healthy": entry.get("is_healthy") is True})
    return found


def shown(value):
    """A value of the gateway's answer as a result shows it: one line of printable text, at most SHOWN_BYTES."""
    return result_line(value, SHOWN_BYTES)


def _node(entry, default=None):
    """The node label of a registered entry as a result shows it; default when it has none."""
    value = entry["labels"].get(NODE_LABEL)
    return default if value is None or value == "" else shown(value)


def id_problem(worker_id):
    """Why worker_id (from the gateway's listing) is not put into a request, naming it as a result may show it;
    None for an id of the shape the gateway gives."""
    if isinstance(worker_id, str) and WORKER_ID.fullmatch(worker_id):
        return None
    return ("the gateway lists a worker by the id %s, which is not of the shape the gateway gives its workers "
            "(a UUID): no request names it" % json.dumps(shown(worker_id)))


def id_problems(steps):
    """An id_problem for each worker that plan()'s steps would remove or update by an id not of the gateway's
    shape."""
    ids = [entry["id"] for entry in steps["remove"]] + [worker_id for worker_id, _body in steps["update"]]
    return [problem for problem in (id_problem(worker_id) for worker_id in ids) if problem]


def _matches(selector, worker):
    return selector in (worker.get("name"), worker["url"])


def out_problems(out, workers, variable="out"):
    """Each entry of out that names no worker of workers (by name or URL)."""
    known = [dict(worker, url=normalized_url(worker["url"])) for worker in workers]
    problems = []
    for selector in out:
        wanted = normalized_url(selector) if not url_problem(selector, variable) else selector
        if not any(_matches(wanted, worker) for worker in known):
            problems.append("%s: %s is the name or URL of no worker of workers" % (variable, selector))
    return problems


def plan(current, workers, out=(), exclusive=True):
    """What brings the registered workers (registered()'s list) to workers, with those named in out (by name or
    URL) taken out: {'add': [registration bodies], 'update': [(id, body)], 'remove': [registered entries],
    'keep': [registered entries], 'out': [URLs taken out]}. A registered worker that workers does not name is
    removed only when exclusive. A worker is updated when its key's digest or its node label differ."""
    by_url = dict((entry["url"], entry) for entry in current)
    selectors = [normalized_url(selector) if not url_problem(selector, "out") else selector for selector in out]
    wanted, outside = [], set()
    for worker in workers:
        body = registration(worker)
        if any(_matches(selector, dict(worker, url=body["url"])) for selector in selectors):
            outside.add(body["url"])
        else:
            wanted.append(body)
    steps = {"add": [], "update": [], "remove": [], "keep": [], "out": sorted(outside)}
    for body in wanted:
        entry = by_url.get(body["url"])
        if entry is None:
            steps["add"].append(body)
        elif any(entry["labels"].get(label) != value for label, value in body["labels"].items()):
            steps["update"].append((entry["id"], body))
        else:
            steps["keep"].append(entry)
    wanted_urls = set(body["url"] for body in wanted)
    steps["remove"] = [entry for entry in current
                       if entry["url"] in outside or (exclusive and entry["url"] not in wanted_urls)]
    return steps


def _worker_view(entry, names):
    name = names[entry["url"]] if entry["url"] in names else _node(entry)
    return {"id": shown(entry["id"]), "url": shown(entry["url"]), "name": name, "healthy": entry["healthy"]}


class GatewayError(Exception):
    """The gateway refused a request (status: its HTTP status) or gave no answer (status None); the message says
    which and why."""

    def __init__(self, message, status=None):
        super(GatewayError, self).__init__(message)
        self.status = status


def _number(kind):
    def parse(text):
        if len(text) > NUMBER_CHARACTERS:
            raise ValueError("a number of %d characters" % len(text))
        return kind(text)
    return parse


def parsed_answer(answer):
    """The JSON document of an answer's bytes (None for none), its numbers bounded; ValueError when it is not
    JSON, holds a number of more than NUMBER_CHARACTERS characters, or nests too deep for the parser."""
    if not answer:
        return None
    try:
        return json.loads(answer.decode("utf-8"), parse_int=_number(int), parse_float=_number(float))
    except RecursionError:
        raise ValueError("nested too deep")


# What a refusal's status means, where the gateway's own words do not say it.
HINTS = {
    401: " (the admin key is wrong or missing)",
    403: " (the admin key is wrong or missing)",
    409: (" (the gateway still holds a worker of this URL: one removed earlier is still ending its requests in "
          "flight; run again once they have ended)"),
}


class Gateway(object):
    """The admin API of one gateway, package's (a key of releases.GATEWAYS). exchange: a bounded HTTP request with
    serving.exchange's signature (url, method, body, headers, timeout, limit=...) -> (status, body bytes), each
    request within its own deadline and read up to limit bytes; it raises no_answer when no whole answer came.
    secrets: the workers' keys, masked with the admin key wherever the gateway's words are shown."""

    def __init__(self, base_url, admin_key, exchange, no_answer, timeout=REQUEST_TIMEOUT, secrets=(),
                 package=releases.DEFAULT_PACKAGE):
        self.base_url = base_url.rstrip("/")
        self.admin_key = admin_key
        self.exchange = exchange
        self.no_answer = no_answer
        self.timeout = timeout
        self.secrets = [value for value in [admin_key] + list(secrets) if value]
        self.package = package

    def quoted(self, text):
        """Text of the gateway's (an error's body, its words for a failed request) as a result shows it: terminal
        sequences and control characters removed first (so that none splits a key), every key masked, then one
        line cut to SHOWN_BYTES (a cut after the masking leaves no part of a key)."""
        return result_line(masked_text(printable_text(text), values=self.secrets), SHOWN_BYTES)

    def _ask(self, method, path, document=None, accepted=(200,)):
        headers = [("Content-Type", "application/json")]
        if self.admin_key:
            headers.append(("Authorization", "Bearer " + self.admin_key))
        body = None if document is None else json.dumps(document).encode("utf-8")
        what = "%s %s%s" % (method, self.base_url, path)
        try:
            status, answer = self.exchange(self.base_url + path, method, body, headers, self.timeout,
                                           limit=LISTING_LIMIT)
        except self.no_answer as exc:  # its message says why, and may quote the gateway
            raise GatewayError("%s %s" % (what, self.quoted(exc)))
        if status not in accepted:
            raise GatewayError("%s answered HTTP %d%s: %s" % (
                what, status, HINTS.get(status, ""), self.quoted(answer.decode("utf-8", "replace")) or "(no body)"),
                status)
        try:
            return parsed_answer(answer)
        except ValueError as exc:
            raise GatewayError("%s answered with something that is not JSON of the gateway's (%s)"
                               % (what, self.quoted(exc)))

    def workers(self):
        try:
            return registered(self._ask("GET", "/workers"), self.package)
        except ValueError as exc:
            raise GatewayError(self.quoted(exc))

    @staticmethod
    def worker_path(worker_id):
        """The path of one worker's requests. GatewayError (before anything is sent) for an id not of the
        gateway's shape; the id is quoted as one path segment all the same."""
        problem = id_problem(worker_id)
        if problem:
            raise GatewayError(problem)
        return "/workers/" + quote(worker_id, safe="")

    def add(self, body):
        return self._ask("POST", "/workers", body, accepted=(200, 201, 202))

    def update(self, worker_id, body):
        """A registered worker's api_key and labels set to body's (never its URL, which no update changes)."""
        changes = dict((key, body[key]) for key in ("api_key", "labels") if key in body)
        return self._ask(releases.gateway(self.package)["update"], self.worker_path(worker_id), changes,
                         accepted=(200, 202))

    def delete(self, worker_id):
        return self._ask("DELETE", self.worker_path(worker_id), accepted=(200, 202, 404))


def apply(gateway, steps, drain_wait=0, clock=time.monotonic, sleep=time.sleep):
    """Carries out plan()'s steps: removals first (a worker taken out gets no new request from then on), then
    additions and updates. An addition the gateway refuses as it still drains a worker of that URL (smg: HTTP 409,
    for a few seconds after a removal, or until the requests in flight end) is sent again until it is taken, for
    drain_wait seconds at most."""
    for entry in steps["remove"]:
        gateway.delete(entry["id"])
    for body in steps["add"]:
        deadline = clock() + drain_wait
        while True:
            try:
                gateway.add(body)
                break
            except GatewayError as exc:
                if exc.status != 409 or clock() >= deadline:
                    raise
            sleep(min(POLL_INTERVAL, max(deadline - clock(), 0)))
    for worker_id, body in steps["update"]:
        gateway.update(worker_id, body)


def wait_registered(gateway, urls, timeout, clock=time.monotonic, sleep=time.sleep):
    """Polls GET /workers until every URL of urls is listed and healthy, or timeout seconds passed. Returns
    (the last listing, the URLs still missing or unhealthy)."""
    deadline = clock() + timeout
    while True:
        listing = gateway.workers()
        healthy = set(entry["url"] for entry in listing if entry["healthy"])
        waiting = sorted(set(urls) - healthy)
        if not waiting or clock() >= deadline:
            return listing, waiting
        sleep(min(POLL_INTERVAL, max(deadline - clock(), 0)))


def describe(steps):
    """One line per change, as a result shows them (no key; what the gateway gave cleaned)."""
    lines = ["remove %s (%s)" % (shown(entry["url"]), _node(entry, "?")) for entry in steps["remove"]]
    lines += ["add %s (%s)" % (body["url"], body["labels"].get(NODE_LABEL, "?")) for body in steps["add"]]
    lines += ["update %s (%s): key or labels" % (body["url"], body["labels"].get(NODE_LABEL, "?"))
              for _id, body in steps["update"]]
    return lines


def diff_lines(before, steps, workers):
    """(before, after): the registered workers before the plan and once it is carried out, one `URL (name)` line
    each, for a diff (what the gateway gave cleaned)."""
    names = dict((normalized_url(worker["url"]), worker.get("name")) for worker in workers)
    listed = dict((entry["url"], names.get(entry["url"]) or _node(entry, "?")) for entry in before)
    removed = set(entry["url"] for entry in steps["remove"])
    after = dict((url, name) for url, name in listed.items() if url not in removed)
    after.update((body["url"], body["labels"].get(NODE_LABEL, "?")) for body in steps["add"])
    after.update((body["url"], body["labels"].get(NODE_LABEL, "?")) for _id, body in steps["update"])

    def text(found):
        return "".join("%s (%s)\n" % (shown(url), name) for url, name in sorted(found.items()))
    return text(listed), text(after)


def view(listing, workers):
    """The registered workers as a result shows them: id, url, name, healthy (never a key; what the gateway gave
    cleaned)."""
    names = dict((normalized_url(worker["url"]), worker.get("name")) for worker in workers)
    return [_worker_view(entry, names) for entry in listing]


def normalized_settings(settings):
    """settings with the ports and COUNTS that arrive as digits (from -e, or templated before ansible-core 2.19)
    as numbers."""
    found = dict(settings)
    for key in ["port", "metrics_port"] + [key for key, _least in COUNTS]:
        if isinstance(found.get(key), str) and found[key].isdigit():
            found[key] = int(found[key])
    found["server_ports"] = dict((variable, int(port) if isinstance(port, str) and port.isdigit() else port)
                                 for variable, port in (settings.get("server_ports") or {}).items())
    return found


# The workers file: what the launcher registers at every start (the gateway keeps workers in memory only), and
# the URLs it leaves out, so that a worker taken out for a drain stays out when the gateway restarts.
WORKERS_FILE_LIMIT = 4 << 20
# Where the gateway role keeps the workers file its launcher registers at start.
WORKERS_FILE = "/etc/blackwell-gpu-node/gateway/workers.json"


def gateway_options():
    """The options of both gateway modules that reach a gateway and name the fleet (an AnsibleModule argument_spec):
    its URL, package, admin key and request timeout, the fleet's workers and the workers file."""
    return dict(
        gateway_url=dict(type="str", default="http://127.0.0.1:30080"),
        package=dict(type="str", choices=sorted(releases.GATEWAYS)),
        admin_key=dict(type="str", no_log=True),
        workers=dict(type="list", elements="dict", default=[], options=dict(
            url=dict(type="str", required=True),
            name=dict(type="str"),
            api_key=dict(type="str", no_log=True),
        )),
        workers_file=dict(type="path", default=WORKERS_FILE),
        timeout=dict(type="float", default=REQUEST_TIMEOUT),
    )


def workers_document(data, path="workers_file"):
    """{'workers': [POST /workers bodies], 'out': [URLs], 'package': the gateway's (None in a file written before
    it was kept)} of a workers file's bytes. ValueError naming path when it is not such a file."""
    try:
        found = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise ValueError("%s is not JSON (%s)" % (path, exc))
    if (not isinstance(found, dict) or not isinstance(found.get("workers"), list)
            or not isinstance(found.get("out", []), list)
            or not all(isinstance(body, dict) and isinstance(body.get("url"), str) for body in found["workers"])
            or not all(isinstance(url, str) for url in found.get("out", []))
            or found.get("package") not in [None] + sorted(releases.GATEWAYS)):
        raise ValueError("%s does not hold {workers: [{url, ...}], out: [URL], package: %s}"
                         % (path, " or ".join(sorted(releases.GATEWAYS))))
    return {"workers": found["workers"], "out": found.get("out", []), "package": found.get("package")}


def kept_document(previous, workers, steps, exclusive, package=None):
    """The workers file after a plan's steps: with exclusive, exactly workers (those out included, so that putting
    one back needs no other list) and the URLs out; else previous with the named workers replaced or added and
    their out state set, every other entry kept. It records package, the gateway's (else the one previous
    recorded), for the runs that do not name it (the drain's)."""
    bodies = [registration(worker) for worker in workers]
    named = set(body["url"] for body in bodies)
    if exclusive or previous is None:
        kept_bodies, kept_out = [], set()
    else:
        kept_bodies = [body for body in previous["workers"] if normalized_url(body["url"]) not in named]
        kept_out = set(url for url in previous["out"] if url not in named)
    return {"workers": kept_bodies + bodies, "out": sorted(kept_out | set(steps["out"])),
            "package": package or (previous or {}).get("package")}


def package_of(option, document):
    """The gateway's package: the option when given, else the one the workers file (its document, or None)
    records, else sglang-router (what a file written before the package was recorded served)."""
    return option or (document or {}).get("package") or releases.DEFAULT_PACKAGE


def out_of(document):
    """The URLs a workers file keeps out (normalized)."""
    return sorted(set(normalized_url(url) for url in (document or {}).get("out", []) if not url_problem(url, "")))


# The workers file holds the workers' keys: root's, read by the gateway's group alone.
WORKERS_FILE_MODE = 0o640


class WorkersFile(object):
    """The workers file at path, read and written by root through its directory's descriptor: never through a
    link, never more than WORKERS_FILE_LIMIT bytes. Its directory must be root's at every level, writable by
    root alone (the role's configuration directory)."""

    def __init__(self, path, option="workers_file"):
        self.path = path
        self.option = option
        self.directory_path, self.name = os.path.split(path)

    def exists(self):
        """Whether its directory is there (no directory: no file is kept, such as for a gateway the role did not
        install)."""
        return path_kind(self.directory_path) == "directory"

    def read(self):
        """(document or None when there is no file, its {"uid", "gid", "mode"} or None). InvalidOption naming the
        option when it cannot be trusted or parsed."""
        if not self.exists():
            return None, None
        directory = trusted_directory(self.directory_path, self.option)
        try:
            found = read_regular(self.name, WORKERS_FILE_LIMIT, directory)
        except FileRefused as exc:
            raise InvalidOption("%s=%s: %s" % (self.option, self.path, exc))
        finally:
            os.close(directory)
        if found is None:
            return None, None
        try:
            document = workers_document(found["data"], "%s=%s" % (self.option, self.path))
        except ValueError as exc:
            raise InvalidOption("%s: remove it, and run the module with every worker (exclusive) to write it "
                                "anew" % exc)
        return document, dict((key, found[key]) for key in ("uid", "gid", "mode"))

    @staticmethod
    def written(owner, gid):
        """Whether a file of owner (read()'s) is as write() leaves it with group gid."""
        return owner == dict(uid=0, gid=gid, mode=WORKERS_FILE_MODE)

    def write(self, document, gid):
        """Replace the file with document, root's, mode WORKERS_FILE_MODE, group gid."""
        directory = trusted_directory(self.directory_path, self.option)
        try:
            write_atomically(directory, self.name, json.dumps(document, indent=2, sort_keys=True) + "\n",
                             WORKERS_FILE_MODE, owner=(0, gid))
        finally:
            os.close(directory)


def fleet_health(listing, workers, out):
    """What the gateway holds of the fleet: listing is registered()'s, workers the fleet ({name, url}), out the
    URLs kept out on purpose (the workers file's). {'healthy', 'unhealthy', 'missing', 'out', 'unexpected':
    `name (URL)` lines; 'problems': a worker of the fleet that is registered unhealthy, or not registered without
    being out}. What the gateway gave is cleaned."""
    def line(name, url):
        return "%s (%s)" % (name, shown(url)) if name else shown(url)
    by_url = dict((entry["url"], entry) for entry in listing)
    out = set(out)
    fleet = [(worker.get("name"), normalized_url(worker["url"])) for worker in workers]
    report = {"healthy": [], "unhealthy": [], "missing": [], "out": [], "unexpected": [], "problems": []}
    for name, url in fleet:
        entry = by_url.get(url)
        if url in out and entry is None:
            report["out"].append(line(name, url))
        elif entry is None:
            report["missing"].append(line(name, url))
            report["problems"].append("%s is not registered with the gateway, and not taken out on purpose: run the "
                                      "gateway role (or gateway_workers) to register it" % line(name, url))
        elif entry["healthy"]:
            report["healthy"].append(line(name, url))
        else:
            report["unhealthy"].append(line(name, url))
            report["problems"].append("%s is registered, but the gateway finds it unhealthy (its /health does not "
                                      "answer from the gateway's host, or its key is wrong): it gets no request"
                                      % line(name, url))
    fleet_urls = set(url for _name, url in fleet)
    report["unexpected"] = [line(_node(entry), entry["url"]) for entry in listing
                            if entry["url"] not in fleet_urls]
    return report
