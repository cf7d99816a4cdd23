#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runtime_env_state
short_description: Render the runtime_env role's environment into a virtualenv and prove it takes effect, in one call (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.runtime_env) role, which calls it; not meant for playbooks of your own.
  - Runs the interpreter of the virtualenv O(venv_path) as the virtualenv's owner (never as root) in an empty
    environment, reads what it sees for the names of O(environment) and where its site-packages is, and reads the
    files of O(files) there.
  - The owner is the first owner other than root of O(venv_path) itself, the directory it names, and its C(bin),
    C(bin/python) and C(lib); root only when root owns all of them.
  - Root writes into that site-packages and nowhere else. It must be the virtualenv's own
    C(lib/python3.N/site-packages), reached from the virtualenv without following any link, the virtualenv and each
    level below it the owner's (or root's). An interpreter whose C(sysconfig) paths point elsewhere (a C(.pth) file
    or C(sitecustomize.py) of the owner's can make it), a virtualenv link repointed at another user's directory, or
    a link at one of the files is refused before anything is written.
  - With O(render=true), each file of O(files) whose content, owner or mode differs is written, root's and mode
    C(0644), atomically through the directory's descriptor; then the interpreter is run again, and the module fails
    unless every variable of O(environment) has its value and the hook imported the rendered module.
  - With O(cache_root), it also keeps the JIT caches' directories, O(cache_root) and O(cache_directories) below it,
    the directories of O(cache_owner), mode C(0700); a missing level above O(cache_root) is made so too. Each level is
    entered from C(/) through its parent's descriptor, never through a link. A link or a file where a level should
    be, a directory there of another user, or a level above of a third user or writable by others (sticky ones
    excepted) is refused before anything is written.
  - With O(render=false) it changes nothing and only says whether the role has anything to do.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: Reports which files would be written; writes nothing and proves nothing.
  diff_mode:
    support: full
    details: The content of each file before and after.
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
  render:
    description: Write the files that differ and prove the environment takes effect (V(true)), or only look (V(false)).
    type: bool
    default: true
  cache_root:
    description: The directory of the JIT caches (runtime_env_cache_root); none kept without it.
    type: path
  cache_directories:
    description: The directories of the caches, relative to O(cache_root), each listed after its parent.
    type: list
    elements: str
    default: []
  cache_owner:
    description: The user whose caches they are (runtime_env_cache_owner); required with O(cache_root).
    type: str
  timeout:
    description:
      - Seconds each run of the interpreter may take, which also runs at most with 256 MiB of address space; past
        either it is killed and the module fails, naming any C(.pth) file of site-packages that is not a small
        regular file.
    type: int
    default: 60
"""

EXAMPLES = r"""
- name: Render the environment into the virtualenv and prove it takes effect
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
  description: Whether everything was in place and in effect before this call.
  returned: always
  type: bool
reasons:
  description: Why it was not converged; empty when it was.
  returned: always
  type: list
  elements: str
  sample: ["NCCL_PROTO is 'Simple', not 'LL'"]
written:
  description: The files written (in check mode, that would be written), their full paths.
  returned: always
  type: list
  elements: str
managed:
  description: The full path of each file of O(files) in the virtualenv's site-packages, where the role keeps
    them; empty when the interpreter could not be inspected.
  returned: always
  type: list
  elements: str
  sample: [/opt/ml-env/lib/python3.11/site-packages/00-blackwell-gpu-node-env.pth]
cache_directories:
  description: The cache directories created or given mode C(0700) (in check mode, that would be), their full paths.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/sglang/.cache/blackwell-gpu-node/cu130-3c7e0b1d9a4f/flashinfer]
hook:
  description: The file the interpreter imported the environment from, or null.
  returned: always
  type: str
  sample: /opt/ml-env/lib/python3.11/site-packages/_blackwell_gpu_node_env.py
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import run_bounded
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.jit_caches import settle_cache_directories
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    VenvRefused,
    observe_venv,
    render,
    to_write,
    unconverged_reasons,
    verify,
)

UNCHANGED = " Nothing was changed on the host."
# The inspection only starts the interpreter and prints what it sees: tens of MiB of address space.
INSPECT_MEMORY = 256 << 20


def cache_owner_ids(name):
    """(uid, gid) of the caches' owner, its primary group; InvalidOption naming runtime_env_cache_owner."""
    found = account(name) if name else None
    if found is None:
        raise InvalidOption("runtime_env_cache_owner=%s is not a user on this host: the JIT caches belong to the user "
                            "the server runs as (the role blackwell.gpu_node.service_user creates it)" % (name,))
    return found["uid"], found["gid"]


def look_at_caches(params):
    """(owner, changes, error) of the cache directories: what would change, or why they cannot be kept."""
    if params["cache_root"] is None:
        return None, [], None
    try:
        owner = cache_owner_ids(params["cache_owner"])
        return owner, settle_cache_directories(params["cache_root"], params["cache_directories"], owner), None
    except InvalidOption as exc:
        return None, [], str(exc)
    except OSError as exc:
        return None, [], "runtime_env_cache_root=%s: looking at the JIT cache directories failed: %s" % (
            params["cache_root"], exc.strerror or exc)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv_path=dict(type="path", required=True),
            script=dict(type="str", required=True),
            environment=dict(type="dict", required=True),
            files=dict(type="dict", required=True),
            render=dict(type="bool", default=True),
            cache_root=dict(type="path"),
            cache_directories=dict(type="list", elements="str", default=[]),
            cache_owner=dict(type="str"),
            timeout=dict(type="int", default=60),
        ),
        required_by=dict(cache_root=["cache_owner"]),
        supports_check_mode=True,
    )
    params = module.params
    venv_path, environment, files = params["venv_path"], params["environment"], params["files"]

    def run(argv):
        """The virtualenv's interpreter, bounded in time, memory and output: its owner can make it hang, read
        without end or print without end."""
        return run_bounded(argv, params["timeout"], INSPECT_MEMORY)

    observed = observe_venv(venv_path, params["script"], list(environment), run)
    owner, caches, cache_error = look_at_caches(params)
    reasons = unconverged_reasons(observed, environment, files) + (
        [cache_error] if cache_error else ["the JIT cache directory %s is %s" % change for change in caches])
    site_packages = (observed.get("venv") or {}).get("purelib")
    result = dict(changed=False, converged=not reasons, reasons=reasons, written=[], cache_directories=[],
                  hook=(observed.get("venv") or {}).get("hook"),
                  managed=[os.path.join(site_packages, name) for name in sorted(files)] if site_packages else [])
    if not params["render"] or not reasons:
        module.exit_json(**result)
    if observed.get("error") or cache_error:
        module.fail_json(msg="%s.%s" % (observed.get("error") or cache_error, UNCHANGED), **result)
    try:
        names = to_write(venv_path, observed, files)
    except VenvRefused as exc:
        module.fail_json(msg="%s.%s" % (exc, UNCHANGED), **result)
    result.update(changed=bool(names or caches), written=[os.path.join(site_packages, name) for name in names],
                  cache_directories=sorted(set(path for path, _what in caches)))
    if module._diff:
        result["diff"] = [dict(before_header=path, after_header=path,
                               before=(observed["files"].get(name) or {}).get("content", ""), after=files[name])
                          for name, path in zip(names, result["written"])]
    if module.check_mode:
        module.exit_json(**result)
    if caches:
        try:
            settle_cache_directories(params["cache_root"], params["cache_directories"], owner, create=True)
        except (InvalidOption, OSError) as exc:
            result.update(written=[])
            module.fail_json(msg="runtime_env_cache_root=%s: making the JIT cache directories failed: %s. Nothing was "
                                 "written into the virtualenv; a directory made before the failure stays, the "
                                 "user's own and empty." % (params["cache_root"], getattr(exc, "strerror", None) or exc),
                             **result)
    done = []
    try:
        render(venv_path, observed, files, names, done)
        problem, seen = verify(venv_path, observed, params["script"], environment, run)
    except (VenvRefused, InvalidOption, OSError) as exc:
        result.update(written=[os.path.join(site_packages, name) for name in done])
        module.fail_json(msg="%s=%s: rendering failed: %s. Written before it failed: %s." % (
            "runtime_env_venv_path", venv_path, getattr(exc, "strerror", None) or exc,
            ", ".join(result["written"]) or "nothing"), **result)
    result["hook"] = seen.get("hook")
    if problem:
        module.fail_json(msg=problem, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
