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
