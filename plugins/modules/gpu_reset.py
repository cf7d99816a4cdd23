#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_reset
short_description: Reset the GPUs named, and no other, while no process holds them (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.health) playbook, which calls it; not meant for playbooks of your own.
  - Resets each GPU of O(gpus) with C(nvidia-smi -r -i <index>), one call per GPU, in their order; it stops at the
    first that fails, and RV(reset) lists those reset before it.
  - Before any reset, C(nvidia-smi --query-gpu=index,pci.bus_id) must list each GPU's bus id at its index, or
    nothing is reset (a GPU that fell off the bus shifts the indexes after it).
  - "A GPU is held by every process that C(nvidia-smi --query-compute-apps) lists on it and by every process that has
    its device file open (C(/dev/nvidia<minor>), the minor from the driver's
    C(/proc/driver/nvidia/gpus/<bus id>/information); where that file gives none, any GPU's device file counts).
    C(nvidia-persistenced), C(nv-hostengine) (DCGM) and C(dcgm-exporter) hold every GPU. While any process holds one
    of O(gpus), nothing is reset and the task fails naming each process and what it holds."
  - In check mode nothing is reset and nothing held is refused; RV(holders) says what holds the GPUs now.
  - Needs root, as C(nvidia-smi -r) does.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
options:
  gpus:
    description: The GPUs to reset, each by its index and bus id as M(blackwell.gpu_node.gpu_health_info) lists them.
    type: list
    elements: dict
    required: true
    suboptions:
      index:
        description: The GPU's index.
        type: int
        required: true
      bus_id:
        description: Its PCI bus id, V(00000000:3B:00.0).
        type: str
        required: true
  timeout:
    description: Seconds each C(nvidia-smi) call may take; it is killed then. More than 0.
    type: int
    default: 120
seealso:
  - module: blackwell.gpu_node.gpu_health_info
"""

EXAMPLES = r"""
- name: Reset GPU 0
  blackwell.gpu_node.gpu_reset:
    gpus:
      - {index: 0, bus_id: "00000000:3B:00.0"}
"""

RETURN = r"""
reset:
  description: The GPUs reset, each with what C(nvidia-smi -r) printed.
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, bus_id: "00000000:3B:00.0", output: GPU 00000000:3B:00.0 was successfully reset.}]
holders:
  description: The processes that hold the GPUs, each by its pid, its command's name and what it holds.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4242, name: nvidia-persistenced, holds: /dev/nvidia0}]
commands:
  description: The reset commands, run or (in check mode, or past a refusal) to be run; empty when nothing was
    checked.
  returned: always
  type: list
  elements: list
  sample: [[/usr/bin/nvidia-smi, -r, -i, "0"]]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import read_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import run_answered
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import process_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_reset import INFORMATION, reset
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.processes import device_holders

ARGUMENT_SPEC = dict(
    gpus=dict(type="list", elements="dict", required=True, options=dict(
        index=dict(type="int", required=True),
        bus_id=dict(type="str", required=True),
    )),
    timeout=dict(type="int", default=120),
)
# The driver's information file of a GPU is a few hundred bytes.
INFORMATION_BYTES = 16384


def read_information(bus_key):
    # A file that cannot be read gives no minor: every GPU's device file then counts.
    try:
        found = read_regular(INFORMATION % bus_key, INFORMATION_BYTES, cut=True)
    except (OSError, ValueError):
        return None
    return None if found is None else found["data"].decode("utf-8", "replace")


def name_of(pid):
    argv = process_argv(pid)
    return result_line(os.path.basename(argv[0])) if argv else "gone"


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if not params["gpus"]:
        module.fail_json(msg="gpus: name at least one GPU to reset")
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout=%d: give the seconds each nvidia-smi call may take, more than 0"
                         % params["timeout"])
    result = reset(params["gpus"], module.get_bin_path("nvidia-smi"),
                   lambda argv: run_answered(argv, params["timeout"]), read_information,
                   lambda patterns: device_holders(patterns, exclude=(os.getpid(),)), name_of, module.check_mode)
    problem = result.pop("problem")
    if problem:
        module.fail_json(msg=problem, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
