#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: wait_for_server
short_description: Wait until an SGLang server is ready, and fail within a second when it cannot be
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Follows the server's log on the target from a byte O(offset) (the one the
    M(blackwell.gpu_node.sglang_server) module records at launch, so lines of earlier runs never count)
    and returns as soon as SGLang logs its ready line, optionally once O(health_url) also answers HTTP 200.
  - Fails as soon as the log shows a Python traceback (reported whole, from the rank that raised it,
    without other ranks' lines), one of SGLang's fatal lines (C(Scheduler hit an exception),
    C(Received sigquit from a child process), C(Initialization failed)), or a CUDA or NCCL fatal line;
    as soon as the watched process is gone, with or without a traceback; or at O(timeout).
  - Every failure says the cause in one line, the elapsed time, the traceback or the last log lines, and,
    when the cause is a known one, a diagnosis with the fix (cuDNN check, CUDA 12 library on a CUDA 13 stack,
    torch/sgl-kernel ABI mismatch, CUDA out of memory, NCCL, port in use, model path, version checks).
  - Harmless lines that contain words like C(error), C(failed) or C(exception) (warnings, deprecation notes,
    C(Failed to import ... falling back)) never fail it.
  - Each poll reads only the bytes added since the last one, so a log of many GB costs nothing extra. The log
    may not exist yet, may be truncated in place (copytruncate) or replaced (rotation), and may hold partial
    lines, bytes that are not UTF-8 and very long lines (kept up to 64 KiB each). A bare carriage return ends a
    line too, so each update of a progress bar is a line of its own.
  - Only a regular file is followed as O(log_path). A FIFO, a device, a socket or a directory fails the task at
    once with a message naming O(log_path), and so does a log that is later replaced by one of them. A path that
    does not exist yet is waited for.
  - Each poll reads at most 4 MiB or 20000 lines (a backlog is read on without sleeping), so O(timeout) holds
    within about one O(poll_interval), one such read and one health probe (at most 2 seconds), also when the
    log grows faster than it can be read.
  - Secrets never reach the result. The values of the C(api_key) and C(admin_api_key) fields of SGLang's
    start-up C(server_args=ServerArgs(...)) line (and of the fields of O(secret_flags)), and the values of
    O(mask), are replaced by C(********) in RV(last_lines), RV(ready_line), RV(failure) and the message.
  - Every text taken from the log is returned without terminal escape sequences and control characters, each
    line cut to 2 KiB (the number of bytes cut said at its end), so that no log line can make a result of
    megabytes or act on the terminal that shows it. A traceback of more than 200 lines is returned as its first
    100 and its last 100 lines, with the number left out between them.
  - With O(name), a server that got ready is also judged on the GPU memory it started with (RV(capacity)). SGLang
    sizes its KV cache from the GPU memory that is free when it starts and becomes ready with whatever it got, so
    beside another process that holds most of a GPU it serves with a fraction of its capacity and says nothing else.
    The module reads what SGLang logged before it was ready - the pool the scheduler runs with
    (C(max_total_num_tokens=N), else the tokens of each rank's first C(KV Cache is allocated) line) and the free
    memory when the weights began to load (C(Load weight begin. avail mem=X GB)) - and the launch's entry in
    C(<name>.launches.json) in O(state_dir), where M(blackwell.gpu_node.sglang_server) records the digest of its
    command line and the processes that held GPU memory when it launched the server.
  - The start is degraded when the KV cache holds fewer tokens than O(degraded_ratio) times those of the last good
    launch of the same command line on this node, or when the server was launched beside a process that held GPU
    memory (also at the first launch, which has nothing to compare with). The message names every such process
    (pid, user, command line, MiB) and both token counts. O(degraded_start=warn) warns, O(degraded_start=fail)
    fails the task; the server is left running either way.
  - A start that is not degraded, whose launch is recorded and whose log says its pool, becomes the last good
    launch of its command line, kept per digest of the command line in C(<name>.capacity.json) in O(state_dir)
    (root's, C(0600), the last eight command lines), which is read and written as the other state files are.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
    details: In check mode the module does not wait and returns RV(ready=null).
  diff_mode:
    support: none
  platform:
    support: N/A
options:
  log_path:
    description: The server's log file on the target.
    type: path
    required: true
  offset:
    description:
      - Byte offset in O(log_path) to start reading from. Earlier bytes are never read.
      - If the file is shorter than this (it was truncated or replaced since), reading starts at 0.
    type: int
    default: 0
  pid:
    description:
      - Process to watch. When it is gone (or a zombie) before the server is ready, the module fails,
        with the traceback if the log has one. A zombie, one its parent has not collected yet, also tells how it
        ended (the signal that killed it, or its exit code), and the failure says so. Mutually exclusive with
        O(pid_path).
      - Must be 1 or more (0 and negative numbers name groups of processes).
    type: int
  pid_path:
    description:
      - File holding the pid to watch, as the M(blackwell.gpu_node.sglang_server) module writes it.
      - A file that does not hold a pid of 1 or more fails the task.
    type: path
  timeout:
    description:
      - Seconds to wait for the server to be ready. Loading a large model's weights takes minutes.
    type: float
    default: 1800
  poll_interval:
    description: Seconds between two reads of the log (and process and health checks).
    type: float
    default: 0.1
  ready_pattern:
    description: Regular expression of the ready line, searched in each line's message.
    type: str
    default: The server is fired up and ready to roll!
  fatal_patterns:
    description: Further regular expressions; a line matching one fails the wait.
    type: list
    elements: str
    default: []
  diagnoses:
    description:
      - Further known causes, tried before the built-in catalogue. The first whose C(pattern) occurs in the
        failure's traceback or last lines is reported.
    type: list
    elements: dict
    default: []
    suboptions:
      id:
        description: Short name of the cause.
        type: str
        required: true
      pattern:
        description: Regular expression.
        type: str
        required: true
      cause:
        description: What went wrong, in one sentence.
        type: str
        required: true
      fix:
        description: What to do about it.
        type: str
        required: true
      component:
        description:
          - What fails when this cause occurs (C(NVIDIA driver), C(NCCL)), reported as the diagnosis' C(component).
          - Without it, the component is the one the failure's traceback or lines point to, else C(SGLang).
        type: str
  require_ready_line:
    description:
      - Wait for the ready line. Set to V(false) on nodes of rank 1 and above of a multi-node server, which
        never log it; they are then ready when O(health_url) answers 200, which is required then.
    type: bool
    default: true
  health_url:
    description:
      - After the ready line, also require HTTP 200 from this URL (SGLang's C(/health) answers 503 while
        starting). Checked on each poll until O(timeout), each probe bounded by a timeout of 2 seconds.
      - An C(http://) or C(https://) URL with a host. When it never answers, the failure says why (for
        instance that its host cannot be resolved, or that the connection is refused).
    type: str
  last_lines:
    description:
      - How many of the last log lines to return (masked, see O(mask)). V(0) returns none; the traceback of
        a failure is returned all the same.
    type: int
    default: 40
  mask:
    description:
      - Values to replace by C(********) wherever they would appear in the result (log lines, ready line,
        failure and message), for instance the server's API key or a Hugging Face token.
      - The C(api_key) and C(admin_api_key) fields of SGLang's C(server_args) line are masked without being
        given here.
    type: list
    elements: str
    default: []
  secret_flags:
    description:
      - Further SGLang flags whose values are secrets, besides C(--api-key) and C(--admin-api-key). The
        field SGLang logs for each in its C(server_args) line (C(--hf-token) logs C(hf_token='...')) is masked.
    type: list
    elements: str
    default: []
  name:
    description:
      - The server instance, as given to M(blackwell.gpu_node.sglang_server). Given, a server that got ready is judged
        on the GPU memory it started with (see RV(capacity)); unset, it is not.
      - 1 to 64 letters, digits, V(_), V(.) or V(-), starting with a letter or digit, without V(..).
    type: str
  state_dir:
    description:
      - Where M(blackwell.gpu_node.sglang_server) records the server O(name); used with O(name) only.
      - Root's at every level and writable by root alone, or refused.
  degraded_start:
    description:
      - What a degraded start (see RV(capacity)) does - V(warn) warns and the task succeeds, V(fail) fails the task
        (RV(ready) stays true, as the server serves, with less memory). The server is left running either way.
    type: str
    choices: [warn, fail]
    default: warn
  degraded_ratio:
    description:
      - A start whose KV cache holds fewer tokens than this share of the last good launch of the same command line
        on this node is degraded; from V(0) (never by the share, only a process that held GPU memory at launch
        makes a start degraded) to V(1).
    type: float
    default: 0.5
notes:
  - Runs on the target, next to the log. Use it after M(blackwell.gpu_node.sglang_server), passing its
    C(offset) and C(pid).
  - M(ansible.builtin.wait_for) with C(search_regex) re-reads the whole file on every poll, matches ready lines
    of earlier runs and cannot fail on an error, so a crashed server costs its full timeout.
seealso:
  - module: ansible.builtin.wait_for
"""

EXAMPLES = r"""
- name: Wait for the server launched by sglang_server
  blackwell.gpu_node.wait_for_server:
    log_path: /var/log/sglang/server.log
    offset: "{{ launch.offset }}"
    pid: "{{ launch.pid }}"
    health_url: http://127.0.0.1:30000/health
    timeout: 3600
    mask:
      - "{{ sglang_api_key }}"

- name: Wait on a node of rank >= 1, which never logs the ready line
  blackwell.gpu_node.wait_for_server:
    log_path: /var/log/sglang/server.log
    offset: "{{ launch.offset }}"
    pid_path: /run/sglang/server.pid
    require_ready_line: false
    health_url: http://127.0.0.1:30000/health

- name: Wait, and fail a start beside another process that holds GPU memory
  blackwell.gpu_node.wait_for_server:
    log_path: /var/log/sglang/server.log
    offset: "{{ launch.offset }}"
    pid: "{{ launch.pid }}"
    name: sglang
    degraded_start: fail

- name: Teach it a cause of your own
  blackwell.gpu_node.wait_for_server:
    log_path: /var/log/sglang/server.log
    fatal_patterns:
      - "Xid \\d+"
    diagnoses:
      - id: xid
        pattern: "Xid \\d+"
        cause: The GPU reported an Xid error.
        fix: Check `dmesg` for the Xid code and drain the node.
        component: NVIDIA driver
"""

RETURN = r"""
ready:
  description: True when the server is ready; false on failure; null in check mode.
  returned: always
  type: bool
elapsed:
  description: Seconds spent waiting.
  returned: unless check mode
  type: float
  sample: 0.12
offset:
  description: Byte offset reached in the log file (the current one, after a rotation).
  returned: unless check mode
  type: int
ready_line:
  description: The ready line as logged (masked, see O(mask)); null when it was not seen.
  returned: unless check mode
  type: str
  sample: "[2026-11-30 10:00:00] The server is fired up and ready to roll!"
health_status:
  description: Last HTTP status of O(health_url); null when not asked or not answering.
  returned: unless check mode
  type: int
failure:
  description: Why the server is not ready; null when it is ready.
  returned: unless check mode
  type: dict
  contains:
    cause:
      description: The cause in one line, led by the rank that raised it (masked, see O(mask)).
      type: str
      sample: "[TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    ranks:
      description: The rank prefix of the lines (C(TP3), C(DP0 TP3)); empty for the main process.
      type: str
    traceback:
      description: The traceback, that rank's lines only (masked, see O(mask); its first and last 100 lines when
        it is longer); empty when there was none.
      type: str
    diagnosis:
      description:
        - The cause and its fix. The first entry of O(diagnoses) and the built-in catalogue that matches; for a process
          that ended without a traceback or a line they know, how it ended (id C(killed_by_signal),
          C(exited_without_traceback), or C(ended_without_traceback) where its parent collected it before it was
          read); for any other failure none of them knows, a generic diagnosis (id C(not_in_catalogue)) from the
          component it came from.
        - Lines that start-ups which go well log too (C(Failed to import deep_gemm, falling back to triton kernels),
          the C(server_args=ServerArgs(...)) line, SGLang's C(Init torch distributed begin.)) choose neither the
          diagnosis nor the component.
      type: dict
      contains:
        id:
          description: Short name of the cause; C(not_in_catalogue) for the generic diagnosis; C(killed_by_signal),
            C(exited_without_traceback) or C(ended_without_traceback) for how the process ended.
          type: str
          sample: cuda_out_of_memory
        component:
          description:
            - What failed, always named. The catalogue entry's own (C(NCCL), C(Mooncake transfer engine)), for a port
              in use the port and which of the server's ports it is, else the package of the innermost traceback
              frame (C(SGLang), C(sgl-kernel), C(flashinfer), C(DeepGEMM), C(PyTorch), ...) or the first one the log
              names, else C(SGLang).
          type: str
          sample: "port 29500, the torch.distributed port (sglang_server_dist_init_port, or --nccl-port in sglang_server_extra_args)"
        cause:
          description: What went wrong.
          type: str
        fix:
          description: What to do, in the role's variables where one applies.
          type: str
        exception:
          description: The type of the traceback's last exception (C(TypeError), C(torch.OutOfMemoryError)); null without one.
          type: str
        raised_in:
          description: The module of the innermost traceback frame under a known package
            (C(sglang/srt/model_executor/cuda_graph_runner.py)); null when there is none.
          type: str
last_lines:
  description: The last lines read from the log (at most O(last_lines)), masked (see O(mask)).
  returned: unless check mode
  type: list
  elements: str
capacity:
  description: The GPU memory the server started with, judged against the last good launch of its command line.
  returned: when the server got ready and O(name) is given
  type: dict
  contains:
    kv_tokens:
      description: The tokens of the KV cache SGLang runs with; null when the log does not say.
      type: int
      sample: 405968
    avail_mem_gb:
      description: The least free GPU memory a rank had when its weights began to load, in GB as SGLang logs it.
      type: float
      sample: 1.55
    last_good:
      description:
        - The last good launch of the same command line on this node - C(kv_tokens), C(avail_mem_gb), C(pid),
          C(start_time), C(started_at), C(recorded_at) - before this one was judged; null when there is none.
      type: dict
    last_good_is_this_launch:
      description: Whether RV(capacity.last_good) is this launch itself.
      type: bool
    share:
      description: RV(capacity.kv_tokens) over the last good launch's, rounded to 4 digits; null without both.
      type: float
      sample: 0.0198
    degraded_ratio:
      description: O(degraded_ratio).
      type: float
    holders:
      description:
        - The processes that held GPU memory when M(blackwell.gpu_node.sglang_server) launched the server, each
          with C(pid), C(user), C(command) (its command line from C(/proc), SGLang's secret flags, O(secret_flags)
          and the values of O(mask) masked, cut to 200 bytes; nvidia-smi's process name where C(/proc) does not show
          it), C(used_memory_mib) and C(gpu_uuid).
        - Empty when none did; null when it is not known (no C(nvidia-smi), or a launch not recorded).
      type: list
      elements: dict
    below_last_good:
      description: Whether RV(capacity.share) is below O(degraded_ratio).
      type: bool
    beside_holders:
      description: Whether a process held GPU memory when the server was launched.
      type: bool
    degraded:
      description: RV(capacity.below_last_good) or RV(capacity.beside_holders).
      type: bool
    message:
      description: What the warning (or the failure) says - both token counts, every holder, the free memory and what
        to do; null when the start is not degraded.
      type: str
    recorded_as_good:
      description: Whether this launch became the last good launch of its command line.
      type: bool
"""

import functools
import re
from urllib.parse import urlparse

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT, STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import read_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogFollower
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readiness import Waiter, probe_failure
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import SECRET_FLAGS, masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.capacity import (
    DEGRADED_RATIO,
    DEGRADED_START,
    StartupMemory,
    gate,
    ratio_problem,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import BadState, Instance
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import name_problems

PROBE_TIMEOUT = 2
PID_FILE_LIMIT = 64
FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*")


def health_probe(url):
    host = urlparse(url).hostname

    def probe():
        try:
            return open_url(url, timeout=PROBE_TIMEOUT, validate_certs=False).getcode(), None
        except Exception as exc:  # 503 (HTTPError carries a code), refused, unresolvable, timeout
            code = getattr(exc, "code", None)
            return (code, None) if isinstance(code, int) else (None, "health_url %s: %s" % (url, probe_failure(exc, host)))

    return probe


def read_pid(module, path):
    # A pid file is a few bytes: read as a regular file, no link followed, no blocking on a FIFO, bounded.
    try:
        found = read_regular(path, PID_FILE_LIMIT)
        if found is None:
            raise IOError("No such file or directory")
        pid = int(found["data"].decode("ascii").strip())
    except (IOError, OSError, ValueError, InvalidOption) as exc:
        module.fail_json(msg="pid_path=%s does not hold a pid: %s" % (path, exc), ready=False)
    if pid <= 0:
        # os.kill(0) and os.kill(-1) signal groups of processes: the watch would never see a death.
        module.fail_json(msg="pid_path=%s holds %d, not a pid (a pid is 1 or more): point pid_path at the "
                             "server's pid file" % (path, pid), ready=False)
    return pid


def check_options(module):
    params = module.params
    for name in ("timeout", "poll_interval"):
        if params[name] <= 0:
            module.fail_json(msg="%s must be a positive number of seconds, not %s" % (name, params[name]))
    if params["offset"] < 0:
        module.fail_json(msg="offset must be 0 or more, not %s" % params["offset"])
    if params["pid"] is not None and params["pid"] <= 0:
        module.fail_json(msg="pid must be a process id (1 or more), not %s: 0 and negative numbers name groups "
                             "of processes, whose death would never be seen" % params["pid"])
    if params["last_lines"] < 0:
        module.fail_json(msg="last_lines must be 0 (return no log lines) or more, not %s" % params["last_lines"])
    url = params["health_url"]
    if url is not None:
        parts = urlparse(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            module.fail_json(msg="health_url must be an http:// or https:// URL with a host, "
                                 "such as http://127.0.0.1:%d/health, not %r" % (SERVER_PORT, url))
    for flag in params["secret_flags"]:
        if not FLAG.fullmatch(flag):
            module.fail_json(msg="secret_flags: %r is not a flag such as --hf-token" % flag)
    problems = [ratio_problem(params["degraded_ratio"])]
    if params["name"] is not None:
        problems += name_problems(params)
    if any(problems):
        module.fail_json(msg="; ".join(problem for problem in problems if problem))
    patterns = [("ready_pattern", params["ready_pattern"])]
    patterns += [("fatal_patterns", pattern) for pattern in params["fatal_patterns"]]
    patterns += [("diagnoses[%s].pattern" % entry["id"], entry["pattern"]) for entry in params["diagnoses"]]
    for option, pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            module.fail_json(msg="%s: %r is not a valid regular expression: %s" % (option, pattern, exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log_path=dict(type="path", required=True),
            offset=dict(type="int", default=0),
            pid=dict(type="int"),
            pid_path=dict(type="path"),
            timeout=dict(type="float", default=1800),
            poll_interval=dict(type="float", default=0.1),
            ready_pattern=dict(type="str", default="The server is fired up and ready to roll!"),
            fatal_patterns=dict(type="list", elements="str", default=[]),
            diagnoses=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(
                    id=dict(type="str", required=True),
                    pattern=dict(type="str", required=True),
                    cause=dict(type="str", required=True),
                    fix=dict(type="str", required=True),
                    component=dict(type="str"),
                ),
            ),
            require_ready_line=dict(type="bool", default=True),
            health_url=dict(type="str"),
            last_lines=dict(type="int", default=40),
            mask=dict(type="list", elements="str", default=[], no_log=True),
            secret_flags=dict(type="list", elements="str", default=[], no_log=False),
            name=dict(type="str"),
            state_dir=dict(type="path", default=STATE_DIR),
            degraded_start=dict(type="str", choices=list(DEGRADED_START), default="warn"),
            degraded_ratio=dict(type="float", default=DEGRADED_RATIO),
        ),
        mutually_exclusive=[("pid", "pid_path")],
        required_if=[("require_ready_line", False, ("health_url",))],
        supports_check_mode=True,
    )
    check_options(module)
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, ready=None, msg="check mode: not waiting for %s" % params["log_path"])

    pid = read_pid(module, params["pid_path"]) if params["pid_path"] else params["pid"]
    mask = functools.partial(masked_text, values=params["mask"], secret_flags=SECRET_FLAGS + tuple(params["secret_flags"]))
    memory = StartupMemory()
    waiter = Waiter(
        LogFollower(params["log_path"], params["offset"]),
        StartupClassifier(params["ready_pattern"], params["fatal_patterns"]),
        timeout=params["timeout"],
        poll_interval=params["poll_interval"],
        pid=pid,
        health_probe=health_probe(params["health_url"]) if params["health_url"] else None,
        require_ready_line=params["require_ready_line"],
        catalogue=tuple(params["diagnoses"]) + DIAGNOSES,
        last_lines=params["last_lines"],
        mask=mask,
        memory=memory,
    )
    result = waiter.run()
    if not result["ready"]:
        module.fail_json(**result)
    if params["name"] is not None:
        judge_start(module, pid, memory.summary(), mask, result)
    module.exit_json(changed=False, **result)


def judge_start(module, pid, memory, mask, result):
    """Judge the GPU memory the ready server started with (result's capacity): a warning for a degraded start, or
    with degraded_start=fail a failure."""
    params = module.params
    instance = Instance(params["state_dir"], params["name"])
    try:
        capacity = gate(instance, instance.launch_of(pid, params["offset"]) if pid else None, memory,
                        params["degraded_ratio"], mask)
    except (BadState, InvalidOption, OSError) as exc:
        module.fail_json(**dict(result, msg="The server is ready, but the GPU memory it started with could not be "
                                            "judged: state_dir=%s: %s" % (params["state_dir"], exc)))
    result["capacity"] = capacity
    if not capacity["degraded"]:
        return
    if params["degraded_start"] == "fail":
        module.fail_json(**dict(result, msg="%s The server was left running; degraded_start=fail (the role's "
                                            "sglang_server_degraded_start) makes this a failure." % capacity["message"]))
    module.warn(capacity["message"])


if __name__ == "__main__":
    main()
