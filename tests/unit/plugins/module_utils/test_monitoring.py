from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import monitoring as core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import HARDENING

SHA = "0" * 63 + "a"
COUNTERS = [{"field": "DCGM_FI_DEV_XID_ERRORS", "type": "gauge", "help": "Value of the last XID error encountered."},
            {"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "GPU temperature (in C)."}]


def settings(**changes):
    values = dict(exporter_src="/srv/dcgm-exporter", exporter_sha256=SHA, exporter_listen_address="",
                  exporter_port=9400, exporter_user="dcgm-exporter", exporter_counters=COUNTERS)
    values.update(changes)
    return values


def test_good_settings_have_no_problem():
    assert core.problems(settings()) == []
    assert core.problems(settings(exporter_src="https://mirror.example.com/dcgm-exporter/4.4.1")) == []
    assert core.problems(settings(exporter_listen_address="10.0.0.5")) == []
    assert core.problems(settings(exporter_listen_address="fd00::5")) == []
    assert core.problems(settings(exporter_listen_address="node-1.example.com")) == []


@pytest.mark.parametrize("change, variable", [
    (dict(exporter_src=""), "monitoring_exporter_src is not set"),
    (dict(exporter_src=None), "monitoring_exporter_src is not set"),
    (dict(exporter_src="relative/dcgm-exporter"), "monitoring_exporter_src="),
    (dict(exporter_src="ftp://host/dcgm-exporter"), "monitoring_exporter_src="),
    (dict(exporter_src="/srv/dcgm-exporter\n"), "monitoring_exporter_src="),
    (dict(exporter_src="https://host/a b"), "monitoring_exporter_src="),
    (dict(exporter_sha256=""), "monitoring_exporter_sha256="),
    (dict(exporter_sha256=None), "monitoring_exporter_sha256="),
    (dict(exporter_sha256=SHA + "\n"), "monitoring_exporter_sha256="),
    (dict(exporter_sha256=SHA[:-1]), "monitoring_exporter_sha256="),
    (dict(exporter_sha256="sha256:" + SHA), "monitoring_exporter_sha256="),
    (dict(exporter_listen_address="0.0.0.0 --debug"), "monitoring_exporter_listen_address="),
    (dict(exporter_listen_address="host\nExecStartPre=/bin/sh"), "monitoring_exporter_listen_address"),
    (dict(exporter_port=0), "monitoring_exporter_port="),
    (dict(exporter_port=65536), "monitoring_exporter_port="),
    (dict(exporter_port="9400"), "monitoring_exporter_port="),
    (dict(exporter_port=True), "monitoring_exporter_port="),
    (dict(exporter_user="root"), "monitoring_exporter_user="),
    (dict(exporter_user="Exporter"), "monitoring_exporter_user="),
    (dict(exporter_user="dcgm\nexporter"), "monitoring_exporter_user="),
    (dict(exporter_counters=[]), "monitoring_exporter_counters must be"),
    (dict(exporter_counters=[{"field": "GPU_TEMP", "type": "gauge", "help": ""}]), "monitoring_exporter_counters[0].field"),
    (dict(exporter_counters=[{"field": "DCGM_FI_DEV_GPU_TEMP\n", "type": "gauge"}]), "monitoring_exporter_counters[0].field"),
    (dict(exporter_counters=[{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "histogram"}]), "monitoring_exporter_counters[0].type"),
    (dict(exporter_counters=[{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "a, b"}]), "monitoring_exporter_counters[0].help"),
    (dict(exporter_counters=[{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "a\nb"}]), "monitoring_exporter_counters[0].help"),
])
def test_each_problem_names_its_variable(change, variable):
    found = core.problems(settings(**change))
    assert len(found) == 1 and variable in found[0], found


def test_the_source_kind():
    assert core.source_kind("/srv/dcgm-exporter") == "file"
    assert core.source_kind("https://mirror/dcgm-exporter") == "url"
    assert core.source_kind("http://mirror/dcgm-exporter") == "url"
    assert core.source_kind("mirror/dcgm-exporter") is None


MADISON = [
    "datacenter-gpu-manager-4-cuda13 | 1:4.4.1-1 | file:/repo/debian12/x86_64  Packages",
    "datacenter-gpu-manager-4-cuda13 | 1:4.2.3-1 | file:/repo/debian12/x86_64  Packages",
]


def test_dcgm_plan_takes_the_newest_or_the_one_asked_for():
    assert core.dcgm_plan(MADISON, "datacenter-gpu-manager-4-cuda13", "") == {"version": "1:4.4.1-1", "problems": []}
    assert core.dcgm_plan(MADISON, "datacenter-gpu-manager-4-cuda13", "1:4.2.3-1")["version"] == "1:4.2.3-1"


def test_dcgm_plan_names_the_package_when_the_repository_lacks_it():
    plan = core.dcgm_plan([], "datacenter-gpu-manager-4-cuda13", "")
    assert plan["version"] is None
    assert plan["problems"][0].startswith("monitoring_dcgm_package=datacenter-gpu-manager-4-cuda13 is not")
    assert "CUDA repository" in plan["problems"][0]


def test_dcgm_plan_names_the_version_and_lists_those_there_are():
    plan = core.dcgm_plan(MADISON, "datacenter-gpu-manager-4-cuda13", "1:4.0.0-1")
    assert plan["version"] is None
    assert plan["problems"][0].startswith("monitoring_dcgm_version=1:4.0.0-1 of datacenter-gpu-manager-4-cuda13")
    assert "available: 1:4.4.1-1, 1:4.2.3-1" in plan["problems"][0]


def test_listen_argument():
    assert core.listen_argument("", 9400) == ":9400"
    assert core.listen_argument("10.0.0.5", 9500) == "10.0.0.5:9500"
    assert core.listen_argument("fd00::5", 9400) == "[fd00::5]:9400"


def test_the_unit_values_run_the_exporter_unprivileged_through_the_hostengine():
    # The unit's text is the role's template, rendered in tests/integration/test_monitoring_unit_template.py.
    values = core.exporter_unit_values(settings(exporter_listen_address="10.0.0.5"), "/usr/local/bin/dcgm-exporter",
                                       "/etc/dcgm-exporter/counters.csv")
    assert values == {
        "user": "dcgm-exporter",
        "exec_start": "/usr/local/bin/dcgm-exporter --collectors /etc/dcgm-exporter/counters.csv "
                      "--address 10.0.0.5:9400 --remote-hostengine-info localhost:5555",
        "hardening": list(HARDENING)}
    assert "NoNewPrivileges=yes" in values["hardening"]


def test_every_word_of_exec_start_is_quoted_for_systemd():
    values = core.exporter_unit_values(settings(exporter_listen_address="fd00::5", exporter_user="_gpu-metrics"),
                                       '/opt/dcgm exporter/50%"$HOME\\bin', "/etc/dcgm/100%.csv")
    assert values["exec_start"] == (
        '"/opt/dcgm exporter/50%%\\"$$HOME\\\\bin" --collectors "/etc/dcgm/100%%.csv" '
        '--address "[fd00::5]:9400" --remote-hostengine-info localhost:5555')
    assert values["user"] == "_gpu-metrics"


def test_settings_with_a_problem_give_no_unit_values():
    with pytest.raises(ValueError) as raised:
        core.exporter_unit_values(settings(exporter_user="dcgm\nExecStartPre=/bin/sh", exporter_port=0),
                                  "/usr/local/bin/dcgm-exporter", "/etc/dcgm-exporter/counters.csv")
    assert str(raised.value) == (
        "monitoring_exporter_port=0 is not a TCP port: a whole number from 1 to 65535; "
        "monitoring_exporter_user='dcgm\\nExecStartPre=/bin/sh' is not an unprivileged user name useradd accepts: "
        "a lower-case letter or '_', then up to 31 lower-case letters, digits, '_' or '-', not root")


def test_the_counters_file_is_dcgm_exporters_csv():
    text = core.counters_csv(COUNTERS)
    assert text.splitlines()[1:] == ["DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.",
                                     "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)."]
    assert text.startswith("# ") and text.endswith("\n")


def test_the_default_counters_are_valid_and_cover_xid_ecc_and_throttling():
    defaults = yaml.safe_load((Path(core.__file__).resolve().parents[3] / "roles" / "monitoring" / "defaults"
                               / "main.yml").read_text())
    counters = defaults["monitoring_exporter_counters"]
    assert core.counter_problems(counters) == []
    fields = {counter["field"] for counter in counters}
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "DCGM_FI_DEV_GPU_TEMP"} <= fields


NODES = [
    {"name": "gpu-1", "address": "10.0.0.1", "server_metrics": True, "server_port": 30000, "monitoring": True},
    {"name": "gpu-2", "metrics_address": "fd00::2", "address": "10.0.0.2", "server_metrics": True,
     "server_port": 30001},
    {"name": "gpu-3", "monitoring": "true", "exporter_port": 9500},
    {"name": "gpu-4"},
]


def test_scrape_targets_list_each_nodes_endpoints_with_node_and_job_labels():
    assert core.scrape_target_groups(NODES) == [
        {"targets": ["10.0.0.1:30000"], "labels": {"job": "sglang", "node": "gpu-1"}},
        {"targets": ["10.0.0.1:9400"], "labels": {"job": "dcgm", "node": "gpu-1"}},
        {"targets": ["[fd00::2]:30001"], "labels": {"job": "sglang", "node": "gpu-2"}},
        {"targets": ["gpu-3:9500"], "labels": {"job": "dcgm", "node": "gpu-3"}},
    ]


@pytest.mark.parametrize("settings, named", [
    ({"address": "10.0.0.1\nbad", "monitoring": True}, "gpu_node_metrics_address (or ansible_host)"),
    ({"metrics_address": "a b", "monitoring": True}, "gpu_node_metrics_address (or ansible_host)"),
    ({"server_metrics": True, "server_port": "30000x"}, "sglang_server_port="),
    ({"monitoring": True, "exporter_port": 70000}, "monitoring_exporter_port="),
])
def test_a_bad_address_or_port_is_refused_naming_the_host_and_variable(settings, named):
    with pytest.raises(ValueError) as raised:
        core.scrape_target_groups([dict(settings, name="gpu-9")])
    assert str(raised.value).startswith("host gpu-9: ") and named in str(raised.value)


def test_the_whole_messages_name_the_variable_and_the_fix():
    found = core.problems(dict(exporter_src=None, exporter_sha256="abc", exporter_listen_address="a b",
                               exporter_port=0, exporter_user="root", exporter_counters=None))
    assert found == [
        "monitoring_exporter_src is not set: give dcgm-exporter's binary as a file on the controller (an absolute "
        "path) or an http(s) URL the controller can download; NVIDIA publishes it as a container image and as "
        "source (github.com/NVIDIA/dcgm-exporter), not as a package",
        "monitoring_exporter_sha256='abc' is not a sha256 checksum (64 hexadecimal digits): give the checksum of "
        "the binary in monitoring_exporter_src (sha256sum FILE); an unverified binary is never installed",
        "monitoring_exporter_listen_address='a b' is not an IP address or a host name (empty means every address)",
        "monitoring_exporter_port=0 is not a TCP port: a whole number from 1 to 65535",
        "monitoring_exporter_user='root' is not an unprivileged user name useradd accepts: a lower-case letter or "
        "'_', then up to 31 lower-case letters, digits, '_' or '-', not root",
        "monitoring_exporter_counters must be a non-empty list of {field, type, help}, like {field: "
        "DCGM_FI_DEV_XID_ERRORS, type: gauge, help: Value of the last XID error encountered.}",
    ]
    assert core.problems(settings(exporter_src="mirror/x")) == [
        "monitoring_exporter_src='mirror/x' is neither an absolute path on the controller nor an http(s) URL"]


def test_a_control_character_in_the_listen_address_gets_the_shared_message():
    value = "host\nExecStartPre=/bin/sh"
    assert core.problems(settings(exporter_listen_address=value)) == [
        control_character_problem(value, "monitoring_exporter_listen_address")]


def test_the_edges_of_a_port_and_the_label_type_are_accepted():
    assert core.problems(settings(exporter_port=1)) == []
    assert core.problems(settings(exporter_port=65535)) == []
    assert core.counter_problems([{"field": "DCGM_FI_DRIVER_VERSION", "type": "label", "help": "Driver."},
                                  {"field": "DCGM_FI_DEV_XID_ERRORS", "type": "counter"}]) == []


def test_every_bad_counter_is_reported_with_the_whole_message():
    assert core.counter_problems([7, {"field": "GPU_TEMP", "type": "histogram", "help": "a, b"}, "x"]) == [
        "monitoring_exporter_counters[0]=7 is not a {field, type, help} mapping",
        "monitoring_exporter_counters[1].field='GPU_TEMP' is not a DCGM field name like DCGM_FI_DEV_GPU_TEMP",
        "monitoring_exporter_counters[1].type='histogram' is none of gauge, counter, label",
        "monitoring_exporter_counters[1].help='a, b' must be one line of text without a comma (it is a CSV field)",
        "monitoring_exporter_counters[2]='x' is not a {field, type, help} mapping",
    ]


def test_dcgm_plan_skips_other_packages_and_says_the_whole_fix():
    other = ["datacenter-gpu-manager-4-cuda12 | 1:4.5.0-1 | file:/repo  Packages"]
    assert core.dcgm_plan(other + MADISON, "datacenter-gpu-manager-4-cuda13", "") == {
        "version": "1:4.4.1-1", "problems": []}
    assert core.dcgm_plan(other, "datacenter-gpu-manager-4-cuda13", "") == {"version": None, "problems": [
        "monitoring_dcgm_package=datacenter-gpu-manager-4-cuda13 is not in the host's apt repositories: DCGM 4 "
        "comes from NVIDIA's CUDA repository (the cuda role adds it) as datacenter-gpu-manager-4-cuda<CUDA major>; "
        "add that repository or its mirror, or name the package the repository has. Nothing was installed"]}
    assert core.dcgm_plan(MADISON, "datacenter-gpu-manager-4-cuda13", "1:4.0.0-1") == {"version": None, "problems": [
        "monitoring_dcgm_version=1:4.0.0-1 of datacenter-gpu-manager-4-cuda13 is not in the repository; available: "
        "1:4.4.1-1, 1:4.2.3-1. Set monitoring_dcgm_version to one of them, or leave it empty for the newest. "
        "Nothing was installed"]}


def test_the_whole_counters_file_and_a_counter_without_help():
    assert core.counters_csv([{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge"}]) == (
        "# Written by blackwell.gpu_node.monitoring (monitoring_exporter_counters). Format: DCGM field, "
        "Prometheus metric type, help message\n"
        "DCGM_FI_DEV_GPU_TEMP, gauge, \n")


def test_scrape_targets_after_a_node_without_endpoints_and_with_empty_or_unset_values():
    nodes = [{"name": "gpu-4"}, {"name": "gpu-5", "server_metrics": "yes", "server_port": "", "metrics_address": "",
                                 "address": "10.0.0.5", "monitoring": "perhaps"},
             {"name": "gpu-6", "server_metrics": True, "server_port": None, "metrics_address": None},
             {"name": "gpu-7", "monitoring": True, "exporter_port": "9500", "metrics_address": "10.1.0.7",
              "address": "10.0.0.7"}]
    assert core.scrape_target_groups(nodes) == [
        {"targets": ["10.0.0.5:30000"], "labels": {"job": "sglang", "node": "gpu-5"}},
        {"targets": ["gpu-6:30000"], "labels": {"job": "sglang", "node": "gpu-6"}},
        {"targets": ["10.1.0.7:9500"], "labels": {"job": "dcgm", "node": "gpu-7"}},
    ]


def test_a_refused_node_gets_every_problem_in_one_message():
    with pytest.raises(ValueError) as raised:
        core.scrape_target_groups([{"name": "gpu-9", "address": "a b", "monitoring": True, "exporter_port": 0}])
    assert str(raised.value) == (
        "host gpu-9: gpu_node_metrics_address (or ansible_host)='a b' is not an IP address or a host name; "
        "monitoring_exporter_port=0 is not a TCP port: a whole number from 1 to 65535; fix the inventory. "
        "The service-discovery file was not written")
