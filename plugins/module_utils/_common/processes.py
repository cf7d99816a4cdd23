# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What /proc says of a process: its start time, owner and command line, its process group."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def process_start_time(pid, proc_root="/proc"):
    """The kernel's start time of pid (clock ticks since boot), or None if it is gone.

    /proc/<pid>/stat is `pid (comm) state ...`; comm may hold spaces and parentheses, so the fields are
    split after the last `)`: the first is field 3 (state), starttime (field 22) is the 20th."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat")) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (IOError, OSError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


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
        try:
            with open(os.path.join(proc_root, entry, "stat")) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (IOError, OSError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return sorted(members)
