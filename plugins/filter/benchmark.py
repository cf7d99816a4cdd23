# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.benchmark import BenchmarkError, compare, table


def benchmark_compare(current, previous, max_drop_percent):
    try:
        return compare(current, previous, float(max_drop_percent))
    except BenchmarkError as exc:
        raise AnsibleFilterError(str(exc))


def benchmark_report(hosts, results, comparisons):
    """The table over the hosts that measured, and a line per regression."""
    measured = [host for host in hosts if results.get(host)]
    rows = [(host, results[host], comparisons.get(host)) for host in measured]
    regressions = ["%s: %s" % (host, comparison["message"]) for host, _result, comparison in rows
                   if comparison and comparison["regression"]]
    return dict(table=table(rows), regressions=regressions,
                not_measured=[host for host in hosts if host not in measured])


class FilterModule(object):
    def filters(self):
        return {"benchmark_compare": benchmark_compare, "benchmark_report": benchmark_report}
