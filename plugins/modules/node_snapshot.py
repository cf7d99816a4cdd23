#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_snapshot
short_description: Record which stack a GPU node runs, and put it back exactly
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Everything that decides which stack a node runs is a link or a small file, so that switching stacks and
    switching back are a few renames. This module records them before an upgrade and restores them on a rollback.
  - "Recorded: the target of the stable virtualenv link O(venv_path) (and the profile in its C(ml-stack.json));
    C(/usr/local/cuda)'s target, or the C(cuda) alternative's value where one manages it; the cuda role's
    C(/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf) and C(/etc/profile.d/blackwell-gpu-node-cuda.sh);
    which C(/etc/ld.so.conf.d) files carry the C(.disabled-by-blackwell-gpu-node) suffix; the server's command
    line from the sglang_server state file, secrets masked (read only)."
  - "The runtime environment needs no entry of its own: the runtime_env role renders it into the site-packages of
    the virtualenv the link points at, so each per-profile virtualenv carries its own, and restoring the link
    restores it."
  - O(state=recorded) writes the snapshot to C(<state_dir>/snapshots/<name>.json), root only, never through a
    link; recording an unchanged node again changes nothing.
  - O(state=restored) replaces links atomically, rewrites or removes the files, renames the linker files back and
    runs C(ldconfig); restoring a node that is already as recorded changes nothing. Every problem (no snapshot,
    the recorded virtualenv pruned, a renamed file in the way) is reported before anything is changed.
  - O(state=current) only reports what O(state=recorded) would record, and the recorded snapshot if there is one.
  - The server is not started or stopped here; the upgrade playbook starts it again from the restored link.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The recorded and the current links, files and disabled linker files.
  platform:
    support: full
    platforms: debian
options:
  state:
    description: V(recorded) writes the snapshot, V(restored) puts the node back as recorded, V(current) changes nothing.
    type: str
    choices: [recorded, restored, current]
    default: current
  name:
    description: The snapshot's name, its file C(<state_dir>/snapshots/<name>.json).
    type: str
    default: pre-upgrade
  venv_path:
    description: The stable link of the ml_stack role (C(ml_stack_venv_path)).
    type: path
    required: true
  state_dir:
    description: Where snapshots are kept, under C(snapshots/); created C(0700) when missing.
    type: path
    default: /var/lib/blackwell-gpu-node
  server_name:
    description: The sglang_server instance whose recorded command line is kept.
    type: str
    default: sglang
  server_state_dir:
    description: The sglang_server module's O(blackwell.gpu_node.sglang_server#module:state_dir); only read.
    type: path
    default: /var/lib/blackwell-gpu-node
"""

EXAMPLES = r"""
- name: Record the stack the node runs before switching it
  blackwell.gpu_node.node_snapshot:
    state: recorded
    venv_path: /home/sglang/ml-env

- name: Put the old stack back
  blackwell.gpu_node.node_snapshot:
    state: restored
    venv_path: /home/sglang/ml-env
  register: restored

- name: Say what was put back
  ansible.builtin.debug:
    var: restored.actions
"""

RETURN = r"""
current:
  description: What the node runs now, in the shape of a snapshot (before a restore).
  returned: always
  type: dict
  sample:
    venv: {path: /home/sglang/ml-env, target: ml-env.cu128-1a2b3c4d, profile: cu128}
    cuda: {path: /usr/local/cuda, alternative: /usr/local/cuda-12.8, target: /etc/alternatives/cuda}
    files: {/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf: "...", /etc/profile.d/blackwell-gpu-node-cuda.sh: "..."}
    disabled_linker_files: [987_cuda-13.conf.disabled-by-blackwell-gpu-node]
    server: {argv: [/home/sglang/ml-env/bin/python, -m, sglang.launch_server, "..."], env_digest: "..."}
snapshot:
  description: The recorded snapshot (after O(state=recorded), the one written); null when none is recorded.
  returned: always
  type: dict
path:
  description: The snapshot's file.
  returned: always
  type: str
  sample: /var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json
actions:
  description: For O(state=restored), what was (in check mode, would be) changed, one line each, in order.
  returned: always
  type: list
  elements: str
  sample: ["/home/sglang/ml-env -> ml-env.cu128-1a2b3c4d", "update-alternatives --set cuda /usr/local/cuda-12.8", "ldconfig"]
"""

import binascii
import errno
import json
import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import MARKER
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import (
    CUDA_LINK,
    LINKER_CONF,
    LINKER_DIR,
    PROFILE_SCRIPT,
    describe,
    name_problem,
    observation,
    restore_plan,
    serialized,
    snapshot_problems,
    summary,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import masked_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    OPEN_NO_LINK,
    open_directory,
    remove,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import BadState, Instance

SNAPSHOT_LIMIT = 1 << 20


def link_target(path):
    """readlink of path, None when path is not a link (or is missing)."""
    try:
        return os.readlink(path) if stat.S_ISLNK(os.lstat(path).st_mode) else None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def read_text(path):
    """The text of a regular file, read without following a link there; None when missing."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | OPEN_NO_LINK)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise InvalidOption("%s is not a regular file: look at it, the cuda role writes a file there" % path)
        return handle.read(SNAPSHOT_LIMIT).decode("utf-8", "replace")


def venv_profile(venv_path):
    """The profile in the marker of the virtualenv behind the link, None when it is not marked complete."""
    try:
        with open(os.path.join(venv_path, MARKER)) as handle:
            return json.load(handle).get("profile")
    except (OSError, ValueError, AttributeError):
        return None


def cuda_alternative(module):
    """The cuda alternative's value; None where no alternative manages /usr/local/cuda."""
    if not module.get_bin_path("update-alternatives"):
        return None
    rc, out, _err = module.run_command(["update-alternatives", "--query", "cuda"])
    if rc != 0:
        return None
    values = [line[len("Value: "):] for line in out.splitlines() if line.startswith("Value: ")]
    return values[0] if values else None


def server_state(params):
    try:
        state = Instance(params["server_state_dir"], params["server_name"]).load()
    except (BadState, InvalidOption) as exc:
        return {"problem": str(exc)}
    if state is None:
        return None
    return {"argv": masked_argv(state["argv"]), "env_digest": state.get("env_digest")}


def observe(module):
    params = module.params
    linker_files = sorted(os.listdir(LINKER_DIR)) if os.path.isdir(LINKER_DIR) else []
    current = observation(
        venv_path=params["venv_path"],
        venv_target=link_target(params["venv_path"]),
        venv_profile=venv_profile(params["venv_path"]),
        cuda_alternative=cuda_alternative(module),
        cuda_target=link_target(CUDA_LINK),
        files=dict((path, read_text(path)) for path in (LINKER_CONF, PROFILE_SCRIPT)),
        linker_files=linker_files,
        server=server_state(params),
    )
    return current, linker_files


def snapshot_directory(params, create):
    """A descriptor of <state_dir>/snapshots (root only), None when it does not exist and create is false."""
    path = os.path.join(params["state_dir"], "snapshots")
    if not create and not os.path.lexists(path):
        return None
    if create:
        os.close(open_directory(params["state_dir"], "state_dir", 0o750))
    return open_directory(path, "state_dir", 0o700 if create else None)


def load_snapshot(params):
    directory = snapshot_directory(params, create=False)
    if directory is None:
        return None
    try:
        descriptor = os.open(params["name"] + ".json", os.O_RDONLY | os.O_NONBLOCK | OPEN_NO_LINK, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise InvalidOption("the snapshot %s.json cannot be opened as a file (%s)" % (params["name"], exc.strerror))
    finally:
        os.close(directory)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise InvalidOption("the snapshot %s.json is not a regular file" % params["name"])
        text = handle.read(SNAPSHOT_LIMIT)
    try:
        return json.loads(text.decode("utf-8"))
    except ValueError as exc:
        raise InvalidOption("the snapshot %s.json is not JSON (%s)" % (params["name"], exc))


def replace_link(path, target):
    """Point the link path at target in one rename: a new link under a random name, renamed over it. Keeps the
    owner of the link it replaces (the virtualenv's owner)."""
    parent, name = os.path.split(path.rstrip("/"))
    directory = open_directory(parent, "the directory of %s" % path)
    try:
        try:
            before = os.lstat(name, dir_fd=directory)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
            before = None
        if before is not None and not stat.S_ISLNK(before.st_mode):
            raise InvalidOption("%s is not a link; nothing was replaced: move it away, the stack's links go there"
                                % path)
        temporary = ".%s.%s.tmp" % (name, binascii.hexlify(os.urandom(8)).decode("ascii"))
        os.symlink(target, temporary, dir_fd=directory)
        try:
            if before is not None:
                os.chown(temporary, before.st_uid, before.st_gid, dir_fd=directory, follow_symlinks=False)
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            remove(directory, temporary)
            raise
    finally:
        os.close(directory)


def carry_out(module, action):
    kind = action["action"]
    if kind == "link":
        replace_link(action["path"], action["target"])
    elif kind == "alternative":
        module.run_command(["update-alternatives", "--set", action["name"], action["value"]], check_rc=True)
    elif kind in ("write", "remove"):
        directory = open_directory(os.path.dirname(action["path"]), "the directory of %s" % action["path"])
        try:
            if kind == "write":
                write_atomically(directory, os.path.basename(action["path"]), action["content"], 0o644)
            else:
                remove(directory, os.path.basename(action["path"]))
        finally:
            os.close(directory)
    elif kind == "rename":
        directory = open_directory(LINKER_DIR, LINKER_DIR)
        try:
            os.rename(os.path.basename(action["from"]), os.path.basename(action["to"]),
                      src_dir_fd=directory, dst_dir_fd=directory)
        finally:
            os.close(directory)
    else:
        module.run_command(["ldconfig"], check_rc=True)


def record(module, current):
    params = module.params
    recorded = load_snapshot(params)
    changed = recorded != json.loads(serialized(current))
    if changed and not module.check_mode:
        directory = snapshot_directory(params, create=True)
        try:
            write_atomically(directory, params["name"] + ".json", serialized(current), 0o600)
        finally:
            os.close(directory)
    return dict(changed=changed, snapshot=current, actions=[],
                diff=dict(before=summary(recorded) if recorded else "", after=summary(current)))


def restore(module, current, linker_files):
    params = module.params
    recorded = load_snapshot(params)
    path = os.path.join(params["state_dir"], "snapshots", params["name"] + ".json")
    if recorded is None:
        module.fail_json(msg="No snapshot %s to restore: record one first with state=recorded (name=%s, state_dir=%s). "
                             "Nothing was changed." % (path, params["name"], params["state_dir"]), current=current)
    problems = snapshot_problems(recorded, params["venv_path"])
    if not problems:
        parent = os.path.dirname(params["venv_path"].rstrip("/"))
        target = recorded["venv"]["target"]
        existing = [target] if target is not None and os.path.isdir(os.path.join(parent, target)) else []
        actions, problems = restore_plan(recorded, current, linker_files, existing)
    if problems:
        module.fail_json(msg="The snapshot %s cannot be restored: %s. Nothing was changed." % (path, "; ".join(problems)),
                         current=current, snapshot=recorded)
    if not module.check_mode:
        for action in actions:
            carry_out(module, action)
    return dict(changed=bool(actions), snapshot=recorded, actions=[describe(action) for action in actions],
                diff=dict(before=summary(current), after=summary(recorded)))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["recorded", "restored", "current"], default="current"),
            name=dict(type="str", default="pre-upgrade"),
            venv_path=dict(type="path", required=True),
            state_dir=dict(type="path", default="/var/lib/blackwell-gpu-node"),
            server_name=dict(type="str", default="sglang"),
            server_state_dir=dict(type="path", default="/var/lib/blackwell-gpu-node"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problem = name_problem(params["name"])
    if problem:
        module.fail_json(msg=problem + ". Nothing was changed.")
    path = os.path.join(params["state_dir"], "snapshots", params["name"] + ".json")
    try:
        current, linker_files = observe(module)
        if params["state"] == "recorded":
            result = record(module, current)
        elif params["state"] == "restored":
            result = restore(module, current, linker_files)
        else:
            result = dict(changed=False, snapshot=load_snapshot(params), actions=[])
    except InvalidOption as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc)
    except OSError as exc:
        module.fail_json(msg="node_snapshot state=%s failed on %s: %s" % (
            params["state"], exc.filename or path, exc.strerror or exc))
    module.exit_json(current=current, path=path, **result)


if __name__ == "__main__":
    main()
