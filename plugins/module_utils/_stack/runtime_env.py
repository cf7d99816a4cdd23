# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Validate the runtime_env role's inputs and merge them into one environment.

Pure Python, no Ansible imports: the role's filter plugin is a thin shell over
``build_environment`` and the unit tests import this module directly.

``module_code`` writes the part of the rendered hook module that decides which values a process gets, so
that the rule "a value already in the environment wins, unless the name is forced" is ``apply_environment``
here, where the unit tests call it, and the rendered module runs the same source.

Every error names the role variable it comes from and what would be accepted,
and all problems are reported together so that one run shows every fix to make.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import inspect
import json
import os
import re
import stat as stat_module

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import family_of
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

# Both used with fullmatch: match with "$" would accept a trailing newline.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# ASCII only: str.isdigit() is also true for "²" and "١٦", which int() refuses or reads as other digits.
DIGITS = re.compile(r"[0-9]+")

NCCL_NTHREADS_ALLOWED = ("64", "128", "256", "512")
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")
NCCL_ALGORITHMS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")
# The names NCCL documents, and the integers 0-5 that older releases used for them.
NCCL_P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5")
NCCL_POSITIVE_INTEGERS = ("NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")

# Variables with an option of their own; runtime_env_extra_env may not set them,
# so that each value has exactly one place where it is decided.
DEDICATED = {
    "CUDA_HOME": "runtime_env_cuda_home",
    "TRITON_PTXAS_PATH": "runtime_env_triton_ptxas_path",
    "SGLANG_DISABLE_CUDNN_CHECK": "runtime_env_sglang_disable_cudnn_check",
    "FLASHINFER_DISABLE_VERSION_CHECK": "runtime_env_flashinfer_disable_version_check",
}


# runtime_env_nccl_profile's value that asks the host's topology for a profile.
AUTO_PROFILE = "auto"


class RuntimeEnvError(ValueError):
    """Raised with every problem found in the inputs, one per line."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(RuntimeEnvError, self).__init__("\n".join(self.problems))


def _as_text(value, where, problems):
    """Environment values are strings; numbers are accepted and converted.

    Every value ends up in the rendered Python module and in the server's environment, so one
    line of printable text only.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        problems.append(
            "%s: %r is a %s; an environment value must be a string or a number (quote it in YAML)"
            % (where, value, type(value).__name__)
        )
        return None
    text = str(value)
    problem = control_character_problem(text, where)
    if problem:
        problems.append(problem)
        return None
    return text


def _positive_integer(text):
    return DIGITS.fullmatch(text) is not None and int(text) > 0


def _check_choice_list(value, allowed, where, problems):
    """NCCL_PROTO / NCCL_ALGO style: comma-separated names, optionally led by '^' to exclude."""
    items = value[1:] if value.startswith("^") else value
    known = dict((name.lower(), name) for name in allowed)
    for item in items.split(","):
        if item.strip().lower() not in known:
            problems.append(
                "%s: %r is not one of %s (comma-separated, case-insensitive, a leading '^' excludes)"
                % (where, item.strip(), ", ".join(allowed))
            )


def _check_nccl_algo(value, where, problems):
    # NCCL 2.24+ also takes per-collective lists: "allreduce:tree,ring;broadcast:ring".
    for part in value.split(";"):
        algorithms = part.split(":", 1)[1] if ":" in part else part
        _check_choice_list(algorithms, NCCL_ALGORITHMS, where, problems)


def _check_nccl_value(name, value, where, problems):
    if name == "NCCL_NTHREADS" and value not in NCCL_NTHREADS_ALLOWED:
        problems.append("%s: %r is not one of %s" % (where, value, ", ".join(NCCL_NTHREADS_ALLOWED)))
    elif name in NCCL_POSITIVE_INTEGERS and not _positive_integer(value):
        problems.append("%s: %r is not a positive integer" % (where, value))
    elif name == "NCCL_PROTO":
        _check_choice_list(value, NCCL_PROTOCOLS, where, problems)
    elif name == "NCCL_ALGO":
        _check_nccl_algo(value, where, problems)
    elif name == "NCCL_P2P_LEVEL" and value.upper() not in NCCL_P2P_LEVELS:
        problems.append("%s: %r is not one of %s" % (where, value, ", ".join(NCCL_P2P_LEVELS)))


def _check_channels(nccl, where, problems):
    low, high = nccl.get("NCCL_MIN_NCHANNELS"), nccl.get("NCCL_MAX_NCHANNELS")
    if low and high and _positive_integer(low) and _positive_integer(high) and int(low) > int(high):
        problems.append(
            "%s: NCCL_MIN_NCHANNELS (%s) is larger than NCCL_MAX_NCHANNELS (%s)" % (where, low, high)
        )


def choose_nccl_profile(gpu):
    """(profile, reason) for runtime_env_nccl_profile=auto, from gpu_facts' ansible_facts.gpu.

    pcie_blackwell was tuned on 8 Blackwell GPUs that talk over PCIe only; where GPUs have NVLink
    or an NVSwitch fabric, or there is no peer to talk to, NCCL's own tuning knows better.
    """
    gpu = gpu or {}
    if gpu.get("state") != "ok" or not gpu.get("gpus"):
        return "none", (
            "no GPU visible (gpu_facts state: %s): NCCL's defaults; once the driver is up, the next run "
            "chooses again, or name a profile in runtime_env_nccl_profile" % gpu.get("state", "not gathered"))
    count = len(gpu["gpus"])
    if gpu.get("nvswitch"):
        return "none", "%d GPUs on an NVSwitch fabric: NCCL's defaults (NVLS, tree) suit it" % count
    if gpu.get("interconnect") == "nvlink":
        return "none", "%d GPUs with NVLink between them (%s): NCCL's defaults suit it" % (
            count, ", ".join("GPU%d-GPU%d NV%d" % tuple(pair) for pair in gpu.get("nvlink_pairs", [])))
    if count == 1:
        return "none", "one GPU: no peer for NCCL to tune for"
    if gpu.get("interconnect") != "pcie":
        return "none", "%d GPUs whose links nvidia-smi topo -m did not show: NCCL's defaults" % count
    families = sorted(set(str(family_of(item.get("compute_capability"))) for item in gpu["gpus"]))
    if families != ["blackwell"]:
        return "none", (
            "%d GPUs on PCIe only, of family %s: pcie_blackwell was tuned for Blackwell, NCCL's defaults"
            % (count, "/".join(families)))
    return "pcie_blackwell", "%d Blackwell GPUs on PCIe only, no NVLink: the profile tuned for that" % count


def _chosen_profile(profile, profiles, gpu, problems):
    """The profile's name and why it was chosen."""
    if isinstance(profiles, dict) and AUTO_PROFILE in profiles:
        problems.append("runtime_env_nccl_profiles.%s: the name is reserved for choosing by the host's GPUs; "
                        "rename that profile" % AUTO_PROFILE)
    if profile != AUTO_PROFILE:
        return profile, "named by runtime_env_nccl_profile"
    chosen, reason = choose_nccl_profile(gpu)
    if not isinstance(profiles, dict) or chosen not in profiles:
        problems.append("runtime_env_nccl_profile=auto chose %r (%s), which runtime_env_nccl_profiles lacks; "
                        "keep the shipped profiles when adding your own" % (chosen, reason))
        return None, reason
    return chosen, reason


def _nccl_environment(profile, profiles, overrides, problems):
    if profile is None:
        return {}
    if not isinstance(profiles, dict) or profile not in profiles:
        known = ", ".join(sorted(str(name) for name in profiles)) if isinstance(profiles, dict) else "none"
        problems.append(
            "runtime_env_nccl_profile: %r is not a known NCCL profile; known: %s, or %s to choose by the host's "
            "GPUs (add one to runtime_env_nccl_profiles)" % (profile, known, AUTO_PROFILE)
        )
        return {}
    layers = (
        ("runtime_env_nccl_profiles.%s" % profile, profiles[profile] or {}),
        ("runtime_env_nccl_overrides", overrides or {}),
    )
    nccl = {}
    for origin, layer in layers:
        if not isinstance(layer, dict):
            problems.append("%s: must be a mapping of NCCL variable names to values" % origin)
            continue
        for name, value in layer.items():
            where = "%s.%s" % (origin, name)
            if not ENV_NAME.fullmatch(str(name)) or not str(name).startswith("NCCL_"):
                problems.append("%s: only NCCL_* variables belong here; put others in runtime_env_extra_env" % where)
                continue
            if value is None:
                # null in an override removes the profile's value: NCCL's own default applies.
                nccl.pop(name, None)
                continue
            text = _as_text(value, where, problems)
            if text is not None:
                _check_nccl_value(name, text, where, problems)
                nccl[name] = text
    _check_channels(nccl, "runtime_env_nccl_profile/runtime_env_nccl_overrides", problems)
    return nccl


def _extra_environment(extra, problems):
    if not isinstance(extra, dict):
        problems.append("runtime_env_extra_env: must be a mapping of variable names to values")
        return {}
    result = {}
    for name, value in extra.items():
        where = "runtime_env_extra_env.%s" % name
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            problems.append(
                "%s: %r is not a valid environment variable name (letters, digits and '_', not starting with a digit)"
                % (where, name)
            )
        elif name in DEDICATED:
            problems.append("%s: set it with %s instead" % (where, DEDICATED[name]))
        elif name.startswith("NCCL_"):
            problems.append("%s: set NCCL variables with runtime_env_nccl_overrides instead" % where)
        else:
            text = _as_text(value, where, problems)
            if text is not None:
                result[name] = text
    return result


def _absolute_path(value, variable, problems):
    text = _as_text(value, variable, problems)
    if text is not None and not text.startswith("/"):
        problems.append("%s: %r must be an absolute path" % (variable, text))
    return text


def _forced(force, environment, problems):
    if not isinstance(force, list):
        problems.append("runtime_env_force: %r is not a list of variable names" % (force,))
        return []
    forced = []
    for name in force:
        if not isinstance(name, str) or name not in environment:
            problems.append(
                "runtime_env_force: %r is not a variable this role renders; rendered: %s"
                % (name, ", ".join(sorted(environment)))
            )
        elif name not in forced:
            forced.append(name)
    return sorted(forced)


def build_environment(
    cuda_home,
    triton_ptxas_path,
    nccl_profile,
    nccl_profiles,
    nccl_overrides=None,
    sglang_disable_cudnn_check=True,
    flashinfer_disable_version_check=True,
    extra_env=None,
    force=None,
    venv_path=None,
    gpu=None,
):
    """Return ``{"environment": {name: value}, "force": [names], "nccl_profile": {"name", "reason"}}``
    or raise RuntimeEnvError.

    ``gpu`` is gpu_facts' ``ansible_facts.gpu``, which ``nccl_profile`` ``auto`` chooses from.

    ``venv_path`` is not part of the environment; when given it is checked here because the role
    writes it into a comment of the rendered module.

    ``flashinfer_disable_version_check`` off means the variable is left out:
    flashinfer disables its check for ANY non-empty value, "0" included.
    """
    problems = []
    if venv_path is not None:
        _absolute_path(venv_path, "runtime_env_venv_path", problems)
    environment = {
        "CUDA_HOME": _absolute_path(cuda_home, "runtime_env_cuda_home", problems),
        "TRITON_PTXAS_PATH": _absolute_path(triton_ptxas_path, "runtime_env_triton_ptxas_path", problems),
    }
    profile, reason = _chosen_profile(nccl_profile, nccl_profiles, gpu, problems)
    environment.update(_nccl_environment(profile, nccl_profiles, nccl_overrides, problems))
    if sglang_disable_cudnn_check:
        environment["SGLANG_DISABLE_CUDNN_CHECK"] = "1"
    if flashinfer_disable_version_check:
        environment["FLASHINFER_DISABLE_VERSION_CHECK"] = "1"
    environment.update(_extra_environment(extra_env or {}, problems))

    forced = _forced([] if force is None else force, environment, problems)
    if problems:
        raise RuntimeEnvError(problems)
    return {
        "environment": dict(sorted(environment.items())),
        "force": forced,
        "nccl_profile": {"name": profile, "reason": reason},
    }


def apply_environment(environ, environment, force):
    """Set the rendered values in environ. A value already there wins, so that one run can still override it,
    except for the names in force, whose rendered value always replaces it."""
    for name, value in environment.items():
        if name in force or name not in environ:
            environ[name] = value


def module_code(settings):
    """The Python code of the rendered hook module that applies ``settings`` (what build_environment returns):
    the values, the forced names, and apply_environment's own source, which the module calls with os.environ.

    The module runs in the virtualenv's interpreter, which cannot import this collection, hence the copy of the
    source rather than an import. A JSON object of strings is also a valid Python literal, and build_environment
    refused every control character, so no value can end a line of the code."""
    return "ENVIRONMENT = %s\nFORCE = frozenset(%s)\n\n\n%s" % (
        json.dumps(settings["environment"], indent=4, sort_keys=True, ensure_ascii=False),
        json.dumps(sorted(settings["force"])),
        inspect.getsource(apply_environment),
    )


# What the role writes, and who owns it: root's, 0644 (render.yml), so that the virtualenv's owner cannot edit
# them in place and root never runs them.
MODULE_FILE = "_blackwell_gpu_node_env.py"
HOOK_FILE = "00-blackwell-gpu-node-env.pth"
RENDERED_MODE = 0o644
# The same search path the role's interpreter runs with (vars/main.yml), so that the inspection sees what it sees.
INSPECT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def venv_owner(stats, user_name):
    """The user that runs the virtualenv's interpreter, as preflight.yml picks it: the first of the stable path
    itself and the directory it names that is not root's, else root. ``stats`` are os.stat_result-like objects
    (lstat first), ``user_name(uid)`` returns the name or None. Returns ``(uid, name or None)``."""
    for stat in stats:
        if stat.st_uid != 0:
            return stat.st_uid, user_name(stat.st_uid)
    return 0, "root"


def inspect_argv(venv_path, owner_uid, owner_name, script, names):
    """The argv of the role's inspection (vars/main.yml's __runtime_env_inspect_argv): the virtualenv's
    interpreter as its owner, never as root, in an empty environment, reporting ``names``."""
    as_owner = ["runuser", "-u", owner_name, "--"] if owner_uid != 0 else []
    return as_owner + ["env", "-i", INSPECT_PATH, venv_path + "/bin/python", "-B", "-c", script] + list(names)


def unconverged_reasons(observed, environment, files):
    """Why the role would act on this host, or [] when everything it would write is in place and takes effect.

    ``observed``: what observe_venv found. ``environment``: the rendered environment (build_environment's
    ``environment``). ``files``: the content the role would write, by file name (MODULE_FILE, HOOK_FILE).
    Conservative: anything unexpected, or not observed, is a reason, and the role then runs every task as it
    always did (the checks that name the problem included)."""
    reasons = []
    if observed.get("error"):
        return [observed["error"]]
    venv = observed.get("venv") or {}
    if not venv.get("in_venv"):
        reasons.append("the interpreter does not run as a virtualenv")
    if venv.get("hook") is None:
        reasons.append("the hook does not import the environment module")
    seen = venv.get("environ") or {}
    for name, value in sorted(environment.items()):
        if seen.get(name) != value:
            reasons.append("%s is %r, not %r" % (name, seen.get(name), value))
    found = observed.get("files") or {}
    for name, content in sorted(files.items()):
        file = found.get(name)
        if file is None:
            reasons.append("%s is missing or not a regular file" % name)
        elif (file.get("uid"), file.get("gid"), file.get("mode")) != (0, 0, RENDERED_MODE):
            reasons.append("%s is not root's with mode 0644" % name)
        elif file.get("content") != content:
            reasons.append("%s differs from what the role renders" % name)
    return reasons


def _regular_file(path):
    """uid, gid, mode and text of a regular file (never followed through a link), or None."""
    try:
        found = os.lstat(path)
        if not stat_module.S_ISREG(found.st_mode):
            return None
        with open(path, "rb") as handle:
            content = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return {"uid": found.st_uid, "gid": found.st_gid, "mode": stat_module.S_IMODE(found.st_mode), "content": content}


def observe_venv(venv_path, script, names, run, user_name):
    """Everything unconverged_reasons needs, in one call on the host.

    ``run(argv)`` returns ``(rc, stdout, stderr)``; ``user_name(uid)`` the user's name or None. Anything that
    preflight.yml would refuse comes back as ``{"error": ...}``, and the role's own tasks then say it."""
    try:
        stats = [os.lstat(venv_path), os.stat(venv_path)]
    except OSError as exc:
        return {"error": "runtime_env_venv_path=%s: %s" % (venv_path, exc.strerror)}
    if not (os.path.isfile(os.path.join(venv_path, "pyvenv.cfg"))
            and os.access(os.path.join(venv_path, "bin", "python"), os.X_OK)):
        return {"error": "runtime_env_venv_path=%s is not a virtualenv" % venv_path}
    owner_uid, owner_name = venv_owner(stats, user_name)
    if owner_name is None:
        return {"error": "the virtualenv belongs to uid %d, which has no user" % owner_uid}
    rc, stdout, stderr = run(inspect_argv(venv_path, owner_uid, owner_name, script, names))
    try:
        venv = json.loads(stdout) if rc == 0 else None
    except ValueError:
        venv = None
    if not isinstance(venv, dict) or not isinstance(venv.get("purelib"), str):
        return {"error": "the virtualenv's interpreter did not report (exit status %d): %s" % (rc, stderr.strip())}
    files = {}
    for name in (MODULE_FILE, HOOK_FILE):
        found = _regular_file(os.path.join(venv["purelib"], name))
        if found is not None:
            files[name] = found
    return {"venv": venv, "files": files}
