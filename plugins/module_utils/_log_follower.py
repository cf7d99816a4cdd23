# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Follow a growing log file by byte offset, reading only what is new.

Survives the file not existing yet, truncation in place (copytruncate), replacement
by another file (rotation: the rest of the old file is read first), partial lines,
bytes that are not UTF-8 and lines of any length (kept up to ``max_line_bytes``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

READ_CHUNK = 1024 * 1024
MAX_LINE_BYTES = 64 * 1024


class LogFollower(object):
    def __init__(self, path, offset=0, max_line_bytes=MAX_LINE_BYTES):
        self.path = path
        self.offset = offset
        self.max_line_bytes = max_line_bytes
        self.bytes_read = 0
        self.rotations = 0
        self.truncations = 0
        self._file = None
        self._identity = None
        self._partial = b""
        self._partial_cut = 0

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self, start):
        try:
            handle = open(self.path, "rb")
        except (IOError, OSError) as exc:
            if exc.errno == errno.ENOENT:
                return False
            raise
        status = os.fstat(handle.fileno())
        if start > status.st_size:
            # Shorter than where we were to start: it was truncated or replaced since.
            start = 0
            self.truncations += 1
        handle.seek(start)
        self._file, self._identity, self.offset = handle, (status.st_dev, status.st_ino), start
        return True

    def _replaced_or_truncated(self):
        """Return True when the path is now another file; reset on truncation in place."""
        try:
            status = os.stat(self.path)
        except (IOError, OSError) as exc:
            if exc.errno == errno.ENOENT:
                return False  # moved away and not recreated yet: keep reading the old one
            raise
        if (status.st_dev, status.st_ino) != self._identity:
            return True
        if status.st_size < self.offset:
            self._file.seek(0)
            self.offset = 0
            self._partial, self._partial_cut = b"", 0
            self.truncations += 1
        return False

    def _drain(self):
        while True:
            chunk = self._file.read(READ_CHUNK)
            if not chunk:
                return
            self.offset += len(chunk)
            self.bytes_read += len(chunk)
            yield from self._split(chunk)

    def _split(self, chunk):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(chunk[start:])
                return
            self._keep(chunk[start:end])
            yield self._take_partial()
            start = end + 1

    def _keep(self, piece):
        room = self.max_line_bytes - len(self._partial)
        if len(piece) > room:
            self._partial_cut += len(piece) - max(room, 0)
            piece = piece[:max(room, 0)]
        self._partial += piece

    def _take_partial(self):
        line = self._partial.rstrip(b"\r").decode("utf-8", "replace")
        if self._partial_cut:
            line += " [... %d bytes cut]" % self._partial_cut
        self._partial, self._partial_cut = b"", 0
        return line

    def read_lines(self):
        """Yield the complete lines written since the last call."""
        if self._file is None and not self._open(self.offset):
            return
        if self._replaced_or_truncated():
            yield from self._drain()
            if self._partial:
                yield self._take_partial()
            self.close()
            self.rotations += 1
            if not self._open(0):
                return
        yield from self._drain()

    def pending_partial_line(self):
        """The unterminated last line, if any (a crashing process may not end its line)."""
        return self._partial.decode("utf-8", "replace") if self._partial else ""
