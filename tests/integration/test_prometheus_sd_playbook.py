"""The playbook prometheus_sd, run for real on the controller with an inventory of three nodes."""
import json

from conftest import run_prometheus_sd

INVENTORY = """
[gpu_nodes]
gpu-1 ansible_host=10.0.0.1 sglang_server_enable_metrics=true gpu_node_monitoring=true
gpu-2 ansible_host=10.0.0.2 gpu_node_monitoring=true monitoring_exporter_port=9500
gpu-3 ansible_host=10.0.0.3

[gpu_nodes:vars]
ansible_connection=local
"""


def run(tmp_path, *options):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(INVENTORY)
    return run_prometheus_sd(inventory, *options)


def test_the_file_lists_every_nodes_endpoints_even_in_a_limited_run(tmp_path):
    sd_file = tmp_path / "gpu_nodes.json"
    completed = run(tmp_path, "-e", "gpu_node_prometheus_sd_file=%s" % sd_file, "--limit", "gpu-3")
    assert completed.returncode == 0, completed.stdout
    assert json.loads(sd_file.read_text()) == [
        {"targets": ["10.0.0.1:30000"], "labels": {"job": "sglang", "node": "gpu-1"}},
        {"targets": ["10.0.0.1:9400"], "labels": {"job": "dcgm", "node": "gpu-1"}},
        {"targets": ["10.0.0.2:9500"], "labels": {"job": "dcgm", "node": "gpu-2"}},
    ]
    assert oct(sd_file.stat().st_mode & 0o777) == "0o644"
    again = run(tmp_path, "-e", "gpu_node_prometheus_sd_file=%s" % sd_file)
    assert again.returncode == 0 and "changed=0" in again.stdout and "changed=1" not in again.stdout


def test_nothing_is_written_without_a_path(tmp_path):
    completed = run(tmp_path)
    assert completed.returncode == 0, completed.stdout
    assert list(tmp_path.iterdir()) == [tmp_path / "hosts.ini"]


def test_a_bad_address_is_refused_naming_the_host_and_variable(tmp_path):
    sd_file = tmp_path / "gpu_nodes.json"
    completed = run(tmp_path, "-e", "gpu_node_prometheus_sd_file=%s" % sd_file,
                    "-e", "gpu_node_metrics_address='10.0.0.1 10.0.0.2'")
    assert completed.returncode != 0
    assert "host gpu-1: gpu_node_metrics_address (or ansible_host)='10.0.0.1 10.0.0.2' is not an IP address" in (
        completed.stdout.replace("\n", " ")), completed.stdout
    assert not sd_file.exists()


def test_the_gateways_metrics_endpoint_is_listed_with_a_job_of_its_own(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(INVENTORY + "\n[gateway]\ngw-1 ansible_host=10.0.0.9 gateway_metrics_port=29100 "
                                     "ansible_connection=local\n")
    sd_file = tmp_path / "gpu_nodes.json"
    completed = run_prometheus_sd(inventory, "-e", "gpu_node_prometheus_sd_file=%s" % sd_file)
    assert completed.returncode == 0, completed.stdout
    listed = json.loads(sd_file.read_text())
    assert listed[-1] == {"targets": ["10.0.0.9:29100"], "labels": {"job": "sglang_gateway", "node": "gw-1"}}
    assert [group["labels"]["job"] for group in listed[:-1]] == ["sglang", "dcgm", "dcgm"]
