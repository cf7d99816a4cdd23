# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: upgrade_run
author: Blackwell GPU node maintainers (@blackwell-gpu-node)
version_added: 0.1.0
short_description: This playbook run as the upgrade's node lock names it, and whether another run is gone (internal)
description:
  - Internal to the C(blackwell.gpu_node.upgrade) playbook, which calls it; not meant for playbooks of your own.
  - "Without terms, one item, this run: a random C(id), the C(controller)'s host name, the C(pid) of the
    C(ansible-playbook) process and its start (C(pid_started), from C(/proc) where the controller has one, else
    null), the C(user) and the time it C(started)."
  - With terms (runs that hold a lock), for each whether it is provably gone, which is only the case for a run of
    this controller whose process no longer runs (or whose process id another process has taken since). A run of
    another controller is never called gone.
options:
  _terms:
    description: Runs as a lock names them; none for this run.
    type: list
    elements: dict
    required: false
"""

EXAMPLES = r"""
- name: Name this run once, for every node's lock
  ansible.builtin.set_fact:
    upgrade_owner: "{{ lookup('blackwell.gpu_node.upgrade_run') }}"
  run_once: true
"""

RETURN = r"""
_raw:
  description: This run (without terms), or whether each run of the terms is gone.
  type: list
  elements: raw
"""

import getpass
import multiprocessing
import os
import socket
import time
import uuid

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import process_start_time
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import gone, owner_problems


def process_started(pid, proc_root="/proc"):
    """The start of process pid in clock ticks since boot, as /proc gives it; "" where the controller has no
    /proc; None when no process pid runs (a zombie, a run killed whose parent has not collected it yet, runs no
    more)."""
    if not os.path.isdir(proc_root):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    started = process_start_time(pid, proc_root)
    return None if started is None else str(started)


def playbook_process():
    """The ansible-playbook process: a task's lookup runs in a worker it forked."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None else os.getpid()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if not terms:
            pid = playbook_process()
            return [{"id": uuid.uuid4().hex, "controller": socket.gethostname(), "pid": pid,
                     "pid_started": process_started(pid) or None, "user": getpass.getuser(), "started": time.time()}]
        for term in terms:
            problems = owner_problems(term, "a run")
            if problems:
                raise AnsibleLookupError("upgrade_run: %s" % "; ".join(problems))
        return [gone(term, socket.gethostname(), process_started) for term in terms]
