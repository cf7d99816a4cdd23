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

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import described_user
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    open_resolved,
    read_regular,
    walk,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import owner_argv, venv_owner_uid
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import family_of
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.jit_caches import (
    CACHE_VARIABLES,
    cache_environment,
    plain_path_problem,
)

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


def gpu_links(gpu):
    """(links, count, families) of gpu_facts' ansible_facts.gpu: how the GPUs talk to each other, in the order that
    decides it: "unseen" (no GPU visible), "nvswitch", "nvlink", "single" (one GPU), "pcie", "unknown" (links
    nvidia-smi topo -m did not show); the number of GPUs; their families (platform.family_of), sorted."""
    gpu = gpu or {}
    if gpu.get("state") != "ok" or not gpu.get("gpus"):
        return "unseen", 0, []
    count = len(gpu["gpus"])
    families = sorted(set(str(family_of(item.get("compute_capability"))) for item in gpu["gpus"]))
    if gpu.get("nvswitch"):
        return "nvswitch", count, families
    if gpu.get("interconnect") == "nvlink":
        return "nvlink", count, families
    if count == 1:
        return "single", count, families
    if gpu.get("interconnect") != "pcie":
        return "unknown", count, families
    return "pcie", count, families


def choose_nccl_profile(gpu):
    """(profile, reason) for runtime_env_nccl_profile=auto, from gpu_facts' ansible_facts.gpu.

    pcie_blackwell was tuned on 8 Blackwell GPUs that talk over PCIe only; where GPUs have NVLink
    or an NVSwitch fabric, or there is no peer to talk to, NCCL's own tuning knows better.
    """
    gpu = gpu or {}
    links, count, families = gpu_links(gpu)
    if links == "unseen":
        return "none", (
            "no GPU visible (gpu_facts state: %s): NCCL's defaults; once the driver is up, the next run "
            "chooses again, or name a profile in runtime_env_nccl_profile" % gpu.get("state", "not gathered"))
    if links == "nvswitch":
        return "none", "%d GPUs on an NVSwitch fabric: NCCL's defaults (NVLS, tree) suit it" % count
    if links == "nvlink":
        return "none", "%d GPUs with NVLink between them (%s): NCCL's defaults suit it" % (
            count, ", ".join("GPU%d-GPU%d NV%d" % tuple(pair) for pair in gpu.get("nvlink_pairs", [])))
    if links == "single":
        return "none", "one GPU: no peer for NCCL to tune for"
    if links == "unknown":
        return "none", "%d GPUs whose links nvidia-smi topo -m did not show: NCCL's defaults" % count
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


def _extra_environment(extra, optional, problems):
    """The variables of runtime_env_extra_env. optional: {name: variable} of the names that an option of their own
    renders in this run; set to null, that option leaves its names to runtime_env_extra_env."""
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
        elif name in optional:
            problems.append("%s: %s renders it; set that instead, or set %s to null to set %s here"
                            % (where, optional[name], optional[name], name))
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


def _home_independent(cache_root, hf_home, stack_profile, problems):
    """(variables, cache, optional): the JIT caches' variables and directories (jit_caches.cache_environment),
    HF_HOME, and {name: option} of the names they render."""
    variables, cache = cache_environment(cache_root, stack_profile, problems)
    optional = dict((name, "runtime_env_cache_root") for name in CACHE_VARIABLES) if cache_root is not None else {}
    if hf_home is not None:
        problem = plain_path_problem(hf_home, "runtime_env_hf_home")
        if problem:
            problems.append(problem)
        variables["HF_HOME"] = hf_home
        optional["HF_HOME"] = "runtime_env_hf_home"
    return variables, cache, optional


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
    cache_root=None,
    hf_home=None,
    stack_profile=None,
):
    """Return ``{"environment": {name: value}, "force": [names], "nccl_profile": {"name", "reason"}, "cache": {"root",
    "directories"}}`` or raise RuntimeEnvError.

    ``gpu`` is gpu_facts' ``ansible_facts.gpu``, which ``nccl_profile`` ``auto`` chooses from.

    ``cache_root`` (None: none) holds a directory per stack profile (``stack_profile``, the stack role's
    stack_selected) for the JIT caches, and ``hf_home`` (None: none) is HF_HOME: both independent of HOME, which a
    service user may lack. ``cache`` says which directories the role keeps, relative to the root.

    ``venv_path`` is part neither of the environment nor of the rendered text; when given it is checked here, so
    that one run reports its problems with the other inputs'.

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
    home_independent, cache, optional = _home_independent(cache_root, hf_home, stack_profile, problems)
    environment.update(home_independent)
    environment.update(_extra_environment(extra_env or {}, optional, problems))

    forced = _forced([] if force is None else force, environment, problems)
    if problems:
        raise RuntimeEnvError(problems)
    return {
        "environment": dict(sorted(environment.items())),
        "force": forced,
        "nccl_profile": {"name": profile, "reason": reason},
        "cache": cache,
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


# The module the role renders, by the name its hook imports it by, and the hook: a .pth file, which site runs as
# each interpreter of the virtualenv starts.
MODULE_NAME = "_blackwell_gpu_node_env"
MODULE_FILE = MODULE_NAME + ".py"
HOOK_FILE = "00-blackwell-gpu-node-env.pth"


def files_to_render(module_text):
    """What the role writes into the virtualenv's site-packages, by file name: the module its template rendered
    (module_text) and the hook that imports it.

    Declared here once: the role writes exactly these (its runtime_environment_files filter), the check reads them
    at these names (observe_venv), and a change of any in RESTARTING_FILES restarts the server (the sglang domain's
    runs_from)."""
    return {MODULE_FILE: module_text, HOOK_FILE: "import %s\n" % MODULE_NAME}


RENDERED_FILES = tuple(sorted(files_to_render("")))
# The hook's text follows from the module's name alone, which is the module file's name and so in the digest
# already; leaving it out keeps the digest every running server was started with, which would otherwise restart
# each of them once, outside any drain.
RESTARTING_FILES = tuple(name for name in RENDERED_FILES if name != HOOK_FILE)
# Who owns what the role writes: root, 0644, so that the virtualenv's owner cannot edit them in place and root
# never runs them (the interpreter that imports them runs as the owner).
RENDERED_MODE = 0o644
RENDERED_OWNER = (0, 0)
# The rendered files are a few KiB; anything larger at their names is not the role's.
RENDERED_LIMIT = 1 << 20
# Where a virtualenv's site-packages is, below the virtualenv: what root writes into, and nowhere else.
SITE_PACKAGES = re.compile(r"lib/python3\.[0-9]{1,3}/site-packages")
OPTION = "runtime_env_venv_path"


class VenvRefused(ValueError):
    """The virtualenv cannot be rendered into: the message names runtime_env_venv_path, what is wrong and the fix."""


def inspect_argv(venv_path, owner_uid, script, names):
    """The argv of the inspection: the virtualenv's interpreter as its owner, never as root, in an empty
    environment, reporting ``names``."""
    return owner_argv(owner_uid, [venv_path + "/bin/python", "-B", "-c", script] + list(names), OPTION)


def site_packages_below(venv_path, real_path, purelib):
    """purelib relative to the virtualenv (named by venv_path or by its real path), when it is its
    lib/python3.N/site-packages; None otherwise: an interpreter whose sysconfig a .pth or sitecustomize of the
    owner's changed can name any directory, and root writes into none but that one."""
    for base in (venv_path.rstrip("/"), real_path):
        if isinstance(purelib, str) and purelib.startswith(base + "/"):
            relative = purelib[len(base) + 1:]
            if SITE_PACKAGES.fullmatch(relative):
                return relative
    return None


def open_site_packages(venv_path, relative, owner_uid):
    """A descriptor of the virtualenv's site-packages: the virtualenv resolved once and walked without following a
    link from /, then relative walked without following one. The virtualenv and every level below it belong to
    owner_uid or root; VenvRefused otherwise (a link the owner repointed at a directory of root's or of another
    user's, a level swapped for a link)."""
    try:
        root_fd, real = open_resolved(venv_path, OPTION)
    except InvalidOption as exc:
        raise VenvRefused(str(exc))
    try:
        owner = os.fstat(root_fd).st_uid
        if owner != owner_uid:
            raise VenvRefused("%s=%s names %s, which belongs to %s, not to the virtualenv's owner %s: root renders "
                              "only into a virtualenv its owner owns. Point %s at the virtualenv (ml_stack's stable "
                              "link, or the directory itself)" % (OPTION, venv_path, real, described_user(owner),
                                                                  described_user(owner_uid), OPTION))
        try:
            descriptor, levels = walk(root_fd, relative, OPTION)
        except (OSError, InvalidOption) as exc:
            raise VenvRefused("%s=%s: %s/%s cannot be reached without following a link (%s): find out who changed "
                              "it" % (OPTION, venv_path, real, relative, exc))
    finally:
        os.close(root_fd)
    names = [name for name, _uid, _gid, _mode in levels]
    strangers = ["/".join(names[:index + 1]) for index, (_name, uid, _gid, _mode) in enumerate(levels)
                 if uid not in (owner_uid, 0)]
    if strangers:
        os.close(descriptor)
        raise VenvRefused("%s=%s: %s below the virtualenv belongs to another user than its owner %s; root renders "
                          "only into the owner's tree" % (OPTION, venv_path, ", ".join(strangers),
                                                          described_user(owner_uid)))
    return descriptor


def rendered_files(directory_fd, names):
    """({name: {"uid", "gid", "mode", "content"}} of the names that are regular files in the directory, [names that
    are something else there: a link, a directory, a FIFO, a file over RENDERED_LIMIT])."""
    files, not_regular = {}, []
    for name in names:
        try:
            found = read_regular(name, RENDERED_LIMIT, directory_fd)
        except InvalidOption:
            not_regular.append(name)
            continue
        if found is not None:
            data = found.pop("data")
            found.pop("size")
            found["content"] = data.decode("utf-8", "replace")
            files[name] = found
    return files, not_regular


def suspect_startup_files(venv_path):
    """The .pth files of the virtualenv's lib/python3.N/site-packages that are not regular files of at most
    RENDERED_LIMIT bytes: its interpreter reads each one whole as it starts, so a FIFO blocks it and a link to
    /dev/zero makes it read without end. Only named when the interpreter did not report; nothing is read."""
    suspects = []
    lib = os.path.join(venv_path, "lib")
    for series in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        site = os.path.join(lib, series, "site-packages")
        if not SITE_PACKAGES.fullmatch("lib/%s/site-packages" % series) or not os.path.isdir(site):
            continue
        with os.scandir(site) as entries:
            for entry in entries:
                if entry.name.endswith(".pth") and not (entry.is_file(follow_symlinks=False)
                                                        and entry.stat(follow_symlinks=False).st_size <= RENDERED_LIMIT):
                    suspects.append(os.path.join(site, entry.name))
    return sorted(suspects)


def _inspect(venv_path, owner_uid, script, names, run):
    rc, stdout, stderr = run(inspect_argv(venv_path, owner_uid, script, names))
    try:
        venv = json.loads(stdout) if rc == 0 else None
    except ValueError:
        venv = None
    if not isinstance(venv, dict) or not all(key in venv for key in ("in_venv", "purelib", "hook", "environ")) \
            or not isinstance(venv["environ"], dict):
        suspects = suspect_startup_files(venv_path)
        raise VenvRefused("the virtualenv's interpreter did not report (exit status %d): %s%s" % (
            rc, stderr.strip()[-2000:], "" if not suspects else
            ". It reads every .pth file of site-packages whole as it starts, and these are not small regular files "
            "(a FIFO blocks it, a link to /dev/zero never ends): %s; find out who put them there and remove them"
            % ", ".join(suspects)))
    return venv


def observe_venv(venv_path, script, names, run):
    """Everything unconverged_reasons needs, in one call on the host: the interpreter's report (run as the
    virtualenv's owner), where its site-packages is, and the rendered files found there.

    ``run(argv)`` returns ``(rc, stdout, stderr)``. What the role must refuse comes back as ``{"error": ...}``."""
    try:
        owner_uid = venv_owner_uid(venv_path)
    except InvalidOption as exc:
        return {"error": str(exc)}
    cfg, python = os.path.join(venv_path, "pyvenv.cfg"), os.path.join(venv_path, "bin", "python")
    if not (os.path.isfile(cfg) and os.access(python, os.X_OK)):
        return {"error": "%s=%s is not a virtualenv: it needs pyvenv.cfg (%s) and an executable bin/python (%s). "
                         "Create it first (the ml_stack role does, or python3 -m venv %s)" % (
                             OPTION, venv_path, "found" if os.path.isfile(cfg) else "missing",
                             "found" if os.access(python, os.X_OK) else "missing", venv_path)}
    try:
        venv = _inspect(venv_path, owner_uid, script, names, run)
    except (VenvRefused, InvalidOption) as exc:
        return {"error": str(exc)}
    if not venv["in_venv"]:
        return {"error": "%s/bin/python does not run as a virtualenv (sys.prefix equals sys.base_prefix %s); point "
                         "%s at a virtualenv" % (venv_path, venv.get("prefix"), OPTION)}
    relative = site_packages_below(venv_path, os.path.realpath(venv_path), venv["purelib"])
    if relative is None:
        return {"error": "the interpreter of %s=%s says its site-packages is %s, not the virtualenv's own "
                         "lib/python3.N/site-packages: something in the virtualenv (a .pth file, a sitecustomize.py) "
                         "changes sysconfig's paths. Root renders nowhere but into the virtualenv; find what does "
                         "it and remove it" % (OPTION, venv_path, venv["purelib"])}
    try:
        directory = open_site_packages(venv_path, relative, owner_uid)
    except VenvRefused as exc:
        return {"error": str(exc)}
    try:
        files, not_regular = rendered_files(directory, RENDERED_FILES)
    finally:
        os.close(directory)
    return {"venv": venv, "owner": owner_uid, "site_packages": relative, "files": files, "not_regular": not_regular}


def unconverged_reasons(observed, environment, files):
    """Why the role would act on this host, or [] when everything it would write is in place and takes effect.

    ``observed``: what observe_venv found. ``environment``: the rendered environment (build_environment's
    ``environment``). ``files``: the content the role would write, by file name (files_to_render).
    Conservative: anything unexpected, or not observed, is a reason."""
    if observed.get("error"):
        return [observed["error"]]
    venv = observed["venv"]
    module_path = "%s/%s" % (venv["purelib"], MODULE_FILE)
    reasons = [] if venv.get("hook") == module_path else [
        "the hook does not import the environment module %s (imported: %s)" % (module_path, venv.get("hook"))]
    seen = venv.get("environ") or {}
    for name, value in sorted(environment.items()):
        if seen.get(name) != value:
            reasons.append("%s is %r, not %r" % (name, seen.get(name), value))
    found = observed.get("files") or {}
    for name, content in sorted(files.items()):
        file = found.get(name)
        if file is None:
            reasons.append("%s is missing or not a regular file" % name)
        elif (file.get("uid"), file.get("gid"), file.get("mode")) != RENDERED_OWNER + (RENDERED_MODE,):
            reasons.append("%s is not root's with mode 0644" % name)
        elif file.get("content") != content:
            reasons.append("%s differs from what the role renders" % name)
    return reasons


def to_write(venv_path, observed, files):
    """The names of files whose content, owner or mode differ from what the role renders, in name order;
    VenvRefused when something other than a regular file is at one of their names (root neither writes through
    it nor removes what someone else planted)."""
    if observed["not_regular"]:
        raise VenvRefused("%s in the virtualenv %s=%s %s not a regular file (a link, a directory or a FIFO); the "
                          "role writes there as root and does not write through it. This role never creates one: "
                          "find out who did, remove it, and run again" % (
                              ", ".join("%s/%s" % (observed["venv"]["purelib"], name)
                                        for name in sorted(observed["not_regular"])),
                              OPTION, venv_path,
                              "is" if len(observed["not_regular"]) == 1 else "are"))
    found = observed["files"]
    return [name for name in sorted(files)
            if found.get(name) is None or found[name]["content"] != files[name]
            or (found[name]["uid"], found[name]["gid"], found[name]["mode"]) != RENDERED_OWNER + (RENDERED_MODE,)]


def render(venv_path, observed, files, names, written):
    """Write the names of files (their content by name) into the site-packages observe_venv found, root's and
    0644, each atomically through the directory's descriptor; each name is appended to written once it is."""
    directory = open_site_packages(venv_path, observed["site_packages"], observed["owner"])
    try:
        for name in names:
            write_atomically(directory, name, files[name], RENDERED_MODE, RENDERED_OWNER)
            written.append(name)
    finally:
        os.close(directory)


def effect_problem(venv, venv_path, environment, module_path):
    """Why the rendered environment does not take effect in what the interpreter reported after the render, or
    None: the hook is the rendered module, and every variable has its rendered value."""
    different = ["%s=%s -> %s" % (name, value, venv["environ"].get(name))
                 for name, value in sorted(environment.items()) if venv["environ"].get(name) != value]
    if venv.get("hook") == module_path and not different:
        return None
    hook = "" if venv.get("hook") == module_path else (
        " The hook did not import %s (it imported %s): is the interpreter started with -S, or are .pth files "
        "disabled?" % (module_path, venv.get("hook")))
    return ("The rendered environment does not take effect in %s.%s Variables missing or different (expected -> "
            "seen): %s. Something that runs after the hook (a sitecustomize.py, another .pth file) may overwrite "
            "them." % (venv_path, hook, "; ".join(different) or "none"))


def verify(venv_path, observed, script, environment, run):
    """Run the interpreter again as the owner and return effect_problem for what it reports."""
    venv = _inspect(venv_path, observed["owner"], script, list(environment), run)
    return effect_problem(venv, venv_path, environment, observed["venv"]["purelib"] + "/" + MODULE_FILE), venv
