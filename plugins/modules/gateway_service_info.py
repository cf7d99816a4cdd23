#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gateway_service_info
short_description: Check the model gateway's settings, and tell what runs it on a host (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.gateway) role, which calls it; not meant for playbooks of your own.
  - Checks every setting as M(blackwell.gpu_node.gateway_service) does, each problem naming its role variable
    (C(gateway_<option>)), and fails naming them all.
  - Tells what runs the gateway, read as M(blackwell.gpu_node.gateway_service) reads it - the unit
    C(sglang-gateway.service) in O(systemd_unit_dir) and what systemd says of it, or the process recorded in
    O(state_dir) (recognised by pid, start time and boot). Changes nothing.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.gateway_service
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
seealso:
  - module: blackwell.gpu_node.gateway_service
"""

EXAMPLES = r"""
- name: Check the gateway's settings and look at what runs
  blackwell.gpu_node.gateway_service_info:
    admin_key: "{{ gateway_admin_key }}"
  register: gateway
"""

RETURN = r"""
manager:
  description: The manager of what runs (V(systemd) or V(module)), or null when nothing runs.
  returned: always
  type: str
  sample: module
running:
  description: Whether the gateway runs.
  returned: always
  type: bool
pid:
  description: Its main process, when it runs.
  returned: always
  type: int
argv:
  description: The command line of the process the module runs (no key is ever on it); empty under systemd.
  returned: always
  type: list
  elements: str
log_path:
  description: Its log with O(manager=module); null under systemd, whose journal keeps it.
  returned: always
  type: str
problems:
  description: The settings' problems, each naming its role variable.
  returned: when a setting is refused
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import StateRefused
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway.host import (
    OPTIONS,
    Gateway,
    checked_settings,
    observed,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import SystemdFailed


def main():
    module = AnsibleModule(argument_spec=dict(OPTIONS), supports_check_mode=True)
    _settings, problems = checked_settings(module.params)
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), problems=problems)
    try:
        _unit_state, _recorded, _ours, result = observed(Gateway(module))
    except (StateRefused, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
