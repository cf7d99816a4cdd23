#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_snapshot_info
short_description: Tell which stack a GPU node runs, and which snapshot of it is recorded
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Reports, in the shape of a snapshot, what M(blackwell.gpu_node.node_snapshot) with C(state=recorded) would
    record (the stable virtualenv link and its profile, C(/usr/local/cuda) or the C(cuda) alternative, the cuda
    role's linker and login-shell files, the disabled linker files, the server's command line with its secrets
    masked), and the snapshot recorded under O(name). Changes nothing.
  - It reads the host as M(blackwell.gpu_node.node_snapshot) does, with the same code - the virtualenv as its
    owner's, without following a link below the stable path, its marker as a small regular file.
  - The recorded snapshot is shown only when a restore would accept it (root's, writable by root alone at every
    level, its checksum and every value as a recording writes them); otherwise a warning says why, and RV(snapshot)
    is null.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.server_state_dir
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
  name:
    description: The snapshot's name, its file C(<state_dir>/snapshots/<name>.json).
    type: str
    default: pre-upgrade
  venv_path:
    description: The stable link of the ml_stack role (C(ml_stack_venv_path)).
    type: path
    required: true
  state_dir:
    description: Where snapshots are kept, under C(snapshots/); only read.
  server_name:
    description: The sglang_server instance whose recorded command line is shown.
    type: str
    default: sglang
seealso:
  - module: blackwell.gpu_node.node_snapshot
"""

EXAMPLES = r"""
- name: Look at the stack and the server command the node runs
  blackwell.gpu_node.node_snapshot_info:
    venv_path: /home/sglang/ml-env
  register: stack

- name: Say which profile it runs
  ansible.builtin.debug:
    msg: "{{ stack.current.venv.profile }}"
"""

RETURN = r"""
current:
  description: What the node runs, in the shape of a snapshot.
  returned: always
  type: dict
  sample:
    venv: {path: /home/sglang/ml-env, target: ml-env.cu128-1a2b3c4d, profile: cu128}
    cuda: {path: /usr/local/cuda, alternative: /usr/local/cuda-12.8, target: /etc/alternatives/cuda}
    files: {/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf: "...", /etc/profile.d/blackwell-gpu-node-cuda.sh: "..."}
    disabled_linker_files: [987_cuda-13.conf.disabled-by-blackwell-gpu-node]
    server: {argv: [/home/sglang/ml-env/bin/python, -m, sglang.launch_server, --api-key, "********"], env_digest: "..."}
snapshot:
  description: The recorded snapshot, when a restore would accept it; null otherwise.
  returned: always
  type: dict
path:
  description: The snapshot's file.
  returned: always
  type: str
  sample: /var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import name_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot_node import (
    READ_OPTIONS,
    information,
    snapshot_path,
)


def main():
    module = AnsibleModule(argument_spec=dict(READ_OPTIONS), supports_check_mode=True)
    problem = name_problem(module.params["name"])
    if problem:
        module.fail_json(msg=problem)
    path = snapshot_path(module.params)
    try:
        result = information(module)
    except InvalidOption as exc:
        module.fail_json(msg=str(exc), path=path)
    except OSError as exc:
        module.fail_json(msg="node_snapshot_info failed on %s: %s" % (exc.filename or path, exc.strerror or exc),
                         path=path)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
