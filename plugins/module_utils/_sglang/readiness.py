# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Wait for an SGLang server to be ready, and fail as soon as it cannot be.

Each poll reads only the log's new bytes (a bounded amount), classifies them, checks that
the watched process is still there and, once the ready line is seen, optionally asks a
health URL. Clock, sleep, process check and health probe are parameters, so tests drive it.
Everything it returns from the log goes through ``mask``, so that secrets the server logs
(its start-up ``server_args`` line holds ``api_key``) never reach a result, and is shown
as a result may show it (``masked_result_text``: no terminal escapes, lines of 2 KiB at most).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import collections
import errno
import os
import signal
import socket
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogPathError
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import (
    ENDED_STATES,
    exit_status,
    stat_fields,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import masked_result_text, masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import diagnose

DEATH_WITHOUT_TRACEBACK = "process {pid} exited before the server was ready, and the log shows no traceback: it {end}"
# The diagnosis of a server that ended before it was ready with neither a traceback nor a line the catalogue knows,
# by how it ended ({end}): a signal, an exit code, or neither where its parent collected it before it was read.
KILLED = {
    "id": "killed_by_signal",
    "cause": "The server's process {end} while it started; its log says nothing of why.",
    "fix": "Find who sent the signal. The kernel's OOM killer sends SIGKILL and says so only in the kernel's log "
    "(the playbook blackwell.gpu_node.diagnose reads it, or check `dmesg`): give the host, its container or cgroup "
    "more memory, or stop what else uses it. SIGSEGV, SIGABRT or SIGBUS is a crash in native code; any other "
    "comes from an operator or a supervisor.",
}
EXITED = {
    "id": "exited_without_traceback",
    "cause": "The server's process {end} while it started, without a traceback or a line the catalogue knows.",
    "fix": "Its last log lines say what it did last; its command line (sglang_server_info shows it), run by hand "
    "as the server's user, also shows what it writes to the terminal.",
}
UNKNOWN_END = (
    "was killed by a signal (SIGKILL from the kernel's OOM killer says nothing in the log: the playbook "
    "blackwell.gpu_node.diagnose reads the kernel's log for it, or check `dmesg`) or exited on its own"
)
ENDED = {
    "id": "ended_without_traceback",
    "cause": "The server's process ended while it started, without a traceback or a line the catalogue knows, and "
    "was collected before how it ended could be read: it was killed by a signal or exited on its own.",
    "fix": "Look for a kill by the kernel's OOM killer, which says so only in the kernel's log (the playbook "
    "blackwell.gpu_node.diagnose reads it, or check `dmesg`): give the host, its container or cgroup more memory, "
    "or stop what else uses it. Otherwise its last log lines say what it did last.",
}


def process_is_running(pid, proc_root="/proc"):
    """True while pid exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
        if exc.errno != errno.EPERM:
            raise
    fields = stat_fields(pid, proc_root)
    # Without procfs, os.kill has said it exists.
    return fields is None or fields[0] not in ENDED_STATES


def ending(status):
    """(how a process ended, in words; the diagnosis of a server that ended so before it was ready, in a
    catalogue entry's shape) for its wait status (None: not known)."""
    if status is None:
        end, entry = UNKNOWN_END, ENDED
    elif os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "a real-time signal"
        end, entry = "was killed by signal %d (%s)" % (number, name), KILLED
    else:
        end, entry = "exited with code %d" % os.WEXITSTATUS(status), EXITED
    return end, dict(entry, cause=entry["cause"].format(end=end))


def probe_failure(exc, host):
    """Why a health probe got no HTTP status, in words (urllib wraps the socket's error in .reason)."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, socket.gaierror):
        return "cannot resolve host %s (%s)" % (host, reason.strerror or reason)
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (nothing listens there yet)"
    # socket.timeout became an alias of TimeoutError only in Python 3.10.
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "no answer within the probe's timeout"
    return str(reason) or type(reason).__name__


class Waiter(object):
    def __init__(
        self,
        follower,
        classifier,
        timeout,
        poll_interval,
        pid=None,
        health_probe=None,
        require_ready_line=True,
        catalogue=DIAGNOSES,
        last_lines=40,
        mask=masked_text,
        is_running=process_is_running,
        exit_status=exit_status,
        clock=time.monotonic,
        sleep=time.sleep,
        memory=None,
    ):
        self.follower = follower
        self.classifier = classifier
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.pid = pid
        self.health_probe = health_probe
        self.require_ready_line = require_ready_line
        self.catalogue = catalogue
        self.tail = collections.deque(maxlen=last_lines)
        self.mask = mask
        self.is_running = is_running
        self.exit_status = exit_status
        self.clock = clock
        self.sleep = sleep
        # capacity.StartupMemory, fed every line read: what SGLang logged of its GPU memory before it got ready.
        self.memory = memory
        self.health_status = None
        self.health_problem = None
        self.end = None

    def _read(self, final):
        for line in self.follower.read_lines():
            self.tail.append(line)
            self.classifier.feed(line)
            if self.memory is not None:
                self.memory.feed(line)
        # The end of the data is only at the end of the log: a dead process's traceback can be
        # in the part of a backlog that the next polls read.
        final = final and not self.follower.behind
        if final:
            partial = self.follower.pending_partial_line()
            if partial:
                self.tail.append(partial)
                self.classifier.feed(partial)
        self.classifier.end_of_data(final=final)

    def run(self):
        start = self.clock()
        try:
            while True:
                gone = self.pid is not None and not self.is_running(self.pid)
                if gone and self.end is None:
                    # At once: whoever adopted it (init) may collect it, and its exit status with it, any moment.
                    self.end = ending(self.exit_status(self.pid))
                # Read after the process check, so that whatever it wrote before dying is seen.
                try:
                    self._read(final=gone)
                except LogPathError as exc:
                    return self._failed(self.clock() - start, cause=str(exc))
                elapsed = self.clock() - start
                if self.classifier.failure is not None:
                    return self._failed(elapsed, failure=self.classifier.failure.as_dict(self.catalogue, self.tail))
                if gone and not self.follower.behind:
                    return self._died(elapsed)
                if self.classifier.ready_line is not None or not self.require_ready_line:
                    if self.health_probe is None:
                        return self._ready(elapsed)
                    self.health_status, self.health_problem = self.health_probe()
                    if self.health_status == 200:
                        return self._ready(self.clock() - start)
                if elapsed >= self.timeout:
                    return self._failed(elapsed, cause=self._timeout_cause())
                if not self.follower.behind:  # a backlog is read on at once, bounded per poll
                    self.sleep(min(self.poll_interval, max(self.timeout - elapsed, 0)))
        finally:
            self.follower.close()

    def _timeout_cause(self):
        if self.classifier.ready_line is None and self.require_ready_line:
            return "no ready line within the timeout of %ss (the server may still be loading: raise timeout)" % (
                self.timeout
            )
        if self.health_status is None:
            return "the health URL gave no HTTP answer within the timeout of %ss: %s" % (
                self.timeout, self.health_problem)
        return "the health URL answered %s, not 200, within the timeout of %ss" % (self.health_status, self.timeout)

    def _result(self, elapsed):
        ready_line = self.classifier.ready_line
        return {
            "elapsed": round(elapsed, 3),
            "offset": self.follower.offset,
            "ready_line": None if ready_line is None else masked_result_text(ready_line, self.mask),
            "health_status": self.health_status,
            "last_lines": [masked_result_text(line, self.mask) for line in self.tail],
        }

    def _ready(self, elapsed):
        result = self._result(elapsed)
        result.update(ready=True, failure=None, msg="SGLang server ready after %.1f s" % elapsed)
        return result

    def _died(self, elapsed):
        end, ended = self.end
        return self._failed(elapsed, cause=DEATH_WITHOUT_TRACEBACK.format(pid=self.pid, end=end), ended=ended)

    def _failed(self, elapsed, failure=None, cause=None, ended=None):
        if failure is None:
            # The last lines of a server that died are where it failed: a catalogue entry that matches them is the
            # diagnosis, else how it ended, with the component they name. Those of one still starting at the
            # timeout, or of a log that cannot be read, are not a failure's: only a catalogue entry is a diagnosis.
            failure = {
                "cause": cause,
                "ranks": "",
                "traceback": "",
                "diagnosis": diagnose("\n".join(self.tail), self.catalogue, generic=False, ended=ended),
            }
        failure.update(cause=masked_result_text(failure["cause"], self.mask),
                       traceback=masked_result_text(failure["traceback"], self.mask))
        result = self._result(elapsed)
        # The message again as a whole: the timeout's cause can quote the health URL too.
        result.update(ready=False, failure=failure,
                      msg=self.mask(failure_message(failure, elapsed, result["last_lines"])))
        return result


def failure_message(failure, elapsed, last_lines):
    parts = ["SGLang server failed after %.1f s: %s" % (elapsed, failure["cause"])]
    diagnosis = failure["diagnosis"]
    if diagnosis:
        parts.append("Diagnosis (%s): %s Fix: %s" % (diagnosis["id"], diagnosis["cause"], diagnosis["fix"]))
    if failure["traceback"]:
        parts.append("Traceback:\n" + failure["traceback"])
    else:
        parts.append("Last log lines:\n" + "\n".join(last_lines))
    return "\n".join(parts)
