# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The processes that hold the GPUs: who has a device open, who holds GPU memory, until it is released. Starting,
finding and stopping the server's own process is _common.detached's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import glob
import os
import subprocess
import time


def device_holders(patterns, exclude=(), proc_root="/proc"):
    """{pid: [device paths]} of the processes that have a file matching patterns open."""
    devices = set()
    for pattern in patterns:
        devices.update(os.path.realpath(path) for path in glob.glob(pattern))
    holders = {}
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        fd_dir = os.path.join(proc_root, entry, "fd")
        try:
            names = os.listdir(fd_dir)
        except (IOError, OSError):
            continue
        for name in names:
            try:
                target = os.readlink(os.path.join(fd_dir, name))
            except (IOError, OSError):
                continue
            if target in devices:
                holders.setdefault(int(entry), set()).add(target)
    return dict((pid, sorted(paths)) for pid, paths in holders.items())


def gpu_memory_pids(run=subprocess.run):
    """Pids that nvidia-smi lists with GPU memory, or None where nvidia-smi is not there."""
    try:
        # The cores run without an AnsibleModule (run_command), so that they can be tested and reused alone.
        # pylint: disable-next=ansible-bad-function
        completed = run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                        capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return set(int(line) for line in completed.stdout.split() if line.strip().isdigit())


def wait_gpu_release(pids, timeout, query=gpu_memory_pids, sleep=time.sleep, clock=time.monotonic):
    """True once none of pids holds GPU memory; False at timeout; None without nvidia-smi."""
    deadline = clock() + timeout
    while True:
        holders = query()
        if holders is None:
            return None
        if not holders & set(pids):
            return True
        if clock() >= deadline:
            return False
        sleep(0.5)
