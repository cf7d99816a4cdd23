#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ml_stack_converged_info
short_description: Tell, in one call, whether the ml_stack role's virtualenv is already installed, verified and in place (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.ml_stack) role, which calls it; not meant for playbooks of your own.
  - Plans the stack profile's virtualenv from O(settings) and what its C(python) reports, as the
    C(blackwell.gpu_node.ml_stack) role does, then runs the virtualenv's interpreter as its owner (never as root)
    in an empty environment; it reads the installed versions and where they came from, imports torch, sgl_kernel,
    flashinfer and sglang each in an interpreter of its own, and runs C(pip check), as the role's verification does.
  - With O(lock), every distribution of the virtualenv is compared with the lock's wheels for the host's Python and
    machine (a distribution missing, at another version, or that the lock does not name is a reason, naming it),
    and the requirements file with their hashes is among the files compared.
  - With C(torch_from) of O(settings) (the role's C(ml_stack_torch_from)) and O(lock), the adopted tree is weighed
    as the role weighs it before a build (its C(inspect_torch.py) run as the virtualenv's owner with the tree's
    interpreter, reading the tree's metadata without importing torch, and every directory from C(/) to its
    site-packages and every entry of the tree looked at); a tree that does not fit is a reason, naming each
    problem. The virtualenv is then the one planned on the tree (its site-packages and its torch's version are
    part of the name); the distributions the tree stands in for must be the tree's, as the virtualenv sees them
    through its C(.pth) file (a file compared like the pins), and none of them the virtualenv's own; the import of
    torch and C(torch.version.cuda) are checked in the virtualenv.
  - RV(converged) is true only when the virtualenv holds exactly the profile and passes that verification, is its
    owner's, carries the completion marker, the pins (constraints file and C(pip.conf), root's) and the explanation
    of C(pip check) with exactly the content the role writes, mode C(0644); when nothing in it is another user's
    or writable by its group or others (one C(lstat) of each entry, no link followed); when every system package of
    C(system_packages) of O(settings) is installed; when the stable path points at it (O(activate)); and when no old
    virtualenv beyond O(keep) is left to remove. Anything else, or anything it cannot observe, is a reason in
    RV(reasons), and the role then runs all its tasks, whose checks name the problem.
  - Changes nothing and asks no package index.
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
  settings:
    description:
      - The role's settings as the role plans with them, named without the C(ml_stack_) prefix, as the role
        passes them; the plan checks them and names each variable that is wrong.
      - C(venv_path), C(venv_owner) (null for whoever runs the role), C(python), C(index_url), C(index_mirrors),
        C(pip_environment), C(offline), C(wheelhouse_path), C(wheelhouse_controller_path), C(system_packages) and
        C(torch_from) (null installs the profile's torch).
    type: dict
    required: true
  profile:
    description: The resolved stack profile (the stack role's C(stack_selected)).
    type: dict
    required: true
  lock:
    description: The profile's lock (the stack role's C(stack_selected_lock)); null for a profile without one.
    type: dict
  scripts:
    description:
      - The source of the role's C(inspect_python.py), C(inspect_stack.py) and C(inspect_torch.py) (needed only
        with C(torch_from) of O(settings)), by those file names.
    type: dict
    required: true
  activate:
    description: Whether the stable path must point at the profile's virtualenv (ml_stack_activate).
    type: bool
    default: true
  keep:
    description:
      - How many old virtualenvs are kept besides the current one (ml_stack_keep); null keeps every one.
      - Only with O(activate), as the role prunes only then.
    type: raw
  gpus_required:
    description: Whether an import that needs the NVIDIA driver must succeed (ml_stack_gpus_required).
    type: bool
    default: true
  timeout:
    description:
      - Seconds each run of the virtualenv's interpreter may take (the inspection imports torch and the stack, and
        runs C(pip check)); past it the run is killed and its output is a reason like any other.
    type: int
    default: 3600
"""

EXAMPLES = r"""
- name: Check whether the profile's virtualenv is already installed, verified and in place
  blackwell.gpu_node.ml_stack_converged_info:
    settings:
      venv_path: /home/sglang/ml-env
      venv_owner: sglang
      python: /usr/bin/python3
      index_url: https://pypi.org/simple
      index_mirrors: {}
      pip_environment: {}
      offline: false
      wheelhouse_path: /var/cache/blackwell-gpu-node/wheelhouse
      system_packages: [libnuma1]
    profile: "{{ stack_selected }}"
    scripts:
      inspect_python.py: "{{ lookup('ansible.builtin.file', 'inspect_python.py') }}"
      inspect_stack.py: "{{ lookup('ansible.builtin.file', 'inspect_stack.py') }}"
      inspect_torch.py: "{{ lookup('ansible.builtin.file', 'inspect_torch.py') }}"
    keep: 1
  register: ml_stack_converged
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
  sample: ["flashinfer-python is 0.6.3, the profile pins 0.6.4"]
report:
  description: What the role reports in C(ml_stack_report) for this virtualenv; null when not converged.
  returned: always
  type: dict
  sample:
    venv_path: /home/sglang/ml-env
    venv_dir: /home/sglang/ml-env.cu130-1a2b3c4d
    profile: cu130
    built: false
    active: true
    build_reasons: []
    repaired: []
    versions: {torch: 2.9.1+cu130}
    torch_cuda: "13.0"
    deliberate_pip_check: []
    notes: []
managed:
  description:
    - The files the role keeps in the profile's virtualenv, each once, as the check compared them (its full
      C(path), and C(root) when they are root's rather than the virtualenv owner's); the role's tasks write exactly
      these.
    - Empty when the virtualenv is to be built, which writes them all.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/home/sglang/ml-env.cu130-1a2b3c4d/pip.conf", "root": true},
           {"path": "/home/sglang/ml-env.cu130-1a2b3c4d/lib/python3.11/site-packages/blackwell-gpu-node-adopted-torch.pth",
            "root": true},
           {"path": "/home/sglang/ml-env.cu130-1a2b3c4d/ml-stack.json", "root": false}]
kept:
  description: The old virtualenvs kept besides the current one (with O(keep) set), newest first.
  returned: always
  type: list
  elements: str
"""

import posixpath

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account, user_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import run_bounded
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    converged_report,
    observe_stack,
    stack_unconverged_reasons,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            profile=dict(type="dict", required=True),
            lock=dict(type="dict"),
            scripts=dict(type="dict", required=True),
            activate=dict(type="bool", default=True),
            keep=dict(type="raw"),
            gpus_required=dict(type="bool", default=True),
            timeout=dict(type="int", default=3600),
        ),
        supports_check_mode=True,
    )
    params = module.params

    def run(argv):
        # An interpreter that does not exist is a reason like any other, not a failure of the check. The
        # virtualenv's code runs bounded in time and output: its owner can make it hang or print without end.
        try:
            return run_bounded(argv, params["timeout"])
        except OSError as exc:
            return 127, "", "%s: %s" % (argv[0], exc.strerror)

    observed = observe_stack(params["settings"], params["profile"], params["scripts"], run, account, user_name,
                             params["lock"])
    checked = stack_unconverged_reasons(observed, params["settings"].get("venv_owner"), params["activate"],
                                        params["keep"], params["gpus_required"])
    reasons = checked["reasons"]
    report = None if reasons else converged_report(observed, params["activate"], checked)
    venv_dir = (observed.get("plan") or {}).get("venv_dir")
    managed = [dict(path=posixpath.join(venv_dir, entry["name"]), root=entry["root"])
               for entry in checked["verdict"].get("files", [])]
    module.exit_json(changed=False, converged=not reasons, reasons=reasons, report=report, kept=checked["kept"],
                     managed=managed)


if __name__ == "__main__":
    main()
