# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What the health playbook does about a node's GPU health, after NVIDIA's resolution buckets: each node's plan
(which findings are acted on, how, on which GPUs, and what it stops), whether a node came back after its GPU reset
or reboot, and the report of the fleet. Pure, for the gpu_health_remediation filters and the unit tests; the
playbook acts (drain, stop the server, reset or reboot, read the health again, start, gate on a generation,
undrain).

Only unhealthy findings are acted on: a degraded node serves, as preflight lets it, and
preflight_gpu_health_severity_overrides makes a finding unhealthy where it should be acted on. Each finding's
bucket is NVIDIA's, from its Xid catalogue (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
which gpu_health gives every finding. Two of the catalogue's workflows are a GPU reset here:
- WORKFLOW_XID_48 (a double-bit ECC error): alone, RESET_GPU; with an Xid 63 or 64, drain and reset. The node is
  drained before any reset, so both are the same reset; a failed row remap has a bucket of its own that keeps the
  node out.
- WORKFLOW_NVLINK_ERR: NVIDIA Health Validation's action for an NVLink fault is drain, then reset the GPU, then
  restart the OS, then service (https://docs.nvidia.com/health-validation/reference/checks/nvlink.html): the reset
  is its first step, and a node whose links still fail after it does not come back and stays out.
WORKFLOW_XID_45 (restart Fabric Manager where the Xid 45 came alone, else nothing) is reported, not acted on: a
Fabric Manager restart takes every GPU of an NVSwitch board with it, which is no step of a GPU's remediation.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line

NONE = "none"
REPORT = "report"
RESET = "reset_gpu"
REBOOT = "reboot"
KEEP_OUT = "keep_out"
# The node's action is its strongest finding's: a node that needs a case opened is not helped by a reboot, and a
# reboot resets every GPU.
STRENGTH = (NONE, REPORT, RESET, REBOOT, KEEP_OUT)
# What the playbook carries out: the node drained first, then, for a reset or a reboot, brought back.
ACTING = (RESET, REBOOT, KEEP_OUT)

# bucket: (action, what NVIDIA asks for, as the report says it). Every bucket gpu_health gives a finding
# (xid_catalogue.BUCKETS; a unit test holds them to it).
BUCKETS = {
    "RESET_GPU": (RESET, "reset the GPU"),
    "WORKFLOW_XID_48": (RESET, "reset the GPU (NVIDIA's workflow for a double-bit ECC error)"),
    "WORKFLOW_NVLINK_ERR": (RESET, "reset the GPU, the first step of NVIDIA's NVLink workflow"),
    # NVIDIA: where UVM or vGPU is used, reset the GPU, else nothing; every CUDA process maps its memory through
    # nvidia-uvm, and a reset of a drained node's GPU costs a minute where ignoring a fault costs answers.
    "CHECK_UVM": (RESET, "reset the GPU where UVM or vGPU is used, which a CUDA server's memory is"),
    "RESTART_BM": (REBOOT, "reboot the node"),
    # The VM that owns the GPU is the node the collection manages.
    "RESTART_VM": (REBOOT, "restart the VM that owns the GPU, this node"),
    "CONTACT_SUPPORT": (KEEP_OUT, "open a case with NVIDIA or the system's vendor"),
    "CHECK_MECHANICALS": (KEEP_OUT, "check the GPU's seating, cables, cooling and power"),
    "UPDATE_SWFW": (KEEP_OUT, "update the firmware and software to their latest versions"),
    # What is left of an NVLink5 Xid (144 to 150) that NVIDIA's decode sheet did not resolve: a person decodes it.
    "WORKFLOW_NVLINK5_ERR": (KEEP_OUT, "decode the NVLink5 error's registers with NVIDIA's decode sheet"),
    "RESTART_APP": (REPORT, "restart the application; the GPU is sound"),
    "IGNORE": (REPORT, "nothing"),
    "WORKFLOW_XID_45": (REPORT, "restart Fabric Manager where the Xid 45 came alone, else nothing; not done here: "
                                "it stops every GPU of an NVSwitch board"),
}
# The playbook notes the outcome of a node it acted on (recovered, kept out, not recovered, or checked in check
# mode); the report gives the others. A node that did not come back ends the run's batches.
NOT_RECOVERED = "not recovered"
# Outcomes that fail an apply run: the node is out of service, or was not reached.
FAILING = (NOT_RECOVERED, "left alone", "not reached")


def _gpu_refs(bus_ids, gpus):
    """[{index, bus_id}] of bus_ids, index None for a GPU nvidia-smi does not list."""
    index_of = dict((gpu["bus_id"], gpu["index"]) for gpu in gpus)
    return [dict(index=index_of.get(bus_id), bus_id=bus_id) for bus_id in bus_ids]


def _refs_of(finding, gpus):
    """The GPUs a finding names: its own, else (a finding of the node) those it lists, else none."""
    return _gpu_refs([finding["gpu"]] if finding.get("gpu") else finding.get("gpus") or [], gpus)


def _where(refs):
    if not refs:
        return "the node"
    return ", ".join("GPU %d (%s)" % (ref["index"], ref["bus_id"]) if ref["index"] is not None
                     else "the GPU at %s, which nvidia-smi does not list" % ref["bus_id"] for ref in refs)


def _every(health):
    """Every finding of a health result: the node's, then each GPU's."""
    return list(health.get("findings") or []) + [finding for gpu in health.get("gpus") or []
                                                 for finding in gpu["findings"]]


def _bucket(finding):
    bucket = finding.get("bucket")
    if bucket not in BUCKETS:
        raise ValueError("finding %s has the resolution bucket %r; known buckets: %s"
                         % (finding["id"], bucket, ", ".join(sorted(BUCKETS))))
    return bucket


def _step(finding, gpus, allow_reboot):
    """The plan of one finding of the node: {id, severity, bucket, action, gpus, where, why}."""
    bucket = _bucket(finding)
    action, asked = BUCKETS[bucket]
    refs = _refs_of(finding, gpus)
    why = "%s: NVIDIA's %s asks to %s" % (finding["summary"], bucket, asked)
    if finding["severity"] != "unhealthy":
        action = REPORT
        why += "; %s, not acted on (preflight_gpu_health_severity_overrides makes a finding unhealthy)" % (
            finding["severity"])
    elif action == RESET and (not refs or None in [ref["index"] for ref in refs]):
        # nvidia-smi -r -i needs each GPU's index: a GPU that fell off the bus has none, and a finding of the node
        # names no GPU to reset.
        action = REBOOT
        why += "; no GPU to reset by index (%s), so the node is rebooted instead" % _where(refs)
    if action == REBOOT and not allow_reboot:
        action = KEEP_OUT
        why += "; it needs a reboot, which gpu_node_health_allow_reboot (false) does not allow: the node stays out"
    return dict(id=finding["id"], severity=finding["severity"], bucket=bucket, action=action, gpus=refs,
                where=_where(refs), why=result_line(why))


def plan(health, allow_reboot, drain):
    """The node's plan, from its health (gpu_health_info's result; only its verdict where it was not read).

    allow_reboot: whether a finding that needs a reboot may get one; drain: what takes the node out of rotation, as
    the plan says it (the model gateway, a drain hook), None where nothing does. Returns {verdict, action, findings,
    reset, stops, why}: action the strongest of its findings' (none without a finding worth showing), findings each
    unhealthy or degraded one's plan, reset the GPUs a reset touches, stops what the action stops; acts, whether the
    playbook carries it out (drains the node); line, the plan in one line (describe())."""
    verdict = health.get("verdict")
    if verdict not in ("healthy", "degraded", "unhealthy"):
        return _planned(dict(verdict=verdict, action=NONE, findings=[], reset=[], stops=[],
                             why=result_line("not acted on: the GPUs' health was not read (%s)"
                                             % (health.get("summary") or verdict))))
    gpus = health.get("gpus") or []
    steps = [_step(finding, gpus, allow_reboot) for finding in _every(health)
             if finding["severity"] in ("unhealthy", "degraded")]
    action = max([step["action"] for step in steps] or [NONE], key=STRENGTH.index)
    reset = []
    if action == RESET:
        for step in steps:
            reset.extend(ref for ref in step["gpus"] if step["action"] == RESET and ref not in reset)
        reset.sort(key=lambda ref: ref["index"])
    rotation = ("its place in rotation (%s)" % drain) if drain else \
        "nothing takes it out of rotation (no drain hook, no model gateway): it is not applied"
    stops = {NONE: [], REPORT: [], KEEP_OUT: [rotation], RESET: [rotation, "its server", _where(reset)],
             REBOOT: [rotation, "its server", "the node (reboot)"]}[action]
    return _planned(dict(verdict=verdict, action=action, findings=steps, reset=reset, stops=stops,
                         why=_why(action, steps)))


def _planned(node_plan):
    return dict(node_plan, acts=node_plan["action"] in ACTING, line=describe(node_plan))


def _why(action, steps):
    if action == NONE:
        return "no unhealthy or degraded finding: nothing to do"
    acted = [step for step in steps if step["action"] == action]
    said = "; ".join("%s on %s (%s): %s" % (step["id"], step["where"], step["bucket"], step["why"]) for step in acted)
    return result_line({
        REPORT: "reported only: %s",
        RESET: "reset the GPUs, check them again and bring the node back: %s",
        REBOOT: "reboot the node, check its GPUs again and bring it back: %s",
        KEEP_OUT: "the node stays out of rotation: %s",
    }[action] % said)


def describe(node_plan):
    """The plan in one line, as the playbook shows it before it acts."""
    if node_plan["action"] in (NONE, REPORT):
        return "%s: %s" % (node_plan["action"], node_plan["why"])
    argv = ""
    if node_plan["action"] == RESET:
        argv = " with %s" % ", ".join("nvidia-smi -r -i %d" % ref["index"] for ref in node_plan["reset"])
    return result_line("%s%s; stops %s. %s" % (node_plan["action"], argv, "; ".join(node_plan["stops"]),
                                               node_plan["why"]))


def _logged(finding):
    """The key of a finding the kernel log counts (its count is of lines since boot), else None."""
    if finding.get("count") is None:
        return None
    return finding["id"], finding.get("gpu"), tuple(finding.get("gpus") or ())


def recovered(node_plan, before, after):
    """{recovered, why}: whether the node came back after its plan's reset or reboot, from the health the plan was
    made from (before) and the health read after the action (after).

    The kernel log keeps its lines until the node reboots, so after a reset the Xids logged before it are read
    again: a finding of the kernel log is new only where its count grew. After a reboot every finding is new."""
    what = "reboot" if node_plan["action"] == REBOOT else "GPU reset"
    if after.get("verdict") not in ("healthy", "degraded", "unhealthy"):
        return dict(recovered=False, why=result_line("the GPUs' health could not be read after the %s: %s"
                                                     % (what, after.get("summary") or after.get("verdict"))))
    listed = set(gpu["bus_id"] for gpu in after.get("gpus") or [])
    missing = [gpu for gpu in before.get("gpus") or [] if gpu["bus_id"] not in listed]
    if missing:
        return dict(recovered=False, why=result_line("nvidia-smi no longer lists %s after the %s" % (
            _where([dict(index=gpu["index"], bus_id=gpu["bus_id"]) for gpu in missing]), what)))
    earlier = {}
    if node_plan["action"] == RESET:
        earlier = dict((_logged(finding), finding["count"]) for finding in _every(before) if _logged(finding))
    unhealthy = [finding for finding in _every(after) if finding["severity"] == "unhealthy"]
    new = [finding for finding in unhealthy
           if _logged(finding) not in earlier or finding["count"] > earlier[_logged(finding)]]
    if new:
        said = ["%s on %s (%s)" % (finding["id"], _where(_refs_of(finding, after.get("gpus") or [])),
                                   finding["evidence"]) for finding in new]
        return dict(recovered=False, why=result_line("still unhealthy after the %s: %s" % (what, "; ".join(said))))
    if unhealthy:
        return dict(recovered=True, why=result_line(
            "no new unhealthy finding after the %s; the kernel log still holds what it logged before (%s), as it "
            "does until the node reboots" % (what, ", ".join(finding["id"] for finding in unhealthy))))
    return dict(recovered=True, why="no unhealthy finding after the %s" % what)


def report(mode, hosts, noted):
    """The remediation's part of the health report: {nodes: {host: {action, outcome, why, plan, steps}}, lines,
    problems}.

    mode: plan or apply; hosts: every node of the run, in order; noted: {host: {plan, outcome, why, steps}}, as
    each node noted it (plan None where its health was not read; outcome None where no action ran). In an apply
    run, a node with an action that noted no outcome was left alone when a node before it did not come back, else
    not reached. problems: one line per node whose outcome fails an apply run."""
    stopped_by = [host for host in hosts if (noted.get(host) or {}).get("outcome") == NOT_RECOVERED]
    nodes, lines, problems = {}, [], []
    for host in hosts:
        note = noted.get(host) or {}
        node_plan = note.get("plan")
        outcome, why = note.get("outcome"), note.get("why")
        if node_plan is None:
            outcome, why = "not planned", "the GPUs' health was not read"
        elif node_plan["action"] not in ACTING:
            outcome, why = "no action", node_plan["why"]
        elif mode == "plan":
            outcome, why = "planned", describe(node_plan)
        elif outcome is None and stopped_by:
            outcome, why = "left alone", "the remediation stopped before its turn: %s did not come back" % (
                ", ".join(stopped_by))
        elif outcome is None:
            outcome, why = "not reached", "nothing ran on it (unreachable, or a task before its turn failed)"
        nodes[host] = dict(action=node_plan["action"] if node_plan else NONE, outcome=outcome, why=why,
                           plan=node_plan, steps=note.get("steps") or [])
        lines.append(result_line("%s: %s: %s" % (host, outcome, why)))
        if mode == "apply" and outcome in FAILING:
            problems.append(lines[-1])
    return dict(nodes=nodes, lines=lines, problems=problems)
