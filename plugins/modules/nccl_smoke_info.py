#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nccl_smoke_info
short_description: Run an NCCL all-reduce across the node's GPUs and compare its bus bandwidth with a floor
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Called by the C(blackwell.gpu_node.validate) playbook when C(gpu_node_validate_nccl) is true.
  - Starts one process per GPU (O(gpus)) from the interpreter of the virtualenv O(venv_path), as the virtualenv's owner
    (never as root, unless root owns it), each in an empty environment but for C(PATH), C(RANK), C(WORLD_SIZE),
    C(LOCAL_RANK), C(MASTER_ADDR=127.0.0.1) and C(MASTER_PORT) (a free port), so that every NCCL setting the
    processes have comes from what the C(blackwell.gpu_node.runtime_env) role rendered into the virtualenv.
  - Each process runs C(torch.distributed) all-reduce of float32 tensors over O(sizes) with the C(nccl) backend,
    checks the sum of the first one, and times the rest; the first process reports C(algbw) (bytes / time) and
    C(busbw) (C(algbw * 2(n-1)/n), as nccl-tests reports it), NCCL's version and the C(NCCL_*) variables it saw.
  - The bus bandwidth at the largest size is compared with the floor of O(floors) for the node's topology, the
    links, family and number of GPUs that O(gpu) shows, classified as C(runtime_env_nccl_profile=auto) classifies
    them. On one GPU the all-reduce still runs, but there is no link between GPUs, so no floor applies. A topology
    without a floor passes on the figures alone, and says so.
  - Fails, with the figures, when a process fails or does not finish within O(timeout) seconds (all of them are then
    killed, and the failed or hung ones named), when a sum is wrong, when a size is missing from the report, when
    the processes did not see O(expected_environment), or when the bus bandwidth is below the floor.
  - The all-reduce takes GPU memory (the largest size, NCCL's buffers and a CUDA context per GPU) and GPU time
    beside a running server, and its figures drop while the server is busy.
  - Changes nothing.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: Runs the all-reduce in check mode too; it changes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: debian
options:
  venv_path:
    description: The virtualenv with torch and the rendered NCCL environment (runtime_env_venv_path).
    type: path
    required: true
  gpu:
    description: The host's GPUs as C(blackwell.gpu_node.gpu_facts) gathers them (C(ansible_facts.gpu)).
    type: dict
    required: true
  gpus:
    description: How many GPUs take part, from the first; all of O(gpu) when not given.
    type: int
  sizes:
    description:
      - The all-reduce message sizes in bytes, each a multiple of 4. The bus bandwidth compared with the floor is the
        largest one's.
      - By default 128 KiB, 512 KiB and 2 MiB (SGLang's decode all-reduce, one bf16 hidden state per running
        request) and 256 MiB for the bandwidth.
    type: list
    elements: int
    default: [131072, 524288, 2097152, 268435456]
  floors:
    description:
      - The bus bandwidth floors, by topology; the runtime_env role's C(vars/nccl_floors.yml) lists the shipped ones
        with their sources.
      - Each has C(links) (V(nvswitch), V(nvlink) or V(pcie)), C(family) (V(blackwell), V(hopper), ...), C(gpus),
        C(busbw_gbps) and C(source); the first whose links, family and number of GPUs match the node's applies.
    type: list
    elements: dict
    default: []
  expected_environment:
    description:
      - The C(NCCL_*) variables the runtime_env role renders, name to value; the processes must see each of them.
        Not compared when not given.
    type: dict
  timeout:
    description: Seconds the whole run may take, from the first process's start to the last's end.
    type: int
    default: 300
notes:
  - With C(runuser), to run as the virtualenv's owner.
"""

EXAMPLES = r"""
- name: Look at the GPUs
  blackwell.gpu_node.gpu_facts:

- name: All-reduce across every GPU and compare with the floor of this topology
  blackwell.gpu_node.nccl_smoke_info:
    venv_path: /opt/ml-env
    gpu: "{{ ansible_facts.gpu }}"
    floors:
      - links: pcie
        family: blackwell
        gpus: 8
        busbw_gbps: 30
        source: https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/pcie-bandwidth.md
  register: nccl_smoke
"""

RETURN = r"""
passed:
  description: Whether the all-reduce ran on every GPU, summed right, and met the floor (where one applies).
  returned: always
  type: bool
summary:
  description: One line - the verdict, each size's time and bus bandwidth, NCCL's version.
  returned: always
  type: str
  sample: >-
    NCCL all-reduce on 8 blackwell GPUs (pcie) passed: busbw 38.12 GB/s at 256 MiB meets the floor of 30 GB/s for
    8 blackwell GPUs on pcie (https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/pcie-bandwidth.md).
    Figures: 128 KiB 24.1 us busbw 9.52 GB/s, 512 KiB 33.0 us busbw 27.80 GB/s, 2 MiB 91.2 us busbw 40.24 GB/s,
    256 MiB 12311.0 us busbw 38.12 GB/s; NCCL 2.28.9
problems:
  description: Why it failed; empty when it passed.
  returned: always
  type: list
  elements: str
figures:
  description: Per size, in bytes - C(us) (one all-reduce, microseconds), C(algbw) and C(busbw) (GB/s), C(correct).
  returned: always
  type: list
  elements: dict
  sample: [{size: 131072, us: 24.1, algbw: 5.44, busbw: 9.52, correct: true}]
busbw_gbps:
  description: The bus bandwidth at the largest size; null on one GPU or when that size was not measured.
  returned: always
  type: float
floor:
  description: The floor that applied, as given in O(floors); null when none did.
  returned: always
  type: dict
topology:
  description: C(links) (V(nvswitch), V(nvlink), V(pcie), V(single), V(unknown)), C(gpus) and C(families) of O(gpu).
  returned: always
  type: dict
world_size:
  description: How many processes (GPUs) took part.
  returned: always
  type: int
nccl:
  description: NCCL's version as torch reports it; null when the first process did not say.
  returned: always
  type: str
  sample: 2.28.9
torch:
  description: torch's version in the virtualenv; null when the first process did not say.
  returned: always
  type: str
environment:
  description: The C(NCCL_*) variables the first process saw; null when it did not say.
  returned: always
  type: dict
  sample: {NCCL_PROTO: LL, NCCL_ALGO: Ring}
seconds:
  description: How long the run took.
  returned: always
  type: float
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import owner_argv, venv_owner_uid
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.nccl_smoke import (
    DEFAULT_SIZES,
    OPTION,
    check_floors,
    launch,
    smoke,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import gpu_links


def checked_world(gpu, gpus):
    """The number of processes to start; InvalidOption when gpu shows none or fewer than gpus."""
    links, count, _families = gpu_links(gpu)
    if links == "unseen":
        raise InvalidOption("gpu: no GPU visible (gpu_facts state: %s)" % (gpu or {}).get("state", "not gathered"))
    if gpus is not None and not 1 <= gpus <= count:
        raise InvalidOption("gpus=%d: the host has %d GPU%s" % (gpus, count, "" if count == 1 else "s"))
    return count if gpus is None else gpus


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv_path=dict(type="path", required=True),
            gpu=dict(type="dict", required=True),
            gpus=dict(type="int"),
            sizes=dict(type="list", elements="int", default=list(DEFAULT_SIZES)),
            floors=dict(type="list", elements="dict", default=[]),
            expected_environment=dict(type="dict"),
            timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    params = module.params
    sizes = params["sizes"]
    try:
        if not sizes or any(size < 4 or size % 4 for size in sizes):
            raise InvalidOption("sizes: %s must be sizes in bytes, each a positive multiple of 4" % sizes)
        if params["timeout"] < 1:
            raise InvalidOption("timeout: must be at least 1 second")
        floors = check_floors(params["floors"])
        world = checked_world(params["gpu"], params["gpus"])
        owner_uid = venv_owner_uid(params["venv_path"])
        python = os.path.join(params["venv_path"], "bin", "python")
        # owner_argv first: it refuses an owner without a user name before any process starts.
        owner_argv(owner_uid, [python], OPTION)
    except InvalidOption as exc:
        module.fail_json(msg=str(exc))
    try:
        launched = launch(python, world, sizes, owner_uid, params["timeout"])
    except OSError as exc:
        module.fail_json(msg="the ranks could not start: %s" % exc)
    result = smoke(params["gpu"], world, sizes, launched, params["timeout"], floors,
                   params["expected_environment"])
    if not result["passed"]:
        module.fail_json(msg=result["summary"], changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
