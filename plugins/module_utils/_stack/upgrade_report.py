# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The upgrade playbook's report: one row per node from what the node noted, the table an operator reads and what
fails the run. Pure, for the upgrade_report filter and the unit tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

# Outcomes that end a run well; any other fails it.
ON_TARGET = ("upgraded", "unchanged")
# A node still 'prepared' at the end was never switched: a node before it stopped the upgrade.
NOT_SWITCHED = "not switched (the upgrade stopped before its turn)"
COLUMNS = ("host", "from -> to", "outcome", "time to ready", "diagnosis")
MESSAGES = {
    "rolled back": "upgrade failed, rolled back, ready on the old stack",
    "ROLLBACK FAILED": "UPGRADE AND ROLLBACK FAILED: NOT SERVING",
}


def rows(hosts, noted, target):
    """hosts: the play's hosts in order; noted: {host: the gpu_node_upgrade fact} for the hosts that noted one."""
    found = []
    for host in hosts:
        note = noted.get(host) or {"from": "unknown", "to": target, "outcome": "not reached"}
        outcome = NOT_SWITCHED if note.get("outcome") == "prepared" else note.get("outcome")
        found.append({
            "host": host,
            "from": note.get("from"),
            "to": note.get("to"),
            "outcome": outcome,
            "message": MESSAGES.get(outcome, outcome),
            "seconds_to_ready": note.get("seconds_to_ready"),
            "diagnosis": note.get("diagnosis"),
            "restored": note.get("restored", []),
        })
    return found


def table(found):
    """Aligned lines: a header, then one line per node."""
    cells = [COLUMNS] + [(
        row["host"],
        "%s -> %s" % (row["from"], row["to"]),
        row["message"],
        "-" if row["seconds_to_ready"] is None else "%.1f s" % float(row["seconds_to_ready"]),
        row["diagnosis"] or "",
    ) for row in found]
    widths = [max(len(line[column]) for line in cells) for column in range(len(COLUMNS) - 1)]
    return [" | ".join([cell.ljust(width) for cell, width in zip(line, widths)] + [line[-1]]).rstrip()
            for line in cells]


def problems(found):
    """One line per node that does not end on the target stack."""
    return ["%s: %s%s" % (row["host"], row["message"], (" (%s)" % row["diagnosis"]) if row["diagnosis"] else "")
            for row in found if row["outcome"] not in ON_TARGET]


def report(hosts, noted, target):
    found = rows(hosts, noted, target)
    return {"rows": found, "table": table(found), "problems": problems(found)}
