# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Files and directories root touches: the one place that reads, writes and walks them.

Root reads files in trees another user controls (a service user's virtualenv, state and log directories), and
writes its own files into them. Whatever that user can write is hostile: a FIFO where a file was, a link to
/dev/zero or /etc/shadow, an 8 GiB sparse file, a file swapped between a check and the open, a directory swapped
for a link. So, here and nowhere else in the collection:

- a file is opened first (O_NOFOLLOW, O_NONBLOCK: a link is refused, a FIFO cannot block the open) and only then
  looked at (fstat on the descriptor: a regular file, or it is refused); there is no check by path before the open;
- a read stops at a bound the caller states, and a file larger than that is refused or cut, never read whole;
- a write goes into a directory descriptor, to a new file of a random name (O_EXCL) renamed over the old one,
  so that a link planted at the name is replaced, never written through;
- a path below a directory is walked one component at a time from that directory's descriptor, each opened with
  O_NOFOLLOW|O_DIRECTORY: a link anywhere on the way is refused, ``..`` is never taken, and the levels' owners are
  known, so the caller can prove that what it writes lies inside the tree it means.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import binascii
import errno
import fcntl
import hashlib
import os
import stat

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import described_user, user_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption

# Root writes as root: no write may follow a symbolic link that someone put where a file should be.
OPEN_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC
# Reading a file of someone else's: no link followed, and a FIFO put there cannot block the open.
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | OPEN_NO_LINK
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | OPEN_NO_LINK
READ_BLOCK = 1 << 16
# The most entries a walk of a tree that another user fills looks at: about ten torch virtualenvs.
TREE_ENTRIES = 500000


class FileRefused(InvalidOption):
    """A path that is not what root may read or write there: a link, a FIFO, a device, a file over its bound, a
    directory another user could swap. The message names the path and what is wrong."""


def path_kind(path):
    """None when path does not exist, else what it is, not following a link: `file`, `directory`, `symbolic
    link`, `FIFO`, `socket` or `device`."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    return mode_kind(mode)


def mode_kind(mode):
    """What an st_mode says a path is: `file`, `directory`, `symbolic link`, `FIFO`, `socket` or `device`."""
    for test, kind in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "device"


def _refused_open(path, exc):
    """FileRefused for an open that failed because of what is at path (a link, a directory), else exc itself."""
    if exc.errno == errno.ELOOP:
        return FileRefused("%s is a symbolic link: root does not follow links in a tree another user can write "
                           "(remove the link; the collection puts a file there)" % path)
    if exc.errno in (errno.EISDIR, errno.ENXIO, errno.ENOTDIR):
        return FileRefused("%s is not a regular file (%s)" % (path, exc.strerror))
    return exc


def open_regular(path, dir_fd=None):
    """A read descriptor of the regular file path (relative to dir_fd when given) and its fstat. Opened before it is
    looked at, without following a link and without blocking; FileNotFoundError when nothing is there, FileRefused
    when it is a link or not a regular file (a FIFO, a device, a directory)."""
    try:
        descriptor = os.open(path, READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refused_open(path, exc)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused("%s is a %s, not a regular file: only regular files are read here (a FIFO blocks, a "
                              "device never ends)" % (path, mode_kind(info.st_mode)))
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor, info


def read_bounded(descriptor, limit, path, cut=False):
    """The bytes of an open regular file, at most limit of them. Past the bound: FileRefused naming path, or (cut)
    the first limit bytes. The bound holds whatever the file's size says (it can grow while it is read)."""
    chunks, left = [], limit + 1
    while left > 0:
        chunk = os.read(descriptor, min(READ_BLOCK, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        if not cut:
            raise FileRefused("%s is larger than the %d bytes it may hold here: look at it (it is not what the "
                              "collection writes there), remove it and run again" % (path, limit))
        data = data[:limit]
    return data


def read_regular(path, limit, dir_fd=None, cut=False):
    """{"uid", "gid", "mode", "size", "data"} of the regular file path, at most limit bytes (FileRefused beyond, or
    with cut its first limit bytes; FileRefused for a link or anything but a regular file); None when nothing is
    there."""
    try:
        descriptor, info = open_regular(path, dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    try:
        data = read_bounded(descriptor, limit, path, cut)
    finally:
        os.close(descriptor)
    return {"uid": info.st_uid, "gid": info.st_gid, "mode": stat.S_IMODE(info.st_mode), "size": info.st_size,
            "data": data}


def file_state(path, limit, dir_fd=None):
    """uid, gid, mode and UTF-8 text of the regular file path, as a converged check compares it with what a role
    writes; None when there is no regular file within the bound to compare (missing, a link, a FIFO, too large,
    not UTF-8, unreadable): the check then says the file is not as the role leaves it."""
    try:
        found = read_regular(path, limit, dir_fd)
        if found is None:
            return None
        content = found.pop("data").decode("utf-8")
    except (OSError, InvalidOption, UnicodeDecodeError):
        return None
    found.pop("size")
    found["content"] = content
    return found


def sha1_regular(path, limit):
    """The sha1 of the regular file path, read through one descriptor (never a link, never blocking) up to limit
    bytes; FileRefused for anything else, or a larger file."""
    descriptor, _info = open_regular(path)
    digest, seen = hashlib.sha1(), 0
    try:
        while True:
            chunk = os.read(descriptor, READ_BLOCK)
            if not chunk:
                return digest.hexdigest()
            seen += len(chunk)
            if seen > limit:
                raise FileRefused("%s is larger than the %d bytes it may hold here" % (path, limit))
            digest.update(chunk)
    finally:
        os.close(descriptor)


def read_text(directory_fd, name, limit=1 << 20):
    """The text of the regular file name in the directory (its first limit bytes), None when there is none: a
    link or anything but a regular file counts as none, as it is replaced when the file is written."""
    try:
        found = read_regular(name, limit, directory_fd, cut=True)
    except FileRefused:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    return None if found is None else found["data"].decode("utf-8", "replace")


def open_directory(path, option, create_mode=None):
    """A descriptor of the directory path, its final component not a link; created with create_mode (and
    missing parents) when it does not exist and create_mode is given."""
    try:
        return os.open(path, DIRECTORY_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOENT and create_mode is not None:
            os.makedirs(path, create_mode, exist_ok=True)
            return open_directory(path, option)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidOption("%s=%s is a %s: point %s at a directory (root never writes through a link)"
                                % (option, path, path_kind(path), option))
        raise


def path_components(relative, option):
    """The names of a relative path, each one a plain name: no empty, `.` or `..` component, not absolute.
    InvalidOption naming option otherwise."""
    parts = relative.split("/") if relative else []
    if relative.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise InvalidOption("%s=%r is not a relative path of plain names (no '.', '..', empty or leading '/' "
                            "component)" % (option, relative))
    return parts


def walk(directory_fd, relative, option, create_mode=None, owner=None):
    """(descriptor, levels): the directory at relative (plain names, see path_components) below directory_fd,
    reached one component at a time without following a link; levels holds (name, uid, gid, mode) of each
    component. A missing component is created with create_mode (and owner (uid, gid) when given) through its
    parent's descriptor when create_mode is given, else FileNotFoundError. FileRefused for a link or a file on
    the way. The caller closes the descriptor; directory_fd stays open."""
    current, levels = os.dup(directory_fd), []
    try:
        for name in path_components(relative, option):
            try:
                below = os.open(name, DIRECTORY_FLAGS, dir_fd=current)
            except OSError as exc:
                if exc.errno != errno.ENOENT or create_mode is None:
                    raise _refused_open("%s (in %s)" % (name, relative), exc)
                try:
                    os.mkdir(name, create_mode, dir_fd=current)
                except FileExistsError:
                    pass
                below = os.open(name, DIRECTORY_FLAGS, dir_fd=current)
                if owner is not None:
                    os.fchown(below, owner[0], owner[1])
                os.fchmod(below, create_mode)
            os.close(current)
            current = below
            info = os.fstat(current)
            levels.append((name, info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)))
    except BaseException:
        os.close(current)
        raise
    return current, levels


def open_resolved(path, option):
    """(descriptor, real path) of the directory path names now, links on the way resolved once (realpath) and the
    real path then walked from / without following any link: what the descriptor holds is the directory at that
    real path, even if a link on the way is repointed afterwards. The caller proves who owns it."""
    real = os.path.realpath(path)
    root = os.open("/", DIRECTORY_FLAGS)
    try:
        try:
            descriptor, _levels = walk(root, real.lstrip("/"), option) if real != "/" else (os.dup(root), [])
        except FileNotFoundError:
            raise InvalidOption("%s=%s does not exist" % (option, path))
        except FileRefused as exc:
            raise InvalidOption("%s=%s changed while it was looked at (%s): run again" % (option, path, exc))
    finally:
        os.close(root)
    return descriptor, real


def open_beneath(path, option):
    """A descriptor of the directory path whose parent is resolved once (open_resolved) and whose own name is then
    opened without following a link: path may lie in a directory another user can write (a home directory), where
    a link swapped in for path must never be entered. FileNotFoundError when path is not there; InvalidOption
    naming option when it is a link or not a directory."""
    parent, name = os.path.split(path.rstrip("/"))
    if not name or name in (".", ".."):
        raise InvalidOption("%s=%s does not name a directory below another one" % (option, path))
    parent_fd, real_parent = open_resolved(parent or "/", option)
    try:
        descriptor, _levels = walk(parent_fd, name, option)
    except FileRefused:
        raise InvalidOption("%s=%s is a link or not a directory: root enters only the directory itself (remove what "
                            "is there, the collection makes a directory)" % (option, path))
    finally:
        os.close(parent_fd)
    return descriptor


def tree_entries(directory_fd, max_entries=None):
    """(descriptor of its directory, its directory's path relative to the tree, name) of every entry below the
    directory, bottom-up: a directory's entries come before the directory itself. No link is followed: os.fwalk
    enters a directory only when what it opened is what it listed, so a directory swapped for a link is not
    entered. FileRefused past max_entries entries (when given), before the next one is yielded."""
    seen = 0
    for top, dirs, names, fd in os.fwalk(".", topdown=False, follow_symlinks=False, dir_fd=directory_fd):
        for name in names + dirs:
            seen += 1
            if max_entries is not None and seen > max_entries:
                raise FileRefused("it holds more than %d entries, more than root walks in a tree another user "
                                  "fills: remove what does not belong there" % max_entries)
            yield fd, top, name


def _to_hand_over(info, uid, gid, path):
    """Whether an entry (its lstat or fstat) needs its owner changed to be uid and gid's: not when it is theirs
    already, as nothing is changed through it then. FileRefused for one that is not a directory and has another
    hard link: the tree's owner can link into its tree a file from anywhere on the filesystem (any file of root's
    that it can read and write), and handing the entry over would hand the owner that file."""
    if (info.st_uid, info.st_gid) == (uid, gid):
        return False
    if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
        raise FileRefused("%s belongs to %s and has %d hard links: giving it to the virtualenv's owner would give "
                          "them a file outside the virtualenv. Remove the hard link from the virtualenv"
                          % (path, described_user(info.st_uid), info.st_nlink))
    return True


def chown_tree(directory_fd, path, uid, gid, check=False):
    """Give the directory (path names it in messages) and everything below it to uid and gid, links themselves
    included and never followed, bottom-up: each directory is handed over only once all below it is, so that its
    new owner cannot swap a directory for a link while root still works below it. Entries that are theirs already
    are left alone. FileRefused naming the first entry to hand over that is not a directory and has another hard
    link, before anything is handed over. Whether any entry was (with check, would be) handed over; with check,
    nothing is.

    Each entry is looked at without following it (lstat) in a first walk; in a second, it is opened without
    following a link or opening what it is (O_PATH), and handed over from what fstat says of that descriptor, so
    an entry swapped in between is judged by itself."""
    path = os.path.normpath(path)
    needed = _to_hand_over(os.fstat(directory_fd), uid, gid, path)
    for fd, top, name in tree_entries(directory_fd):
        if _to_hand_over(os.lstat(name, dir_fd=fd), uid, gid, os.path.normpath(os.path.join(path, top, name))):
            needed = True
    if check or not needed:
        return needed
    for fd, top, name in tree_entries(directory_fd):
        descriptor = os.open(name, os.O_PATH | OPEN_NO_LINK, dir_fd=fd)
        try:
            if _to_hand_over(os.fstat(descriptor), uid, gid, os.path.normpath(os.path.join(path, top, name))):
                # fchown refuses an O_PATH descriptor; its /proc link leads to the entry itself, a link included.
                os.chown("/proc/self/fd/%d" % descriptor, uid, gid)
        finally:
            os.close(descriptor)
    if _to_hand_over(os.fstat(directory_fd), uid, gid, path):
        os.fchown(directory_fd, uid, gid)
    return True


def _without_group_other_write(info, uids, owner_uid, path):
    """The mode of an entry (its lstat or fstat) without write permission for its group and others, or None when
    it has none to remove or is a link (whose own mode means nothing). FileRefused for an entry of a user not in
    uids (None: any user), whatever its mode, as that user can change it; for a socket or a device, which root
    does not open; and for a file of root's, when root is not owner_uid (the tree's owner), that has another hard
    link: the owner can link a file of root's from anywhere on the filesystem into its tree, and its mode is that
    file's."""
    if stat.S_ISLNK(info.st_mode):
        return None
    if uids is not None and info.st_uid not in uids:
        allowed = " or ".join(described_user(uid) for uid in sorted(set(uids), reverse=True))
        raise FileRefused("%s belongs to %s, who can change it: root changes modes only on entries of %s. Give it "
                          "to its owner (chown) or remove it" % (path, described_user(info.st_uid), allowed))
    if not info.st_mode & 0o022:
        return None
    # The owner's own hard-linked files are changed: the owner may change their modes itself, root grants it nothing.
    if info.st_uid == 0 and owner_uid != 0 and info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
        raise FileRefused("%s is a file of root's with %d hard links: changing its mode would change root's file "
                          "outside the virtualenv. Remove the hard link from the virtualenv" % (path, info.st_nlink))
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        raise FileRefused("%s is a %s that its group or others can write (mode %04o); root does not open one: "
                          "remove it" % (path, mode_kind(info.st_mode), stat.S_IMODE(info.st_mode)))
    return stat.S_IMODE(info.st_mode) & ~0o022


def _mode_change_failed(entry, exc):
    """FileRefused naming the entry of the walk whose open, fstat or fchmod failed with exc, and why."""
    if exc.errno == errno.ELOOP:
        why = "it was replaced by a symbolic link after root looked at it, and root does not follow a link there"
    else:
        why = exc.strerror or str(exc)
    return FileRefused("changing the mode of %s failed: %s" % (entry, why))


def clear_group_other_write(directory_fd, path, uids, check=False, max_entries=TREE_ENTRIES):
    """Remove the write permission of the group and of others from everything below the directory path (open as
    directory_fd), bottom-up as tree_entries walks it, and last from the directory itself; yields (path of the
    entry, mode before, mode after) as each entry is changed (with check, would be changed), so that a caller
    knows what was changed before a failure. Only entries of uids (None: any user) are changed: FileRefused
    naming the first entry of another user, the first file of root's to change that has another hard link
    (unless the directory is root's), the first entry whose change failed, and past max_entries entries.

    Each entry is looked at without following it (lstat); one that needs a change is then opened without
    following a link or blocking, and changed through that descriptor from what fstat says of it, so an entry
    swapped in between is judged by itself and never given another entry's mode."""
    path = os.path.normpath(path)
    owner_uid = os.fstat(directory_fd).st_uid
    for fd, top, name in tree_entries(directory_fd, max_entries):
        entry = os.path.normpath(os.path.join(path, top, name))
        try:
            info = os.lstat(name, dir_fd=fd)
            if _without_group_other_write(info, uids, owner_uid, entry) is None:
                continue
            descriptor = None if check else os.open(name, READ_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            continue  # removed since it was listed: nothing left to change
        except OSError as exc:
            raise _mode_change_failed(entry, exc)
        try:
            if descriptor is not None:
                info = os.fstat(descriptor)
            mode = _without_group_other_write(info, uids, owner_uid, entry)
            if mode is not None and descriptor is not None:
                os.fchmod(descriptor, mode)
        except OSError as exc:
            raise _mode_change_failed(entry, exc)
        finally:
            if descriptor is not None:
                os.close(descriptor)
        if mode is not None:
            yield entry, stat.S_IMODE(info.st_mode), mode
    info = os.fstat(directory_fd)
    mode = _without_group_other_write(info, uids, owner_uid, path)
    if mode is not None:
        if not check:
            os.fchmod(directory_fd, mode)
        yield path, stat.S_IMODE(info.st_mode), mode


def untrusted_level(uid, mode, next_uid=None):
    """Why a directory level lets someone other than root change what lies below it, or None: owned by another
    user, or writable by its group or others; a sticky directory (/tmp) writable by all is trusted for a next
    level that root owns, as only root can rename or remove root's entries there."""
    if uid != 0:
        return "it belongs to %s, not to root" % described_user(uid)
    if mode & 0o022:
        if mode & stat.S_ISVTX and next_uid == 0:
            return None
        return "its group or others can write it (mode %04o)" % stat.S_IMODE(mode)
    return None


def trusted_directory(path, option, create_mode=None):
    """A descriptor of the directory path whose every level, from / down, root owns and nobody else can write:
    no other user can swap a level, plant a link or edit what root keeps there. Missing levels below the last
    existing one are created root's with create_mode when it is given. InvalidOption naming option and the level
    otherwise."""
    if not path.startswith("/"):
        raise InvalidOption("%s=%s is not an absolute path" % (option, path))
    names = [name for name in path.split("/") if name]
    if any(name in (".", "..") for name in names):
        raise InvalidOption("%s=%s holds '.' or '..': give the directory's own path" % (option, path))
    current = os.open("/", DIRECTORY_FLAGS)
    level, info = "/", os.fstat(current)
    try:
        for name in names:
            try:
                below = os.open(name, DIRECTORY_FLAGS, dir_fd=current)
            except OSError as exc:
                if exc.errno != errno.ENOENT or create_mode is None:
                    if exc.errno == errno.ENOENT:
                        raise
                    raise InvalidOption("%s=%s: %s/%s is a %s, not a directory: root keeps its files only in "
                                        "directories that no other user can change" % (
                                            option, path, level.rstrip("/"), name,
                                            mode_kind(os.lstat(name, dir_fd=current).st_mode)))
                try:
                    os.mkdir(name, create_mode, dir_fd=current)
                except FileExistsError:
                    pass
                below = os.open(name, DIRECTORY_FLAGS, dir_fd=current)
                os.fchown(below, 0, 0)
                os.fchmod(below, create_mode)
            below_info = os.fstat(below)
            problem = untrusted_level(info.st_uid, info.st_mode, below_info.st_uid)
            if problem:
                os.close(below)
                raise InvalidOption("%s=%s: %s %s, so another user could replace what root keeps below it. Make "
                                    "every level root's and writable by root alone (chown root: %s; chmod go-w %s), "
                                    "or choose a %s under such a directory" % (
                                        option, path, level, problem, level, level, option))
            os.close(current)
            current, info = below, below_info
            level = level.rstrip("/") + "/" + name
        problem = untrusted_level(info.st_uid, info.st_mode)
        if problem:
            raise InvalidOption("%s=%s: %s %s, so another user could replace what root keeps in it. Make it root's "
                                "and writable by root alone (chown root: %s; chmod go-w %s)" % (
                                    option, path, level, problem, level, level))
    except BaseException:
        os.close(current)
        raise
    return current


def trusted_state_subdirectory(state_dir, name, what, create=False):
    """A descriptor of <state_dir>/<name>, where root keeps what is named by what ("the snapshots of state_dir"), every
    level from / root's and writable by root alone: created so (state_dir 0750, name 0700) when create; None when
    it does not exist. InvalidOption naming the level that another user could change."""
    path = os.path.join(state_dir, name)
    try:
        if create:
            os.close(trusted_directory(state_dir, "state_dir", 0o750))
            return trusted_directory(path, what, 0o700)
        return trusted_directory(path, what)
    except FileNotFoundError:
        return None


def _temporary_name(name):
    return ".%s.%s.tmp" % (name, binascii.hexlify(os.urandom(8)).decode("ascii"))


def write_atomically(directory_fd, name, content, mode, owner=None):
    """Replace name in the directory with content (text or bytes): written to a new file of a random name (O_EXCL,
    so never through a link), its mode and owner (uid, gid) set on the descriptor, synced, and renamed over name,
    which replaces a link there rather than writing through it. Nothing is left behind when it fails (a full disk)."""
    temporary = stage_file(directory_fd, name, content, mode, owner)
    try:
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        remove(directory_fd, temporary)
        raise


def settle_file(directory_fd, name, text, mode, check=False):
    """Keep name in the directory a regular file of the caller (root) with text and mode, as write_atomically
    writes it: True when it is not (missing, another text, mode or owner, a link), and then written so unless
    check. Comparing the text alone would leave a file that another user was given, or could read or write, so."""
    found = file_state(name, 1 << 20, directory_fd)
    if found is not None and (found["content"], found["mode"], found["uid"]) == (text, mode, os.geteuid()):
        return False
    if not check:
        write_atomically(directory_fd, name, text, mode)
    return True


def create_exclusively(directory_fd, name, content, mode):
    """Create name in the directory with content and mode, whole or not at all, only when nothing is there (a
    lock): written under a random name and hard-linked to name, which fails when name exists. True when it was
    created, False when something already was there."""
    temporary = stage_file(directory_fd, name, content, mode)
    try:
        os.link(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    finally:
        remove(directory_fd, temporary)


def stage_file(directory_fd, name, content, mode, owner=None):
    """A new file beside name with content, mode and owner, under a random temporary name, for a rename over name
    later (os.replace with directory_fd as both directories); removed again when it cannot be written whole."""
    temporary = _temporary_name(name)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_NO_LINK, mode, dir_fd=directory_fd)
    try:
        os.fchmod(descriptor, mode)
        if owner is not None:
            os.fchown(descriptor, owner[0], owner[1])
        data = content.encode("utf-8") if not isinstance(content, bytes) else content
        while data:
            data = data[os.write(descriptor, data):]
        os.fsync(descriptor)
    except BaseException:
        os.close(descriptor)
        remove(directory_fd, temporary)
        raise
    os.close(descriptor)
    return temporary


def stage_link(directory_fd, name, target, owner=None):
    """A new symbolic link to target beside name under a random temporary name, owned by owner (uid, gid) when
    given (never following it), for a rename over name later."""
    temporary = _temporary_name(name)
    os.symlink(target, temporary, dir_fd=directory_fd)
    try:
        if owner is not None:
            os.chown(temporary, owner[0], owner[1], dir_fd=directory_fd, follow_symlinks=False)
    except BaseException:
        remove(directory_fd, temporary)
        raise
    return temporary


def replace_link(directory_fd, name, target, path):
    """Point the link name in the directory at target in one rename, keeping the owner of the link it replaces
    (by uid and gid, never through the link). FileRefused naming path when something other than a link is there."""
    try:
        before = os.lstat(name, dir_fd=directory_fd)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        before = None
    if before is not None and not stat.S_ISLNK(before.st_mode):
        raise FileRefused("%s is a %s, not a link; nothing was replaced: move it away, the stack's links go there"
                          % (path, mode_kind(before.st_mode)))
    temporary = stage_link(directory_fd, name, target,
                           None if before is None else (before.st_uid, before.st_gid))
    try:
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        remove(directory_fd, temporary)
        raise


def directory_entry(directory_fd, name):
    """What name is in the directory, never following it: None when nothing is there, else {"kind" (path_kind's
    word), "uid", "gid", "target"}, target being what a symbolic link points at (None for anything else)."""
    try:
        info = os.lstat(name, dir_fd=directory_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    target = None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(name, dir_fd=directory_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EINVAL):
                raise FileRefused("%s changed while it was looked at: run again" % name)
            raise
    return {"kind": mode_kind(info.st_mode), "uid": info.st_uid, "gid": info.st_gid, "target": target}


def open_appending(directory_fd, name, mode):
    """A descriptor appending to the regular file name in the directory, created with mode when missing: opened
    without following a link or blocking on a FIFO (then made blocking for writes), fstat deciding what it is.
    FileRefused for anything but a regular file; OSError when it cannot be opened."""
    descriptor = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | OPEN_NO_LINK, mode,
                         dir_fd=directory_fd)
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        raise FileRefused("%s is a %s, not a regular file" % (name, mode_kind(info.st_mode)))
    fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return descriptor


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


def foreign_writable(root, limit=20, max_entries=TREE_ENTRIES):
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
            problems.append("%s is owned by uid %d (%s)" % (path, info.st_uid, user_name(info.st_uid) or "no user"))
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
