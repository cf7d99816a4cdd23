# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""A process that a module runs itself where systemd is not PID 1 (manager=module): started detached as a user
with its output appended to a log file, recorded in a state file, recognised again by pid, start time, boot, owner
and command line, and stopped by its process group. The SGLang server and the model gateway both run so."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import json
import os
import signal
import stat
import subprocess
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    open_appending,
    open_regular,
    path_kind,
    read_regular,
    remove,
    trusted_directory,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import (
    boot_id,
    group_members,
    process_argv,
    process_start_time,
    process_uid,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import SYSTEMD_RUNTIME_DIR


def resolve_manager(requested, process, systemd_runtime_dir=SYSTEMD_RUNTIME_DIR):
    """(manager, why): `auto` is systemd where systemd is PID 1, else the module's own detached process, which
    runs process (such as "the server")."""
    if requested != "auto":
        return requested, "manager=%s was asked for" % requested
    if os.path.isdir(systemd_runtime_dir):
        return "systemd", "manager=auto: systemd is PID 1 here (%s exists)" % systemd_runtime_dir
    return "module", "manager=auto: systemd is not PID 1 here (no %s), so the module runs %s" % (
        systemd_runtime_dir, process)


# What the process writes is not readable by others (its log, caches it writes under HOME).
PROCESS_UMASK = 0o027
# A state file is a few KiB.
STATE_LIMIT = 1 << 20
# The state files are root's alone: they name the pid root signals, and may hold secrets.
STATE_MODE = 0o600


def log_path_problem(log_path, process="the process"):
    """Why log_path cannot be process's log (it exists and is no regular file), or None."""
    kind = path_kind(log_path)
    if kind in (None, "file"):
        return None
    return ("log_path=%s is a %s: only a regular file (or a path that does not exist yet) is accepted as "
            "%s's log" % (log_path, kind, process))


def _open_log_file(log_path, process, create):
    """A descriptor of log_path, opened through its directory's descriptor without following a link or blocking on a
    FIFO (files.open_appending, files.open_regular); anything but a regular file is refused naming log_path. With
    create it appends, and the log is created 0640 when missing, missing levels of its directory root's 0755;
    without, it only reads, and FileNotFoundError says that the log or its directory is missing.

    Its directory must be root's at every level and writable by root alone: systemd opens a unit's log by path
    (StandardOutput=append:, as root), following any link, so a user who could write the directory could point it
    at any file of the host."""
    log_dir, name = os.path.split(os.path.abspath(log_path))
    directory = trusted_directory(log_dir, "log_path", 0o755 if create else None)
    try:
        if create:
            return open_appending(directory, name, 0o640)
        return open_regular(name, directory)[0]
    except FileRefused:
        raise InvalidOption(log_path_problem(log_path, process) or "log_path=%s is not a regular file" % log_path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and not create:
            raise
        raise InvalidOption(log_path_problem(log_path, process)
                            or "log_path=%s cannot be opened: %s" % (log_path, exc))
    finally:
        os.close(directory)


def _settle_log_access(descriptor, log_gid, check):
    """True when the open log lets others in (any permission for others: a log of an earlier version was 0644, and
    the log can hold prompts) or its group is not log_gid (when given); both are set on the descriptor, so never
    through a link, unless check."""
    info = os.fstat(descriptor)
    mode = stat.S_IMODE(info.st_mode)
    regroup = log_gid is not None and info.st_gid != log_gid
    if not check:
        if mode & 0o007:
            os.fchmod(descriptor, mode & ~0o007)
        if regroup:
            os.fchown(descriptor, -1, log_gid)
    return bool(mode & 0o007) or regroup


def settle_log_access(log_path, log_gid=None, process="the process", check=False):
    """Give the existing log at log_path no permission for others and the group log_gid (when given), as a start
    leaves it, on a pass that starts nothing; True when it was (or, with check, would be) changed. A missing log
    or log directory is left missing: a running process keeps writing to the file it has open, and its next start
    creates the log. Opened as open_log opens it, read-only."""
    try:
        descriptor = _open_log_file(log_path, process, create=False)
    except FileNotFoundError:
        return False
    try:
        return _settle_log_access(descriptor, log_gid, check)
    finally:
        os.close(descriptor)


def open_log(log_path, log_gid=None, process="the process"):
    """A descriptor appending to log_path, created 0640 when missing (its directory as _open_log_file says); an
    existing file keeps its mode less any permission for others; its group log_gid when given (settle_log_access)."""
    descriptor = _open_log_file(log_path, process, create=True)
    try:
        _settle_log_access(descriptor, log_gid, check=False)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def log_offset(log_path, log_gid=None, process="the process"):
    """The log's size now, where the next process's lines will begin; the log is created when missing."""
    descriptor = open_log(log_path, log_gid, process)
    try:
        return os.lseek(descriptor, 0, os.SEEK_END)
    finally:
        os.close(descriptor)


def process_environment(base, env, account):
    """The process's environment: base (the module's), the account's HOME, USER and LOGNAME (caches go under
    HOME; root's would be refused to the user), then env, which wins."""
    environment = dict(base)
    if account is not None:
        environment.update(HOME=account["home"], USER=account["user"], LOGNAME=account["user"])
    environment.update(env or {})
    return environment


def launch(argv, env, log_path, account=None, log_gid=None, process="the process"):
    """Start argv detached (own session), stdout and stderr appended to log_path, which root opens (so it
    stays root's, 0640); the child drops to account (user, group, its supplementary groups) with umask 027
    before it runs argv. (Popen, log offset at the start, its start time or None when it exited at once)."""
    log = open_log(log_path, log_gid, process)
    identity = {}
    if account is not None:
        identity = dict(user=account["uid"], group=account["gid"], extra_groups=account["groups"])
    try:
        offset = os.lseek(log, 0, os.SEEK_END)
        # The process outlives the module, in a session of its own as the service user: run_command waits for it.
        # pylint: disable-next=ansible-bad-function
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=process_environment(os.environ, env, account), start_new_session=True, close_fds=True,
            umask=PROCESS_UMASK, cwd="/" if account is not None else None, **identity
        )
    finally:
        os.close(log)
    start_time = None
    deadline = time.monotonic() + 5
    while start_time is None and time.monotonic() < deadline:
        start_time = process_start_time(child.pid)
        if start_time is None and child.poll() is not None:
            break
    return child, offset, start_time


def relaunch_reasons(recorded, argv, env_digest, log_path):
    """Why a recorded process, which runs, is not the one asked for in what it read at its start and where it
    writes: its command line, its environment (by digest) and its log, which it holds open. Empty when it is the
    one. Command lines and environments are compared, never shown: they may hold secrets. A state that records no
    environment or log (an earlier release's) is not restarted for it."""
    reasons = []
    if recorded["argv"] != argv:
        reasons.append("its command line differs")
    if recorded.get("env_digest", env_digest) != env_digest:
        reasons.append("its environment differs")
    if recorded.get("log_path", log_path) != log_path:
        reasons.append("it logs to %s, not log_path=%s" % (recorded["log_path"], log_path))
    return reasons


def wait_gone(pids, timeout, sleep=time.sleep, clock=time.monotonic):
    """The pids still alive after waiting up to timeout seconds for them to end."""
    deadline = clock() + timeout
    alive = [pid for pid in pids if process_start_time(pid) is not None]
    while alive and clock() < deadline:
        sleep(0.1)
        alive = [pid for pid in alive if process_start_time(pid) is not None]
    return alive


def terminate(pids, grace, signal_group=None):
    """SIGTERM, wait up to grace seconds, then SIGKILL what is left. Returns the pids killed hard."""
    def send(signum):
        if signal_group is not None:
            try:
                os.killpg(signal_group, signum)
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    raise
            return
        for pid in pids:
            try:
                os.kill(pid, signum)
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    raise

    send(signal.SIGTERM)
    left = wait_gone(pids, grace)
    if left:
        send(signal.SIGKILL)
        wait_gone(left, 10)
    return left


class StateRefused(ValueError):
    """A state file that cannot be trusted; its message names the file and what to do."""


def state_problem(state, what="process"):
    """What makes a loaded state of a what unusable, or None."""
    if not isinstance(state, dict):
        return "it holds no JSON object"
    for key, kinds in (("pid", int), ("start_time", int), ("argv", list), ("env_digest", str),
                       ("log_path", str), ("offset", int)):
        if isinstance(state.get(key), bool) or not isinstance(state.get(key), kinds):
            return "%s is missing or not of the right type" % key
    if not all(isinstance(word, str) for word in state["argv"]) or not state["argv"]:
        return "argv is not a command line"
    if state["pid"] <= 1:
        return "pid %d is not a %s's (pid 1 is init, 0 and below are process groups)" % (state["pid"], what)
    return None


class Tracked(object):
    """The pid and state files of one named process, in state_dir (never written through a link).

    A subclass names who writes the files (writer, for messages), what runs (what), the error it raises
    (error, a StateRefused) and the titles a process may give itself in place of its command line (retitles)."""

    writer = "this module"
    what = "process"
    error = StateRefused
    retitles = ()

    def __init__(self, state_dir, name):
        self.state_dir = state_dir
        self.name = name
        self.pid_path = os.path.join(state_dir, name + ".pid")
        self.state_path = os.path.join(state_dir, name + ".json")

    def directory(self, create=False):
        """A descriptor of state_dir, which root alone may change at every level: the state names the pid root
        signals and the command line it compares, so a state another user could edit would let that user have
        root stop any process."""
        return trusted_directory(self.state_dir, "state_dir", 0o750 if create else None)

    def load(self):
        """The recorded state, None when there is none; error when the file cannot be trusted."""
        if path_kind(self.state_dir) is None:
            return None
        directory = self.directory()
        try:
            found = read_regular(self.name + ".json", STATE_LIMIT, directory)
        except FileRefused as exc:
            raise self.bad("it is not what %s writes there: %s" % (self.writer, exc))
        except OSError as exc:
            raise self.bad("it cannot be opened as a file (%s)" % exc.strerror)
        finally:
            os.close(directory)
        if found is None:
            return None
        try:
            state = json.loads(found["data"].decode("utf-8"))
        except ValueError as exc:
            raise self.bad("it is not JSON (%s)" % exc)
        problem = state_problem(state, self.what)
        if problem:
            raise self.bad(problem)
        return state

    def running(self, state, proc_root="/proc", boot=None, uid=None):
        """True when the recorded process runs: same pid, kernel start time and boot as at the launch. False
        when it is gone (its pid free or another process's since). error when a live process has the recorded
        pid and start time but is not the one this module started (another user than the recorded one, another
        command line): such a process is never signalled. A state without a boot id or a uid (written by an
        earlier version) is still recognised by pid, start time, root and command line.

        A process may retitle itself (setproctitle): a title that starts with one of retitles stands for the
        recorded command line."""
        if state.get("boot_id") and state["boot_id"] != (boot or boot_id()):
            return False
        if process_start_time(state["pid"], proc_root) != state["start_time"]:
            return False
        owner = process_uid(state["pid"], proc_root)
        # A state without a uid was written when the process ran as the module's user, root.
        expected = state.get("uid", os.geteuid()) if uid is None else uid
        argv = process_argv(state["pid"], proc_root) or []
        if owner != expected:
            raise self.bad("pid %d runs as uid %s, not as uid %d that launched the %s" % (
                state["pid"], owner, expected, self.what))
        if argv != state["argv"] and not (argv and argv[0].startswith(self.retitles or (None,))):
            raise self.bad("pid %d runs %r, not the recorded %s's command line" % (
                state["pid"], " ".join(argv)[:200], self.what))
        return True

    def bad(self, problem):
        return self.error("The state file %s cannot be trusted: %s. Nothing was signalled or changed. Check "
                          "that no %s of this instance runs, then remove %s and %s."
                          % (self.state_path, problem, self.what, self.state_path, self.pid_path))

    def save(self, state):
        directory = self.directory(create=True)
        try:
            write_atomically(directory, self.name + ".json", json.dumps(state, indent=2, sort_keys=True), STATE_MODE)
            write_atomically(directory, self.name + ".pid", "%d\n" % state["pid"], STATE_MODE)
        finally:
            os.close(directory)

    def files(self):
        """The names of the files forget() removes."""
        return [self.name + ".pid", self.name + ".json"]

    def kept_files(self):
        """The names of every file kept for the process in state_dir, each written root's and 0600 (STATE_MODE)."""
        return self.files()

    def settle_files(self, check=False):
        """The names of the files of kept_files() that are not the module's user's (root's) with STATE_MODE, as
        they are written: set so on their descriptor (never through a link) unless check. A missing file, or
        anything but a regular file (replaced when the file is written), is left alone."""
        if path_kind(self.state_dir) is None:
            return []
        directory = self.directory()
        settled = []
        try:
            for name in self.kept_files():
                try:
                    descriptor, info = open_regular(name, directory)
                except (FileNotFoundError, FileRefused):
                    continue
                try:
                    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == STATE_MODE:
                        continue
                    settled.append(name)
                    if not check:
                        os.fchown(descriptor, os.geteuid(), -1)
                        os.fchmod(descriptor, STATE_MODE)
                finally:
                    os.close(descriptor)
        finally:
            os.close(directory)
        return settled

    def forget(self):
        """Remove the files of files(); the names of those that were there."""
        if path_kind(self.state_dir) is None:
            return []
        directory = self.directory()
        try:
            return [name for name in self.files() if remove(directory, name)]
        finally:
            os.close(directory)


def stop_group(state, grace):
    """Stop the recorded process and its process group (SIGTERM, SIGKILL after grace seconds). (the pids it
    had, those killed hard)."""
    members = group_members(state["pid"]) or [state["pid"]]
    return members, terminate(members, grace, signal_group=state["pid"])
