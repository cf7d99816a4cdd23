# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""A GPU node's saved outputs, read for gpu_health.assess_evidence(): a directory of captured outputs, or an
nvidia-bug-report.log.gz (or .log) as NVIDIA's nvidia-bug-report.sh writes it.

A directory holds each output under the name of what it is (EVIDENCE_FILES); an nvidia-bug-report.log(.gz) in it
gives what the files do not. A bug report is read section by section, as the script writes them (a line of 44
underscores before each): the output of `nvidia-smi --query`, `nvidia-smi nvlink --errorcounters` and `--status`
(one section, each output after its command line), and the kernel log of the boot it was written in: the `dmesg:`
section, else the `journalctl -b -0:` lines of "Scanning kernel log files for NVIDIA kernel messages:" (the lines of
the boots before, -1 and -2, are history, not the node's state now). The script's --safe-mode leaves nvidia-smi out;
what is missing is said.

Everything is read through _common/files: opened without following a link, a regular file only, never more than
its bound (a directory's file, the bytes of its input's bound; a bug report, BUG_REPORT_BYTES of text, decompressed
as it is read, each line at most LINE_BYTES); what was cut is said. Who may read the evidence is the filesystem's
business: the module reads it as the user it runs as.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import gzip
import os
import zlib

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    open_directory,
    open_regular,
    path_kind,
    read_bounded,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_health import (
    DCGM_CHARS,
    DEADLINE_EVERY,
    DETAILS_CHARACTERS,
    NVLINK_CHARS,
)

# The kernel log of a long-lived host (journalctl -k since boot) is larger than dmesg's ring buffer.
KERNEL_LOG_BYTES = 16 << 20
# (input, the file names it is saved under, the most read of it).
EVIDENCE_FILES = (
    ("nvidia-smi -q", ("nvidia-smi-q.txt",), DETAILS_CHARACTERS),
    ("nvidia-smi nvlink -e", ("nvlink-e.txt",), NVLINK_CHARS),
    ("nvidia-smi nvlink -s", ("nvlink-s.txt",), NVLINK_CHARS),
    ("dcgmi diag", ("dcgmi-diag.txt",), DCGM_CHARS),
    ("the kernel log", ("dmesg.txt", "journalctl-k.txt"), KERNEL_LOG_BYTES),
)
BOUNDS = dict((name, limit) for name, _files, limit in EVIDENCE_FILES)
BUG_REPORTS = ("nvidia-bug-report.log.gz", "nvidia-bug-report.log")
# A bug report of an 8-GPU node is tens of MiB, most of it lspci's and nvidia-debugdump's dumps after what is read.
BUG_REPORT_BYTES = 128 << 20
# A compressed bug report larger than this is no bug report of one node.
BUG_REPORT_FILE_BYTES = 256 << 20
LINE_BYTES = 16384
GZIP_MAGIC = b"\x1f\x8b"
SEPARATOR = "_" * 44
# The commands of the bug report's nvidia-smi section: what each printed is which input (None: not read).
BUG_REPORT_COMMANDS = {
    "--query": "nvidia-smi -q",
    "--query --unit": None,
    "nvlink --errorcounters": "nvidia-smi nvlink -e",
    "nvlink --remotelinkinfo": None,
    "nvlink --status": "nvidia-smi nvlink -s",
    "conf-compute --query-conf-compute": None,
}
KERNEL_SCAN = "Scanning kernel log files for NVIDIA kernel messages:"
THIS_BOOT = "journalctl -b -0:"


def read_evidence(path, deadline=None, option="evidence_path"):
    """{path, inputs, sources, found, missing, cut} of the evidence at path (a directory or a bug report): inputs by
    name (the kernel log's as lines), the file (and section) each came from, what was found and what was not (each
    as "<input>: <where>"), and what was cut. InvalidOption naming option where path is missing, a link, or neither
    a directory nor a regular file. deadline (gpu_health.Deadline): past it, a bug report is read no further."""
    evidence = dict(path=path, inputs={}, sources={}, found=[], missing=[], cut=[])
    kind = path_kind(path)
    if kind == "directory":
        _read_directory(path, evidence, deadline, option)
    elif kind == "file":
        _read_bug_report(path, None, os.path.basename(path), evidence, deadline)
    else:
        raise InvalidOption("%s=%s %s: give a directory of saved outputs or an nvidia-bug-report.log(.gz)" % (
            option, path, "does not exist" if kind is None else "is a %s" % kind))
    for name, _files, _limit in EVIDENCE_FILES:
        if name in evidence["sources"]:
            evidence["found"].append("%s: %s" % (name, evidence["sources"][name]))
        else:
            evidence["missing"].append(name)
    return evidence


def _read_directory(path, evidence, deadline, option):
    descriptor = open_directory(path, option)
    try:
        for name, files, limit in EVIDENCE_FILES:
            for file_name in files:
                data = _read_file(descriptor, file_name, limit + 1, evidence)
                if data is None:
                    continue
                _take(evidence, name, file_name, data.decode("utf-8", "replace"), limit)
                break
        if len(evidence["sources"]) < len(EVIDENCE_FILES):
            for file_name in BUG_REPORTS:
                if _read_bug_report(file_name, descriptor, file_name, evidence, deadline):
                    break
    finally:
        os.close(descriptor)


def _read_file(directory_fd, name, limit, evidence):
    """The first limit bytes of the regular file name in the directory; None when there is none, or it is refused
    (said in evidence's cut)."""
    try:
        descriptor, _info = open_regular(name, directory_fd)
    except FileRefused as exc:
        evidence["cut"].append(result_line("%s: not read: %s" % (name, exc)))
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    try:
        return read_bounded(descriptor, limit, name, cut=True)
    finally:
        os.close(descriptor)


def _take(evidence, name, where, text, limit):
    """The input name, saved as text in where, into evidence, cut to its bound."""
    if len(text) > limit:
        evidence["cut"].append("%s: more than %d characters, the first %d read" % (where, limit, limit))
        text = text[:limit]
    evidence["inputs"][name] = text.splitlines() if name == "the kernel log" else text
    evidence["sources"][name] = where


def _read_bug_report(path, directory_fd, where, evidence, deadline):
    """What an nvidia-bug-report.log(.gz) holds of the inputs evidence lacks, into it; False where there is none."""
    try:
        descriptor, info = open_regular(path, directory_fd)
    except FileRefused as exc:
        evidence["cut"].append(result_line("%s: not read: %s" % (where, exc)))
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR) and directory_fd is not None:
            return False
        raise
    if info.st_size > BUG_REPORT_FILE_BYTES:
        os.close(descriptor)
        evidence["cut"].append("%s: %d bytes, more than the %d a bug report is read from: not read"
                               % (where, info.st_size, BUG_REPORT_FILE_BYTES))
        return False
    report = BugReport()
    with os.fdopen(descriptor, "rb") as raw:
        # nvidia-bug-report.sh gzips its log where gzip is installed, whatever the file is called now.
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == GZIP_MAGIC else raw
        try:
            for count, line in enumerate(_lines(stream, where, evidence)):
                if count % DEADLINE_EVERY == 0 and deadline is not None and deadline.passed():
                    evidence["cut"].append("%s: reading stopped after %d lines: the deadline (timeout %s s) had "
                                           "passed" % (where, count, deadline.seconds))
                    break
                report.read(line)
        except (OSError, EOFError, zlib.error) as exc:
            # A bug report cut short (the script killed, a copy interrupted) is read as far as it goes.
            evidence["cut"].append(result_line("%s: read as far as it goes: %s" % (where, exc)))
        finally:
            stream.close()
    for name, (section, text) in report.inputs().items():
        if name not in evidence["inputs"]:
            _take(evidence, name, "%s, %s" % (where, section), text, BOUNDS[name])
    return True


def _lines(stream, where, evidence):
    """The lines of a stream as text, each at most LINE_BYTES (a longer one comes in pieces), BUG_REPORT_BYTES in
    all."""
    total = 0
    while True:
        line = stream.readline(LINE_BYTES)
        if not line:
            return
        total += len(line)
        if total > BUG_REPORT_BYTES:
            evidence["cut"].append("%s: more than %d bytes of text, the first %d read" % (
                where, BUG_REPORT_BYTES, BUG_REPORT_BYTES))
            return
        yield line.decode("utf-8", "replace").rstrip("\r\n")


class BugReport(object):
    """The sections of an nvidia-bug-report.log that gpu_health reads, one line at a time: each input's lines, at
    most a character more than its bound (so that its cut is seen)."""

    def __init__(self):
        self.collected = {}
        self.sizes = {}
        self.collecting = None
        self.title_next = False
        self.boot = False

    def read(self, line):
        if line == SEPARATOR:
            self.collecting, self.title_next, self.boot = None, True, False
            return
        stripped = line.strip()
        if self.title_next and stripped:
            self.title_next = False
            if stripped == "dmesg:":
                self.collecting = "dmesg"
                return
            if stripped == KERNEL_SCAN:
                self.collecting = "scan"
                return
        if self.collecting == "dmesg":
            self._add("dmesg", line)
        elif self.collecting == "scan":
            self._scan(line, stripped)
        else:
            self._command(line, stripped)

    def _scan(self, line, stripped):
        # Each log's lines follow "  <log>:" (a file, or "journalctl -b -N:"), two spaces in.
        if line.startswith("  ") and not line.startswith("   ") and stripped.endswith(":"):
            self.boot = stripped == THIS_BOOT
        elif self.boot and stripped:
            self._add(THIS_BOOT, line)

    def _command(self, line, stripped):
        program, space, arguments = stripped.partition(" ")
        if line.startswith("/") and space and program.endswith("/nvidia-smi") and arguments in BUG_REPORT_COMMANDS:
            self.collecting = ("command", BUG_REPORT_COMMANDS[arguments])
        elif self.collecting and self.collecting[1]:
            self._add(self.collecting[1], line)

    def _add(self, name, line):
        limit = BOUNDS.get(name, BOUNDS["the kernel log"]) + 1
        size = self.sizes.get(name, 0)
        if size < limit:
            self.collected.setdefault(name, []).append(line[:limit - size])
            self.sizes[name] = size + len(line) + 1

    def inputs(self):
        """{input: (section, text)} of what was read: the kernel log from dmesg's section, else from the lines of
        the boot the report was written in."""
        found = dict((name, ("nvidia-smi %s" % arguments, "\n".join(self.collected[name])))
                     for arguments, name in BUG_REPORT_COMMANDS.items() if name in self.collected)
        for section, name in (("dmesg", "dmesg"), ("journalctl -b -0", THIS_BOOT)):
            if name in self.collected and "the kernel log" not in found:
                found["the kernel log"] = (section, "\n".join(self.collected[name]))
        return found
