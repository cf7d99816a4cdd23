# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Files and directories root touches, never through a link."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import binascii
import errno
import os
import stat

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import user_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption

# Root writes as root: no write may follow a symbolic link that someone put where a file should be.
OPEN_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC


def path_kind(path):
    """None when path does not exist, else what it is, not following a link: `file`, `directory`, `symbolic
    link`, `FIFO`, `socket` or `device`."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    for test, kind in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "device"


def open_directory(path, option, create_mode=None):
    """A descriptor of the directory path, its final component not a link; created with create_mode (and
    missing parents) when it does not exist and create_mode is given."""
    flags = os.O_RDONLY | os.O_DIRECTORY | OPEN_NO_LINK
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENOENT and create_mode is not None:
            os.makedirs(path, create_mode, exist_ok=True)
            return open_directory(path, option)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidOption("%s=%s is a %s: point %s at a directory (root never writes through a link)"
                                % (option, path, path_kind(path), option))
        raise


def write_atomically(directory_fd, name, content, mode):
    """Replace name in the directory with content: written to a new file of a random name (O_EXCL, so never
    through a link) and renamed over name, which replaces a link there rather than writing through it."""
    temporary = ".%s.%s.tmp" % (name, binascii.hexlify(os.urandom(8)).decode("ascii"))
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_NO_LINK, mode, dir_fd=directory_fd)
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        remove(directory_fd, temporary)
        raise


def read_text(directory_fd, name, limit=1 << 20):
    """The text of the regular file name in the directory, None when there is none (a link is not followed,
    and counts as none: it is replaced when the file is written)."""
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | OPEN_NO_LINK, dir_fd=directory_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            return None
        raise
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit).decode("utf-8", "replace")


def remove(directory_fd, name):
    """Remove name from the directory (a link itself, never its target); True when it was there."""
    try:
        os.unlink(name, dir_fd=directory_fd)
        return True
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        return False


def nearest_existing(path):
    """path, or its nearest ancestor that exists (the log's directory is created when missing)."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def foreign_writable(root, limit=20, max_entries=500000):
    """(owner uid of root, [problems], complete): root and the entries under it, links not followed, that a
    user other than root's owner (or root) can write: writable by group or others, or owned by another user.
    complete is False when the walk stopped early, at limit problems or max_entries entries."""
    owner = os.lstat(root).st_uid
    problems = []

    def check(path):
        try:
            info = os.lstat(path)
        except OSError:
            return
        if stat.S_ISLNK(info.st_mode):
            return
        if info.st_uid not in (owner, 0):
            problems.append("%s is owned by uid %d (%s)" % (path, info.st_uid, user_name(info.st_uid)))
        elif info.st_mode & 0o022:
            problems.append("%s is writable by its group or others (mode %04o)" % (path, stat.S_IMODE(info.st_mode)))

    check(root)
    seen = 1
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            check(os.path.join(directory, name))
            seen += 1
            if len(problems) >= limit or seen >= max_entries:
                return owner, problems, False
    return owner, problems, True
