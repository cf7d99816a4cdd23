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

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import (
    COMPONENTS,
    DIAGNOSES,
    GENERIC_ADVICE,
    HARMLESS_LINES,
    SERVER_COMPONENT,
)

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
        # argparse refusing the command line: the process exits with no traceback, and this line is the only one
        # that names the flag. Its prog is one or two words: "launch_server.py: error: ..." (SGLang 0.5.9's
        # `python -m sglang.launch_server`), "sglang: error: ..." (0.5.9's `sglang serve`), "sglang serve: error:
        # ..." (0.5.10 on, either entrypoint).
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


# A frame of a traceback, also as faulthandler writes it ("line 373 in f"); the module is the path from the last
# directory named like a known package on.
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+,? in ')
PACKAGE_MODULE = re.compile(r"^(?:.*/)?(?P<module>(?P<package>%s)/.+)$" % "|".join(
    re.escape(package) for package, _name, _sign in COMPONENTS if package))
# The exception line of a traceback, after a rank prefix if any: its type is the part before the colon.
EXCEPTION_TYPE = re.compile(r"^(?:\[[^\]]*\] )?(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit))(?::|$)")
# A port in the wording of Python's socket errors, torch.distributed's store and SGLang's own port check.
PORT = re.compile(r"port[:= ]+(?P<port>\d+)|port at (?P<checked>\d+)|\(\'[^']*\', (?P<address>\d+)[,)]")
# Which of the server's ports a conflict is about, from the words around it.
PORT_ROLES = (
    (r"metrics", "the metrics port (SGLang's metrics_port; sglang_server_enable_metrics turns the metrics on)"),
    (r"server socket has failed to listen|TCPStore|DistNetworkError|torch\.distributed|dist_init",
     "the torch.distributed port (sglang_server_dist_init_port, or --nccl-port in sglang_server_extra_args)"),
    (r"[Uu]vicorn|error while attempting to bind on address|http_server",
     "the HTTP port (sglang_server_port)"),
    (r"zmq|ZMQ", "one of SGLang's ZMQ ports"),
)


HARMLESS = re.compile("|".join("(?:%s)" % pattern for pattern in HARMLESS_LINES))


def _telling(text):
    """text without the lines known to be harmless."""
    return "\n".join(line for line in text.splitlines() if not HARMLESS.search(line))


def _origin(text):
    """(exception type, module it was raised in, component): the last exception line of the text, the innermost
    frame under a known package, and that package's component, or the first component whose sign occurs in the
    text; each None where the text does not tell."""
    exception = module = component = None
    names = dict((package, name) for package, name, _sign in COMPONENTS if package)
    for line in text.splitlines():
        frame = FRAME.match(line)
        if frame:
            found = PACKAGE_MODULE.match(frame.group("path"))
            if found:
                module, component = found.group("module"), names[found.group("package")]
            continue
        typed = EXCEPTION_TYPE.match(line.strip())
        if typed:
            exception = typed.group("type")
    if component is None:
        component = next((name for _package, name, sign in COMPONENTS if re.search(sign, text)), None)
    return exception, module, component


def _port_in_use(text):
    """The port in use and which of the server's it is, as far as the text tells."""
    found = PORT.search(text)
    number = found and next(group for group in found.groups() if group)
    role = next((role for words, role in PORT_ROLES if re.search(words, text)), None)
    if number and role:
        return "port %s, %s" % (number, role)
    if number or role:
        return "port %s" % number if number else role
    return "a port of the server"


def catalogue_entry(text, catalogue=DIAGNOSES):
    """The first catalogue entry whose pattern, and its where when it has one, occur in text; or None."""
    return next((entry for entry in catalogue
                 if re.search(entry["pattern"], text) and re.search(entry.get("where") or "", text)), None)


def diagnose(text, catalogue=DIAGNOSES, context="", generic=True, ended=None):
    """The diagnosis of a failure whose own lines are text (a traceback, a fatal line or the last log lines) and
    the log's last lines context: the first catalogue entry whose pattern occurs in text, else in context; else
    ended, the diagnosis of how the process ended, given where the process is gone (an entry's id, cause and fix);
    else, when generic, the generic diagnosis of the component it came from, else None. A diagnosis always names
    its component. Lines known to be harmless (HARMLESS_LINES) choose neither the entry nor the component."""
    text, context = _telling(text), _telling(context)
    exception, module, component = _origin(text)
    if component is None:
        component = _origin(context)[2] or SERVER_COMPONENT
    entry = catalogue_entry(text, catalogue) or catalogue_entry(context, catalogue) or ended
    if entry is not None:
        named = entry.get("component") or component
        if entry["id"] == "port_in_use":
            named = _port_in_use(text + "\n" + context)
        return {"id": entry["id"], "component": named, "cause": entry["cause"], "fix": entry["fix"],
                "exception": exception, "raised_in": module}
    if not generic:
        return None
    advice = next(row for row in GENERIC_ADVICE
                  if row["component"] in (component, None) and (row["where"] is None or re.search(row["where"], text)))
    if module:
        what = "%s raised in %s" % (exception or "a failure", module)
    else:
        what = exception or "a failure without a traceback"
    return {"id": "not_in_catalogue", "component": component,
            "cause": "%s (%s), which the catalogue does not know. %s" % (what, component, advice["cause"]),
            "fix": advice["fix"], "exception": exception, "raised_in": module}


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
            "diagnosis": diagnose(traceback, catalogue, "\n".join(context)),
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
