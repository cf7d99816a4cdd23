#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runtime_env_state
short_description: Tell, in one call, whether the runtime_env role's environment is already in place and in effect
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Looks at the virtualenv O(venv_path), runs its interpreter as the virtualenv's owner (never as root) in an
    empty environment, reads the values it sees for the names of O(environment), and reads the files the
    C(blackwell.gpu_node.runtime_env) role writes into its site-packages.
  - RV(converged) is true only when every value takes effect through the hook and every file of O(files) is a
    regular file, root's, mode C(0644), with exactly that content. Anything else, or anything it cannot observe,
    is a reason in RV(reasons), and the role then runs all its tasks, whose checks name the problem.
  - Changes nothing.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: debian
options:
  venv_path:
    description: The virtualenv (runtime_env_venv_path).
    type: path
    required: true
  script:
    description: The Python source the interpreter runs to report what it sees (the role's C(inspect_venv.py)).
    type: str
    required: true
  environment:
    description: The rendered environment, name to value.
    type: dict
    required: true
  files:
    description: The content of each file the role writes into site-packages, by file name.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check whether the environment already takes effect
  blackwell.gpu_node.runtime_env_state:
    venv_path: /opt/ml-env
    script: "{{ lookup('ansible.builtin.file', 'inspect_venv.py') }}"
    environment: {CUDA_HOME: /usr/local/cuda-13.0}
    files:
      00-blackwell-gpu-node-env.pth: "import _blackwell_gpu_node_env\n"
  register: runtime_env_state
"""

RETURN = r"""
converged:
  description: Whether the role has nothing to do on this host.
  returned: always
  type: bool
reasons:
  description: Why it is not converged; empty when it is.
  returned: always
  type: list
  elements: str
  sample: ["NCCL_PROTO is 'Simple', not 'LL'"]
hook:
  description: The file the interpreter imported the environment from, or null.
  returned: always
  type: str
  sample: /opt/ml-env/lib/python3.11/site-packages/_blackwell_gpu_node_env.py
"""

import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    observe_venv,
    unconverged_reasons,
)


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv_path=dict(type="path", required=True),
            script=dict(type="str", required=True),
            environment=dict(type="dict", required=True),
            files=dict(type="dict", required=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    observed = observe_venv(
        params["venv_path"],
        params["script"],
        list(params["environment"]),
        module.run_command,
        user_name,
    )
    reasons = unconverged_reasons(observed, params["environment"], params["files"])
    hook = (observed.get("venv") or {}).get("hook")
    module.exit_json(changed=False, converged=not reasons, reasons=reasons, hook=hook)


if __name__ == "__main__":
    main()
