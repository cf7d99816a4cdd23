# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import monitoring as _monitoring


def monitoring_problems(settings):
    return _monitoring.problems(settings)


def monitoring_dcgm_plan(madison_lines, package, version):
    return _monitoring.dcgm_plan(madison_lines, package, version)


def monitoring_exporter_unit(settings, binary, counters_path):
    try:
        return _monitoring.exporter_unit_values(settings, binary, counters_path)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def monitoring_exporter_counters(counters):
    return _monitoring.counters_csv(counters)


def prometheus_sd_targets(nodes):
    try:
        return _monitoring.scrape_target_groups(nodes)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"monitoring_problems": monitoring_problems, "monitoring_dcgm_plan": monitoring_dcgm_plan,
                "monitoring_exporter_unit": monitoring_exporter_unit,
                "monitoring_exporter_counters": monitoring_exporter_counters,
                "prometheus_sd_targets": prometheus_sd_targets}
