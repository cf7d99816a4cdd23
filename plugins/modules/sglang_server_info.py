#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_server_info
short_description: Report on an SGLang server that sglang_server runs, its unit, its user and its port
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Reads the server that M(blackwell.gpu_node.sglang_server) recorded in O(state_dir) under O(name), and tells
    whether it runs, recognised the way M(blackwell.gpu_node.sglang_server) recognises its own (pid B(and) kernel
    start time B(and) boot; under systemd, C(systemctl show) of its unit, so that a restart by systemd or a reboot
    never makes it look gone). Changes nothing.
  - Beyond its pid, command line (secrets masked) and log, it reports who holds O(host):O(port), the user the
    server runs as and the one it was started as, its unit's state and restarts under systemd, and who other than
    its owner can write to the virtualenv it runs from.
  - A state file that cannot be trusted (not valid JSON, a field missing, pid 1 or below, a O(state_dir) that
    another user can write) fails the task naming the file, as it does for M(blackwell.gpu_node.sglang_server).
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.port
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
options:
  name:
    description:
      - Name of the server instance on the host, as given to M(blackwell.gpu_node.sglang_server).
      - 1 to 64 letters, digits, V(_), V(.) or V(-), starting with a letter or digit, without V(..).
    type: str
    default: sglang
  state_dir:
    description:
      - Directory of the pid and state files. Not a symbolic link.
      - Root's at every level and writable by root alone, or refused.
  host:
    description: The address whose O(port) RV(port_state) tells of. Must resolve to an address of this host.
    type: str
    default: 127.0.0.1
  port:
    description: The port RV(port_state) tells of.
  secret_flags:
    description:
      - Further flags whose values are secrets, besides C(--api-key), C(--admin-api-key) and those the recorded
        launch named; their values are masked in RV(argv).
    type: list
    elements: str
    default: []
seealso:
  - module: blackwell.gpu_node.sglang_server
  - module: blackwell.gpu_node.sglang_diagnosis
"""

EXAMPLES = r"""
- name: Ask for the server's state
  blackwell.gpu_node.sglang_server_info:
    name: sglang
  register: server

- name: Ensure it runs as its service user
  ansible.builtin.assert:
    that:
      - server.running
      - server.user == server.expected_user
"""

RETURN = r"""
running:
  description: Whether the recorded server runs.
  returned: always
  type: bool
pid:
  description: Pid of the server (the leader of its process group; under systemd, the unit's main pid).
  returned: when running
  type: int
argv:
  description: The recorded command line, secrets masked.
  returned: when a server is recorded
  type: list
  elements: str
log_path:
  description: The log file.
  returned: when a server is recorded
  type: str
offset:
  description: Size of the log when the server was launched; where its own lines begin.
  returned: when running
  type: int
stale_pid:
  description: Pid of a recorded server that is no longer running (crashed, its pid reused, or the host rebooted).
  returned: when a server is recorded that does not run
  type: int
port_state:
  description:
    - Whether O(host):O(port) can be bound (V(free)), is held by this instance's running server (V(ours)),
      or by another process (V(in_use)).
  returned: always
  type: str
  sample: free
manager:
  description: The manager the recorded server runs under.
  returned: when a server is recorded
  type: str
  sample: systemd
user:
  description: The user the running server's main process runs as (from C(/proc)).
  returned: when running
  type: str
  sample: sglang
expected_user:
  description: The user the recorded server was started as (V(root) for a server started without a user).
  returned: when a server is recorded
  type: str
unit:
  description: The recorded systemd unit.
  returned: under systemd
  type: str
unit_enabled:
  description: Whether the unit is enabled at boot.
  returned: under systemd
  type: bool
restarts:
  description: How often systemd restarted the unit (C(NRestarts)).
  returned: under systemd
  type: int
active_state:
  description: systemd's C(ActiveState) of the unit (V(active), V(activating), V(failed)...).
  returned: under systemd
  type: str
sub_state:
  description: systemd's C(SubState) of the unit (V(running), V(auto-restart)...).
  returned: under systemd
  type: str
venv:
  description:
    - The virtualenv the recorded server runs from (two levels above its interpreter), its owner, and up to 20
      entries (links not followed) writable by a user other than the owner or root - group- or
      world-writable, or owned by another user. C(complete) is false when the walk stopped early.
  returned: when the recorded virtualenv exists
  type: dict
  sample: {path: /opt/ml-env, owner: sglang, writable_by_others: [], complete: true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import BadState, SystemdFailed
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.status import (
    READ_OPTIONS,
    Recorded,
    read_problems,
)


def main():
    module = AnsibleModule(argument_spec=dict(READ_OPTIONS), supports_check_mode=True)
    params = module.params
    problems = read_problems(params)
    if problems:
        module.fail_json(msg="; ".join(problems), changed=False)
    try:
        server = Recorded(module)
    except (BadState, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg=str(exc), changed=False)
    result = server.result()
    try:
        result.update(server.status(params["host"], params["port"]))
    except InvalidOption as exc:
        module.fail_json(msg=str(exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
