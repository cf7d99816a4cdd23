# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What decides which stack a node runs, recorded before an upgrade and put back by a rollback: the core of the
node_snapshot module. Pure: the module observes the host into the dict ``observation`` describes, asks the host
what ``restore_plan`` needs to know (``facts``), and lets ``carry_out`` drive the changes through a host object;
the unit tests feed all of them any host.

A node runs the stack that these point at, and nothing else:

- the stable virtualenv link (``ml_stack_venv_path``) and so the per-profile virtualenv it names. The runtime
  environment is rendered into that virtualenv's own site-packages (runtime_env follows the link when it renders),
  so putting the link back puts the old runtime environment back with it;
- ``/usr/local/cuda`` (the ``cuda`` alternative where one manages it, a plain link otherwise);
- the cuda role's linker file and login-shell script, and which ``/etc/ld.so.conf.d`` files it disabled.

The server's recorded command line (secrets masked) and the virtualenv's profile are kept to say what ran; the
server itself is started again by the playbook from the restored link.

A restore writes root's files from the snapshot (a shell script every login shell runs among them), so a snapshot
is checked as strictly as inventory before anything changes: every key, every type, the shape of every link
target and line of text, as the roles produce them. And a restore is planned whole and checked against the host
before its first change, stages every new file and link before it renames any into place, and leaves a marker
until its last step, so that a restore that stops part-way says what it did and the next one finishes it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import hashlib
import json
import posixpath
import re
import shlex

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import (
    SECRET_FLAGS,
    masked_argv,
    secret_values,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    PROFILE_NAME,
    is_profile_virtualenv,
)

# The cuda role's files (roles/cuda/vars/main.yml) and cuda_linker_entries' default suffix.
LINKER_DIR = "/etc/ld.so.conf.d"
LINKER_CONF = posixpath.join(LINKER_DIR, "000-blackwell-gpu-node-cuda.conf")
PROFILE_SCRIPT = "/etc/profile.d/blackwell-gpu-node-cuda.sh"
CUDA_LINK = "/usr/local/cuda"
# Where /usr/local/cuda points when update-alternatives manages it.
ALTERNATIVE_LINK = "/etc/alternatives/cuda"
# The directories a snapshot may point /usr/local/cuda at: a CUDA installation, as NVIDIA's packages make it
# (/usr/local/cuda-X.Y) or as the cuda role adopts one (cuda_home): an absolute path of plain names, without what
# ld.so.conf takes for a separator, whose last name says CUDA. "/", "/root" or "/etc" are not.
# Each name is matched on its own, split at the slashes: one pattern over the whole path would backtrack over a
# long one.
DIRECTORY_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")
CUDA_NAME = re.compile(r"[A-Za-z0-9._+-]*")
# Trees that hold configuration or the kernel's view, never a CUDA installation (/etc/alternatives/cuda is a link).
NOT_CUDA_HOMES = ("/etc/", "/proc/", "/sys/", "/dev/", "/run/")


def is_cuda_home_path(path):
    """Whether path has the shape of a CUDA installation's: absolute, of plain names, the last saying CUDA."""
    if not path.startswith("/"):
        return False
    names = path[1:].split("/")
    last = names.pop()
    return (all(DIRECTORY_NAME.fullmatch(name) for name in names) and CUDA_NAME.fullmatch(last) is not None
            and "cuda" in last.lower())


def is_cuda_home(path):
    """Whether a snapshot may point /usr/local/cuda at path (is_cuda_home_path, outside NOT_CUDA_HOMES)."""
    return is_cuda_home_path(path) and not path.startswith(NOT_CUDA_HOMES)


DISABLED_SUFFIX = ".disabled-by-blackwell-gpu-node"
FORMAT = 1
# Names one snapshot file in <state_dir>/snapshots: no path separator, no "..".
SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# Beside the snapshots from a restore's first change to its last step; a snapshot's name cannot start with '.'.
IN_PROGRESS = ".restore-in-progress"
# A snapshot file's key for the sha256 of the rest of it, and the name the file it replaces is kept under
# (<name>.json.previous: no snapshot's file ends so).
CHECKSUM = "sha256"
PREVIOUS_SUFFIX = ".previous"
# A snapshot is a few KiB; the cuda role's files and the virtualenv's marker well under these.
SNAPSHOT_LIMIT = 1 << 20
FILE_LIMIT = 1 << 16
MARKER_LIMIT = 1 << 16

# What each part of a snapshot holds, and nothing else.
TOP_KEYS = ("format", "venv", "cuda", "files", "disabled_linker_files", "server")
VENV_KEYS = ("path", "target", "profile")
CUDA_KEYS = ("path", "alternative", "target")
SERVER_KEYS = ("argv", "env_digest")
# ld.so.conf ends an entry at whitespace, ':', ',' and '#': a line of the linker file is one absolute directory.
LINKER_ENTRY = re.compile(r"/[^\s:,#]*")
# roles/cuda/templates/profile.sh.j2, line by line, besides its comments and `export CUDA_HOME=<cuda_home | quote>`.
PROFILE_LINES = (
    'case ":$PATH:" in',
    '  *":$CUDA_HOME/bin:"*) ;;',
    '  *) export PATH="$CUDA_HOME/bin:$PATH" ;;',
    "esac",
)
PROFILE_EXPORT = "export CUDA_HOME="
# The steps that create something new: staged under a temporary name first, renamed into place later.
STAGED = ("link", "write")


class StepFailed(Exception):
    """A step of a restore that failed other than with an OSError (a command's exit status); its message says
    how."""


class RestoreStopped(Exception):
    """A restore that stopped at step (its description) on path, having done done (descriptions, in order)."""

    def __init__(self, done, step, path, reason):
        super(RestoreStopped, self).__init__(reason)
        self.done, self.step, self.path, self.reason = done, step, path, reason

    def message(self, snapshot_path):
        """What the operator reads: where it stopped, on which file, and what was done before."""
        stopped = "%s failed on %s: %s" % (self.step, self.path, self.reason)
        if not self.done:
            return ("The restore of %s stopped before its first change: %s. Nothing was changed; the files staged "
                    "for it were removed." % (snapshot_path, stopped))
        return ("The restore of %s stopped part-way: %s. Done before it: %s. Fix the cause and run state=restored "
                "again: it finishes the restore, ldconfig included." % (snapshot_path, stopped, "; ".join(self.done)))


def name_problem(name):
    """Why name cannot name a snapshot file, or None."""
    if re.fullmatch(SNAPSHOT_NAME, name) is None or ".." in name:
        return ("name=%r must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, "
                "without '..'" % name)
    return None


def decoded_json(data):
    """The JSON document in data (bytes of UTF-8); ValueError saying why there is none. Nesting too deep for the
    parser is refused like any other malformed text, not raised as a RecursionError."""
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("its JSON is nested too deep")


def marker_profile(data):
    """The profile that the virtualenv's completion marker (its bytes, None when there is none to read) names;
    None unless it is a UTF-8 JSON object whose profile is a profile's name."""
    try:
        marker = decoded_json(data) if data is not None else None
    except ValueError:
        return None
    profile = marker.get("profile") if isinstance(marker, dict) else None
    return profile if isinstance(profile, str) and PROFILE_NAME.fullmatch(profile) else None


def server_record(state):
    """What a snapshot keeps of the server's recorded state (the sglang_server state file): its command line with
    the values of SGLang's secret flags and of the flags its launch named secret (secret_flags) masked, and its
    environment digest. None when no state is recorded."""
    if state is None:
        return None
    flags = state.get("secret_flags", [])
    if not isinstance(flags, list) or not all(isinstance(flag, str) for flag in flags):
        return {"problem": "its secret_flags is not a list of flags, so its command line is not kept"}
    return {"argv": masked_argv(state["argv"], SECRET_FLAGS + tuple(flags)), "env_digest": state.get("env_digest")}


def server_secrets(state):
    """The values server_record masks, for Ansible to mask wherever else they would show."""
    if state is None or server_record(state).get("problem"):
        return []
    return secret_values(state["argv"], SECRET_FLAGS + tuple(state.get("secret_flags", [])))


def observation(venv_path, venv_target, venv_profile, cuda_alternative, cuda_target, files, linker_files,
                server):
    """What the module observed, in the shape a snapshot records: the link targets as readlink gives them
    (None where no link is), the alternative's value (None where no alternative manages /usr/local/cuda), the
    text of each cuda role file (None where it is missing), the names in /etc/ld.so.conf.d the cuda role
    disabled, and the server as server_record keeps it."""
    return {
        "format": FORMAT,
        "venv": {"path": venv_path, "target": venv_target, "profile": venv_profile},
        "cuda": {"path": CUDA_LINK, "alternative": cuda_alternative, "target": cuda_target},
        "files": dict(files),
        "disabled_linker_files": sorted(name for name in linker_files if name.endswith(DISABLED_SUFFIX)),
        "server": server,
    }


def _json_kind(value):
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "%s" % json.dumps(value)
    if isinstance(value, (int, float)):
        return "a number"
    return "null"


def _shown(value):
    """value as a message quotes it: its repr, cut, so that no control character or megabyte reaches a result."""
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _object(value, field, keys, problems):
    """True when value is an object of exactly keys; else a problem naming field is added."""
    if not isinstance(value, dict):
        problems.append("%s is %s, not an object" % (field, _json_kind(value)))
        return False
    missing = [key for key in keys if key not in value]
    extra = sorted(("%s" % key for key in value if key not in keys))
    if missing:
        problems.append("%s lacks %s" % (field, ", ".join(missing)))
    if extra:
        problems.append("%s holds %s, which no snapshot records" % (field, ", ".join(repr(key) for key in extra)))
    return not missing and not extra


def _shaped(value, field, test, shape, problems):
    """Adds a problem naming field unless value is null or a string that passes test."""
    if value is not None and not (isinstance(value, str) and test(value)):
        problems.append("%s is %s, not %s (or null)" % (field, _shown(value), shape))


def _venv_problems(venv, venv_path, problems):
    if venv["path"] != venv_path:
        problems.append("venv.path is %s: it was recorded for another virtualenv than venv_path=%s"
                        % (_shown(venv["path"]), venv_path))
    _shaped(venv["target"], "venv.target", lambda target: is_profile_virtualenv(venv_path, target),
            "the name of a profile's virtualenv beside %s (%s.<profile>-<8 hex digits>)" % (
                venv_path, posixpath.basename(venv_path.rstrip("/"))), problems)
    _shaped(venv["profile"], "venv.profile", PROFILE_NAME.fullmatch, "a stack profile's name", problems)


def _cuda_problems(cuda, problems):
    if cuda["path"] != CUDA_LINK:
        problems.append("cuda.path is %s, not %s" % (_shown(cuda["path"]), CUDA_LINK))
    home = "a CUDA installation (/usr/local/cuda-<major>.<minor>, or a cuda_home whose last name says cuda)"
    _shaped(cuda["alternative"], "cuda.alternative", is_cuda_home, home, problems)
    if cuda["alternative"] is not None:
        _shaped(cuda["target"], "cuda.target", lambda target: target == ALTERNATIVE_LINK,
                "%s, where the cuda alternative manages the link" % ALTERNATIVE_LINK, problems)
    else:
        _shaped(cuda["target"], "cuda.target", is_cuda_home, home, problems)


def _profile_line(line):
    if line in PROFILE_LINES:
        return True
    if not line.startswith(PROFILE_EXPORT):
        return False
    value = line[len(PROFILE_EXPORT):]
    try:
        words = shlex.split(value)
    except ValueError:
        return False
    # Exactly what the role's `quote` filter writes for one path: one word, quoted only where it needs it.
    return len(words) == 1 and words[0].startswith("/") and shlex.quote(words[0]) == value


# What each of the cuda role's files is made of, besides blank and comment lines.
LINE_SHAPES = {
    LINKER_CONF: (LINKER_ENTRY.fullmatch, "an absolute directory for the linker"),
    PROFILE_SCRIPT: (_profile_line, "a line of the cuda role's profile.sh.j2"),
}


def text_problems(path, content):
    """Why content cannot be the cuda role's file path: a control character other than the newlines between its
    lines, or a line that the role's template does not produce. [] when it can."""
    test, shape = LINE_SHAPES[path]
    for number, line in enumerate(content.split("\n"), 1):
        field = "files[%s] line %d" % (path, number)
        problem = control_character_problem(line, field)
        if problem:
            return [problem]
        if line and not line.startswith("#") and not test(line):
            return ["%s is %s, not a comment or %s" % (field, _shown(line), shape)]
    return []


def _files_problems(files, problems):
    for path in sorted(files):
        content = files[path]
        if content is None:
            continue
        if not isinstance(content, str):
            problems.append("files[%s] is %s, not the file's text (or null)" % (path, _json_kind(content)))
        else:
            problems.extend(text_problems(path, content))


def _disabled_problems(names, problems):
    if not isinstance(names, list):
        problems.append("disabled_linker_files is %s, not a list of names" % _json_kind(names))
        return
    for index, name in enumerate(names):
        enabled = name[:-len(DISABLED_SUFFIX)] if isinstance(name, str) and name.endswith(DISABLED_SUFFIX) else None
        if (enabled in (None, "", ".", "..") or "/" in name
                or control_character_problem(name, "disabled_linker_files") is not None):
            problems.append("disabled_linker_files[%d] is %s, not a file name in %s ending in %s"
                            % (index, _shown(name), LINKER_DIR, DISABLED_SUFFIX))


def _server_problems(server, problems):
    if server is None:
        return
    if isinstance(server, dict) and set(server) == {"problem"}:
        if not isinstance(server["problem"], str):
            problems.append("server.problem is %s, not a string" % _json_kind(server["problem"]))
        return
    if not _object(server, "server", SERVER_KEYS, problems):
        return
    argv = server["argv"]
    if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv):
        problems.append("server.argv is %s, not a command line (a list of strings)" % _shown(argv))
    _shaped(server["env_digest"], "server.env_digest", lambda digest: True, "a string", problems)


def snapshot_problems(snapshot, venv_path):
    """Why a loaded snapshot cannot be restored for venv_path, each problem naming its field; [] when it can.
    Everything is checked: a snapshot lives in a file, and whoever edits it must not steer root."""
    problems = []
    if not isinstance(snapshot, dict):
        return ["it holds %s, not a snapshot object" % _json_kind(snapshot)]
    fmt = snapshot.get("format")
    # true is an int to isinstance and equals 1: the format must be the number itself.
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt != FORMAT:
        return ["format is %s, not %d: record a new snapshot with state=recorded" % (_shown(fmt), FORMAT)]
    if not _object(snapshot, "the snapshot", TOP_KEYS, problems):
        return problems
    if _object(snapshot["venv"], "venv", VENV_KEYS, problems):
        _venv_problems(snapshot["venv"], venv_path, problems)
    if _object(snapshot["cuda"], "cuda", CUDA_KEYS, problems):
        _cuda_problems(snapshot["cuda"], problems)
    if _object(snapshot["files"], "files", (LINKER_CONF, PROFILE_SCRIPT), problems):
        _files_problems(snapshot["files"], problems)
    _disabled_problems(snapshot["disabled_linker_files"], problems)
    _server_problems(snapshot["server"], problems)
    return problems


def _checksum(snapshot):
    return hashlib.sha256(serialized(snapshot).encode("utf-8")).hexdigest()


def file_text(snapshot):
    """The snapshot file's text: the snapshot with the sha256 of its serialized text, so that a file changed
    since it was written (a flipped bit, an edit by hand) is told from one as recorded."""
    return serialized(dict(snapshot, **{CHECKSUM: _checksum(snapshot)}))


def unsealed(document, path):
    """document (a snapshot file's JSON) without its checksum; InvalidOption naming the file when the checksum
    does not match the rest. A file without one (written by an earlier release) is taken as it is."""
    if not isinstance(document, dict) or CHECKSUM not in document:
        return document
    snapshot = dict((key, value) for key, value in document.items() if key != CHECKSUM)
    if document[CHECKSUM] != _checksum(snapshot):
        raise InvalidOption("The snapshot %s was changed after it was recorded: its %s does not match its content"
                            % (path, CHECKSUM))
    return snapshot


def parsed_snapshot(data, path, venv_path):
    """The snapshot in data (the bytes of the file path, its checksum verified) for venv_path; InvalidOption
    naming the file and every field that keeps it from being restored."""
    try:
        document = decoded_json(data)
    except ValueError as exc:
        raise InvalidOption("The snapshot %s is not JSON (%s)" % (path, exc))
    snapshot = unsealed(document, path)
    problems = snapshot_problems(snapshot, venv_path)
    if problems:
        raise InvalidOption("The snapshot %s cannot be restored: %s" % (path, "; ".join(problems)))
    return snapshot


def venv_only(current, venv_target, venv_profile):
    """A rollback's last resort when no snapshot can be restored: the node as it is now, but for the stable
    path, which goes back to venv_target (the virtualenv the node ran before the switch, its profile
    venv_profile)."""
    return dict(current, venv=dict(current["venv"], target=venv_target, profile=venv_profile))


def facts(venv_path=None, venv_target_directory=False, cuda_link=None, cuda_directories=(), alternatives=None,
          unfinished=None):
    """What restore_plan must know of the host besides an observation: the kinds (path_kind's words, None when
    missing) of the stable virtualenv path and of /usr/local/cuda now, whether the recorded virtualenv is a
    directory beside the stable path, which recorded CUDA directories exist, the values `update-alternatives
    --list cuda` lists (None where no cuda alternative is registered), and the restore-in-progress marker's
    snapshot name ("" when it names none; None when there is no marker)."""
    return {"venv_path": venv_path, "venv_target_directory": venv_target_directory, "cuda_link": cuda_link,
            "cuda_directories": list(cuda_directories), "alternatives": alternatives, "unfinished": unfinished}


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


def _link_in_the_way(kind, path):
    if kind not in (None, "symbolic link"):
        return "%s is a %s, not a link: nothing can point it elsewhere; move it away" % (path, kind)
    return None


def _venv_actions(recorded, current, host, problems):
    target = recorded["target"]
    if target is None or target == current["target"]:
        return []
    in_the_way = _link_in_the_way(host["venv_path"], recorded["path"])
    if in_the_way:
        problems.append(in_the_way)
    if not host["venv_target_directory"]:
        problems.append("the recorded virtualenv %s (%s -> %s) is no longer a directory beside the link" % (
            posixpath.join(posixpath.dirname(recorded["path"].rstrip("/")), target), recorded["path"], target))
    return [{"action": "link", "path": recorded["path"], "target": target}]


def _cuda_actions(recorded, current, host, problems):
    value = recorded["alternative"]
    if value is not None:
        if value == current["alternative"]:
            return []
        if host["alternatives"] is None:
            problems.append("the cuda alternative recorded as %s is no longer registered (update-alternatives "
                            "--list cuda lists nothing)" % value)
        elif value not in host["alternatives"]:
            problems.append("the cuda alternative no longer offers %s (update-alternatives --list cuda: %s)"
                            % (value, ", ".join(host["alternatives"])))
        if value not in host["cuda_directories"]:
            problems.append("the recorded CUDA installation %s is not a directory" % value)
        return [{"action": "alternative", "name": "cuda", "value": value}]
    target = recorded["target"]
    if target is None or target == current["target"]:
        return []
    in_the_way = _link_in_the_way(host["cuda_link"], CUDA_LINK)
    if in_the_way:
        problems.append(in_the_way)
    if target not in host["cuda_directories"]:
        problems.append("the recorded CUDA installation %s (%s -> %s) is not a directory" % (target, CUDA_LINK, target))
    return [{"action": "link", "path": CUDA_LINK, "target": target}]


def restore_plan(snapshot, current, linker_files, host):
    """The actions that put the node back as the snapshot (checked by snapshot_problems) recorded it, in order,
    and the problems that forbid starting at all: each is checked against the host (``facts``) before anything
    changes, so that check mode refuses what a real run would. current is an observation of now; linker_files
    the names in LINKER_DIR now.

    Actions: {"action": "link", "path", "target"} (replace a link), {"action": "alternative", "name", "value"},
    {"action": "write", "path", "content"}, {"action": "remove", "path"}, {"action": "rename", "from", "to"},
    and last {"action": "ldconfig"} when the linker's view changes or an earlier restore stopped part-way."""
    problems = []
    actions = _venv_actions(snapshot["venv"], current["venv"], host, problems)
    linker = _cuda_actions(snapshot["cuda"], current["cuda"], host, problems)
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
    # The login-shell script is the only one the dynamic linker does not read. An earlier restore that stopped
    # part-way may have changed what the linker reads without refreshing its cache.
    if host["unfinished"] is not None or any(action.get("path") != PROFILE_SCRIPT for action in linker):
        actions.append({"action": "ldconfig"})
    return actions, problems


def action_path(action):
    """The file an action changes, as a message names it."""
    if action["action"] in ("link", "write", "remove"):
        return action["path"]
    if action["action"] == "rename":
        return action["from"]
    if action["action"] == "alternative":
        return "%s (the %s alternative)" % (CUDA_LINK, action["name"])
    return "the dynamic linker's cache"


def carry_out(actions, host):
    """Carry out a restore_plan's actions on host, so that a failure leaves either nothing changed or a
    restore-in-progress marker and an exact account of what was done. The descriptions of the actions done.

    First every new link and file is staged under a temporary name (a full disk fails there, before any
    change; what was staged is then removed), then the marker is written, then each action is applied in order
    (a staged one renamed into place), then the marker is removed. RestoreStopped (with what was done) when a
    step fails. host: stage(action) -> token, discard(action, token), apply(action, token or None), begin(),
    end(), marker_path; each raises OSError, StepFailed or InvalidOption (a FileRefused) when it fails."""
    staged = {}
    step = path = None
    try:
        for index, action in enumerate(actions):
            if action["action"] in STAGED:
                step, path = "staging %s" % describe(action), action_path(action)
                staged[index] = host.stage(action)
        step, path = "marking the restore as in progress", host.marker_path
        host.begin()
    except (OSError, StepFailed, InvalidOption) as exc:
        _discard(actions, staged, host)
        raise RestoreStopped([], step, path, _reason(exc))
    done = []
    for index, action in enumerate(actions):
        try:
            host.apply(action, staged.pop(index, None))
        except (OSError, StepFailed, InvalidOption) as exc:
            _discard(actions, staged, host)
            raise RestoreStopped(done, describe(action), action_path(action), _reason(exc))
        done.append(describe(action))
    try:
        host.end()
    except OSError as exc:
        raise RestoreStopped(done, "removing the restore-in-progress marker", host.marker_path, _reason(exc))
    return done


def _discard(actions, staged, host):
    for index in sorted(staged):
        host.discard(actions[index], staged[index])
    staged.clear()


def _reason(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return "%s" % exc


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


def in_progress_text(name):
    """The restore-in-progress marker's text for a restore of the snapshot name."""
    return json.dumps({"snapshot": name}, sort_keys=True) + "\n"


def in_progress_snapshot(data):
    """The snapshot name a restore-in-progress marker (its bytes) names; "" when it names none that could be."""
    try:
        marker = decoded_json(data)
    except ValueError:
        return ""
    name = marker.get("snapshot") if isinstance(marker, dict) else None
    return name if isinstance(name, str) and name_problem(name) is None else ""


def serialized(snapshot):
    """The snapshot file's text: stable, so that recording the same node twice writes the same bytes."""
    return json.dumps(snapshot, indent=2, sort_keys=True) + "\n"


def summary(state):
    """What a diff shows of an observation or a snapshot: everything but the server."""
    return serialized(dict((key, value) for key, value in state.items() if key != "server"))
