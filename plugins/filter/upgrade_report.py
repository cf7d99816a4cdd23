# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade_report import report


def upgrade_report(hosts, noted, target):
    try:
        return report(hosts, noted, target)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("upgrade_report: incomplete input, %s: %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {"upgrade_report": upgrade_report}
