# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The upgrade playbook's state on a node: the lock that keeps two runs apart, the record of a switch in progress
(with the gates its new server passed and the baselines they compare with), the plan prepare makes from them and
from what the node runs, and the node's record through the run (its outage's timeline included). Pure, for the
upgrade_state module, the upgrade_plan filter, the upgrade_run lookup and the unit tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import re

# Under the state directory, root's alone.
DIRECTORY = "upgrade"
LOCK = "lock.json"
RECORD = "switch.json"
# A lock or a record is a line of JSON.
LIMIT = 16384

OWNER_KEYS = ("id", "controller", "pid", "pid_started", "user", "started")
RECORD_KEYS = ("run", "from", "to", "from_venv", "to_venv", "stopped_at")
RUN_ID = re.compile(r"[0-9a-f]{32}")
# The gates a new server passes, in the order it passes them: its ready line and /health, one generation, the
# canary's measurement against its baseline, the fleet's through the gateway. The node is declared upgraded after
# the first three; the last runs with the canary back in rotation.
GATES = ("ready", "generate", "benchmark", "gateway")
# Gates that compare the new stack with a baseline measured on the old one, before the stop.
BASELINED = ("benchmark", "gateway")
# What a gate reads of a baseline (benchmark_compare): the rest of a measurement is not kept in the record.
BASELINE_KEYS = ("host", "time", "workload", "metrics", "stack_profile")
# The steps of a node's outage that its timeline keeps, in the only order they can come in, each with the outcome the
# node has when the playbook reaches it: the read-ahead (when it ended), the drain, the stop and the start (when the
# playbook asked for them), the new server's ready line and /health and its first generation (when it passed them),
# the undrain (when the node was back in rotation); for a rollback, the drain again, the old server's start, ready
# and generation, and the undrain.
STEPS = (("readahead", "prepared"), ("drain", "prepared"), ("stop", "prepared"), ("start", "prepared"),
         ("ready", "prepared"), ("generate", "prepared"), ("undrain", "upgraded"),
         ("rollback_drain", "rolling back"), ("rollback_start", "rolling back"), ("rollback_ready", "rolling back"),
         ("rollback_generate", "rolling back"), ("rollback_undrain", "rolled back"))
STEP_NAMES = tuple(name for name, _outcome in STEPS)
# What the report shows of the read-ahead (model_readahead's result) and of the GPU memory the new server started with
# (wait_for_server's capacity); a read-ahead that failed keeps its msg alone.
READAHEAD_KEYS = ("total_bytes", "read_bytes", "seconds", "gbps", "warm_before_bytes", "warm_after_bytes", "stopped")
CAPACITY_KEYS = ("kv_tokens", "avail_mem_gb", "share", "degraded_ratio", "below_last_good", "beside_holders",
                 "degraded")
HOLDER_KEYS = ("pid", "user", "command", "used_memory_mib")


class BadState(ValueError):
    """A lock or a record that is not what the upgrade writes."""


def owner_problems(owner, option="owner"):
    """Why owner is not the identity of a run, as upgrade_run gives it; [] when it is."""
    if not isinstance(owner, dict):
        return ["%s must be a dict of %s" % (option, ", ".join(OWNER_KEYS))]
    problems = []
    missing = [key for key in OWNER_KEYS if key not in owner]
    if missing:
        problems.append("%s lacks %s" % (option, ", ".join(missing)))
    if not RUN_ID.fullmatch(str(owner.get("id", ""))):
        problems.append("%s.id must be 32 lowercase hex digits" % option)
    if not isinstance(owner.get("pid"), int) or isinstance(owner.get("pid"), bool) or owner.get("pid") < 1:
        problems.append("%s.pid must be a process id" % option)
    if not isinstance(owner.get("started"), (int, float)) or isinstance(owner.get("started"), bool):
        problems.append("%s.started must be a time in seconds" % option)
    for key in ("controller", "user"):
        if not isinstance(owner.get(key), str) or not owner.get(key) or not owner.get(key).isprintable():
            problems.append("%s.%s must be a printable name" % (option, key))
    if owner.get("pid_started") is not None and not isinstance(owner.get("pid_started"), str):
        problems.append("%s.pid_started must be a string or null" % option)
    return problems


def record_problems(record):
    """Why record is not a switch record as the upgrade writes it; [] when it is."""
    if not isinstance(record, dict):
        return ["the record must be a dict of %s" % ", ".join(RECORD_KEYS)]
    problems = []
    missing = [key for key in RECORD_KEYS if key not in record]
    if missing:
        problems.append("the record lacks %s" % ", ".join(missing))
    if not RUN_ID.fullmatch(str(record.get("run", ""))):
        problems.append("record.run must be a run's id")
    for key in ("from", "to", "to_venv"):
        if not isinstance(record.get(key), str) or not record.get(key) or not record.get(key).isprintable():
            problems.append("record.%s must be a printable name" % key)
    if record.get("from_venv") is not None and not isinstance(record.get("from_venv"), str):
        problems.append("record.from_venv must be a name or null")
    stopped_at = record.get("stopped_at")
    if not isinstance(stopped_at, (int, float)) or isinstance(stopped_at, bool) or stopped_at <= 0:
        problems.append("record.stopped_at must be a time in seconds")
    # A record without gates, passed or before is read as one that names none.
    gates, passed = record.get("gates", []), record.get("passed", [])
    if not isinstance(gates, list) or not all(gate in GATES for gate in gates):
        problems.append("record.gates must be a list of %s" % ", ".join(GATES))
    elif not isinstance(passed, list) or not all(gate in gates for gate in passed):
        problems.append("record.passed must be a list of the record's gates")
    before = record.get("before", {})
    if not isinstance(before, dict) or not all(
            gate in BASELINED and isinstance(figures, dict) for gate, figures in before.items()):
        problems.append("record.before must map %s to a measurement" % " or ".join(BASELINED))
    if not problems and len(encoded(record)) > LIMIT:
        problems.append("the record must be at most %d bytes as JSON" % LIMIT)
    return problems


def encoded(value):
    return json.dumps(value, sort_keys=True) + "\n"


def decoded(data, what, problems_of):
    """The lock or record in data (bytes); BadState naming what is wrong with it."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadState("the %s is not JSON (%s)" % (what, exc))
    problems = problems_of(value)
    if problems:
        raise BadState("the %s is not one the upgrade writes: %s" % (what, "; ".join(problems)))
    return value


def described(owner, now):
    """The holder of a lock, as a message names it."""
    return "run %s of %s on %s (process %d), %d s old" % (
        owner["id"][:8], owner["user"], owner["controller"], owner["pid"], max(0, int(now - owner["started"])))


def lock_decision(holder, owner, gone_run):
    """What taking the lock for owner does, given the holder found (None for none) and the id of a run the
    controller proved gone: "take" (free), "keep" (owner holds it already), "replace" (its holder is gone) or
    "refuse" (another run, alive or not provably gone, holds it)."""
    if holder is None:
        return "take"
    if holder["id"] == owner["id"]:
        return "keep"
    if gone_run and holder["id"] == gone_run:
        return "replace"
    return "refuse"


def _named(profile, venv):
    return "%s (%s)" % (profile, venv) if venv else profile


def _gates_said(record):
    """Which of a switch's gates its new server passed, as a clause; "" for a record that names none."""
    gates = record.get("gates") or []
    if not gates:
        return ""
    passed = [gate for gate in gates if gate in (record.get("passed") or [])]
    left = [gate for gate in gates if gate not in passed]
    return " (its new server passed %s%s)" % (
        ", ".join(passed) or "no gate", ", not %s" % ", ".join(left) if left else ", every gate")


def _left_in(record, running):
    """In what state the node is, from its switch record and what it runs ({venv, profile, serving}; None when not
    looked at)."""
    if running is None:
        return ("unless that run is still at it, the node is half-switched and serves nothing" if record else "")
    link = ("its stable link is on %s" % _named(running.get("profile") or "an unknown profile", running["venv"])
            if running.get("venv") else "it has no stable virtualenv link")
    if record is not None and running.get("venv"):
        link += (", the switch's target," if running["venv"] == record["to_venv"] else
                 ", the stack the switch began from," if running["venv"] == record["from_venv"] else "")
    if running.get("serving"):
        return "%s and its server answers%s" % (link, ": the node serves, half-switched" if record else "")
    return "%s and its server does not answer: the node is out of service" % link


def refusal(holder, owner, record, now, lock_path, running=None):
    """Why owner's run may not take the lock holder holds: that run, the state it left the node in (the switch
    record, written just before the server stops and removed once the new or the old server passed its gates, and
    what the node runs, running: {venv, profile, serving} as the refused run saw it, or None), and how to take the
    node over."""
    said = ["Another upgrade holds this node: %s" % described(holder, now)]
    elsewhere = holder["controller"] != owner["controller"]
    if elsewhere:
        said[0] += (", a run of another controller: from %s it cannot be told whether that run is still at it or "
                    "was interrupted" % owner["controller"])
    state = _left_in(record, running)
    again = "run the upgrade again"
    if record is not None:
        said.append("A switch from %s to %s that run %s began %d s ago, stopping the node's server, has not ended%s: "
                    "%s" % (_named(record["from"], record["from_venv"]), _named(record["to"], record["to_venv"]),
                            record["run"][:8], max(0, int(now - record["stopped_at"])), _gates_said(record), state))
        again += (": with -e stack_profile=%s it finishes that switch from the snapshot its run took, taking every "
                  "gate its new server had not passed (rolled back if one fails)" % record["to"])
        if record["from"] != "unknown":
            again += ", with -e stack_profile=%s it abandons it and goes back" % record["from"]
    elif state:
        said.append("No switch is under way on it: %s" % state)
    if not elsewhere:
        said.append("Wait for it to end: once its process is gone, a run from this controller takes its lock over "
                    "by itself; %s" % again)
    else:
        said.append("Wait for it to end. Only a run from %s takes that lock over by itself. To take the node over "
                    "from %s, first make sure that run is gone (process %d on %s no longer runs; an AWX job's pod "
                    "ends with its job), then remove its lock as root on the node (rm %s)%s, and %s" % (
                        holder["controller"], owner["controller"], holder["pid"], holder["controller"], lock_path,
                        "" if record is None else ", not the switch record beside it, from which the next run "
                        "finishes or abandons that switch", again))
    said.append("This run changed nothing on the node")
    return ". ".join(said)


def left_behind(holder, record, now, lock_path):
    """What a lock held or a switch record left on a node means for another playbook, and what to do; "" when
    neither is there."""
    said = []
    if holder is not None:
        said.append("An upgrade holds this node: %s. Wait for it to end; if that run is gone and no upgrade runs, "
                    "run the upgrade again from its controller, which takes the lock over, or remove %s"
                    % (described(holder, now), lock_path))
    if record is not None:
        said.append("A switch from %s to %s that began %d s ago did not end here%s: run the upgrade again "
                    "(-e stack_profile=%s) to finish it or roll it back"
                    % (record["from"], record["to"], max(0, int(now - record["stopped_at"])), _gates_said(record),
                       record["to"]))
    return ". ".join(said)


def gone(holder, controller, process_started):
    """Whether the run holder is provably gone: it ran on this controller, and its process no longer runs, or
    another process has its id since (process_started(pid) gives a process's start, None when none runs)."""
    if holder["controller"] != controller:
        return False
    started = process_started(holder["pid"])
    return started is None or (holder["pid_started"] is not None and started != holder["pid_started"])


def _in_order(*lists):
    """The gates any of lists names, each once, in the order the new server passes them."""
    return [gate for gate in GATES if any(gate in found for found in lists)]


def plan(running, target, record, serving, gates=("ready", "generate")):
    """What prepare decides for a node.

    running: {"venv": the virtualenv the stable link points at, "profile": its profile}; target: {"venv": the
    target's virtualenv, "profile": the target profile}; record: the switch record a run left on the node (None
    when none); serving: whether the server answered a generation just now; gates: the gates this run's settings
    give a switch of this node (of GATES).

    A node is unchanged only when it runs the target, serves, and no switch was left. A record means a switch was
    begun and did not end:
    the node was out of service since its stop unless it serves now, its pre-upgrade snapshot is the one that
    switch took and is never taken again. A switch to the target is finished, and counts as a switch from what the
    record says the node ran; one to another profile is abandoned, and the node moves from what it runs to the
    target.

    A switch finished takes every gate of its record and of this run; one whose node serves on the target now has
    passed ready and generate (the probe just now is those gates) and what the record says it passed, and is
    upgraded only once it passed the rest. Its baselines are the record's: the old stack they were measured on no
    longer runs. A switch begun now takes a baselined gate only where the server that answers now can be measured,
    before the stop."""
    unknown = [gate for gate in gates if gate not in GATES]
    if unknown:
        raise ValueError("no such gate %s: the gates are %s" % (", ".join(map(str, unknown)), ", ".join(GATES)))
    on_target = running["venv"] == target["venv"]
    needed = not (on_target and serving)
    finishing = record is not None and record["to"] == target["profile"]
    source = record["from"] if finishing else (running["profile"] or "unknown")
    # A node that serves now has been out of service since nothing; one that does not since the recorded stop.
    stopped_at = record["stopped_at"] if record and not serving else None
    if finishing:
        # A gate that has lost its baseline is kept: the playbook fails it, and so rolls the node back, rather than
        # declare a node upgraded that it could not compare.
        taken = _in_order(record.get("gates") or [], gates)
    elif needed:
        taken = _in_order([gate for gate in gates if gate not in BASELINED or serving])
    else:
        taken = []
    passed = _in_order(record.get("passed") or [], ("ready", "generate")) if finishing and not needed else []
    passed = [gate for gate in passed if gate in taken]
    pending = [gate for gate in taken if gate not in passed]
    outcome = "prepared" if needed else "unchanged"
    note = None
    if record and not finishing:
        note = "a switch from %s to %s begun by run %s did not end" % (record["from"], record["to"], record["run"][:8])
        if needed:
            note += " and left the node on %s, %s: that switch is abandoned, and the node %s %s" % (
                source, "serving" if serving else "not serving",
                "goes back to" if target["profile"] == record["from"] else "is switched to", target["profile"])
        else:
            note += ", and the node serves %s: that switch is abandoned" % target["profile"]
    elif record and not needed and pending:
        # The run that switched it was interrupted before its new server passed every gate: the node serves on the
        # target, but is upgraded only once it passed the rest, and rolled back if one fails.
        outcome = "prepared"
        note = ("switched by run %s, which was interrupted before the new server passed %s: the node serves %s and "
                "takes %s now" % (record["run"][:8], ", ".join(pending), target["profile"],
                                  "that gate" if len(pending) == 1 else "those gates"))
    elif record and not needed:
        outcome = "upgraded"
        note = "switched by run %s, which was interrupted after the new server passed every gate" % record["run"][:8]
    elif record:
        note = ("a switch to %s begun by run %s did not end: it is finished from the snapshot that run took"
                % (record["to"], record["run"][:8]))
    elif needed and on_target:
        note = "the node runs %s but did not answer a generation: it is started and gated again" % target["profile"]
    return {
        "from": source,
        "to": target["profile"],
        "needed": needed,
        "resumed": record is not None,
        "outcome": outcome,
        "snapshot": needed and record is None and not on_target,
        "stopped_at": stopped_at,
        # The stop a finished switch's record keeps, for the record rewritten as its gates pass.
        "recorded_stop": record["stopped_at"] if finishing else None,
        "from_venv": record["from_venv"] if record else running["venv"],
        "to_venv": target["venv"],
        "gates": taken,
        "passed": passed,
        "pending": pending,
        "before": dict(record.get("before") or {}) if finishing else {},
        "note": note,
        "seconds_to_ready": None,
        "diagnosis": note,
        "timeline": [],
        "readahead": None,
        "capacity": None,
        "halts": False,
        "message": note or ("%s -> %s: %s" % (source, target["profile"], outcome)),
    }


# What a node's record becomes on each event of the upgrade, from the outcomes it may come from. A node whose outcome
# is in HALTING ends the switching before the next batch.
EVENTS = {
    "not_prepared": (None, "prepared", "unchanged", "upgraded"),
    "measured": ("prepared",),
    "step": ("prepared", "upgraded", "rolling back", "rolled back"),
    "passed": ("prepared", "upgraded"),
    "ready": ("prepared",),
    "switch_failed": ("prepared", "upgraded"),
    "rolled_back": ("rolling back",),
    "rollback_failed": ("rolling back",),
    "prune_failed": ("upgraded", "unchanged"),
}
HALTING = ("not prepared", "rolling back", "rolled back", "ROLLBACK FAILED")
UNTOUCHED = " The old server was not touched."


def _failure(evidence):
    """The failed task and what it said, as one line: 'TASK: MESSAGE'."""
    return "%s: %s" % (evidence.get("task") or "a task", evidence.get("msg") or "failed")


def _seconds_since_stop(record, evidence):
    stopped_at = record["stopped_at"] if record.get("stopped_at") is not None else evidence["stopped_at"]
    return round(float(evidence["now"]) - float(stopped_at), 1)


def kept_readahead(result):
    """What the record keeps of model_readahead's result: READAHEAD_KEYS, or the msg of a read-ahead that failed."""
    if "read_bytes" not in result:
        return {"msg": result.get("msg") or "failed"}
    return dict((key, result.get(key)) for key in READAHEAD_KEYS)


def kept_capacity(capacity):
    """What the record keeps of wait_for_server's capacity: CAPACITY_KEYS, the last good launch's KV-cache tokens and
    the GPU memory's holders at the launch (HOLDER_KEYS of each; null when not known); None for none."""
    if capacity is None:
        return None
    kept = dict((key, capacity.get(key)) for key in CAPACITY_KEYS)
    kept["last_good_kv_tokens"] = (capacity.get("last_good") or {}).get("kv_tokens")
    holders = capacity.get("holders")
    kept["holders"] = None if holders is None else [dict((key, holder.get(key)) for key in HOLDER_KEYS)
                                                    for holder in holders]
    return kept


def _stepped(record, evidence):
    """The timeline of record with the step of evidence ({name, at}) added; ValueError for a step the node cannot
    take now: unknown, taken already or out of order, or from an outcome it does not come from."""
    name, at = evidence["name"], evidence["at"]
    if name not in STEP_NAMES:
        raise ValueError("no such step %r: the steps are %s" % (name, ", ".join(STEP_NAMES)))
    if not isinstance(at, (int, float)) or isinstance(at, bool) or at <= 0:
        raise ValueError("the %s step's time must be a time in seconds, not %r" % (name, at))
    outcome = dict(STEPS)[name]
    if record["outcome"] != outcome:
        raise ValueError("a node whose upgrade is %s cannot take the %s step, taken by one %s" % (
            record["outcome"], name, outcome))
    timeline = list(record.get("timeline") or [])
    if timeline:
        last = timeline[-1]
        if STEP_NAMES.index(name) <= STEP_NAMES.index(last["step"]):
            raise ValueError("a node past the %s step cannot take the %s step" % (last["step"], name))
        # The controller's clock stepped back (NTP): the step took no time, rather than a healthy node rolled back
        # over a figure of the report.
        at = max(at, last["at"])
    return timeline + [{"step": name, "at": at}]


def transition(record, event, evidence):
    """The node's next record and the message that says what happened, on event, from record (the gpu_node_upgrade
    fact; None before plan() made one) and evidence (what the playbook saw):

    - not_prepared {task, msg, from, to, held}: prepare, the GPUs' second look or the second verification failed;
      the server was not touched and the node is not switched. held: another run holds the node, and msg says in
      what state it left the node, which this run did not touch;
    - measured {gate, figures}: the baseline of a gate of BASELINED, measured on the old stack before the stop, kept
      (what the gate reads of it) for the switch record;
    - step {name, at}: the node reached a step of its outage (of STEPS, each once and in their order, from the outcome
      STEPS gives it) at that time in seconds (a time before the last step's counts as the last step's); the
      readahead step's evidence has readahead, model_readahead's result (kept_readahead), the ready step's capacity, wait_for_server's
      (kept_capacity; null when none was read);
    - passed {gates}: the new server passed these gates, each one the node still had to pass;
    - ready {stopped_at, now}: the new server passed every gate before the gateway's; seconds_to_ready counts from
      the stop, or from the stop an interrupted run recorded, and is null for a node an interrupted run switched
      that served on the target already;
    - switch_failed {task, msg, known, capacity}: the switch or its gate failed (known: the diagnosis {cause, fix}
      of a failure SGLang's log names, else null; capacity: wait_for_server's when the failed task read one, a
      degraded start it failed, else null); the node is rolled back;
    - rolled_back {stopped_at, now, restored}: the old server passed its gate again (restored: node_snapshot's
      result, {actions, msg, source});
    - rollback_failed {task, msg}: the rollback failed too: the node does not serve;
    - prune_failed {msg}: old virtualenvs could not be removed; the node serves on the target.

    An event from an outcome it cannot follow (a node rolled back reported ready, a node never prepared rolled back),
    a node ready before it passed its gates, a gate passed twice or a step out of order raises ValueError: the
    playbook has lost track of the node, which must not be reported as anything."""
    if event not in EVENTS:
        raise ValueError("unknown upgrade event %r: one of %s" % (event, ", ".join(sorted(EVENTS))))
    outcome = None if record is None else record["outcome"]
    if outcome not in EVENTS[event]:
        raise ValueError("a node whose upgrade is %s cannot be %s" % (outcome or "not planned", event.replace("_", " ")))
    following = dict(record or {
        "from": evidence.get("from") or "unknown", "to": evidence.get("to") or "(none)", "resumed": False,
        "snapshot": False, "stopped_at": None, "recorded_stop": None, "from_venv": None, "to_venv": None,
        "gates": [], "passed": [], "pending": [], "before": {}, "note": None, "seconds_to_ready": None,
        "diagnosis": None, "timeline": [], "readahead": None, "capacity": None})
    move = "%s -> %s" % (following["from"], following["to"])
    if event == "not_prepared":
        # A node another run holds was left as that run left it: the message says how, not that it was untouched.
        following.update(needed=False, outcome="not prepared",
                         diagnosis=_failure(evidence) + ("" if evidence.get("held") else UNTOUCHED))
        message = "%s not switched: %s" % (move, following["diagnosis"])
    elif event == "measured":
        gate = evidence["gate"]
        if gate not in BASELINED or gate not in following["pending"]:
            raise ValueError("a node whose switch does not take the %s gate has no baseline for it" % gate)
        figures = evidence["figures"]
        following["before"] = dict(following["before"], **{gate: dict(
            (key, figures[key]) for key in BASELINE_KEYS if key in figures)})
        message = "%s: the %s gate's baseline measured on %s" % (move, gate, following["from"])
    elif event == "step":
        following["timeline"] = _stepped(following, evidence)
        name = evidence["name"]
        if name == "readahead":
            following["readahead"] = kept_readahead(evidence["readahead"])
        elif name == "ready":
            following["capacity"] = kept_capacity(evidence.get("capacity"))
        message = "%s: %s" % (move, name.replace("_", " "))
        if len(following["timeline"]) > 1:
            message += " %.1f s after the %s" % (following["timeline"][-1]["at"] - following["timeline"][-2]["at"],
                                                 following["timeline"][-2]["step"].replace("_", " "))
    elif event == "passed":
        gates = list(evidence["gates"])
        if not gates or any(gate not in following["pending"] for gate in gates):
            raise ValueError("a node that still has to pass %s cannot pass %s" % (
                ", ".join(following["pending"]) or "no gate", ", ".join(gates) or "no gate"))
        following["passed"] = [gate for gate in following["gates"] if gate in following["passed"] or gate in gates]
        following["pending"] = [gate for gate in following["gates"] if gate not in following["passed"]]
        message = "%s: passed %s" % (move, ", ".join(gates))
    elif event == "ready":
        # The gateway's gate runs once the node is back in rotation, after it is declared upgraded.
        before_ready = [gate for gate in following["pending"] if gate != "gateway"]
        if before_ready:
            raise ValueError("a node that has not passed %s cannot be ready" % ", ".join(before_ready))
        if following["needed"]:
            following.update(outcome="upgraded", seconds_to_ready=_seconds_since_stop(following, evidence))
            message = "%s upgraded: ready on the new stack %.1f s after the stop" % (
                move, following["seconds_to_ready"])
        else:
            following.update(outcome="upgraded")
            message = "%s upgraded: it served on the new stack already and has passed %s" % (
                move, ", ".join(following["passed"]) or "no gate")
    elif event == "switch_failed":
        known = evidence.get("known")
        if evidence.get("capacity") is not None:
            following["capacity"] = kept_capacity(evidence["capacity"])
        following.update(outcome="rolling back", diagnosis=(
            "%s Fix: %s" % (known["cause"], known["fix"]) if known else _failure(evidence)))
        message = "%s failed, rolling back: %s" % (move, following["diagnosis"])
    elif event == "rolled_back":
        restored = evidence["restored"]
        following.update(outcome="rolled back", seconds_to_ready=_seconds_since_stop(following, evidence),
                         restored=restored["actions"])
        if restored.get("source") != "file":
            following["diagnosis"] = "%s | %s; the next upgrade records the node again" % (
                following["diagnosis"], restored["msg"])
        message = "%s rolled back: ready on %s again %.1f s after the stop" % (
            move, following["from"], following["seconds_to_ready"])
    elif event == "rollback_failed":
        following.update(outcome="ROLLBACK FAILED", diagnosis="%s | Rollback: %s" % (
            following["diagnosis"], _failure(evidence)))
        message = "%s IS NOT SERVING: the upgrade to %s failed and so did the rollback to %s. %s" % (
            evidence.get("host", "the node"), following["to"], following["from"], following["diagnosis"])
    else:
        following["diagnosis"] = "old virtualenvs not pruned: %s" % (evidence.get("msg") or "failed")
        message = "%s %s, but %s" % (move, following["outcome"], following["diagnosis"])
    following["halts"] = following["outcome"] in HALTING
    following["message"] = message
    return following, message
