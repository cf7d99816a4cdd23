# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The upgrade playbook's report: one row per node from what the node noted, the table an operator reads, each
node's outage as one line (its timeline, its time out of rotation and out of service, the model's read-ahead and the
GPU memory its new server started with) and what fails the run. Pure, for the upgrade_report filter and the unit
tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.sizes import size_text

# Outcomes that end a run well; any other fails it.
ON_TARGET = ("upgraded", "unchanged")
# A node still 'prepared' at the end was never switched: a node before it stopped the upgrade.
NOT_SWITCHED = "not switched (the upgrade stopped before its turn)"
COLUMNS = ("host", "from -> to", "outcome", "time to ready", "diagnosis")
MESSAGES = {
    "rolled back": "upgrade failed, rolled back, ready on the old stack",
    "ROLLBACK FAILED": "UPGRADE AND ROLLBACK FAILED: NOT SERVING",
}
# The steps (of the timeline upgrade.STEPS orders) that take a node out of rotation or of service, and those that
# put it back: out of rotation from a drain to its undrain, out of service from a stop (or a rollback's start of the
# old server, for a node that served on the new stack) to the ready line and /health of the server started next.
ROTATION = (("drain", "rollback_drain"), ("undrain", "rollback_undrain"))
SERVICE = (("stop", "rollback_start"), ("ready", "rollback_ready"))
# Why a read-ahead stopped before the end (model_readahead's stopped).
STOPPED = {"deadline": "stopped at its timeout", "memory": "stopped as the host's available memory ran low"}


def _spent(timeline, steps, since=None):
    """The seconds between the steps that open and those that close (steps), over every interval of timeline; since:
    the time an interval was opened before the timeline began. None when no interval closed, or one is left open."""
    opens, closes = steps
    spent, closed, opened = 0.0, False, since
    for step in timeline:
        if step["step"] in opens and opened is None:
            opened = step["at"]
        elif step["step"] in closes and opened is not None:
            spent, closed, opened = spent + step["at"] - opened, True, None
    return round(spent, 1) if closed and opened is None else None


def totals(note):
    """The seconds the node was out of rotation and out of service (None where this run did not see it back), counted
    out of service from the stop an interrupted run recorded when its server was down since."""
    timeline = note.get("timeline") or []
    return _spent(timeline, ROTATION), _spent(timeline, SERVICE, note.get("stopped_at"))


def _named(step):
    return step.replace("_", " ")


def _percent(part, whole):
    """part of whole as a whole percentage, rounded down: 100% only when all of it."""
    return "%d%%" % (100 * part // whole)


def readahead_text(readahead, done, following):
    """What the read-ahead that ended at done read and warmed, and how long before the step following (None for
    none) it ended."""
    if "msg" in readahead:
        return "read-ahead failed: %s" % readahead["msg"]
    said = "model read ahead in %.1f s" % float(readahead["seconds"])
    if following is not None:
        said += ", %.1f s before the %s" % (following["at"] - done, _named(following["step"]))
    said += ": %s read (%.2f GB/s)" % (size_text(readahead["read_bytes"]), float(readahead["gbps"])) if (
        readahead["read_bytes"]) else ": nothing read"
    total, before, after = readahead["total_bytes"], readahead["warm_before_bytes"], readahead["warm_after_bytes"]
    if not total:
        said += ", no file of the model to read"
    elif before is None or after is None:
        said += ", how much of its %s is warm is unknown" % size_text(total)
    else:
        said += ", %s of its %s warm (%s before)" % (_percent(after, total), size_text(total), _percent(before, total))
    if readahead["stopped"]:
        said += ", %s" % STOPPED.get(readahead["stopped"], "stopped early")
    return said


def _tokens(count):
    return "{:,}".format(count)


def capacity_text(capacity):
    """The GPU memory the new server started with, as its readiness gate read it, and why a start was degraded."""
    said = "new server's KV cache %s" % (
        "not in its log" if capacity["kv_tokens"] is None else "%s tokens" % _tokens(capacity["kv_tokens"]))
    if capacity["share"] is not None and capacity["last_good_kv_tokens"] is not None:
        said += " (%s of the last good launch's %s)" % (
            "%.0f%%" % (100 * float(capacity["share"])), _tokens(capacity["last_good_kv_tokens"]))
    if capacity["avail_mem_gb"] is not None:
        said += ", %.2f GB of GPU memory free at its weights' load" % float(capacity["avail_mem_gb"])
    if capacity["degraded"]:
        causes = []
        if capacity["below_last_good"]:
            causes.append("below %.0f%% of the last good launch's KV cache" % (100 * float(capacity["degraded_ratio"])))
        if capacity["beside_holders"]:
            causes.append("beside %s" % ", ".join(
                "pid %s of %s holding %s MiB (%s)" % (holder["pid"], holder["user"] or "an unknown user",
                                                      holder["used_memory_mib"], holder["command"])
                for holder in capacity["holders"] or []) or "another process holding GPU memory")
        said += ", a DEGRADED START%s" % (": " + " and ".join(causes) if causes else "")
    return said


def outage(note):
    """One line: the steps of the node's outage this run saw (the first at 0.0 s, each next one after the one
    before), its time out of rotation and out of service, the model's read-ahead and the GPU memory its new server
    started with; "" for a node that had none of them. A node whose switch an interrupted run began says so, and
    which steps this run saw."""
    timeline = note.get("timeline") or []
    steps = [step for step in timeline if step["step"] != "readahead"]
    parts = []
    if steps:
        seen = ", ".join("%s %s" % (_named(step["step"]), "0.0 s" if index == 0 else "+%.1f s" % (
            step["at"] - steps[index - 1]["at"])) for index, step in enumerate(steps))
        if note.get("resumed") and note.get("stopped_at") is not None:
            seen = "an interrupted run stopped its server %.1f s before this run's first step; this run saw %s" % (
                steps[0]["at"] - note["stopped_at"], seen)
        elif note.get("resumed") and "stop" not in [step["step"] for step in steps]:
            seen = "an interrupted run switched it; this run saw %s" % seen
        parts.append(seen)
    rotation, service = totals(note)
    spent = ([] if rotation is None else ["out of rotation %.1f s" % rotation]) + (
        [] if service is None else ["out of service %.1f s" % service])
    if spent:
        parts.append(", ".join(spent))
    for index, step in enumerate(timeline):
        if step["step"] == "readahead" and note.get("readahead"):
            parts.append(readahead_text(note["readahead"], step["at"], (timeline[index + 1:] or [None])[0]))
    if note.get("capacity"):
        parts.append(capacity_text(note["capacity"]))
    return "; ".join(parts)


def _timeline(note):
    """The steps of the node's outage: each one's time and the seconds since the step before it (null for the
    first)."""
    timeline = note.get("timeline") or []
    return [{"step": step["step"], "at": step["at"],
             "after": None if index == 0 else round(step["at"] - timeline[index - 1]["at"], 1)}
            for index, step in enumerate(timeline)]


def rows(hosts, noted, target):
    """hosts: the play's hosts in order; noted: {host: the gpu_node_upgrade fact} for the hosts that noted one."""
    found = []
    for host in hosts:
        note = noted.get(host) or {"from": "unknown", "to": target, "outcome": "not reached"}
        rotation, service = totals(note)
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
            "timeline": _timeline(note),
            "out_of_rotation": rotation,
            "out_of_service": service,
            "readahead": note.get("readahead"),
            "capacity": note.get("capacity"),
            "outage": outage(note),
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


def outages(found):
    """One line per node that has an outage to tell: 'host: what outage() says'."""
    return ["%s: %s" % (row["host"], row["outage"]) for row in found if row["outage"]]


def problems(found):
    """One line per node that does not end on the target stack."""
    return ["%s: %s%s" % (row["host"], row["message"], (" (%s)" % row["diagnosis"]) if row["diagnosis"] else "")
            for row in found if row["outcome"] not in ON_TARGET]


def report(hosts, noted, target):
    found = rows(hosts, noted, target)
    return {"rows": found, "table": table(found), "outages": outages(found), "problems": problems(found)}
