#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: upgrade_state
short_description: The upgrade's lock on a node and its record of a switch in progress (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.upgrade) playbook, which calls it; not meant for playbooks of your own.
  - "Both live in C(<state_dir>/upgrade/), root's and C(0700), every level from C(/) root's and writable by root
    alone: C(lock.json) names the run that holds the node (its id, controller, process, user and start),
    C(switch.json) records a switch from its stop until its gates pass or its rollback ends (the run, the profiles
    and virtualenvs from and to, the time the server stopped, the gates the new server takes and those it passed,
    and the baselines measured on the old stack that its gates compare with). Each is a line of JSON read as a
    regular file of at most 16 KiB, never through a link."
  - O(state=locked) takes the lock for O(owner), atomically; a lock another run holds is taken over only when that
    run's id is O(gone_run) (the playbook proves on the controller that its process is gone), and is reported in
    RV(holder) otherwise, with RV(locked) false, RV(message) saying in what state that run left the node (from
    the switch record and O(running)) and how to take it over. It returns the switch record in RV(record).
  - O(state=switching) writes the record (O(record), with the run's id) while O(owner) holds the lock;
    O(state=ended) removes it. O(state=released) releases O(owner)'s lock, and leaves the record.
  - M(blackwell.gpu_node.upgrade_state_info) reads both and changes nothing.
  - A lock or record that is not one this module writes is refused, naming the file and the fix, before anything
    changes.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
    platforms: debian
options:
  state:
    description: What to do with the lock and the record (see the description).
    type: str
    choices: [locked, switching, ended, released]
    required: true
  state_dir:
    description: The directory that holds C(upgrade/); created C(0750) when missing.
  owner:
    description:
      - This run, as the C(blackwell.gpu_node.upgrade_run) lookup gives it.
      - Keys C(id) (32 hex digits), C(controller), C(pid), C(pid_started), C(user), C(started).
    type: dict
    required: true
  gone_run:
    description: For O(state=locked), the id of a run the controller proved gone, whose lock is taken over.
    type: str
  running:
    description: For O(state=locked), what the node runs as the playbook saw it just before, named in a refusal.
    type: dict
    suboptions:
      venv:
        description: The virtualenv the stable link points at; null when there is no link.
        type: str
      profile:
        description: Its stack profile; null when unknown.
        type: str
      serving:
        description: Whether the node's server answered just now.
        type: bool
        default: false
  record:
    description:
      - For O(state=switching), the switch, keys C(from), C(to), C(from_venv), C(to_venv) and C(stopped_at) (seconds
        since the epoch).
      - Optional keys C(gates) (the gates its new server takes, of C(ready), C(generate), C(benchmark), C(gateway)),
        C(passed) (those it passed) and C(before) (C(benchmark) and C(gateway) to the baseline measured on the old
        stack); a record without them names none.
    type: dict
seealso:
  - module: blackwell.gpu_node.upgrade_state_info
"""

EXAMPLES = r"""
- name: Take the node's upgrade lock
  blackwell.gpu_node.upgrade_state:
    state: locked
    owner: "{{ lookup('blackwell.gpu_node.upgrade_run') }}"
  register: lock
"""

RETURN = r"""
locked:
  description: Whether O(owner) holds the lock after the call.
  returned: always
  type: bool
holder:
  description: The run that holds the lock (O(owner) itself after a successful O(state=locked)); null when none.
  returned: always
  type: dict
  sample: {id: 9f0c2e4b6a8d4f10b2c3d4e5f6a7b8c9, controller: ops-1, pid: 4242, pid_started: "8812731", user: ops,
           started: 1796302000.5}
record:
  description: The switch record on the node (after O(state=switching), the one written); null when none.
  returned: always
  type: dict
  sample: {run: 9f0c2e4b6a8d4f10b2c3d4e5f6a7b8c9, from: cu128, to: cu130, from_venv: ml-env.cu128-1a2b3c4d,
           to_venv: ml-env.cu130-5e6f7a8b, stopped_at: 1796302061.2, gates: [ready, generate],
           passed: [ready], before: {}}
message:
  description: What a run holding the node or a record left means, and what to do; empty when neither.
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    create_exclusively,
    remove,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import (
    LOCK,
    RECORD,
    encoded,
    left_behind,
    lock_decision,
    owner_problems,
    record_problems,
    refusal,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade_node import Node, lock_path


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["locked", "switching", "ended", "released"], required=True),
            state_dir=dict(type="path", default=STATE_DIR),
            owner=dict(type="dict", required=True),
            gone_run=dict(type="str"),
            running=dict(type="dict", options=dict(venv=dict(type="str"), profile=dict(type="str"),
                                                   serving=dict(type="bool", default=False))),
            record=dict(type="dict"),
        ),
        required_if=[("state", "switching", ["record"])],
        supports_check_mode=True,
    )
    params, state, now = module.params, module.params["state"], time.time()
    owner = params["owner"]
    if owner_problems(owner):
        module.fail_json(msg="%s. Nothing was changed." % "; ".join(owner_problems(owner)))
    lock_file = lock_path(params["state_dir"])
    changed = False
    node = None
    try:
        node = Node(params["state_dir"], create=state in ("locked", "switching") and not module.check_mode)
        holder, record = node.lock(), node.record()
        if state == "locked":
            decision = lock_decision(holder, owner, params["gone_run"])
            if decision == "refuse":
                module.exit_json(changed=False, locked=False, holder=holder, record=record,
                                 message=refusal(holder, owner, record, now, lock_file, params["running"]))
            if decision != "keep" and not module.check_mode:
                if decision == "take" and not create_exclusively(node.directory, LOCK, encoded(owner), 0o600):
                    holder = node.lock()
                    module.exit_json(changed=False, locked=False, holder=holder, record=record,
                                     message=refusal(holder, owner, record, now, lock_file, params["running"]))
                if decision == "replace":
                    write_atomically(node.directory, LOCK, encoded(owner), 0o600)
            changed, holder = decision != "keep", owner
        elif state == "switching":
            if holder is None or holder["id"] != owner["id"]:
                raise InvalidOption("This run does not hold the node's upgrade lock (%s): take it with state=locked "
                                    "first" % lock_file)
            wanted = dict(params["record"], run=owner["id"])
            problems = record_problems(wanted)
            if problems:
                raise InvalidOption("; ".join(problems))
            changed = wanted != record
            if changed and not module.check_mode:
                write_atomically(node.directory, RECORD, encoded(wanted), 0o600)
            record = wanted
        elif state in ("ended", "released"):
            if state == "ended" and record is not None:
                changed = True
                if not module.check_mode:
                    remove(node.directory, RECORD)
                record = None
            if state == "released" and holder is not None and holder["id"] == owner["id"]:
                changed = True
                if not module.check_mode:
                    remove(node.directory, LOCK)
                holder = None
        message = left_behind(holder, record, now, lock_file)
    except InvalidOption as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc)
    except OSError as exc:
        module.fail_json(msg="upgrade_state state=%s failed on %s: %s. Nothing was changed." % (
            state, exc.filename or lock_file, exc.strerror or exc))
    finally:
        if node is not None:
            node.close()
    module.exit_json(changed=changed, locked=bool(holder and holder["id"] == owner["id"]), holder=holder,
                     record=record, message=message)


if __name__ == "__main__":
    main()
