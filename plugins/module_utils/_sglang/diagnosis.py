# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""After the fact: why a server launch failed, from its log, the kernel's log and the GPUs.

A launch's log is the part of the server's log between its recorded offset and the next
launch's (or the end), classified as the readiness gate classifies it while it watches.
Only a bounded head and tail of it are read: a server that ran for weeks has gigabytes
of request lines, and its start-up and its end are what says why it stopped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import collections
import os
import re
import subprocess

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import FileRefused, open_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogPathError
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import (
    SECRET_FLAGS,
    masked_result_text,
    masked_text,
    secret_values,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int, result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import launch_masks
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier

HEAD_BYTES = 4 << 20
TAIL_BYTES = 1 << 20
LAST_LINES = 40
LINE_BREAK = re.compile(r"\r\n|\r|\n")


class NoSuchLaunch(ValueError):
    """The launch asked for is not in the history; the message names the option."""


def launch_window(launches, back):
    """(launch, end): the launch `back` launches before the latest (0: the latest) and the offset where its
    log ends, the next launch's offset in the same log; None (the end of the log) for the latest."""
    if not launches:
        raise NoSuchLaunch("launch=%d: no launch of this server is recorded (the history begins with the first "
                           "start by this collection's sglang_server)" % back)
    if back >= len(launches):
        raise NoSuchLaunch("launch=%d: only %d launch(es) are recorded; ask for 0 (the latest) to %d" % (
            back, len(launches), len(launches) - 1))
    launch = launches[back]
    newer = launches[back - 1] if back else None
    if newer and newer["log_path"] == launch["log_path"] and newer["offset"] >= launch["offset"]:
        return launch, newer["offset"]
    return launch, None


def launch_mask(launch, recorded=None):
    """The mask of a launch's log: the secrets and secret flags recorded with the launch, the recorded state's
    when there is one (the state file is removed when the server stops; the launch history stays), and SGLang's
    own secret flags in any case."""
    values, flags = launch_masks(launch)
    if recorded:
        state_flags = tuple(recorded.get("secret_flags", ()))
        values += secret_values(recorded["argv"], SECRET_FLAGS + state_flags)
        flags += state_flags

    def mask(text):
        return masked_text(text, values, SECRET_FLAGS + flags)
    return mask


def _lines(data):
    return LINE_BREAK.split(data.decode("utf-8", "replace"))


def read_launch_log(path, start, end=None, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES):
    """(head lines, tail lines, bytes left out between them, note) of the log from start to end. The tail is
    empty when everything fits in the head. note says when the log is shorter than start (rotated or
    truncated since). LogPathError when path is not a regular file; OSError when it cannot be read."""
    try:
        descriptor, info = open_regular(path)
    except FileRefused as exc:
        raise LogPathError("log_path %s" % exc)
    try:
        size = info.st_size
        if size < start:
            return [], [], 0, ("the log is %d bytes now, less than this launch's offset %d: it was rotated or "
                               "truncated since, so this launch's lines are in a rotated file" % (size, start))
        stop = size if end is None else min(end, size)
        length = stop - start
        if length <= head_bytes + tail_bytes:
            return _lines(os.pread(descriptor, length, start)), [], 0, None
        head = _lines(os.pread(descriptor, head_bytes, start))
        # The first tail line is cut at an arbitrary byte: dropped.
        tail = _lines(os.pread(descriptor, tail_bytes, stop - tail_bytes))[1:]
        return head[:-1], tail, length - head_bytes - tail_bytes, None
    finally:
        os.close(descriptor)


def classify_launch(head, tail=(), final=True, catalogue=DIAGNOSES, mask=masked_text):
    """What the readiness gate would say of these lines: the ready line, the failure (cause, traceback,
    diagnosis with its fix) and the last lines, secrets masked and each line as a result may show it
    (masked_result_text). The tail, when there is one, is classified after the head as if it followed it; final
    says the process is gone (a traceback still open is then complete)."""
    classifier = StartupClassifier()
    last = collections.deque(maxlen=LAST_LINES)
    for line in list(head) + list(tail):
        classifier.feed(line)
        if line:
            last.append(line)
    classifier.end_of_data(final=final)
    failure = None
    if classifier.failure is not None:
        failure = classifier.failure.as_dict(catalogue, last)
        failure.update(cause=masked_result_text(failure["cause"], mask),
                       traceback=masked_result_text(failure["traceback"], mask))
    ready = classifier.ready_line
    return {"ready_line": None if ready is None else masked_result_text(ready, mask), "failure": failure,
            "last_lines": [masked_result_text(line, mask) for line in last]}


def gpu_processes(run=subprocess.run):
    """(processes, problem): who holds GPU memory, from nvidia-smi; processes is None where it cannot say."""
    argv = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader,nounits"]
    try:
        # The cores run without an AnsibleModule (run_command), so that they can be tested and reused alone.
        # pylint: disable-next=ansible-bad-function
        completed = run(argv, capture_output=True, text=True, errors="replace", timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "nvidia-smi cannot be run: %s" % (getattr(exc, "strerror", None) or exc)
    if completed.returncode != 0:
        return None, "nvidia-smi failed: %s" % (completed.stdout.strip() or completed.stderr.strip())[:300]
    processes = []
    for row in completed.stdout.splitlines():
        fields = [field.strip() for field in row.split(",")]
        if len(fields) == 4 and bounded_int(fields[0]) is not None:
            processes.append({"pid": bounded_int(fields[0]), "name": result_line(fields[1]),
                              "used_memory_mib": bounded_int(fields[2]), "gpu_uuid": result_line(fields[3])})
    return processes, None


def verdict(report):
    """One line for the operator, as a result may show it: whether the server runs, whether it serves (when
    report's ``serving`` says, from serving.serves()), when the chosen launch failed, why, and when it started
    degraded (report's ``capacity``, from capacity.judge()), what it started with."""
    capacity = report.get("capacity") or {}
    return result_line(_verdict(report) + ("; " + capacity["message"] if capacity.get("degraded") else ""))


def _oom_kill(event):
    return "%s: pid %d %s%s" % (event["scope"], event["pid"], event["name"],
                                ", %d kB resident" % event["anon_rss_kb"] if event["anon_rss_kb"] else "")


def _verdict(report):
    state = report.get("state") or {}
    if not report.get("launch"):
        return "no launch recorded: %s" % report.get("problem", "nothing to diagnose")
    if state.get("running"):
        restarts = ", %d restarts by systemd" % state["restarts"] if state.get("restarts") else ""
        serving = report.get("serving")
        if serving is None:
            head = "running (pid %s%s)" % (state.get("pid"), restarts)
        elif serving["serving"]:
            head = "running and serving (pid %s%s)" % (state.get("pid"), restarts)
        else:
            # Its process lives, but no token comes back: what /health said and what the generate did.
            head = "running but not serving (pid %s%s): %s" % (state.get("pid"), restarts, serving["message"])
    else:
        head = "not running"
    log = report.get("log") or {}
    kernel = report.get("kernel") or {}
    killed = [event for event in kernel.get("oom_kills", []) if event["server"]]
    # Matched by a name only: anyone's process can have it, so such a kill is told, not concluded.
    suspects = [event for event in kernel.get("oom_kills", []) if event["matched_by"] and not event["server"]]
    xids = [event for event in kernel.get("xids", []) if event["meaning"] and event["xid"] != 45]
    back = report["launch"].get("back", 0)
    which = "the latest launch" if not back else "the launch %d before the latest" % back
    failure = log.get("failure")
    if failure:
        diagnosis = failure.get("diagnosis")
        cause = failure["cause"]
        if diagnosis:
            return "%s; %s failed: %s [%s] Fix: %s" % (head, which, cause, diagnosis["id"], diagnosis["fix"])
        return "%s; %s failed: %s" % (head, which, cause)
    if killed:
        return "%s; %s was killed by the kernel's OOM killer (%s): give the host (or its container or cgroup) more " \
            "memory, or stop what else uses it" % (head, which, _oom_kill(killed[0]))
    if xids:
        event = xids[0]
        return "%s; GPU %s reported Xid %d since %s: %s. %s" % (
            head, event["device"], event["xid"], which, event["meaning"], event["action"])
    suspect = ""
    if suspects:
        suspect = "; since %s the kernel's OOM killer killed a process named like the server's (%s), matched by " \
            "its %s only: it is not known whether it was the server's" % (
                which, _oom_kill(suspects[0]), suspects[0]["matched_by"])
    unexplained = " (%s)" % kernel["problem"] if kernel.get("problem") else ""
    if log.get("ready_line"):
        if state.get("running") or back:
            return "%s; %s got ready%s" % (head, which, suspect)
        if suspect:
            return "%s; %s got ready, then ended without a traceback in its log%s" % (head, which, suspect)
        return "%s; %s got ready, then ended without a traceback in its log or a kill in the kernel's%s" % (
            head, which, unexplained)
    return "%s; %s shows no failure and no ready line%s%s" % (head, which, unexplained, suspect)
