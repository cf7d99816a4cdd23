# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The sglang_server module's options: the launch command, and every check before a launch."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import grp
import hashlib
import json
import os
import re
import socket

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account, group_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import (
    log_path_problem as detached_log_path_problem,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    nearest_existing,
    path_kind,
    trusted_directory,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problems
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.speculative import (
    draft_model_problem,
    problems as speculative_problems,
)

# Names a pid, state and secret file in state_dir and the unit sglang-<name>.service: no path separator,
# no "..", no systemd specifier (%) or template marker (@), short enough for a unit name.
INSTANCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*")


# How the release starts its server (the stack profile's python.sglang.entrypoint): `python -m
# sglang.launch_server`, or `sglang serve`, which SGLang recommends from 0.5.10 on (launch_server warns so).
ENTRYPOINTS = ("launch_server", "serve")


def serve_script(python):
    """SGLang's console script `sglang` (sglang.cli.main:main), beside the virtualenv's interpreter."""
    return os.path.join(os.path.dirname(python), "sglang")


def entrypoint_argv(python, entrypoint):
    """The words that start the server, before its flags.

    `sglang serve` has no `python -m` form: SGLang's CLI module (sglang.cli.main) runs nothing as __main__. So the
    virtualenv's interpreter runs the console script's file. Run directly, the script would show the interpreter
    of its shebang first in the process's command line, which would then never be the recorded argv that
    recognises the server, and the kernel would name the process `sglang` rather than after its interpreter; run
    this way the interpreter is the virtualenv's whatever the shebang says, and argv is the process's own."""
    if entrypoint == "serve":
        return [python, serve_script(python), "serve"]
    return [python, "-m", "sglang.launch_server"]


def build_argv(params):
    """The launch command as a list, from the module's options."""
    argv = entrypoint_argv(params["python"], params["entrypoint"]) + [
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


def service_account(user, group=None, log_group=None):
    """(account, log_gid, problems): who the server runs as and the log's group id. account is None when user
    is None (the server runs as the module's own user, root). Its `groups` are the user's supplementary groups
    (membership of `video` or `render` may be what opens /dev/nvidia*), `home` where caches such as HF_HOME
    go."""
    problems, found, log_gid = [], None, None
    if user is not None:
        found = account(user)
        if found is None:
            problems.append("user=%s does not exist on this host (sglang_server_user in the role): create it "
                            "first, with the role blackwell.gpu_node.service_user, or name an existing user"
                            % user)
        else:
            found["group"] = group_name(found["gid"])
    if group is not None and user is None:
        problems.append("group=%s is given without user: name the user the server runs as" % group)
    elif group is not None:
        gid = _group_id(group, "group", "create it, or leave it unset for the user's own group", problems)
        if gid is not None and found is not None:
            found.update(gid=gid, group=group)
    if log_group is not None:
        log_gid = _group_id(log_group, "log_group", "create the group, or leave it unset", problems)
    return found, log_gid, problems


def _group_id(name, option, fix, problems):
    """The id of group name, or None with a problem naming the option (and the role's variable)."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        problems.append("%s=%s does not exist on this host (sglang_server_%s in the role): %s" % (
            option, name, option, fix))
        return None


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


def log_path_problem(log_path):
    return detached_log_path_problem(log_path, "the server")


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
    elif params["entrypoint"] == "serve" and not os.path.isfile(serve_script(python)):
        problems.append("entrypoint=serve, but %s is missing: the SGLang release beside python=%s has no `sglang "
                        "serve`; install the release of the stack profile there (role blackwell.gpu_node.ml_stack), "
                        "or set entrypoint=launch_server (sglang_server_entrypoint in the role)"
                        % (serve_script(python), python))
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
    else:
        # What open_log requires at the launch, checked before anything changes (and in check mode): the log's
        # nearest existing directory is root's at every level and writable by root alone; levels below it are
        # created so.
        try:
            os.close(trusted_directory(log_dir, "log_path"))
        except InvalidOption as exc:
            problems.append(str(exc))
    return problems
