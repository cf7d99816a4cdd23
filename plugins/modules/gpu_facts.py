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
  - Tells whether the GPUs are on an NVSwitch fabric (HGX and DGX boards) and their NVLink generation, from the
    switches the C(nvidia-nvswitch) driver holds (C(/sys/bus/pci/drivers/nvidia-nvswitch)), the GPUs' fabric state
    (the C(Fabric) sections of C(nvidia-smi -q)) and the NVLinks of C(nvidia-smi topo -m).
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
          description:
            - What C(nvidia-smi) said when the state is not V(ok), on one line without terminal escape sequences and
              control characters, cut to 2 KiB with the number of bytes cut said at its end.
          type: str
        count:
          description: Number of GPUs.
          type: int
          sample: 8
        gpus:
          description:
            - One entry per GPU, the first 256 C(nvidia-smi) lists.
            - Each value is shown without terminal escape sequences and control characters, cut to 256 bytes; a number
              of more than 12 digits stays text.
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
          description:
            - The driver version, from the query's C(driver_version) field or, where that is empty, the table
              header's C(Driver Version:) (C(KMD Version:) from the 610 driver branch on).
          type: str
          sample: 580.159.04
        cuda_driver_version:
          description: The CUDA version the driver supports, from the table header's C(CUDA Version:) (C(CUDA UMD Version:) from the 610 driver branch on).
          type: str
          sample: "13.0"
        kernel_module:
          description: V(open), V(proprietary), or null when no NVIDIA kernel module is loaded.
          type: str
        kernel_module_version:
          description: Version of the loaded NVIDIA kernel module, from C(/proc/driver/nvidia/version); null when none is loaded.
          type: str
          sample: 580.159.04
        kernel_module_installed_version:
          description:
            - Version of the NVIDIA kernel module installed for the running kernel (C(modinfo -F version nvidia));
              null when none is installed or C(modinfo) is missing.
            - When it differs from RV(ansible_facts.gpu.kernel_module_version), or a module is installed but none
              is loaded, the driver was updated and the host needs a reboot.
          type: str
          sample: 580.159.04
        interconnect:
          description: V(nvlink), V(pcie), V(single) (one GPU) or V(none).
          type: str
        nvlink_pairs:
          description: "[gpu, peer, number of links] for each pair linked by NVLink."
          type: list
          elements: list
        topology:
          description:
            - The C(nvidia-smi topo -m) matrix between GPUs, C(GPUi) to C(GPUj) to the link type.
            - A GPU is C(GPU) and its index of at most 4 digits; the first 256 GPUs of the table are read, of its first
              MiB and 2048 lines, and a line of more than 16384 characters is left out.
          type: dict
        nvswitch:
          description:
            - V(true) when the GPUs are on an NVSwitch fabric, as on HGX and DGX boards; the C(nvidia-nvswitch)
              driver holds switches on this host (RV(ansible_facts.gpu.nvswitch_devices)), a GPU has registered with a
              fabric (RV(ansible_facts.gpu.fabric) state C(Not Started), C(In Progress) or C(Completed)), or a GPU
              shows more NVLinks to its peers than a GPU has (18), so its peers are behind switches.
            - V(false) when the driver answered and none of that is so; null when it did not (state not V(ok)).
            - Such hosts need NVIDIA Fabric Manager at the driver's exact version where the switches are this host's
              (bare metal), and NVIDIA's NVLink subnet manager C(nvlsm) beside it with NVLink 5 (fourth generation
              NVSwitches, HGX B200); in a virtual machine the hypervisor manages the fabric.
          type: bool
          sample: true
        nvswitch_devices:
          description:
            - PCI addresses of the NVSwitches bound to this host's C(nvidia-nvswitch) driver; empty in a virtual
              machine given GPUs of an NVSwitch board, and where the driver holds none.
          type: list
          elements: str
          sample: ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
        nvlink_generation:
          description:
            - The NVLink generation of GPUs that have NVLink or an NVSwitch fabric, by compute capability (V100 2,
              A100 3, H100 and H200 4, B200 and B300 5); null without NVLink or for another GPU.
          type: int
          sample: 4
        fabric:
          description:
            - The fabric state and status (C(nvidia-smi -q), section C(Fabric)) of the GPU furthest from a settled
              fabric (state C(Not Started) before C(In Progress) before C(Completed); a status other than
              C(Success) first), else of the first GPU; null values for GPUs without a fabric (C(N/A)), null
              where the driver reports none (before Hopper's drivers, or without GPUs).
            - C(Completed) with C(Success) means the fabric is up; C(Not Started) on an NVSwitch host means Fabric
              Manager is not running, and CUDA fails with error 802 until it does.
          type: dict
          sample: {state: Completed, status: Success}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import gather_host


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts=dict(gpu=gather_host(module)))


if __name__ == "__main__":
    main()
