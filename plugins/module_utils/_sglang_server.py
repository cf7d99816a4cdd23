# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch, identify and stop one SGLang server: the core of the sglang_server module.

Argv is built from structured options with SGLang 0.5.9's full flag names (``--tp`` is
only an argparse prefix of ``--tensor-parallel-size``). A launched server is recorded in
a pid file and a state file (argv, environment digest, log offset at launch, the
kernel's start time of the process), so that a later run recognises it for sure: a pid
alone can be reused by another process.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import glob
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import time

SECRET_FLAGS = ("--api-key",)
MASK = "********"


class InvalidOption(ValueError):
    pass


def build_argv(params):
    """The launch command as a list, from the module's options."""
    argv = [
        params["python"], "-m", "sglang.launch_server",
        "--model-path", params["model_path"],
        "--tensor-parallel-size", str(params["tensor_parallel_size"]),
        "--host", params["host"],
        "--port", str(params["port"]),
    ]
    if params["trust_remote_code"]:
        argv.append("--trust-remote-code")
    if params["cuda_graph_max_bs"] is not None:
        argv += ["--cuda-graph-max-bs", str(params["cuda_graph_max_bs"])]
    if params["disable_custom_all_reduce"]:
        argv.append("--disable-custom-all-reduce")
    if params["attention_backend"]:
        argv += ["--attention-backend", params["attention_backend"]]
    if params["nnodes"] > 1:
        argv += ["--nnodes", str(params["nnodes"]), "--node-rank", str(params["node_rank"]),
                 "--dist-init-addr", params["dist_init_addr"]]
    speculative = params.get("speculative")
    if speculative:
        argv += ["--speculative-algorithm", speculative["algorithm"],
                 "--speculative-draft-model-path", speculative["draft_model_path"]]
        for key, flag in (("num_steps", "--speculative-num-steps"), ("eagle_topk", "--speculative-eagle-topk"),
                          ("num_draft_tokens", "--speculative-num-draft-tokens")):
            if speculative.get(key) is not None:
                argv += [flag, str(speculative[key])]
    if params.get("api_key"):
        argv += ["--api-key", params["api_key"]]
    return argv + list(params.get("extra_args") or [])


def masked(argv):
    """argv with the values of secret flags replaced, for results, diffs and logs."""
    shown = list(argv)
    for index, arg in enumerate(shown[:-1]):
        if arg in SECRET_FLAGS:
            shown[index + 1] = MASK
    return shown


def env_digest(env):
    return hashlib.sha256(json.dumps(env or {}, sort_keys=True).encode("utf-8")).hexdigest()


def port_is_free(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        return True
    except (OSError, socket.error):
        return False
    finally:
        probe.close()


def check_options(params):
    """Every problem with the options, each naming the option; empty when all is well."""
    problems = []
    python = params["python"]
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        problems.append("python=%s is missing or not executable: point it at the virtualenv's bin/python" % python)
    if not params["model_is_hub_id"] and not os.path.isdir(params["model_path"]):
        problems.append("model_path=%s is not a directory on the host; set model_is_hub_id: true for a "
                        "Hugging Face id" % params["model_path"])
    if params["tensor_parallel_size"] < 1:
        problems.append("tensor_parallel_size=%s must be a positive integer" % params["tensor_parallel_size"])
    if not 1 <= params["port"] <= 65535:
        problems.append("port=%s is out of range (1-65535)" % params["port"])
    if params["nnodes"] < 1:
        problems.append("nnodes=%s must be a positive integer" % params["nnodes"])
    elif not 0 <= params["node_rank"] < params["nnodes"]:
        problems.append("node_rank=%s must be at least 0 and less than nnodes=%s"
                        % (params["node_rank"], params["nnodes"]))
    if params["nnodes"] > 1:
        address = params["dist_init_addr"] or ""
        host, _sep, port = address.rpartition(":")
        if not host or not port.isdigit():
            problems.append("dist_init_addr=%r must be HOST:PORT of the rank-0 node when nnodes > 1" % address)
    speculative = params.get("speculative")
    if speculative and not speculative.get("draft_model_path"):
        problems.append("speculative.draft_model_path is required with speculative decoding")
    log_dir = os.path.dirname(os.path.abspath(params["log_path"]))
    if not (os.path.isdir(log_dir) and os.access(log_dir, os.W_OK)):
        problems.append("log_path=%s: its directory %s does not exist or is not writable"
                        % (params["log_path"], log_dir))
    return problems


def process_start_time(pid, proc_root="/proc"):
    """The kernel's start time of pid (clock ticks since boot), or None if it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat")) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (IOError, OSError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def group_members(pgid, proc_root="/proc"):
    """Pids whose process group is pgid."""
    members = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "stat")) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (IOError, OSError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return sorted(members)


def device_holders(patterns, exclude=(), proc_root="/proc"):
    """{pid: [device paths]} of the processes that have a file matching patterns open."""
    devices = set()
    for pattern in patterns:
        devices.update(os.path.realpath(path) for path in glob.glob(pattern))
    holders = {}
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        fd_dir = os.path.join(proc_root, entry, "fd")
        try:
            names = os.listdir(fd_dir)
        except (IOError, OSError):
            continue
        for name in names:
            try:
                target = os.readlink(os.path.join(fd_dir, name))
            except (IOError, OSError):
                continue
            if target in devices:
                holders.setdefault(int(entry), set()).add(target)
    return dict((pid, sorted(paths)) for pid, paths in holders.items())


class Instance(object):
    """The pid and state files of one named server."""

    def __init__(self, state_dir, name):
        self.pid_path = os.path.join(state_dir, name + ".pid")
        self.state_path = os.path.join(state_dir, name + ".json")
        self.state_dir = state_dir

    def load(self):
        try:
            with open(self.state_path) as handle:
                return json.load(handle)
        except (IOError, OSError, ValueError):
            return None

    def save(self, state):
        if not os.path.isdir(self.state_dir):
            os.makedirs(self.state_dir, 0o750)
        for path, content in ((self.state_path, json.dumps(state, indent=2, sort_keys=True)),
                              (self.pid_path, "%d\n" % state["pid"])):
            temporary = path + ".tmp"
            with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
                handle.write(content)
            os.rename(temporary, path)

    def forget(self):
        for path in (self.pid_path, self.state_path):
            try:
                os.unlink(path)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise

    @staticmethod
    def running(state, proc_root="/proc"):
        """True when the recorded process is alive and really the one we launched: same pid and
        same kernel start time (a reused pid has another; SGLang may retitle its processes, so
        the command line is no proof)."""
        return bool(state) and process_start_time(state["pid"], proc_root) == state["start_time"]


def launch(argv, env, log_path):
    """Start argv detached (own session), stdout and stderr appended to log_path."""
    with open(log_path, "ab") as log:
        offset = log.seek(0, os.SEEK_END)
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})), start_new_session=True, close_fds=True,
        )
    start_time = None
    deadline = time.monotonic() + 5
    while start_time is None and time.monotonic() < deadline:
        start_time = process_start_time(process.pid)
        if start_time is None and process.poll() is not None:
            break
    return process, offset, start_time


def wait_gone(pids, timeout, sleep=time.sleep, clock=time.monotonic):
    deadline = clock() + timeout
    alive = [pid for pid in pids if process_start_time(pid) is not None]
    while alive and clock() < deadline:
        sleep(0.1)
        alive = [pid for pid in alive if process_start_time(pid) is not None]
    return alive


def terminate(pids, grace, signal_group=None):
    """SIGTERM, wait up to grace seconds, then SIGKILL what is left. Returns the pids killed hard."""
    def send(signum):
        if signal_group is not None:
            try:
                os.killpg(signal_group, signum)
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    raise
            return
        for pid in pids:
            try:
                os.kill(pid, signum)
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    raise

    send(signal.SIGTERM)
    left = wait_gone(pids, grace)
    if left:
        send(signal.SIGKILL)
        wait_gone(left, 10)
    return left


def gpu_memory_pids(run=subprocess.run):
    """Pids that nvidia-smi lists with GPU memory, or None where nvidia-smi is not there."""
    try:
        completed = run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                        capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return set(int(line) for line in completed.stdout.split() if line.strip().isdigit())


def wait_gpu_release(pids, timeout, query=gpu_memory_pids, sleep=time.sleep, clock=time.monotonic):
    """True once none of pids holds GPU memory; False at timeout; None without nvidia-smi."""
    deadline = clock() + timeout
    while True:
        holders = query()
        if holders is None:
            return None
        if not holders & set(pids):
            return True
        if clock() >= deadline:
            return False
        sleep(0.5)


# systemd: the same command and environment as a unit, so that systemd starts, restarts and stops it.
SYSTEMD_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
SECRET_VARIABLE = "BLACKWELL_GPU_NODE_SECRET_ARG"


def systemd_quote(word):
    """One word of an ExecStart= or Environment= line: `%` and `$` escaped as systemd expands them."""
    escaped = word.replace("%", "%%")
    if SYSTEMD_PLAIN.match(word):
        return escaped
    return '"%s"' % escaped.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")


def systemd_unit(name, argv, env, log_path, stop_timeout, secret_env_path):
    """The unit file text and the secret environment file's variables for argv and env.

    Values of secret flags (the API key) move to the secret environment file, which only root reads,
    and the unit refers to them as ${...}, which systemd expands when it starts the service."""
    words, secrets = [], {}
    for index, word in enumerate(argv):
        if index and argv[index - 1] in SECRET_FLAGS:
            variable = "%s_%d" % (SECRET_VARIABLE, index)
            secrets[variable] = word
            words.append("${%s}" % variable)
        else:
            words.append(systemd_quote(word))
    lines = [
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        "[Unit]",
        "Description=SGLang server %s (blackwell.gpu_node)" % name,
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(words),
    ]
    lines += ["Environment=%s" % systemd_quote("%s=%s" % item) for item in sorted(env.items())]
    lines += [
        "EnvironmentFile=-%s" % secret_env_path,
        "StandardOutput=append:%s" % log_path,
        "StandardError=append:%s" % log_path,
        "Restart=on-failure",
        "RestartSec=10",
        "KillMode=control-group",
        "TimeoutStopSec=%d" % int(stop_timeout),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n", secrets


def environment_file(variables):
    """The text of a systemd EnvironmentFile= for variables."""
    return "".join('%s="%s"\n' % (name, value.replace("\\", "\\\\").replace('"', '\\"'))
                   for name, value in sorted(variables.items()))
