# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Classify SGLang start-up log lines: ready, fatal, or neither.

SGLang logs ``[<time> <ranks>] <message>`` where ranks is empty for the main process
and, for instance, ``TP3`` or ``DP0 TP3`` for workers. A traceback logged by a worker
starts on a prefixed line and goes on over unprefixed ones; lines of other ranks can
come in between. ``StartupClassifier`` assembles each traceback from its own rank's
lines only and reports it whole.

Only specific fatal signs count: SGLang's (and Python's, CUDA's, NCCL's) own lines for
a failure. The many harmless lines that merely contain "error" or "failed" never match.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import collections
import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES

READY_LINE = "The server is fired up and ready to roll!"

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Searched, not matched: a progress bar without a newline can come first on the line.
PREFIXED = re.compile(
    r"\[(?P<time>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<ranks>(?: [A-Z]{2,3}\d+)*)\] ?(?P<message>.*)$"
)
TRACEBACK_START = "Traceback (most recent call last):"
# A traceback is kept as its first and its last lines (the outermost frames of the first exception; the innermost
# frames and the exception line of the last), so that one of a million lines costs neither memory nor a result
# of megabytes.
TRACEBACK_HEAD_LINES = 100
TRACEBACK_TAIL_LINES = 100
CHAINED = re.compile(
    r"^(During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)$"
)

# An exception line at the start of an unprefixed line: the end of an uncaught traceback,
# also when the traceback's beginning is missing from the log.
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)(?::|$)")

# Lines that mean the start-up has failed even when no traceback comes with them.
FATAL_LINES = tuple(
    re.compile(pattern)
    for pattern in (
        r"Scheduler hit an exception",
        r"(Detokenizer|Tokenizer)(Manager)? hit an exception",
        r"Received sigquit from a child process",
        r"SIGQUIT received\.",
        r"Initialization failed",
        r"scheduler is dead",
        r"^terminate called after throwing an instance of",
        r"^Fatal Python error:",
        r"Segmentation fault",
        r"\(core dumped\)",
        r"CUDA out of memory",
        r"torch\.OutOfMemoryError",
        r"CUDA error: ",
        r"NCCL WARN Cuda failure",
        r"NCCL error",
        r"ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclRemoteError",
        r"\[Errno 98\]|[Aa]ddress already in use",
        # argparse refusing the command line ("launch_server.py: error: unrecognized arguments: --x"):
        # the process exits with no traceback, and this line is the only one that names the flag.
        r"^\S+(?: \S+)?: error: (unrecognized arguments: |argument -|the following arguments are required: "
        r"|ambiguous option: )",
    )
)


def parse_line(raw):
    """Return (ranks, message, prefixed) for one log line, ANSI escapes removed."""
    line = ANSI_ESCAPE.sub("", raw)
    match = PREFIXED.search(line)
    if match:
        return match.group("ranks").strip(), match.group("message"), True
    return "", line, False


def diagnose(text, catalogue=DIAGNOSES):
    """The first catalogue entry whose pattern occurs in text, or None."""
    for entry in catalogue:
        if re.search(entry["pattern"], text):
            return dict((key, entry[key]) for key in ("id", "cause", "fix"))
    return None


class Failure(object):
    def __init__(self, cause, ranks, lines):
        self.cause = cause
        self.ranks = ranks
        self.lines = lines

    def as_dict(self, catalogue=DIAGNOSES, context=()):
        # The failure's own lines decide; the lines around it only when they name no known cause, since
        # a harmless warning earlier in the log ("No module named 'deep_gemm'") must not outrank them.
        traceback = "\n".join(self.lines)
        return {
            "cause": ("[%s] %s" % (self.ranks, self.cause)) if self.ranks else self.cause,
            "ranks": self.ranks,
            "traceback": traceback,
            "diagnosis": diagnose(traceback, catalogue) or diagnose("\n".join(context), catalogue),
        }


class _Traceback(object):
    def __init__(self, ranks, first_line):
        self.ranks = ranks
        self.lines = [first_line]
        self.last_lines = collections.deque(maxlen=TRACEBACK_TAIL_LINES)
        self.left_out = 0
        self.exception_line = None

    def add(self, line):
        """Take an unprefixed continuation line."""
        if len(self.lines) < TRACEBACK_HEAD_LINES:
            self.lines.append(line)
        else:
            if len(self.last_lines) == TRACEBACK_TAIL_LINES:
                self.left_out += 1
            self.last_lines.append(line)
        if not line.strip() or CHAINED.match(line) or TRACEBACK_START in line:
            if self.exception_line is not None and TRACEBACK_START in line:
                self.exception_line = None  # a chained traceback follows
            return
        if not line.startswith(" ") and self.exception_line is None:
            self.exception_line = line.strip()

    def failure(self):
        opening = self.lines[0].replace(TRACEBACK_START, "").strip(" :")
        cause = self.exception_line or "%s (traceback cut off before its exception line)" % (
            opening or "Python traceback"
        )
        left_out = ["[... %d lines of the traceback left out]" % self.left_out] if self.left_out else []
        return Failure(cause, self.ranks, self.lines + left_out + list(self.last_lines))


class StartupClassifier(object):
    """Feed it lines in order; it says when the server is ready or has failed."""

    def __init__(self, ready_pattern=None, fatal_patterns=()):
        self.ready = re.compile(ready_pattern) if ready_pattern else re.compile(re.escape(READY_LINE))
        self.fatal = FATAL_LINES + tuple(re.compile(pattern) for pattern in fatal_patterns)
        self.ready_line = None
        self.failure = None
        self._open = {}
        self._last_open = None
        self._fatal_line = None

    def feed(self, raw):
        """Classify one line. The verdict is in ``ready_line`` and ``failure``."""
        ranks, message, prefixed = parse_line(raw)
        if not prefixed and self._last_open is not None:
            self._last_open.add(message)
        else:
            if prefixed:
                # A new record of this rank ends its previous one.
                self._close(ranks)
            if TRACEBACK_START in message:
                block = _Traceback(ranks, message)
                self._open[ranks] = self._last_open = block
            elif self._fatal_line is None and self._is_fatal(message, prefixed):
                self._fatal_line = Failure(message.strip(), ranks, [message])
            # Not while a traceback is open: that one is the verdict.
            elif self.ready_line is None and self.failure is None and not self._open and self.ready.search(message):
                self.ready_line = raw

    def _is_fatal(self, message, prefixed):
        if message[:1].isspace():
            return False  # source lines quoted in a traceback
        if not prefixed and EXCEPTION_LINE.match(message):
            return True
        return any(pattern.search(message) for pattern in self.fatal)

    def _close(self, ranks):
        block = self._open.pop(ranks, None)
        if block is None:
            return
        if block is self._last_open:
            self._last_open = None
        if self.failure is None:
            self.failure = block.failure()

    def end_of_data(self, final=False):
        """Everything written so far was fed. Complete tracebacks become failures; at the
        end (final=True, the process is gone) so does anything still open."""
        for ranks, block in list(self._open.items()):
            if final or block.exception_line is not None:
                self._close(ranks)
        if self.failure is None and self._fatal_line is not None and (final or not self._open):
            self.failure = self._fatal_line
