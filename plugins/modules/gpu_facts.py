#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Facts about a host's NVIDIA GPUs, driver and interconnect, also when there are none
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Asks C(nvidia-smi) with its machine-readable query for each GPU's index, name, UUID, compute capability,
    memory, PCIe generation and width (current and max) and persistence mode; reads the driver version, the CUDA
    version the driver supports, the kernel module's flavour (open or proprietary, from
    C(/proc/driver/nvidia/version)) and the interconnect from C(nvidia-smi topo -m) (NVLink pairs, or PCIe only).
  - Never fails on a host without a GPU, without C(nvidia-smi) or with a broken driver. RV(ansible_facts.gpu.state)
    says which, so that a later check can decide.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    support: full
options: {}
"""

EXAMPLES = r"""
- name: Learn the GPUs
  blackwell.gpu_node.gpu_facts:

- name: Refuse a host whose driver is broken
  ansible.builtin.assert:
    that: ansible_facts.gpu.state == 'ok'
    fail_msg: "GPU state is {{ ansible_facts.gpu.state }}: {{ ansible_facts.gpu.message }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host's.
  returned: always
  type: dict
  contains:
    gpu:
      description: The GPUs of the host.
      type: dict
      contains:
        state:
          description:
            - V(ok); V(no_nvidia_smi) (not installed); V(no_driver) (C(nvidia-smi) cannot talk to the driver,
              for example not loaded after an update that needs a reboot); V(driver_mismatch) (kernel module and
              user-space library differ, usually until a reboot); V(no_gpu); V(error) (anything else).
          type: str
          sample: ok
        message:
          description: What C(nvidia-smi) said when the state is not V(ok).
          type: str
        count:
          description: Number of GPUs.
          type: int
          sample: 8
        gpus:
          description: One entry per GPU.
          type: list
          elements: dict
          sample:
            - index: 0
              name: NVIDIA H200
              uuid: GPU-0bae265c-555b-5a0c-03c7-8551e62ae474
              compute_capability: "9.0"
              memory_total_mib: 143771
              pcie_gen_current: 5
              pcie_gen_max: 5
              pcie_width_current: 16
              pcie_width_max: 16
              persistence_mode: Enabled
              driver_version: 580.159.04
        driver_version:
          description: The driver version.
          type: str
          sample: 580.159.04
        cuda_driver_version:
          description: The CUDA version the driver supports.
          type: str
          sample: "13.0"
        kernel_module:
          description: V(open), V(proprietary), or null when no NVIDIA kernel module is loaded.
          type: str
        interconnect:
          description: V(nvlink), V(pcie), V(single) (one GPU) or V(none).
          type: str
        nvlink_pairs:
          description: "[gpu, peer, number of links] for each pair linked by NVLink."
          type: list
          elements: list
        topology:
          description: The C(nvidia-smi topo -m) matrix between GPUs, C(GPUi) to C(GPUj) to the link type.
          type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._nvidia_smi import (
    QUERY_FIELDS,
    kernel_module_flavour,
    parse_cuda_version,
    parse_query,
    parse_topology,
    state_of,
)

PROC_VERSION = "/proc/driver/nvidia/version"


def read_proc_version():
    try:
        with open(PROC_VERSION) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def gather(module):
    facts = dict(state="no_nvidia_smi", message="", count=0, gpus=[], driver_version=None, cuda_driver_version=None,
                 kernel_module=kernel_module_flavour(read_proc_version()), interconnect="none", nvlink_pairs=[],
                 topology={})
    nvidia_smi = module.get_bin_path("nvidia-smi")
    if nvidia_smi is None:
        facts["message"] = "nvidia-smi is not installed (no NVIDIA driver user space on this host)"
        return facts
    rc, out, err = module.run_command([nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS),
                                       "--format=csv,noheader,nounits"])
    facts["state"] = state_of(rc, out + err)
    if facts["state"] != "ok":
        facts["message"] = (out + err).strip()
        return facts
    facts["gpus"] = parse_query(out)
    facts["count"] = len(facts["gpus"])
    if facts["gpus"]:
        facts["driver_version"] = facts["gpus"][0]["driver_version"]
    rc, table, err = module.run_command([nvidia_smi])
    facts["cuda_driver_version"] = parse_cuda_version(table)
    rc, topo, err = module.run_command([nvidia_smi, "topo", "-m"])
    topology = parse_topology(topo) if rc == 0 else parse_topology("")
    facts.update(interconnect=topology["interconnect"], nvlink_pairs=topology["nvlink_pairs"],
                 topology=topology["matrix"])
    return facts


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts=dict(gpu=gather(module)))


if __name__ == "__main__":
    main()
