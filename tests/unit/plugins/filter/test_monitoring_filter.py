"""The monitoring filters: the monitoring core's functions as the monitoring role and the prometheus_sd playbook
call them; a refused inventory is an Ansible filter error, not a traceback."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.monitoring import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import monitoring as _monitoring

FILTERS = FilterModule().filters()
COUNTERS = [{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "GPU temperature (in C)."}]
SETTINGS = dict(exporter_src="/srv/dcgm-exporter", exporter_sha256="a" * 64, exporter_listen_address="",
                exporter_port=9400, exporter_user="dcgm-exporter", exporter_counters=COUNTERS)


def test_the_filters_are_registered():
    assert sorted(FILTERS) == ["monitoring_dcgm_plan", "monitoring_exporter_counters", "monitoring_exporter_unit",
                               "monitoring_problems", "prometheus_sd_targets"]


def test_the_problems_and_the_dcgm_plan():
    assert FILTERS["monitoring_problems"](SETTINGS) == []
    assert FILTERS["monitoring_problems"](dict(SETTINGS, exporter_port=0)) == [
        "monitoring_exporter_port=0 is not a TCP port: a whole number from 1 to 65535"]
    madison = ["datacenter-gpu-manager-4-cuda13 | 1:4.4.1-1 | file:/srv/cuda  Packages"]
    assert FILTERS["monitoring_dcgm_plan"](madison, "datacenter-gpu-manager-4-cuda13", "") == dict(
        version="1:4.4.1-1", problems=[])


def test_the_exporter_unit_values_and_counters_file_from_the_settings():
    assert FILTERS["monitoring_exporter_unit"](SETTINGS, "/usr/local/bin/dcgm-exporter", "/etc/dcgm/c.csv") == (
        _monitoring.exporter_unit_values(SETTINGS, "/usr/local/bin/dcgm-exporter", "/etc/dcgm/c.csv"))
    assert FILTERS["monitoring_exporter_counters"](COUNTERS) == _monitoring.counters_csv(COUNTERS)


def test_settings_the_unit_cannot_take_are_a_filter_error():
    with pytest.raises(AnsibleFilterError) as raised:
        FILTERS["monitoring_exporter_unit"](dict(SETTINGS, exporter_port=0), "/usr/local/bin/dcgm-exporter",
                                            "/etc/dcgm/c.csv")
    assert str(raised.value) == "monitoring_exporter_port=0 is not a TCP port: a whole number from 1 to 65535"


def test_the_scrape_targets_and_a_refused_inventory():
    node = {"name": "gpu-1", "address": "10.0.0.1", "monitoring": True}
    assert FILTERS["prometheus_sd_targets"]([node]) == [
        {"targets": ["10.0.0.1:9400"], "labels": {"job": "dcgm", "node": "gpu-1"}}]
    with pytest.raises(AnsibleFilterError) as raised:
        FILTERS["prometheus_sd_targets"]([dict(node, exporter_port=0)])
    assert str(raised.value) == ("host gpu-1: monitoring_exporter_port=0 is not a TCP port: a whole number from 1 "
                                 "to 65535; fix the inventory. The service-discovery file was not written")
