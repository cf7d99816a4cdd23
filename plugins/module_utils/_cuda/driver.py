# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The cuda role's driver decisions: which packages move the host to the stack profile's driver branch (NVIDIA's
pinning package, then the driver's packages at a version of that branch), and whether the loaded kernel module is the
installed one. Pure, so that recorded package lists test it.

NVIDIA's repositories for Debian and Ubuntu lock a branch with the package nvidia-driver-pinning-<branch>, which ships
/etc/apt/preferences.d/nvidia-driver-pin (Pin-Priority 1000 on the branch's versions); every pinning package ships that
same file, so exactly one may be installed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int, control_character_problem

PINNING_PREFIX = "nvidia-driver-pinning-"
# NVIDIA's driver package versions: 580.95.05-1 (an epoch would come first, as 1:580.95.05-1).
_VERSION = re.compile(r"(?:[0-9]+:)?([0-9]+)((?:\.[0-9]+)*)(?:-([0-9A-Za-z.+~]+))?")


def debian_mirror_problems(url):
    """What keeps cuda_debian_mirror out of the URIs field of a deb822 sources file: [] or the problems."""
    problem = control_character_problem(url, "cuda_debian_mirror")
    if problem:
        return [problem]
    if not re.fullmatch(r"(https?|file)://[^\s]+", url or ""):
        return ["cuda_debian_mirror=%s is not one http://, https:// or file:// URL without spaces (a Debian mirror "
                "such as http://deb.debian.org/debian): fix cuda_debian_mirror." % (url,)]
    return []


def pinning_package(branch):
    return "%s%d" % (PINNING_PREFIX, branch)


def upstream_version(version):
    """580.95.05 from 580.95.05-1 (or 1:580.95.05-1); None for anything that is not a driver version."""
    match = _VERSION.fullmatch(version or "")
    return match.group(1) + match.group(2) if match else None


def branch_of(version):
    upstream = upstream_version(version)
    return bounded_int(upstream.split(".")[0]) if upstream else None


def _sort_key(version):
    match = _VERSION.fullmatch(version)
    numbers = tuple(int(part) for part in (match.group(1) + match.group(2)).split("."))
    revision = match.group(3) or ""
    return numbers, tuple(int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", revision) if part)


def parse_installed(dpkg_query_output):
    """{package: version} of the installed packages, from
    dpkg-query --show --showformat='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' (abbreviations ii, hi)."""
    installed = {}
    for line in dpkg_query_output.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[2].strip() in ("ii", "hi"):
            installed[fields[0]] = fields[1]
    return installed


def parse_madison(apt_cache_madison_output):
    """{package: [versions]} from apt-cache madison (lines "package | version | source"), in the order apt lists."""
    available = {}
    for line in apt_cache_madison_output.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 3 and fields[0] and fields[1]:
            versions = available.setdefault(fields[0], [])
            if fields[1] not in versions:
                versions.append(fields[1])
    return available


def _branches(versions):
    return sorted(set(branch for branch in (branch_of(version) for version in versions) if branch is not None))


def plan(branch, packages, installed, available):
    """What moves the host to driver branch `branch`.

    packages: the driver's packages (cuda_driver_packages, nvidia-open by default). installed: {package: version}
    (parse_installed). available: {package: [versions]} (parse_madison), the repository's versions of the pinning
    package and of `packages`.

    Returns problems (each naming the variable and the fix; nothing may be changed then), purge (other pinning
    packages: they ship the same pin file as a conffile, which a mere removal leaves behind, still pinning the old
    branch), pin (the branch's pinning package when it is not installed, installed on its own first so that apt
    resolves the driver under it), install (apt specifiers: each driver package at an exact version of the
    branch), change (whether anything is to be done), versions ({package: [from, to]}).
    A driver package already on the branch stays at its version: a newer point release is not a reason to stop
    the server.
    """
    problems, install, versions = [], [], {}
    pin = pinning_package(branch)
    if pin not in installed and pin not in available:
        problems.append(
            "The CUDA repository has no %s, NVIDIA's package that locks driver branch %d "
            "(cuda_driver_branch=%d): check cuda_repo_base_url, or choose a branch it has." % (pin, branch, branch))
    for package in packages:
        current = installed.get(package)
        if current is not None and branch_of(current) == branch:
            versions[package] = [current, current]
            continue
        candidates = [version for version in available.get(package, []) if branch_of(version) == branch]
        if not candidates:
            problems.append(
                "The CUDA repository has no %s of driver branch %d (cuda_driver_branch=%d; it has %s): check "
                "cuda_repo_base_url and cuda_driver_packages, or choose a branch it has." % (
                    package, branch, branch,
                    "branch(es) %s" % ", ".join(str(item) for item in _branches(available.get(package, [])))
                    if available.get(package) else "no version of it"))
            continue
        target = max(candidates, key=_sort_key)
        versions[package] = [current, target]
        install.append("%s=%s" % (package, target))
    purge = sorted(name for name in installed if name.startswith(PINNING_PREFIX) and name != pin)
    if problems:
        return dict(problems=problems, purge=[], pin=[], install=[], change=False, versions=versions)
    pin_install = [] if pin in installed else [pin]
    return dict(problems=[], purge=purge, pin=pin_install, install=install,
                change=bool(purge or pin_install or install), versions=versions)


def module_state(expected_version, gpu):
    """Whether the loaded NVIDIA kernel module is the installed driver's: {pending, message}.

    expected_version: the installed driver package's version (580.95.05-1). gpu: gpu_facts' facts. The installed
    module is the one modinfo finds for the running kernel when it is known (DKMS builds it), else the package's.
    """
    installed = gpu.get("kernel_module_installed_version") or upstream_version(expected_version)
    loaded = gpu.get("kernel_module_version")
    if loaded is None:
        return dict(pending=True, installed=installed, loaded=None,
                    message="NVIDIA driver %s is installed but no NVIDIA kernel module is loaded" % installed)
    if loaded != installed:
        return dict(pending=True, installed=installed, loaded=loaded,
                    message="NVIDIA driver %s is installed but kernel module %s is loaded" % (installed, loaded))
    if gpu.get("kernel_module") != "open":
        return dict(pending=True, installed=installed, loaded=loaded,
                    message="NVIDIA driver %s is loaded with the %s kernel module, not the open one that nvidia-open "
                            "installs" % (loaded, gpu.get("kernel_module")))
    return dict(pending=False, installed=installed, loaded=loaded,
                message="NVIDIA driver %s is installed and loaded (open kernel module)" % installed)
