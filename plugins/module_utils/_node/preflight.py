# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The preflight role's decisions: given what was observed on a host and what the inventory says,
every problem (each naming the variable and the fix), the notes worth a warning, and a summary of
what was checked. Pure, so that recorded hosts test it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import os
import stat

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.driver import parse_installed
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.fabric import (
    FABRIC_MANAGER,
    SUBNET_MANAGER,
    SUBNET_MANAGER_NVLINK,
    decision,
    version_problems,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import FAMILY_NAMES, family_of, os_id
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.cuda_compat import compat_wanted
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_health import (
    QUICK_DCGM_LEVEL,
    check_options,
    describe,
    findings_of,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.gpus import fits, gpus_needed, visible_gpus
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import (
    adopted,
    observe_tree,
    torch_from_problems,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import profile_virtualenv


# What to do about a host whose GPUs cannot be seen, by gpu_facts state.
GPU_STATE_FIXES = {
    "no_nvidia_smi": "Install the NVIDIA driver (role blackwell.gpu_node.cuda with cuda_driver_install: true).",
    "no_driver": "If the driver was just installed or updated, reboot; otherwise see `dmesg | grep -i nvrm`.",
    "driver_mismatch": "The loaded kernel module and the driver's libraries differ, as after a driver update: reboot.",
    "no_gpu": "Check that the GPUs are seated and visible (lspci | grep -i nvidia).",
    "error": "Run nvidia-smi on the host to see why it fails.",
}

GIB = 1024 ** 3

# Where Debian and Ubuntu announce a pending reboot, and the packages that asked for it.
REBOOT_REQUIRED = "/var/run/reboot-required"

# The one inventory setting that decides which GPU health findings refuse a node, here, in the upgrade and in the
# health playbook.
GPU_HEALTH_SETTING = "preflight_gpu_health_severity_overrides"


def driver_branch(driver_version):
    branch, dot, _rest = (driver_version or "").partition(".")
    return bounded_int(branch) if dot else None


class Report(object):
    def __init__(self):
        self.problems = []
        self.notes = []
        self.checked = []

    def as_dict(self):
        return dict(problems=self.problems, notes=self.notes, checked=self.checked, ok=not self.problems)


def check_platform(report, profile, observed):
    host_os, arch = os_id(observed["distribution"], observed["distribution_version"]), observed["architecture"]
    supported = "%s on %s" % (", ".join(profile["operating_systems"]), ", ".join(profile["architectures"]))
    if host_os not in profile["operating_systems"] or arch not in profile["architectures"]:
        report.problems.append(
            "This host runs %s on %s, but stack profile %s supports %s (stack_profiles.%s.operating_systems and "
            ".architectures): use a supported host, or another stack_profile." % (
                host_os, arch, profile["name"], supported, profile["name"]))
    else:
        report.checked.append("%s on %s is supported by stack profile %s" % (host_os, arch, profile["name"]))


def reboot_pending(gpu, reboot_required_packages, reboot_required):
    """Why the host needs a reboot before its GPUs work as installed, or [] when it does not."""
    reasons = []
    loaded, installed = gpu.get("kernel_module_version"), gpu.get("kernel_module_installed_version")
    if gpu.get("state") == "driver_mismatch":
        reasons.append("the loaded NVIDIA kernel module and the driver's libraries differ (%s)" % gpu.get("message"))
    if installed and loaded and installed != loaded:
        reasons.append("NVIDIA kernel module %s is installed but %s is loaded" % (installed, loaded))
    if installed and not loaded:
        reasons.append("NVIDIA kernel module %s is installed but not loaded" % installed)
    nvidia_packages = [name for name in reboot_required_packages if "nvidia" in name]
    if reboot_required and nvidia_packages:
        reasons.append("/var/run/reboot-required names %s" % ", ".join(nvidia_packages))
    return reasons


def check_gpus(report, settings, profile, gpu):
    gpus = gpu["gpus"]
    names = sorted(set(item["name"] for item in gpus))
    families = dict((item["index"], family_of(item["compute_capability"])) for item in gpus)
    report.checked.append("%d GPU(s): %s, compute capability %s" % (
        len(gpus), ", ".join(names), ", ".join(sorted(set(item["compute_capability"] or "?" for item in gpus)))))

    branch, minimum = driver_branch(gpu["driver_version"]), profile["cuda"]["driver_branch_min"]
    # Every profile states its own minimum: the variable names the field to change in a profile of one's own.
    found = "%s (branch %s)" % (gpu["driver_version"], "unknown" if branch is None else branch)
    needs = "branch %d, which CUDA %s of stack profile %s needs (stack_profiles.%s.cuda.driver_branch_min=%d)" % (
        minimum, profile["cuda"]["series"], profile["name"], profile["name"], minimum)
    if (branch is None or branch < minimum) and settings.get("driver_install"):
        # The cuda role installs the profile's branch later in the same run: refusing the host here would
        # stop the very run that fixes it.
        report.notes.append(
            "Driver %s will be replaced by %s, as cuda_driver_install is true; the server can start only after the "
            "reboot that loads it." % (found, needs))
    elif branch is None or branch < minimum:
        report.problems.append(
            "Driver %s is older than %s: install driver branch %d or newer (role blackwell.gpu_node.cuda with "
            "cuda_driver_install: true) and reboot, or choose a stack_profile whose cuda.driver_branch_min this "
            "driver meets." % (found, needs, minimum))
    else:
        report.checked.append("driver %s (branch %d >= %d for CUDA %s)" % (
            gpu["driver_version"], branch, minimum, profile["cuda"]["series"]))

    blackwell = [index for index, family in families.items() if family == "blackwell"]
    if blackwell and gpu.get("kernel_module") == "proprietary" and settings.get("driver_install"):
        report.notes.append(
            "The proprietary kernel module is loaded, which Blackwell GPUs cannot use; it will be replaced by the open "
            "one (nvidia-open, cuda_driver_install: true) and loaded by the reboot after it.")
    elif blackwell and gpu.get("kernel_module") == "proprietary":
        report.problems.append(
            "Blackwell GPUs need NVIDIA's open kernel modules, but the proprietary one is loaded: install the open "
            "flavour (role blackwell.gpu_node.cuda with cuda_driver_install: true installs nvidia-open) and reboot.")
    elif gpu.get("kernel_module"):
        report.checked.append("%s kernel module" % gpu["kernel_module"])

    expected_family = settings.get("expected_gpu_family")
    if expected_family and expected_family not in FAMILY_NAMES:
        report.problems.append("preflight_expected_gpu_family=%s is not a GPU family; choose among %s." % (
            expected_family, ", ".join(FAMILY_NAMES)))
    elif expected_family:
        wrong = ["GPU%d is %s (compute capability %s, %s)" % (
            item["index"], item["name"], item["compute_capability"], families[item["index"]] or "unknown family")
            for item in gpus if families[item["index"]] != expected_family]
        if wrong:
            report.problems.append(
                "preflight_expected_gpu_family=%s, but %s: fix preflight_expected_gpu_family in the inventory, or "
                "run against the right hosts." % (expected_family, "; ".join(wrong)))
        else:
            report.checked.append("GPU family %s as expected" % expected_family)

    expected_cc = settings.get("expected_compute_capability")
    if expected_cc:
        wrong = ["GPU%d has %s" % (item["index"], item["compute_capability"])
                 for item in gpus if item["compute_capability"] != expected_cc]
        if wrong:
            report.problems.append(
                "preflight_expected_compute_capability=%s, but %s: fix preflight_expected_compute_capability in the "
                "inventory, or run against the right hosts." % (expected_cc, ", ".join(wrong)))
        else:
            report.checked.append("compute capability %s as expected" % expected_cc)

    expected_count = settings.get("expected_gpu_count")
    if expected_count is not None and expected_count != len(gpus):
        report.problems.append(
            "preflight_expected_gpu_count=%d, but the driver sees %d GPU(s): fix preflight_expected_gpu_count, or "
            "find out which GPU is missing (nvidia-smi -L, dmesg | grep -i nvrm)." % (expected_count, len(gpus)))

    nnodes = settings["nnodes"]
    if not parallel_sizes_split_evenly(settings):
        return  # check_parallelism says why
    # The sglang_server module decides it again before it starts the server, with the server's CUDA_VISIBLE_DEVICES.
    needed = gpus_needed(settings["tensor_parallel_size"], nnodes, settings["pipeline_parallel_size"])
    if not fits(needed, visible_gpus(gpus, None)):
        report.problems.append(
            "preflight_tensor_parallel_size=%d x preflight_pipeline_parallel_size=%d over preflight_nnodes=%d needs %d "
            "GPU(s) per node, but this host has %d: lower the parallel sizes or add nodes." % (
                settings["tensor_parallel_size"], settings["pipeline_parallel_size"], nnodes, needed, len(gpus)))
    else:
        report.checked.append("tp %d x pp %d over %d node(s) fits %d GPU(s)" % (
            settings["tensor_parallel_size"], settings["pipeline_parallel_size"], nnodes, len(gpus)))


def parallel_sizes_split_evenly(settings):
    """Each size is 1 or more and the ranks split evenly over the nodes."""
    tp, pp, nnodes = settings["tensor_parallel_size"], settings["pipeline_parallel_size"], settings["nnodes"]
    return min(tp, pp, nnodes) >= 1 and (tp * pp) % nnodes == 0


def check_parallelism(report, settings):
    tp, pp, nnodes = settings["tensor_parallel_size"], settings["pipeline_parallel_size"], settings["nnodes"]
    for name, value in (("preflight_tensor_parallel_size", tp), ("preflight_pipeline_parallel_size", pp),
                        ("preflight_nnodes", nnodes)):
        if value < 1:
            report.problems.append("%s=%d must be 1 or more." % (name, value))
    if nnodes >= 1 and (tp * pp) % nnodes:
        report.problems.append(
            "preflight_tensor_parallel_size=%d x preflight_pipeline_parallel_size=%d does not split evenly over "
            "preflight_nnodes=%d: each node runs the same number of ranks." % (tp, pp, nnodes))


def check_cluster(report, settings, host, peers):
    """nnodes, node_rank and dist_init_addr agree among the hosts that form one server (same dist_init_addr)."""
    nnodes, rank, address = settings["nnodes"], settings["node_rank"], settings.get("dist_init_addr")
    if not 0 <= rank < max(nnodes, 1):
        report.problems.append("preflight_node_rank=%d is outside 0..%d (preflight_nnodes=%d)." % (
            rank, max(nnodes, 1) - 1, nnodes))
    if nnodes == 1:
        return
    if not address:
        report.problems.append("preflight_nnodes=%d but preflight_dist_init_addr is not set: give every node of the "
                               "server the first node's address and a free port, like 10.0.0.1:5000." % nnodes)
        return
    members = [peer for peer in peers if peer.get("dist_init_addr") == address]
    disagree = ["%s says %d" % (peer["host"], peer["nnodes"]) for peer in members if peer["nnodes"] != nnodes]
    if disagree:
        report.problems.append("preflight_nnodes differs among the nodes of %s: %s has %d, %s. Give them one value." % (
            address, host, nnodes, ", ".join(disagree)))
    ranks = {}
    for peer in members:
        ranks.setdefault(peer["node_rank"], []).append(peer["host"])
    shared = ["%d: %s" % (number, ", ".join(sorted(hosts))) for number, hosts in sorted(ranks.items()) if len(hosts) > 1]
    if shared:
        report.problems.append("Nodes of %s share a preflight_node_rank (%s): each node needs its own." % (
            address, "; ".join(shared)))
    if len(members) != nnodes:
        report.problems.append(
            "preflight_nnodes=%d, but %d host(s) in this play use preflight_dist_init_addr=%s (%s): run the play "
            "against every node of the server, or fix preflight_nnodes." % (
                nnodes, len(members), address, ", ".join(sorted(peer["host"] for peer in members))))
    if not (disagree or shared) and len(members) == nnodes:
        report.checked.append("node %d of %d, joined at %s" % (rank, nnodes, address))


def check_model(report, settings, model):
    path = settings.get("model_path")
    if not path:
        return
    if settings.get("model_is_hub_id"):
        report.checked.append("model %s is a hub id, downloaded by the server" % path)
    elif not model.get("exists"):
        report.problems.append("preflight_model_path=%s does not exist on this host: copy or mount the model there, "
                               "or fix the path." % path)
    elif not model.get("is_dir") or not model.get("config_json"):
        report.problems.append("preflight_model_path=%s has no config.json, so it is not a Hugging Face model "
                               "directory: point it at the directory that holds config.json." % path)
    else:
        report.checked.append("model %s has config.json" % path)


def check_service_user(report, settings, exists):
    """The service user must exist already when the collection is told not to create it."""
    name = settings.get("service_user_name")
    if settings.get("service_user_create", True) or not name:
        return
    if exists:
        report.checked.append("service user %s exists" % name)
    else:
        report.problems.append(
            "service_user_name=%s (preflight_service_user_name) is not a user on this host, and service_user_create is "
            "false: create the user first (useradd --system --shell /usr/sbin/nologin %s), or set "
            "service_user_create: true to have the collection create it." % (name, name))


def check_venv_python(report, settings, python):
    """The interpreter the virtualenv is made with runs and can make virtualenvs (ensurepip and venv, which Debian
    and Ubuntu ship apart, in python3-venv)."""
    path = settings.get("venv_python")
    if not settings.get("venv_path") or not path:
        return
    if python.get("error"):
        report.problems.append(
            "preflight_venv_python=%s (ml_stack_python) cannot run on this host (%s): install it, or point "
            "ml_stack_python at the interpreter the virtualenv is made with." % (path, python["error"]))
    elif python.get("venv_error"):
        series = ".".join(python.get("version", "").split(".")[:2])
        report.problems.append(
            "preflight_venv_python=%s (ml_stack_python) cannot create virtualenvs (%s): apt-get install python3-venv "
            "(python%s-venv for an interpreter other than the system's python3), then run again."
            % (path, python["venv_error"], series))
    else:
        report.checked.append("%s (Python %s) can create virtualenvs" % (path, python.get("version")))


def planned_virtualenv(settings, profile, python, lock, tree):
    """The virtualenv ml_stack builds for the profile, by the function and from the inputs ml_stack's plan names it
    with: the interpreter's report (python), the lock (stack_selected_lock) and, where a locked profile adopts the
    host's torch (torch_from), the tree as inspect_torch.py reported it (tree). None where that name is not known:
    without the interpreter's version, or a tree whose site-packages and torch were not read."""
    if not python.get("version") or not settings.get("venv_python"):
        return None
    adoption = None
    if settings.get("torch_from") is not None and lock is not None:
        adoption = None if tree is None else adopted(tree)
        if adoption is None or adoption["site_packages"] is None or adoption["torch"]["distribution"] is None:
            return None
    return profile_virtualenv(settings["venv_path"], profile, settings["venv_python"], python, lock, adoption)


def adopted_tree(settings, probe, python, run):
    """What inspect_torch.py (probe) reads of the tree ml_stack adopts (torch_from), its metadata alone, run as
    ml_stack runs it: as the virtualenv's owner (venv_owner; root without one). None without a tree, an
    interpreter or that owner: no virtualenv of an owner who does not exist yet can exist either."""
    if (settings.get("torch_from") is None or torch_from_problems(settings["torch_from"]) or probe is None
            or not python.get("version")):
        return None
    uid = 0
    if settings.get("venv_owner") is not None:
        owner = account(settings["venv_owner"])
        if owner is None:
            return None
        uid = owner["uid"]
    try:
        return observe_tree(settings["torch_from"], settings["venv_python"], probe, run, uid, "preflight_venv_owner",
                            imports=False)
    except InvalidOption as exc:
        return {"error": str(exc)}


def check_disk(report, settings, profile, disk, python, lock=None, tree=None):
    """Room for the profile's virtualenv unless it exists already: a new profile, new pins, a new lock or another
    adopted torch build a second one beside the current one (the stable path existing says nothing about that)."""
    path, minimum = settings.get("venv_path"), settings.get("venv_min_free_gib")
    if not path or not minimum:
        return
    # Without its name, the virtualenv counts as new.
    venv = planned_virtualenv(settings, profile, python, lock, tree)
    if venv is not None and venv["name"] in disk.get("siblings", []):
        report.checked.append("virtualenv %s of stack profile %s exists; its disk was not checked" % (
            venv["dir"], profile["name"]))
        return
    mount, free = disk.get("mount"), disk.get("free_bytes")
    if free is None:
        report.notes.append("The free space for %s is not known; it was not checked." % path)
    elif free < minimum * GIB:
        report.problems.append(
            "%s has %.1f GiB free for a new virtualenv of stack profile %s beside %s, less than "
            "preflight_venv_min_free_gib=%s: free space there, or choose another preflight_venv_path." % (
                mount, float(free) / GIB, profile["name"], path, minimum))
    else:
        report.checked.append("%.1f GiB free on %s for a new virtualenv" % (float(free) / GIB, mount))


def check_port(report, settings, port_state):
    port = settings.get("port")
    if not port:
        return
    where = "%s:%d" % (settings.get("host") or "127.0.0.1", port)
    if port_state == "in_use":
        report.problems.append(
            "preflight_port %s is in use by another process, not by this collection's server: stop it (ss -ltnp "
            "'sport = :%d' shows which) or choose another port." % (where, port))
    elif port_state in ("free", "ours"):
        report.checked.append("port %s is %s" % (where, "held by our own server" if port_state == "ours" else "free"))


def check_fabric(report, settings, gpu, dpkg_query_output):
    """Fabric Manager and the NVLink subnet manager against the loaded driver. What the cuda role is about to set
    right in this run (cuda_fabric_manager wants Fabric Manager here) is a note; the rest refuses the host."""
    installed = parse_installed(dpkg_query_output or "")
    problems = version_problems(gpu, installed)
    fabric_manager = sorted(name for name in installed if name.startswith(FABRIC_MANAGER))
    if (gpu.get("nvswitch") and (gpu.get("nvlink_generation") or 0) >= SUBNET_MANAGER_NVLINK and fabric_manager
            and SUBNET_MANAGER not in installed):
        problems.append(
            "%s is installed on NVLink %d switches, but NVIDIA's NVLink subnet manager %s is not, without which the "
            "fabric does not come up: run role blackwell.gpu_node.cuda (cuda_fabric_manager: auto or true installs "
            "it)." % (fabric_manager[0], gpu["nvlink_generation"], SUBNET_MANAGER))
    if problems and decision(settings.get("fabric_manager", "false"), gpu, installed)["wanted"]:
        report.notes.extend("The cuda role will set this right (preflight_fabric_manager: %s): %s" % (
            settings.get("fabric_manager"), problem) for problem in problems)
    elif problems:
        report.problems.extend(problems)
    elif fabric_manager:
        report.checked.append("%s at the driver's version %s" % (
            ", ".join("%s %s" % (name, installed[name]) for name in fabric_manager),
            gpu.get("kernel_module_version") or gpu.get("driver_version")))


def _set_by(entry):
    return "LD_LIBRARY_PATH of %s" % entry["variable"] if entry["variable"] else entry["file"]


def _compat_fix(entry):
    if entry["variable"]:
        return "remove %s from LD_LIBRARY_PATH in %s" % (entry["directory"], entry["variable"])
    return ("remove %s from %s and run ldconfig, or remove the cuda-compat package that put it there"
            % (entry["directory"], entry["file"]))


def check_compat(report, settings, profile, gpu, loader):
    """A libcuda of another driver release on the loader path, a CUDA compatibility package's, only where the driver
    is older than the profile's CUDA release needs. loader: [{directory, libcuda (the release its libcuda.so.1 is),
    variable (whose LD_LIBRARY_PATH lists it) or file (the ld.so.conf file that does)}], None when not read."""
    if loader is None:
        return
    driver, cuda = gpu["driver_version"], profile["cuda"]["version"]
    others = [entry for entry in loader if entry["libcuda"] != driver]
    if not others:
        report.checked.append("the loader path holds no libcuda but the driver's own (%s)" % driver)
        return
    decision = compat_wanted(driver, cuda)
    branch, minimum_branch = driver_branch(driver), profile["cuda"]["driver_branch_min"]
    # A driver that the cuda role replaces in this run by the profile's branch leaves the compatibility libraries
    # serving a driver that is gone.
    replaced = settings.get("driver_install") and (branch is None or branch < minimum_branch)
    found = "; ".join("%s (%s) holds libcuda %s" % (entry["directory"], _set_by(entry), entry["libcuda"])
                      for entry in others)
    if decision["wanted"] is None:
        report.notes.append(
            "%s: CUDA compatibility libraries, and the driver that CUDA %s of stack profile %s needs is not known "
            "here, so whether driver %s needs them was not checked." % (found, cuda, profile["name"], driver))
    elif decision["wanted"] and not replaced:
        report.checked.append("CUDA compatibility libraries for driver %s, older than the %s that CUDA %s needs: %s"
                              % (driver, decision["minimum"], cuda, found))
    else:
        new_enough = ("the driver of branch %d that cuda_driver_install puts in its place" % minimum_branch
                      if replaced else "driver %s" % driver)
        report.problems.extend(
            "%s (%s) holds libcuda %s, a CUDA compatibility library, but %s is new enough for CUDA %s of stack profile "
            "%s, which needs %s: a process that loads that libcuda instead of the driver's own fails with CUDA error "
            "803 (cudaErrorSystemDriverMismatch). Compatibility libraries serve only a driver older than the CUDA "
            "release needs: %s." % (entry["directory"], _set_by(entry), entry["libcuda"], new_enough, cuda,
                                    profile["name"], decision["minimum"], _compat_fix(entry))
            for entry in others)


def gpu_health_lines(health):
    """What the GPUs' health (gpu_health's assessment, None when no GPU was looked at) says for preflight:
    {problems: an unhealthy finding each, warnings: a degraded finding each, notes, checked}."""
    lines = dict(problems=[], warnings=[], notes=[], checked=[])
    if health is None:
        return lines
    if health.get("problem"):
        lines["problems"].append(health["problem"])
        return lines
    for finding in findings_of(health, "unhealthy"):
        lines["problems"].append("%s. Run again once it is done; to let the node serve with it anyway, set %s: "
                                 "{%s: degraded}." % (describe(finding, health["gpus"]).rstrip("."),
                                                      GPU_HEALTH_SETTING, finding["id"]))
    lines["warnings"].extend(describe(finding, health["gpus"]) for finding in findings_of(health, "degraded"))
    if health["verdict"] == "unknown":
        lines["notes"].append("The GPUs' health is not known: %s." % health["reason"].rstrip("."))
    elif health["verdict"] == "healthy":
        lines["checked"].append("GPU health: %s" % health["reason"])
    if (health.get("kernel_log") or {}).get("problem"):
        lines["notes"].append("Xid errors since boot were not looked for: %s." % health["kernel_log"]["problem"])
    for problem in (health.get("pcie_fabric") or {}).get("problems") or []:
        lines["notes"].append("The PCIe fabric between the GPUs was not read whole: %s." % problem.rstrip("."))
    return lines


def check_gpu_health(report, health):
    """An unhealthy GPU finding refuses the node, a degraded one is worth a warning."""
    lines = gpu_health_lines(health)
    report.problems.extend(lines["problems"])
    report.notes.extend(lines["warnings"] + lines["notes"])
    report.checked.extend(lines["checked"])


def gpu_health_state(settings, gpu, assess_health):
    """gpu_health's assessment of the GPUs gpu_facts saw, with the inventory's severities: assess_health(overrides)
    gathers it. None when no GPU is seen; {problem} naming the setting when its overrides are not valid."""
    if gpu.get("state") != "ok" or not gpu.get("gpus"):
        return None
    overrides = settings.get("gpu_health_severity_overrides") or {}
    try:
        check_options(overrides, QUICK_DCGM_LEVEL, False, option=GPU_HEALTH_SETTING)
    except InvalidOption as exc:
        return dict(problem="%s. Nothing was read of the GPUs' health." % exc)
    return assess_health(overrides)


def check_gpu_host(report, settings, profile, observed):
    """Everything about a host whose GPUs the driver lists."""
    gpu = observed["gpu"]
    check_gpus(report, settings, profile, gpu)
    check_compat(report, settings, profile, gpu, observed.get("loader"))
    check_fabric(report, settings, gpu, observed.get("fabric_packages"))
    check_gpu_health(report, observed.get("gpu_health"))


def evaluate(settings, profile, observed):
    """Problems, notes and what was checked.

    settings: the role's variables without the preflight_ prefix. profile: the resolved stack profile.
    observed: distribution, distribution_version, architecture (Ansible's facts), gpu (gpu_facts), reboot_required (bool), reboot_required_packages,
    model (exists, is_dir, config_json), disk (siblings: the names beside venv_path, mount, free_bytes), port_state,
    host, peers, venv_python (what ml_stack's inspect_python.py printed, or {error}), lock (the profile's, or None),
    adopted_tree (adopted_tree(), or None), service_user_exists (bool),
    fabric_packages (dpkg-query's Package, Version and db:Status-Abbrev of the fabric packages, tab-separated),
    gpu_health (gpu_health_state()), loader (the directories of the loader path that hold a libcuda, see
    check_compat; None when not read).
    """
    report = Report()
    check_platform(report, profile, observed)
    check_parallelism(report, settings)

    gpu = observed["gpu"]
    pending = reboot_pending(gpu, observed.get("reboot_required_packages", []), observed.get("reboot_required"))
    report.checked.insert(0, "GPUs %s (preflight_gpus_required: %s)" % (
        ("required", "true") if settings["gpus_required"] else ("not required", "false")))
    if settings["gpus_required"]:
        if pending and settings.get("driver_install") and settings.get("driver_reboot"):
            # The cuda role reboots into the installed driver later in this run, after stopping the server.
            report.notes.append("A reboot is pending: %s. The cuda role reboots the host (cuda_driver_install and "
                                "cuda_driver_reboot: true)." % "; ".join(pending))
        elif pending:
            report.problems.append("A reboot is pending: %s. Reboot the host, then run again." % "; ".join(pending))
        if gpu["state"] != "ok":
            report.problems.append("GPUs are required (preflight_gpus_required: true) but gpu_facts says %s: %s. %s" % (
                gpu["state"], gpu.get("message") or "-", GPU_STATE_FIXES.get(gpu["state"], "")))
        elif not gpu["gpus"]:
            report.problems.append("GPUs are required (preflight_gpus_required: true) but nvidia-smi lists none.")
        else:
            check_gpu_host(report, settings, profile, observed)
    else:
        for reason in pending:
            report.notes.append("A reboot is pending: %s." % reason)
        if gpu["state"] == "ok" and gpu["gpus"]:
            check_gpu_host(report, settings, profile, observed)
        else:
            report.notes.append("GPUs are not required (preflight_gpus_required: false): no GPU was checked "
                                "(gpu_facts state %s)." % gpu["state"])
    if observed.get("reboot_required") and not any("reboot-required" in reason for reason in pending):
        report.notes.append("/var/run/reboot-required is present (%s): reboot when convenient." % (
            ", ".join(observed.get("reboot_required_packages") or []) or "no package named"))

    check_cluster(report, settings, observed.get("host"), observed.get("peers", []))
    check_model(report, settings, observed.get("model", {}))
    check_service_user(report, settings, observed.get("service_user_exists"))
    check_venv_python(report, settings, observed.get("venv_python") or {})
    check_disk(report, settings, profile, observed.get("disk", {}), observed.get("venv_python") or {},
               observed.get("lock"), observed.get("adopted_tree"))
    check_port(report, settings, observed.get("port_state"))
    return report.as_dict()


def reboot_required_state(path=REBOOT_REQUIRED):
    """(whether the system announced a pending reboot, the packages that asked for it)."""
    if not os.path.lexists(path):
        return False, []
    try:
        with open(path + ".pkgs", "rb") as handle:
            return True, handle.read().decode("utf-8", "replace").split()
    except (IOError, OSError):
        return True, []


def model_state(settings):
    """The model directory and its config.json as lstat sees them; nothing for a hub id or no model."""
    path = settings.get("model_path")
    if path is None or settings.get("model_is_hub_id"):
        return dict(exists=False, is_dir=False, config_json=False)
    try:
        # The trailing separator resolves a link to the directory, as `stat path/` does.
        directory = os.lstat(os.path.join(path, ""))
    except OSError:
        return dict(exists=False, is_dir=False, config_json=False)
    return dict(exists=True, is_dir=stat.S_ISDIR(directory.st_mode),
                config_json=os.path.lexists(os.path.join(path, "config.json")))


def free_space(venv_path):
    """Free space for a virtualenv that may not exist yet: that of the filesystem its nearest existing ancestor is
    on, and the names beside the stable path (where ml_stack keeps one virtualenv per profile:
    <name>.<profile>-<digest>)."""
    venv = os.path.abspath(venv_path)
    directory = venv
    while not os.path.exists(directory):
        directory = os.path.dirname(directory)
    mount = directory
    while not os.path.ismount(mount):
        mount = os.path.dirname(mount)
    filesystem = os.statvfs(directory)
    parent, prefix = os.path.dirname(venv), os.path.basename(venv) + "."
    siblings = sorted(name for name in os.listdir(parent) if name.startswith(prefix)) if os.path.isdir(parent) else []
    return dict(siblings=siblings, directory=directory, mount=mount,
                free_bytes=filesystem.f_bavail * filesystem.f_frsize)


def venv_python_state(returncode, stdout, stderr):
    """What ml_stack's inspect_python.py printed, or {error} when the interpreter did not run it."""
    if returncode == 0:
        try:
            return json.loads(stdout)
        except ValueError:
            return dict(error="it printed no JSON: %s" % stdout.strip()[:200])
    return dict(error=stderr.strip() or "exit status %d" % returncode)


def observe(settings, facts, gpu, venv_python, fabric_packages, port_state, host, peers,
            reboot_required_path=REBOOT_REQUIRED, gpu_health=None, loader=None, lock=None, tree=None):
    """What evaluate() weighs, from the host's facts (Ansible's min subset, without the ansible_ prefix), gpu_facts'
    gpu, the venv interpreter's report (venv_python_state, {} when not asked), dpkg-query's output, the port's
    state, this host's name, the places every host of the play published, the GPUs' health (gpu_health_state()),
    the loader path's libcuda directories (check_compat), the profile's lock and the tree ml_stack adopts
    (adopted_tree()); the rest is read here."""
    reboot_required, packages = reboot_required_state(reboot_required_path)
    venv_path = settings.get("venv_path")
    return dict(
        host=host, distribution=facts["distribution"], distribution_version=facts["distribution_version"],
        architecture=facts["architecture"], gpu=gpu, reboot_required=reboot_required,
        reboot_required_packages=packages, model=model_state(settings),
        disk=free_space(venv_path) if venv_path is not None else {}, port_state=port_state,
        venv_python=venv_python,
        service_user_exists=not settings.get("service_user_create") and account(settings["service_user_name"]) is not None,
        fabric_packages=fabric_packages, peers=peers, gpu_health=gpu_health, loader=loader, lock=lock,
        adopted_tree=tree)


def refusal(host, report):
    """The message a refused host fails with: every problem at once."""
    return "Preflight refused %s; nothing was changed on it. %d problem(s): %s" % (
        host, len(report["problems"]),
        "".join("(%d) %s " % (number, problem) for number, problem in enumerate(report["problems"], 1)))
