"""The gateway_service module where systemd is not PID 1 (this container): it runs the real SGLang model gateway
(sglang-router 0.3.2, through the role's launcher) as a process of its own, with the same core that runs the SGLang
server there, recognises it again after sglang-router retitled it, restarts it and stops its process group."""
import json
import os

import pytest
from conftest import free_port, run_module
from process_tree import kill_tree
from test_gateway_workers_module import ADMIN_KEY, LAUNCHER, call, gateway_venv, listening, wait_until


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    root = tmp_path_factory.mktemp("gateway_service")
    (root / "secrets.json").write_text(json.dumps({"admin_key": ADMIN_KEY, "api_key": None}))
    port = free_port()
    options = dict(manager="auto", user="root", python=str(gateway_venv() / "bin" / "python"),
                   launcher=str(LAUNCHER), secrets_path=str(root / "secrets.json"),
                   workers_path=str(root / "workers.json"), state_dir=str(root / "state"),
                   log_path=str(root / "logs" / "gateway.log"), systemd_unit_dir=str(root / "units"),
                   port=port, metrics_port=free_port(), policy="round_robin", admin_key=ADMIN_KEY,
                   shutdown_grace_period=5)
    seen = {"options": options, "url": "http://127.0.0.1:%d" % port, "root": root, "pids": []}
    try:
        yield seen
    finally:
        run_module("gateway_service", run_timeout=60, state="stopped", **options)
        for pid in seen["pids"]:
            if alive(pid):
                kill_tree(pid)


def service(gateway, check_mode=False, module_name="gateway_service", **changes):
    result = run_module(module_name, check_mode=check_mode, run_timeout=120, **dict(gateway["options"], **changes))
    if result.get("pid"):
        gateway["pids"].append(result["pid"])
    return result


@pytest.mark.skipif(os.path.isdir("/run/systemd/system"), reason="systemd is PID 1 here: auto picks systemd")
def test_where_systemd_is_not_pid_1_the_module_runs_the_gateway_itself(gateway):
    checked = service(gateway, check_mode=True)
    assert checked["changed"] is True and checked["running"] is False and checked["actions"] == ["started"]
    result = service(gateway)
    assert result["changed"] is True and result["manager"] == "module", result
    assert "systemd is not PID 1" in result["manager_reason"]
    assert result["argv"][1:3] == ["-I", str(LAUNCHER)] and ADMIN_KEY not in json.dumps(result)
    wait_until(lambda: listening(gateway["url"]))
    # A missing workers file registers none; the gateway serves its admin API with the key from the secrets file.
    assert call(gateway["url"] + "/workers", key=ADMIN_KEY)[0] == 200
    state = json.loads((gateway["root"] / "state" / "sglang-gateway.json").read_text())
    assert state["pid"] == result["pid"] and state["argv"] == result["argv"]
    assert oct((gateway["root"] / "logs" / "gateway.log").stat().st_mode & 0o777) == "0o640"
    gateway["started"] = result["pid"]


def test_a_second_run_finds_the_retitled_gateway_and_changes_nothing(gateway):
    # sglang-router calls itself sglang::router once it runs: the recorded command line is no longer in /proc.
    wait_until(lambda: open("/proc/%d/cmdline" % gateway["started"], "rb").read().startswith(b"sglang::"))
    result = service(gateway)
    assert result["changed"] is False and result["actions"] == [], result
    assert result["pid"] == gateway["started"] and result["running"] is True
    for check_mode in (True, False):
        status = service(gateway, check_mode=check_mode, module_name="gateway_service_info")
        assert (status["changed"], status["running"], status["manager"]) == (False, True, "module"), status
        assert status["pid"] == gateway["started"] and status["argv"] == result["argv"], status


def test_its_log_and_state_files_get_their_modes_back_without_a_restart(gateway):
    log = gateway["root"] / "logs" / "gateway.log"
    state = gateway["root"] / "state" / "sglang-gateway.json"
    log.chmod(0o644)
    state.chmod(0o644)
    actions = ["set the mode of the log", "set the mode and owner of the state files sglang-gateway.json"]
    checked = service(gateway, check_mode=True)
    assert checked["changed"] is True and checked["actions"] == actions, checked
    assert (oct(log.stat().st_mode & 0o777), oct(state.stat().st_mode & 0o777)) == ("0o644", "0o644")
    result = service(gateway)
    assert result["changed"] is True and result["actions"] == actions, result
    assert result["pid"] == gateway["started"] and alive(gateway["started"])
    assert (oct(log.stat().st_mode & 0o777), oct(state.stat().st_mode & 0o777)) == ("0o640", "0o600")
    assert service(gateway)["changed"] is False


def test_a_changed_setting_restarts_it_and_a_restart_is_asked_for(gateway):
    result = service(gateway, policy="random")
    assert result["changed"] is True and result["actions"] == ["stopped pid %d" % gateway["started"], "started"]
    assert not alive(gateway["started"]) and result["pid"] != gateway["started"]
    assert "random" in result["argv"] and result["restart_reasons"] == ["its command line differs"]
    # The gateway holds its log open: a new log_path gets its lines from a new gateway only.
    moved_log = str(gateway["root"] / "logs" / "moved.log")
    moved = service(gateway, policy="random", log_path=moved_log)
    assert moved["actions"] == ["stopped pid %d" % result["pid"], "started"] and not alive(result["pid"])
    assert moved["restart_reasons"] == ["it logs to %s, not log_path=%s" % (gateway["options"]["log_path"], moved_log)]
    assert moved["log_path"] == moved_log and os.path.exists(moved_log)
    assert service(gateway, policy="random", log_path=moved_log)["changed"] is False
    restarted = service(gateway, policy="random", state="restarted")
    assert restarted["changed"] is True and restarted["pid"] != moved["pid"] and not alive(moved["pid"])
    wait_until(lambda: listening(gateway["url"]))
    gateway["started"] = restarted["pid"]


def test_bad_settings_are_refused_naming_the_variable_whatever_the_state(gateway):
    for module_name, state in (("gateway_service_info", {}), ("gateway_service", {"state": "stopped"})):
        result = service(gateway, module_name=module_name, admin_key="a:b", **state)
        assert result.get("failed") is True and "gateway_admin_key" in result["msg"], result
        assert "Nothing was changed" in result["msg"]
    refused = service(gateway, state="status")
    assert refused.get("failed") and "value of state must be one of" in refused["msg"], refused
    assert alive(gateway["started"])


def test_stopped_ends_its_process_group_and_forgets_it(gateway):
    result = service(gateway, state="stopped")
    assert result["changed"] is True and result["actions"] == ["stopped pid %d" % gateway["started"]]
    assert not alive(gateway["started"]) and not listening(gateway["url"])
    assert not (gateway["root"] / "state" / "sglang-gateway.json").exists()
    assert service(gateway, state="stopped")["changed"] is False
