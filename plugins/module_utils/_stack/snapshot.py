# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What decides which stack a node runs, recorded before an upgrade and put back by a rollback: the core of the
node_snapshot module. Pure: the module observes the host into the dict ``observation`` describes and carries out
the actions ``restore_plan`` returns; the unit tests feed both any host.

A node runs the stack that these point at, and nothing else:

- the stable virtualenv link (``ml_stack_venv_path``) and so the per-profile virtualenv it names. The runtime
  environment is rendered into that virtualenv's own site-packages (runtime_env follows the link when it renders),
  so putting the link back puts the old runtime environment back with it;
- ``/usr/local/cuda`` (the ``cuda`` alternative where one manages it, a plain link otherwise);
- the cuda role's linker file and login-shell script, and which ``/etc/ld.so.conf.d`` files it disabled.

The server's recorded command line (secrets masked) and the virtualenv's profile are kept to say what ran; the
server itself is started again by the playbook from the restored link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import posixpath
import re

# The cuda role's files (roles/cuda/vars/main.yml) and cuda_linker_entries' default suffix.
LINKER_DIR = "/etc/ld.so.conf.d"
LINKER_CONF = posixpath.join(LINKER_DIR, "000-blackwell-gpu-node-cuda.conf")
PROFILE_SCRIPT = "/etc/profile.d/blackwell-gpu-node-cuda.sh"
CUDA_LINK = "/usr/local/cuda"
DISABLED_SUFFIX = ".disabled-by-blackwell-gpu-node"
FORMAT = 1
# Names one snapshot file in <state_dir>/snapshots: no path separator, no "..".
SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def name_problem(name):
    """Why name cannot name a snapshot file, or None."""
    if re.fullmatch(SNAPSHOT_NAME, name) is None or ".." in name:
        return ("name=%r must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, "
                "without '..'" % name)
    return None


def observation(venv_path, venv_target, venv_profile, cuda_alternative, cuda_target, files, linker_files,
                server):
    """What the module observed, in the shape a snapshot records: the link targets as readlink gives them
    (None where no link is), the alternative's value (None where no alternative manages /usr/local/cuda), the
    text of each cuda role file (None where it is missing), the names in /etc/ld.so.conf.d the cuda role
    disabled, and the server's state (None where none was recorded)."""
    return {
        "format": FORMAT,
        "venv": {"path": venv_path, "target": venv_target, "profile": venv_profile},
        "cuda": {"path": CUDA_LINK, "alternative": cuda_alternative, "target": cuda_target},
        "files": dict(files),
        "disabled_linker_files": sorted(name for name in linker_files if name.endswith(DISABLED_SUFFIX)),
        "server": server,
    }


def snapshot_problems(snapshot, venv_path):
    """Why a loaded snapshot cannot be restored for venv_path; [] when it can."""
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        return ["it is not a snapshot of format %d: record a new one with state=recorded" % FORMAT]
    problems = []
    for key, kind in (("venv", dict), ("cuda", dict), ("files", dict), ("disabled_linker_files", list)):
        if not isinstance(snapshot.get(key), kind):
            problems.append("its %s is not a %s" % (key, kind.__name__))
    if problems:
        return problems
    if snapshot["venv"].get("path") != venv_path:
        problems.append("it was recorded for venv_path=%s, not %s" % (snapshot["venv"].get("path"), venv_path))
    for name in snapshot["disabled_linker_files"]:
        if not isinstance(name, str) or "/" in name or not name.endswith(DISABLED_SUFFIX):
            problems.append("its disabled_linker_files holds %r, not a file name ending in %s" % (name, DISABLED_SUFFIX))
    for path in snapshot["files"]:
        if path not in (LINKER_CONF, PROFILE_SCRIPT):
            problems.append("its files hold %s, which is not one of the cuda role's files" % path)
    return problems


def _linker_renames(recorded, current, present):
    """Renames in LINKER_DIR that put its disabled files back as recorded, and what stands in their way."""
    renames, problems = [], []
    recorded, current = set(recorded), set(current)
    for disabled in sorted(current - recorded):
        enabled = disabled[:-len(DISABLED_SUFFIX)]
        if enabled in present:
            problems.append("%s cannot be enabled again: %s exists beside it" % (
                posixpath.join(LINKER_DIR, disabled), posixpath.join(LINKER_DIR, enabled)))
        else:
            renames.append({"from": posixpath.join(LINKER_DIR, disabled), "to": posixpath.join(LINKER_DIR, enabled)})
    for disabled in sorted(recorded - current):
        enabled = disabled[:-len(DISABLED_SUFFIX)]
        # Gone since: nothing to disable again.
        if enabled in present:
            renames.append({"from": posixpath.join(LINKER_DIR, enabled), "to": posixpath.join(LINKER_DIR, disabled)})
    return renames, problems


def restore_plan(snapshot, current, linker_files, existing_venv_targets):
    """The actions that put the node back as the snapshot recorded it, in order, and the problems that forbid
    starting at all. current is an observation of now; linker_files the names in LINKER_DIR now;
    existing_venv_targets the recorded virtualenv link targets that exist as directories.

    Actions: {"action": "link", "path", "target"} (replace a link atomically), {"action": "alternative",
    "name", "value"}, {"action": "write", "path", "content"}, {"action": "remove", "path"},
    {"action": "rename", "from", "to"}, and last {"action": "ldconfig"} when the linker's view changed."""
    actions, problems = [], []
    recorded_venv = snapshot["venv"]["target"]
    if recorded_venv is not None and recorded_venv != current["venv"]["target"]:
        if recorded_venv not in existing_venv_targets:
            problems.append("the recorded virtualenv %s (%s -> %s) no longer exists" % (
                posixpath.join(posixpath.dirname(snapshot["venv"]["path"]), recorded_venv),
                snapshot["venv"]["path"], recorded_venv))
        actions.append({"action": "link", "path": snapshot["venv"]["path"], "target": recorded_venv})
    linker = []
    recorded_cuda, current_cuda = snapshot["cuda"], current["cuda"]
    if recorded_cuda.get("alternative") is not None:
        if recorded_cuda["alternative"] != current_cuda["alternative"]:
            linker.append({"action": "alternative", "name": "cuda", "value": recorded_cuda["alternative"]})
    elif recorded_cuda.get("target") is not None and recorded_cuda["target"] != current_cuda["target"]:
        linker.append({"action": "link", "path": CUDA_LINK, "target": recorded_cuda["target"]})
    for path in sorted(snapshot["files"]):
        content, now = snapshot["files"][path], current["files"].get(path)
        if content is None and now is not None:
            linker.append({"action": "remove", "path": path})
        elif content is not None and content != now:
            linker.append({"action": "write", "path": path, "content": content})
    renames, rename_problems = _linker_renames(snapshot["disabled_linker_files"], current["disabled_linker_files"],
                                               set(linker_files))
    problems.extend(rename_problems)
    linker.extend(dict(action="rename", **rename) for rename in renames)
    actions.extend(linker)
    # The login-shell script is the only one the dynamic linker does not read.
    if any(action.get("path") != PROFILE_SCRIPT for action in linker):
        actions.append({"action": "ldconfig"})
    return actions, problems


def describe(action):
    """One line an operator reads: what the action does."""
    kind = action["action"]
    if kind == "link":
        return "%s -> %s" % (action["path"], action["target"])
    if kind == "alternative":
        return "update-alternatives --set %s %s" % (action["name"], action["value"])
    if kind == "write":
        return "%s rewritten as recorded" % action["path"]
    if kind == "remove":
        return "%s removed (it was not there when recorded)" % action["path"]
    if kind == "rename":
        return "%s renamed back to %s" % (action["from"], action["to"])
    return "ldconfig"


def serialized(snapshot):
    """The snapshot file's text: stable, so that recording the same node twice writes the same bytes."""
    return json.dumps(snapshot, indent=2, sort_keys=True) + "\n"


def summary(state):
    """What a diff shows of an observation or a snapshot: everything but the server."""
    return serialized(dict((key, value) for key, value in state.items() if key != "server"))
