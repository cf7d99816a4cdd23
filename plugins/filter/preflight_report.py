# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._preflight import evaluate


def preflight_report(settings, profile, observed):
    try:
        return evaluate(settings, profile, observed)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("preflight_report: incomplete input (%s): %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {"preflight_report": preflight_report}
