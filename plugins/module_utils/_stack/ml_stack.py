# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The ml_stack role's decisions: where the profile's virtualenv goes, the pip arguments that install exactly
the profile, and whether what a host has is exactly the profile.

Pure Python, no Ansible imports: the role's filter plugin is a thin shell over ``build_plan``, ``dependencies``
and ``verdict``, and the unit tests import this module directly.

How the profile is installed, and why:

- sglang pins flashinfer 0.6.3 while the profile wants 0.6.4. pip cannot override a requirement, so sglang is
  installed alone with ``--no-deps``; its other requirements are read from its metadata and resolved together
  with the pinned packages in one pip run, where every pin is exact (``===``).
- A constraints file with the same pins is put into the virtualenv and named in the virtualenv's own
  ``pip.conf``, so every later ``pip install`` there (the role's and anyone's) fails rather than replace torch.
- Each virtualenv is named after the profile and a digest of its pins and Python; the stable path is a link
  to it. A new profile builds a new virtualenv beside the old one, which stays intact for rollback.
- A profile with a lock (python.lock, read by the stack role) is installed in one pip run instead, exactly the
  lock's wheels for the host's environment, each by its sha256 (``--require-hashes --no-deps``); every
  distribution of the virtualenv is then compared with the lock, and the lock is part of the digest. The lock's
  own logic is in lock.py.
- A locked profile may adopt a torch the host has (ml_stack_torch_from) instead of installing the lock's: the
  distributions the tree stands in for (torch and what only torch needs, lock.closure) are left out of the
  requirements, the virtualenv sees the tree through a .pth file (a file the role keeps, like the pins), and the
  tree (its site-packages and its torch's version) is part of the digest. Whether a tree can be adopted is
  decided in adopt_torch.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import configparser
import hashlib
import io
import json
import os
import posixpath
import re
import stat as stat_module

from urllib.parse import urlsplit

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    TREE_ENTRIES,
    file_state,
    foreign_writable,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import owner_argv, venv_owner_uid
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problems
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import lock as stack_lock
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import (
    PTH_NAME,
    VARIABLE as TORCH_FROM,
    pth,
    recheck,
    skip_plan,
    torch_from_problems,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.cudnn import cudnn_check, cudnn_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import mirrored, normalized, wheel_file

# The profile's packages under stack_profiles.<name>.python, with their distribution names, in install order
# (sgl_kernel's is the profile's python.sgl_kernel.distribution where it names one).
PACKAGES = (
    ("torch", "torch"),
    ("sgl_kernel", "sgl-kernel"),
    ("flashinfer_python", "flashinfer-python"),
    ("flashinfer_cubin", "flashinfer-cubin"),
    ("flashinfer_jit_cache", "flashinfer-jit-cache"),
    ("sglang", "sglang"),
)
# Imported in this order by the verification; torch first, as everything else loads it.
IMPORTS = ("torch", "sgl_kernel", "flashinfer", "sglang")

MARKER = "ml-stack.json"
CONSTRAINTS = "ml-stack-constraints.txt"
REQUIREMENTS = "ml-stack-requirements.txt"
PIP_CHECK_EXPLAINED = "ml-stack-pip-check.txt"
PIP_OPTIONS = ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
# The reference profiles install flashinfer 0.6.4 over sglang 0.5.9's pin of 0.6.3 on purpose; a lock of any
# other profile is one consistent resolution, whose pip check must find nothing.
REFERENCE_PROFILES = ("cu130", "cu128")

# Libraries whose soname major is the CUDA major release they belong to (libnvrtc.so.12 is CUDA 12's).
CUDA_RUNTIME_LIBRARIES = ("cudart", "nvrtc", "nvrtc-builtins", "cublas", "cublasLt", "cusparse", "cufft", "curand",
                          "cusolver", "nvJitLink", "cupti")
MISSING_LIBRARY = re.compile(r"lib([A-Za-z0-9_-]+)\.so\.(\d+)(?:\.[\d.]+)?: cannot open shared object file")
UNDEFINED_SYMBOL = re.compile(r"undefined symbol: (\S+)")
NO_MODULE = re.compile(r"No module named '([^']+)'")
PIP_CHECK_CONFLICT = re.compile(
    r"^(?P<requirer>\S+) (?P<requirer_version>\S+) has requirement (?P<requirement>.+), "
    r"but you have (?P<project>\S+) (?P<version>\S+)\.$"
)
EXTRA_MARKER = re.compile(r"\bextra\s*==")
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
URL = re.compile(r"(https?://[^/\s]+|file://)/\S*")
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Debian policy's package name, optionally qualified with an architecture (libnuma1:amd64).
DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?")
# The package whose Python bindings Ansible's apt module needs to install anything.
APT_BINDINGS = "python3-apt"
# manylinux aliases older than PEP 600, by the glibc release they stand for.
LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def wheel_name(name):
    """The project name as wheel file names spell it: flashinfer-python -> flashinfer_python."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def _is_wheel(url):
    return urlsplit(url).path.endswith(".whl")


def _distribution(profile, key, distribution):
    """The distribution name of the profile's package under python.<key>."""
    return (profile["python"][key].get("distribution") or distribution) if key == "sgl_kernel" else distribution


def profile_versions(profile):
    """{distribution: version} of each package the profile pins, in install order."""
    return dict((_distribution(profile, key, distribution), profile["python"][key]["version"])
                for key, distribution in PACKAGES if profile["python"][key]["version"] is not None)


def manylinux_platforms(glibc, machine):
    """The platform tags pip accepts on a host with this glibc, newest first, for `pip download --platform`
    (pip expands none of them itself)."""
    minor = _version_tuple(glibc)[1]
    oldest = 5 if machine in ("x86_64", "i686") else 17
    tags = []
    for release in range(minor, oldest - 1, -1):
        tags.append("manylinux_2_%d_%s" % (release, machine))
        if release in LEGACY_MANYLINUX:
            tags.append("%s_%s" % (LEGACY_MANYLINUX[release], machine))
    return tags + ["linux_" + machine]


def _text_values(settings, profile):
    """(variable, value) for every setting and profile value that reaches a file (pip.conf, the constraints file,
    the completion marker) or a pip argument, named as the user sets it."""
    values = [("ml_stack_%s" % name, settings.get(name))
              for name in ("venv_path", "python", "wheelhouse_path", "wheelhouse_controller_path", "index_url")]
    mirrors = settings.get("index_mirrors")
    if isinstance(mirrors, dict):
        for prefix, mirror in mirrors.items():
            values += [("ml_stack_index_mirrors (the prefix %r)" % prefix, prefix), ("ml_stack_index_mirrors[%r]" % prefix, mirror)]
    environment = settings.get("pip_environment")
    if isinstance(environment, dict):
        values += [("ml_stack_pip_environment.%s" % name, value) for name, value in environment.items()]
    packages = settings.get("system_packages")
    if isinstance(packages, list):
        values += [("ml_stack_system_packages[%d]" % index, name) for index, name in enumerate(packages)]
    for key, _distribution in PACKAGES:
        entry = (profile.get("python") or {}).get(key) or {}
        for field in ("version", "source"):
            if entry.get(field) is not None:
                values.append(("stack_profiles.%s.python.%s.%s" % (profile.get("name"), key, field), entry[field]))
    return [(variable, value) for variable, value in values if value is not None]


def _check_settings(settings, problems):
    for name in ("venv_path", "python", "wheelhouse_path"):
        value = settings.get(name)
        if not isinstance(value, str) or not value.startswith("/") or value.rstrip("/") == "":
            problems.append("ml_stack_%s=%s is not an absolute path below /" % (name, value))
    controller_path = settings.get("wheelhouse_controller_path")
    if controller_path is not None and not (isinstance(controller_path, str) and controller_path.startswith("/")):
        problems.append("ml_stack_wheelhouse_controller_path=%s is not an absolute path on the controller" % controller_path)
    if not isinstance(settings.get("index_url"), str) or not URL.fullmatch(settings["index_url"]):
        problems.append("ml_stack_index_url=%s is not an http(s):// or file:// URL" % settings.get("index_url"))
    mirrors = settings.get("index_mirrors")
    if not isinstance(mirrors, dict):
        problems.append("ml_stack_index_mirrors must map URL prefixes to the URLs that replace them, not %r" % (mirrors,))
    else:
        for prefix, mirror in sorted(mirrors.items()):
            if not isinstance(mirror, str) or not URL.fullmatch(mirror):
                problems.append("ml_stack_index_mirrors[%s]=%r is not an http(s):// or file:// URL" % (prefix, mirror))
    environment = settings.get("pip_environment")
    if not isinstance(environment, dict) or not all(
        isinstance(value, str) and ENVIRONMENT_NAME.fullmatch(name) for name, value in environment.items()
    ):
        problems.append("ml_stack_pip_environment must map environment variable names to strings (quote numbers)")
    packages = settings.get("system_packages", [])
    if not isinstance(packages, list) or not all(isinstance(name, str) and DEBIAN_PACKAGE.fullmatch(name)
                                                 for name in packages):
        problems.append("ml_stack_system_packages=%r must list Debian package names (libnuma1, or libnuma1:amd64)"
                        % (packages,))


def installed_packages(dpkg_output):
    """The packages that `dpkg-query --show --showformat='${db:Status-Abbrev} ${Package}\\n'` reports installed: the
    status's second letter is the package's state, i once installed ("ii " as a rule, "hi " once held)."""
    installed = set()
    for line in (dpkg_output or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and len(fields[0]) >= 2 and fields[0][1] == "i":
            installed.add(fields[1])
    return installed


def missing_system_packages(names, dpkg_output):
    """The names among ml_stack_system_packages that dpkg does not report installed (one it does not know at all
    among them); an architecture qualifier (libnuma1:amd64) is not part of the name dpkg-query prints."""
    installed = installed_packages(dpkg_output)
    return [name for name in names if name.split(":", 1)[0] not in installed]


def _check_system_packages(settings, host, problems):
    """The system packages to install with apt; a problem when apt's Python bindings, which Ansible's apt module
    needs, are missing too (an offline host cannot fetch them)."""
    missing = missing_system_packages(settings.get("system_packages", []), host.get("dpkg"))
    if missing and APT_BINDINGS not in installed_packages(host.get("dpkg")):
        problems.append("ml_stack_system_packages: %s not installed on this host, and installing with Ansible's apt "
                        "module needs %s (apt's Python bindings), which this host lacks too. Have an administrator "
                        "run apt-get install %s, or install %s, then run again"
                        % (" and ".join(missing) + (" is" if len(missing) == 1 else " are"), APT_BINDINGS,
                           " ".join(missing), APT_BINDINGS))
    return missing


def _check_host(settings, profile, host, problems):
    python = host["python"]
    if python.get("error"):
        problems.append("ml_stack_python=%s cannot run on this host (%s); install it there, or set ml_stack_python to "
                        "the interpreter the virtualenv should use" % (settings["python"], python["error"]))
        return
    if python["implementation"] != "cpython":
        problems.append("ml_stack_python=%s is %s; the stack's wheels are built for CPython"
                        % (settings["python"], python["implementation"]))
    needed = profile["python"]["min_version"]
    if _version_tuple(python["version"]) < _version_tuple(needed):
        problems.append("ml_stack_python=%s is Python %s, older than the %s that stack profile %s needs "
                        "(python.min_version); point ml_stack_python at a newer interpreter"
                        % (settings["python"], python["version"], needed, profile["name"]))
    if python.get("venv_error"):
        problems.append("ml_stack_python=%s cannot create virtualenvs (%s); on Debian and Ubuntu install python3-venv"
                        % (settings["python"], python["venv_error"]))
    owner = settings.get("venv_owner")
    if owner is not None and not host.get("owner"):
        problems.append("ml_stack_venv_owner=%s is not a user on this host; create the service user first" % owner)
    link = host["venv_path"]
    if link.get("exists") and not link.get("islnk"):
        problems.append("ml_stack_venv_path=%s exists and is not a link: this role keeps one virtualenv per profile "
                        "beside it and points %s at the current one. Move it away (it is left as it is) or choose "
                        "another ml_stack_venv_path" % (settings["venv_path"], settings["venv_path"]))
    if not host.get("parent_exists"):
        problems.append("ml_stack_venv_path=%s: its directory %s does not exist; create it (the service user's home) "
                        "first" % (settings["venv_path"], posixpath.dirname(settings["venv_path"].rstrip("/"))))


def _origin(origin, source, location):
    """Where a source comes from, as the user set it: origin, and the source itself where a mirror replaced it."""
    return origin if location == source else "%s=%s through ml_stack_index_mirrors" % (origin, source)


def _package(profile, key, distribution, settings, problems):
    entry = profile["python"][key]
    source = entry["source"]
    location = mirrored(source, settings["index_mirrors"])
    origin = "stack_profiles.%s.python.%s.source" % (profile["name"], key)
    package = {
        "distribution": distribution,
        "version": entry["version"],
        "origin": _origin(origin, source, location),
        "source": location,
        "wheel": wheel_file(source) if _is_wheel(source) else None,
    }
    if package["wheel"]:
        named = package["wheel"].split("-", 1)[0]
        if normalized(named) != distribution:
            problems.append("%s=%s is a wheel of %s, not of %s" % (origin, source, named, distribution))
        machine = settings["machine"]
        platform = package["wheel"][:-len(".whl")].rsplit("-", 1)[-1]
        wheel_machine = [arch for arch in ("x86_64", "aarch64") if platform.endswith("_" + arch)]
        if wheel_machine and machine and wheel_machine != [machine]:
            problems.append("%s=%s is a wheel for %s, but this host is %s; set the %s wheel under "
                            "stack_profiles_custom.%s.python.%s.source"
                            % (origin, source, wheel_machine[0], machine, machine, profile["name"], key))
    return package


def _requirement(package, wheelhouse):
    if package["wheel"]:
        location = "file://%s/%s" % (wheelhouse, package["wheel"]) if wheelhouse else package["source"]
        return "%s @ %s" % (package["distribution"], location)
    return "%s===%s" % (package["distribution"], package["version"])


def _index_options(main_index, packages, wheelhouse):
    """pip's options for where packages come from: the main index and every index a pinned package names
    (the exact pins decide which file is taken), or only the wheelhouse."""
    if wheelhouse:
        return ["--no-index", "--find-links", wheelhouse]
    options = ["--index-url", main_index]
    for package in packages:
        if not package["wheel"] and package["source"] != main_index and package["source"] not in options:
            options += ["--extra-index-url", package["source"]]
    return options


def _steps(main_index, packages, wheelhouse):
    """pip's options and requirements after the command: sglang alone and without its requirements, then
    everything else pinned in one run, to which the role adds sglang's requirements (see dependencies())."""
    sglang = [package for package in packages if package["distribution"] == "sglang"][0]
    others = [package for package in packages if package is not sglang]
    if wheelhouse:
        sglang_sources = ["--no-index", "--find-links", wheelhouse]
    elif sglang["wheel"]:
        sglang_sources = ["--no-index"]
    else:
        sglang_sources = ["--index-url", sglang["source"]]
    return {
        "sglang": ["--no-deps"] + sglang_sources + [_requirement(sglang, wheelhouse)],
        "stack": _index_options(main_index, packages, wheelhouse) + [_requirement(package, wheelhouse) for package in others],
    }


def _sources_to_probe(main_index, packages, index_url, indexes=()):
    """What to ask before a build: each index for the page of each pinned package it serves (which must list
    that version), each wheel for itself, and for its root the main index, and each index of a lock (indexes:
    (url, origin) pairs), that no pinned package names."""
    probes = []
    for package in packages:
        probes.append({
            "url": package["source"],
            "project": None if package["wheel"] else package["distribution"],
            "version": None if package["wheel"] else package["version"],
            "origin": package["origin"],
        })
    main_origin = "ml_stack_index_url"
    if main_index != index_url:
        main_origin = "ml_stack_index_url=%s through ml_stack_index_mirrors" % index_url
    for url, origin in [(main_index, main_origin)] + list(indexes):
        if url not in [probe["url"] for probe in probes]:
            probes.append({"url": url, "project": None, "version": None, "origin": origin})
    return probes


def _pins(profile):
    """[distribution, version, wheel file or None] of each package the profile pins, in install order."""
    pins = []
    for key, distribution in PACKAGES:
        entry = profile["python"][key]
        if entry["version"] is not None:
            pins.append([_distribution(profile, key, distribution), entry["version"],
                         wheel_file(entry["source"]) if _is_wheel(entry["source"]) else None])
    return pins


def _locked(settings, profile, python, lock, problems, adoption):
    """The lock's part of the plan for this host's environment ({"path", "environment", "wheels", "indexes",
    "skipped"}), or None with the problems of a lock that does not fit the profile or the host. With an adopted
    tree (adoption), wheels leaves out what the tree stands in for, which skipped says (adopt_torch.skip_plan)."""
    found = stack_lock.problems(lock, profile, profile_versions(profile))
    if found:
        problems.append("the lock %s of stack profile %s cannot be used (%s); make it anew with %s"
                        % (lock.get("path") if isinstance(lock, dict) else None, profile["name"], "; ".join(found),
                           stack_lock.MAKE))
        return None
    refused = stack_lock.environment_problem(lock, profile["name"], python, settings["python"])
    if refused:
        problems.append(refused)
        return None
    environment = stack_lock.environment(python)
    wheels = stack_lock.wheels_for(lock, environment)
    skipped = None
    if adoption is not None:
        skipped = skip_plan(stack_lock.closure(lock, "torch", environment), adoption["distributions"], lock)
        wheels = [wheel for wheel in wheels if wheel["distribution"] not in skipped["skip"]]
    return {"path": lock["path"], "environment": environment, "wheels": wheels,
            "indexes": stack_lock.indexes(lock, wheels), "skipped": skipped}


def _locked_indexes(locked, mirrors):
    """Each index the lock's wheels come from, through the mirrors, with where it comes from."""
    return [(mirrored(index, mirrors), _origin("an index of the lock %s" % locked["path"], index,
                                               mirrored(index, mirrors)))
            for index in locked["indexes"]]


def _locked_packages(profile, locked, mirrors):
    """The profile's pinned packages as the lock installs them: from the lock's index by name and version, or a
    wheel from its URL. Those an adopted tree stands in for are not installed."""
    wheels = dict((wheel["distribution"], wheel) for wheel in locked["wheels"])
    packages = []
    for distribution in [name for name in profile_versions(profile) if name in wheels]:
        wheel = wheels[distribution]
        source = wheel["url"] if wheel["index"] is None else wheel["index"]
        location = mirrored(source, mirrors)
        packages.append({
            "distribution": distribution,
            "version": wheel["version"],
            "origin": _origin("the %s of %s in the lock %s"
                              % ("URL" if wheel["index"] is None else "index", distribution, locked["path"]),
                              source, location),
            "source": location,
            "wheel": wheel["wheel"] if wheel["index"] is None else None,
        })
    return packages


def _locked_index_options(main_index, locked, mirrors, wheelhouse):
    """pip's options for where a lock's wheels come from: the main index and each other index of the lock, or
    only the wheelhouse. The hashes decide which file is taken."""
    if wheelhouse:
        return ["--no-index", "--find-links", wheelhouse]
    options = ["--index-url", main_index]
    for location in [mirrored(index, mirrors) for index in locked["indexes"]]:
        if location != main_index and location not in options:
            options += ["--extra-index-url", location]
    return options


def _locked_requirements(profile, locked, mirrors, wheelhouse):
    """The requirements file of a locked install: the lock's wheels for the environment, each by its hash, but
    those an adopted tree stands in for."""
    adopted = ("# Left out, as the adopted torch (%s) stands in for them: %s.\n"
               % (TORCH_FROM, ", ".join(locked["skipped"]["skip"])) if locked["skipped"] else "")
    return "".join(
        ["# Written by blackwell.gpu_node.ml_stack from the lock %s of stack profile %s for %s: pip installs\n"
         "# exactly these wheels, each by its sha256 (--require-hashes --no-deps).\n%s"
         % (profile["python"]["lock"], profile["name"], locked["environment"], adopted)]
        + [line + "\n" for line in stack_lock.requirement_lines(locked["wheels"], mirrors, wheelhouse)])


def is_profile_virtualenv(venv_path, name):
    """True when name is one that profile_virtualenv gives a virtualenv beside venv_path (<name>.<profile>-<8 hex
    digits>): a plain name, never a path."""
    ours = re.escape(posixpath.basename(venv_path.rstrip("/"))) + r"\." + PROFILE_NAME.pattern + r"-[0-9a-f]{8}"
    return isinstance(name, str) and re.fullmatch(ours, name) is not None


def _lock_pins(wheels):
    return [[wheel["distribution"], wheel["version"], wheel["sha256"]] for wheel in wheels]


def profile_virtualenv(venv_path, profile, python, python_report, lock=None, adoption=None):
    """Where the profile's virtualenv goes beside the stable path venv_path: <name>.<profile>-<digest>, the digest
    of the profile's pins, the interpreter it is made with (ml_stack_python) and that interpreter's X.Y (from
    python_report, what inspect_python.py says of it), of a locked profile every wheel of the lock for that
    interpreter's environment (a new lock builds a new virtualenv), and of an adopted tree (adopt_torch.adopted)
    its site-packages and its torch's version: a virtualenv built on an adopted torch is never taken for one with
    its own, nor for one built on another torch. The preflight role asks the same, with the same inputs, to know
    whether a run builds a new one."""
    python_series = ".".join(str(part) for part in _version_tuple(python_report["version"]))
    digested = [_pins(profile), python, python_series]
    if lock is not None:
        digested.append(_lock_pins(stack_lock.wheels_for(lock, stack_lock.environment(python_report))))
    if adoption is not None:
        digested.append([adoption["site_packages"], adoption["torch"]["distribution"]])
    digest = hashlib.sha256(json.dumps(digested).encode()).hexdigest()[:8]
    venv_path = venv_path.rstrip("/")
    name = "%s.%s-%s" % (posixpath.basename(venv_path), profile["name"], digest)
    return {"python_series": python_series, "digest": digest, "name": name,
            "dir": posixpath.join(posixpath.dirname(venv_path), name)}


def build_plan(settings, profile, host, lock=None, adoption=None):
    """Everything the role does for this host, or {'problems': [...]} naming each variable to fix.

    settings: the role variables without the ml_stack_ prefix. profile: the resolved stack profile.
    host: what the host said about ml_stack_python ('python': version, implementation, machine, glibc,
    venv_error or error), the owner ('owner': truthy if the user exists), the stable path ('venv_path': exists,
    islnk) and whether its directory exists ('parent_exists'). lock: the profile's lock as the stack role read
    it (stack_selected_lock), or None for a profile without one. adoption: the tree of settings' torch_from, as
    adopt_torch.decide found it adoptable (or recheck, for the converged check); None plans the profile's own torch.
    """
    problems = control_character_problems(_text_values(settings, profile))
    if problems:
        return {"problems": problems}
    _check_settings(settings, problems)
    if not isinstance(profile.get("name"), str) or not PROFILE_NAME.fullmatch(profile["name"]):
        problems.append("stack_profile=%r cannot name a directory; use letters, digits, '.', '_' and '-'" % profile.get("name"))
    if problems:
        return {"problems": problems}
    system_packages_missing = _check_system_packages(settings, host, problems)
    _check_host(settings, profile, host, problems)
    if host["python"].get("error"):
        return {"problems": problems}
    settings = dict(settings, machine=host["python"]["machine"])
    mirrors = settings["index_mirrors"]
    if settings.get("torch_from") is not None and lock is None:
        problems.append("%s=%s adopts a torch only into a locked stack profile, and stack profile %s has no lock "
                        "(python.lock): without one there is no closure of torch to leave out of the virtualenv. "
                        "Choose a locked profile (stack_profile), give this one a lock (%s, then "
                        "stack_profiles_custom.%s.python.lock), or set %s to null"
                        % (TORCH_FROM, settings["torch_from"], profile["name"], stack_lock.MAKE, profile["name"],
                           TORCH_FROM))
    adoption = adoption if settings.get("torch_from") is not None else None
    locked = None if lock is None else _locked(settings, profile, host["python"], lock, problems, adoption)
    if locked is not None:
        packages = _locked_packages(profile, locked, mirrors)
    else:
        packages = [
            _package(profile, key, _distribution(profile, key, distribution), settings, problems)
            for key, distribution in PACKAGES
            if profile["python"][key]["version"] is not None
        ]
    offline = bool(settings["offline"])
    if offline and settings.get("wheelhouse_controller_path") and not host["python"].get("glibc"):
        problems.append("ml_stack_wheelhouse_controller_path is set, but this host's Python reports no glibc: the "
                        "controller can only download manylinux wheels; fill ml_stack_wheelhouse_path yourself")
    if problems:
        return {"problems": problems}

    pins = _pins(profile)
    adopted = bool(locked and locked["skipped"])
    venv = profile_virtualenv(settings["venv_path"], profile, settings["python"], host["python"], lock,
                              adoption if adopted else None)
    python_series, digest, venv_name, venv_dir = venv["python_series"], venv["digest"], venv["name"], venv["dir"]
    venv_path = settings["venv_path"].rstrip("/")
    versions = dict((package["distribution"], package["version"]) for package in packages)
    if adopted:
        # The adopted tree's own version of each pinned distribution it stands in for: what the virtualenv runs.
        versions = dict((name, versions.get(name) or locked["skipped"]["versions"][name])
                        for name in profile_versions(profile))
    main_index = mirrored(settings["index_url"], mirrors)
    wheelhouse = settings["wheelhouse_path"].rstrip("/") if offline else None
    requirements = posixpath.join(venv_dir, REQUIREMENTS)
    cudnn = cudnn_check(profile)
    if locked is None:
        steps = _steps(main_index, packages, wheelhouse)
        indexes = []
    else:
        steps = {"lock": ["--require-hashes", "--no-deps"]
                 + _locked_index_options(main_index, locked, mirrors, wheelhouse) + ["-r", requirements]}
        indexes = _locked_indexes(locked, mirrors)

    result = {
        "problems": [],
        "profile": profile["name"],
        "digest": digest,
        "venv_path": venv_path,
        "venv_name": venv_name,
        "venv_dir": venv_dir,
        "python": settings["python"],
        "python_series": python_series,
        "cuda": profile["python"]["torch"]["cuda"],
        "system_packages_missing": system_packages_missing,
        "packages": packages,
        "versions": versions,
        "imports": list(IMPORTS),
        "install": dict((name, ["install"] + PIP_OPTIONS + step) for name, step in steps.items()),
        "sources": [] if offline else _sources_to_probe(main_index, packages, settings["index_url"], indexes),
        "offline": offline,
        "wheelhouse": wheelhouse,
        "download": None,
        "lock": locked,
        "adoption": None,
        "cudnn": cudnn,
        "files": {
            "marker": posixpath.join(venv_dir, MARKER),
            "constraints": posixpath.join(venv_dir, CONSTRAINTS),
            "pip_conf": posixpath.join(venv_dir, "pip.conf"),
            "pip_check": posixpath.join(venv_dir, PIP_CHECK_EXPLAINED),
        },
        # What inspect_stack.py is asked for (the role adds the imports): the pins, the cuDNN wheel that SGLang's
        # check weighs, and a locked virtualenv's every distribution.
        "inspect": {"distributions": list(versions) + ([cudnn["distribution"]] if cudnn else []),
                    "marker": posixpath.join(venv_dir, MARKER), "every_distribution": locked is not None},
        "marker": {
            "profile": profile["name"],
            "digest": digest,
            "python": settings["python"],
            "python_series": python_series,
            "packages": versions,
            "wheels": dict((package["distribution"], package["wheel"]) for package in packages if package["wheel"]),
        },
    }
    if adopted:
        # The .pth file goes into the virtualenv's own site-packages, by its path in the virtualenv.
        own_site_packages = posixpath.join("lib", "python" + python_series, "site-packages")
        result["adoption"] = dict(locked["skipped"], torch_from=settings["torch_from"],
                                  site_packages=adoption["site_packages"], torch=adoption["torch"]["distribution"],
                                  pth=dict(pth(adoption["site_packages"]),
                                           name=posixpath.join(own_site_packages, PTH_NAME)))
        result["files"]["pth"] = posixpath.join(venv_dir, result["adoption"]["pth"]["name"])
        result["inspect"]["adopted"] = adoption["site_packages"]
        result["marker"]["adopted"] = {"site_packages": adoption["site_packages"],
                                       "torch": adoption["torch"]["distribution"]}
    constrained = ([(package["distribution"], package["version"]) for package in packages] if locked is None
                   else sorted([(wheel["distribution"], wheel["version"]) for wheel in locked["wheels"]]
                               + list((locked["skipped"] or {}).get("versions", {}).items())))
    # The distributions the adopted tree stands in for are pinned at its versions: pip sees them there, and takes
    # nothing else in their place.
    result["constraints"] = "".join(
        ["# Written by blackwell.gpu_node.ml_stack for stack profile %s. pip reads it through this virtualenv's\n"
         "# pip.conf on every install here, so that nothing replaces these versions; another profile gets a new\n"
         "# virtualenv instead.\n" % profile["name"]]
        + ["%s===%s\n" % pinned for pinned in constrained]
    )
    result["pip_conf"] = pip_conf(result["files"]["constraints"])
    if locked is not None:
        result["files"]["requirements"] = requirements
        result["requirements"] = _locked_requirements(profile, locked, mirrors, wheelhouse)
    result["marker_text"] = marker_text(result["marker"])
    result["pins"] = managed_files(result)
    controller_path = settings.get("wheelhouse_controller_path")
    if offline and controller_path:
        result["download"] = _download(settings, profile, host, packages, main_index, pins, locked, indexes)
    return result


def managed_files(plan, explanation=None):
    """Every file the role writes into the profile's virtualenv, declared once, by its path in the virtualenv
    (file_groups gives them to venv_files): the pins, root's so that the owner cannot edit them in place (the
    constraints file, the pip.conf that makes every pip run here read it, a lock's requirements file and, with an
    adopted torch, the .pth file in the virtualenv's site-packages that makes it see the tree), then, given the
    explanation of pip check that verification made, the files of a verified virtualenv, the completion marker
    last: only a complete, verified, pinned virtualenv carries it.

    install.yml writes the pins (the plan's "pins") before pip runs in a build; activate.yml writes them all (the
    verdict's "files") on every run past the converged check, which compares each with the host."""
    files = [
        {"name": posixpath.basename(plan["files"]["constraints"]), "content": plan["constraints"], "root": True},
        {"name": posixpath.basename(plan["files"]["pip_conf"]), "content": plan["pip_conf"], "root": True},
    ]
    if plan.get("lock") is not None:
        files.append({"name": posixpath.basename(plan["files"]["requirements"]), "content": plan["requirements"],
                      "root": True})
    if plan.get("adoption"):
        files.append(dict(plan["adoption"]["pth"], root=True))
    if explanation is not None:
        files += [
            {"name": posixpath.basename(plan["files"]["pip_check"]), "content": explanation, "root": False},
            {"name": posixpath.basename(plan["files"]["marker"]), "content": plan["marker_text"], "root": False},
        ]
    return files


def file_groups(files):
    """managed_files() by the directory of the virtualenv they lie in ("" for the virtualenv itself), each with
    the plain names venv_files writes: those of its subdirectories first, the virtualenv's own last, so that the
    completion marker is written last."""
    groups = {}
    for entry in files:
        directory, name = posixpath.split(entry["name"])
        groups.setdefault(directory, []).append(dict(entry, name=name))
    return [{"directory": directory, "files": groups[directory]}
            for directory in sorted(groups, key=lambda directory: (directory == "", directory))]


def marker_text(marker):
    """The completion marker's file content, as Ansible's to_nice_json writes it (the marker of hosts built by
    earlier releases reads the same)."""
    return json.dumps(marker, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def pip_conf(constraints):
    """The virtualenv's pip.conf, written by the parser pip reads it with (configparser, without interpolation)."""
    config = configparser.RawConfigParser()
    config["global"] = {"constraint": constraints}
    text = io.StringIO()
    config.write(text)
    return ("# Written by blackwell.gpu_node.ml_stack: every pip run in this virtualenv honours the stack's pins.\n"
            + text.getvalue())


def _download(settings, profile, host, packages, main_index, pins, locked, indexes):
    """The controller's pip download of this host's wheelhouse, for the host's platform: the same two steps, or
    of a locked profile exactly the lock's wheels for the host's environment, each by its hash (one step, with
    the requirements file the controller writes beside the wheelhouse)."""
    python = host["python"]
    series = _version_tuple(python["version"])
    platforms = manylinux_platforms(python["glibc"], python["machine"])
    keyed = [pins, platforms[0], list(series)] + ([_lock_pins(locked["wheels"])] if locked is not None else [])
    key_digest = hashlib.sha256(json.dumps(keyed).encode()).hexdigest()[:8]
    folder = posixpath.join(settings["wheelhouse_controller_path"].rstrip("/"),
                            "%s-%s-cp%d%d-%s" % (profile["name"], key_digest, series[0], series[1], platforms[0]))
    target = ["--only-binary=:all:", "--python-version", "%d.%d" % series, "--implementation", "cp",
              "--abi", "cp%d%d" % series]
    for platform in platforms:
        target += ["--platform", platform]
    common = ["download"] + PIP_OPTIONS + ["--dest", folder + ".partial"] + target
    spec = dict(
        folder=folder,
        partial=folder + ".partial",
        pinned=[package["distribution"] for package in packages],
        sources=_sources_to_probe(main_index, packages, settings["index_url"], indexes),
    )
    if locked is None:
        spec.update((name, common + step) for name, step in _steps(main_index, packages, None).items())
        return spec
    mirrors = settings["index_mirrors"]
    requirements = folder + ".requirements.txt"
    spec["requirements"] = {"path": requirements, "content": _locked_requirements(profile, locked, mirrors, None)}
    spec["steps"] = [common + ["--require-hashes", "--no-deps"]
                     + _locked_index_options(main_index, locked, mirrors, None) + ["-r", requirements]]
    return spec


def dependencies(requires, pinned):
    """sglang's requirements (Requires-Dist lines) that pip resolves for it: all but the profile's pinned
    packages (installed at the profile's versions, over sglang's own pins on purpose) and extras."""
    pinned = set(normalized(name) for name in pinned)
    kept = []
    for requirement in requires or []:
        name = REQUIREMENT_NAME.match(requirement)
        if name is None or normalized(name.group(1)) in pinned:
            continue
        marker = requirement.split(";", 1)[1] if ";" in requirement else ""
        if EXTRA_MARKER.search(marker):
            continue
        kept.append(requirement.strip())
    return kept


def missing_wheels(packages, filenames):
    """The pinned packages that a wheelhouse (a list of file names) lacks."""
    lowered = [name.lower() for name in filenames]
    missing = []
    for package in packages:
        if package["wheel"]:
            found = package["wheel"].lower() in lowered
        else:
            prefix = "%s-%s-" % (wheel_name(package["distribution"]), package["version"].lower())
            found = any(name.startswith(prefix) and name.endswith(".whl") for name in lowered)
        if not found:
            missing.append("%s %s (%s)" % (package["distribution"], package["version"],
                                           package["wheel"] or "a wheel for this Python and platform"))
    return missing


def classify_pip_check(output, versions):
    """Split pip check's lines into those the profile causes on purpose (a pinned package at its pinned version
    where another package wants something else) and all others."""
    pinned = dict((normalized(name), version) for name, version in versions.items())
    deliberate, unexpected = [], []
    for line in (output or "").splitlines():
        line = line.strip()
        if not line or line == "No broken requirements found.":
            continue
        conflict = PIP_CHECK_CONFLICT.match(line)
        if conflict and pinned.get(normalized(conflict.group("project"))) == conflict.group("version"):
            deliberate.append(line)
        else:
            unexpected.append(line)
    return sorted(deliberate), unexpected


def pip_check_explanation(profile, deliberate):
    header = (
        "# `pip check` in this virtualenv reports the lines below on purpose. Stack profile %s\n"
        "# (blackwell.gpu_node.ml_stack) installs each package named after \"you have\" at exactly that version,\n"
        "# over the requirement of the package the line starts with; sglang 0.5.9, for one, pins flashinfer 0.6.3\n"
        "# while the profile runs 0.6.4. Any line of pip check that is not below is a real problem.\n" % profile
    )
    return header + "".join(line + "\n" for line in deliberate)


def error_line(error):
    """The line of a (possibly long, multi-line) import error that says what failed: the first naming a missing
    library, an undefined symbol or a missing module, else the first line."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    for pattern in (MISSING_LIBRARY, UNDEFINED_SYMBOL, NO_MODULE):
        for line in lines:
            if pattern.search(line):
                return line
    return lines[0] if lines else "no error text"


def needs_driver(error):
    """The import failed because the NVIDIA driver's library is absent (a machine without GPU)."""
    missing = MISSING_LIBRARY.search(error or "")
    return missing is not None and missing.group(1) == "cuda"


def diagnose(module, error, plan, torch_version=None):
    """What an import error means for this stack, and the fix. The first cause the error names decides."""
    error = error or ""
    cuda_major = plan["cuda"].split(".")[0]
    missing = MISSING_LIBRARY.search(error)
    if needs_driver(error):
        return ("libcuda.so.%s is the NVIDIA driver's library: this host has no driver, so %s cannot load. Install "
                "the driver (the cuda role can), or set ml_stack_gpus_required: false on a machine without GPU"
                % (missing.group(2), module))
    if missing and missing.group(1) in CUDA_RUNTIME_LIBRARIES:
        library = "lib%s.so.%s" % (missing.group(1), missing.group(2))
        if missing.group(2) != cuda_major:
            hint = ""
            kernel = [package["source"] for package in plan["packages"] if package["distribution"] == "sgl-kernel"]
            if module == "sgl_kernel" and kernel:
                hint = " PyPI's sgl-kernel is built with CUDA 12.9; the profile takes it from %s." % kernel[0]
            return ("%s wants %s: a CUDA %s wheel on this CUDA %s stack (profile %s). Install the package from the "
                    "profile's source, as this role does.%s"
                    % (module, library, missing.group(2), plan["cuda"], plan["profile"], hint))
        return ("%s is not found by the dynamic linker: torch's nvidia-* runtime wheels are missing from the "
                "virtualenv, or CUDA %s's lib64 is not registered with ldconfig (the cuda role registers it)"
                % (library, plan["cuda"]))
    if missing:
        return ("lib%s.so.%s is a system library that %s links and this host lacks; install the package that "
                "provides it (list it in ml_stack_system_packages; sgl-kernel's libnuma.so.1 is Debian's and "
                "Ubuntu's libnuma1)" % (missing.group(1), missing.group(2), module))
    symbol = UNDEFINED_SYMBOL.search(error)
    if symbol:
        return ("ABI mismatch: %s was built against another torch than the installed %s (undefined symbol %s); the "
                "profile pins torch %s, and a package that replaced torch, or a wheel made for another torch "
                "release, causes this" % (module, torch_version or "torch", symbol.group(1), plan["versions"]["torch"]))
    absent = NO_MODULE.search(error)
    if absent:
        return "%s is not installed in the virtualenv (import %s)" % (absent.group(1), module)
    return "no known cause; the error above is what Python said"


def diagnose_install(plan, output):
    """What the output of a failed pip run says about the lock's wheels: one explanation per wheel pip refused
    because its sha256 is not the one the lock pins (or a requirement of the profile's pins, without a lock)."""
    locked = dict((wheel["distribution"], wheel) for wheel in (plan.get("lock") or {}).get("wheels", []))
    explained = []
    for mismatch in stack_lock.hash_mismatches(output):
        wheel = locked.get(mismatch["name"])
        if wheel:
            pinned = ("the lock %s pins %s %s as %s with sha256 %s"
                      % (plan["lock"]["path"], mismatch["name"], wheel["version"], wheel["wheel"], wheel["sha256"]))
        else:
            pinned = "the requirement pins sha256 %s" % " or ".join(mismatch["expected"])
        explained.append(
            "pip refused %s: the file it got (%s) has sha256 %s, and %s. It is not the file that was locked: someone "
            "replaced or tampered with it at the index, the mirror or the wheelhouse. Nothing was installed from it "
            "and nothing was activated. Have the source serve the locked file, or make the lock anew with %s once "
            "the new file is trusted"
            % (mismatch["name"], mismatch["url"] or "its URL is not known", mismatch["got"], pinned, stack_lock.MAKE))
    return explained


def _adoption_problems(adoption, state, installed):
    """Whether the virtualenv sees each distribution the adopted tree stands in for there, and has none of them
    itself (installed: its own distributions)."""
    problems = ["%s %s is installed in the virtualenv itself, where the adopted tree's (%s=%s) stands in for it"
                % (name, installed[name], TORCH_FROM, adoption["torch_from"])
                for name in adoption["skip"] if name in installed]
    seen = state.get("adopted")
    if not isinstance(seen, dict):
        return problems + ["the inspection did not list the distributions of the adopted tree %s"
                           % adoption["site_packages"]]
    return problems + [
        "the virtualenv does not see %s %s of the adopted tree %s (it sees %s there): its %s is missing or names "
        "another directory, or the tree changed" % (name, version, adoption["site_packages"],
                                                    seen.get(name) or "none", PTH_NAME)
        for name, version in sorted(adoption["versions"].items()) if seen.get(name) != version]


def _state_problems(plan, state):
    problems = []
    if plan.get("lock") is not None:
        installed = state.get("installed")
        if isinstance(installed, dict):
            adoption = plan.get("adoption")
            if adoption:
                problems += _adoption_problems(adoption, state, installed)
                installed = dict((name, version) for name, version in installed.items() if name not in adoption["skip"])
            problems += stack_lock.describe(stack_lock.compare(installed, plan["lock"]["wheels"]))
        else:
            problems.append("the inspection did not list every distribution of the virtualenv")
    for distribution, version in [] if plan.get("lock") is not None else sorted(plan["versions"].items()):
        found = state["versions"].get(distribution)
        if found is None:
            problems.append("%s is not installed (the profile pins %s)" % (distribution, version))
        elif found != version:
            problems.append("%s is %s, the profile pins %s" % (distribution, found, version))
    for package in plan["packages"]:
        url = state.get("direct_urls", {}).get(package["distribution"])
        if package["wheel"] and state["versions"].get(package["distribution"]) and (
                url is None or wheel_file(url) != package["wheel"]):
            problems.append("%s was installed from %s, not from the profile's wheel %s"
                            % (package["distribution"], url or "an index", package["wheel"]))
        elif not package["wheel"] and url is not None:
            problems.append("%s was installed from %s, not from the profile's index %s"
                            % (package["distribution"], url, package["source"]))
    return problems


def _distributions(state):
    """{distribution: version} of every distribution the inspection found in the virtualenv: those it was asked for,
    and of a locked one every one, an adopted tree's included."""
    found = dict((name, version) for name, version in state.get("versions", {}).items() if version is not None)
    for listed in (state.get("installed"), state.get("adopted")):
        found.update(listed if isinstance(listed, dict) else {})
    return found


def verdict(plan, observed, gpus_required=True):
    """Compare what the host has with the plan.

    observed may hold 'state' (versions and direct_urls, and for a lock every installed distribution, what
    inspect_stack.py reports without importing), 'marker' (the virtualenv's completion marker), 'verification'
    (modules and pip_check, what it reports when importing), 'wheelhouse' (file names) and 'pip_output' (what a
    failed pip run printed). Returns exact (complete, and exactly the plan's pins, or the lock, from the plan's
    sources), ok (no problem in what was observed), the problems, notes on what was not checked and on SGLang's
    cuDNN check that the state fails (said, not refused: the runtime_env role disables that check by default), and
    the pip check lines that the profile causes on purpose with the text that explains them.
    """
    problems, notes = [], []
    result = {"exact": False}
    if "state" in observed:
        state_problems = _state_problems(plan, observed["state"])
        problems += state_problems
        result["exact"] = not state_problems and observed.get("marker") == plan["marker"]
    if "pip_output" in observed:
        problems += diagnose_install(plan, observed["pip_output"])
    if "wheelhouse" in observed:
        locked = plan.get("lock")
        missing = missing_wheels(locked["wheels"] if locked is not None else plan["packages"], observed["wheelhouse"])
        if missing:
            problems.append("ml_stack_wheelhouse_path=%s lacks wheels for: %s; add them, or set "
                            "ml_stack_wheelhouse_controller_path to have the controller download them"
                            % (plan["wheelhouse"], "; ".join(missing)))
    if "verification" in observed:
        verification = observed["verification"]
        modules = verification["modules"]
        torch = modules.get("torch", {})
        for module in plan["imports"]:
            error = modules.get(module, {}).get("error")
            if modules.get(module, {}).get("ok"):
                continue
            if not gpus_required and needs_driver(error):
                notes.append("import %s needs the NVIDIA driver (libcuda.so.1), which this host lacks; not checked "
                             "further (ml_stack_gpus_required: false)" % module)
                continue
            problems.append("import %s failed: %s. Diagnosis: %s"
                            % (module, error_line(error), diagnose(module, error, plan, torch.get("version"))))
        if torch.get("ok") and torch.get("cuda") != plan["cuda"]:
            problems.append("torch %s reports torch.version.cuda %s, the profile expects %s (python.torch.cuda): a torch "
                            "built for another CUDA, or a profile whose python.torch.cuda does not match its torch"
                            % (torch.get("version"), torch.get("cuda"), plan["cuda"]))
        # A lock is one resolution: only a reference profile's pip check has lines on purpose.
        on_purpose = plan["versions"] if plan.get("lock") is None or plan["profile"] in REFERENCE_PROFILES else {}
        deliberate, unexpected = classify_pip_check(verification["pip_check"], on_purpose)
        if unexpected:
            problems.append("pip check reports problems the profile does not explain: %s" % " | ".join(unexpected))
        # A distribution of the adopted tree at another version than the lock's is said, not refused.
        notes += (plan.get("adoption") or {}).get("differences", [])
        result["deliberate"] = deliberate
        result["explanation"] = pip_check_explanation(plan["profile"], deliberate)
        result["files"] = managed_files(plan, result["explanation"])
    if "state" in observed:
        cudnn = cudnn_problem(plan["cudnn"], _distributions(observed["state"]))
        notes += [cudnn] if cudnn else []
    result.update(ok=not problems, problems=problems, notes=notes)
    return result


def build_decision(plan, venv, inspected, venv_owner):
    """Whether the profile's virtualenv must be built (or repaired), and why; nothing is asked of an index here.

    venv: {"exists", "owner"} of the plan's venv_dir (owner: its owner's name). inspected: what inspect_stack.py
    reported on it (versions, direct_urls, marker), or {"error": what its interpreter wrote} when it did not run;
    ignored when the virtualenv does not exist. venv_owner: ml_stack_venv_owner (None: whoever runs the role).
    Returns new (there is none yet), build, chown (one built by an earlier release as root is handed to its owner
    and repaired), the reasons for a build, and remove: the distributions of a locked virtualenv that the lock
    does not name, which a repair uninstalls (pip install --no-deps leaves them).
    """
    foreign_owner = venv["owner"] if venv["exists"] and venv_owner is not None and venv["owner"] != venv_owner else None
    if not venv["exists"]:
        exact, reasons = False, ["there is no %s" % plan["venv_dir"]]
    elif "error" in inspected:
        exact, reasons = False, ["its interpreter does not run: %s" % inspected["error"]]
    else:
        state = verdict(plan, {"state": inspected, "marker": inspected.get("marker")})
        exact, reasons = state["exact"], list(state["problems"])
        if not exact and not reasons:
            reasons.append("it is not marked complete for this profile")
    if foreign_owner is not None:
        reasons.append("it belongs to %s, not to ml_stack_venv_owner=%s" % (foreign_owner, venv_owner))
    remove = []
    if venv["exists"] and plan.get("lock") is not None and isinstance(inspected.get("installed"), dict):
        remove = [extra[0] for extra in stack_lock.compare(inspected["installed"], plan["lock"]["wheels"])["extra"]]
    return {"new": not venv["exists"], "build": not exact or foreign_owner is not None,
            "chown": foreign_owner is not None, "reasons": reasons, "remove": remove}


def prune_plan(venv_path, candidates, keep, protected):
    """Which old per-profile virtualenvs beside the stable path to remove, keeping the `keep` newest.

    candidates: [{"path", "mtime"}], directories (as ansible.builtin.find reports them). protected: link targets never
    removed (the link's target now, and its target before this run until the new stack is proven), relative to the
    stable path's directory or absolute. keep: how many old virtualenvs to keep besides the protected ones; None
    keeps every one. Only directories beside the stable path named as build_plan names them
    (<name>.<profile>-<8 hex digits>) are ever candidates: anything else there is not ours.
    Returns {"remove": [paths], "kept": [paths], "problems": [...]}, the paths newest first.
    """
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        return {"remove": [], "kept": [], "problems": [
            "ml_stack_keep=%r must be a whole number, 0 or more (old virtualenvs kept besides the current one), or "
            "null to keep every one" % (keep,)]}
    venv_path = venv_path.rstrip("/")
    parent = posixpath.dirname(venv_path)
    spared = set(posixpath.normpath(posixpath.join(parent, target)) for target in protected if target)
    old = sorted((candidate for candidate in candidates
                  if posixpath.dirname(posixpath.normpath(candidate["path"])) == parent
                  and is_profile_virtualenv(venv_path, posixpath.basename(posixpath.normpath(candidate["path"])))
                  and posixpath.normpath(candidate["path"]) not in spared),
                 key=lambda candidate: (candidate["mtime"], candidate["path"]), reverse=True)
    paths = [posixpath.normpath(candidate["path"]) for candidate in old]
    if keep is None:
        return {"remove": [], "kept": paths, "problems": []}
    return {"remove": paths[keep:], "kept": paths[:keep], "problems": []}


# The converged check (the ml_stack_converged_info module): what the role's tasks would find and do, observed in
# one call.
FILE_MODE = 0o644
# The marker, the pins and the pip check explanation are a few KiB; anything larger there is not the role's.
FILE_LIMIT = 1 << 20
# install.yml writes the pins as root's, so that the virtualenv's owner cannot edit them in place.
PINS_OWNER = {"uid": 0, "gid": 0}


def _python_report(rc, stdout, stderr):
    """What preflight.yml makes of inspect_python.py's run."""
    if rc == 0:
        try:
            return json.loads(stdout)
        except ValueError:
            pass
    return {"error": stderr.strip() or "exit status %d" % rc}


def _link(path):
    """The stable path as preflight.yml sees it, with the link's target and owner when it is a link."""
    try:
        found = os.lstat(path)
    except OSError:
        return {"exists": False, "islnk": False}
    if not stat_module.S_ISLNK(found.st_mode):
        return {"exists": True, "islnk": False}
    return {"exists": True, "islnk": True, "target": os.readlink(path), "uid": found.st_uid, "gid": found.st_gid}


def _candidates(venv_path):
    """The directories beside the stable path named after it, as prune.yml's find lists them."""
    parent, name = posixpath.split(venv_path.rstrip("/"))
    found = []
    for entry in os.scandir(parent):
        if entry.name.startswith(name + ".") and entry.is_dir(follow_symlinks=False):
            found.append({"path": entry.path, "mtime": entry.stat(follow_symlinks=False).st_mtime})
    return found


def observe_stack(settings, profile, scripts, run, user, user_name, lock=None):
    """Everything stack_unconverged_reasons needs, in one call on the host: the plan preflight.yml makes, the
    profile's virtualenv inspected as verify.yml inspects it (imports and pip check included), the files
    activate.yml and install.yml write, the stable path and the directories prune.yml looks at; with
    settings' torch_from, the adopted tree as adopt_torch.yml weighs it, but for importing torch, which the
    inspection of the virtualenv does through its .pth file (adopt_torch.recheck).

    settings: the role's settings as preflight.yml passes them to build_plan (venv_owner, system_packages...).
    lock: the profile's lock (stack_selected_lock), or None.
    scripts: the source of the role's inspect_python.py, inspect_stack.py and (with torch_from) inspect_torch.py,
    by those names. ``run(argv)`` returns ``(rc, stdout, stderr)``; ``user(name)`` the user's ``{"uid", "gid"}``
    or None; ``user_name(uid)`` the name or None. Anything it cannot observe comes back as ``{"error": ...}``."""
    # What build_plan refuses before it looks at the host is refused before anything runs there, and so is what
    # adopt_torch.yml refuses before it looks at the tree.
    problems = control_character_problems(_text_values(settings, profile)) + torch_from_problems(settings.get("torch_from"))
    if not problems:
        _check_settings(settings, problems)
    if problems:
        return {"plan": {"problems": problems}}
    if not isinstance(settings.get("venv_owner"), (str, type(None))):
        return {"error": "ml_stack_venv_owner=%r is not a user name" % (settings["venv_owner"],)}
    owner = user(settings["venv_owner"]) if settings["venv_owner"] is not None else None
    venv_path = settings["venv_path"]
    host = {
        "python": _python_report(*run([settings["python"], "-B", "-c", scripts["inspect_python.py"]])),
        "owner": owner is not None,
        "venv_path": _link(venv_path),
        "parent_exists": os.path.isdir(posixpath.dirname(venv_path.rstrip("/")) or "/"),
        "dpkg": "",
    }
    packages = settings.get("system_packages") or []
    if packages:
        rc, stdout, stderr = run(["dpkg-query", "--show", "--showformat=${db:Status-Abbrev} ${Package}\n"]
                                 + list(packages) + [APT_BINDINGS])
        if rc not in (0, 1):
            return {"error": "dpkg-query failed (exit status %d): %s" % (rc, stderr.strip())}
        host["dpkg"] = stdout
    adoption = None
    # Past what build_plan refuses without it: a tree to adopt needs a lock, an interpreter that runs, and the
    # owner it is inspected as.
    if (settings.get("torch_from") is not None and lock is not None and not host["python"].get("error")
            and (owner is not None or settings["venv_owner"] is None)):
        try:
            adoption = recheck(profile, settings["torch_from"], host["python"]["version"], settings["python"],
                               scripts["inspect_torch.py"], run, owner["uid"] if owner else 0, user_name)
        except InvalidOption as exc:
            return {"error": str(exc)}
        if not adoption["ok"]:
            return {"plan": {"problems": adoption["problems"]}}
    plan = build_plan(settings, profile, host, lock, adoption)
    if plan["problems"]:
        return {"plan": plan}
    observed = {"plan": plan, "owner": owner, "link": host["venv_path"], "inspected": {}, "files": {},
                "candidates": _candidates(venv_path)}
    try:
        venv_stat = os.lstat(plan["venv_dir"])
    except OSError:
        observed["venv"] = {"exists": False, "owner": None}
        return observed
    observed["venv"] = {"exists": True, "owner": user_name(venv_stat.st_uid)}
    request = dict(plan["inspect"], imports=plan["imports"])
    # Run as whoever owns what decides the virtualenv's code, which is ml_stack_venv_owner on a host the role
    # built: a virtualenv of someone else's is then a reason to repair it, and still never run as root.
    try:
        argv = owner_argv(venv_owner_uid(plan["venv_dir"]), [plan["venv_dir"] + "/bin/python", "-B", "-c",
                                                             scripts["inspect_stack.py"], json.dumps(request)],
                          "ml_stack_venv_path")
    except InvalidOption as exc:
        return {"error": str(exc)}
    rc, stdout, stderr = run(argv)
    try:
        inspected = json.loads(stdout) if rc == 0 else None
    except ValueError:
        inspected = None
    observed["inspected"] = inspected if isinstance(inspected, dict) and "modules" in inspected else {
        "error": stderr.strip() or "exit status %d" % rc}
    observed["files"] = dict((entry["name"], file_state(posixpath.join(plan["venv_dir"], entry["name"]), FILE_LIMIT))
                             for entry in managed_files(plan, ""))
    observed["foreign_writable"] = _foreign_writable(plan["venv_dir"], venv_stat)
    return observed


def _foreign_writable(venv_dir, venv_stat):
    """{"first": the first entry of the virtualenv that a user other than its owner or root can change, or None;
    "complete": whether the walk saw every entry; "error": why it could not walk it, or None}: one lstat of each
    entry, no link followed. activate.yml's
    venv_files takes that write permission away, and fails naming an entry of another user. Only a directory is
    walked: anything else is no virtualenv to repair."""
    if not stat_module.S_ISDIR(venv_stat.st_mode):
        return {"first": None, "complete": True, "error": None}
    try:
        _owner, problems, complete = foreign_writable(venv_dir, limit=1)
    except OSError as exc:
        return {"first": None, "complete": False, "error": "%s could not be walked: %s" % (venv_dir, exc.strerror)}
    return {"first": problems[0] if problems else None, "complete": complete, "error": None}


def _file_reasons(path, found, content, owner):
    if found is None:
        return ["%s is missing or not a regular file" % path]
    if owner is not None and (found["uid"], found["gid"]) != (owner["uid"], owner["gid"]):
        return ["%s does not belong to its owner" % path]
    if found["mode"] != FILE_MODE:
        return ["%s has mode %04o, not 0644" % (path, found["mode"])]
    if found["content"] != content:
        return ["%s is not what the role writes there" % path]
    return []


def stack_unconverged_reasons(observed, venv_owner, activate, keep, gpus_required):
    """Why the role would act on this host, or [] when the profile's virtualenv is exactly installed, verified,
    marked, pinned, linked and pruned as the role leaves it; and what verify.yml would report about it.

    observed: what observe_stack found. venv_owner, activate, keep, gpus_required: ml_stack_venv_owner,
    ml_stack_activate, ml_stack_keep, ml_stack_gpus_required. Conservative: anything unexpected, or not observed,
    is a reason, and the role then runs every task as it always did (the checks that name the problem included).
    Returns {"reasons", "verdict", "kept"}."""
    result = {"reasons": [], "verdict": {}, "kept": []}
    if observed.get("error"):
        result["reasons"] = [observed["error"]]
        return result
    plan = observed["plan"]
    if plan["problems"]:
        result["reasons"] = ["the settings or the host do not fit the profile: %s" % "; ".join(plan["problems"])]
        return result
    reasons = result["reasons"]
    if plan["system_packages_missing"]:
        reasons.append("ml_stack_system_packages: %s not installed" % ", ".join(plan["system_packages_missing"]))
    decision = build_decision(plan, observed["venv"], observed["inspected"], venv_owner)
    if decision["build"]:
        reasons += decision["reasons"]
        return result
    result["verdict"] = verdict(plan, {"state": observed["inspected"], "verification": observed["inspected"]},
                                gpus_required)
    reasons += result["verdict"]["problems"]
    owner = observed["owner"]
    for entry in result["verdict"]["files"]:
        reasons += _file_reasons(posixpath.join(plan["venv_dir"], entry["name"]), observed["files"].get(entry["name"]),
                                 entry["content"], PINS_OWNER if entry["root"] else owner)
    writable = observed["foreign_writable"]
    if writable["error"]:
        reasons.append(writable["error"])
    elif writable["first"]:
        reasons.append("a user other than the virtualenv's owner can change the code it runs: %s" % writable["first"])
    elif not writable["complete"]:
        reasons.append("%s holds more than the %d entries the check looks at" % (plan["venv_dir"], TREE_ENTRIES))
    link = observed["link"]
    if activate:
        if link.get("target") != plan["venv_name"]:
            reasons.append("%s does not point at %s" % (plan["venv_path"], plan["venv_name"]))
        elif owner is not None and (link["uid"], link["gid"]) != (owner["uid"], owner["gid"]):
            reasons.append("the link %s does not belong to its owner" % plan["venv_path"])
        if keep is not None:
            prune = prune_plan(plan["venv_path"], observed["candidates"], keep, [link.get("target")])
            reasons += prune["problems"]
            if prune["remove"]:
                reasons.append("old virtualenvs beyond ml_stack_keep=%s: %s" % (keep, ", ".join(prune["remove"])))
            result["kept"] = prune["kept"]
    return result


def converged_report(observed, activate, checked):
    """ml_stack_report (activate.yml's) for a virtualenv the check found converged. checked: what
    stack_unconverged_reasons returned."""
    plan, verification = observed["plan"], checked["verdict"]
    return {
        "venv_path": plan["venv_path"],
        "venv_dir": plan["venv_dir"],
        "profile": plan["profile"],
        "built": False,
        "active": bool(activate),
        "build_reasons": [],
        "repaired": [],
        "versions": plan["versions"],
        "torch_cuda": observed["inspected"]["modules"].get("torch", {}).get("cuda"),
        "deliberate_pip_check": verification["deliberate"],
        "notes": verification["notes"],
    }
