#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_server
short_description: Launch, stop, restart and report an SGLang server, idempotently
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Runs C(python -m sglang.launch_server) or C(sglang serve) (O(entrypoint)) from a virtualenv, detached in its own
    session and process group, so that it outlives the Ansible connection, with stdout and stderr appended to
    O(log_path).
  - Records the server in O(state_dir) (C(<name>.pid) and C(<name>.json) with argv, environment digest, log
    offset at launch, the process's kernel start time and the boot id). A later run recognises its own server by
    pid B(and) start time B(and) boot, so a reused pid is never taken for it. A process that has the recorded pid
    and start time but another owner, or a command line that is neither the recorded one nor retitled by SGLang
    (C(sglang::...)), is never signalled; the task fails naming the state file. So does a state file that is not
    valid JSON, lacks a field, or names pid 1 or below.
  - Each launch is also put first in C(<name>.launches.json) in O(state_dir) (pid, kernel start time, log offset,
    log path, time and boot of the launch), which keeps the last five and stays when the server is stopped or a
    dead one is cleaned up, so that M(blackwell.gpu_node.sglang_diagnosis) can classify the log of an earlier
    launch. With each launch it keeps what masks that launch's log (O(secret_flags), the values of the secret
    flags, O(api_key) and the values of O(secret_env)), readable by root only (C(0600) in O(state_dir)).
  - With each launch it also records, in the state and the launch history, the digest of the command line and the
    processes that hold GPU memory just before it starts the server (from C(nvidia-smi --query-compute-apps), with
    their user and command line from C(/proc); none where C(nvidia-smi) is missing), returned as RV(gpu_holders).
    M(blackwell.gpu_node.wait_for_server) judges the start by them (its O(blackwell.gpu_node.wait_for_server#module:name)).
  - V(started) leaves a running server with the same command and environment alone (C(changed=false)) and
    restarts one whose command, environment, user, manager, log (O(log_path)) or unit directory
    (O(systemd_unit_dir)) differ, or whose unit or secret file under systemd is not the one these options write;
    RV(restart_reasons) says which. A pid file left by a crashed server is cleaned up and reported.
  - A run that leaves the server running sets its files back to what a start leaves them, without restarting it -
    the log without any permission for others (it can hold prompts) and with the group O(log_group), the unit and
    the logrotate file root's C(0644), the pid, state, secret and launch history files root's C(0600). Each such
    change is reported (C(changed=true), RV(actions)); in check mode it is only reported.
  - Every value that reaches the command line, the unit or an environment file is checked before anything is
    started, stopped or written, whatever the state; a control character (newline, carriage return, NUL...) in
    any of them fails the task naming the option. If anything fails after the launch (recording the server,
    a systemd step), the server just started is stopped again and the message says so.
  - Root never writes through a symbolic link. The log, the state, pid and secret files and the unit are opened
    with C(O_NOFOLLOW) (temporary files with C(O_EXCL) under a random name), and a O(log_path) or O(state_dir)
    that is a link, or not a regular file or directory, is refused.
  - V(stopped) sends SIGTERM to the server's process group, SIGKILL after O(stop_timeout), and where
    C(nvidia-smi) exists waits until the GPU memory the server held is released. Other processes that hold the
    GPUs are killed only with O(kill_gpu_holders=true).
  - The command line uses SGLang 0.5.9's full flag names. C(--tp) in SGLang's own examples is an argparse prefix
    of C(--tensor-parallel-size), which this module emits.
  - Hand RV(offset) and RV(pid) to M(blackwell.gpu_node.wait_for_server) to wait for readiness.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.defaults.port
  - blackwell.gpu_node.defaults.state_dir
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The before and after command lines, secrets masked.
  platform:
    support: full
options:
  state:
    description:
      - V(started) runs the server, V(stopped) stops it, V(restarted) restarts it in any case.
      - M(blackwell.gpu_node.sglang_server_info) reports on it, and changes nothing.
    type: str
    choices: [started, stopped, restarted]
    default: started
  name:
    description:
      - Name of this server instance on the host; names its pid and state files (and its systemd unit).
      - 1 to 64 letters, digits, V(_), V(.) or V(-), starting with a letter or digit, without V(..).
    type: str
    default: sglang
  manager:
    description:
      - V(auto) is V(systemd) where systemd is PID 1 (C(/run/systemd/system) exists), else V(module); RV(manager)
        and RV(manager_reason) say which was chosen and why.
      - V(module) starts the server itself, detached, and stops it by its process group.
      - V(systemd) writes the unit C(sglang-<name>.service) into O(systemd_unit_dir) with the same command and
        environment (output appended to O(log_path), C(TimeoutStopSec) from O(stop_timeout)), enables and starts
        it, and stops it with C(systemctl disable --now). Secrets (O(api_key), the values of every flag of
        O(secret_flags) in O(extra_args), in both spellings, and O(secret_env)) go into
        C(<state_dir>/<name>.secret.env), readable by root only, never into the unit.
      - The unit restarts a crashed server (C(Restart=on-failure)) after O(restart_sec) seconds, and gives up
        (the unit is C(failed)) after O(start_limit_burst) starts within O(start_limit_interval) seconds.
      - The unit runs as O(user) and O(group) (systemd adds the user's supplementary groups and sets C(HOME)),
        with C(UMask=0027) and C(NoNewPrivileges=yes), C(ProtectSystem=full), C(PrivateTmp=yes),
        C(ProtectKernelTunables=yes), C(ProtectKernelModules=yes), C(ProtectControlGroups=yes),
        C(RestrictSUIDSGID=yes), C(LockPersonality=yes), C(RestrictRealtime=yes). Left out because they break
        CUDA or common layouts - C(PrivateDevices=) hides C(/dev/nvidia*); C(DevicePolicy=closed) needs a
        C(DeviceAllow=) for every nvidia device, some of which appear at run time; C(MemoryDenyWriteExecute=)
        breaks the Triton and flashinfer JIT compilers, which need writable and executable memory;
        C(SystemCallFilter=) breaks the CUDA driver and NCCL, which use unusual system calls; C(ProtectHome=)
        hides a virtualenv, model or home under C(/home).
      - Under systemd the unit is the server's identity, so the module, not a template of the role, writes it
        (its text has no other source), with its secret file and the state file in one step, and compares both
        with the installed ones to decide whether the server restarts. Stop and restart (and M(blackwell.gpu_node.sglang_server_info)) read C(systemctl show)
        (C(MainPID), C(ActiveState), C(NRestarts), C(UnitFileState)), so a restart by systemd, a reboot or a
        manual C(systemctl restart) never make the server look gone. An active, enabled unit whose file is
        the one this run would write is left alone (C(changed=false)), whatever its main pid; a unit stopped
        behind Ansible's back, or given up by systemd, is started again.
      - Stopping the server, or moving it to the other manager, removes the unit file (after C(systemctl disable
        --now), then C(daemon-reload)) and the secret file.
      - Either way the result has the server's main pid and the log offset at its start, for
        M(blackwell.gpu_node.wait_for_server). Changing the manager restarts the server under the other one.
    type: str
    choices: [auto, module, systemd]
    default: auto
  user:
    description:
      - The user the server runs as. Under O(manager=module) the child drops to it, its group and its
        supplementary groups (membership of C(video) or C(render) may be what opens C(/dev/nvidia*)), with umask
        C(027) and C(HOME), C(USER) and C(LOGNAME) of the user (unless O(env) sets them), in C(/); under
        systemd the unit has C(User=) and C(Group=).
      - Unset, the server runs as the module's user, root, which lets the model repository's code
        (C(--trust-remote-code)) and the virtualenv's own files run as root; discouraged. The role
        always sets it.
      - A user that does not exist fails the task before anything is changed.
      - A change of user or group restarts the server. A server recorded by a version of this module before
        O(user) existed (root, no boot id) is still recognised, and restarted as O(user).
    type: str
  group:
    description: The server's group; the user's own group when unset. Needs O(user).
    type: str
  log_group:
    description:
      - An existing group that may read the log (operators); set on the log on every start and on every run that
        leaves the server running, on the open file (never through a link). The log stays root's and is never made
        writable by the server's user.
    type: str
  logrotate:
    description:
      - Write C(<logrotate_dir>/sglang-<name>), rotating O(log_path) weekly or past 200M, keeping
        O(logrotate_keep) compressed copies, with C(copytruncate) (the server keeps writing to the same file;
        M(blackwell.gpu_node.wait_for_server) follows the truncation). V(false), or O(state=stopped), removes
        that file.
      - logrotate reads the path as a pattern in double quotes, so a O(log_path) with whitespace, quotes,
        backslashes or C(*?[]{}) is refused.
    type: bool
    default: false
  logrotate_dir:
    description: Where the logrotate file goes; created C(0755) when missing.
    type: path
    default: /etc/logrotate.d
  logrotate_keep:
    description: Rotated logs that logrotate keeps.
    type: int
    default: 8
  restart_sec:
    description: C(RestartSec=) of the unit, seconds between a crash and systemd's restart.
    type: int
    default: 10
  start_limit_interval:
    description: C(StartLimitIntervalSec=) of the unit.
    type: int
    default: 600
  start_limit_burst:
    description: C(StartLimitBurst=) of the unit; more starts within O(start_limit_interval) and systemd gives up.
    type: int
    default: 5
  systemd_unit_dir:
    description:
      - Where the unit is written with O(manager=systemd).
      - A change restarts a running server, removing its unit from the directory it was in.
    type: path
    default: /etc/systemd/system
  state_dir:
    description:
      - Directory of the pid and state files, created C(0750) when missing. Not a symbolic link.
      - Root's at every level and writable by root alone, or refused, since the state names the process root
        signals.
  python:
    description:
      - The virtualenv's interpreter that runs the server (O(entrypoint)).
      - With O(state=started) or O(state=restarted), this or O(venv_path) is required.
    type: path
  venv_path:
    description:
      - The virtualenv to run the server from, instead of O(python); its C(bin/python) runs the server (O(entrypoint)).
      - What the server runs from there - the C(dist-info) directories of torch, sglang, sgl_kernel,
        flashinfer_python and flashinfer_jit_cache (their names carry the versions) and the runtime environment
        C(_blackwell_gpu_node_env.py) that the role C(blackwell.gpu_node.runtime_env) renders (its content) -
        found up to three levels under C(lib/), links not followed, is digested into the server's environment as
        C(BLACKWELL_GPU_NODE_RUNS_FROM). A changed stack or runtime environment therefore restarts the server,
        as a changed O(env) does.
      - Mutually exclusive with O(python).
    type: path
  entrypoint:
    description:
      - How the server is started, as the SGLang release recommends; the role passes the stack profile's
        C(python.sglang.entrypoint).
      - V(launch_server) runs C(<python> -m sglang.launch_server), which SGLang 0.5.10 and later still run but warn
        about in the log.
      - V(serve) runs C(sglang serve), SGLang's console script C(sglang) beside O(python) (C(<venv>/bin/sglang)), as
        C(<python> <venv>/bin/sglang serve), so that the virtualenv's interpreter runs it whatever the script's
        first line names, and the server's command line is the one recorded. A virtualenv without C(bin/sglang)
        fails the task before anything changes.
      - The flags are the same either way. A change restarts a running server (its command line differs).
    type: str
    choices: [launch_server, serve]
    default: launch_server
  model_path:
    description: C(--model-path). A local directory, unless O(model_is_hub_id=true).
    type: str
  model_is_hub_id:
    description:
      - O(model_path) is a Hugging Face id, not a local directory, so its existence is not checked; so is
        O(speculative.draft_model_path).
    type: bool
    default: false
  tensor_parallel_size:
    description:
      - C(--tensor-parallel-size), the number of GPUs the model is split over (on each node, this size divided by
        O(nnodes)).
      - Where C(nvidia-smi) lists the host's GPUs, a size that needs more GPUs on this node than the server would
        see fails the task before anything changes, naming the GPUs it sees. Those are the host's, narrowed by
        C(CUDA_VISIBLE_DEVICES) in the server's environment (O(secret_env), O(env), and with O(manager=module) the
        module's own) - indices or UUIDs, read as CUDA reads them (up to the first that names no GPU; empty means
        none). Without C(nvidia-smi), or with a MIG device in C(CUDA_VISIBLE_DEVICES), SGLang judges it.
    type: int
    default: 1
  host:
    description: C(--host). Must resolve to an address of this host.
    type: str
    default: 127.0.0.1
  port:
    description: C(--port). Must be free, unless this instance's own server holds it.
  trust_remote_code:
    description: C(--trust-remote-code).
    type: bool
    default: false
  cuda_graph_max_bs:
    description: C(--cuda-graph-max-bs).
    type: int
  disable_custom_all_reduce:
    description: C(--disable-custom-all-reduce).
    type: bool
    default: false
  attention_backend:
    description: C(--attention-backend), for example V(flashinfer), V(triton) or V(fa3).
    type: str
  nnodes:
    description: C(--nnodes). Above 1, O(node_rank) and O(dist_init_addr) are passed too.
    type: int
    default: 1
  node_rank:
    description: C(--node-rank), from 0 to O(nnodes) - 1.
    type: int
    default: 0
  dist_init_addr:
    description: C(--dist-init-addr), C(HOST:PORT) of the rank-0 node. Required when O(nnodes) is above 1.
    type: str
  speculative:
    description:
      - Speculative decoding (EAGLE-3 by default). Settings SGLang 0.5.9 refuses at start-up are refused before
        anything changes, naming the suboption.
    type: dict
    suboptions:
      algorithm:
        description: C(--speculative-algorithm), one that runs a draft model.
        type: str
        choices: [EAGLE, EAGLE3, NEXTN, STANDALONE]
        default: EAGLE3
      draft_model_path:
        description:
          - C(--speculative-draft-model-path). A directory with the draft's C(config.json), unless
            O(model_is_hub_id=true).
        type: str
        required: true
      num_steps:
        description: C(--speculative-num-steps), a positive integer. Unset, SGLang chooses all three counts.
        type: int
      eagle_topk:
        description: C(--speculative-eagle-topk), a positive integer; needs O(speculative.num_steps).
        type: int
      num_draft_tokens:
        description: C(--speculative-num-draft-tokens), a positive integer; needs O(speculative.num_steps).
        type: int
  enable_metrics:
    description:
      - C(--enable-metrics). SGLang then serves Prometheus metrics (C(sglang:num_running_reqs),
        C(sglang:token_usage), C(sglang:time_to_first_token_seconds) and more) at C(/metrics) on O(port).
    type: bool
    default: false
  api_key:
    description:
      - C(--api-key). Never shown in results, diffs or logs. SGLang takes it on the command line only, so it is
        visible in the host's process list to users who can read other users' command lines.
    type: str
  extra_args:
    description:
      - Further arguments appended to the command line as they are.
      - The values of secret flags (C(--api-key), C(--admin-api-key) and O(secret_flags)), as C(--flag VALUE) or
        C(--flag=VALUE), are masked in results and diffs; prefer O(api_key) for the API key.
    type: list
    elements: str
    default: []
  secret_flags:
    description:
      - Further flags whose values are secrets, besides C(--api-key) and C(--admin-api-key), for example
        V(--hf-token). Their values in O(extra_args) are masked wherever the command line is shown and, with
        O(manager=systemd), kept in the root-only secret file, not in the unit.
    type: list
    elements: str
    default: []
  env:
    description:
      - Environment variables set on top of the host's for the server. A change restarts a running server.
      - Names are letters, digits and V(_), not starting with a digit. Numbers are passed as their text
        (C(NCCL_DEBUG=1) from the YAML integer 1); a boolean is refused, as its text is a guess, so quote it.
      - Put tokens in O(secret_env) instead, not here.
    type: dict
    default: {}
  secret_env:
    description:
      - Environment variables whose values are secrets (C(HF_TOKEN), API keys). They are set like O(env), win
        over it, and their values never appear in results, diffs or logs.
      - Kept apart from O(env) because Ansible masks every occurrence of a secret value in its output, and a
        short value such as C(0) would mangle unrelated fields.
    type: dict
    default: {}
  log_path:
    description:
      - File that the server's stdout and stderr are appended to. Required unless O(state=stopped).
      - Created C(0640) when missing (an existing file keeps its mode, less any permission for others, at every
        start and on every run that leaves the server running), its directory C(0755) when missing. Only a
        regular file is accepted; a directory, FIFO, device or symbolic link is refused.
      - Its directory must be root's at every level and writable by root alone, since systemd opens the log by
        path, as root, following links.
      - A change restarts a running server, which keeps the log it started with open; the old log is left as it is.
    type: path
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL when stopping.
    type: float
    default: 30
  gpu_release_timeout:
    description: Seconds to wait, after stopping, for C(nvidia-smi) to list none of the server's processes.
    type: float
    default: 60
  kill_gpu_holders:
    description:
      - When stopping, also terminate every OTHER process that has one of O(gpu_devices) open (the story's
        C(fuser -k /dev/nvidia*)). Off by default; what was killed is listed in RV(killed_gpu_holders).
    type: bool
    default: false
  gpu_devices:
    description: Device files that count as holding the GPUs for O(kill_gpu_holders).
    type: list
    elements: str
    default: ["/dev/nvidia*"]
notes:
  - Bad options fail before anything is started or stopped, naming the option.
seealso:
  - module: blackwell.gpu_node.sglang_server_info
  - module: blackwell.gpu_node.wait_for_server
"""

EXAMPLES = r"""
- name: Launch the reference box's server as the service user
  blackwell.gpu_node.sglang_server:
    user: sglang
    logrotate: true
    python: /home/sglang/ml-env/bin/python
    model_path: /shared/kimi-k2.5-int4
    tensor_parallel_size: 8
    trust_remote_code: true
    cuda_graph_max_bs: 128
    disable_custom_all_reduce: true
    log_path: /var/log/sglang/server.log
  register: launch

- name: Run it from the stack's virtualenv, restarted when the stack or its runtime environment changes
  blackwell.gpu_node.sglang_server:
    user: sglang
    venv_path: /opt/ml-env
    entrypoint: serve                 # SGLang 0.5.17: /opt/ml-env/bin/python /opt/ml-env/bin/sglang serve ...
    model_path: /shared/kimi-k2.5-int4
    tensor_parallel_size: 8
    trust_remote_code: true
    log_path: /var/log/sglang/server.log
  register: launch

- name: Wait until it is ready
  blackwell.gpu_node.wait_for_server:
    log_path: /var/log/sglang/server.log
    offset: "{{ launch.offset }}"
    pid: "{{ launch.pid }}"
    health_url: http://127.0.0.1:30000/health

- name: Stop it, and whatever else holds the GPUs
  blackwell.gpu_node.sglang_server:
    state: stopped
    kill_gpu_holders: true
"""

RETURN = r"""
running:
  description: Whether the server runs after the task.
  returned: always
  type: bool
pid:
  description: Pid of the server (the leader of its process group).
  returned: when running
  type: int
argv:
  description:
    - The command line, secrets masked. It begins C(<python> -m sglang.launch_server) or C(<python> <venv>/bin/sglang
      serve) (O(entrypoint)).
  returned: when known
  type: list
  elements: str
  sample: ["/opt/ml-env/bin/python", "/opt/ml-env/bin/sglang", "serve", "--model-path", "/shared/kimi-k2.5-int4",
           "--tensor-parallel-size", "8", "--host", "127.0.0.1", "--port", "30000"]
log_path:
  description: The log file.
  returned: when known
  type: str
offset:
  description: Size of the log when the server was launched; where its own lines begin.
  returned: when running
  type: int
actions:
  description:
    - What the task did (or, in check mode, would do), in order (C(cleaned stale pid file), C(stopped),
      C(started), C(wrote the logrotate file)).
    - On a run that leaves the server running, what was set back to what a start leaves - C(set the mode and group
      of the log), C(set the mode and owner of the unit file sglang-NAME.service), C(set the mode and owner of the
      state files NAME.pid, NAME.json).
  returned: always
  type: list
  elements: str
  sample: ["set the mode and group of the log"]
managed:
  description:
    - Every file the module keeps for the server it runs; a run that leaves the server running sets each back
      (see RV(actions)), and one whose text differs from what a start writes restarts the server or rewrites it.
    - Each has its C(path), the C(mode) the module leaves (null for the log, which keeps its mode less any
      permission for others, and its group O(log_group)), and C(text), true where the module compares the text
      with what it writes and writes it back (the unit and the secret file, by restarting the server, and the
      logrotate file).
    - The state files are those in O(state_dir) after the run; the unit is there with O(manager=systemd), the
      logrotate file with O(logrotate).
  returned: when O(state) is started or restarted, outside check mode
  type: list
  elements: dict
  sample: [{"path": "/var/log/sglang/sglang.log", "mode": null, "text": false},
           {"path": "/etc/systemd/system/sglang-sglang.service", "mode": "0644", "text": true},
           {"path": "/var/lib/blackwell-gpu-node/sglang.pid", "mode": "0600", "text": false}]
restart_reasons:
  description:
    - Why the running server is not the one these options ask for, which restarts it (with O(state=started)); empty
      when it is. Command lines and environments are said to differ, never shown.
  returned: when a recorded server runs and O(state) is started or restarted
  type: list
  elements: str
  sample: ["it logs to /var/log/sglang/old.log, not log_path=/var/log/sglang/server.log"]
stale_pid:
  description: Pid of a recorded server that was no longer running (crashed, its pid reused, or the host rebooted).
  returned: when found
  type: int
killed:
  description: Pids of the server's process group that were stopped.
  returned: when stopped
  type: list
  elements: int
forced:
  description: Pids that did not end on SIGTERM within O(stop_timeout) and were sent SIGKILL.
  returned: when stopped
  type: list
  elements: int
gpu_released:
  description: True once nvidia-smi lists none of the stopped pids; false at timeout; null without nvidia-smi.
  returned: when stopped
  type: bool
gpu_holders:
  description:
    - The processes that held GPU memory when the server was launched, each with C(pid), C(user), C(command) (its
      command line from C(/proc), SGLang's secret flags masked, cut to 200 bytes), C(used_memory_mib) and
      C(gpu_uuid); null where C(nvidia-smi) could not be asked. Recorded with the launch for
      M(blackwell.gpu_node.wait_for_server).
  returned: when started
  type: list
  elements: dict
  sample: [{"pid": 4242, "user": "alice", "command": "python3 train.py", "used_memory_mib": 79000,
            "gpu_uuid": "GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b"}]
killed_gpu_holders:
  description: Other processes killed with O(kill_gpu_holders), pid to the device files they held.
  returned: when O(kill_gpu_holders=true)
  type: dict
manager:
  description: The manager this run chose (O(manager=auto) resolved).
  returned: when started or restarted
  type: str
  sample: systemd
manager_reason:
  description: Why that manager was chosen.
  sample: "manager=auto: systemd is PID 1 here (/run/systemd/system exists)"
  returned: when started or restarted
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import (
    masked_argv,
    secret_values,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import (
    STATE_MODE,
    launch,
    log_offset,
    resolve_manager,
    settle_log_access,
    stop_group,
    terminate,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    open_directory,
    path_kind,
    read_text,
    remove,
    settle_file,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import (
    boot_id,
    group_members,
    process_start_time,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import environment_file
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import gpu_list, run_command
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.capacity import (
    command_digest,
    holders_at_launch,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.gpus import tensor_parallel_problems
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import (
    BadState,
    SystemdFailed,
    observe_unit,
    systemctl,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import (
    ENTRYPOINTS,
    build_argv,
    check_options,
    env_digest,
    normalized_environment,
    port_state,
    service_account,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.processes import (
    device_holders,
    wait_gpu_release,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.runs_from import (
    RUNS_FROM_VARIABLE,
    runs_from_digest,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.service_files import (
    logrotate_config,
    logrotate_problem,
    systemd_unit,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.speculative import DRAFT_ALGORITHMS
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.status import (
    READ_OPTIONS,
    Recorded,
    read_problems,
    restart_reasons,
)


def server_env(params):
    return dict(params["env"], **params["secret_env"])


# The unit and the logrotate file: read by systemd and logrotate, written by root alone.
SERVICE_FILE_MODE = 0o644


def unit_name(params):
    return "sglang-%s.service" % params["name"]


def identity(account):
    return {"user": account["user"], "group": account["group"]} if account else {"user": None, "group": None}


def withdraw_unit(module, state, check=True):
    """Stop and disable the recorded unit, remove its file and reload systemd: nothing of it stays behind."""
    systemctl(module, "disable", "--now", state["unit"], check=check)
    directory = open_directory(state.get("unit_dir") or module.params["systemd_unit_dir"], "systemd_unit_dir")
    try:
        remove(directory, state["unit"])
    finally:
        os.close(directory)
    systemctl(module, "daemon-reload", check=check)


def stop(module, instance, state, result):
    if state.get("manager") == "systemd":
        members = group_members(state["pid"]) or [state["pid"]]
        # systemd stops the unit's whole cgroup: SIGTERM, then SIGKILL after TimeoutStopSec.
        withdraw_unit(module, state)
        result["forced"] = []
    else:
        members, result["forced"] = stop_group(state, module.params["stop_timeout"])
    result["killed"] = members
    result["gpu_released"] = wait_gpu_release(members, module.params["gpu_release_timeout"])
    if result["gpu_released"] is False:
        module.warn("GPU memory of stopped pids %s was not released within %ss" % (
            members, module.params["gpu_release_timeout"]))
    instance.forget()
    result["actions"].append("stopped")


def clean_stale(module, instance, state, result):
    """Forget a server that no longer runs; its unit is withdrawn, as systemd may still restart it."""
    if state.get("manager") == "systemd":
        withdraw_unit(module, state, check=False)
        result["actions"].append("withdrew the inactive unit %s" % state["unit"])
    else:
        result["actions"].append("cleaned stale pid file")
    instance.forget()


def wanted_unit(module, instance, argv, account, secret_flags):
    """(unit text, secret variables) for this run's options."""
    params = module.params
    service = dict(identity(account), stop_timeout=params["stop_timeout"], restart_sec=params["restart_sec"],
                   start_limit_interval=params["start_limit_interval"],
                   start_limit_burst=params["start_limit_burst"])
    return systemd_unit(params["name"], argv, params["env"], params["log_path"], instance.secret_env_path,
                        service, secret_flags, sorted(params["secret_env"]))


def secret_env_text(params, secrets):
    """The secret environment file's text: secret_env and the values of the secret flags (wanted_unit's)."""
    return environment_file(dict(params["secret_env"], **secrets))


def installed_unit(module, state):
    """The text of the recorded unit's file, None when it is not there."""
    directory = open_directory(state.get("unit_dir") or module.params["systemd_unit_dir"], "systemd_unit_dir")
    try:
        return read_text(directory, state["unit"])
    finally:
        os.close(directory)


def settle_unit_file(module, state, unit_text):
    """True when the recorded unit's file, whose text is unit_text, is not root's with SERVICE_FILE_MODE as
    start_unit writes it (a unit another user could edit would run what that user wrote); rewritten so unless in check mode.
    Its text is the same, so systemd needs no reload."""
    directory = open_directory(state.get("unit_dir") or module.params["systemd_unit_dir"], "systemd_unit_dir")
    try:
        return settle_file(directory, state["unit"], unit_text, SERVICE_FILE_MODE, module.check_mode)
    finally:
        os.close(directory)


def settle_running(module, instance, recorded, unit_text, log_gid):
    """On a pass that leaves the server running as it is: its log, unit file and state files set back to what a
    start leaves (the log without permission for others and with log_group, the unit file root's 0644, the state
    files root's 0600), unless in check mode. The actions that took (or would take)."""
    actions = []
    if settle_log_access(module.params["log_path"], log_gid, "the server", module.check_mode):
        actions.append("set the mode and group of the log")
    if unit_text is not None and settle_unit_file(module, recorded, unit_text):
        actions.append("set the mode and owner of the unit file %s" % recorded["unit"])
    settled = instance.settle_files(module.check_mode)
    if settled:
        actions.append("set the mode and owner of the state files %s" % ", ".join(settled))
    return actions


def start_unit(module, instance, unit_text, secrets, log_gid):
    """Write the unit and start it; (main pid, log offset at the start, its start time)."""
    params = module.params
    unit = unit_name(params)
    instance.write_secret_env(secret_env_text(params, secrets))
    directory = open_directory(params["systemd_unit_dir"], "systemd_unit_dir")
    try:
        write_atomically(directory, unit, unit_text, SERVICE_FILE_MODE)
    finally:
        os.close(directory)
    offset = log_offset(params["log_path"], log_gid, "the server")
    systemctl(module, "daemon-reload")
    # A unit that systemd gave up on (start limit hit) must be reset before it can start again.
    systemctl(module, "reset-failed", unit, check=False)
    systemctl(module, "enable", unit)
    systemctl(module, "restart", unit)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pid = observe_unit(module, unit)["pid"]
        start_time = process_start_time(pid) if pid else None
        if start_time is not None:
            return pid, offset, start_time
        time.sleep(0.1)
    raise SystemdFailed("systemd did not start %s; see systemctl status %s and %s" % (unit, unit, params["log_path"]))


def start(module, instance, argv, unit, account, log_gid, result):
    params = module.params
    state = {"argv": argv, "env_digest": env_digest(server_env(params)), "log_path": params["log_path"],
             "manager": params["manager"], "started_at": time.time(), "boot_id": boot_id(),
             "secret_flags": list(params["secret_flags"]), "identity": identity(account),
             "uid": account["uid"] if account else os.geteuid(),
             # What wait_for_server judges the start by: a pool far below this command line's last good launch,
             # or any process that holds GPU memory now (the previous server was stopped and its memory released).
             "argv_digest": command_digest(argv), "gpu_holders": holders_at_launch()}
    if params["manager"] == "systemd":
        state.update(unit=unit_name(params), unit_dir=params["systemd_unit_dir"])
        try:
            state["pid"], state["offset"], state["start_time"] = start_unit(module, instance, unit[0], unit[1], log_gid)
        except (OSError, InvalidOption, SystemdFailed) as exc:
            withdraw_unit(module, state, check=False)
            instance.forget()
            module.fail_json(msg="Starting %s failed: %s. The unit was stopped and removed again." % (
                state["unit"], exc), **result)
    else:
        try:
            process, state["offset"], state["start_time"] = launch(argv, server_env(params), params["log_path"],
                                                                   account, log_gid, "the server")
        except (OSError, InvalidOption) as exc:
            module.fail_json(msg="The server was not started: %s" % exc, **result)
        if state["start_time"] is None:
            module.fail_json(msg="The server exited at once (code %s); see %s" % (
                process.poll(), params["log_path"]), **result)
        state["pid"] = process.pid
    try:
        instance.save(state)
        instance.record_launch(state, params["secret_env"].values())
    except (OSError, InvalidOption) as exc:
        if params["manager"] == "systemd":
            withdraw_unit(module, state, check=False)
        else:
            stop_group(state, params["stop_timeout"])
        instance.forget()
        module.fail_json(msg="The server started (pid %d) but could not be recorded in state_dir=%s (%s), so it "
                             "was stopped again: fix state_dir and run again." % (state["pid"], params["state_dir"], exc),
                         **result)
    result.update(pid=state["pid"], offset=state["offset"], running=True, gpu_holders=state["gpu_holders"])
    result["actions"].append("started")


def logrotate_name(params):
    return "sglang-%s" % params["name"]


def managed(params, instance):
    """Every file the module keeps for the server it runs, as a pass that leaves it running sets each back: its
    path; the mode it leaves (None for the log, which keeps its own mode less any permission for others); whether
    the module compares its text with what it writes and writes it back (the unit and the secret environment
    file, through a restart, and the logrotate file). The state files are those there now: a manager writes only
    its own."""
    files = [dict(path=params["log_path"], mode=None, text=False)]
    if params["manager"] == "systemd":
        files.append(dict(path=os.path.join(params["systemd_unit_dir"], unit_name(params)),
                          mode="%04o" % SERVICE_FILE_MODE, text=True))
    files.extend(dict(path=os.path.join(params["state_dir"], name), mode="%04o" % STATE_MODE,
                      text=name == instance.secret_env_name)
                 for name in instance.kept_files() if path_kind(os.path.join(params["state_dir"], name)) == "file")
    if params["logrotate"]:
        files.append(dict(path=os.path.join(params["logrotate_dir"], logrotate_name(params)),
                          mode="%04o" % SERVICE_FILE_MODE, text=True))
    return files


def settle_logrotate(module, wanted_text):
    """Write the logrotate file of this instance when it differs from wanted_text (its text, mode or owner), or
    remove it when wanted_text is None; True when the file changed (or would, in check mode)."""
    params = module.params
    if path_kind(params["logrotate_dir"]) != "directory":
        if wanted_text is None or module.check_mode:
            return wanted_text is not None
    directory = open_directory(params["logrotate_dir"], "logrotate_dir", 0o755)
    try:
        if wanted_text is not None:
            return settle_file(directory, logrotate_name(params), wanted_text, SERVICE_FILE_MODE, module.check_mode)
        if read_text(directory, logrotate_name(params)) is None:
            return False
        return module.check_mode or remove(directory, logrotate_name(params))
    finally:
        os.close(directory)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            READ_OPTIONS,
            state=dict(type="str", default="started", choices=["started", "stopped", "restarted"]),
            manager=dict(type="str", default="auto", choices=["auto", "module", "systemd"]),
            systemd_unit_dir=dict(type="path", default="/etc/systemd/system"),
            user=dict(type="str"),
            group=dict(type="str"),
            log_group=dict(type="str"),
            python=dict(type="path"),
            venv_path=dict(type="path"),
            entrypoint=dict(type="str", default="launch_server", choices=list(ENTRYPOINTS)),
            model_path=dict(type="str"),
            model_is_hub_id=dict(type="bool", default=False),
            tensor_parallel_size=dict(type="int", default=1),
            trust_remote_code=dict(type="bool", default=False),
            cuda_graph_max_bs=dict(type="int"),
            disable_custom_all_reduce=dict(type="bool", default=False),
            attention_backend=dict(type="str"),
            nnodes=dict(type="int", default=1),
            node_rank=dict(type="int", default=0),
            dist_init_addr=dict(type="str"),
            speculative=dict(type="dict", options=dict(
                algorithm=dict(type="str", default="EAGLE3", choices=list(DRAFT_ALGORITHMS)),
                draft_model_path=dict(type="str", required=True),
                num_steps=dict(type="int"),
                eagle_topk=dict(type="int"),
                num_draft_tokens=dict(type="int", no_log=False),
            )),
            enable_metrics=dict(type="bool", default=False),
            api_key=dict(type="str", no_log=True),
            extra_args=dict(type="list", elements="str", default=[]),
            env=dict(type="dict", default={}),
            secret_env=dict(type="dict", default={}, no_log=True),
            log_path=dict(type="path"),
            logrotate=dict(type="bool", default=False),
            logrotate_dir=dict(type="path", default="/etc/logrotate.d"),
            logrotate_keep=dict(type="int", default=8),
            stop_timeout=dict(type="float", default=30),
            restart_sec=dict(type="int", default=10),
            start_limit_interval=dict(type="int", default=600),
            start_limit_burst=dict(type="int", default=5),
            gpu_release_timeout=dict(type="float", default=60),
            kill_gpu_holders=dict(type="bool", default=False),
            gpu_devices=dict(type="list", elements="str", default=["/dev/nvidia*"]),
        ),
        required_if=[
            ("state", "started", ("model_path", "log_path")),
            ("state", "restarted", ("model_path", "log_path")),
            ("state", "started", ("python", "venv_path"), True),
            ("state", "restarted", ("python", "venv_path"), True),
        ],
        mutually_exclusive=[("python", "venv_path")],
        supports_check_mode=True,
    )
    params = module.params
    if params["venv_path"]:
        params["python"] = os.path.join(params["venv_path"], "bin", "python")
    # Everything that names a file or reaches a command line, a unit or an environment file is checked first,
    # whatever the state: nothing is read, signalled or written with a value that fails.
    params["env"], env_problems = normalized_environment(params["env"], "env")
    params["secret_env"], secret_env_problems = normalized_environment(params["secret_env"], "secret_env")
    problems = read_problems(params) + env_problems + secret_env_problems
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), changed=False)

    try:
        server = Recorded(module)
    except (BadState, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg=str(exc), changed=False)
    instance, recorded, ours, unit_state = server.instance, server.state, server.running, server.unit_state
    secret_flags, shown_flags = server.secret_flags, server.shown_flags
    result = dict(server.result(), actions=[])

    wanted = params["state"] in ("started", "restarted")
    argv = account = log_gid = unit = None
    if wanted:
        params["manager"], result["manager_reason"] = resolve_manager(params["manager"], "the server")
        result["manager"] = params["manager"]
        # Secrets in extra_args (--api-key=KEY) are no option of their own: mask them in all output, the
        # invocation's echo of extra_args included, before anything can fail.
        module.no_log_values.update(secret_values(params["extra_args"] or [], secret_flags))
        account, log_gid, problems = service_account(params["user"], params["group"], params["log_group"])
        problems += check_options(params)
        problems += tensor_parallel_problems(params, gpu_list(module.get_bin_path("nvidia-smi"), run_command), os.environ)
        # The command line is built from options that passed their checks only (nnodes > 1 needs dist_init_addr).
        argv = None if problems else build_argv(params)
        if params["logrotate"] and logrotate_problem(params["log_path"]):
            problems.append(logrotate_problem(params["log_path"]))
        if params["manager"] == "systemd" and path_kind(params["systemd_unit_dir"]) != "directory":
            problems.append("systemd_unit_dir=%s is not a directory (a link is not followed)" % params["systemd_unit_dir"])
        if params["manager"] == "systemd" and not module.get_bin_path("systemctl"):
            problems.append("manager=systemd, but systemctl is not on this host: use manager=module (or auto)")
        if 1 <= params["port"] <= 65535:
            try:
                if port_state(recorded, ours, params["host"], params["port"]) == "in_use":
                    problems.append("port=%s on %s is already in use by another process" % (params["port"], params["host"]))
            except InvalidOption as exc:
                problems.append(str(exc))
        if params["venv_path"]:
            try:
                params["env"] = dict(params["env"], **{RUNS_FROM_VARIABLE: runs_from_digest(params["venv_path"])})
            except (OSError, InvalidOption) as exc:
                problems.append(str(exc))
        if problems:
            module.fail_json(msg="Nothing was changed: " + "; ".join(problems), **result)
        if params["manager"] == "systemd":
            unit = wanted_unit(module, instance, argv, account, secret_flags)

    if ours and wanted:
        result["restart_reasons"] = restart_reasons(
            recorded, dict(argv=argv, env_digest=env_digest(server_env(params)), manager=params["manager"],
                           identity=identity(account), log_path=params["log_path"],
                           unit_dir=params["systemd_unit_dir"], unit_text=unit[0] if unit else None,
                           secret_env_text=secret_env_text(params, unit[1]) if unit else None),
            unit_state, lambda: installed_unit(module, recorded), instance.secret_env_text)
    must_stop = ours and (params["state"] in ("stopped", "restarted") or bool(result.get("restart_reasons")))
    must_start = wanted and (must_stop or not ours)
    cleans_stale = bool(recorded) and not ours
    # Foreign processes only: this module, its parents and the server's own group are not theirs.
    holders = {}
    if params["state"] == "stopped" and params["kill_gpu_holders"]:
        own = set([os.getpid(), os.getppid()] + (group_members(recorded["pid"]) if ours else []))
        holders = device_holders(params["gpu_devices"], exclude=own)
        result["killed_gpu_holders"] = holders
    try:
        rotation = logrotate_config(params["log_path"], params["logrotate_keep"]) if wanted and params["logrotate"] else None
        logrotate_changed = settle_logrotate(module, rotation)
    except (OSError, InvalidOption) as exc:
        module.fail_json(msg="The logrotate file in logrotate_dir=%s could not be written: %s" % (
            params["logrotate_dir"], exc), **result)
    if logrotate_changed:
        result["actions"].append("wrote the logrotate file" if rotation else "removed the logrotate file")
    settled = []
    if wanted and not must_start:
        try:
            settled = settle_running(module, instance, recorded, unit[0] if unit else None, log_gid)
        except (OSError, InvalidOption) as exc:
            module.fail_json(msg="The files of the running server could not be set back to their modes: %s" % exc,
                             **result)
        result["actions"] += settled
    result["changed"] = bool(must_stop or must_start or cleans_stale or holders or logrotate_changed or settled)
    result["diff"] = dict(
        before=dict(running=ours, argv=masked_argv(recorded["argv"], shown_flags) if ours else []),
        after=dict(running=wanted, argv=masked_argv(argv, secret_flags) if wanted else []),
    )
    if module.check_mode:
        module.exit_json(**result)

    try:
        if cleans_stale:
            clean_stale(module, instance, recorded, result)
        if must_stop:
            stop(module, instance, recorded, result)
            result.update(running=False, pid=None, offset=None)
    except (OSError, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg="Stopping the recorded server failed: %s" % exc, **result)
    if holders:
        terminate(sorted(holders), params["stop_timeout"])
    if must_start:
        result["argv"], result["log_path"] = masked_argv(argv, secret_flags), params["log_path"]
        start(module, instance, argv, unit, account, log_gid, result)
    if wanted:
        result["managed"] = managed(params, instance)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
