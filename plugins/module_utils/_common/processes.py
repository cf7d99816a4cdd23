# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What /proc says of a process: whether it runs, its start time, owner and command line, its process group, and
how it ended while its parent has not collected it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


# A zombie (Z) has ended and waits only for its parent to collect its exit status; X is its removal. Neither runs.
ENDED_STATES = ("Z", "X")


def stat_fields(pid, proc_root="/proc"):
    """The fields of /proc/<pid>/stat from field 3 (the state) on, or None where it cannot be read.

    The file is `pid (comm) state ...`; comm may hold spaces and parentheses, so the fields are split after the
    last `)`: field N is the (N - 3)th."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat")) as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (IOError, OSError, IndexError):
        return None


def process_start_time(pid, proc_root="/proc"):
    """The kernel's start time of pid (clock ticks since boot, field 22), or None if it is gone or a zombie."""
    fields = stat_fields(pid, proc_root)
    if fields is None or fields[0] in ENDED_STATES:
        return None
    return int(fields[19])


def exit_status(pid, proc_root="/proc"):
    """How pid ended, as waitpid would give it, while it is a zombie its parent has not collected; None otherwise.

    The kernel keeps it in field 52 (exit_code, Linux 3.5 on); a reader that may not trace the process reads 0
    there, so 0 tells nothing."""
    fields = stat_fields(pid, proc_root)
    if fields is None or fields[0] != "Z" or len(fields) < 50:
        return None
    return bounded_int(fields[49]) or None


def process_uid(pid, proc_root="/proc"):
    """The real uid of pid, or None if it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "status")) as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (IOError, OSError):
        return None
    return None


def process_argv(pid, proc_root="/proc"):
    """The command line of pid as a list, or None if it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as handle:
            raw = handle.read()
    except (IOError, OSError):
        return None
    return [word.decode("utf-8", "surrogateescape") for word in raw.split(b"\0")[:-1]]


def boot_id(path=BOOT_ID_PATH):
    """This boot's id: after a reboot, a pid with the same start time is another process."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def group_members(pgid, proc_root="/proc"):
    """Pids whose process group is pgid."""
    members = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        fields = stat_fields(entry, proc_root)
        if fields is not None and int(fields[2]) == pgid and fields[0] not in ENDED_STATES:
            members.append(int(entry))
    return sorted(members)
