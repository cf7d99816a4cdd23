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
  - "Recorded: the target of the stable virtualenv link O(venv_path) (a name beside it, C(<name>.<profile>-<8 hex
    digits>), as the ml_stack role names its virtualenvs) and the profile in that virtualenv's C(ml-stack.json);
    C(/usr/local/cuda)'s target, or the C(cuda) alternative's value where one manages it; the cuda role's
    C(/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf) and C(/etc/profile.d/blackwell-gpu-node-cuda.sh);
    which C(/etc/ld.so.conf.d) files carry the C(.disabled-by-blackwell-gpu-node) suffix; the server's command
    line from the sglang_server state file, the values of SGLang's secret flags and of the C(secret_flags) its
    launch named masked (read only)."
  - The virtualenv belongs to its owner, so root reads it as hostile. The link is read without following it, and
    only a target that names a virtualenv beside it is entered, as a directory of that name, never through a link.
    The marker is read as a regular file of at most 64 KiB; a link, a FIFO, a device or anything but a JSON object
    with a profile there is recorded as no profile.
  - "The runtime environment needs no entry of its own: the runtime_env role renders it into the site-packages of
    the virtualenv the link points at, so each per-profile virtualenv carries its own, and restoring the link
    restores it."
  - O(state=recorded) writes the snapshot to C(<state_dir>/snapshots/<name>.json), root's and C(0600), never
    through a link, with the C(sha256) of its content, so that a file changed since (a flipped bit, an edit by
    hand) is refused like any other spoiled file. The snapshot it replaces, when that recorded another stack, is
    kept as C(<name>.json.previous). Recording an unchanged node again changes nothing. A file there that a restore would refuse
    (another user's, writable by others, not a snapshot) never blocks a new recording. It is renamed aside to
    C(<name>.json.refused-<time>), with a warning, and the new snapshot written. A node whose stack a restore could not put
    back (the link pointing elsewhere than beside it, C(/usr/local/cuda) elsewhere than a
    C(/usr/local/cuda-<major>.<minor>), the cuda role's files edited into other lines) is refused, as is a node
    where a restore stopped part-way.
  - O(state=restored) restores only a snapshot whose every level, from C(/) to the file, is root's and writable by
    root alone, and only when every value has the shape a recording gives it (the keys, their types, the link
    targets, the lines of the cuda role's files, without control characters). Any other snapshot is refused,
    naming the file and the field, before anything is changed.
  - "When the file is missing or refused, a restore takes the first of these that is there and passes the same
    checks, warns, and says which in RV(source) and C(msg): O(snapshot) (what O(state=recorded) returned in the
    same run); the snapshot the file replaced (C(<name>.json.previous)), unless O(fallback_venv) names another
    virtualenv than it does; and, the last resort, the node as it is with only the stable path pointed back at
    O(fallback_venv). Without any, it fails with every reason, and nothing is changed."
  - "O(state=restored) plans the whole restore and checks it against the host before its first change (the
    recorded virtualenv is a directory beside the link, the recorded CUDA installation exists, the cuda alternative
    still offers the recorded value, no renamed linker file is in the way): check mode reports the same problems.
    It then stages every new link and file under a temporary name (a full disk fails there, and nothing is
    changed), leaves a root-only C(.restore-in-progress) marker beside the snapshots, renames the links and files
    into place, sets the alternative, renames the linker files back, runs C(ldconfig) when the linker's view
    changed, and removes the marker. A restore that stops part-way fails with C(changed) true and RV(actions)
    listing what was done; the next O(state=restored) finishes it and runs C(ldconfig) whatever else it finds."
  - M(blackwell.gpu_node.node_snapshot_info) reports what O(state=recorded) would record, and the recorded snapshot,
    changing nothing.
  - The server is not started or stopped here; the upgrade playbook starts it again from the restored link.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.server_state_dir
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
    details: A restore in check mode refuses what a real run would refuse; only a failure while writing (a full
      disk) is not foreseen.
  diff_mode:
    support: full
    details: The recorded and the current links, files and disabled linker files.
  platform:
    support: full
    platforms: debian
options:
  state:
    description: V(recorded) writes the snapshot, V(restored) puts the node back as recorded.
    type: str
    choices: [recorded, restored]
    required: true
  name:
    description: The snapshot's name, its file C(<state_dir>/snapshots/<name>.json).
    type: str
    default: pre-upgrade
  venv_path:
    description: The stable link of the ml_stack role (C(ml_stack_venv_path)).
    type: path
    required: true
  state_dir:
    description:
      - Where snapshots are kept, under C(snapshots/) (C(0700)); created C(0750) when missing.
      - Every level from C(/) must be root's and writable by root alone (a sticky C(/tmp) above root's levels
        is allowed), or snapshots are neither written nor restored there.
  server_name:
    description: The sglang_server instance whose recorded command line is kept.
    type: str
    default: sglang
  snapshot:
    description:
      - For O(state=restored), the snapshot this run recorded (RV(snapshot) of O(state=recorded)), restored when
        the file is missing or refused, so that a lost or spoiled file does not stop a rollback.
    type: dict
  fallback_venv:
    description:
      - For O(state=restored), the name of the virtualenv beside O(venv_path) that the node ran before the switch
        (C(<name>.<profile>-<8 hex digits>); the upgrade playbook's record of the switch names it).
      - When no snapshot can be restored, the stable path is pointed back at it alone; C(/usr/local/cuda), the
        linker files and the login-shell script stay as they are, and a warning says so. A kept previous snapshot
        that names another virtualenv is not restored.
    type: str
seealso:
  - module: blackwell.gpu_node.node_snapshot_info
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

- name: Put the old stack back, at least its virtualenv when the snapshot file was lost
  blackwell.gpu_node.node_snapshot:
    state: restored
    venv_path: /home/sglang/ml-env
    fallback_venv: ml-env.cu128-1a2b3c4d
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
    server: {argv: [/home/sglang/ml-env/bin/python, -m, sglang.launch_server, --api-key, "********"], env_digest: "..."}
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
  description:
    - For O(state=restored), what was (in check mode, would be) changed, one line each, in order.
    - When a restore stops part-way (the task fails with C(changed) true), what was done before it stopped.
  returned: always
  type: list
  elements: str
  sample: ["/home/sglang/ml-env -> ml-env.cu128-1a2b3c4d", "update-alternatives --set cuda /usr/local/cuda-12.8", "ldconfig"]
source:
  description:
    - For O(state=restored), where the restored snapshot came from, V(file), V(option) (O(snapshot)), V(previous)
      (the snapshot the file replaced) or V(fallback_venv) (the stable path alone); null otherwise.
  returned: always
  type: str
  sample: file
server_entrypoint:
  description:
    - For O(state=restored), how the restored snapshot's server was started, V(launch_server) or V(serve), so that a
      rollback starts the old release the way it ran (the target profile may name the other); null when the
      snapshot has no server's command line, or one of neither form.
  returned: always
  type: str
  sample: launch_server
finished_earlier_restore:
  description: Whether this restore found the marker of an earlier one that had stopped part-way, and finished it
    (C(ldconfig) included); C(msg) then says so.
  returned: always
  type: bool
  sample: false
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import ENTRYPOINTS, entrypoint_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import is_profile_virtualenv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import (
    IN_PROGRESS,
    PREVIOUS_SUFFIX,
    RestoreStopped,
    StepFailed,
    carry_out,
    describe,
    facts,
    file_text,
    in_progress_snapshot,
    in_progress_text,
    is_cuda_home_path,
    name_problem,
    parsed_snapshot,
    restore_plan,
    serialized,
    snapshot_problems,
    summary,
    venv_only,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    directory_entry,
    read_regular,
    remove,
    stage_file,
    stage_link,
    walk,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot_node import (
    READ_OPTIONS,
    alternatives,
    entry_in,
    observe,
    parent_directory,
    profile_in,
    read_snapshot,
    snapshot_directory,
    snapshot_path,
)

# The restore-in-progress marker is a line of JSON.
IN_PROGRESS_LIMIT = 4096


def venv_profile(venv_path, target):
    """profile_in of the virtualenv target beside the stable path venv_path; None when it is not one."""
    if not is_profile_virtualenv(venv_path, target):
        return None
    parent, _name = parent_directory(venv_path)
    if parent is None:
        return None
    try:
        return profile_in(parent, target)
    finally:
        os.close(parent)


def is_venv_directory(venv_path, target):
    """Whether target is a directory beside the stable path, reached by its name without following a link."""
    parent, _name = parent_directory(venv_path)
    if parent is None:
        return False
    try:
        venv, _levels = walk(parent, target, "venv_path")
        os.close(venv)
        return True
    except (OSError, InvalidOption):
        return False
    finally:
        os.close(parent)


def unfinished_restore(directory):
    """The snapshot name in the restore-in-progress marker ("" when it names none), None without a marker."""
    found = read_regular(IN_PROGRESS, IN_PROGRESS_LIMIT, directory, cut=True)
    return None if found is None else in_progress_snapshot(found["data"])


class Node(object):
    """The host as carry_out changes it. The directories it changes are held open from the staging of a file
    to its rename, so that both happen in the same directory whatever happens to the paths meanwhile."""

    def __init__(self, module, snapshots, name):
        self.module, self.snapshots, self.name = module, snapshots, name
        self.marker_path = os.path.join(module.params["state_dir"], "snapshots", IN_PROGRESS)
        self.directories = {}

    def directory(self, path):
        """The descriptor of path's directory, and path's name."""
        parent, name = os.path.split(path.rstrip("/"))
        if parent not in self.directories:
            descriptor, _name = parent_directory(path)
            if descriptor is None:
                raise FileRefused("%s does not exist" % parent)
            self.directories[parent] = descriptor
        return self.directories[parent], name

    def stage(self, action):
        directory, name = self.directory(action["path"])
        if action["action"] == "write":
            return stage_file(directory, name, action["content"], 0o644, (0, 0))
        before = directory_entry(directory, name)
        if before is not None and before["kind"] != "symbolic link":
            raise FileRefused("%s is a %s, not a link" % (action["path"], before["kind"]))
        # The virtualenv link stays its owner's.
        owner = None if before is None else (before["uid"], before["gid"])
        return stage_link(directory, name, action["target"], owner)

    def discard(self, action, temporary):
        remove(self.directory(action["path"])[0], temporary)

    def apply(self, action, temporary):
        kind = action["action"]
        if kind in ("link", "write"):
            directory, name = self.directory(action["path"])
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        elif kind == "remove":
            directory, name = self.directory(action["path"])
            remove(directory, name)
        elif kind == "rename":
            directory, name = self.directory(action["from"])
            os.rename(name, os.path.basename(action["to"]), src_dir_fd=directory, dst_dir_fd=directory)
        elif kind == "alternative":
            self.run("update-alternatives", "--set", action["name"], action["value"])
        else:
            self.run("ldconfig")

    def run(self, command, *args):
        binary = self.module.get_bin_path(command)
        if not binary:
            raise StepFailed("%s is not installed" % command)
        rc, out, err = self.module.run_command([binary] + list(args))
        if rc != 0:
            raise StepFailed("%s exited with %d: %s" % (" ".join([command] + list(args)), rc, (err or out).strip()))

    def begin(self):
        write_atomically(self.snapshots, IN_PROGRESS, in_progress_text(self.name), 0o600)

    def end(self):
        remove(self.snapshots, IN_PROGRESS)

    def close(self):
        for descriptor in self.directories.values():
            os.close(descriptor)
        self.directories.clear()


def record(module, current, path):
    params = module.params
    problems = snapshot_problems(current, params["venv_path"])
    if problems:
        raise InvalidOption("The node's stack cannot be recorded so that a restore could put it back: %s"
                            % "; ".join(problems))
    directory = snapshot_directory(params["state_dir"], create=not module.check_mode)
    recorded = data = None
    try:
        if directory is not None:
            if unfinished_restore(directory) is not None:
                raise InvalidOption("A restore stopped part-way on this node (%s is there): finish it with "
                                    "state=restored before recording the node again"
                                    % os.path.join(os.path.dirname(path), IN_PROGRESS))
            try:
                data = read_snapshot(directory, path)
                recorded = parsed_snapshot(data, path, params["venv_path"]) if data is not None else None
            except InvalidOption as exc:
                data = None
                aside = set_aside(module, directory, path)
                module.warn("%s; it was renamed to %s and the node recorded anew" % (exc, aside))
        text = file_text(current)
        changed = data is None or data != text.encode("utf-8")
        if changed and not module.check_mode:
            # The snapshot it replaces stays at hand for a rollback that finds this one spoiled.
            if recorded is not None and recorded != json.loads(serialized(current)):
                write_atomically(directory, os.path.basename(path) + PREVIOUS_SUFFIX, data, 0o600)
            write_atomically(directory, os.path.basename(path), text, 0o600)
    finally:
        if directory is not None:
            os.close(directory)
    return dict(changed=changed, snapshot=current, actions=[],
                diff=dict(before=summary(recorded) if recorded else "", after=summary(current)))


def set_aside(module, directory, path):
    """Rename the refused snapshot file path (in directory) to a name of its own, without following a link; that
    name."""
    aside = "%s.refused-%d" % (os.path.basename(path), int(time.time()))
    if not module.check_mode:
        os.rename(os.path.basename(path), aside, src_dir_fd=directory, dst_dir_fd=directory)
    return os.path.join(os.path.dirname(path), aside)


def file_snapshot(directory, path, venv_path):
    """The snapshot in the file path (in directory), None when there is none; InvalidOption when it is refused."""
    data = read_snapshot(directory, path) if directory is not None else None
    return None if data is None else parsed_snapshot(data, path, venv_path)


def chosen_snapshot(module, directory, path, current, missing):
    """(the snapshot to restore, its source, why the file was not restored or None), the first that is there and
    passes every check, in this order: the file; the snapshot this run recorded (the option); the file it
    replaced, when it names fallback_venv or fallback_venv is not given; and the node as it is with the stable
    path back at fallback_venv. InvalidOption with every reason when none is."""
    params = module.params
    venv_path, fallback = params["venv_path"], params["fallback_venv"]
    problems = []
    try:
        recorded = file_snapshot(directory, path, venv_path)
        if recorded is not None:
            return recorded, "file", None
        problems.append("There is no snapshot %s" % path)
    except InvalidOption as exc:
        problems.append(str(exc))
    if params["snapshot"] is not None:
        try:
            given = parsed_snapshot(serialized(params["snapshot"]).encode("utf-8"), "given as snapshot", venv_path)
            return given, "option", "%s; the snapshot this run recorded is restored instead" % problems[0]
        except InvalidOption as exc:
            problems.append(str(exc))
    previous_path = path + PREVIOUS_SUFFIX
    try:
        earlier = file_snapshot(directory, previous_path, venv_path)
        if earlier is not None and fallback not in (None, earlier["venv"]["target"]):
            problems.append("the snapshot it replaced, %s, names %s, not fallback_venv=%s"
                            % (previous_path, earlier["venv"]["target"], fallback))
        elif earlier is not None:
            return earlier, "previous", ("%s; the snapshot it replaced, %s, is restored instead"
                                         % ("; ".join(problems), previous_path))
    except InvalidOption as exc:
        problems.append(str(exc))
    if fallback is not None:
        try:
            last = parsed_snapshot(serialized(venv_only(current, fallback, venv_profile(venv_path, fallback)))
                                   .encode("utf-8"), "fallback_venv=%s" % fallback, venv_path)
            return last, "fallback_venv", (
                "%s; only the stable path goes back, to fallback_venv=%s: /usr/local/cuda, the linker files and "
                "the login-shell script stay as they are" % ("; ".join(problems), fallback))
        except InvalidOption as exc:
            problems.append(str(exc))
    # Only the file was there to try: its own words say what to do.
    if problems == ["There is no snapshot %s" % path]:
        raise missing
    if len(problems) == 1:
        raise InvalidOption(problems[0])
    raise InvalidOption("No snapshot can be restored: %s. Give fallback_venv (the virtualenv beside venv_path that "
                        "the node ran) to point the stable path back at it" % "; ".join(problems))


def host_facts(module, recorded, venv_kind, cuda_kind, unfinished):
    """What restore_plan must know of the host to refuse, before any change, what would fail part-way."""
    cuda = recorded["cuda"]
    homes = [value for value in (cuda["alternative"], cuda["target"]) if value and is_cuda_home_path(value)]
    return facts(
        venv_path=venv_kind,
        venv_target_directory=(recorded["venv"]["target"] is not None
                               and is_venv_directory(module.params["venv_path"], recorded["venv"]["target"])),
        cuda_link=cuda_kind,
        cuda_directories=[home for home in homes if (entry_in(home) or {}).get("kind") == "directory"],
        alternatives=alternatives(module, "--list", "cuda") if cuda["alternative"] is not None else None,
        unfinished=unfinished,
    )


def server_entrypoint(snapshot):
    """The entrypoint the snapshot's server command line starts with, or None."""
    server = (snapshot or {}).get("server") or {}
    argv = server.get("argv") if isinstance(server.get("argv"), list) else []
    for entrypoint in ENTRYPOINTS:
        words = entrypoint_argv(argv[0], entrypoint) if argv else [None]
        if argv[:len(words)] == words:
            return entrypoint
    return None


def restore(module, current, linker_files, venv_kind, cuda_kind, path):
    params = module.params
    missing = InvalidOption("No snapshot %s to restore: record one first with state=recorded (name=%s, state_dir=%s)"
                            % (path, params["name"], params["state_dir"]))
    # Only check mode leaves a directory to create missing: it carries nothing out.
    fallbacks = params["snapshot"] is not None or params["fallback_venv"] is not None
    directory = snapshot_directory(params["state_dir"], create=fallbacks and not module.check_mode)
    if directory is None and not fallbacks:
        raise missing
    node = Node(module, directory, params["name"])
    try:
        recorded, source, instead = chosen_snapshot(module, directory, path, current, missing)
        if instead:
            module.warn(instead)
        unfinished = unfinished_restore(directory) if directory is not None else None
        actions, problems = restore_plan(recorded, current, linker_files,
                                         host_facts(module, recorded, venv_kind, cuda_kind, unfinished))
        if problems:
            raise InvalidOption("The snapshot %s cannot be restored: %s" % (path, "; ".join(problems)))
        done = [describe(action) for action in actions]
        if actions and not module.check_mode:
            try:
                done = carry_out(actions, node)
            except RestoreStopped as stopped:
                module.fail_json(msg=stopped.message(path), changed=bool(stopped.done), actions=stopped.done,
                                 current=current, snapshot=recorded, path=path)
    finally:
        node.close()
        if directory is not None:
            os.close(directory)
    result = dict(changed=bool(actions), snapshot=recorded, source=source, actions=done,
                  finished_earlier_restore=unfinished is not None, server_entrypoint=server_entrypoint(recorded),
                  diff=dict(before=summary(current), after=summary(recorded)))
    notes = [instead] if instead else []
    if unfinished is not None:
        notes.append("This restore finished an earlier one%s that had stopped part-way, ldconfig included"
                     % (" (of %s)" % unfinished if unfinished else ""))
    if notes:
        result["msg"] = ". ".join(notes)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            READ_OPTIONS,
            state=dict(type="str", choices=["recorded", "restored"], required=True),
            snapshot=dict(type="dict"),
            fallback_venv=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problem = name_problem(params["name"])
    if problem:
        module.fail_json(msg=problem + ". Nothing was changed.")
    path = snapshot_path(params)
    current = None
    try:
        current, linker_files, venv_kind, cuda_kind = observe(module)
        if params["state"] == "recorded":
            result = record(module, current, path)
        else:
            result = restore(module, current, linker_files, venv_kind, cuda_kind, path)
    except InvalidOption as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc, current=current, path=path)
    except OSError as exc:
        module.fail_json(msg="node_snapshot state=%s failed on %s: %s. Nothing was changed." % (
            params["state"], exc.filename or path, exc.strerror or exc), current=current, path=path)
    result.setdefault("finished_earlier_restore", False)
    result.setdefault("source", None)
    result.setdefault("server_entrypoint", None)
    module.exit_json(current=current, path=path, **result)


if __name__ == "__main__":
    main()
