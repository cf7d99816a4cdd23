"""plugins/modules/gateway_workers.py: check mode, diff, a run against a stand-in of sglang-router 0.3.2's admin API
(or smg 1.13.0's) and the run after it, a worker kept out, the gateway's package recorded in the workers file for
the runs that do not name it, options refused by name, and a gateway whose answers are hostile (an id that would
leave /workers/, terminal sequences, an error that echoes the keys)."""
import json
import re

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.modules import gateway_workers as module

ADMIN_KEY = "adm-7c41e9"
GATEWAY = "http://127.0.0.1:30080"
FLEET = [{"name": "gpu01", "url": "http://10.0.0.11:30000", "api_key": "key-gpu01-5d2a"},
         {"name": "gpu02", "url": "http://10.0.0.12:30000", "api_key": "key-gpu02-88c1"}]
HOSTILE_ID = "../../shutdown?now=1"
# What no result may hold: a control character but the line end and the tab (terminal sequences start with one).
# A path the module may request: the list, or one worker by the id the gateway gave it (a UUID).
REQUEST_PATH = re.compile(r"/workers(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?\Z")


class StandIn(object):
    """sglang-router 0.3.2's admin API behind exchange(): GET and POST /workers, PUT and DELETE /workers/<id>, the
    admin key as bearer token; as smg 1.13.0's (package), labels listed as `labels` and updated by PATCH (PUT would
    replace the worker: 400). A worker it is given is listed healthy at once, by a UUID; also_listed: entries listed
    besides, as a hostile gateway lists them; error: (status, body) answered to every request."""

    def __init__(self, package="sglang-router"):
        self.labels, self.update = ("labels", "PATCH") if package == "smg" else ("metadata", "PUT")
        self.registered = {}
        self.also_listed = []
        self.error = None
        self.requests = []
        self.serial = 0

    def exchange(self, url, method, body, headers, timeout, limit):
        path = "/" + url.split("//", 1)[1].partition("/")[2]
        self.requests.append((method, path))
        if self.error:
            return self.error
        if ("Authorization", "Bearer " + ADMIN_KEY) not in headers:
            return 401, b"Missing or invalid Authorization header"
        if path == "/workers" and method == "GET":
            listed = [dict(entry, id=listed_id) for listed_id, entry in self.registered.items()]
            listed += self.also_listed
            return 200, json.dumps({"workers": listed, "total": len(listed)}).encode()
        document = json.loads(body) if body else None
        if path == "/workers" and method == "POST":
            self.serial += 1
            self.registered["00000000-0000-4000-8000-%012d" % self.serial] = {
                "url": document["url"], "is_healthy": True, self.labels: document["labels"]}
            return 202, b'{"status":"accepted"}'
        listed_id = path[len("/workers/"):]
        if listed_id not in self.registered:
            return 404, b'{"code":"WORKER_NOT_FOUND"}'
        if method == "DELETE":
            del self.registered[listed_id]
        elif method != self.update:
            return 400, b'{"error":"missing field `url`"}'
        else:
            self.registered[listed_id][self.labels] = document["labels"]
        return 202, b'{"status":"accepted"}'

    def urls(self):
        return sorted(entry["url"] for entry in self.registered.values())

    def changes_sent(self):
        return [request for request in self.requests if request[0] != "GET"]


@pytest.fixture
def gateway(monkeypatch):
    standin = StandIn()
    monkeypatch.setattr(module, "exchange", standin.exchange)
    return standin


NO_WORKERS_FILE = "/nonexistent-blackwell-gpu-node/gateway/workers.json"


def run(capsys, monkeypatch, check_mode=False, diff=False, **options):
    # A workers file in a directory that does not exist keeps none, on every core (ansible-core 2.15 refuses null for
    # a path).
    args = dict(gateway_url=GATEWAY, admin_key=ADMIN_KEY, workers=FLEET, workers_file=NO_WORKERS_FILE, wait_timeout=1,
                _ansible_check_mode=check_mode, _ansible_diff=diff)
    args.update(options)
    # How a module receives its arguments on every supported core, ansible-core 2.15 on Python 3.9 included.
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # ansible-core 2.19 decodes them by a named profile; older cores have none.
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    out = capsys.readouterr().out
    result = json.loads(out)
    result["_stdout"] = out
    return result


def test_check_mode_shows_the_plan_and_the_diff_and_sends_nothing(gateway, capsys, monkeypatch, tmp_path):
    kept = tmp_path / "workers.json"
    result = run(capsys, monkeypatch, check_mode=True, diff=True, workers_file=str(kept))
    assert result["changed"] is True and result.get("failed") is None
    assert result["changes"] == ["add http://10.0.0.11:30000 (gpu01)", "add http://10.0.0.12:30000 (gpu02)",
                                 "write %s (2 workers, out: none)" % kept]
    assert result["diff"] == {"before": "", "after": "http://10.0.0.11:30000 (gpu01)\nhttp://10.0.0.12:30000 (gpu02)\n"}
    assert gateway.requests == [("GET", "/workers")] and gateway.registered == {} and not kept.exists()


def test_a_run_brings_the_gateway_to_the_fleet_and_the_next_changes_nothing(gateway, capsys, monkeypatch):
    result = run(capsys, monkeypatch, diff=True)
    assert result["changed"] is True and result["waiting"] == []
    assert [request[0] for request in gateway.changes_sent()] == ["POST", "POST"]
    assert gateway.urls() == [worker["url"] for worker in FLEET]
    assert [(worker["name"], worker["healthy"]) for worker in result["workers"]] == [("gpu01", True), ("gpu02", True)]
    assert not any(worker["api_key"] in result["_stdout"] for worker in FLEET)

    gateway.requests = []
    again = run(capsys, monkeypatch, diff=True)
    assert (again["changed"], again["changes"]) == (False, [])
    assert again["diff"]["before"] == again["diff"]["after"] and gateway.requests == [("GET", "/workers")]


def test_a_changed_key_is_updated_in_place_by_the_workers_id(gateway, capsys, monkeypatch):
    run(capsys, monkeypatch)
    rotated = [FLEET[0], dict(FLEET[1], api_key="key-gpu02-new")]
    result = run(capsys, monkeypatch, workers=rotated)
    assert result["changes"] == ["update http://10.0.0.12:30000 (gpu02): key or labels"]
    assert gateway.changes_sent()[-1] == ("PUT", "/workers/00000000-0000-4000-8000-000000000002")


def test_a_worker_taken_out_stays_out_until_it_is_put_back(gateway, capsys, monkeypatch, tmp_path):
    kept = str(tmp_path / "workers.json")
    run(capsys, monkeypatch, workers_file=kept)
    taken = run(capsys, monkeypatch, workers_file=kept, out=["gpu02"])
    assert taken["changes"] == ["remove http://10.0.0.12:30000 (gpu02)",
                                "write %s (2 workers, out: http://10.0.0.12:30000)" % kept]
    assert gateway.changes_sent()[-1] == ("DELETE", "/workers/00000000-0000-4000-8000-000000000002")
    assert gateway.urls() == ["http://10.0.0.11:30000"]

    # The fleet's routine run, which names every worker and keeps out those the workers file keeps out.
    sent = len(gateway.changes_sent())
    routine = run(capsys, monkeypatch, workers_file=kept, keep_out=True)
    assert (routine["changed"], routine["changes"], routine["out"]) == (False, [], ["http://10.0.0.12:30000"])
    assert len(gateway.changes_sent()) == sent and gateway.urls() == ["http://10.0.0.11:30000"]
    assert run(capsys, monkeypatch, workers_file=kept, out=["gpu02"])["changed"] is False

    back = run(capsys, monkeypatch, workers_file=kept)
    assert back["changes"] == ["add http://10.0.0.12:30000 (gpu02)", "write %s (2 workers, out: none)" % kept]
    assert gateway.urls() == [worker["url"] for worker in FLEET]


def test_the_package_named_once_is_recorded_and_spoken_by_the_runs_that_do_not_name_it(capsys, monkeypatch, tmp_path):
    smg = StandIn("smg")
    monkeypatch.setattr(module, "exchange", smg.exchange)
    kept = tmp_path / "workers.json"
    first = run(capsys, monkeypatch, workers_file=str(kept), package="smg")
    assert first.get("failed") is None and json.loads(kept.read_text())["package"] == "smg"
    # A drain's run names no package: the file's is the one its requests speak (PATCH), and it stays recorded.
    rotated = [dict(FLEET[0], api_key="key-gpu01-new")]
    result = run(capsys, monkeypatch, workers_file=str(kept), workers=rotated, exclusive=False)
    assert result["changes"][0] == "update http://10.0.0.11:30000 (gpu01): key or labels"
    assert smg.changes_sent()[-1] == ("PATCH", "/workers/00000000-0000-4000-8000-000000000001")
    assert json.loads(kept.read_text())["package"] == "smg"


def test_a_gateway_that_is_not_the_package_named_is_refused_before_anything_changes(capsys, monkeypatch, tmp_path):
    smg = StandIn("smg")
    monkeypatch.setattr(module, "exchange", smg.exchange)
    run(capsys, monkeypatch, package="smg")
    kept = tmp_path / "workers.json"
    result = run(capsys, monkeypatch, workers_file=str(kept), package="sglang-router", workers=FLEET[:1])
    assert result["failed"] is True and "the gateway is not package=sglang-router" in result["msg"]
    assert not kept.exists() and len(smg.changes_sent()) == 2


@pytest.mark.parametrize("options, option", [
    ({"workers": [{"name": "gpu01", "url": "ftp://10.0.0.11:30000"}]}, "workers[0].url"),
    ({"workers": FLEET + [dict(FLEET[0], name="gpu03")]}, "workers[2].url"),
    ({"workers": [{"name": "gpu\x1b[2J", "url": "http://10.0.0.11:30000"}]}, "workers[0].name"),
    ({"out": ["gpu09"]}, "out: gpu09"),
    ({"gateway_url": GATEWAY + "/v1"}, "gateway_url"),
    ({"timeout": 0}, "timeout=0"),
    ({"wait_timeout": -1}, "wait_timeout=-1"),
    ({"workers_file_group": "blackwell-no-such-group"}, "workers_file_group=blackwell-no-such-group"),
])
def test_a_bad_option_is_refused_naming_it_and_nothing_is_sent(gateway, capsys, monkeypatch, options, option, control_text):
    result = run(capsys, monkeypatch, **options)
    assert result["failed"] is True and result["msg"].startswith("Nothing was changed: ") and option in result["msg"]
    # Ansible echoes the options given (invocation); the module's own words hold no control character.
    assert gateway.requests == [] and control_text(dict(result, invocation=None)) == []


def hostile_entries():
    return [{"id": HOSTILE_ID, "url": "http://10.0.0.99:30000", "is_healthy": True,
             "metadata": {"node": "evil\x1b[2J\x1b]0;owned\x07\r\nfake: line"}},
            {"id": "\x1b[31m00000000-0000-4000-8000-000000000077", "url": "http://10.0.0.98:30000",
             "is_healthy": False, "metadata": {"node": "\u009b1;1H" + "n" * 100000}}]


def test_an_id_from_a_hostile_listing_is_never_sent_and_the_run_changes_nothing(gateway, capsys, monkeypatch,
                                                                                tmp_path, control_text):
    gateway.also_listed = hostile_entries()
    kept = tmp_path / "workers.json"
    for check_mode in (True, False):
        result = run(capsys, monkeypatch, check_mode=check_mode, workers_file=str(kept))
        assert result["failed"] is True and result["msg"].startswith("Nothing was changed: ")
        assert json.dumps(HOSTILE_ID) in result["msg"] and len(result["problems"]) == 2
        assert "not of the shape the gateway gives its workers (a UUID)" in result["msg"]
        assert control_text(result) == [] and "remove http://10.0.0.99:30000 (evil fake: line)" in result["changes"]
    assert gateway.changes_sent() == [] and not kept.exists()


def test_a_hostile_listing_left_alone_is_shown_cleaned_and_bounded(gateway, capsys, monkeypatch, control_text):
    gateway.also_listed = hostile_entries()
    result = run(capsys, monkeypatch, exclusive=False, diff=True)
    assert result.get("failed") is None and result["changed"] is True and control_text(result) == []
    assert all(REQUEST_PATH.match(path) for _method, path in gateway.requests), gateway.requests
    shown = dict((worker["url"], worker) for worker in result["workers"])
    assert shown["http://10.0.0.99:30000"]["id"] == HOSTILE_ID
    assert shown["http://10.0.0.99:30000"]["name"] == "evil fake: line"
    assert shown["http://10.0.0.98:30000"]["id"] == "00000000-0000-4000-8000-000000000077"
    assert len(shown["http://10.0.0.98:30000"]["name"]) < 400 and "bytes cut" in shown["http://10.0.0.98:30000"]["name"]
    assert "http://10.0.0.99:30000 (evil fake: line)\n" in result["diff"]["before"]
    assert len(result["_stdout"]) < 20000


def test_an_error_body_is_shown_with_every_key_masked_and_cleaned(gateway, capsys, monkeypatch, control_text):
    echoed = "%s \\u0061%s %s \x1b[1m%s\x1b[0m" % (ADMIN_KEY, ADMIN_KEY[1:], FLEET[1]["api_key"], "x" * 10000)
    gateway.error = (500, json.dumps({"error": "refused: " + echoed}).encode())
    result = run(capsys, monkeypatch)
    assert result["failed"] is True and "answered HTTP 500" in result["msg"]
    for secret in (ADMIN_KEY, ADMIN_KEY[1:], FLEET[1]["api_key"]):
        assert secret not in result["_stdout"]
    assert control_text(result) == [] and len(result["msg"]) < 1000 and gateway.changes_sent() == []
