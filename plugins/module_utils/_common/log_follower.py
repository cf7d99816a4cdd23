# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Follow a growing log file by byte offset, reading only what is new.

Survives the file not existing yet, truncation in place (copytruncate), replacement
by another file (rotation: the rest of the old file is read first), partial lines,
bytes that are not UTF-8 and lines of any length (kept up to ``max_line_bytes``).

Only regular files are followed: a FIFO blocks in open() and read(), a device such as
/dev/zero never ends, a directory cannot be read. Each call reads a bounded amount, so
a huge backlog or a log growing faster than it can be read never holds the caller past
its deadline: ``behind`` tells it that more is waiting.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import os
import stat

READ_CHUNK = 64 * 1024
MAX_LINE_BYTES = 64 * 1024
# The budget of one call, checked between reads of READ_CHUNK bytes. Short lines cost more
# to classify than their bytes suggest, hence a bound on lines as well as on bytes.
MAX_BYTES_PER_CALL = 4 * 1024 * 1024
MAX_LINES_PER_CALL = 20000

KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class LogPathError(Exception):
    """The path cannot be followed as a log: not a regular file, or not readable."""


def refuse_unless_regular(path, mode):
    if stat.S_ISREG(mode):
        return
    kind = next((name for is_kind, name in KINDS if is_kind(mode)), "not a regular file")
    raise LogPathError(
        "log_path %s is %s, not a regular file: only regular files are followed as logs (reading anything else "
        "can block or never end); point log_path at the file the server writes its output to" % (path, kind)
    )


class LogFollower(object):
    """Lines end at \n, \r\n or a bare \r: progress bars (tqdm) rewrite their line with \r, and each
    update is a line of its own, so that the line cap applies per update and a line written after
    them is not cut off."""

    def __init__(self, path, offset=0, max_line_bytes=MAX_LINE_BYTES, max_bytes_per_call=MAX_BYTES_PER_CALL,
                 max_lines_per_call=MAX_LINES_PER_CALL):
        self.path = path
        self.offset = offset
        self.max_line_bytes = max_line_bytes
        self.max_bytes_per_call = max_bytes_per_call
        self.max_lines_per_call = max_lines_per_call
        self.bytes_read = 0
        self.rotations = 0
        self.truncations = 0
        self.behind = False
        self._file = None
        self._identity = None
        self._partial = b""
        self._partial_cut = 0
        self._after_cr = False
        self._bytes_left = 0
        self._lines_left = 0

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self, start):
        try:
            # stat first, so that no device named as log_path is ever opened (opening one can have
            # effects of its own: /dev/watchdog arms the watchdog). That check is not relied on: the
            # open follows no link and cannot block on a FIFO swapped in between, and fstat decides
            # what was really opened.
            refuse_unless_regular(self.path, os.stat(self.path).st_mode)
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return False
            raise LogPathError("log_path %s cannot be read: %s" % (self.path, exc.strerror or exc))
        handle = os.fdopen(descriptor, "rb", buffering=0)
        status = os.fstat(descriptor)
        try:
            refuse_unless_regular(self.path, status.st_mode)
        except LogPathError:
            handle.close()
            raise
        if start > status.st_size:
            # Shorter than where we were to start: it was truncated or replaced since.
            start = 0
            self.truncations += 1
        handle.seek(start)
        self._file, self._identity, self.offset = handle, (status.st_dev, status.st_ino), start
        return True

    def _replaced_or_truncated(self):
        """Return True when the path is now another file (or no regular file); reset on truncation in place."""
        try:
            status = os.stat(self.path)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return False  # moved away and not recreated yet: keep reading the old one
            raise LogPathError("log_path %s cannot be read: %s" % (self.path, exc.strerror or exc))
        if (status.st_dev, status.st_ino) != self._identity:
            return True
        if status.st_size < self.offset:
            self._file.seek(0)
            self.offset = 0
            self._partial, self._partial_cut, self._after_cr = b"", 0, False
            self.truncations += 1
        return False

    def _drain(self):
        while self._bytes_left > 0 and self._lines_left > 0:
            chunk = self._file.read(min(READ_CHUNK, self._bytes_left))
            if not chunk:
                return
            self.offset += len(chunk)
            self.bytes_read += len(chunk)
            self._bytes_left -= len(chunk)
            for line in self._split(chunk):
                self._lines_left -= 1
                yield line
        self.behind = True

    def _split(self, chunk):
        # bytes.find, not a regular expression: it scans a chunk about twenty times faster.
        start = 0
        if self._after_cr and chunk[:1] == b"\n":
            start = 1  # the \n of a \r\n pair whose \r ended the previous read
        newline = chunk.find(b"\n", start)
        while True:
            if 0 <= newline < start:
                newline = chunk.find(b"\n", start)
            carriage = chunk.find(b"\r", start, len(chunk) if newline < 0 else newline)
            end = newline if carriage < 0 else carriage
            if end < 0:
                break
            self._keep(chunk[start:end])
            yield self._take_partial()
            start = end + (2 if chunk[end:end + 2] == b"\r\n" else 1)
        self._keep(chunk[start:])
        self._after_cr = chunk.endswith(b"\r")

    def _keep(self, piece):
        room = self.max_line_bytes - len(self._partial)
        if len(piece) > room:
            self._partial_cut += len(piece) - max(room, 0)
            piece = piece[:max(room, 0)]
        self._partial += piece

    def _take_partial(self):
        line = self._partial.decode("utf-8", "replace")
        if self._partial_cut:
            line += " [... %d bytes cut]" % self._partial_cut
        self._partial, self._partial_cut = b"", 0
        return line

    def read_lines(self):
        """Yield the complete lines written since the last call, up to the budget of one call.

        Raises LogPathError when the path is (or becomes) something other than a readable regular file.
        """
        self.behind = False
        self._bytes_left, self._lines_left = self.max_bytes_per_call, self.max_lines_per_call
        if self._file is None and not self._open(self.offset):
            return
        if self._replaced_or_truncated():
            yield from self._drain()
            if self.behind:
                return  # the rest of the old file comes first, on the next calls
            if self._partial:
                yield self._take_partial()
            self.close()
            self.rotations += 1
            self._after_cr = False
            if not self._open(0):
                return
        yield from self._drain()

    def pending_partial_line(self):
        """The unterminated last line, if any (a crashing process may not end its line)."""
        return self._partial.decode("utf-8", "replace") if self._partial else ""
