"""The monitoring role's alert rules as the playbook prometheus_sd writes them: checked by Prometheus' own promtool
(check rules), unit-tested by it on synthetic series (tests/integration/alert_rules, one file per rule group), and
loaded with the service-discovery file by a real Prometheus on 127.0.0.1 that scrapes a dcgm-exporter stand-in; the
same Prometheus, reloadable, takes the rules the playbook reloads it into.

promtool and prometheus come from Debian's prometheus package, unpacked by tests/fixtures/prometheus/unpack.sh; a
machine where it cannot be had fails these tests rather than skipping them."""
import importlib.util
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from conftest import CHECKOUT, free_port, run_prometheus_sd
from process_tree import kill_tree, run_bounded

TESTS = CHECKOUT / "tests" / "integration" / "alert_rules"
GROUPS = ["gpu_node_gpu_health", "gpu_node_gpu_throttling", "gpu_node_sglang"]
ALERTS = {
    "gpu_node_gpu_health": ["GpuXidCritical", "GpuXidWarning", "GpuUncorrectableEccErrors", "GpuRowRemapFailure",
                            "GpuRowRemapPending", "GpuPcieReplays", "GpuNvlinkReplayOrRecoveryErrors",
                            "GpuNvlinkCrcErrors", "DcgmExporterDown"],
    "gpu_node_gpu_throttling": ["GpuThermalViolation", "GpuPowerViolation"],
    "gpu_node_sglang": ["SglangServerDown", "SglangQueueGrowing", "SglangTokenUsageHigh"],
}


@pytest.fixture(scope="module")
def prometheus_bin():
    """The directory of promtool and prometheus; fails the tests, naming what is missing, when they cannot be had."""
    done = run_bounded([str(CHECKOUT / "tests" / "fixtures" / "prometheus" / "unpack.sh")], timeout=300)
    assert done.returncode == 0, "promtool cannot be had:\n" + done.stderr
    return Path(done.stdout.strip()) / "bin"


def playbook(tmp, *options):
    """ansible-playbook prometheus_sd against INVENTORY; the completed process."""
    inventory = tmp / "hosts.ini"
    if not inventory.exists():
        inventory.write_text(INVENTORY % (free_port(), free_port()))
    return run_prometheus_sd(inventory, *options)


# gpu-1 serves both endpoints on 127.0.0.1 (SGLang's port, then the exporter's); gpu-2 neither.
INVENTORY = """
[gpu_nodes]
gpu-1 ansible_host=127.0.0.1 sglang_server_enable_metrics=true sglang_server_port=%d gpu_node_monitoring=true monitoring_exporter_port=%d
gpu-2 ansible_host=10.0.0.2

[gpu_nodes:vars]
ansible_connection=local
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The directory where prometheus_sd wrote sd.json and, at the default thresholds, alert_rules.yml."""
    tmp = tmp_path_factory.mktemp("prometheus")
    done = playbook(tmp, "-e", "gpu_node_prometheus_sd_file=%s" % (tmp / "sd.json"),
                    "-e", "monitoring_alert_rules_file=%s" % (tmp / "alert_rules.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    # Once for the play, on the controller, whatever the hosts.
    assert done.stdout.count("changed: [gpu-1 -> localhost]") == 2, done.stdout
    return tmp


def rules(path):
    return {group["name"]: {rule["alert"]: rule for rule in group["rules"]}
            for group in yaml.safe_load(path.read_text())["groups"]}


def test_promtool_checks_the_rules(prometheus_bin, written):
    done = run_bounded([str(prometheus_bin / "promtool"), "check", "rules", str(written / "alert_rules.yml")],
                       timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 14 rules found" in done.stdout
    assert oct((written / "alert_rules.yml").stat().st_mode & 0o777) == "0o644"


def test_each_group_has_the_alerts_and_a_promtool_test_file(written):
    assert {group: list(alerts) for group, alerts in rules(written / "alert_rules.yml").items()} == ALERTS
    assert sorted(path.stem for path in TESTS.glob("*.yml")) == sorted(GROUPS)


@pytest.mark.parametrize("group", GROUPS)
def test_each_alert_is_tested_firing_and_not_firing(group):
    cases = [case for test in yaml.safe_load((TESTS / (group + ".yml")).read_text())["tests"]
             for case in test["alert_rule_test"]]
    for alert in ALERTS[group]:
        expected = [case.get("exp_alerts") or [] for case in cases if case["alertname"] == alert]
        assert [] in expected, "%s is never tested not firing" % alert
        assert any(expected), "%s is never tested firing" % alert


def test_promtool_unit_tests_of_each_group_pass(prometheus_bin, written):
    for group in GROUPS:
        shutil.copy(TESTS / (group + ".yml"), written / ("test_%s.yml" % group))
    done = run_bounded([str(prometheus_bin / "promtool"), "test", "rules"]
                       + ["test_%s.yml" % group for group in GROUPS], timeout=120, cwd=str(written))
    print(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("SUCCESS") == len(GROUPS)


def test_the_thresholds_and_xids_of_the_inventory_are_the_rules(prometheus_bin, written):
    settings = written / "settings.json"
    settings.write_text(json.dumps({
        "monitoring_alert_rules_file": str(written / "other_rules.yml"),
        "monitoring_alert_xid_critical": [79, 48],
        "monitoring_alert_xid_warning": [],
        "monitoring_alert_pcie_replays_per_minute": 16,
        "monitoring_alert_nvlink_crc_errors_per_second": 50,
        "monitoring_alert_thermal_violation_ratio": 0,
        "monitoring_alert_power_violation_ratio": 0.8,
        "monitoring_alert_queue_requests": 100,
        "monitoring_alert_token_usage_ratio": 0.97,
    }))
    done = playbook(written, "-e", "@%s" % settings)
    assert done.returncode == 0, done.stdout + done.stderr
    other = rules(written / "other_rules.yml")
    health, throttling, sglang = (other[group] for group in GROUPS)
    assert health["GpuXidCritical"]["expr"] == "DCGM_FI_DEV_XID_ERRORS == 79 or DCGM_FI_DEV_XID_ERRORS == 48"
    assert "GpuXidWarning" not in health
    assert health["GpuPcieReplays"]["expr"] == "rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[5m]) * 60 > 16.0"
    assert health["GpuNvlinkCrcErrors"]["expr"].count(">= 50.0") == 2
    assert throttling["GpuThermalViolation"]["expr"] == "rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e9 > 0.0"
    assert throttling["GpuPowerViolation"]["expr"] == "rate(DCGM_FI_DEV_POWER_VIOLATION[5m]) / 1e9 > 0.8"
    assert sglang["SglangQueueGrowing"]["expr"] == (
        "sglang:num_queue_reqs > 100 and deriv(sglang:num_queue_reqs[10m]) > 0")
    assert sglang["SglangTokenUsageHigh"]["expr"] == "sglang:token_usage > 0.97"
    checked = run_bounded([str(prometheus_bin / "promtool"), "check", "rules", str(written / "other_rules.yml")],
                          timeout=60)
    assert checked.returncode == 0 and "SUCCESS: 13 rules found" in checked.stdout, checked.stdout + checked.stderr


def test_settings_out_of_range_are_refused_naming_their_variable_and_nothing_is_written(written):
    settings = written / "refused.json"
    settings.write_text(json.dumps({
        "monitoring_alert_rules_file": "relative/rules.yml",
        "monitoring_alert_xid_warning": [79, 94],
        "monitoring_alert_token_usage_ratio": 1.5,
        "monitoring_alert_queue_requests": -1,
    }))
    done = playbook(written, "-e", "@%s" % settings)
    assert done.returncode != 0
    out = " ".join(done.stdout.split())
    for says in ["monitoring_alert_rules_file=relative/rules.yml is not an absolute path on the controller",
                 "Xid 79 is in both monitoring_alert_xid_critical and monitoring_alert_xid_warning",
                 "monitoring_alert_token_usage_ratio=1.5 is no share of the KV cache",
                 "monitoring_alert_queue_requests=-1 is negative"]:
        assert says in out, out
    assert "The alert rules file was not written" in out
    assert not (written / "relative").exists()


def dcgm_standin_metrics(xid):
    """/metrics of the dcgm-exporter stand-in for the role's default counters, the GPU's last Xid xid."""
    spec = importlib.util.spec_from_file_location(
        "dcgm_exporter_standin", str(CHECKOUT / "tests" / "fixtures" / "dcgm_exporter" / "dcgm_exporter.py"))
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    defaults = yaml.safe_load((CHECKOUT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
    counters = [(counter["field"], counter["type"], counter["help"])
                for counter in defaults["monitoring_exporter_counters"]]
    return standin.metrics(counters, dict(standin.VALUES, DCGM_FI_DEV_XID_ERRORS=xid)).encode()


def serve(port, body):
    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def api(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/%s" % (port, path), timeout=5) as answer:
        return json.loads(answer.read())["data"]


def wait_for(what, probe, process, log, timeout=30):
    """probe()'s first truthy value within timeout seconds; AssertionError with Prometheus' log otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, "prometheus exited (%s):\n%s" % (process.returncode, log.read_text())
        try:
            value = probe()
        except (OSError, ValueError, KeyError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s: not within %ss. Prometheus' log:\n%s" % (what, timeout, log.read_text()))
        time.sleep(0.2)


@pytest.fixture(scope="module")
def prometheus(prometheus_bin, written):
    """A real Prometheus on 127.0.0.1, reloadable (--web.enable-lifecycle), for the module's tests: it scrapes the
    targets of written/sd.json and loads written/alert_rules.yml and each written/reload/*.yml, of which
    loaded.yml is empty to begin with. (its port, its process, its log)."""
    reload_rules = written / "reload"
    reload_rules.mkdir()
    (reload_rules / "loaded.yml").write_text("")
    port = free_port()
    config = written / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(written / "alert_rules.yml"), str(reload_rules / "*.yml")],
        "scrape_configs": [{"job_name": "gpu_nodes", "file_sd_configs": [{"files": [str(written / "sd.json")]}]}],
    }))
    log = written / "prometheus.log"
    with open(str(log), "wb") as output:
        process = subprocess.Popen(
            [str(prometheus_bin / "prometheus"), "--config.file=%s" % config, "--web.enable-lifecycle",
             "--storage.tsdb.path=%s" % (written / "data"), "--web.listen-address=127.0.0.1:%d" % port],
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for("Prometheus to answer", lambda: api(port, "rules") is not None, process, log)
        yield port, process, log
    finally:
        kill_tree(process.pid)
        process.wait(timeout=30)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "something still listens on Prometheus' port"


def groups_of(port, rules_file):
    """{group: [rule names]} that Prometheus has loaded from rules_file."""
    return {group["name"]: [rule["name"] for rule in group["rules"]]
            for group in api(port, "rules")["groups"] if group["file"] == str(rules_file)}


def test_a_real_prometheus_loads_the_service_discovery_file_and_the_rules(prometheus, written):
    """gpu-1's exporter (the stand-in, with Xid 79) answers; its SGLang server does not: Xid 79 fires at once, the
    server's alert is pending, and both carry the node label of the service-discovery file."""
    port, process, log = prometheus
    inventory = (written / "hosts.ini").read_text().split()
    sglang_port = int(next(word for word in inventory if word.startswith("sglang_server_port=")).split("=")[1])
    dcgm_port = int(next(word for word in inventory if word.startswith("monitoring_exporter_port=")).split("=")[1])
    exporter = serve(dcgm_port, dcgm_standin_metrics(79))
    try:
        def evaluated():
            groups = api(port, "rules")["groups"]
            if all(rule["health"] == "ok" for group in groups for rule in group["rules"]):
                return groups
            assert not [rule for group in groups for rule in group["rules"] if rule["health"] == "err"], groups
            return None

        wait_for("every rule evaluated without an error", evaluated, process, log)
        assert groups_of(port, written / "alert_rules.yml") == ALERTS
        targets = wait_for("the targets of the service-discovery file", lambda: {
            target["labels"]["job"]: (target["labels"]["node"], target["labels"]["instance"])
            for target in api(port, "targets")["activeTargets"]}, process, log)
        assert targets == {"sglang": ("gpu-1", "127.0.0.1:%d" % sglang_port),
                           "dcgm": ("gpu-1", "127.0.0.1:%d" % dcgm_port)}

        def alerts():
            found = {alert["labels"]["alertname"]: alert for alert in api(port, "alerts")["alerts"]}
            return found if {"GpuXidCritical", "SglangServerDown"} <= set(found) else None

        found = wait_for("GpuXidCritical and SglangServerDown", alerts, process, log)
        xid = found["GpuXidCritical"]
        assert xid["state"] == "firing"
        assert (xid["labels"]["node"], xid["labels"]["err_code"], xid["labels"]["severity"]) == (
            "gpu-1", "79", "critical")
        assert xid["annotations"]["summary"] == "GPU 0 of gpu-1 reported Xid 79"
        down = found["SglangServerDown"]
        assert down["state"] == "pending" and down["labels"]["node"] == "gpu-1"
        # The exporter answers; nothing else is wrong with the stand-in's healthy, idle GPU.
        assert set(found) == {"GpuXidCritical", "SglangServerDown"}
    finally:
        exporter.shutdown()
        exporter.server_close()


RELOAD_TASK = "Reload Prometheus, which reads rules only then"


def reload_into(written, port, rules_file, *options):
    """prometheus_sd writing rules_file and reloading the module's Prometheus; the completed process."""
    return playbook(written, "-e", "monitoring_alert_rules_file=%s" % rules_file,
                    "-e", "gpu_node_prometheus_reload_url=http://127.0.0.1:%d/-/reload" % port, *options)


def outcome(done, task):
    """What the run said of the task: changed, ok, skipping, fatal, ... (None where it did not run)."""
    lines = done.stdout.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("TASK [%s]" % task):
            return next((said.split(":")[0] for said in lines[number + 1:] if said.strip()), None)
    return None


def last_reload(port):
    """When Prometheus last loaded its configuration and rules, in whole seconds, from its own /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("prometheus_config_last_reload_success_timestamp_seconds "):
                return float(line.split()[1])
    raise AssertionError("Prometheus' /metrics has no prometheus_config_last_reload_success_timestamp_seconds")


def test_the_playbook_reloads_prometheus_into_the_rules_it_writes(prometheus, written):
    port, _process, _log = prometheus
    rules_file = written / "reload" / "loaded.yml"
    assert groups_of(port, rules_file) == {}, "Prometheus has the rules before the playbook wrote them"
    done = reload_into(written, port, rules_file)
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcome(done, RELOAD_TASK) == "changed", done.stdout
    # Prometheus answers the reload once it has loaded the rules.
    assert groups_of(port, rules_file) == ALERTS


def test_a_second_run_with_the_same_rules_does_not_reload(prometheus, written):
    port, _process, _log = prometheus
    rules_file = written / "reload" / "again.yml"
    first = reload_into(written, port, rules_file)
    assert first.returncode == 0, first.stdout + first.stderr
    assert outcome(first, RELOAD_TASK) == "changed", first.stdout
    reloaded = last_reload(port)
    time.sleep(1)  # the timestamp counts whole seconds
    second = reload_into(written, port, rules_file)
    assert second.returncode == 0, second.stdout + second.stderr
    assert outcome(second, RELOAD_TASK) == "skipping", second.stdout
    assert last_reload(port) == reloaded
    assert groups_of(port, rules_file) == ALERTS


def test_a_reload_prometheus_refuses_fails_the_run_with_its_answer(prometheus, written):
    """Another rules file of Prometheus' that it cannot load: it answers the reload 500, keeps the rules it had."""
    port, _process, log = prometheus
    broken, rules_file = written / "reload" / "broken.yml", written / "reload" / "refused.yml"
    broken.write_text("groups:\n  - name: broken\n    rules:\n      - alert: Broken\n        expr: rate(\n")
    try:
        done = reload_into(written, port, rules_file)
    finally:
        broken.unlink()
    assert done.returncode != 0
    assert outcome(done, RELOAD_TASK) == "changed", done.stdout
    out = " ".join(done.stdout.split())
    assert ("Prometheus did not reload at gpu_node_prometheus_reload_url=http://127.0.0.1:%d/-/reload: HTTP 500: "
            "failed to reload config: one or more errors occurred while applying the new configuration (" % port
            ) in out, out
    assert "Prometheus keeps the rules it had" in out, out
    # Its log names the file it could not load.
    assert str(broken) in log.read_text()
    assert rules_file.exists()
    assert groups_of(port, rules_file) == {}


@pytest.mark.parametrize("url", ["127.0.0.1:9090/-/reload", "http:///-/reload"])
def test_a_reload_url_that_is_no_http_url_is_refused_before_anything_is_written(written, url):
    sd_file, rules_file = written / "unwritten-sd.json", written / "unwritten-rules.yml"
    done = playbook(written, "-e", "gpu_node_prometheus_sd_file=%s" % sd_file,
                    "-e", "monitoring_alert_rules_file=%s" % rules_file, "-e", "gpu_node_prometheus_reload_url=" + url)
    assert done.returncode != 0
    out = " ".join(done.stdout.split())
    assert "gpu_node_prometheus_reload_url=%s is no http or https URL" % url in out, out
    assert "Nothing was written" in out
    assert not sd_file.exists() and not rules_file.exists()
