#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gateway_service
short_description: Run SGLang's model gateway as a systemd unit, or as a process of its own where systemd is not PID 1 (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.gateway) role, which calls it; not meant for playbooks of your own.
  - Runs the launcher of P(blackwell.gpu_node.gateway#role) (which starts sglang-router 0.3.2 with its keys read
    from O(secrets_path) and registers the workers of O(workers_path)) with the virtualenv's Python, as O(user),
    under the manager O(manager) picks, the same way M(blackwell.gpu_node.sglang_server) runs the server.
  - Every setting is checked first, whatever O(state), and each problem names its role variable
    (C(gateway_<option>)); nothing is changed when one fails.
  - With O(manager=systemd) it writes the unit C(sglang-gateway.service) to O(systemd_unit_dir), enables it and
    restarts it when the unit changed or O(state=restarted). With O(manager=module) it starts the launcher
    detached (a session of its own, as O(user) and its group, umask 027, output appended to O(log_path)), records
    its pid, start time and boot in O(state_dir), and restarts it when its command line changed or
    O(state=restarted). A process is stopped with SIGTERM to its process group, then SIGKILL after the gateway's
    grace period and 15 s.
  - Moving to the other manager stops and removes what the other one ran.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: Checks the settings and reports what would start, stop or restart; changes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  state:
    description:
      - V(started) runs the gateway, restarting it only when what it runs changed; V(restarted) restarts it in any
        case (a changed key, launcher or virtualenv); V(stopped) stops it; V(status) reports only.
    type: str
    choices: [started, restarted, stopped, status]
    default: started
  manager:
    description:
      - V(auto) is V(systemd) where systemd is PID 1 (C(/run/systemd/system) exists), else V(module); RV(manager) and
        RV(manager_reason) say which was chosen and why.
    type: str
    choices: [auto, systemd, module]
    default: auto
  user:
    description: The unprivileged user the gateway runs as, with its primary group. It must exist to start it.
    type: str
    default: sglang-gateway
  python:
    description: The gateway virtualenv's Python.
    type: path
    default: /opt/blackwell-gpu-node/gateway/bin/python
  launcher:
    description: The launcher's path.
    type: path
    default: /etc/blackwell-gpu-node/gateway/gateway_launch.py
  secrets_path:
    description: The keys file the launcher reads.
    type: path
    default: /etc/blackwell-gpu-node/gateway/secrets.json
  workers_path:
    description: The workers file the launcher registers at start (written by M(blackwell.gpu_node.gateway_workers)).
    type: path
    default: /etc/blackwell-gpu-node/gateway/workers.json
  systemd_unit_dir:
    description: Where the unit is written with O(manager=systemd).
    type: path
    default: /etc/systemd/system
  state_dir:
    description: Where the pid and state files C(sglang-gateway.pid) and C(sglang-gateway.json) go with
      O(manager=module); root's at every level and writable by root alone.
    type: path
    default: /var/lib/blackwell-gpu-node
  log_path:
    description: The gateway's log with O(manager=module) (under systemd the journal keeps it); its directory must be
      root's at every level and writable by root alone.
    type: path
    default: /var/log/blackwell-gpu-node/sglang-gateway.log
  host:
    description: Address the gateway listens on (C(--host)).
    type: str
    default: 127.0.0.1
  port:
    description: Port of the gateway.
    type: int
    default: 30080
  metrics_host:
    description: Address of its Prometheus metrics (C(--prometheus-host)).
    type: str
    default: 127.0.0.1
  metrics_port:
    description: Port of its Prometheus metrics.
    type: int
    default: 29000
  policy:
    description: Load-balancing policy, one of sglang-router 0.3.2's.
    type: str
    default: cache_aware
  health_check_interval:
    description: Seconds between health checks of each worker.
    type: int
    default: 10
  health_check_timeout:
    description: Seconds a health check may take.
    type: int
    default: 5
  health_failure_threshold:
    description: Failed checks in a row that make a worker unhealthy.
    type: int
    default: 3
  health_success_threshold:
    description: Passed checks in a row that make it healthy again.
    type: int
    default: 2
  retry_max_retries:
    description: Attempts of a request in all, each on a worker chosen anew.
    type: int
    default: 3
  request_timeout:
    description: Seconds a request may take.
    type: int
    default: 1800
  worker_startup_timeout:
    description: Seconds the gateway tries to reach a worker being registered.
    type: int
    default: 1800
  shutdown_grace_period:
    description: Seconds the gateway waits for requests in flight once asked to stop.
    type: int
    default: 180
  log_level:
    description: The gateway's log level.
    type: str
    choices: [debug, info, warn, error]
    default: info
  admin_key:
    description:
      - The admin key the keys file holds; only checked here (set, without a colon or control character), never
        written or shown.
    type: str
  api_key:
    description: The client key the keys file holds, if any; only checked here.
    type: str
  server_ports:
    description: Variable name to port of each other listener of the host, which neither gateway port may take.
    type: dict
    default: {}
notes:
  - The keys never reach a command line, the unit or the state; the launcher reads them from O(secrets_path).
seealso:
  - module: blackwell.gpu_node.gateway_workers
  - module: blackwell.gpu_node.sglang_server
"""

EXAMPLES = r"""
- name: Run the gateway under systemd, or as a process of its own in a container
  blackwell.gpu_node.gateway_service:
    admin_key: "{{ gateway_admin_key }}"
    policy: round_robin

- name: Restart it after its keys changed
  blackwell.gpu_node.gateway_service:
    state: restarted
    admin_key: "{{ gateway_admin_key }}"

- name: Look at what runs
  blackwell.gpu_node.gateway_service:
    state: status
    admin_key: "{{ gateway_admin_key }}"
  register: gateway
"""

RETURN = r"""
manager:
  description: The manager chosen (O(state=started) or O(state=restarted)), else the one of what runs, or null.
  returned: always
  type: str
  sample: module
manager_reason:
  description: Why that manager was chosen.
  returned: when O(state) is started or restarted
  type: str
  sample: "manager=auto: systemd is not PID 1 here (no /run/systemd/system), so the module runs the gateway"
running:
  description: Whether the gateway runs after the run (in check mode, before it).
  returned: always
  type: bool
pid:
  description: Its main process, when it runs.
  returned: always
  type: int
argv:
  description: The command line it runs (no key is ever on it).
  returned: always
  type: list
  elements: str
actions:
  description: What was (or, in check mode, would be) done, in order.
  returned: always
  type: list
  elements: str
  sample: ["removed the unit sglang-gateway.service", "started"]
log_path:
  description: Its log with O(manager=module); null under systemd, whose journal keeps it.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import (
    StateRefused,
    launch,
    resolve_manager,
    stop_group,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    open_directory,
    path_kind,
    read_text,
    remove,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import boot_id, process_start_time
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import SYSTEMD_RUNTIME_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import service
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

SETTINGS = ("host", "port", "metrics_host", "metrics_port", "policy", "admin_key", "api_key", "log_level",
            "server_ports") + tuple(key for key, _least in COUNTS)
# The gateway's environment beyond the module's own: none (its keys come from the secrets file).
ENVIRONMENT = {}


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

    def run_unit(self, text, restart):
        """Write the unit when it differs, enable it, and (re)start it; its main pid."""
        written = self.installed_unit() != text
        if written:
            directory = open_directory(self.unit_dir, "systemd_unit_dir")
            try:
                write_atomically(directory, service.UNIT, text, 0o644)
            finally:
                os.close(directory)
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


def settings_of(params):
    return normalized_settings(dict((key, params[key]) for key in SETTINGS))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="started", choices=["started", "restarted", "stopped", "status"]),
            manager=dict(type="str", default="auto", choices=["auto", "systemd", "module"]),
            user=dict(type="str", default="sglang-gateway"),
            python=dict(type="path", default="/opt/blackwell-gpu-node/gateway/bin/python"),
            launcher=dict(type="path", default="/etc/blackwell-gpu-node/gateway/gateway_launch.py"),
            secrets_path=dict(type="path", default="/etc/blackwell-gpu-node/gateway/secrets.json"),
            workers_path=dict(type="path", default="/etc/blackwell-gpu-node/gateway/workers.json"),
            systemd_unit_dir=dict(type="path", default="/etc/systemd/system"),
            state_dir=dict(type="path", default="/var/lib/blackwell-gpu-node"),
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
        ),
        supports_check_mode=True,
    )
    params = module.params
    settings = settings_of(params)
    problems = settings_problems(settings)
    for option in ("python", "launcher", "secrets_path", "workers_path", "systemd_unit_dir", "state_dir", "log_path"):
        if not os.path.isabs(params[option]):
            problems.append("%s=%s is not an absolute path" % (option, params[option]))
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), problems=problems)

    gateway = Gateway(module)
    result = dict(changed=False, actions=[], manager=None, running=False, pid=None, argv=[], log_path=None)
    try:
        unit_state = gateway.unit_state()
        recorded, ours = gateway.recorded()
    except (StateRefused, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg=str(exc), **result)
    if unit_state is not None and unit_state["running"]:
        result.update(manager="systemd", running=True, pid=unit_state["pid"])
    elif ours:
        result.update(manager="module", running=True, pid=recorded["pid"], argv=recorded["argv"],
                      log_path=recorded["log_path"])
    if params["state"] == "status":
        module.exit_json(**result)

    grace = params["shutdown_grace_period"] + service.STOP_MARGIN
    wanted = params["state"] in ("started", "restarted")
    manager, argv, user_account, text = None, None, None, None
    if wanted:
        manager, result["manager_reason"] = resolve_manager(params["manager"], "the gateway")
        user_account = account(params["user"])
        if user_account is None:
            module.fail_json(msg="Nothing was changed: user=%s does not exist on this host (gateway_user): create it "
                                 "first" % params["user"], **result)
        argv = service.launcher_argv(settings, params["python"], params["launcher"], params["secrets_path"],
                                     params["workers_path"])
        if manager == "systemd" and not gateway.systemctl:
            module.fail_json(msg="Nothing was changed: manager=systemd, but systemctl is not on this host: use "
                                 "manager=module (or auto)", **result)
        text = service.unit_text(argv, params["user"], params["shutdown_grace_period"])

    # What the other manager (or a stop) leaves behind goes first.
    drop_unit = gateway.installed_unit() is not None and manager != "systemd"
    drop_process = ours and (manager != "module" or params["state"] == "restarted" or recorded["argv"] != argv)
    clean_stale = bool(recorded) and not ours
    enables = False
    if manager == "systemd":
        starts = (params["state"] == "restarted" or gateway.installed_unit() != text
                  or not (unit_state and unit_state["running"]))
        enables = not starts and not unit_state["enabled"]
    else:
        starts = manager == "module" and (drop_process or not ours)
    actions = ((["removed the unit %s" % service.UNIT] if drop_unit else [])
               + (["stopped pid %d" % recorded["pid"]] if drop_process else [])
               + (["cleaned the stale state file"] if clean_stale else [])
               + (["enabled the unit %s" % service.UNIT] if enables else [])
               + (["started" if not result["running"] or drop_unit or drop_process else "restarted"]
                  if starts else []))
    result.update(changed=bool(actions), actions=actions)
    if manager is not None:
        result.update(manager=manager, argv=argv, log_path=params["log_path"] if manager == "module" else None)
    if module.check_mode or not actions:
        module.exit_json(**result)

    try:
        if drop_unit:
            gateway.withdraw_unit()
        if drop_process:
            gateway.stop_recorded(recorded, grace)
        if clean_stale:
            gateway.process.forget()
        if starts or drop_unit or drop_process:
            result.update(running=False, pid=None)
        if (starts or enables) and manager == "systemd":
            result["pid"] = gateway.run_unit(text, params["state"] == "restarted")
        elif starts:
            result["pid"] = gateway.launch(argv, user_account, params["log_path"])
        result["running"] = result["pid"] is not None
    except (OSError, InvalidOption, StateRefused, SystemdFailed) as exc:
        module.fail_json(msg="The gateway could not be brought to state=%s: %s" % (params["state"], exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
