#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cuda_converged_info
short_description: Tell, in one call, whether the cuda role has nothing to do on a host (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.cuda) role, which calls it; not meant for playbooks of your own.
  - Gathers the facts the C(blackwell.gpu_node.cuda) role needs (Ansible's C(min) and C(virtual) subsets, as
    M(ansible.builtin.setup) does) and returns them, so that the role does not gather them in a task of its own.
  - Decides whether the role's preflight would pass on this host, and whether its repository, toolkit,
    registration and linker tasks would all change nothing.
  - Reads the toolkit's and C(gpg)'s packages with C(dpkg-query), the repository's versions with
    C(apt-cache madison), the keyring with C(gpg), the keys apt trusts with C(apt-key) (only when
    O(revoked_key_ids) is not empty), the C(cuda) alternative, the link C(/usr/local/cuda) (which must point at
    C(/etc/alternatives/cuda) where there is a C(cuda) alternative, at O(cuda_home) where there is none), the
    repository's list, the keyring and the files of O(registration_files) without following links,
    C(/etc/ld.so.conf.d), and what the linker resolves for CUDA's runtime and NVRTC (by running O(linked_script)
    with the module's interpreter).
  - What the role keeps on the host (packages, its state directory, the keyring, the repository's list, the
    C(cuda) alternative, C(/usr/local/cuda), the registration files) is declared once, in RV(managed); the check
    reads and compares exactly those, beside what the role's tasks check (the keyring's key, the revoked keys,
    the repository's versions, stale linker entries, the linker's resolution).
  - RV(converged) is true only when everything is as the role leaves it. Anything else, or anything it cannot
    observe, is a reason in RV(reasons), and the role then runs all its tasks, whose checks name the problem.
  - The driver's and Fabric Manager's tasks are not covered; the role runs them whatever this module returns.
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
  repo_base_url:
    description: Where NVIDIA's repositories are (cuda_repo_base_url); the host's OS and architecture complete it.
    type: str
    required: true
  repo_architectures:
    description: NVIDIA's name for each architecture it has a repository for, by the C(architecture) fact.
    type: dict
    required: true
  supported_os:
    description: The stack profile's C(operating_systems).
    type: list
    elements: str
    required: true
  supported_architectures:
    description: The stack profile's C(architectures).
    type: list
    elements: str
    required: true
  cuda_home:
    description: The installation (cuda_home).
    type: str
    required: true
  cuda_series:
    description: The stack profile's CUDA version, like V(13.0).
    type: str
    required: true
  driver_install:
    description: Whether the role installs the driver (cuda_driver_install).
    type: bool
    required: true
  driver_branch_min:
    description: The oldest driver branch the stack's CUDA runs on.
    type: int
    required: true
  gpu:
    description: The C(ansible_facts.gpu) that M(blackwell.gpu_node.gpu_facts) gathered; null when not read.
    type: dict
  adopt_existing:
    description: Whether a CUDA found in cuda_home is adopted (cuda_adopt_existing).
    type: bool
    required: true
  toolkit_package:
    description: The toolkit package (cuda_toolkit_package).
    type: str
    required: true
  toolkit_version:
    description: Its version (cuda_toolkit_version).
    type: str
    required: true
  hold:
    description: Whether the toolkit is held (cuda_hold).
    type: bool
    required: true
  key_fingerprint:
    description: The repository key's pinned fingerprint (cuda_repo_key_fingerprint).
    type: str
    required: true
  revoked_key_ids:
    description: Keys apt must no longer trust (cuda_repo_revoked_key_ids).
    type: list
    elements: str
    required: true
  keyring:
    description: The keyring apt trusts for the repository.
    type: path
    required: true
  exported_key:
    description: The role's export of the pinned key, of which O(keyring) is a copy.
    type: path
    required: true
  state_dir:
    description: The role's state directory, mode C(0755).
    type: path
    required: true
  registered:
    description: Whether the role registers CUDA with the linker and login shells (cuda_register).
    type: bool
    required: true
  registration_files:
    description: The content of each file the registration writes, by path.
    type: dict
    required: true
  linked_script:
    description: The Python source that reports what the linker resolves (the role's C(linked_cuda.py)).
    type: str
    required: true
  linker_conf_dir:
    description: The dynamic linker's configuration directory, searched for entries of another CUDA major version.
    type: path
    default: /etc/ld.so.conf.d
"""

EXAMPLES = r"""
- name: Check whether the cuda role has anything to do
  blackwell.gpu_node.cuda_converged_info:
    repo_base_url: https://developer.download.nvidia.com/compute/cuda/repos
    repo_architectures: {x86_64: x86_64, aarch64: sbsa}
    supported_os: [debian12, ubuntu2404]
    supported_architectures: [x86_64]
    cuda_home: /usr/local/cuda-13.0
    cuda_series: "13.0"
    driver_install: false
    driver_branch_min: 580
    gpu: "{{ ansible_facts.gpu }}"
    adopt_existing: true
    toolkit_package: cuda-toolkit-13-0
    toolkit_version: 13.0.1-1
    hold: true
    key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
    revoked_key_ids: [F60F4B3D7FA2AF80]
    keyring: /usr/share/keyrings/cuda-archive-keyring.gpg
    exported_key: /var/lib/blackwell-gpu-node/cuda/cuda-repository-key.gpg
    state_dir: /var/lib/blackwell-gpu-node/cuda
    registered: true
    registration_files:
      /etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf: "/usr/local/cuda-13.0/lib64\n"
    linked_script: "{{ lookup('ansible.builtin.file', 'linked_cuda.py') }}"
  register: cuda_converged
"""

RETURN = r"""
converged:
  description: Whether the role's preflight passes and its repository, toolkit, registration and linker tasks have
    nothing to do on this host.
  returned: always
  type: bool
reasons:
  description: Why it is not converged; empty when it is.
  returned: always
  type: list
  elements: str
  sample: ["cuda-toolkit-13-0 is hold ok installed at '13.0.0-1', not installed at 13.0.1-1"]
adopted:
  description: Whether the role adopts the CUDA in cuda_home rather than installing its toolkit package (O(adopt_existing),
    a CUDA runtime in O(cuda_home), and O(toolkit_package) not installed by dpkg).
  returned: always
  type: bool
managed:
  description:
    - Everything the role keeps on this host, each once, in the order its tasks keep it; the check compares
      exactly these with the host.
    - Each has a C(kind) (C(package), C(directory), C(file), C(alternative) or C(link)), the C(part) of the role
      that keeps it (C(repository), C(toolkit) or C(registration)), its C(path) or C(name), and what the role
      leaves there (C(version) and dpkg's C(selection) of a package, the C(mode) of a directory or of a file, the
      C(value) of an alternative, the C(target) of a link). A file is root's, with its C(content), or the
      C(source) file on the host it is a copy of (for the keyring, the key exported from the download).
    - The repository's and the toolkit's are left out where the role adopts the CUDA it found, and the
      registration's where O(registered) is false.
    - The role's repository and toolkit tasks keep exactly the things of their part, as listed here.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "package", "part": "toolkit", "name": "cuda-toolkit-13-0", "version": "13.0.1-1",
            "selection": "hold"},
           {"kind": "link", "part": "registration", "path": "/usr/local/cuda", "target": "/etc/alternatives/cuda"},
           {"kind": "file", "part": "repository", "path": "/usr/share/keyrings/cuda-archive-keyring.gpg",
            "mode": "0644", "source": "/var/lib/blackwell-gpu-node/cuda/cuda-repository-key.gpg"},
           {"kind": "file", "part": "registration", "path": "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf",
            "mode": "0644", "content": "/usr/local/cuda-13.0/lib64\n"}]
linked:
  description: What the linker resolves for CUDA's runtime and NVRTC, as the role's verification reads it; null
    when O(registered) is false or it could not be read.
  returned: always
  type: dict
  sample: {"cache": {"libcudart.so.13": ["/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13.0.96"]},
           "cudart_version": "13.0", "nvrtc_version": "13.0"}
platform:
  description: The host's OS and architecture, and NVIDIA's name for the architecture (empty when it has none).
  returned: always
  type: dict
  sample: {"os_id": "debian12", "architecture": "x86_64", "repo_architecture": "x86_64"}
repository:
  description: The repository's address for this host; the list the role writes for it is in RV(managed).
  returned: always
  type: dict
  sample: {"url": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"}
ansible_facts:
  description: Ansible's C(min) and C(virtual) facts, as M(ansible.builtin.setup) gathers them.
  returned: always
  type: dict
  sample: {"distribution": "Debian", "virtualization_type": "docker", "virtualization_role": "guest"}
"""

import shutil
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts.compat import ansible_facts

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.state import (
    adopted,
    managed,
    observe_host,
    platform_settings,
    unconverged_reasons,
)

# What the role's decisions and its driver and fabric tasks read: the distribution, the architecture, the Python,
# the service manager and whether the host is a container.
FACT_SUBSETS = ["!all", "min", "virtual"]


def runner(module):
    """module.run_command, except that a command the host lacks (gpg before the role installs it, apt-key where
    apt dropped it) is an answer the check reads as unobserved, not a failure of the module."""
    def run(argv):
        if shutil.which(argv[0]) is None:
            return 127, "", "%s: command not found" % argv[0]
        return module.run_command(argv)
    return run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_base_url=dict(type="str", required=True),
            repo_architectures=dict(type="dict", required=True),
            supported_os=dict(type="list", elements="str", required=True),
            supported_architectures=dict(type="list", elements="str", required=True),
            cuda_home=dict(type="str", required=True),
            cuda_series=dict(type="str", required=True),
            driver_install=dict(type="bool", required=True),
            driver_branch_min=dict(type="int", required=True),
            gpu=dict(type="dict"),
            adopt_existing=dict(type="bool", required=True),
            toolkit_package=dict(type="str", required=True),
            toolkit_version=dict(type="str", required=True),
            hold=dict(type="bool", required=True),
            key_fingerprint=dict(type="str", required=True, no_log=False),
            revoked_key_ids=dict(type="list", elements="str", required=True, no_log=False),
            keyring=dict(type="path", required=True, no_log=False),
            exported_key=dict(type="path", required=True, no_log=False),
            state_dir=dict(type="path", required=True),
            registered=dict(type="bool", required=True),
            registration_files=dict(type="dict", required=True),
            linked_script=dict(type="str", required=True),
            linker_conf_dir=dict(type="path", default="/etc/ld.so.conf.d"),
        ),
        supports_check_mode=True,
    )
    facts = ansible_facts(module, gather_subset=FACT_SUBSETS)
    settings = dict(module.params, **platform_settings(module.params, facts))
    observed = observe_host(settings, runner(module), sys.executable)
    reasons = unconverged_reasons(settings, observed)
    module.exit_json(
        changed=False,
        converged=not reasons,
        reasons=reasons,
        adopted=adopted(settings, observed),
        managed=managed(settings, observed),
        linked=observed["linked"],
        platform=dict((name, settings[name]) for name in ("os_id", "architecture", "repo_architecture")),
        repository=dict(url=settings["repository"]["url"]),
        # Named as setup names them, so that they land in ansible_facts the same way.
        ansible_facts=dict(("ansible_" + name, value) for name, value in facts.items()),
    )


if __name__ == "__main__":
    main()
