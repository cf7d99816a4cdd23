"""The monitoring role's dcgm-exporter unit, rendered for real: ansible-playbook on the controller runs the role's
template task (ansible.builtin.template, with its defaults/main.yml and vars/main.yml) into a folder of the test.
The filter monitoring_exporter_unit checks and quotes every value (tests/unit/plugins/module_utils/test_monitoring.py);
these show that the template places them as they are, with every directive, and writes nothing the filter refused."""
import os
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from process_tree import run_bounded

from conftest import CHECKOUT, COLLECTIONS

ROLE = CHECKOUT / "roles" / "monitoring"
SETTINGS = dict(monitoring_exporter_src="/srv/dcgm-exporter", monitoring_exporter_sha256="a" * 64)
# systemd's hardening that every unit of the collection has (_common/systemd.py's HARDENING).
HARDENING = ["NoNewPrivileges=yes", "ProtectSystem=full", "PrivateTmp=yes", "ProtectKernelTunables=yes",
             "ProtectKernelModules=yes", "ProtectControlGroups=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes",
             "RestrictRealtime=yes"]


def render(tmp_path, **variables):
    """(the completed ansible-playbook, the unit's text or None) for the role's template with these variables."""
    unit = tmp_path / "dcgm-exporter.service"
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
             "tasks": [{"name": "Render the exporter's unit", "vars": dict(SETTINGS, **variables),
                        "ansible.builtin.template": {"src": str(ROLE / "templates" / "dcgm-exporter.service.j2"),
                                                     "dest": str(unit), "mode": "0644"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    completed = run_bounded(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=" + sys.executable, str(tmp_path / "play.yml")],
        timeout=180, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_FORCE_COLOR="0"))
    return completed, unit.read_text() if unit.exists() else None


def exec_start_argv(unit):
    """The argv systemd reads from the unit's ExecStart= line: its quoting (C escapes within double quotes, as a
    POSIX shell takes `\\\\` and `\\"` there), then `%%` and `$$` each one character."""
    line = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert len(line) == 1, unit
    return [word.replace("%%", "%").replace("$$", "$") for word in shlex.split(line[0][len("ExecStart="):])]


def test_the_whole_unit_runs_the_exporter_unprivileged_through_the_hostengine(tmp_path):
    completed, unit = render(tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert unit == "\n".join([
        "# Written by blackwell.gpu_node.monitoring.",
        "[Unit]",
        "Description=NVIDIA DCGM exporter: GPU metrics for Prometheus",
        "Wants=nvidia-dcgm.service",
        "After=nvidia-dcgm.service network-online.target",
        "",
        "[Service]",
        "User=dcgm-exporter",
        "Group=dcgm-exporter",
        "ExecStart=/usr/local/bin/dcgm-exporter --collectors /etc/dcgm-exporter/counters.csv --address :9400 "
        "--remote-hostengine-info localhost:5555",
        "Restart=always",
        "RestartSec=5",
    ] + HARDENING + ["ProtectHome=yes", "", "[Install]", "WantedBy=multi-user.target"]) + "\n"
    assert oct((tmp_path / "dcgm-exporter.service").stat().st_mode & 0o777) == "0o644"


def test_the_settings_reach_the_unit(tmp_path):
    completed, unit = render(tmp_path, monitoring_exporter_listen_address="10.0.0.5", monitoring_exporter_port=9500,
                             monitoring_exporter_user="gpu-metrics")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = unit.splitlines()
    assert "User=gpu-metrics" in lines and "Group=gpu-metrics" in lines
    assert ("ExecStart=/usr/local/bin/dcgm-exporter --collectors /etc/dcgm-exporter/counters.csv "
            "--address 10.0.0.5:9500 --remote-hostengine-info localhost:5555") in lines


def test_odd_values_reach_systemd_as_they_are(tmp_path):
    binary = '/opt/dcgm exporter/50%"$HOME\\bin'
    completed, unit = render(tmp_path, monitoring_exporter_listen_address="fd00::5",
                             __monitoring_exporter_binary=binary,
                             __monitoring_exporter_counters_path="/etc/dcgm exporter/100%.csv")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert exec_start_argv(unit) == [binary, "--collectors", "/etc/dcgm exporter/100%.csv", "--address",
                                     "[fd00::5]:9400", "--remote-hostengine-info", "localhost:5555"]
    assert ('ExecStart="/opt/dcgm exporter/50%%\\"$$HOME\\\\bin" --collectors "/etc/dcgm exporter/100%%.csv" '
            '--address "[fd00::5]:9400" --remote-hostengine-info localhost:5555') in unit.splitlines()


@pytest.mark.parametrize("variables, says", [
    (dict(monitoring_exporter_user="dcgm\nExecStartPre=/bin/sh"), "monitoring_exporter_user="),
    (dict(monitoring_exporter_listen_address="0.0.0.0 --debug"), "monitoring_exporter_listen_address="),
])
def test_a_value_the_filter_refuses_writes_no_unit(tmp_path, variables, says):
    completed, unit = render(tmp_path, **variables)
    assert completed.returncode != 0
    assert says in completed.stdout + completed.stderr
    assert unit is None
