"""The gateway's core: its settings, the fleet's workers from inventory, and the plan that brings the registered
workers to them, with a gateway stand-in that answers as sglang-router 0.3.2's or smg 1.13.0's admin API does."""
import json

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import errors
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import service
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import workers as core

SETTINGS = {"host": "127.0.0.1", "port": 30080, "metrics_host": "127.0.0.1", "metrics_port": 29000,
            "policy": "round_robin", "admin_key": "adm-1f3e", "api_key": None, "health_check_interval": 10,
            "health_check_timeout": 5, "health_failure_threshold": 3, "health_success_threshold": 2,
            "retry_max_retries": 3, "request_timeout": 1800, "worker_startup_timeout": 600,
            "shutdown_grace_period": 180, "server_ports": {}}


def problems_with(**changes):
    return core.settings_problems(dict(SETTINGS, **changes))


def test_good_settings_have_no_problem():
    assert core.settings_problems(SETTINGS) == []


@pytest.mark.parametrize("changes, variable", [
    ({"policy": "least_load"}, "gateway_policy"),
    ({"port": 0}, "gateway_port"),
    ({"metrics_port": "29000"}, "gateway_metrics_port"),
    ({"host": ""}, "gateway_host"),
    ({"metrics_host": "127.0.0.1\nExecStartPre=/bin/sh"}, "gateway_metrics_host"),
    ({"admin_key": None}, "gateway_admin_key"),
    ({"admin_key": "a:b"}, "gateway_admin_key"),
    ({"api_key": "k\n"}, "gateway_api_key"),
    ({"retry_max_retries": 0}, "gateway_retry_max_retries"),
    ({"health_check_interval": True}, "gateway_health_check_interval"),
])
def test_each_bad_setting_is_refused_naming_its_variable(changes, variable):
    found = problems_with(**changes)
    assert len(found) == 1 and found[0].startswith(variable), found


@pytest.mark.parametrize("package, good, bad", [("sglang-router", "cache_aware", "least_load"),
                                                ("smg", "least_load", "bucket")])
def test_each_gateway_takes_its_own_policies(package, good, bad):
    assert problems_with(package=package, policy=good) == []
    found = problems_with(package=package, policy=bad)
    assert len(found) == 1 and found[0].startswith("gateway_policy=%r is not a policy the role runs %s with: choose "
                                                   "one of random, round_robin" % (bad, package)), found


@pytest.mark.parametrize("package", ["sglang-router", "smg"])
def test_power_of_two_is_refused_as_neither_gateway_starts_it_without_workers_on_its_command_line(package):
    assert len(problems_with(package=package, policy="power_of_two")) == 1


def test_settings_without_a_package_are_sglang_routers():
    assert problems_with(policy="least_load") == problems_with(package="sglang-router", policy="least_load")


@pytest.mark.parametrize("changes, clash", [
    ({"metrics_port": 30080}, ("gateway_port", "gateway_metrics_port")),
    ({"server_ports": {"sglang_server_port": 30080}}, ("gateway_port", "sglang_server_port")),
    ({"server_ports": {"sglang_server_port": 29000}}, ("gateway_metrics_port", "sglang_server_port")),
])
def test_a_port_clash_on_the_host_is_refused_naming_both_variables(changes, clash):
    found = problems_with(**changes)
    assert len(found) == 1 and all(variable in found[0] for variable in clash), found


@pytest.mark.parametrize("url", ["ftp://10.0.0.1:30000", "10.0.0.1:30000", "http://user@h:1", "http://h:1/v1",
                                 "http://h:1?x=1", "http://h:99999", "", None, "http://h:1\n"])
def test_a_worker_url_must_be_an_http_base_url(url):
    found = core.worker_problems([{"name": "a", "url": url}], "gateway_workers")
    assert len(found) == 1 and found[0].startswith("gateway_workers[0].url"), found


def test_a_worker_given_twice_is_refused_whatever_its_spelling():
    found = core.worker_problems([{"name": "a", "url": "http://H:80/"}, {"name": "b", "url": "http://h"}], "w")
    assert found == ["w[1].url=http://h:80 is the worker w[0].url already: each worker once"]
    found = core.worker_problems([{"name": "a", "url": "http://h:1"}, {"name": "a", "url": "http://h:2"}], "w")
    assert len(found) == 1 and "w[1].name=a" in found[0]


def test_urls_are_compared_and_registered_in_one_form():
    assert core.normalized_url("HTTP://Node1/") == "http://node1:80"
    assert core.normalized_url("https://[::1]") == "https://[::1]:443"
    assert core.normalized_url("http://10.0.0.1:30000") == "http://10.0.0.1:30000"


NODES = {
    "gpu01": {"name": "gpu01", "server_host": "0.0.0.0", "address": "10.0.0.11", "api_key": "k1"},
    "gpu02": {"name": "gpu02", "server_host": "10.0.0.12", "server_port": "31000", "worker_url": ""},
    "gpu03": {"name": "gpu03", "worker_url": "https://gpu03.example:443/", "server_port": None},
    "local": {"name": "local"},
}


def test_the_fleets_workers_come_from_each_nodes_server_settings():
    workers, problems = core.fleet_workers([NODES["gpu01"], NODES["gpu02"], NODES["gpu03"]], "gw")
    assert problems == []
    assert workers == [{"name": "gpu01", "url": "http://10.0.0.11:30000", "api_key": "k1"},
                       {"name": "gpu02", "url": "http://10.0.0.12:31000", "api_key": None},
                       {"name": "gpu03", "url": "https://gpu03.example:443", "api_key": None}]


def test_a_node_listening_everywhere_without_an_address_is_reached_by_its_name():
    workers, problems = core.fleet_workers([{"name": "gpu04", "server_host": "::", "address": ""}], "gw")
    assert problems == [] and workers[0]["url"] == "http://gpu04:30000"


def test_a_server_on_the_loopback_is_a_worker_of_a_gateway_on_its_own_host_only():
    workers, problems = core.fleet_workers([NODES["local"]], "local")
    assert problems == [] and workers[0]["url"] == "http://127.0.0.1:30000"
    workers, problems = core.fleet_workers([NODES["local"]], "gw")
    assert workers == [] and len(problems) == 1 and "sglang_server_host=127.0.0.1" in problems[0]
    assert problems[0].startswith("host local")


def test_a_port_that_is_none_is_refused_naming_the_host_and_the_variable():
    workers, problems = core.fleet_workers([{"name": "gpu05", "server_host": "10.0.0.15", "server_port": 70000}],
                                           "gw")
    assert workers == [] and problems == ["host gpu05: sglang_server_port=70000 is not a port (1 to 65535)"]


def test_two_nodes_with_one_url_are_refused():
    nodes = [{"name": "a", "worker_url": "http://n:1"}, {"name": "b", "worker_url": "http://N:1/"}]
    _workers, problems = core.fleet_workers(nodes, "gw")
    assert len(problems) == 1 and "already" in problems[0]


def test_a_workers_labels_carry_its_name_and_a_digest_of_its_key_never_the_key():
    body = core.registration({"name": "gpu01", "url": "http://10.0.0.11:30000/", "api_key": "k1"})
    assert body["url"] == "http://10.0.0.11:30000" and body["api_key"] == "k1"
    assert body["labels"]["node"] == "gpu01" and "k1" not in json.dumps(body["labels"])
    other = core.registration({"name": "gpu01", "url": "http://10.0.0.11:30000", "api_key": "k2"})
    assert other["labels"][core.KEY_LABEL] != body["labels"][core.KEY_LABEL]
    assert "api_key" not in core.registration({"url": "http://h:1"})


def worker_id(serial):
    """The id the stand-in gives its serial-th worker: a UUID, as both gateways give (sglang-router 0.3.2 a v4,
    smg 1.13.0 a v7)."""
    return "00000000-0000-4000-8000-%012d" % serial


class FakeGateway(object):
    """sglang-router 0.3.2's or smg 1.13.0's admin API over exchange(), as each answered when run: registration is
    immediate for reachable URLs; an unreachable one is never listed, as the real gateway keeps it in its background
    job. sglang-router lists labels as `metadata`, updates by PUT (PATCH: 405) and drops a removed worker at once;
    smg lists `labels` and a `status`, updates by PATCH (PUT replaces the worker: 400 without its url), keeps a
    removed worker listed as draining until finish_draining(), and answers 409 to a URL it still holds."""

    def __init__(self, admin_key="adm", unreachable=(), package="sglang-router"):
        self.admin_key = admin_key
        self.unreachable = set(unreachable)
        self.package = package
        self.labels = "labels" if package == "smg" else "metadata"
        self.registered = {}
        self.requests = []
        self.serial = 0

    def finish_draining(self):
        self.registered = dict((listed_id, entry) for listed_id, entry in self.registered.items()
                               if entry.get("status") != "draining")

    def exchange(self, url, method, body, headers, timeout, limit):
        path = url.split("//", 1)[1].partition("/")[2]
        self.requests.append((method, "/" + path))
        if ("Authorization", "Bearer " + self.admin_key) not in headers:
            return 401, b"Missing or invalid Authorization header"
        document = json.loads(body) if body else None
        if method == "GET" and path == "workers":
            listed = [dict(entry, id=worker_id) for worker_id, entry in self.registered.items()]
            return 200, json.dumps({"workers": listed, "total": len(listed)}).encode()
        if method == "POST" and path == "workers":
            if self.package == "smg" and any(entry["url"] == document["url"] for entry in self.registered.values()):
                return 409, b'{"error":"Worker already exists at URL","code":"WORKER_ALREADY_EXISTS"}'
            if document["url"] not in self.unreachable:
                self.serial += 1
                entry = {"url": document["url"], "is_healthy": True, self.labels: document.get("labels", {})}
                if self.package == "smg":
                    entry["status"] = "ready"
                self.registered[worker_id(self.serial)] = entry
            return 202, b'{"status":"accepted"}'
        named = path.partition("/")[2]
        if named not in self.registered:
            return 404, b'{"code":"WORKER_NOT_FOUND"}'
        if method == "DELETE" and self.package == "smg":
            self.registered[named].update(status="draining", is_healthy=False)
        elif method == "DELETE":
            del self.registered[named]
        elif method != ("PATCH" if self.package == "smg" else "PUT"):
            return (400, b'{"error":"missing field `url`"}') if method == "PUT" else (405, b"")
        else:
            self.registered[named][self.labels].update(document["labels"])
        return 202, b'{"status":"accepted"}'


class Unanswered(Exception):
    pass


def gateway_of(fake, admin_key="adm"):
    return core.Gateway("http://127.0.0.1:30080/", admin_key, fake.exchange, Unanswered, package=fake.package)


PACKAGES = ["sglang-router", "smg"]


FLEET = [{"name": "gpu01", "url": "http://10.0.0.11:30000", "api_key": "k1"},
         {"name": "gpu02", "url": "http://10.0.0.12:30000", "api_key": "k2"}]


def converge(gateway, workers, out=(), exclusive=True):
    steps = core.plan(gateway.workers(), workers, out, exclusive)
    core.apply(gateway, steps)
    return steps


@pytest.mark.parametrize("package", PACKAGES)
def test_reconcile_adds_then_changes_nothing(package):
    fake = FakeGateway(package=package)
    gateway = gateway_of(fake)
    steps = converge(gateway, FLEET)
    assert [body["url"] for body in steps["add"]] == ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]
    again = core.plan(gateway.workers(), FLEET)
    assert again["add"] == again["update"] == again["remove"] == [] and len(again["keep"]) == 2
    assert core.describe(again) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_a_worker_left_out_of_the_list_is_removed_by_id_unless_not_exclusive(package):
    fake = FakeGateway(package=package)
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    assert core.plan(gateway.workers(), FLEET[:1], exclusive=False)["remove"] == []
    steps = converge(gateway, FLEET[:1])
    assert [entry["url"] for entry in steps["remove"]] == ["http://10.0.0.12:30000"]
    assert ("DELETE", "/workers/" + worker_id(2)) in fake.requests
    assert [entry["url"] for entry in gateway.workers()] == ["http://10.0.0.11:30000"]


@pytest.mark.parametrize("package, method", [("sglang-router", "PUT"), ("smg", "PATCH")])
def test_a_changed_key_is_updated_in_place(package, method):
    fake = FakeGateway(package=package)
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    rotated = [FLEET[0], dict(FLEET[1], api_key="k2-new")]
    steps = converge(gateway, rotated)
    assert fake.requests[-2:] == [("GET", "/workers"), (method, "/workers/" + worker_id(2))]
    assert [listed_id for listed_id, _body in steps["update"]] == [worker_id(2)] and steps["add"] == []
    assert steps["update"][0][1]["api_key"] == "k2-new"
    assert core.describe(steps) == ["update http://10.0.0.12:30000 (gpu02): key or labels"]
    assert core.plan(gateway.workers(), rotated)["update"] == []


@pytest.mark.parametrize("package", PACKAGES)
def test_a_worker_taken_out_is_removed_and_put_back_when_no_longer_out(package):
    fake = FakeGateway(package=package)
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    steps = converge(gateway, FLEET, out=["gpu02"])
    assert steps["out"] == ["http://10.0.0.12:30000"] and len(steps["remove"]) == 1
    # smg still lists it, draining its requests in flight: it gets no new request, so it counts as removed.
    assert core.plan(gateway.workers(), FLEET, out=["http://10.0.0.12:30000/"])["remove"] == []
    fake.finish_draining()
    steps = converge(gateway, FLEET)
    assert [body["url"] for body in steps["add"]] == ["http://10.0.0.12:30000"]


def test_the_update_sends_the_key_and_labels_only():
    sent = []

    def exchange(url, method, body, headers, timeout, limit):
        sent.append(json.loads(body))
        return 202, b"{}"
    gateway = core.Gateway("http://127.0.0.1:30080", "adm", exchange, Unanswered, package="smg")
    gateway.update(worker_id(1), core.registration(FLEET[0]))
    assert sorted(sent[0]) == ["api_key", "labels"]


def test_smg_lists_a_removed_worker_as_draining_which_counts_as_removed():
    fake = FakeGateway(package="smg")
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    converge(gateway, FLEET[:1])
    assert fake.registered[worker_id(2)]["status"] == "draining"
    assert [entry["url"] for entry in gateway.workers()] == [A_URL]
    assert core.describe(core.plan(gateway.workers(), FLEET[:1])) == []


def test_a_worker_smg_still_drains_is_added_back_once_drained_within_the_wait():
    fake = FakeGateway(package="smg")
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    converge(gateway, FLEET, out=["gpu02"])
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= 1.0:
            fake.finish_draining()
    core.apply(gateway, core.plan(gateway.workers(), FLEET), 5.0, clock=lambda: now[0], sleep=sleep)
    assert 1.0 <= now[0] < 1.0 + core.POLL_INTERVAL * 2
    assert sorted(entry["url"] for entry in gateway.workers()) == [A_URL, B_URL]
    assert [method for method, _path in fake.requests].count("POST") == 3 + int(1.0 / core.POLL_INTERVAL)


def test_a_worker_smg_drains_past_the_wait_fails_the_addition_saying_why():
    fake = FakeGateway(package="smg")
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    converge(gateway, FLEET, out=["gpu02"])
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
    with pytest.raises(core.GatewayError, match="HTTP 409 \\(the gateway still holds a worker of this URL: one "
                                                "removed earlier is still ending its requests in flight") as raised:
        core.apply(gateway, core.plan(gateway.workers(), FLEET), 2.0, clock=lambda: now[0], sleep=sleep)
    assert raised.value.status == 409 and 2.0 <= now[0] <= 2.0 + core.POLL_INTERVAL
    # Another refusal is not waited out.
    with pytest.raises(core.GatewayError) as refused:
        core.apply(gateway_of(fake, admin_key="wrong"), {"remove": [], "add": [core.registration(A)], "update": []},
                   2.0, clock=lambda: now[0], sleep=sleep)
    assert refused.value.status == 401 and now[0] <= 2.0 + core.POLL_INTERVAL


@pytest.mark.parametrize("package, other", [("sglang-router", "smg"), ("smg", "sglang-router")])
def test_a_listing_of_the_other_gateway_is_refused_naming_the_package(package, other):
    fake = FakeGateway(package=other)
    gateway_of(fake).add(core.registration(FLEET[0]))
    listing = json.loads(fake.exchange("http://g/workers", "GET", None, [("Authorization", "Bearer adm")], 1, 1)[1])
    assert core.registered(listing, other)[0]["labels"]["node"] == "gpu01"
    with pytest.raises(ValueError, match="lists a worker's labels as another gateway than %s does .*the gateway is "
                                         "not package=%s" % (package, package)):
        core.registered(listing, package)


def test_a_listing_entry_without_labels_has_none():
    assert core.registered({"workers": [{"id": worker_id(1), "url": A_URL}]}, "smg")[0]["labels"] == {}


def test_out_must_name_a_worker_of_the_list():
    assert core.out_problems(["gpu02", "HTTP://10.0.0.11:30000/"], FLEET) == []
    assert core.out_problems(["gpu09"], FLEET) == ["out: gpu09 is the name or URL of no worker of workers"]


def test_the_admin_key_is_sent_and_a_refusal_says_so():
    gateway = gateway_of(FakeGateway(), admin_key="wrong")
    with pytest.raises(core.GatewayError, match="HTTP 401 \\(the admin key is wrong or missing\\)"):
        gateway.workers()


def test_no_answer_is_a_gateway_error_naming_the_request():
    def silent(*_args, **_kwargs):
        raise Unanswered("gave no answer within 10.0 s")
    gateway = core.Gateway("http://127.0.0.1:30080", "adm", silent, Unanswered)
    with pytest.raises(core.GatewayError, match="GET http://127.0.0.1:30080/workers gave no answer"):
        gateway.workers()


def test_an_answer_that_is_no_worker_list_is_refused():
    with pytest.raises(ValueError):
        core.registered({"error": "x"})
    with pytest.raises(ValueError):
        core.registered({"workers": [{"url": "http://h:1"}]})


def test_waiting_ends_at_the_deadline_naming_the_workers_never_listed():
    fake = FakeGateway(unreachable=["http://10.0.0.12:30000"])
    gateway = gateway_of(fake)
    steps = converge(gateway, FLEET)
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
    listing, waiting = core.wait_registered(gateway, [body["url"] for body in steps["add"]], 2.0,
                                            clock=lambda: now[0], sleep=sleep)
    assert waiting == ["http://10.0.0.12:30000"] and [entry["url"] for entry in listing] == ["http://10.0.0.11:30000"]
    assert 2.0 <= now[0] <= 2.0 + core.POLL_INTERVAL


def test_the_diff_shows_urls_and_names_never_keys():
    fake = FakeGateway()
    gateway = gateway_of(fake)
    converge(gateway, FLEET[:1])
    before = gateway.workers()
    shown_before, shown_after = core.diff_lines(before, core.plan(before, FLEET, out=["gpu01"]), FLEET)
    assert shown_before == "http://10.0.0.11:30000 (gpu01)\n"
    assert shown_after == "http://10.0.0.12:30000 (gpu02)\n"
    assert "k1" not in shown_before + shown_after


@pytest.mark.parametrize("package, module", [("sglang-router", "sglang_router.launch_router"),
                                             ("smg", "smg.launch_router")])
def test_the_units_command_runs_the_launcher_with_the_gateways_flags_and_no_key(package, module):
    settings = core.normalized_settings(dict(SETTINGS, port="30080", log_level="warn", package=package))
    argv = service.launcher_argv(settings, "/opt/gw/bin/python", "/etc/gw/gateway_launch.py", "/etc/gw/secrets.json",
                                 "/etc/gw/workers.json")
    text = service.unit_text(argv, "sglang-gateway", settings["shutdown_grace_period"])
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_start.startswith("ExecStart=/opt/gw/bin/python -I /etc/gw/gateway_launch.py --secrets "
                                 "/etc/gw/secrets.json --workers /etc/gw/workers.json --gateway-module %s -- "
                                 "--host 127.0.0.1 --port 30080 --prometheus-host 127.0.0.1 --prometheus-port 29000 "
                                 "--policy round_robin --health-check-interval-secs 10 --health-check-timeout-secs 5 "
                                 "--health-failure-threshold 3 --health-success-threshold 2 --retry-max-retries 3 "
                                 "--request-timeout-secs 1800 --worker-startup-timeout-secs 600 "
                                 "--shutdown-grace-period-secs 180 " % module)
    assert "--policy round_robin" in exec_start and exec_start.endswith("--log-level warn")
    assert SETTINGS["admin_key"] not in text and "--worker-urls" not in text and "--log-dir" not in text
    assert "User=sglang-gateway\nGroup=sglang-gateway\n" in text
    assert "NoNewPrivileges=yes" in text and "ProtectHome=yes" in text and "TimeoutStopSec=195" in text


@pytest.mark.parametrize("title", [b"sglang::router", b"smg::router"])
def test_the_gateway_is_recognised_under_the_title_each_gateway_gives_it(tmp_path, title):
    proc = tmp_path / "proc" / "10"
    proc.mkdir(parents=True)
    (proc / "stat").write_text("10 (python) S 1 10 10 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0\n")
    (proc / "status").write_text("Uid:\t0\t0\t0\t0\n")
    (proc / "cmdline").write_bytes(title + b"\0")
    process = service.GatewayProcess(str(tmp_path / "state"))
    state = {"pid": 10, "start_time": 555, "argv": ["/opt/gw/bin/python", "-I", "launch"], "uid": 0}
    assert process.running(state, proc_root=str(tmp_path / "proc")) is True
    (proc / "cmdline").write_bytes(b"sshd\0")
    with pytest.raises(service.GatewayStateRefused, match="not the recorded gateway's command line"):
        process.running(state, proc_root=str(tmp_path / "proc"))


def kept(workers, out, previous=None, exclusive=True):
    current = []
    return core.kept_document(previous, workers, core.plan(current, workers, out, exclusive), exclusive)


def test_the_workers_file_keeps_every_worker_and_those_out():
    document = kept(FLEET, ["gpu02"])
    assert [body["url"] for body in document["workers"]] == ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]
    assert document["out"] == ["http://10.0.0.12:30000"]
    # Naming one worker only (not exclusive) keeps the others' entries, and its own out state is what is asked.
    back = kept(FLEET[1:], [], previous=document, exclusive=False)
    assert [body["labels"]["node"] for body in back["workers"]] == ["gpu01", "gpu02"] and back["out"] == []
    other = kept([{"name": "gpu03", "url": "http://10.0.0.13:30000"}], ["gpu03"], previous=document, exclusive=False)
    assert other["out"] == ["http://10.0.0.12:30000", "http://10.0.0.13:30000"] and len(other["workers"]) == 3


def test_the_workers_file_is_written_0640_through_its_directory_and_read_back(tmp_path):
    kept_file = core.WorkersFile(str(tmp_path / "workers.json"))
    assert kept_file.read() == (None, None)
    document = kept(FLEET, ["gpu02"])
    kept_file.write(document, 5)
    owner = dict(uid=0, gid=5, mode=0o640)
    assert kept_file.read() == (document, owner)
    assert oct((tmp_path / "workers.json").stat().st_mode & 0o777) == "0o640"
    assert kept_file.written(owner, 5) and not kept_file.written(owner, 6) and not kept_file.written(None, 5)
    (tmp_path / "workers.json").chmod(0o644)
    assert not kept_file.written(kept_file.read()[1], 5)
    assert core.out_of(document) == ["http://10.0.0.12:30000"]
    (tmp_path / "workers.json").unlink()
    (tmp_path / "workers.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(errors.InvalidOption, match="symbolic link"):
        kept_file.read()
    assert core.WorkersFile(str(tmp_path / "absent" / "workers.json")).exists() is False


def test_the_workers_file_records_the_gateways_package_for_the_runs_that_do_not_name_it():
    document = kept(FLEET, [], previous=None)
    assert document["package"] is None and core.package_of(None, document) == "sglang-router"
    named = core.kept_document(None, FLEET, core.plan([], FLEET), True, "smg")
    assert named["package"] == "smg" and core.package_of(None, named) == "smg"
    # A drain names no package: the recorded one stays, and is the one its requests speak.
    drained = core.kept_document(named, FLEET[1:], core.plan([], FLEET[1:], ["gpu02"], False), False)
    assert drained["package"] == "smg" and core.package_of(None, drained) == "smg"
    assert core.package_of("sglang-router", drained) == "sglang-router"
    assert core.workers_document(json.dumps(named).encode()) == named
    # A file written before the package was recorded reads as one without it, and so compares equal.
    assert core.workers_document(b'{"workers": [], "out": []}') == {"workers": [], "out": [], "package": None}


@pytest.mark.parametrize("data", [b"[]", b"{", b'{"workers": [{"id": 1}]}', b'{"workers": [], "out": [1]}',
                                  b'{"workers": [], "package": "nginx"}'])
def test_a_workers_file_that_is_not_ours_is_refused_naming_it(data):
    with pytest.raises(ValueError, match="^workers_file=/w "):
        core.workers_document(data, "workers_file=/w")


def listed(url, healthy, node=None):
    return {"id": url[-5:], "url": url, "labels": {"node": node} if node else {}, "healthy": healthy}


def test_the_fleets_health_names_the_unhealthy_and_the_missing_but_not_those_out():
    fleet = FLEET + [{"name": "gpu03", "url": "http://10.0.0.13:30000"},
                     {"name": "gpu04", "url": "http://10.0.0.14:30000"}]
    listing = [listed("http://10.0.0.11:30000", True), listed("http://10.0.0.12:30000", False),
               listed("http://10.0.0.99:30000", True, "old")]
    report = core.fleet_health(listing, fleet, ["http://10.0.0.14:30000"])
    assert report["healthy"] == ["gpu01 (http://10.0.0.11:30000)"]
    assert report["unhealthy"] == ["gpu02 (http://10.0.0.12:30000)"]
    assert report["missing"] == ["gpu03 (http://10.0.0.13:30000)"]
    assert report["out"] == ["gpu04 (http://10.0.0.14:30000)"]
    assert report["unexpected"] == ["old (http://10.0.0.99:30000)"]
    assert [problem.split(" is ")[0] for problem in report["problems"]] == ["gpu02 (http://10.0.0.12:30000)",
                                                                            "gpu03 (http://10.0.0.13:30000)"]


A, B = FLEET
A_URL, B_URL = "http://10.0.0.11:30000", "http://10.0.0.12:30000"
STRANGER = {"name": "old", "url": "http://10.0.0.99:30000", "api_key": "k9"}


def registered_as(worker, serial, **labels):
    """The entry GET /workers lists for worker once registered (registration()'s labels, with labels changed)."""
    body = core.registration(worker)
    return {"id": worker_id(serial), "url": body["url"], "labels": dict(body["labels"], **labels), "healthy": True}


def summary(steps):
    return {"add": [body["url"] for body in steps["add"]],
            "update": [(listed_id, body["url"]) for listed_id, body in steps["update"]],
            "remove": [entry["url"] for entry in steps["remove"]], "keep": [entry["url"] for entry in steps["keep"]],
            "out": steps["out"]}


def expected(add=(), update=(), remove=(), keep=(), out=()):
    return {"add": list(add), "update": list(update), "remove": list(remove), "keep": list(keep), "out": list(out)}


# registered or not x wanted, out or unknown to workers x exclusive or not x key or labels changed: the steps.
TRANSITIONS = {
    "wanted, unregistered: added": (
        [], [A], [], True, expected(add=[A_URL])),
    "wanted, registered alike: kept": (
        [registered_as(A, 1)], [A], [], True, expected(keep=[A_URL])),
    "wanted, registered alike, not exclusive: kept": (
        [registered_as(A, 1)], [A], [], False, expected(keep=[A_URL])),
    "wanted, registered with another key: updated in place": (
        [registered_as(dict(A, api_key="k-old"), 1)], [A], [], True, expected(update=[(worker_id(1), A_URL)])),
    "wanted, registered under another name: updated in place": (
        [registered_as(dict(A, name="gpu-old"), 1)], [A], [], False, expected(update=[(worker_id(1), A_URL)])),
    "wanted, registered without its labels (by hand): updated in place": (
        [dict(registered_as(A, 1), labels={})], [A], [], True, expected(update=[(worker_id(1), A_URL)])),
    "wanted, registered with labels of its own besides ours: kept": (
        [registered_as(A, 1, zone="rack-3")], [A], [], True, expected(keep=[A_URL])),
    "wanted without a key, registered without one: kept": (
        [registered_as(dict(A, api_key=None), 1)], [dict(A, api_key=None)], [], True, expected(keep=[A_URL])),
    "wanted without a key, registered with one: updated in place": (
        [registered_as(A, 1)], [dict(A, api_key=None)], [], True, expected(update=[(worker_id(1), A_URL)])),
    "wanted, registered under another spelling of its URL: kept": (
        [dict(registered_as(A, 1), url=core.normalized_url("HTTP://10.0.0.11:30000/"))], [A], [], True,
        expected(keep=[A_URL])),
    "out, registered: removed, not added": (
        [registered_as(A, 1), registered_as(B, 2)], FLEET, ["gpu02"], True,
        expected(remove=[B_URL], keep=[A_URL], out=[B_URL])),
    "out, already unregistered: nothing to add": (
        [registered_as(A, 1)], FLEET, ["gpu02"], True, expected(keep=[A_URL], out=[B_URL])),
    "out, already unregistered, not exclusive: nothing to add": (
        [], FLEET, ["gpu02"], False, expected(add=[A_URL], out=[B_URL])),
    "out, registered with another key: removed, not updated": (
        [registered_as(dict(B, api_key="k-old"), 2)], [B], ["gpu02"], True, expected(remove=[B_URL], out=[B_URL])),
    "out, registered, not exclusive: removed all the same": (
        [registered_as(B, 2)], [B], ["gpu02"], False, expected(remove=[B_URL], out=[B_URL])),
    "out by its URL in another spelling: removed": (
        [registered_as(B, 2)], FLEET, ["HTTP://10.0.0.12:30000/"], True, expected(add=[A_URL], remove=[B_URL],
                                                                                  out=[B_URL])),
    "every worker out, none registered: nothing at all": (
        [], FLEET, ["gpu01", "gpu02"], True, expected(out=[A_URL, B_URL])),
    "unknown, registered, exclusive: removed": (
        [registered_as(STRANGER, 9)], [A], [], True, expected(add=[A_URL], remove=[STRANGER["url"]])),
    "unknown, registered, not exclusive: left alone": (
        [registered_as(STRANGER, 9), registered_as(A, 1)], [A], [], False, expected(keep=[A_URL])),
    "no workers, exclusive: every registered one removed": (
        [registered_as(A, 1), registered_as(STRANGER, 9)], [], [], True, expected(remove=[A_URL, STRANGER["url"]])),
    "no workers, not exclusive: nothing": (
        [registered_as(A, 1)], [], [], False, expected()),
}


@pytest.mark.parametrize("name", sorted(TRANSITIONS))
def test_the_plan_of_each_transition(name):
    current, workers, out, exclusive, steps = TRANSITIONS[name]
    assert summary(core.plan(current, workers, out, exclusive)) == steps


def test_a_worker_out_and_unregistered_is_not_added_by_the_next_routine_run():
    # The run after a drain names the whole fleet again, with the drained node out: it stays out, unchanged.
    fake = FakeGateway()
    gateway = gateway_of(fake)
    converge(gateway, FLEET)
    converge(gateway, FLEET, out=["gpu02"])
    steps = converge(gateway, FLEET, out=["gpu02"])
    assert core.describe(steps) == [] and steps["add"] == [] and steps["out"] == [B_URL]
    assert [entry["url"] for entry in gateway.workers()] == [A_URL]
    assert [method for method, _path in fake.requests].count("POST") == 2


HOSTILE_ID = "../../shutdown?now=1"


@pytest.mark.parametrize("listed_id", [HOSTILE_ID, "", "id-1", worker_id(1) + "\n", worker_id(1) + "/x",
                                       worker_id(1).replace("-", "%2D"), "x" * 4096, "\x1b[31m" + worker_id(1)])
def test_an_id_not_of_the_gateways_shape_is_refused_naming_it_cleaned(listed_id):
    problem = core.id_problem(listed_id)
    assert problem and "not of the shape the gateway gives its workers (a UUID)" in problem
    assert "\x1b" not in problem and "\n" not in problem and len(problem.encode("utf-8")) < 600


def test_an_id_of_the_gateways_shape_is_sent_as_one_path_segment():
    assert core.id_problem(worker_id(1)) is None and core.id_problem("5B0C8E1E-7C1D-4C5E-9F39-2A0F3C7B2F10") is None
    assert core.Gateway.worker_path(worker_id(7)) == "/workers/" + worker_id(7)


def test_a_request_by_a_hostile_id_is_never_sent():
    fake = FakeGateway()
    gateway = gateway_of(fake)
    for request in (lambda: gateway.delete(HOSTILE_ID), lambda: gateway.update(HOSTILE_ID, {"url": A_URL})):
        with pytest.raises(core.GatewayError, match="no request names it"):
            request()
    assert fake.requests == []


def test_the_plans_requests_by_a_hostile_id_are_named_before_anything_is_sent():
    current = [dict(registered_as(STRANGER, 9), id=HOSTILE_ID),
               dict(registered_as(dict(A, api_key="old"), 1), id="id-1"), registered_as(B, 2)]
    steps = core.plan(current, FLEET)
    problems = core.id_problems(steps)
    assert len(problems) == 2 and json.dumps(HOSTILE_ID) in problems[0] and '"id-1"' in problems[1]
    # A worker left alone or kept as it is needs no request: its id, whatever it is, is only shown.
    assert core.id_problems(core.plan(current, FLEET, exclusive=False)) == [problems[1]]
    assert core.id_problems(core.plan(current[:1], [], exclusive=False)) == []


def hostile_listing():
    return {"workers": [
        {"id": "\x1b]0;owned\x07" + worker_id(1), "url": A_URL, "is_healthy": True,
         "metadata": {"node": "gpu\x1b[2J\x1b[31m01\r\nInjected: yes", core.KEY_LABEL: "x"}},
        {"id": HOSTILE_ID, "url": "http://10.0.0.99:30000", "is_healthy": False,
         "metadata": {"node": "\u009b31m" + "n" * 100000}},
    ], "total": 2}


def test_what_the_gateway_lists_reaches_every_view_cleaned_and_bounded(control_text):
    listing = core.registered(hostile_listing())
    steps = core.plan(listing, FLEET[:1] + [dict(B, name=None)])
    shown = [core.view(listing, []), core.describe(steps), core.diff_lines(listing, steps, FLEET),
             core.fleet_health(listing, FLEET, [])]
    assert not control_text(shown), shown
    view = core.view(listing, [])
    assert view[0]["id"] == "0" * 8 + worker_id(1)[8:] and view[0]["name"] == "gpu01 Injected: yes"
    assert view[1]["id"] == HOSTILE_ID and len(view[1]["name"].encode("utf-8")) < core.SHOWN_BYTES + 40
    unexpected = core.fleet_health(listing, FLEET, [])["unexpected"]
    assert unexpected[0].startswith("nnn") and unexpected[0].endswith("bytes cut] (http://10.0.0.99:30000)")
    assert max(len(line) for line in core.describe(steps)) < core.SHOWN_BYTES + 100


def test_a_listing_of_too_many_workers_is_refused():
    entry = {"id": worker_id(1), "url": A_URL}
    assert len(core.registered({"workers": [entry] * core.WORKERS_LIMIT})) == core.WORKERS_LIMIT
    too_many = "listed %d workers, more than the %d" % (core.WORKERS_LIMIT + 1, core.WORKERS_LIMIT)
    with pytest.raises(ValueError, match=too_many):
        core.registered({"workers": [entry] * (core.WORKERS_LIMIT + 1)})


class Answering(object):
    """An exchange() that answers every request with one status and body."""

    def __init__(self, status, body):
        self.status, self.body, self.requests = status, body, []

    def __call__(self, url, method, body, headers, timeout, limit):
        self.requests.append((method, url))
        return self.status, self.body


@pytest.mark.parametrize("body", [b'{"workers": [], "total": ' + b"9" * 5000 + b"}", b"[" * 100000,
                                  b'{"workers": [], "load": 1' + b"0" * 40 + b".5}", b"\xff\xfe"])
def test_an_answer_with_an_unbounded_number_or_nesting_is_not_json_of_the_gateways(body):
    gateway = core.Gateway("http://127.0.0.1:30080", "adm", Answering(200, body), Unanswered)
    with pytest.raises(core.GatewayError, match="not JSON of the gateway's"):
        gateway.workers()


def test_numbers_of_a_plain_size_are_read():
    answer = core.parsed_answer(b'{"total": 2, "load": 0.25, "port": 30000}')
    assert answer == {"total": 2, "load": 0.25, "port": 30000}
    assert core.parsed_answer(b"") is None


ADMIN_KEY = "adm-7c41e9"


@pytest.mark.parametrize("status", [500, 401])
def test_an_error_body_is_shown_masked_cleaned_and_cut(status, control_text):
    body = ("bad key %s for %s; worker key k2 of http://10.0.0.12:30000, split ad\x1b[0mm-7c41e9;\r\n%s"
            % (ADMIN_KEY, ADMIN_KEY, "x" * 100000)).encode()
    gateway = core.Gateway("http://127.0.0.1:30080", ADMIN_KEY, Answering(status, body), Unanswered,
                           secrets=["k2", None])
    with pytest.raises(core.GatewayError) as raised:
        gateway.workers()
    message = str(raised.value)
    assert ADMIN_KEY not in message and " k2 " not in message and "m-7c41e9" not in message
    assert "********" in message and not control_text(message) and len(message.encode("utf-8")) < 500
    assert message.startswith("GET http://127.0.0.1:30080/workers answered HTTP %d" % status)


def test_an_error_body_that_echoes_the_admin_key_json_escaped_is_masked():
    escaped = json.dumps({"error": "key \\u0061" + ADMIN_KEY[1:] + " refused"})
    gateway = core.Gateway("http://127.0.0.1:30080", ADMIN_KEY, Answering(403, escaped.encode()), Unanswered)
    with pytest.raises(core.GatewayError) as raised:
        gateway.workers()
    assert ADMIN_KEY[1:] not in str(raised.value) and "refused" in str(raised.value)


def test_a_listing_refused_for_its_entry_shows_the_entry_masked(control_text):
    listing = json.dumps({"workers": [{"id": worker_id(1), "url": "ftp://x", "note": ADMIN_KEY + "\x1b[1m"}]})
    gateway = core.Gateway("http://127.0.0.1:30080", ADMIN_KEY, Answering(200, listing.encode()), Unanswered)
    with pytest.raises(core.GatewayError, match="without an id or a URL") as raised:
        gateway.workers()
    assert ADMIN_KEY not in str(raised.value) and not control_text(str(raised.value))
