"""The monitoring role's alert rules read only metrics that the role and SGLang export, fire on the Xids that
gpu_health_info counts as unhealthy or degraded, and have each threshold declared once, in defaults/main.yml and
the entry point alert_rules of meta/argument_specs.yml. (promtool checks and unit-tests them in
tests/integration/test_alert_rules_promtool.py.)"""
import re
from pathlib import Path

import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_health import XID_FINDINGS

ROLE = Path(__file__).resolve().parents[2] / "roles" / "monitoring"
STANDIN = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "sglang_standin" / "sglang" / "launch_server.py"
TEMPLATE = (ROLE / "templates" / "alert_rules.yml.j2").read_text()
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SPECS = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def expressions():
    """The text of every expr of the template, its Ansible variables ([[ ]]) left in."""
    return re.findall(r"^ +expr: (?:>-\n)?((?:.+\n)+?)(?= +(?:for|labels):)", TEMPLATE, re.M)


def test_every_dcgm_field_of_the_rules_is_in_the_counters_the_role_configures():
    assert len(expressions()) == TEMPLATE.count("- alert: ") == 14
    fields = {counter["field"] for counter in DEFAULTS["monitoring_exporter_counters"]}
    used = {name for expr in expressions() for name in re.findall(r"DCGM_FI_\w+", expr)}
    assert used == {
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_POWER_VIOLATION"}
    assert used <= fields, used - fields


def test_every_sglang_metric_of_the_rules_is_one_sglang_serves():
    """The stand-in serves SGLang 0.5.9's names (sglang/srt/metrics/collector.py), labelled as SGLang does."""
    used = {name for expr in expressions() for name in re.findall(r"sglang:\w+", expr)}
    assert used == {"sglang:num_queue_reqs", "sglang:token_usage"}
    served = set(re.findall(r'\("(sglang:\w+)", "gauge"', STANDIN.read_text()))
    assert used <= served, used - served


def test_the_xids_are_those_gpu_health_info_counts_as_unhealthy_and_degraded():
    assert DEFAULTS["monitoring_alert_xid_critical"] == sorted(
        xid for xid, (severity, _action, _bucket) in XID_FINDINGS.items() if severity == "unhealthy")
    assert DEFAULTS["monitoring_alert_xid_warning"] == sorted(
        xid for xid, (severity, _action, _bucket) in XID_FINDINGS.items() if severity == "degraded")
    # What the application restarts from or NVIDIA ignores raises no alert.
    assert not {13, 31, 43, 45, 63, 92, 94} & set(DEFAULTS["monitoring_alert_xid_critical"]
                                                  + DEFAULTS["monitoring_alert_xid_warning"])


def test_each_setting_is_declared_once_with_its_default_and_used():
    options = SPECS["alert_rules"]["options"]
    declared = {name: value for name, value in DEFAULTS.items() if name.startswith("monitoring_alert_")}
    assert sorted(options) == sorted(declared)
    assert {name: option["default"] for name, option in options.items()} == declared
    assert not [name for name in SPECS["main"]["options"] if name.startswith("monitoring_alert_")]
    tasks = (ROLE / "tasks" / "alert_rules.yml").read_text()
    for name in declared:
        assert name in TEMPLATE or name == "monitoring_alert_rules_file", name
        assert name in tasks, name


def test_the_rules_leave_prometheus_templates_to_prometheus():
    """Ansible's variables are [[ ]] in the template (the task says so); every {{ }} is Prometheus' own."""
    assert set(re.findall(r"\[\[ (\w+)", TEMPLATE)) == {
        name for name in DEFAULTS if name.startswith("monitoring_alert_") and name != "monitoring_alert_rules_file"}
    assert all(part.strip().startswith(("$labels.", "$value")) for part in re.findall(r"{{(.*?)}}", TEMPLATE))
