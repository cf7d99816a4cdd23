# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import plan, transition


def upgrade_plan(running, target, record, serving, gates):
    try:
        return plan(running, target, record, serving, list(gates))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("upgrade_plan: incomplete input, %s: %s" % (type(exc).__name__, exc))


def upgrade_transition(record, event, evidence):
    try:
        return transition(record, event, evidence)[0]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("upgrade_transition: %s: %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {"upgrade_plan": upgrade_plan, "upgrade_transition": upgrade_transition}
