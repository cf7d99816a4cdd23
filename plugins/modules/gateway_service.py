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
  - Runs the launcher of P(blackwell.gpu_node.gateway#role) (which starts the gateway of O(package), sglang-router
    0.3.2 or smg 1.13.0, with its keys read from O(secrets_path) and registers the workers of O(workers_path)) with
    the virtualenv's Python, as O(user), under the manager O(manager) picks, the same way
    M(blackwell.gpu_node.sglang_server) runs the server. The gateway retitles its process (C(sglang::router),
    C(smg::router)); either title stands for the recorded command line, so a gateway started as one package is
    recognised, stopped and restarted as the other.
  - Every setting is checked first, whatever O(state), and each problem names its role variable
    (C(gateway_<option>)); nothing is changed when one fails.
  - With O(manager=systemd) it writes the unit C(sglang-gateway.service) to O(systemd_unit_dir), enables it and
    restarts it when the unit changed or O(state=restarted). The module, not a template of the role, writes the
    unit, because it decides the manager and restarts the gateway when the unit's text differs from its own. With
    O(manager=module) it starts the launcher
    detached (a session of its own, as O(user) and its group, umask 027, output appended to O(log_path)), records
    its pid, start time and boot in O(state_dir), and restarts it when its command line, its log (O(log_path)) or
    its user changed (RV(restart_reasons) says which) or O(state=restarted). A process is stopped with SIGTERM to
    its process group, then SIGKILL after the gateway's grace period and 15 s.
  - Moving to the other manager stops and removes what the other one ran.
  - A run that leaves the gateway running sets its files back to what a start leaves them, without restarting it -
    the unit root's C(0644) under systemd; else the log without any permission for others and the pid and state
    files root's C(0600). Each such change is reported (C(changed=true), RV(actions)); in check mode it is only
    reported.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.gateway_service
  - blackwell.gpu_node.defaults.state_dir
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
        case (a changed key, launcher or virtualenv); V(stopped) stops it.
      - M(blackwell.gpu_node.gateway_service_info) reports what runs, and changes nothing.
    type: str
    choices: [started, restarted, stopped]
    default: started
seealso:
  - module: blackwell.gpu_node.gateway_service_info
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
  description:
    - What was (or, in check mode, would be) done, in order.
    - On a run that leaves the gateway running, what was set back to what a start leaves - C(set the mode and owner
      of the unit sglang-gateway.service), C(set the mode of the log), C(set the mode and owner of the state files
      sglang-gateway.pid, sglang-gateway.json).
  returned: always
  type: list
  elements: str
  sample: ["removed the unit sglang-gateway.service", "started"]
restart_reasons:
  description:
    - Why the gateway the module runs itself is not the one these options ask for, which restarts it; empty when it
      is. Its command line is said to differ, never shown.
  returned: when the module runs the gateway (O(manager=module)) and O(state) is started or restarted
  type: list
  elements: str
  sample: ["it logs to /var/log/gateway.log, not log_path=/var/log/blackwell-gpu-node/sglang-gateway.log"]
managed:
  description:
    - Every file the module keeps for the gateway it runs; a run that leaves the gateway running sets each back
      (see RV(actions)), and a unit whose text differs from what a start writes restarts the gateway.
    - Each has its C(path), the C(mode) the module leaves (null for the log, which keeps its mode less any
      permission for others), and C(text), true where the module compares the text with what it writes and writes
      it back (the unit, by restarting the gateway).
    - Under systemd (RV(manager)) the unit in O(systemd_unit_dir); else the log (O(log_path)) and the state files
      in O(state_dir) after the run.
  returned: when O(state) is started or restarted, outside check mode
  type: list
  elements: dict
  sample: [{"path": "/var/log/blackwell-gpu-node/sglang-gateway.log", "mode": null, "text": false},
           {"path": "/var/lib/blackwell-gpu-node/sglang-gateway.pid", "mode": "0600", "text": false},
           {"path": "/var/lib/blackwell-gpu-node/sglang-gateway.json", "mode": "0600", "text": false}]
log_path:
  description: Its log with O(manager=module); null under systemd, whose journal keeps it.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import (
    StateRefused,
    resolve_manager,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import service
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway.host import (
    OPTIONS,
    Gateway,
    checked_settings,
    observed,
    process_restart_reasons,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import SystemdFailed


def main():
    module = AnsibleModule(
        argument_spec=dict(OPTIONS, state=dict(type="str", default="started",
                                               choices=["started", "restarted", "stopped"])),
        supports_check_mode=True,
    )
    params = module.params
    settings, problems = checked_settings(params)
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), problems=problems)

    gateway = Gateway(module)
    try:
        unit_state, recorded, ours, result = observed(gateway)
    except (StateRefused, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg=str(exc), changed=False)
    result["actions"] = []

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
    if ours and manager == "module":
        result["restart_reasons"] = process_restart_reasons(recorded, argv, user_account, params["log_path"])
    drop_process = ours and (manager != "module" or params["state"] == "restarted"
                             or bool(result.get("restart_reasons")))
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
    if manager is not None and not starts:
        # What runs stays; its files are set back to what its start left them (done here, or in check mode told).
        try:
            actions += gateway.settle_running(manager, text, module.check_mode)
        except (OSError, InvalidOption) as exc:
            module.fail_json(msg="The files of the running gateway could not be set back to their modes: %s" % exc,
                             **result)
    result.update(changed=bool(actions), actions=actions)
    if manager is not None:
        result.update(manager=manager, argv=argv, log_path=params["log_path"] if manager == "module" else None)
    if actions and not module.check_mode:
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
    if manager is not None and not module.check_mode:
        result["managed"] = gateway.managed(manager)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
