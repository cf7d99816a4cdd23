# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Running a virtualenv's code as the user who can change it, never as root.

A virtualenv's interpreter runs whatever its ``.pth`` files, its ``sitecustomize`` and its packages say, and its
owner can edit all of those. Started by root, it would run that user's code as root. So every process that runs a
virtualenv's code (its ``bin/python``, pip, a benchmark client) is started through ``owner_argv``: as the
virtualenv's owner (``runuser``, which sets the user's uid, gid and supplementary groups), in an empty
environment, unless root owns every part of the virtualenv that decides what runs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import tempfile

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import user_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import DIRECTORY_FLAGS

# The search path the virtualenv's code runs with: the same everywhere, whatever the connection's environment.
CLEAN_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Below a virtualenv, what decides which code its interpreter runs: whoever can change one of them can make it
# run anything (lib/ holds the site-packages with their .pth files, bin/ the interpreter link).
DECIDING = ("", "bin", "bin/python", "lib")


def tree_owner(stats):
    """The uid whose code a tree runs: the owner of the first of stats (os.stat_result-like) that root does not
    own, else root (0)."""
    for info in stats:
        if info.st_uid != 0:
            return info.st_uid
    return 0


def venv_owner_uid(venv_path):
    """The uid that owns the virtualenv at venv_path: the first owner other than root among the path itself (a link
    ml_stack points at the profile's virtualenv), the directory it names, and what decides its code (bin,
    bin/python, lib; none of them followed through a link). InvalidOption naming venv_path when it is not
    there."""
    try:
        stats = [os.lstat(venv_path), os.stat(venv_path)]
    except OSError as exc:
        raise InvalidOption("venv_path=%s: %s" % (venv_path, exc.strerror))
    real = os.path.realpath(venv_path)
    for below in DECIDING[1:]:
        try:
            stats.append(os.lstat(os.path.join(real, below)))
        except OSError:
            continue
    return tree_owner(stats)


def as_owner(uid, option):
    """The argv prefix that runs a command as uid: `runuser -u NAME --`, nothing for root. InvalidOption naming
    option when uid has no user name (runuser needs one)."""
    if uid == 0:
        return []
    name = user_name(uid)
    if name is None:
        raise InvalidOption("%s belongs to uid %d, which has no user on this host: its code is run as its owner, "
                            "never as root. Give it to an existing user (chown -R --no-dereference)" % (option, uid))
    return ["runuser", "-u", name, "--"]


def owner_argv(uid, argv, option, environment=None):
    """argv run as uid (as_owner) in an empty environment but for CLEAN_PATH and environment (name: value)."""
    assignments = ["%s=%s" % item for item in sorted((environment or {}).items())]
    return as_owner(uid, option) + ["env", "-i", CLEAN_PATH] + assignments + list(argv)


@contextlib.contextmanager
def owner_output_directory(uid, gid, prefix):
    """(path, descriptor) of a new empty directory, mode 0700, of uid and gid, where a command run through
    owner_argv leaves its output for root to read back through the descriptor (files.read_regular with dir_fd: no
    link followed, bounded, the file's owner known). It lies in a new directory of root's, mode 0711, in the
    system's temporary directory, which uid can pass through but not change: uid cannot swap its directory for a
    link. Both are removed on leaving, whatever uid put there."""
    parent = tempfile.mkdtemp(prefix=prefix)
    try:
        parent_fd = os.open(parent, DIRECTORY_FLAGS)
        try:
            os.fchmod(parent_fd, 0o711)
            os.mkdir("output", 0o700, dir_fd=parent_fd)
            descriptor = os.open("output", DIRECTORY_FLAGS, dir_fd=parent_fd)
        finally:
            os.close(parent_fd)
        try:
            os.fchown(descriptor, uid, gid)
            os.fchmod(descriptor, 0o700)
            yield os.path.join(parent, "output"), descriptor
        finally:
            os.close(descriptor)
    finally:
        # rmtree walks by descriptors and removes links without following them. A process of uid's that outlived
        # the command may still be writing there: what it leaves must not replace the caller's result or error.
        shutil.rmtree(parent, ignore_errors=True)


# What a run of a virtualenv's code may take, at most: its output (the owner's code can print without end) and,
# through RLIMIT_FSIZE, any file it writes; and its time, unless the caller gives its own.
OUTPUT_LIMIT = 16 << 20
RUN_TIMEOUT = 3600


def child_limits(memory):
    """What the child sets before it runs the command: the file size bound, and the address space bound when
    memory is given (never for code that loads CUDA, which reserves address space far beyond what it uses)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return limit


def _read_output(handle):
    handle.seek(0)
    return handle.read(OUTPUT_LIMIT).decode("utf-8", "replace")


def run_bounded(command, timeout=RUN_TIMEOUT, memory=None):
    """(rc, stdout, stderr) of command (an argv that owner_argv made), run in a session of its own with no input.
    Its output goes to unlinked files of root's and is read back up to OUTPUT_LIMIT bytes each; no file it writes
    may grow past that either, nor its address space past memory bytes when given. Past timeout seconds the whole
    session is killed and rc is -9, stderr saying so."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        # run_command cannot bound the output or the address space, nor kill the session at the deadline.
        # pylint: disable-next=ansible-bad-function
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                   start_new_session=True, close_fds=True, preexec_fn=child_limits(memory))
        try:
            rc = process.wait(timeout)
            late = ""
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            rc = process.wait()
            late = "\nthe command did not finish within %d s and was killed" % timeout
        return rc, _read_output(stdout), _read_output(stderr) + late


def run_answered(argv, timeout=RUN_TIMEOUT):
    """run_bounded of argv; a command that cannot start is an answer like any other, rc 127 and why, as a shell
    gives it: the caller's verdict says what it means."""
    try:
        return run_bounded(argv, timeout)
    except OSError as exc:
        return 127, "", "%s: %s" % (argv[0], exc.strerror)


def run_as_owner(uid, argv, option, timeout=RUN_TIMEOUT, environment=None):
    """run_bounded of argv as uid (owner_argv)."""
    return run_bounded(owner_argv(uid, argv, option, environment), timeout)
