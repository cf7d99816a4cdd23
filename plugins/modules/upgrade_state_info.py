#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: upgrade_state_info
short_description: Whether an upgrade holds a node, or left a switch on it unfinished (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.site) and C(blackwell.gpu_node.serve) playbooks, which call it; not meant
    for playbooks of your own.
  - Reads the lock and the switch record that M(blackwell.gpu_node.upgrade_state) keeps in C(<state_dir>/upgrade/),
    with the same checks (root's and C(0700), every level from C(/) root's and writable by root alone, a line of
    JSON read as a regular file of at most 16 KiB, never through a link), and changes nothing.
  - With O(require_free=true) it fails, naming the run and what to do, while any run holds the lock or a switch
    record is left.
  - A lock or record that is not one M(blackwell.gpu_node.upgrade_state) writes is refused, naming the file and the
    fix.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: debian
options:
  state_dir:
    description: The directory that holds C(upgrade/).
  require_free:
    description: Fail while a run holds the lock or a switch record is left.
    type: bool
    default: false
seealso:
  - module: blackwell.gpu_node.upgrade_state
"""

EXAMPLES = r"""
- name: Ensure no upgrade holds the node or left a switch on it unfinished
  blackwell.gpu_node.upgrade_state_info:
    require_free: true
"""

RETURN = r"""
holder:
  description: The run that holds the lock; null when none.
  returned: always
  type: dict
  sample: {id: 9f0c2e4b6a8d4f10b2c3d4e5f6a7b8c9, controller: ops-1, pid: 4242, pid_started: "8812731", user: ops,
           started: 1796302000.5}
record:
  description: The switch record on the node; null when none.
  returned: always
  type: dict
  sample: {run: 9f0c2e4b6a8d4f10b2c3d4e5f6a7b8c9, from: cu128, to: cu130, from_venv: ml-env.cu128-1a2b3c4d,
           to_venv: ml-env.cu130-5e6f7a8b, stopped_at: 1796302061.2}
message:
  description: What a run holding the node or a record left means, and what to do; empty when neither.
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade_node import lock_path, observed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state_dir=dict(type="path", default=STATE_DIR),
            require_free=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        holder, record, message = observed(params["state_dir"], time.time())
    except InvalidOption as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg="upgrade_state_info failed on %s: %s" % (
            exc.filename or lock_path(params["state_dir"]), exc.strerror or exc))
    if params["require_free"] and message:
        module.fail_json(msg=message, holder=holder, record=record, message=message)
    module.exit_json(changed=False, holder=holder, record=record, message=message)


if __name__ == "__main__":
    main()
