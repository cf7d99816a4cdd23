#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_diagnosis
short_description: Why an SGLang server is not running, or why one of its launches failed, in one call
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Reads, and changes nothing, what M(blackwell.gpu_node.sglang_server) recorded of the server O(name) in
    O(state_dir) and gathers one report.
  - The server's state - under systemd the unit's active and sub state and how often systemd restarted it, else
    whether the recorded process still runs (pid, kernel start time and boot).
  - The log of the chosen launch (O(launch) - the latest, or one of the four before it, from the launch history
    C(<name>.launches.json)), from its recorded offset to the next launch's, classified as
    M(blackwell.gpu_node.wait_for_server) classifies it - the ready line, the cause line, the traceback and the
    diagnosis with its fix. Of a long log only the first 4 MiB and the last MiB are read.
  - Secrets are masked (C(********)) in everything taken from the log - the secrets recorded with the chosen
    launch (the values of its secret flags, its API key and its C(secret_env) values, kept in the launch history
    also after the server was stopped), those of the recorded state when there is one, and the values of
    SGLang's secret flags (C(--api-key), C(--admin-api-key)) and C(server_args) fields in any case. A launch
    recorded before the history kept its secrets is masked with the recorded state's and SGLang's only.
  - Every line taken from the log or the kernel's log is shown without terminal escape sequences and control
    characters and cut to 2 KiB, the number of bytes cut said at its end.
  - The kernel's view since that launch (O(kernel_log)) - the OOM killer's kills and NVIDIA Xid errors with
    their meaning and what to do, from C(/dev/kmsg) or C(dmesg); where neither can be read (no C(CAP_SYSLOG), a
    container without C(/dev/kmsg)) RV(kernel.problem) says so, starting with C(kernel log not readable).
  - Who holds GPU memory, from C(nvidia-smi --query-compute-apps) where C(nvidia-smi) is installed.
  - Whether a server that runs also serves (O(probe)) - a C(/health) 200 says only that SGLang's HTTP server
    answers (it has answered 200 after the scheduler behind it died), so the module asks C(GET /health) and then
    one real C(POST /generate) (the prompt C(The capital of France is), 8 new tokens at most, greedy), one request
    at a time and all of it within O(probe_timeout). The server serves when the generate comes back with generated
    text. A server whose process lives but whose C(/health) gives no answer, or which answers C(/health) but not
    the generate (it hangs, fails, or comes back without text), is reported as not serving, with what each
    request did and the cause its log shows. Only a server that runs is asked.
  - Whether the chosen launch started with the GPU memory it should have (RV(capacity)), judged as
    M(blackwell.gpu_node.wait_for_server) judges it when the server gets ready - its KV-cache tokens and free memory
    from its log, against the last good launch of the same command line on this node, and the processes that held
    GPU memory when it was launched; a degraded start is warned about and ends RV(verdict).
  - RV(verdict) puts it in one line. The playbook C(blackwell.gpu_node.diagnose) runs this on every node; the
    playbooks C(blackwell.gpu_node.validate) and C(blackwell.gpu_node.upgrade) use it to prove a server serves.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
    details: The module changes nothing, so in check mode it reads and asks the server (O(probe)) as it does
      otherwise; a generate of a few tokens changes nothing on the server either.
  diff_mode:
    support: none
  platform:
    support: full
options:
  name:
    description: The server instance, as given to M(blackwell.gpu_node.sglang_server).
    type: str
    default: sglang
  state_dir:
    description: Where M(blackwell.gpu_node.sglang_server) records the server.
  launch:
    description:
      - Which launch to look at - V(0) the latest, V(1) the one before it, and so on, as far back as the
        history goes (five launches).
      - A server recorded before the history existed has its latest launch only.
    type: int
    default: 0
  kernel_log:
    description: Read the kernel log for OOM kills and Xid errors since the launch.
    type: bool
    default: true
  gpu_processes:
    description: Ask C(nvidia-smi) who holds GPU memory.
    type: bool
    default: true
  probe:
    description:
      - How to tell whether a server that runs serves (see RV(serving)). Only a running server is asked.
      - V(generate) asks C(GET /health), then, when it answered 200, one C(POST /generate); the server serves when
        that comes back with generated text. On a node of rank 1 or more of a multi-node server (C(--node-rank)),
        which answers C(/health) only, C(/health) alone is asked.
      - V(health) asks C(GET /health) only; a 200 is taken for serving. It does not see a dead scheduler.
      - V(none) asks nothing; RV(serving) is then null.
    type: str
    choices: [generate, health, none]
    default: generate
  probe_timeout:
    description:
      - Seconds that O(probe) may take in all - connecting, sending and every read of each answer included
        (resolving a host name aside). C(/health) gets at most 10 seconds and half of it, the generate the rest.
      - A server that has not answered by then does not serve.
    type: float
    default: 30
  server_url:
    description:
      - The base URL O(probe) asks (C(/health) and C(/generate) are added to it), such as C(http://127.0.0.1:30000).
      - By default the address of the recorded command line (C(--host), C(--port); SGLang's C(127.0.0.1) and
        C(30000) where it gives none, and the loopback for a server bound to every address).
    type: str
  api_key:
    description:
      - The server's API key, sent as the bearer token of the generate. By default the C(--api-key) of the
        recorded command line.
      - Never returned, and masked (C(********)) wherever a text the module returns could hold it.
    type: str
  degraded_ratio:
    description:
      - A launch whose KV cache holds fewer tokens than this share of the last good launch of the same command line
        is degraded (see RV(capacity)), as for M(blackwell.gpu_node.wait_for_server); V(0) to V(1).
    type: float
    default: 0.5
"""

EXAMPLES = r"""
- name: Diagnose the server
  blackwell.gpu_node.sglang_diagnosis:
  register: diagnosis

- name: Say why
  ansible.builtin.debug:
    msg: "{{ diagnosis.verdict }}"

- name: Look at the launch before the latest one
  blackwell.gpu_node.sglang_diagnosis:
    launch: 1

- name: Prove that the server serves, as validate does
  blackwell.gpu_node.sglang_diagnosis:
    probe_timeout: 60
    server_url: http://127.0.0.1:30000
    api_key: "{{ sglang_server_api_key }}"
    kernel_log: false
    gpu_processes: false
  register: checked

- name: Fail unless a token came back
  ansible.builtin.assert:
    that: checked.serving.serving | default(false)
    fail_msg: "{{ checked.verdict }}"
"""

RETURN = r"""
verdict:
  description:
    - One line - whether the server runs and, where O(probe) asked it, serves, and when the chosen launch failed its
      cause line, diagnosis and fix, or the OOM kill or Xid that ended it. An OOM kill matched to the server by a
      name only is said to be of a process named like the server's, of which it is not known whether it was the
      server's.
    - A server that runs starts it with C(running and serving), C(running but not serving) (followed by what
      C(/health) said and what the generate did) or, where nothing was asked, C(running); one that does not with
      C(not running).
  returned: always
  type: str
  sample: "running but not serving (pid 4242): /health answered 200 in 0.0 s, but POST /generate gave no answer within
    30.0 s; the latest launch failed: [TP0] torch.AcceleratorError: CUDA error: device-side assert triggered
    [gpu_kernel_assert] Fix: ..."
serving:
  description: What O(probe) found; null where nothing was asked (a server that does not run, O(probe=none)).
  returned: always
  type: dict
  contains:
    serving:
      description: Whether the server serves - the generate came back with generated text (with O(probe=health),
        or on a node of rank 1 or more, C(/health) answered 200).
      type: bool
    url:
      description: The base URL asked.
      type: str
      sample: http://127.0.0.1:30000
    seconds:
      description: Seconds the probe took in all.
      type: float
    message:
      description: One line - what C(/health) said and what the generate did.
      type: str
      sample: "/health answered 200 in 0.0 s, but POST /generate answered HTTP 500: {\"object\": \"error\", ...}"
    health:
      description: C(GET /health) - C(status) (the HTTP status, null without an answer), C(seconds), C(reason)
        (null for a 200, else C(timeout), C(refused), C(connection) or C(http_status)) and C(problem) (what
        happened in words, null for a 200).
      type: dict
    generate:
      description:
        - C(POST /generate); null when it was not asked (C(/health) did not answer 200, O(probe=health), a node of
          rank 1 or more).
        - C(serving), C(status) (null without an answer), C(seconds), C(reason) (null when it served, else
          C(timeout), C(refused), C(connection), C(http_status) or C(empty_text)), C(problem) (what happened in
          words), C(text) (the generated text, masked and cut to 300 bytes) and C(tokens) (the completion tokens
          SGLang counted, null where it did not say).
      type: dict
state:
  description: The server now.
  returned: always
  type: dict
  contains:
    recorded:
      description: Whether a server is recorded in O(state_dir).
      type: bool
    running:
      description: Whether it runs (under systemd, the unit is active with a main pid).
      type: bool
    manager:
      description: V(systemd) or V(module); null when none is recorded.
      type: str
    pid:
      description: Its main pid (the unit's under systemd), null when none is recorded.
      type: int
    unit:
      description: The systemd unit, its C(active_state), C(sub_state) and C(restarts) (NRestarts); under systemd only.
      type: str
    active_state:
      description: The unit's ActiveState; under systemd only.
      type: str
    sub_state:
      description: The unit's SubState; under systemd only.
      type: str
    restarts:
      description: How often systemd restarted the server (NRestarts); under systemd only.
      type: int
    problem:
      description: Why the state could not be told (a state file that cannot be trusted); absent otherwise.
      type: str
launches:
  description: How many launches are recorded.
  returned: always
  type: int
launch:
  description: The launch looked at, null when none is recorded.
  returned: always
  type: dict
  contains:
    back:
      description: O(launch).
      type: int
    pid:
      description: Its main pid.
      type: int
    start_time:
      description: The process's start, in clock ticks since boot.
      type: int
    started_at:
      description: When it was launched (seconds since the epoch).
      type: float
    log_path:
      description: Its log.
      type: str
    offset:
      description: Where its lines begin in the log.
      type: int
    end:
      description: Where they end (the next launch's offset), null for the latest launch.
      type: int
log:
  description: The launch's log, classified; null when no launch is recorded.
  returned: always
  type: dict
  contains:
    ready_line:
      description: SGLang's ready line when it was logged, else null.
      type: str
    failure:
      description: Null when the log shows no failure; else C(cause) (the exception or fatal line, with the ranks),
        C(ranks), C(traceback) (its first and last 100 lines when it is longer) and C(diagnosis) (C(id),
        C(component), C(cause), C(fix), C(exception), C(raised_in) as M(blackwell.gpu_node.wait_for_server) returns
        them; a failure no known cause matches gets the generic C(not_in_catalogue) diagnosis of its component).
      type: dict
    last_lines:
      description: The launch's last 40 non-empty lines.
      type: list
      elements: str
    left_out_bytes:
      description: Bytes between the first 4 MiB and the last MiB that were not read (0 when none).
      type: int
    problem:
      description: Why the log could not be read, or that it was rotated since the launch; null otherwise.
      type: str
kernel:
  description: The kernel's view since the launch; null with O(kernel_log=false).
  returned: always
  type: dict
  contains:
    readable:
      description: Whether the kernel log could be read and dated against the launch.
      type: bool
    source:
      description: C(/dev/kmsg) or C(dmesg).
      type: str
    problem:
      description: Why not, starting with C(kernel log not readable), or the launch was in an earlier boot.
      type: str
    since:
      description: The launch's start, in seconds since boot.
      type: float
    oom_kills:
      description:
        - The OOM killer's kills since the launch (the first 50), each with C(pid), C(name), C(scope) (V(system)
          or V(memory cgroup)), C(anon_rss_kb), C(time), C(line), C(server) and C(matched_by).
        - "Only the kernel's own messages count - C(Out of memory: Killed process), C(Memory cgroup out of memory:
          Killed process) or an older kernel's C(Killed process) at the start of the message."
        - C(server) is V(true) only when the pid is the launch's, or one of its process group's while it runs.
        - C(matched_by) says how the event was matched to the server - V(pid); V(sglang process title) or
          V(process name) (the server's interpreter's name) when only a name fits, which any user's process can
          have, so C(server) is then V(false) and RV(verdict) does not conclude that the server was killed; null
          when nothing matched.
      type: list
      elements: dict
    xids:
      description:
        - NVIDIA Xid errors since the launch (the first 50), each with C(xid), C(device), C(pid), C(name),
          C(detail), C(meaning) and C(action) (null for an Xid outside the common ones), C(time), C(line),
          C(server) and C(matched_by), as for RV(kernel.oom_kills).
        - "Only a message that starts with the driver's C(NVRM: Xid () counts."
      type: list
      elements: dict
    oom_kill_count:
      description: How many OOM kills, also past the first 50.
      type: int
    xid_count:
      description: How many Xid lines, also past the first 50.
      type: int
capacity:
  description:
    - The GPU memory the chosen launch started with, judged as M(blackwell.gpu_node.wait_for_server) returns it in
      its RV(blackwell.gpu_node.wait_for_server#module:capacity) (C(kv_tokens), C(avail_mem_gb), C(last_good),
      C(last_good_is_this_launch), C(share), C(degraded_ratio), C(holders), C(below_last_good), C(beside_holders),
      C(degraded), C(message)); the holders are those recorded when that launch was started.
    - Null when no launch is recorded, or its log cannot be read.
  returned: always
  type: dict
  sample: {"kv_tokens": 405968, "last_good": {"kv_tokens": 20542816}, "share": 0.0198, "degraded": true}
gpu_processes:
  description: Processes holding GPU memory (C(pid), C(name), C(used_memory_mib), C(gpu_uuid)); null where
    C(nvidia-smi) is missing or fails (RV(gpu_processes_problem) says why) or with O(gpu_processes=false).
  returned: always
  type: list
  elements: dict
gpu_processes_problem:
  description: Why RV(gpu_processes) is null; null otherwise.
  returned: always
  type: str
problem:
  description: Why there is nothing to diagnose - no server recorded, or a state file that cannot be trusted.
  returned: when there is no launch to look at, or the state file cannot be trusted
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.kernel_log import kernel_events, read_kernel_log
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogPathError
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.capacity import (
    DEGRADED_RATIO,
    judge_launch,
    ratio_problem,
    startup_memory,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnosis import (
    NoSuchLaunch,
    classify_launch,
    gpu_processes,
    launch_mask,
    launch_window,
    read_launch_log,
    verdict,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import boot_id, group_members
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import UNIT_PROPERTIES, unit_status
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import (
    LAUNCH_FIELDS,
    BadState,
    Instance,
    shown_launch,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import name_problems
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.serving import (
    flag_value,
    node_rank,
    server_url,
    serves,
    url_problem,
)


def server_state(module, instance, recorded):
    if recorded is None:
        return {"recorded": False, "running": False, "manager": None, "pid": None}
    state = {"recorded": True, "manager": recorded.get("manager", "module"), "pid": recorded["pid"]}
    if state["manager"] != "systemd":
        try:
            state["running"] = instance.running(recorded)
        except BadState as exc:
            state.update(running=False, problem=str(exc))
        return state
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        state.update(running=False, problem="the server is recorded under systemd, but systemctl is not on this host")
        return state
    _rc, out, _err = module.run_command([systemctl, "show", "--property=" + ",".join(UNIT_PROPERTIES), recorded["unit"]])
    unit = unit_status(out)
    state.update(unit=recorded["unit"], running=unit["running"], pid=unit["pid"] or recorded["pid"],
                 active_state=unit["active_state"], sub_state=unit["sub_state"], restarts=unit["restarts"])
    return state


def kernel_view(launch, state, recorded):
    lines, source, problem = read_kernel_log()
    if lines is None:
        return {"readable": False, "source": None, "problem": problem}
    if launch.get("boot_id") and launch["boot_id"] != boot_id():
        return {"readable": False, "source": source,
                "problem": "the launch was in an earlier boot: the kernel log of this boot does not cover it "
                           "(journalctl -k -b -1 shows the previous boot's, where the journal is kept)"}
    since = launch["start_time"] / float(os.sysconf("SC_CLK_TCK"))
    pids = [launch["pid"]] + (group_members(state["pid"]) if state.get("running") else [])
    # The kernel names a process by its executable's name (comm): the interpreter the server runs from.
    names = [os.path.basename(recorded["argv"][0])] if recorded else ["python", "python3"]
    view = {"readable": True, "source": source, "problem": None, "since": since}
    view.update(kernel_events(lines, since=since, server_pids=pids, server_names=names))
    return view


def option_problems(params):
    problems = name_problems(params)
    if params["launch"] < 0:
        problems.append("launch=%d: give 0 for the latest launch, 1 for the one before it, and so on" % params["launch"])
    if params["probe"] != "none" and not params["probe_timeout"] > 0:
        problems.append("probe_timeout=%s: give the seconds the probe may take (more than 0), or probe=none"
                        % params["probe_timeout"])
    if params["server_url"] is not None and url_problem(params["server_url"]):
        problems.append("server_url: " + url_problem(params["server_url"]))
    if params["api_key"] and control_character_problem(params["api_key"], "api_key"):
        problems.append("api_key holds a control character, which would end the request's header: give the key")
    if ratio_problem(params["degraded_ratio"]):
        problems.append(ratio_problem(params["degraded_ratio"]))
    return problems


def serving(params, recorded, launches, state):
    """What the probe finds of a server that runs (serving.serves()), or None where nothing is asked."""
    if params["probe"] == "none" or recorded is None or not state.get("running"):
        return None
    argv = recorded["argv"]
    rank = node_rank(argv)
    api_key = params["api_key"] or flag_value(argv, "--api-key")
    # The launch's secrets are masked in what the server answers, as in its log.
    found = serves(params["server_url"] or server_url(argv), params["probe_timeout"], api_key,
                   generate_text=params["probe"] == "generate" and rank == 0,
                   mask=launch_mask(launches[0] if launches else {}, recorded))
    if params["probe"] == "generate" and rank:
        found["message"] += ("; node %d of a multi-node server answers /health only (node 0 serves generate)"
                             % rank)
    return found


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", default="sglang"),
            state_dir=dict(type="path", default=STATE_DIR),
            launch=dict(type="int", default=0),
            kernel_log=dict(type="bool", default=True),
            gpu_processes=dict(type="bool", default=True),
            probe=dict(type="str", choices=["generate", "health", "none"], default="generate"),
            probe_timeout=dict(type="float", default=30),
            server_url=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            degraded_ratio=dict(type="float", default=DEGRADED_RATIO),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = option_problems(params)
    if problems:
        module.fail_json(msg="Nothing was read: " + "; ".join(problems), changed=False)

    instance = Instance(params["state_dir"], params["name"])
    report = dict(changed=False, launch=None, log=None, kernel=None, gpu_processes=None, gpu_processes_problem=None,
                  serving=None, capacity=None)
    try:
        recorded = instance.load()
        launches = instance.launches()
    except BadState as exc:
        recorded, report["problem"] = None, str(exc)
        launches = []
    except InvalidOption as exc:
        # A state_dir another user could change: neither its state nor the log paths its launches name are read.
        module.fail_json(msg="Nothing was read: %s" % exc, **report)
    report["state"] = server_state(module, instance, recorded)
    if not launches and recorded:
        # A server started before the launch history was kept: its state has the latest launch.
        launches = [dict((key, recorded.get(key)) for key in LAUNCH_FIELDS)]
    report["launches"] = len(launches)
    report["serving"] = serving(params, recorded, launches, report["state"])
    if params["gpu_processes"]:
        if module.get_bin_path("nvidia-smi"):
            report["gpu_processes"], report["gpu_processes_problem"] = gpu_processes()
        else:
            report["gpu_processes_problem"] = "nvidia-smi is not on this host"
    try:
        launch, end = launch_window(launches, params["launch"])
    except NoSuchLaunch as exc:
        if params["launch"] or recorded:
            module.fail_json(msg=str(exc), **report)
        report.setdefault("problem", "no server %s is recorded in state_dir=%s" % (params["name"], params["state_dir"]))
        report["verdict"] = verdict(report)
        module.exit_json(**report)

    report["launch"] = dict(shown_launch(launch), back=params["launch"], end=end)
    current = (recorded is not None and report["state"]["running"] and params["launch"] == 0)
    try:
        head, tail, left_out, note = read_launch_log(launch["log_path"], launch["offset"], end)
    except (OSError, LogPathError) as exc:
        report["log"] = {"ready_line": None, "failure": None, "last_lines": [], "left_out_bytes": 0,
                         "problem": "log_path %s cannot be read: %s" % (launch["log_path"], getattr(exc, "strerror", None) or exc)}
    else:
        mask = launch_mask(launch, recorded)
        report["log"] = classify_launch(head, tail, final=not current, mask=mask)
        report["log"].update(left_out_bytes=left_out, problem=note)
        # SGLang logs its memory before it is ready: in the head of any launch's log.
        report["capacity"] = judge_launch(instance, launch, startup_memory(head), params["degraded_ratio"], mask)
        if report["capacity"]["degraded"]:
            module.warn(report["capacity"]["message"])
    if params["kernel_log"]:
        report["kernel"] = kernel_view(launch, report["state"], recorded)
    report["verdict"] = verdict(report)
    module.exit_json(**report)


if __name__ == "__main__":
    main()
