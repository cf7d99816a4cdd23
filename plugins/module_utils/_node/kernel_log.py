# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The kernel's view of a server: OOM-killer kills and NVIDIA Xid errors in the kernel log.

A server killed by the OOM killer (SIGKILL) or stopped by a GPU fault often leaves no
traceback in its own log; the kernel log says what happened. Lines come from
``/dev/kmsg`` (``<prio>,<seq>,<usec>,<flags>;<message>``), ``dmesg``
(``[<seconds>] <message>``, ``-r``'s ``<prio>`` before it, ``-x``'s ``kern  :warn  : ``,
``--time-format iso``'s ``2024-05-01T10:00:00,123456+00:00 ``, ``-T``'s
``[Wed May  1 10:00:00 2024] ``), ``journalctl -k`` (``May 01 10:00:00 host kernel: ``, the
month in any language, ``-o short-iso`` or ``-o short-monotonic``), a syslog file
(``<date> <host> kernel: [<seconds>] <message>``), or the kernel sections of an
nvidia-bug-report.log. Times are seconds since boot, the clock of a process's start time in
/proc/<pid>/stat, so "since the launch" is a comparison; lines with a wall-clock time only
cannot be dated against a launch and count only when no launch time is given.

A GPU that falls off the bus before the driver has a channel on it (at probe time) is named
in the driver's "The NVIDIA GPU <address> ... has fallen off the bus and is not responding
to commands" over three lines (one /dev/kmsg record), and newer drivers add "GPU <address>:
GPU has fallen off the bus." to an Xid 79: either, without an Xid 79 line of that GPU, counts
as its Xid 79, as NVIDIA's NVSentinel counts it.

The kernel's messages quote what users choose (a ``traps:`` line names the file a
faulting process ran from), so an event is read only from a message that begins with
the driver's or the OOM killer's own words, and a process is taken for the server's only
by its pid: names and titles are anyone's to take.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import os
import re
import subprocess
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line

# A number the kernel writes (a pid, an Xid, a time, a size) has at most 20 digits, an unsigned 64-bit integer's: a
# longer one is not the kernel's, and the pattern does not match (int() refuses strings of more than 4300 digits).
KMSG = re.compile(r"(?P<priority>\d{1,20}),(?P<sequence>\d{1,20}),(?P<usec>\d{1,20}),[^;]*;(?P<message>.*)")
# dmesg -r's priority ("<4>"), and dmesg -x's facility and level ("kern  :warn  : "), before anything else.
RAW_PRIORITY = re.compile(r"<\d{1,3}>")
FACILITY_LEVEL = re.compile(r"[a-z0-9]{2,8} *:[a-z]{3,6} *: ")
# What syslog and the journal put before a kernel message: "<date> <host> kernel: " (the host may be left out; the
# month is the locale's, "kwi 15 07:56:59" in Polish), journalctl -o short-iso's "<ISO time> <host> kernel: ",
# journalctl -o short-monotonic's "[<seconds>] <host> kernel: ", or a bare "kernel: ".
LOGGER_PREFIX = re.compile(
    r"(?:(?:[^\s\d]{1,16} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?|\d{4}-\d\d-\d\dT[\d:.,+-]+)(?: [\w.-]+)? "
    r"|\[\s*(?P<seconds>\d{1,20}\.\d{1,20})\] [\w.-]+ )?kernel: ")
# dmesg --time-format iso's wall-clock time, alone before the message.
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[\d:.,+-]{0,24} ")
# printk's own time, in dmesg and syslog files, or dmesg --ctime's wall-clock time.
PRINTK_TIME = re.compile(r"\[\s*(?P<seconds>\d{1,20}\.\d{1,20})\] ?"
                         r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] ")
XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<device>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\): "
    r"(?P<xid>\d{1,20}), (?P<detail>.*)")
# Drivers since 5xx name the process: "pid=1234, name=python3, ..." or "pid='<unknown>', name=<unknown>, ...".
XID_PROCESS = re.compile(r"pid=(?P<pid>'[^']*'|\d{1,20}), (?:name=(?P<name>[^,]*), )?")
# "Out of memory: Killed process", "Memory cgroup out of memory: Killed process", and older kernels'
# "Killed process N (comm), UID ..." after a "Kill process ... or sacrifice child" line. A comm can hold
# parentheses ("(resolved)"), hence the lazy match up to ") " or "),".
OOM_KILL = re.compile(
    r"(?:(?P<cgroup>Memory cgroup out of memory: )|Out of memory: )?Killed process (?P<pid>\d{1,20}) "
    r"\((?P<name>.*?)\)(?=[ ,]|$)")
# 20 digits and the commas that group them.
ANON_RSS = re.compile(r"anon-rss:(?P<kb>[\d,]{1,27})kB")

# Bounds: an Xid storm logs thousands of lines; the first ones after a launch are the cause, what follows
# is mostly their consequence ("Xid 45 ... caused by previous Xid").
MAX_EVENTS = 50
# The GPUs whose Xid 79 was seen, kept so that the driver's other words for it count once: a host has at most a few
# dozen GPUs, and a log that names more is not read for more.
MAX_FALLEN_DEVICES = 1024
# The driver's words for a GPU that fell off the bus, besides an Xid 79 line: at probe time "NVRM: The NVIDIA GPU
# <address>" then "(PCI ID: ...) installed in this system has" then "fallen off the bus and is not responding to
# commands." (continuation lines, or one /dev/kmsg record); next to an Xid 79 "NVRM: GPU <address>: GPU has fallen off
# the bus.".
THE_GPU = "NVRM: The NVIDIA GPU "
NOT_RESPONDING = "fallen off the bus and is not responding to commands"
GPU_AT = "NVRM: GPU "
HAS_FALLEN = ": GPU has fallen off the bus."
FALLEN_LINES = 3
PCI_CHARACTERS = frozenset("0123456789abcdefABCDEF:.")
KMSG_PATH = "/dev/kmsg"
MAX_KMSG_RECORDS = 1 << 20
READ_SECONDS = 10
DMESG_SECONDS = 30
# What is read of one record of /dev/kmsg, and parsed of any line: a kernel message is far shorter.
LINE_CHARS = 16384

# What the common Xids mean and what to do, after NVIDIA's Xid catalogue
# (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
XID_MEANINGS = {
    13: ("Graphics engine exception: a GPU kernel faulted (an out-of-range access, an illegal instruction); "
         "usually the application or a kernel library, rarely the GPU",
         "Restart the server; if it recurs with the same model and flags, suspect a kernel of the stack "
         "(sgl-kernel, flashinfer, Triton: try another attention backend) before the GPU (dcgmi diag)"),
    31: ("GPU memory page fault (MMU fault): a kernel accessed memory that is not mapped; usually the "
         "application or a library, sometimes the driver",
         "Restart the server; a fault that recurs points at a kernel of the stack or the driver"),
    43: ("GPU stopped processing: the driver stopped a channel after a fault of the application (often after "
         "an Xid 13 or 31); the GPU itself is fine",
         "Restart the server; the Xid before this one says what faulted"),
    45: ("Preemptive cleanup: the driver tore down a process's GPU channels because the process was killed or "
         "exited, or after an earlier error",
         "Look at the earlier Xid, or at what killed the process (the OOM killer, a stop)"),
    48: ("Double-bit ECC error: an uncorrectable error in GPU memory",
         "Drain the node, reset the GPU (or reboot) and run its diagnostics (dcgmi diag); have it replaced if "
         "it recurs"),
    63: ("ECC page retirement or row remapping recorded: a memory row was marked for remapping",
         "Reset the GPU (or reboot) when you can, to put the remapping into effect; watch how often it comes"),
    64: ("ECC page retirement or row remapping failed",
         "Drain the node, reset the GPU and run its diagnostics; have it serviced if it recurs"),
    74: ("NVLink error: a link between GPUs (or to an NVSwitch) failed",
         "Reset the GPUs (or reboot) and check the links (nvidia-smi nvlink -s); service them if it recurs"),
    79: ("GPU has fallen off the bus: the GPU no longer answers on PCIe",
         "Reboot the node; check power, cooling and the card's seating in its slot; service it if it recurs"),
    92: ("High single-bit ECC error rate: corrected memory errors come often",
         "Watch it and reset the GPU when convenient; a rising rate foretells a failing GPU"),
    94: ("Contained ECC error: an uncorrectable memory error, contained to the process that hit it (which was "
         "stopped)",
         "Restart the server; reset the GPU when convenient so that the row is remapped"),
    95: ("Uncontained ECC error: an uncorrectable memory error that may affect every process on the GPU",
         "Reset the GPU (or reboot) before serving again; have it serviced if it recurs"),
    119: ("GSP RPC timeout: the GPU System Processor's firmware did not answer the driver",
          "Reset the GPU or reboot; if it recurs, update the driver (NVIDIA documents disabling the GSP "
          "firmware as a workaround)"),
}


def split_line(line):
    """(seconds since boot or None, the kernel's message) of one line of any of the supported formats: the
    prefixes are taken from the line's start only, so that the message is what the kernel wrote."""
    line = line.rstrip("\r\n")
    record = KMSG.match(line)
    if record:
        return int(record.group("usec")) / 1e6, record.group("message")
    for prefix in (RAW_PRIORITY, FACILITY_LEVEL):
        found = prefix.match(line)
        line = line[found.end():] if found else line
    logger = LOGGER_PREFIX.match(line) or ISO_TIME.match(line)
    seconds = logger.groupdict().get("seconds") if logger else None
    message = line[logger.end():] if logger else line
    printk = PRINTK_TIME.match(message)
    if printk:
        seconds, message = printk.group("seconds") or seconds, message[printk.end():]
    return (None if seconds is None else float(seconds)), message


def _xid_event(match):
    detail = match.group("detail").strip()
    pid = name = None
    process = XID_PROCESS.match(detail)
    if process:
        pid = int(process.group("pid")) if process.group("pid").isdigit() else None
        name = process.group("name")
        name = None if name in (None, "<unknown>") else name.strip()
        detail = detail[process.end():]
    number = int(match.group("xid"))
    meaning, action = XID_MEANINGS.get(number, (None, None))
    return {"xid": number, "device": match.group("device"), "pid": pid, "name": name, "detail": result_line(detail),
            "meaning": meaning, "action": action}


def _fallen_event(device):
    """The Xid 79 of a GPU the driver says fell off the bus without an Xid line."""
    meaning, action = XID_MEANINGS[79]
    return {"xid": 79, "device": device, "pid": None, "name": None,
            "detail": "GPU has fallen off the bus (the driver's message, no Xid line)", "meaning": meaning,
            "action": action}


def _oom_event(match, message):
    rss = ANON_RSS.search(message)
    return {"pid": int(match.group("pid")), "name": match.group("name"),
            "scope": "memory cgroup" if match.group("cgroup") else "system",
            "anon_rss_kb": int(rss.group("kb").replace(",", "")) if rss else None}


def pci_key(address):
    """domain:bus:device of a PCI address as nvidia-smi (8-digit domain), the kernel's Xid lines (4) or its other
    messages (with the function) write it."""
    parts = address.lower().split(":")
    return "%s:%s:%s" % (parts[0][-4:], parts[1], parts[2].split(".")[0]) if len(parts) == 3 else address.lower()


def _pci_address(text):
    """The PCI address text starts with ("0000:5d:00.0"), else None."""
    end = 0
    while end < min(len(text), 24) and text[end] in PCI_CHARACTERS:
        end += 1
    address = text[:end].rstrip(":.")
    return address if address.count(":") == 2 else None


class _FallenOffTheBus(object):
    """The driver's messages of a GPU fallen off the bus other than an Xid 79 line, read one at a time: (the GPU's
    address, the message, the time of its first line) once they are whole."""

    def __init__(self):
        self.device, self.left, self.first, self.seconds = None, 0, None, None

    def read(self, text, seconds):
        if text.startswith(THE_GPU):
            self.device, self.left, self.first = _pci_address(text[len(THE_GPU):]), FALLEN_LINES, text
            self.seconds = seconds
            return self._whole(text)
        if text.startswith(GPU_AT) and text.endswith(HAS_FALLEN):
            self.device = None
            return _pci_address(text[len(GPU_AT):]), text, seconds
        if self.device is None or not text:
            return None
        self.left -= 1
        found = self._whole(text)
        if found is None and self.left <= 0:
            self.device = None
        return found

    def _whole(self, text):
        if NOT_RESPONDING not in text:
            return None
        device, first, self.device = self.device, self.first, None
        return (device, first if first == text else "%s ... %s" % (first, text), self.seconds) if device else None


def kernel_events(lines, since=None, server_pids=(), server_names=()):
    """OOM kills and Xids in lines, at or after since (seconds since boot) when it is given.

    An event is the server's (``server``) only when its pid is one of server_pids. ``matched_by`` says how it
    was matched: ``pid``, or, where only a name fits, ``sglang process title`` (a ``sglang::`` title, which
    SGLang gives its scheduler children, pids of their own) or ``process name`` (the kernel's comm, 15
    characters at most, is one of server_names): any user can run a process of that title or name, so such an
    event may be another's."""
    found = {"oom_kills": [], "xids": [], "oom_kill_count": 0, "xid_count": 0}
    pids = set(server_pids)
    names = set(name[:15] for name in server_names if name)

    def matched_by(event):
        """How the event was matched to the server, most certain first; None when it was not."""
        name = event.get("name") or ""
        if event["pid"] in pids:
            return "pid"
        if name.startswith("sglang::"):
            return "sglang process title"
        return "process name" if name in names else None

    fallen, xid_79 = _FallenOffTheBus(), set()
    for line in lines:
        seconds, message = split_line(line[:LINE_CHARS])
        if since is not None and (seconds is None or seconds < since):
            continue
        xid = XID.match(message)
        oom = None if xid else OOM_KILL.match(message)
        off_the_bus = None if xid or oom else fallen.read(message.strip(), seconds)
        if xid:
            event, kind = _xid_event(xid), "xid"
            if event["xid"] == 79 and len(xid_79) < MAX_FALLEN_DEVICES:
                xid_79.add(pci_key(event["device"]))
        elif oom:
            event, kind = _oom_event(oom, message), "oom_kill"
        elif off_the_bus and pci_key(off_the_bus[0]) not in xid_79 and len(xid_79) < MAX_FALLEN_DEVICES:
            xid_79.add(pci_key(off_the_bus[0]))
            event, kind, message, seconds = _fallen_event(off_the_bus[0]), "xid", off_the_bus[1], off_the_bus[2]
        else:
            continue
        how = matched_by(event)
        event.update(time=seconds, line=result_line(message.strip()), server=how == "pid", matched_by=how,
                     name=None if event["name"] is None else result_line(event["name"]))
        found[kind + "_count"] += 1
        if len(found[kind + "s"]) < MAX_EVENTS:
            found[kind + "s"].append(event)
    return found


def read_kmsg(path=KMSG_PATH, clock=time.monotonic, seconds=READ_SECONDS):
    """The records in the kernel's ring buffer as lines, read without blocking from /dev/kmsg (which needs
    CAP_SYSLOG, or kernel.dmesg_restrict=0) for at most seconds. OSError when it cannot be read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    lines, deadline = [], clock() + seconds
    try:
        while len(lines) < MAX_KMSG_RECORDS and clock() < deadline:
            try:
                record = os.read(descriptor, LINE_CHARS)
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records overwritten while reading: the next read gives the oldest left
                if exc.errno == errno.EAGAIN:
                    break  # the end of the buffer
                raise
            if not record:
                break
            # One record per read; continuation lines (" KEY=value") hold device properties only.
            lines.append(record.decode("utf-8", "replace").split("\n", 1)[0])
    finally:
        os.close(descriptor)
    return lines


def read_kernel_log(kmsg_path=KMSG_PATH, run=subprocess.run, seconds=None):
    """(lines, source, problem): the kernel log from /dev/kmsg, else from `dmesg`; problem says why neither
    could be read (lines is then None). seconds: the most the caller has left for it, if less than the bounds of
    each (READ_SECONDS, DMESG_SECONDS)."""
    problems = []
    kmsg_seconds, dmesg_seconds = READ_SECONDS, DMESG_SECONDS
    if seconds is not None:
        kmsg_seconds, dmesg_seconds = min(kmsg_seconds, seconds), min(dmesg_seconds, seconds)
    try:
        return read_kmsg(kmsg_path, seconds=kmsg_seconds), kmsg_path, None
    except OSError as exc:
        problems.append("%s: %s" % (kmsg_path, exc.strerror or exc))
    try:
        # The cores run without an AnsibleModule (run_command), so that they can be tested and reused alone.
        # pylint: disable-next=ansible-bad-function
        completed = run(["dmesg"], capture_output=True, text=True, errors="replace", timeout=dmesg_seconds,
                        check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        problems.append("dmesg: %s" % (getattr(exc, "strerror", None) or exc))
    else:
        if completed.returncode == 0:
            return completed.stdout.splitlines(), "dmesg", None
        problems.append("dmesg: %s" % (result_line(completed.stderr.strip()) or "exit code %d" % completed.returncode))
    return None, None, "kernel log not readable: %s (it needs root with CAP_SYSLOG, and /dev/kmsg in a " \
        "container)" % "; ".join(problems)
