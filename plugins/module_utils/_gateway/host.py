# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What runs the model gateway on a host, for the gateway_service and gateway_service_info modules: its options and
their checks, its unit and its recorded process, and what runs now. One reader, so that what the info module
reports is what gateway_service starts, stops and restarts. The gateway runs the way the SGLang server does, through
the server's systemctl calls."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import (
    STATE_MODE,
    launch,
    relaunch_reasons,
    settle_log_access,
    stop_group,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    open_directory,
    path_kind,
    read_text,
    remove,
    settle_file,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import boot_id, process_start_time
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import SYSTEMD_RUNTIME_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import releases, service
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway.workers import (
    COUNTS,
    normalized_settings,
    settings_problems,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import (
    SystemdFailed,
    observe_unit,
    systemctl,
)

# Every option but gateway_service's state: the info module takes them too, and checks them the same way, so that
# the role's module defaults serve both and a look at what runs refuses bad settings first.
OPTIONS = dict(
    package=dict(type="str", default=releases.DEFAULT_PACKAGE, choices=sorted(releases.GATEWAYS)),
    manager=dict(type="str", default="auto", choices=["auto", "systemd", "module"]),
    user=dict(type="str", default="sglang-gateway"),
    python=dict(type="path", default="/opt/blackwell-gpu-node/gateway/bin/python"),
    launcher=dict(type="path", default="/etc/blackwell-gpu-node/gateway/gateway_launch.py"),
    secrets_path=dict(type="path", default="/etc/blackwell-gpu-node/gateway/secrets.json"),
    workers_path=dict(type="path", default="/etc/blackwell-gpu-node/gateway/workers.json"),
    systemd_unit_dir=dict(type="path", default="/etc/systemd/system"),
    state_dir=dict(type="path", default=STATE_DIR),
    log_path=dict(type="path", default="/var/log/blackwell-gpu-node/sglang-gateway.log"),
    host=dict(type="str", default="127.0.0.1"),
    port=dict(type="int", default=30080),
    metrics_host=dict(type="str", default="127.0.0.1"),
    metrics_port=dict(type="int", default=29000),
    policy=dict(type="str", default="cache_aware"),
    health_check_interval=dict(type="int", default=10),
    health_check_timeout=dict(type="int", default=5),
    health_failure_threshold=dict(type="int", default=3),
    health_success_threshold=dict(type="int", default=2),
    retry_max_retries=dict(type="int", default=3),
    request_timeout=dict(type="int", default=1800),
    worker_startup_timeout=dict(type="int", default=1800),
    shutdown_grace_period=dict(type="int", default=180),
    log_level=dict(type="str", default="info", choices=["debug", "info", "warn", "error"]),
    admin_key=dict(type="str", no_log=True),
    api_key=dict(type="str", no_log=True),
    server_ports=dict(type="dict", default={}),
)
PATHS = ("python", "launcher", "secrets_path", "workers_path", "systemd_unit_dir", "state_dir", "log_path")

SETTINGS = ("package", "host", "port", "metrics_host", "metrics_port", "policy", "admin_key", "api_key", "log_level",
            "server_ports") + tuple(key for key, _least in COUNTS)
# The gateway's environment beyond the module's own: none (its keys come from the secrets file).
ENVIRONMENT = {}
# The unit's mode, root's: a unit another user could edit would run what that user wrote.
UNIT_MODE = 0o644


class Gateway(object):
    """What runs the gateway on this host now: its unit (under systemd) and its recorded process (module)."""

    def __init__(self, module):
        self.module = module
        params = module.params
        self.unit_dir = params["systemd_unit_dir"]
        self.process = service.GatewayProcess(params["state_dir"])
        self.systemctl = module.get_bin_path("systemctl")

    def installed_unit(self):
        if path_kind(self.unit_dir) != "directory":
            return None
        directory = open_directory(self.unit_dir, "systemd_unit_dir")
        try:
            return read_text(directory, service.UNIT)
        finally:
            os.close(directory)

    def unit_state(self):
        """systemd's view of the unit, None where systemctl is missing or no unit was written."""
        if not self.systemctl or not os.path.isdir(SYSTEMD_RUNTIME_DIR) or self.installed_unit() is None:
            return None
        return observe_unit(self.module, service.UNIT)

    def recorded(self):
        """(recorded state or None, whether it runs)."""
        state = self.process.load()
        return state, bool(state) and self.process.running(state)

    def withdraw_unit(self):
        """Stop and disable the unit, remove its file and reload systemd."""
        if self.systemctl:
            systemctl(self.module, "disable", "--now", service.UNIT, check=False)
        directory = open_directory(self.unit_dir, "systemd_unit_dir")
        try:
            remove(directory, service.UNIT)
        finally:
            os.close(directory)
        if self.systemctl:
            systemctl(self.module, "daemon-reload", check=False)

    def stop_recorded(self, state, grace):
        stop_group(state, grace)
        self.process.forget()

    def settle_unit(self, text, check=False):
        """Write the unit when it is not root's with text and UNIT_MODE (settle_file); True when it was (or, with
        check, would be) written."""
        directory = open_directory(self.unit_dir, "systemd_unit_dir")
        try:
            return settle_file(directory, service.UNIT, text, UNIT_MODE, check)
        finally:
            os.close(directory)

    def settle_running(self, manager, text, check=False):
        """On a run that leaves the gateway running as it is: its files set back to what a start leaves them, unless
        check (under systemd the unit, root's 0644; else its log without permission for others and its state files
        root's 0600). The actions that took (or would take)."""
        if manager == "systemd":
            return ["set the mode and owner of the unit %s" % service.UNIT] if self.settle_unit(text, check) else []
        actions = []
        if settle_log_access(self.module.params["log_path"], None, "the gateway", check):
            actions.append("set the mode of the log")
        settled = self.process.settle_files(check)
        if settled:
            actions.append("set the mode and owner of the state files %s" % ", ".join(settled))
        return actions

    def managed(self, manager):
        """Every file the module keeps for the gateway that manager runs, as settle_running sets each back: its
        path; the mode it leaves (None for the log, which keeps its own mode less any permission for others);
        whether the module compares its text with what it writes and writes it back (the unit, through a
        restart). The state files are those there now."""
        if manager == "systemd":
            return [dict(path=os.path.join(self.unit_dir, service.UNIT), mode="%04o" % UNIT_MODE, text=True)]
        files = [dict(path=self.module.params["log_path"], mode=None, text=False)]
        return files + [dict(path=os.path.join(self.process.state_dir, name), mode="%04o" % STATE_MODE, text=False)
                        for name in self.process.kept_files()
                        if path_kind(os.path.join(self.process.state_dir, name)) == "file"]

    def run_unit(self, text, restart):
        """Write the unit when it differs (its text, mode or owner), enable it, and (re)start it; its main pid."""
        written = self.settle_unit(text)
        if written:
            systemctl(self.module, "daemon-reload")
        systemctl(self.module, "reset-failed", service.UNIT, check=False)
        systemctl(self.module, "enable", service.UNIT)
        systemctl(self.module, "restart" if restart or written else "start", service.UNIT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid = observe_unit(self.module, service.UNIT)["pid"]
            if pid and process_start_time(pid) is not None:
                return pid
            time.sleep(0.1)
        raise SystemdFailed("systemd did not start %s; see systemctl status %s and journalctl -u %s"
                            % (service.UNIT, service.UNIT, service.UNIT))

    def launch(self, argv, user_account, log_path):
        """Start the launcher detached and record it; its pid."""
        child, offset, start_time = launch(argv, ENVIRONMENT, log_path, user_account, None, "the gateway")
        if start_time is None:
            raise InvalidOption("the gateway exited at once (code %s); see %s" % (child.poll(), log_path))
        state = {"pid": child.pid, "start_time": start_time, "argv": argv, "log_path": log_path, "offset": offset,
                 "env_digest": service.environment_digest(ENVIRONMENT), "boot_id": boot_id(),
                 "uid": user_account["uid"], "started_at": time.time()}
        try:
            self.process.save(state)
        except (OSError, InvalidOption):
            self.stop_recorded(state, 10)
            raise
        return child.pid


def process_restart_reasons(recorded, argv, user_account, log_path):
    """Why the gateway the module runs itself (manager=module), recorded as launch records it, is not the one
    asked for; empty when it is. Under systemd the unit's text holds the same."""
    reasons = relaunch_reasons(recorded, argv, service.environment_digest(ENVIRONMENT), log_path)
    if recorded.get("uid", user_account["uid"]) != user_account["uid"]:
        reasons.append("it runs as uid %s, not user=%s" % (recorded["uid"], user_account["user"]))
    return reasons


def settings_of(params):
    return normalized_settings(dict((key, params[key]) for key in SETTINGS))


def checked_settings(params):
    """(the gateway's settings, the problems of every option, each naming its role variable)."""
    settings = settings_of(params)
    problems = settings_problems(settings)
    problems += ["%s=%s is not an absolute path" % (option, params[option])
                 for option in PATHS if not os.path.isabs(params[option])]
    return settings, problems


def observed(gateway):
    """(systemd's view of the unit or None, the recorded process or None, whether it runs, the result's view of
    what runs: its manager, pid, command line and log). StateRefused, InvalidOption or SystemdFailed when the
    unit or the state cannot be read or trusted."""
    unit_state = gateway.unit_state()
    recorded, ours = gateway.recorded()
    result = dict(changed=False, manager=None, running=False, pid=None, argv=[], log_path=None)
    if unit_state is not None and unit_state["running"]:
        result.update(manager="systemd", running=True, pid=unit_state["pid"])
    elif ours:
        result.update(manager="module", running=True, pid=recorded["pid"], argv=recorded["argv"],
                      log_path=recorded["log_path"])
    return unit_state, recorded, ours, result
