# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The cuda role's NVSwitch decisions: whether a host needs NVIDIA Fabric Manager, which packages give it at
exactly the loaded driver's version, and whether what is installed matches the driver. Pure, so that recorded
package lists test it.

NVIDIA's Fabric Manager user guide (release 2.3, "NVSwitch core software stack"): on NVSwitch systems CUDA waits
for Fabric Manager, whose version must be the driver's; systems with fourth generation NVSwitches (HGX B200/B100,
NVLink 5) also need the NVLink Subnet Manager (nvlsm), which nvidia-fabricmanager.service starts beside Fabric
Manager; earlier generations (HGX H100/H200, NVLink 4) need Fabric Manager only.
NVIDIA's CUDA repositories name the packages nvidia-fabricmanager and libnvidia-nscq from the driver branches that
come with a pinning package (580, version 580.95.05-1), and nvidia-fabricmanager-<branch>, libnvidia-nscq-<branch>
before (570); either is accepted, at the driver's exact version.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.driver import branch_of, upstream_version

FABRIC_MANAGER = "nvidia-fabricmanager"
# NVSwitch configuration and query library, which Fabric Manager and DCGM read the switches through.
NSCQ = "libnvidia-nscq"
SUBNET_MANAGER = "nvlsm"
SERVICE = "nvidia-fabricmanager.service"
SETTINGS = ("auto", "true", "false")
# NVLink generation from which the switches need the subnet manager (fourth generation NVSwitches).
SUBNET_MANAGER_NVLINK = 5


def package_names(branch):
    """The names a driver-versioned fabric package may have for `branch`, the current one first."""
    return [[name, "%s-%d" % (name, branch)] for name in (FABRIC_MANAGER, NSCQ)]


def query_names(branch):
    """Every package name to ask apt-cache madison about for driver branch `branch`."""
    return [name for names in package_names(branch) for name in names] + [SUBNET_MANAGER]


# What dpkg-query is asked for: the fabric packages of every branch's names, so that one of another branch than the
# loaded driver's (nvidia-fabricmanager-570 beside driver 580) is seen, and replaced.
INSTALLED_PATTERNS = (FABRIC_MANAGER + "*", NSCQ + "*", SUBNET_MANAGER)


def setting_of(value):
    """auto, true or false from cuda_fabric_manager (YAML's booleans or their words); None when it is neither."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    return {"yes": "true", "no": "false"}.get(text, text) if text in SETTINGS + ("yes", "no") else None


def needed(setting, gpu, installed):
    """(whether Fabric Manager belongs on the host, why), for cuda_fabric_manager `setting`.

    auto: where the GPUs are on an NVSwitch fabric this host manages: switches held by its nvidia-nvswitch driver, a
    fabric not yet up, or a Fabric Manager already installed (kept at the driver's version). GPUs whose fabric is up
    without any of that are a virtual machine's, whose hypervisor runs Fabric Manager.
    """
    if setting == "false":
        return False, "cuda_fabric_manager is false"
    if setting == "true":
        return True, "cuda_fabric_manager is true"
    if not gpu.get("nvswitch"):
        return False, "gpu_facts sees no NVSwitch (nvswitch: %s)" % str(gpu.get("nvswitch")).lower()
    fabric = gpu.get("fabric") or {}
    if gpu.get("nvswitch_devices"):
        return True, "the nvidia-nvswitch driver holds %d NVSwitch(es)" % len(gpu["nvswitch_devices"])
    if fabric.get("state") != "Completed":
        return True, "the GPUs' NVSwitch fabric is not up (state %s)" % fabric.get("state")
    if any(name.startswith(FABRIC_MANAGER) for name in installed):
        return True, "Fabric Manager is installed"
    return False, ("the GPUs' NVSwitch fabric is up (%s) with no switch on this host: it is managed outside it, as "
                   "for a virtual machine's GPUs" % fabric.get("status"))


def decision(setting, gpu, installed):
    """{wanted, reason, problems}: whether the role goes on to ask the repository, before it does."""
    normalized = setting_of(setting)
    if normalized is None:
        return dict(wanted=False, reason="", problems=[
            "cuda_fabric_manager=%s is not one of auto, true, false: fix cuda_fabric_manager." % (setting,)])
    wanted, reason = needed(normalized, gpu, installed)
    return dict(wanted=wanted, reason=reason, problems=[])


def _exact(versions, driver_version):
    return [version for version in versions if upstream_version(version) == driver_version]


def plan(setting, gpu, installed, available):
    """What gives the host Fabric Manager at the loaded driver's version.

    setting: cuda_fabric_manager. gpu: gpu_facts' facts. installed: {package: version} (parse_installed of
    dpkg-query on query_names). available: {package: [versions]} (parse_madison of apt-cache madison on them).
    Returns wanted, reason, problems (each naming the variable and the fix; nothing may be changed then), install
    (apt specifiers), service (the unit to enable and start, or None), change, versions ({package: [from, to]}).
    """
    result = dict(install=[], service=None, change=False, versions={})
    result.update(decision(setting, gpu, installed))
    if result["problems"] or not result["wanted"]:
        return result
    driver_version = gpu.get("kernel_module_version") or gpu.get("driver_version")
    if not driver_version:
        result["problems"].append(
            "Fabric Manager must match the loaded NVIDIA driver, but none is loaded (gpu_facts state %s): install "
            "the driver (cuda_driver_install: true) and reboot, or set cuda_fabric_manager: false." % gpu.get("state"))
        return result
    branch = branch_of(driver_version)
    for names in package_names(branch):
        present = next((name for name in names if name in installed), None)
        if present and upstream_version(installed[present]) == driver_version:
            result["versions"][present] = [installed[present], installed[present]]
            continue
        offered = next((name for name in names if _exact(available.get(name, []), driver_version)), None)
        if offered is None:
            result["problems"].append(
                "The CUDA repository has no %s at the loaded driver's version %s (it has %s): check "
                "cuda_repo_base_url, or set cuda_fabric_manager: false." % (
                    " or ".join(names), driver_version,
                    ", ".join("%s %s" % (name, " ".join(available[name])) for name in names if available.get(name))
                    or "none of them"))
            continue
        target = _exact(available[offered], driver_version)[0]
        result["versions"][offered] = [installed.get(present or offered), target]
        result["install"].append("%s=%s" % (offered, target))
    if (gpu.get("nvlink_generation") or 0) >= SUBNET_MANAGER_NVLINK and SUBNET_MANAGER not in installed:
        if not available.get(SUBNET_MANAGER):
            result["problems"].append(
                "NVLink %d switches need NVIDIA's NVLink subnet manager, but the CUDA repository has no %s: check "
                "cuda_repo_base_url, or set cuda_fabric_manager: false." % (gpu["nvlink_generation"], SUBNET_MANAGER))
        else:
            result["versions"][SUBNET_MANAGER] = [None, available[SUBNET_MANAGER][0]]
            result["install"].append(SUBNET_MANAGER)
    if result["problems"]:
        result["install"] = []
        return result
    result.update(service=SERVICE, change=bool(result["install"]))
    return result


def version_problems(gpu, installed):
    """Installed driver-versioned fabric packages whose version is not the loaded driver's, as problems naming
    cuda_fabric_manager and the fix; [] when they match, or when none is installed or no driver is loaded."""
    driver_version = gpu.get("kernel_module_version") or gpu.get("driver_version")
    if not driver_version:
        return []
    problems = []
    for name, version in sorted(installed.items()):
        if not name.startswith((FABRIC_MANAGER, NSCQ)) or upstream_version(version) == driver_version:
            continue
        problems.append(
            "%s %s is installed but the loaded NVIDIA driver is %s: Fabric Manager needs its packages at the "
            "driver's exact version (it refuses to start otherwise, and CUDA then fails with error 802 on NVSwitch "
            "systems). Run role blackwell.gpu_node.cuda (cuda_fabric_manager: auto or true puts them at the driver's "
            "version), or remove %s where the host has no NVSwitch (cuda_fabric_manager: false)." % (
                name, version, driver_version, name))
    return problems
