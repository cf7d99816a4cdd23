# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Starting, finding and stopping the server's processes, and its log file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import glob
import os
import signal
import stat
import subprocess
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    open_appending,
    trusted_directory,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import process_start_time
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import log_path_problem

# The server's files are not readable by others (the log, caches it writes under HOME).
SERVER_UMASK = 0o027


def device_holders(patterns, exclude=(), proc_root="/proc"):
    """{pid: [device paths]} of the processes that have a file matching patterns open."""
    devices = set()
    for pattern in patterns:
        devices.update(os.path.realpath(path) for path in glob.glob(pattern))
    holders = {}
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        fd_dir = os.path.join(proc_root, entry, "fd")
        try:
            names = os.listdir(fd_dir)
        except (IOError, OSError):
            continue
        for name in names:
            try:
                target = os.readlink(os.path.join(fd_dir, name))
            except (IOError, OSError):
                continue
            if target in devices:
                holders.setdefault(int(entry), set()).add(target)
    return dict((pid, sorted(paths)) for pid, paths in holders.items())


def open_log(log_path, log_gid=None):
    """A descriptor appending to log_path, created 0640 when missing; an existing file keeps its mode less any
    permission for others (a log of an earlier version was 0644); its group log_gid when given. Both are set
    on the open descriptor, so never through a link.

    Opened without following a link or blocking on a FIFO (files.open_appending); anything but a regular file
    is refused naming log_path. Its directory must be root's at every level and writable by root
    alone (missing levels are created so, 0755): systemd opens the log by path (StandardOutput=append:, as
    root), following any link, so a user who could write the directory could point it at any file of the host.
    The module opens it through that directory's descriptor."""
    log_dir, name = os.path.split(os.path.abspath(log_path))
    directory = trusted_directory(log_dir, "log_path", 0o755)
    try:
        descriptor = open_appending(directory, name, 0o640)
    except FileRefused:
        raise InvalidOption(log_path_problem(log_path) or "log_path=%s is not a regular file" % log_path)
    except OSError as exc:
        raise InvalidOption(log_path_problem(log_path) or "log_path=%s cannot be opened: %s" % (log_path, exc))
    finally:
        os.close(directory)
    mode = stat.S_IMODE(os.fstat(descriptor).st_mode)
    if mode & 0o007:
        os.fchmod(descriptor, mode & ~0o007)
    if log_gid is not None:
        os.fchown(descriptor, -1, log_gid)
    return descriptor


def log_offset(log_path, log_gid=None):
    """The log's size now, where the next server's lines will begin; the log is created when missing."""
    descriptor = open_log(log_path, log_gid)
    try:
        return os.lseek(descriptor, 0, os.SEEK_END)
    finally:
        os.close(descriptor)


def server_environment(base, env, account):
    """The server's environment: base (the module's), the account's HOME, USER and LOGNAME (caches such as
    HF_HOME and Triton's go under HOME; root's would be refused to the user), then env, which wins."""
    environment = dict(base)
    if account is not None:
        environment.update(HOME=account["home"], USER=account["user"], LOGNAME=account["user"])
    environment.update(env or {})
    return environment


def launch(argv, env, log_path, account=None, log_gid=None):
    """Start argv detached (own session), stdout and stderr appended to log_path, which root opens (so it
    stays root's, 0640); the child drops to account (user, group, its supplementary groups) with umask 027
    before it runs argv."""
    log = open_log(log_path, log_gid)
    identity = {}
    if account is not None:
        identity = dict(user=account["uid"], group=account["gid"], extra_groups=account["groups"])
    try:
        offset = os.lseek(log, 0, os.SEEK_END)
        # The server outlives the module, in a session of its own as the service user: run_command waits for it.
        # pylint: disable-next=ansible-bad-function
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=server_environment(os.environ, env, account), start_new_session=True, close_fds=True,
            umask=SERVER_UMASK, cwd="/" if account is not None else None, **identity
        )
    finally:
        os.close(log)
    start_time = None
    deadline = time.monotonic() + 5
    while start_time is None and time.monotonic() < deadline:
        start_time = process_start_time(process.pid)
        if start_time is None and process.poll() is not None:
            break
    return process, offset, start_time


def wait_gone(pids, timeout, sleep=time.sleep, clock=time.monotonic):
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


def gpu_memory_pids(run=subprocess.run):
    """Pids that nvidia-smi lists with GPU memory, or None where nvidia-smi is not there."""
    try:
        # The cores run without an AnsibleModule (run_command), so that they can be tested and reused alone.
        # pylint: disable-next=ansible-bad-function
        completed = run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                        capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return set(int(line) for line in completed.stdout.split() if line.strip().isdigit())


def wait_gpu_release(pids, timeout, query=gpu_memory_pids, sleep=time.sleep, clock=time.monotonic):
    """True once none of pids holds GPU memory; False at timeout; None without nvidia-smi."""
    deadline = clock() + timeout
    while True:
        holders = query()
        if holders is None:
            return None
        if not holders & set(pids):
            return True
        if clock() >= deadline:
            return False
        sleep(0.5)
