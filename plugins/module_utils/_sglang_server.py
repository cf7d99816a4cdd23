# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch, identify and stop one SGLang server: the core of the sglang_server module.

Argv is built from structured options with SGLang 0.5.9's full flag names (``--tp`` is
only an argparse prefix of ``--tensor-parallel-size``). A launched server is recorded in
a pid file and a state file (argv, environment digest, log offset at launch, the
kernel's start time of the process, the boot it ran in), so that a later run recognises it
for sure: a pid alone can be reused by another process.

Root writes every file here from inventory values, so every value is checked before
anything is started or written (no control characters, names that are names), and no
write follows a symbolic link: files are opened with O_NOFOLLOW relative to a directory
opened with O_NOFOLLOW, temporary files are created with O_EXCL under a random name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import binascii
import errno
import fcntl
import fnmatch
import glob
import hashlib
import json
import grp
import os
import pwd
import re
import signal
import socket
import stat
import subprocess
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._safe_text import control_character_problems
from ansible_collections.blackwell.gpu_node.plugins.module_utils._secrets import MASK, SECRET_FLAGS, masked_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._speculative import (
    draft_model_problem, problems as speculative_problems)

# Names a pid, state and secret file in state_dir and the unit sglang-<name>.service: no path separator,
# no "..", no systemd specifier (%) or template marker (@), short enough for a unit name.
INSTANCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*")
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# Exists where systemd is PID 1 (sd_booted() looks for the same directory).
SYSTEMD_RUNTIME_DIR = "/run/systemd/system"
# The server's files are not readable by others (the log, caches it writes under HOME).
SERVER_UMASK = 0o027
# How many launches <name>.launches.json keeps, newest first: enough to look at a crash a few restarts back.
LAUNCH_HISTORY = 5
# What the server runs from in its virtualenv: the stack's packages (their versions are in the dist-info names)
# and the runtime environment the runtime_env role renders. BLACKWELL_GPU_NODE_RUNS_FROM carries their digest
# in the server's environment, so a change there restarts the server.
RUNS_FROM_PATTERNS = ("torch-*.dist-info", "sglang-*.dist-info", "sgl_kernel-*.dist-info",
                      "flashinfer_python-*.dist-info", "flashinfer_jit_cache-*.dist-info", "_blackwell_gpu_node_env.py")
RUNS_FROM_VARIABLE = "BLACKWELL_GPU_NODE_RUNS_FROM"
# lib/pythonX.Y/site-packages/<entry>: how deep under lib the entries are looked for.
RUNS_FROM_DEPTH = 3
# What a launch's entry holds: where its log begins, and the process it was (start time in clock ticks since
# boot, the boot it ran in), which dates it against the kernel's log.
LAUNCH_FIELDS = ("pid", "start_time", "offset", "log_path", "started_at", "boot_id")


class InvalidOption(ValueError):
    """A problem with an option, its message naming the option and the fix."""


class BadState(ValueError):
    """A state file that this module cannot trust; its message names the file and what to do."""


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
    if params.get("enable_metrics"):
        argv.append("--enable-metrics")
    if params.get("api_key"):
        argv += ["--api-key", params["api_key"]]
    return argv + list(params.get("extra_args") or [])


def env_digest(env):
    return hashlib.sha256(json.dumps(env or {}, sort_keys=True).encode("utf-8")).hexdigest()


def normalized_environment(env, option):
    """(env with number values as strings, problems): YAML reads `NCCL_DEBUG: 1` as an integer, the process
    environment needs text; a boolean or a missing value is refused, as the text it should be is a guess."""
    values, problems = {}, []
    for name, value in sorted((env or {}).items()):
        if not ENVIRONMENT_NAME.fullmatch(u"%s" % name):
            problems.append("%s: %r is not an environment variable name (letters, digits and _, not starting "
                            "with a digit)" % (option, name))
        elif isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            problems.append("%s.%s=%r is not text or a number: quote the value the server should see, for "
                            "example '1' or 'true'" % (option, name, value))
        else:
            values[name] = u"%s" % (value,)
    return values, problems


def resolve_manager(requested, systemd_runtime_dir=SYSTEMD_RUNTIME_DIR):
    """(manager, why): `auto` is systemd where systemd is PID 1, else the module's own detached process."""
    if requested != "auto":
        return requested, "manager=%s was asked for" % requested
    if os.path.isdir(systemd_runtime_dir):
        return "systemd", "manager=auto: systemd is PID 1 here (%s exists)" % systemd_runtime_dir
    return "module", "manager=auto: systemd is not PID 1 here (no %s), so the module runs the server" % (
        systemd_runtime_dir)


def service_account(user, group=None, log_group=None):
    """(account, log_gid, problems): who the server runs as and the log's group id. account is None when user
    is None (the server runs as the module's own user, root). Its `groups` are the user's supplementary groups
    (membership of `video` or `render` may be what opens /dev/nvidia*), `home` where caches such as HF_HOME
    go."""
    problems, account, log_gid = [], None, None
    if user is not None:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            problems.append("user=%s does not exist on this host (sglang_server_user in the role): create it "
                            "first, with the role blackwell.gpu_node.service_user, or name an existing user"
                            % user)
        else:
            account = {"user": entry.pw_name, "uid": entry.pw_uid, "gid": entry.pw_gid, "home": entry.pw_dir,
                       "group": group_name(entry.pw_gid),
                       "groups": sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid)) - set([entry.pw_gid]))}
    if group is not None and user is None:
        problems.append("group=%s is given without user: name the user the server runs as" % group)
    elif group is not None:
        gid = _group_id(group, "group", "create it, or leave it unset for the user's own group", problems)
        if gid is not None and account is not None:
            account.update(gid=gid, group=group)
    if log_group is not None:
        log_gid = _group_id(log_group, "log_group", "create the group, or leave it unset", problems)
    return account, log_gid, problems


def _group_id(name, option, fix, problems):
    """The id of group name, or None with a problem naming the option (and the role's variable)."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        problems.append("%s=%s does not exist on this host (sglang_server_%s in the role): %s" % (
            option, name, option, fix))
        return None


def group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def secret_flag_problems(flags):
    return ["secret_flags: %r is not a long option such as --admin-api-key" % flag
            for flag in flags if not FLAG.fullmatch(u"%s" % flag)]


def name_problems(params):
    """Problems with the options that name files, for every state: they locate what is stopped too."""
    problems = control_character_problems([("name", params["name"]), ("state_dir", params["state_dir"])])
    if not INSTANCE_NAME.fullmatch(params["name"]) or ".." in params["name"]:
        problems.append("name=%r must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or "
                        "digit, without '..': it names files in state_dir and the unit sglang-<name>.service"
                        % params["name"])
    if path_kind(params["state_dir"]) not in (None, "directory"):
        problems.append("state_dir=%s is a %s: point state_dir at a directory (root writes there, and never "
                        "through a link)" % (params["state_dir"], path_kind(params["state_dir"])))
    return problems


def text_problems(params):
    """Control characters in every value that reaches the command line, the unit or an environment file."""
    speculative = params.get("speculative") or {}
    pairs = [(option, params[option]) for option in (
        "python", "venv_path", "model_path", "host", "attention_backend", "dist_init_addr", "api_key", "log_path",
        "systemd_unit_dir", "user", "group", "log_group", "logrotate_dir") if params.get(option) is not None]
    pairs += [("speculative.%s" % key, speculative[key]) for key in ("algorithm", "draft_model_path")
              if speculative.get(key) is not None]
    pairs += [("extra_args[%d]" % index, word) for index, word in enumerate(params.get("extra_args") or [])]
    pairs += [("secret_flags[%d]" % index, flag) for index, flag in enumerate(params.get("secret_flags") or [])]
    for option in ("env", "secret_env"):
        for name, value in sorted((params.get(option) or {}).items()):
            pairs += [("%s (a name)" % option, name), ("%s.%s" % (option, name), value)]
    return control_character_problems(pairs)


def path_kind(path):
    """None when path does not exist, else what it is, not following a link: `file`, `directory`, `symbolic
    link`, `FIFO`, `socket` or `device`."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    for test, kind in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "device"


def log_path_problem(log_path):
    kind = path_kind(log_path)
    if kind in (None, "file"):
        return None
    return ("log_path=%s is a %s: only a regular file (or a path that does not exist yet) is accepted as the "
            "server's log" % (log_path, kind))


class SystemdFailed(RuntimeError):
    pass


def systemctl(module, *args, **kwargs):
    """Run systemctl; SystemdFailed when it fails, unless check=False."""
    command = [module.get_bin_path("systemctl", required=True)] + list(args)
    rc, out, err = module.run_command(command)
    if rc != 0 and kwargs.get("check", True):
        raise SystemdFailed("%s failed (%d): %s" % (" ".join(command), rc, (err or out).strip()))
    return out


def observe_unit(module, unit):
    """What systemd says of the unit, in one call: under systemd the unit, not a pid, is the server."""
    return unit_status(systemctl(module, "show", "--property=" + ",".join(UNIT_PROPERTIES), unit))


def observe_recorded(module, instance):
    """(recorded state or None, whether that server runs, what systemd says of its unit or None). BadState,
    InvalidOption or SystemdFailed when the state cannot be trusted or systemd not asked."""
    recorded = instance.load()
    if recorded and recorded.get("manager") == "systemd":
        # Restarts by systemd, a reboot or `systemctl restart` give the unit another main pid: it is
        # still the same server.
        unit_state = observe_unit(module, recorded["unit"])
        recorded["pid"] = unit_state["pid"] or recorded["pid"]
        return recorded, unit_state["running"], unit_state
    return recorded, bool(recorded) and instance.running(recorded), None


def recorded_option(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def port_state(recorded, ours, host, port):
    """`ours` when our running server listens on port, else bind_state()."""
    if ours and recorded_option(recorded["argv"], "--port") == str(port):
        return "ours"
    return bind_state(host, port)


def bind_state(host, port):
    """`free` when host:port can be bound here, `in_use` when another socket has it; InvalidOption naming
    host when host does not resolve, or is not an address of this host."""
    try:
        addresses = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidOption("host=%s cannot be resolved (%s): give an address of this host or a name that "
                            "resolves to one" % (host, exc))
    family, kind, proto, _name, address = addresses[0]
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
        return "free"
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return "in_use"
        raise InvalidOption("host=%s port=%s cannot be bound on this host (%s): give an address of this host"
                            % (host, port, exc.strerror))
    finally:
        probe.close()


def check_options(params):
    """Every problem with the options of a launch, each naming the option; empty when all is well."""
    problems = []
    python = params["python"]
    if not (os.path.isabs(python) and os.path.isfile(python) and os.access(python, os.X_OK)):
        if params.get("venv_path"):
            problems.append("venv_path=%s has no executable bin/python or is not an absolute path: install the "
                            "stack there first (role blackwell.gpu_node.ml_stack), or point venv_path at the "
                            "virtualenv with the stack" % params["venv_path"])
        else:
            problems.append("python=%s is missing, not executable or not an absolute path: point it at the "
                            "virtualenv's bin/python" % python)
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
    if speculative:
        problems += speculative_problems(speculative, "speculative.")
        # A hub id for the model means the draft is one too: SGLang downloads both.
        draft = speculative.get("draft_model_path")
        draft_problem = draft and not params["model_is_hub_id"] and draft_model_problem(
            draft, "speculative.draft_model_path")
        if draft_problem:
            problems.append(draft_problem)
    log_problem = log_path_problem(params["log_path"])
    if log_problem:
        problems.append(log_problem)
    log_dir = nearest_existing(os.path.dirname(os.path.abspath(params["log_path"])))
    if not (os.path.isdir(log_dir) and os.access(log_dir, os.W_OK)):
        problems.append("log_path=%s: %s is not a writable directory" % (params["log_path"], log_dir))
    return problems


def nearest_existing(path):
    """path, or its nearest ancestor that exists (the log's directory is created when missing)."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def process_start_time(pid, proc_root="/proc"):
    """The kernel's start time of pid (clock ticks since boot), or None if it is gone.

    /proc/<pid>/stat is `pid (comm) state ...`; comm may hold spaces and parentheses, so the fields are
    split after the last `)`: the first is field 3 (state), starttime (field 22) is the 20th."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat")) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (IOError, OSError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def process_uid(pid, proc_root="/proc"):
    """The real uid of pid, or None if it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "status")) as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (IOError, OSError):
        return None
    return None


def process_argv(pid, proc_root="/proc"):
    """The command line of pid as a list, or None if it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as handle:
            raw = handle.read()
    except (IOError, OSError):
        return None
    return [word.decode("utf-8", "surrogateescape") for word in raw.split(b"\0")[:-1]]


def boot_id(path=BOOT_ID_PATH):
    """This boot's id: after a reboot, a pid with the same start time is another process."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


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


# Root writes as root: no write may follow a symbolic link that someone put where a file should be.
OPEN_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC


def open_directory(path, option, create_mode=None):
    """A descriptor of the directory path, its final component not a link; created with create_mode (and
    missing parents) when it does not exist and create_mode is given."""
    flags = os.O_RDONLY | os.O_DIRECTORY | OPEN_NO_LINK
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENOENT and create_mode is not None:
            os.makedirs(path, create_mode, exist_ok=True)
            return open_directory(path, option)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidOption("%s=%s is a %s: point %s at a directory (root never writes through a link)"
                                % (option, path, path_kind(path), option))
        raise


def write_atomically(directory_fd, name, content, mode):
    """Replace name in the directory with content: written to a new file of a random name (O_EXCL, so never
    through a link) and renamed over name, which replaces a link there rather than writing through it."""
    temporary = ".%s.%s.tmp" % (name, binascii.hexlify(os.urandom(8)).decode("ascii"))
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_NO_LINK, mode, dir_fd=directory_fd)
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        remove(directory_fd, temporary)
        raise


def read_text(directory_fd, name, limit=1 << 20):
    """The text of the regular file name in the directory, None when there is none (a link is not followed,
    and counts as none: it is replaced when the file is written)."""
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | OPEN_NO_LINK, dir_fd=directory_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            return None
        raise
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit).decode("utf-8", "replace")


def remove(directory_fd, name):
    """Remove name from the directory (a link itself, never its target); True when it was there."""
    try:
        os.unlink(name, dir_fd=directory_fd)
        return True
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        return False


def open_log(log_path, log_gid=None):
    """A descriptor appending to log_path, created 0640 when missing; an existing file keeps its mode less any
    permission for others (a log of an earlier version was 0644); its group log_gid when given. Both are set
    on the open descriptor, so never through a link.

    O_NONBLOCK, so that a FIFO put there cannot block the open; O_NOFOLLOW against links; anything but a
    regular file is refused naming log_path. Missing directories are created 0755."""
    log_dir = os.path.dirname(os.path.abspath(log_path))
    if not os.path.isdir(log_dir):
        os.makedirs(log_dir, 0o755, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | OPEN_NO_LINK
    try:
        descriptor = os.open(log_path, flags, 0o640)
    except OSError as exc:
        raise InvalidOption(log_path_problem(log_path) or "log_path=%s cannot be opened: %s" % (log_path, exc))
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise InvalidOption(log_path_problem(log_path) or "log_path=%s is not a regular file" % log_path)
    fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    mode = stat.S_IMODE(os.fstat(descriptor).st_mode)
    if mode & 0o007:
        os.fchmod(descriptor, mode & ~0o007)
    if log_gid is not None:
        os.fchown(descriptor, -1, log_gid)
    return descriptor


def log_offset(log_path, log_gid=None):
    """The log's size now, where the next server's lines will begin; the log is created when missing."""
    descriptor = open_log(log_path, log_gid)
    try:
        return os.lseek(descriptor, 0, os.SEEK_END)
    finally:
        os.close(descriptor)


class Instance(object):
    """The pid and state files of one named server, in state_dir (never written through a link)."""

    def __init__(self, state_dir, name):
        self.state_dir = state_dir
        self.name = name
        self.pid_path = os.path.join(state_dir, name + ".pid")
        self.state_path = os.path.join(state_dir, name + ".json")
        self.secret_env_name = name + ".secret.env"
        self.secret_env_path = os.path.join(state_dir, self.secret_env_name)
        # Kept when the server is stopped or forgotten: a crash is looked at after the next run cleaned up.
        self.launches_name = name + ".launches.json"
        self.launches_path = os.path.join(state_dir, self.launches_name)

    def directory(self, create=False):
        return open_directory(self.state_dir, "state_dir", 0o750 if create else None)

    def load(self):
        """The recorded state, None when there is none; BadState when the file cannot be trusted."""
        if path_kind(self.state_dir) is None:
            return None
        directory = self.directory()
        try:
            descriptor = os.open(self.name + ".json", os.O_RDONLY | os.O_NONBLOCK | OPEN_NO_LINK, dir_fd=directory)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise self.bad("it cannot be opened as a file (%s)" % exc.strerror)
        finally:
            os.close(directory)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise self.bad("it is not a regular file")
            with os.fdopen(descriptor, "rb") as handle:
                descriptor = None
                text = handle.read(1 << 20)
        finally:
            if descriptor is not None:
                os.close(descriptor)
        try:
            state = json.loads(text.decode("utf-8"))
        except ValueError as exc:
            raise self.bad("it is not JSON (%s)" % exc)
        problem = state_problem(state)
        if problem:
            raise self.bad(problem)
        return state

    def running(self, state, proc_root="/proc", boot=None, uid=None):
        """True when the recorded server runs: same pid, kernel start time and boot as at the launch. False
        when it is gone (its pid free or another process's since). BadState when a live process has the
        recorded pid and start time but is not the server this module started (another user than the recorded
        one, another command line): such a process is never signalled. A state written before boot ids and
        service users were recorded is still recognised by pid, start time, root and command line.

        SGLang retitles its child processes (`sglang::scheduler...`), not the process it was launched as, so
        the main process's command line must be the recorded argv; a `sglang::` title is accepted too, should
        a version retitle it."""
        if state.get("boot_id") and state["boot_id"] != (boot or boot_id()):
            return False
        if process_start_time(state["pid"], proc_root) != state["start_time"]:
            return False
        owner = process_uid(state["pid"], proc_root)
        # A state of a version before the service user has no uid: its server ran as the module's user, root.
        expected = state.get("uid", os.geteuid()) if uid is None else uid
        argv = process_argv(state["pid"], proc_root) or []
        if owner != expected:
            raise self.bad("pid %d runs as uid %s, not as uid %d that launched the server" % (
                state["pid"], owner, expected))
        if argv != state["argv"] and not (argv and argv[0].startswith("sglang::")):
            raise self.bad("pid %d runs %r, not the recorded server's command line" % (
                state["pid"], " ".join(argv)[:200]))
        return True

    def bad(self, problem):
        return BadState("The state file %s cannot be trusted: %s. Nothing was signalled or changed. Check "
                        "that no server of this instance runs, then remove %s and %s."
                        % (self.state_path, problem, self.state_path, self.pid_path))

    def save(self, state):
        directory = self.directory(create=True)
        try:
            write_atomically(directory, self.name + ".json", json.dumps(state, indent=2, sort_keys=True), 0o600)
            write_atomically(directory, self.name + ".pid", "%d\n" % state["pid"], 0o600)
        finally:
            os.close(directory)

    def launches(self):
        """The recorded launches, newest first; [] when there are none. An entry that is not a launch (a file
        edited by hand, cut off) is left out rather than trusted: nothing is signalled from this history."""
        if path_kind(self.state_dir) != "directory":
            return []
        directory = self.directory()
        try:
            text = read_text(directory, self.launches_name)
        finally:
            os.close(directory)
        try:
            entries = json.loads(text) if text else []
        except ValueError:
            return []
        if not isinstance(entries, list):
            return []
        return [entry for entry in entries if launch_problem(entry) is None][:LAUNCH_HISTORY]

    def record_launch(self, state):
        """Put the launch of state first in the history, which keeps the last LAUNCH_HISTORY."""
        entry = dict((key, state.get(key)) for key in LAUNCH_FIELDS)
        history = [entry] + self.launches()[:LAUNCH_HISTORY - 1]
        directory = self.directory(create=True)
        try:
            write_atomically(directory, self.launches_name, json.dumps(history, indent=2, sort_keys=True), 0o600)
        finally:
            os.close(directory)

    def write_secret_env(self, text):
        directory = self.directory(create=True)
        try:
            write_atomically(directory, self.secret_env_name, text, 0o600)
        finally:
            os.close(directory)

    def forget(self):
        """Remove the pid, state and secret environment files; the names of those that were there."""
        if path_kind(self.state_dir) is None:
            return []
        directory = self.directory()
        try:
            return [name for name in (self.name + ".pid", self.name + ".json", self.secret_env_name)
                    if remove(directory, name)]
        finally:
            os.close(directory)


def state_problem(state):
    """What makes a loaded state unusable, or None."""
    if not isinstance(state, dict):
        return "it holds no JSON object"
    for key, kinds in (("pid", int), ("start_time", int), ("argv", list), ("env_digest", str),
                       ("log_path", str), ("offset", int)):
        if isinstance(state.get(key), bool) or not isinstance(state.get(key), kinds):
            return "%s is missing or not of the right type" % key
    if not all(isinstance(word, str) for word in state["argv"]) or not state["argv"]:
        return "argv is not a command line"
    if state["pid"] <= 1:
        return "pid %d is not a server's (pid 1 is init, 0 and below are process groups)" % state["pid"]
    return None


def launch_problem(entry):
    """What makes an entry of the launch history unusable, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    for key, kinds in (("pid", int), ("start_time", int), ("offset", int), ("log_path", str)):
        if isinstance(entry.get(key), bool) or not isinstance(entry.get(key), kinds):
            return "%s is missing or not of the right type" % key
    if entry["offset"] < 0:
        return "offset is negative"
    return None


def server_environment(base, env, account):
    """The server's environment: base (the module's), the account's HOME, USER and LOGNAME (caches such as
    HF_HOME and Triton's go under HOME; root's would be refused to the user), then env, which wins."""
    environment = dict(base)
    if account is not None:
        environment.update(HOME=account["home"], USER=account["user"], LOGNAME=account["user"])
    environment.update(env or {})
    return environment


def launch(argv, env, log_path, account=None, log_gid=None):
    """Start argv detached (own session), stdout and stderr appended to log_path, which root opens (so it
    stays root's, 0640); the child drops to account (user, group, its supplementary groups) with umask 027
    before it runs argv."""
    log = open_log(log_path, log_gid)
    identity = {}
    if account is not None:
        identity = dict(user=account["uid"], group=account["gid"], extra_groups=account["groups"])
    try:
        offset = os.lseek(log, 0, os.SEEK_END)
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=server_environment(os.environ, env, account), start_new_session=True, close_fds=True,
            umask=SERVER_UMASK, cwd="/" if account is not None else None, **identity
        )
    finally:
        os.close(log)
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
# Words of these characters need no quotes in ExecStart= and Environment= (fullmatch: `$` accepts a trailing newline).
SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
SECRET_VARIABLE = "BLACKWELL_GPU_NODE_SECRET_ARG"


def systemd_quote(word, expands_variables=True):
    """One word of an ExecStart= line (expands_variables) or an Environment= assignment: `%` doubled, as
    systemd expands specifiers in both; where quotes are needed `\\` and `"` escaped (systemd unescapes C-style
    in quotes), and `$` doubled in ExecStart=, where systemd expands $VAR and ${VAR} (Environment= does not)."""
    escaped = word.replace("%", "%%")
    if SYSTEMD_PLAIN.fullmatch(word):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"')
    return '"%s"' % (escaped.replace("$", "$$") if expands_variables else escaped)


def systemd_path(path):
    """A path in EnvironmentFile= or StandardOutput=append:, which take the rest of the line as it is, after
    specifier expansion."""
    return path.replace("%", "%%")


# Hardening that CUDA, NCCL and SGLang's JIT compilers work under. Left out, on purpose:
# PrivateDevices= (hides /dev/nvidia*), DevicePolicy=closed (needs a DeviceAllow= for every nvidia device, and
# nvidia-caps, nvidia-uvm appear at run time), MemoryDenyWriteExecute= (Triton and flashinfer JIT-compile into
# writable, executable memory), SystemCallFilter= (the CUDA driver and NCCL use unusual system calls) and
# ProtectHome= (the virtualenv, the model or the user's HOME may be under /home).
HARDENING = (
    "NoNewPrivileges=yes",
    "ProtectSystem=full",
    "PrivateTmp=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectControlGroups=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "RestrictRealtime=yes",
)


def systemd_unit(name, argv, env, log_path, secret_env_path, service, secret_flags=SECRET_FLAGS):
    """The unit file text and the secret environment file's variables for argv and env.

    service holds `stop_timeout`, `restart_sec`, `start_limit_interval`, `start_limit_burst` and, for a
    server that does not run as root, `user` and `group` (systemd adds the user's supplementary groups from
    the group database, and sets HOME, USER and LOGNAME itself).

    Values of secret flags, in both spellings (`--api-key KEY`, `--api-key=KEY`), move to the secret
    environment file, which only root reads, and the unit refers to them as ${...}, which systemd expands
    when it starts the service."""
    words, secrets = [], {}
    for index, (word, shown) in enumerate(zip(argv, masked_argv(argv, secret_flags))):
        if word == shown:
            words.append(systemd_quote(word))
            continue
        variable = "%s_%d" % (SECRET_VARIABLE, index)
        flag, equals, value = word.partition("=")
        if equals and shown == flag + "=" + MASK:
            secrets[variable] = value
            words.append(systemd_quote(flag + "=") + "${%s}" % variable)
        else:
            secrets[variable] = word
            words.append("${%s}" % variable)
    lines = [
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        "[Unit]",
        "Description=SGLang server %s (blackwell.gpu_node)" % name,
        # On NVSwitch systems CUDA waits for Fabric Manager (error 802 until it runs), and every start pays the
        # driver's initialisation without the persistence daemon: a boot starts them first. After= alone orders
        # without pulling them in, so hosts without them are unaffected.
        "After=network-online.target nvidia-persistenced.service nvidia-fabricmanager.service",
        "Wants=network-online.target",
        # A server that fails again and again is given up after this many starts in this interval.
        "StartLimitIntervalSec=%d" % int(service["start_limit_interval"]),
        "StartLimitBurst=%d" % int(service["start_limit_burst"]),
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(words),
    ]
    lines += ["Environment=%s" % systemd_quote("%s=%s" % item, expands_variables=False)
              for item in sorted(env.items())]
    if service.get("user") is not None:
        lines += ["User=%s" % systemd_quote(service["user"]), "Group=%s" % systemd_quote(service["group"])]
    lines += [
        "UMask=%04o" % SERVER_UMASK,
        "EnvironmentFile=-%s" % systemd_path(secret_env_path),
        "StandardOutput=append:%s" % systemd_path(log_path),
        "StandardError=append:%s" % systemd_path(log_path),
        "Restart=on-failure",
        "RestartSec=%d" % int(service["restart_sec"]),
        "KillMode=control-group",
        "TimeoutStopSec=%d" % int(service["stop_timeout"]),
    ]
    lines += list(HARDENING) + [
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n", secrets


# The unit's properties that say whether it runs, since when, and how often systemd restarted it.
UNIT_PROPERTIES = ("MainPID", "ActiveState", "SubState", "NRestarts", "UnitFileState", "LoadState",
                   "ExecMainStartTimestampMonotonic")


def unit_status(show_output):
    """What `systemctl show -p <UNIT_PROPERTIES>` says, as a dict: `pid` (0 when none), `active_state`,
    `sub_state`, `restarts`, `enabled`, `loaded`, `started_monotonic`, `running` (active with a main pid)."""
    properties = {}
    for line in show_output.splitlines():
        key, _equals, value = line.partition("=")
        properties[key.strip()] = value.strip()

    def number(key):
        value = properties.get(key, "")
        return int(value) if value.isdigit() and value.isascii() else 0

    status = {"pid": number("MainPID"), "active_state": properties.get("ActiveState", "unknown"),
              "sub_state": properties.get("SubState", "unknown"), "restarts": number("NRestarts"),
              "enabled": properties.get("UnitFileState") == "enabled",
              "loaded": properties.get("LoadState") == "loaded",
              "started_monotonic": number("ExecMainStartTimestampMonotonic")}
    status["running"] = status["active_state"] in ("active", "reloading") and status["pid"] > 0
    return status


# logrotate reads a path as a glob, inside double quotes that it cannot escape.
LOGROTATE_UNSAFE = re.compile(r'[\s"\\*?\[\]{}]')


def logrotate_problem(log_path):
    found = LOGROTATE_UNSAFE.search(log_path)
    if found is None:
        return None
    return ("log_path=%s holds %r, which logrotate reads as a pattern, a quote or a separator: choose a log path "
            "without whitespace, quotes, backslashes, *, ?, [, ], { or }, or turn logrotate off" % (
                log_path, found.group()))


def logrotate_config(log_path, keep):
    """/etc/logrotate.d text for the log: weekly, or sooner past 200M; copytruncate keeps the file (and the
    descriptor the server writes to, which wait_for_server follows across the truncation)."""
    return "\n".join([
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        '"%s" {' % log_path,
        "    weekly",
        "    maxsize 200M",
        "    rotate %d" % int(keep),
        "    compress",
        "    delaycompress",
        "    missingok",
        "    notifempty",
        "    copytruncate",
        "}",
    ]) + "\n"


def runs_from(venv_path, max_entries=200000):
    """[[path, sha1 of a regular file's content or ""]] of the entries under venv_path/lib, at most
    RUNS_FROM_DEPTH levels down, links not followed, whose names match RUNS_FROM_PATTERNS, sorted by path.
    Raises InvalidOption when lib holds more than max_entries entries at those depths."""
    found, seen = [], 0
    level = [os.path.join(venv_path, "lib")]
    for _depth in range(RUNS_FROM_DEPTH):
        below = []
        for directory in level:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            seen += len(entries)
            if seen > max_entries:
                raise InvalidOption("venv_path=%s holds more than %d entries under lib/: point venv_path at the "
                                    "virtualenv with the stack" % (venv_path, max_entries))
            for entry in entries:
                path = os.path.normpath(entry.path)
                if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in RUNS_FROM_PATTERNS):
                    found.append([path, file_sha1(path) if entry.is_file(follow_symlinks=False) else ""])
                if entry.is_dir(follow_symlinks=False):
                    below.append(path)
        level = below
    return sorted(found)


def file_sha1(path):
    digest = hashlib.sha1()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def runs_from_digest(venv_path):
    """The digest of runs_from(venv_path), as the role computed it from ansible.builtin.find before the module
    did (sha256 of the JSON list), so a server started by an earlier version is not restarted for it."""
    return hashlib.sha256(json.dumps(runs_from(venv_path)).encode("utf-8")).hexdigest()


def foreign_writable(root, limit=20, max_entries=500000):
    """(owner uid of root, [problems], complete): root and the entries under it, links not followed, that a
    user other than root's owner (or root) can write: writable by group or others, or owned by another user.
    complete is False when the walk stopped early, at limit problems or max_entries entries."""
    owner = os.lstat(root).st_uid
    problems = []

    def check(path):
        try:
            info = os.lstat(path)
        except OSError:
            return
        if stat.S_ISLNK(info.st_mode):
            return
        if info.st_uid not in (owner, 0):
            problems.append("%s is owned by uid %d (%s)" % (path, info.st_uid, user_name(info.st_uid)))
        elif info.st_mode & 0o022:
            problems.append("%s is writable by its group or others (mode %04o)" % (path, stat.S_IMODE(info.st_mode)))

    check(root)
    seen = 1
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            check(os.path.join(directory, name))
            seen += 1
            if len(problems) >= limit or seen >= max_entries:
                return owner, problems, False
    return owner, problems, True


def environment_file(variables):
    """The text of a systemd EnvironmentFile= for variables: each value in double quotes, where systemd (like
    a POSIX shell) takes a backslash before `\\`, `"`, `$` and a backquote as keeping that character. Values
    hold no control characters (refused before), so each assignment is one line."""
    def quoted(value):
        return re.sub(r'([\\"$`])', r"\\\1", value)
    return "".join('%s="%s"\n' % (name, quoted(value)) for name, value in sorted(variables.items()))
