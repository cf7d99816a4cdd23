# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""SGLang's model gateway (sglang-router 0.3.2): its settings, the fleet's workers and the plan that brings the
running gateway's workers to them.

The gateway keeps its workers in memory only and changes them through its admin API: POST /workers (answered 202,
registered in the background once the worker's /health and /server_info answered), PUT /workers/<id> (a new
api_key or labels), DELETE /workers/<id> (takes effect at once; a request already running on the worker ends
normally). GET /workers lists the registered workers only: one still being registered, or one that never answers,
is not listed. A worker's API key is never shown by the gateway, so each worker carries a label with a digest of
its URL and key (KEY_LABEL): a key that changed is seen without the key being read back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import hashlib
import json
import re
import time
from urllib.parse import urlsplit

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import HARDENING, systemd_quote
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

# `--policy` choices of sglang-router 0.3.2 (router_args.py; `bucket` is a prefill policy only).
POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "manual")
NODE_LABEL = "node"
KEY_LABEL = "blackwell_key_digest"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
# How long the gateway may take to answer one admin request, and what such an answer may weigh.
REQUEST_TIMEOUT = 10.0
LISTING_LIMIT = 4 << 20
POLL_INTERVAL = 0.25


def url_problem(url, variable):
    """Why url cannot be a worker's base URL (http or https, a host and a port that parse, no user, path, query
    or fragment), naming variable; None when it can."""
    problem = control_character_problem(url, variable)
    if problem:
        return problem
    if not isinstance(url, str) or not url:
        return "%s: give the worker's base URL, such as http://10.0.0.11:30000" % variable
    try:
        parts = urlsplit(url)
        _port = parts.port  # one out of range raises ValueError
    except ValueError as exc:
        return "%s=%s is not a URL: %s" % (variable, url, exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "%s=%s is not an http:// or https:// URL with a host" % (variable, url)
    if parts.username is not None or parts.path.strip("/") or parts.query or parts.fragment:
        return ("%s=%s holds a user, a path, a query or a fragment: give the server's base URL, such as "
                "http://10.0.0.11:30000" % (variable, url))
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
    metrics_port, policy, admin_key, api_key (None: clients need none), the COUNTS, and server_ports (variable ->
    port of every other listener on the gateway's host, which neither of the gateway's ports may take)."""
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
    if settings.get("policy") not in POLICIES:
        problems.append("%s=%r is not a policy sglang-router 0.3.2 knows: choose one of %s"
                        % (name("policy"), settings.get("policy"), ", ".join(POLICIES)))
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


def _host_value(variables, name, default=None):
    value = variables.get(name)
    return default if value is None or value == "" else value


def fleet_workers(hostnames, hostvars, gateway_host):
    """(workers, problems) for the nodes hostnames of the inventory, as the gateway on gateway_host reaches them.

    A node's worker: its gateway_worker_url when set; else http://ADDRESS:sglang_server_port, where ADDRESS is
    sglang_server_host when the server listens on one address, else the node's ansible_host or inventory name.
    A server that listens on the loopback only is reached from a gateway on the same host alone. The key is the
    node's sglang_server_api_key; the name its inventory name."""
    workers, problems = [], []
    for hostname in hostnames:
        variables = hostvars[hostname]
        url = _host_value(variables, "gateway_worker_url")
        if url is None:
            port = _host_value(variables, "sglang_server_port", 30000)
            port = int(port) if isinstance(port, str) and port.isdigit() else port
            listen = _host_value(variables, "sglang_server_host", "127.0.0.1")
            if listen in LOOPBACK_HOSTS and hostname != gateway_host:
                problems.append("host %s: sglang_server_host=%s listens on the loopback only, which the gateway on "
                                "%s cannot reach: set sglang_server_host to an address of the node (or 0.0.0.0), "
                                "or gateway_worker_url" % (hostname, listen, gateway_host))
                continue
            address = (listen if listen not in WILDCARD_HOSTS
                       else _host_value(variables, "ansible_host", hostname))
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
        api_key = _host_value(variables, "sglang_server_api_key")
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


def registered(listing):
    """The workers of a GET /workers answer (its parsed JSON): [{id, url (normalized), labels, healthy}].
    ValueError when the answer is not the gateway's listing."""
    if not isinstance(listing, dict) or not isinstance(listing.get("workers"), list):
        raise ValueError("GET /workers did not answer with the gateway's worker list")
    found = []
    for entry in listing["workers"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or url_problem(entry.get("url"), "url"):
            raise ValueError("GET /workers listed a worker without an id or a URL: %s" % json.dumps(entry)[:200])
        metadata = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        found.append({"id": entry["id"], "url": normalized_url(entry["url"]), "raw_url": entry["url"],
                      "labels": metadata, "healthy": entry.get("is_healthy") is True})
    return found


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
    'keep': [registered entries], 'out': [URLs taken out]}. A registered worker that workers does not name is removed only when
    exclusive. A worker is updated when its key's digest or its node label differ."""
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
    return {"id": entry["id"], "url": entry["url"], "name": names.get(entry["url"], entry["labels"].get(NODE_LABEL)),
            "healthy": entry["healthy"]}


class GatewayError(Exception):
    """The gateway refused a request or gave no answer; the message says which and why."""


class Gateway(object):
    """The admin API of one gateway. exchange: a bounded HTTP request with serving.exchange's signature (url,
    method, body, headers, timeout, limit=...) -> (status, body bytes), each request within its own deadline and
    read up to limit bytes; it raises no_answer when no whole answer came."""

    def __init__(self, base_url, admin_key, exchange, no_answer, timeout=REQUEST_TIMEOUT):
        self.base_url = base_url.rstrip("/")
        self.admin_key = admin_key
        self.exchange = exchange
        self.no_answer = no_answer
        self.timeout = timeout

    def _ask(self, method, path, document=None, accepted=(200,)):
        headers = [("Content-Type", "application/json")]
        if self.admin_key:
            headers.append(("Authorization", "Bearer " + self.admin_key))
        body = None if document is None else json.dumps(document).encode("utf-8")
        what = "%s %s%s" % (method, self.base_url, path)
        try:
            status, answer = self.exchange(self.base_url + path, method, body, headers, self.timeout,
                                           limit=LISTING_LIMIT)
        except self.no_answer as exc:  # its message says why
            raise GatewayError("%s %s" % (what, exc))
        if status not in accepted:
            hint = " (the admin key is wrong or missing)" if status in (401, 403) else ""
            raise GatewayError("%s answered HTTP %d%s: %s" % (
                what, status, hint, answer[:200].decode("utf-8", "replace")))
        try:
            return json.loads(answer.decode("utf-8")) if answer else None
        except ValueError:
            raise GatewayError("%s answered with something that is not JSON" % what)

    def workers(self):
        try:
            return registered(self._ask("GET", "/workers"))
        except ValueError as exc:
            raise GatewayError(str(exc))

    def add(self, body):
        return self._ask("POST", "/workers", body, accepted=(200, 201, 202))

    def update(self, worker_id, body):
        return self._ask("PUT", "/workers/" + worker_id, body, accepted=(200, 202))

    def delete(self, worker_id):
        return self._ask("DELETE", "/workers/" + worker_id, accepted=(200, 202, 404))


def apply(gateway, steps):
    """Carries out plan()'s steps: removals first (a worker taken out gets no new request from then on), then
    additions and updates."""
    for entry in steps["remove"]:
        gateway.delete(entry["id"])
    for body in steps["add"]:
        gateway.add(body)
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
    """One line per change, as a result shows them (no key)."""
    lines = ["remove %s (%s)" % (entry["url"], entry["labels"].get(NODE_LABEL) or "?") for entry in steps["remove"]]
    lines += ["add %s (%s)" % (body["url"], body["labels"].get(NODE_LABEL, "?")) for body in steps["add"]]
    lines += ["update %s (%s): key or labels" % (body["url"], body["labels"].get(NODE_LABEL, "?"))
              for _id, body in steps["update"]]
    return lines


def diff_lines(before, steps, workers):
    """(before, after): the registered workers before the plan and once it is carried out, one `URL (name)` line
    each, for a diff."""
    names = dict((normalized_url(worker["url"]), worker.get("name")) for worker in workers)
    shown = dict((entry["url"], names.get(entry["url"]) or entry["labels"].get(NODE_LABEL) or "?") for entry in before)
    removed = set(entry["url"] for entry in steps["remove"])
    after = dict((url, name) for url, name in shown.items() if url not in removed)
    after.update((body["url"], body["labels"].get(NODE_LABEL, "?")) for body in steps["add"])
    after.update((body["url"], body["labels"].get(NODE_LABEL, "?")) for _id, body in steps["update"])

    def text(found):
        return "".join("%s (%s)\n" % item for item in sorted(found.items()))
    return text(shown), text(after)


def view(listing, workers):
    """The registered workers as a result shows them: id, url, name, healthy (never a key)."""
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


# The gateway's flag for each setting; the keys are never among them (the launcher reads those from a file).
FLAGS = (("host", "--host"), ("port", "--port"), ("metrics_host", "--prometheus-host"),
         ("metrics_port", "--prometheus-port"), ("policy", "--policy"),
         ("health_check_interval", "--health-check-interval-secs"),
         ("health_check_timeout", "--health-check-timeout-secs"),
         ("health_failure_threshold", "--health-failure-threshold"),
         ("health_success_threshold", "--health-success-threshold"), ("retry_max_retries", "--retry-max-retries"),
         ("request_timeout", "--request-timeout-secs"), ("worker_startup_timeout", "--worker-startup-timeout-secs"),
         ("shutdown_grace_period", "--shutdown-grace-period-secs"))


def router_arguments(settings):
    """The gateway's own arguments for settings (checked by settings_problems): no --worker-urls (each worker is
    registered with its own key), no --log-dir (journald keeps the log), no key."""
    arguments = []
    for key, flag in FLAGS:
        arguments += [flag, str(settings[key])]
    return arguments + ["--log-level", settings.get("log_level") or "info"]


def unit_values(settings, python, launcher, secrets_path, workers_path):
    """The values the unit template places, each quoted for systemd: ExecStart runs the launcher with python in
    isolated mode (-I: no PYTHON* variable, no user site, not the script's directory on the path)."""
    argv = [python, "-I", launcher, "--secrets", secrets_path, "--workers", workers_path, "--"]
    argv += router_arguments(settings)
    return {"exec_start": " ".join(systemd_quote(word) for word in argv), "user": systemd_quote(settings["user"]),
            "hardening": list(HARDENING),
            # systemd stops it with SIGTERM; the gateway waits up to its grace period for requests in flight.
            "stop_timeout": int(settings["shutdown_grace_period"]) + 15}


def pip_sources(index_url, mirrors, offline, wheelhouse):
    """pip's options for where the pins come from: the wheelhouse alone when offline, else index_url with the
    longest matching prefix of mirrors (ml_stack_index_mirrors' form) replaced."""
    if offline:
        return ["--no-index", "--find-links", wheelhouse]
    matching = sorted((prefix for prefix in mirrors or {} if index_url.startswith(prefix)), key=len)
    if matching:
        index_url = mirrors[matching[-1]] + index_url[len(matching[-1]):]
    return ["--index-url", index_url]


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_pins(requirements_text, freeze_text):
    """The pins (name==version lines of requirements_text) that `pip freeze` output does not show installed."""
    installed = set()
    for line in freeze_text.splitlines():
        name, equals, version = line.strip().partition("==")
        if equals:
            installed.add((_canonical(name), version.strip()))
    missing = []
    for line in requirements_text.splitlines():
        name, equals, version = line.split("#")[0].strip().partition("==")
        if equals and (_canonical(name), version.strip()) not in installed:
            missing.append("%s==%s" % (name.strip(), version.strip()))
    return missing
