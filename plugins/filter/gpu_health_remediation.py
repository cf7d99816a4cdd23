# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import remediation


def _called(name, function, *args):
    try:
        return function(*args)
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc))
    except (AttributeError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("%s: incomplete input, %s: %s" % (name, type(exc).__name__, exc))


def gpu_health_remediation_plan(health, allow_reboot, drain):
    # The playbook says no drain with an empty string: before ansible-core 2.19 a variable holding null reads "None".
    return _called("gpu_health_remediation_plan", remediation.plan, health, allow_reboot, drain or None)


def gpu_health_recovered(node_plan, before, after):
    return _called("gpu_health_recovered", remediation.recovered, node_plan, before, after)


def gpu_health_remediation_report(hosts, mode, noted):
    def reported():
        return remediation.report(mode, hosts, dict((host, noted.get(host)) for host in hosts))
    return _called("gpu_health_remediation_report", reported)


class FilterModule(object):
    def filters(self):
        return {
            "gpu_health_remediation_plan": gpu_health_remediation_plan,
            "gpu_health_recovered": gpu_health_recovered,
            "gpu_health_remediation_report": gpu_health_remediation_report,
        }
