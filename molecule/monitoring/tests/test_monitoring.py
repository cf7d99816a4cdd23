"""DCGM's host engine and the exporter run under systemd, the exporter as its own user; both metrics endpoints
answer; the controller's service-discovery file lists them, and its alert rules file has the role's groups."""
import json
import os

import yaml

testinfra_hosts = ["docker://monitoring"]
EXPORTER = "http://127.0.0.1:28240/metrics"
SERVER = "http://127.0.0.1:28245/metrics"


def fetch(host, url):
    return host.check_output("python3 -c \"import urllib.request as u; print(u.urlopen('%s').read().decode())\"" % url)


def test_dcgm_from_the_repository_runs_its_host_engine(host):
    assert host.package("datacenter-gpu-manager-4-cuda13").version == "1:4.4.1-1"
    service = host.service("nvidia-dcgm.service")
    assert service.is_running and service.is_enabled


def test_the_exporter_is_root_owned_and_runs_as_its_own_user(host):
    binary = host.file("/usr/local/bin/dcgm-exporter")
    assert (binary.user, binary.group, binary.mode) == ("root", "root", 0o755)
    service = host.service("dcgm-exporter.service")
    assert service.is_running and service.is_enabled
    pid = host.check_output("systemctl show --property=MainPID --value dcgm-exporter.service")
    assert host.check_output("ps -o user= -p " + pid) == "dcgm-exporter"
    counters = host.file("/etc/dcgm-exporter/counters.csv")
    assert (counters.user, counters.mode) == ("root", 0o644)


def test_systemd_reads_the_templated_unit_as_written(host):
    unit = host.file("/etc/systemd/system/dcgm-exporter.service")
    assert (unit.user, unit.group, unit.mode) == ("root", "root", 0o644)
    assert unit.content_string.startswith("# Written by blackwell.gpu_node.monitoring.\n[Unit]\n")
    shown = host.check_output("systemctl show --property=User,Group,ProtectHome,NoNewPrivileges,ProtectSystem,"
                              "Restart,NeedDaemonReload,ExecStart dcgm-exporter.service")
    properties = dict(line.split("=", 1) for line in shown.splitlines())
    assert (properties["User"], properties["Group"]) == ("dcgm-exporter", "dcgm-exporter")
    assert (properties["ProtectHome"], properties["NoNewPrivileges"], properties["ProtectSystem"]) == (
        "yes", "yes", "full")
    assert (properties["Restart"], properties["NeedDaemonReload"]) == ("always", "no")
    assert ("argv[]=/usr/local/bin/dcgm-exporter --collectors /etc/dcgm-exporter/counters.csv --address :28240 "
            "--remote-hostengine-info localhost:5555 ;") in properties["ExecStart"]


def test_the_exporter_serves_dcgm_health_metrics(host):
    metrics = fetch(host, EXPORTER)
    for field in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                  "DCGM_FI_DEV_GPU_TEMP"):
        assert field + "{gpu=\"0\"" in metrics


def test_the_server_serves_sglang_metrics(host):
    assert "--enable-metrics" in host.file("/etc/systemd/system/sglang-sglang.service").content_string
    assert "sglang:num_running_reqs{" in fetch(host, SERVER)


def test_the_service_discovery_file_lists_both_endpoints():
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "prometheus", "gpu_nodes.json")) as handle:
        groups = json.load(handle)
    assert groups == [
        {"targets": ["127.0.0.1:28245"], "labels": {"job": "sglang", "node": "monitoring"}},
        {"targets": ["127.0.0.1:28240"], "labels": {"job": "dcgm", "node": "monitoring"}},
    ]


def test_the_alert_rules_are_written_beside_it_for_the_exported_metrics(host):
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "prometheus", "gpu_nodes.rules.yml")) as handle:
        groups = yaml.safe_load(handle)["groups"]
    assert [group["name"] for group in groups] == ["gpu_node_gpu_health", "gpu_node_gpu_throttling", "gpu_node_sglang"]
    metrics = fetch(host, EXPORTER)
    for field in ("DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                  "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"):
        assert field + "{gpu=\"0\"" in metrics
    assert 'err_code="0",err_msg="No Error"} 0' in metrics
