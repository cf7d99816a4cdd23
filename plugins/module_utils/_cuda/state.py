# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Whether the cuda role has nothing to do on a host: its preflight would pass, and the repository, the toolkit,
the registration with the linker and login shells, and the linker's proof are all as its tasks leave them.

``managed`` declares, once, everything the role keeps on a host; ``observe_host`` asks the host (commands
through ``run``, files read without following links) for those and for what the role's tasks check;
``unconverged_reasons`` decides from the settings and that observation alone, so that the unit tests reach every
decision without a host. Anything unexpected or unobserved is a reason: the role then runs every task as before,
and its checks say what is wrong in their own words.

The driver's and Fabric Manager's tasks are not covered: they run as before, converged or not.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import os
import re
import stat as stat_module

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.checks import (
    cuda_home_problems,
    repository_key_problems,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.linker import (
    OWN_FILE_MODE,
    classify,
    read_conf_files,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import read_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import os_id

# What repository.yml installs before it trusts the repository.
REPOSITORY_TOOLS = ("gpg", "ca-certificates")
# dpkg's ${Status} of an installed package, selected to stay ("install") or held ("hold").
INSTALLED = re.compile(r"(install|hold) ok installed")
# ... and whatever its selection: a package dpkg installed is never adopted.
INSTALLED_BY_DPKG = re.compile(r"[a-z]+ ok installed")
# ASCII only: str.isdigit() is also true for "²", which int() refuses.
DIGITS = re.compile(r"[0-9]+")
# apt-key lists 16-hex-digit key ids; a short id of 8 matches their end, as ansible.builtin.apt_key compares them.
HEX_ID = re.compile(r"(0[xX])?([0-9A-Fa-f]+)")
# The link the role keeps; where the cuda alternative manages it (NVIDIA's packages register one), it points at the
# alternative's own link, which update-alternatives points at the chosen installation.
USR_LOCAL_CUDA = "/usr/local/cuda"
ALTERNATIVE = "cuda"
ALTERNATIVE_LINK = "/etc/alternatives/cuda"
# Every registration file is root's with the mode cuda_linker_entries writes the linker's with.
REGISTRATION_FILE_MODE = "%04o" % OWN_FILE_MODE


def platform_settings(settings, facts):
    """The settings that come from the host's facts: its OS and architecture as NVIDIA's repository names them,
    the repository's address and the list the role writes for it (repository.yml writes this list)."""
    host_os = os_id(facts.get("distribution"), facts.get("distribution_version"))
    repo_architecture = settings["repo_architectures"].get(facts.get("architecture"), "")
    url = "%s/%s/%s" % (settings["repo_base_url"].rstrip("/"), host_os, repo_architecture)
    list_path = "/etc/apt/sources.list.d/cuda-%s-%s.list" % (host_os, repo_architecture)
    return dict(os_id=host_os, architecture=facts.get("architecture"), repo_architecture=repo_architecture,
                repository=dict(url=url, list_path=list_path,
                                list_content="deb [signed-by=%s] %s/ /\n" % (settings["keyring"], url)))


# The files the role writes are small: a key, an apt list, a linker file, a profile script.
FILE_LIMIT = 1 << 20


def observed_file(path):
    """A file as the role's copy and template tasks leave it: what it is (never following a link, never blocking
    on a FIFO), its owner, mode and content (at most FILE_LIMIT bytes); None when there is nothing at the path."""
    try:
        found = read_regular(path, FILE_LIMIT)
    except (OSError, InvalidOption):
        try:
            status = os.lstat(path)
        except OSError:
            return None
        return dict(regular=False, uid=status.st_uid, mode="%04o" % stat_module.S_IMODE(status.st_mode), data=None)
    if found is None:
        return None
    return dict(regular=True, uid=found["uid"], mode="%04o" % found["mode"], data=found["data"])


def _packages(output):
    """`dpkg-query --show --showformat='${Package}\\t${Status}\\t${Version}\\n'` as {package: (status, version)}."""
    found = {}
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) == 3:
            found[fields[0]] = (fields[1], fields[2])
    return found


def _apt_key_ids(output):
    """The key ids of apt-key's `--with-colons` listing (pub and sub records), upper case."""
    return [fields[4].upper() for fields in (line.split(":") for line in output.splitlines())
            if fields[0] in ("pub", "sub") and len(fields) > 4]


def observe_host(settings, run, python):
    """Everything ``unconverged_reasons`` needs, read from the host; changes nothing. What the role manages is
    read as ``managed`` declares it, once the facts the declaration depends on are known.

    run: a command runner returning (rc, stdout, stderr), like AnsibleModule.run_command, taking an argv list.
    python: the interpreter that runs the role's linker script, as verify.yml runs it.
    """
    package = settings["toolkit_package"]
    major = settings["cuda_series"].split(".")[0]
    query = ["dpkg-query", "--show", "--showformat=${Package}\t${Status}\t${Version}\n", package]
    _rc, out, _err = run(query + list(REPOSITORY_TOOLS))
    observed = dict(packages=_packages(out), runtime_exists=os.path.exists(
        "%s/lib64/libcudart.so.%s" % (settings["cuda_home"], major)))
    rc, out, _err = run(["update-alternatives", "--query", ALTERNATIVE])
    observed["alternative"] = out.splitlines() if rc == 0 else None
    declared = managed(settings, observed)
    observed["files"] = dict((path, observed_file(path)) for path in sorted(
        set(thing[field] for thing in declared if thing["kind"] == "file" for field in ("path", "source")
            if field in thing)))
    observed["directories"] = dict((thing["path"], _directory_mode(thing["path"]))
                                   for thing in declared if thing["kind"] == "directory")
    observed["links"] = dict((thing["path"], os.readlink(thing["path"]) if os.path.islink(thing["path"]) else None)
                             for thing in declared if thing["kind"] == "link")
    _rc, out, _err = run(["apt-cache", "madison", package])
    observed["available"] = [line.split("|")[1].strip() for line in out.splitlines() if line.count("|") >= 2]
    rc, out, _err = run(["gpg", "--batch", "--no-default-keyring", "--show-keys", "--with-colons",
                         settings["keyring"]])
    observed["keyring_colons"] = out if rc == 0 else None
    observed["apt_key_ids"] = None
    if settings["revoked_key_ids"]:
        rc, out, _err = run(["apt-key", "adv", "--list-public-keys", "--with-colons"])
        observed["apt_key_ids"] = _apt_key_ids(out) if rc == 0 else None
    try:
        files, undecodable = read_conf_files(settings["linker_conf_dir"])
    except OSError:
        observed["stale_linker_entries"], observed["undecodable_linker_files"] = None, []
    else:
        observed["stale_linker_entries"] = classify(files, int(major), os.path.realpath)["stale_entries"]
        observed["undecodable_linker_files"] = undecodable
    observed["linked"] = None
    if settings["registered"]:
        rc, out, _err = run([python, "-c", settings["linked_script"], major])
        try:
            observed["linked"] = json.loads(out) if rc == 0 else None
        except ValueError:
            observed["linked"] = None
    return observed


def _directory_mode(path):
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return "%04o" % stat_module.S_IMODE(status.st_mode) if stat_module.S_ISDIR(status.st_mode) else None


def adopted(settings, observed):
    """A CUDA that came another way (with the image, a runfile, loose packages) is verified and registered as it
    is rather than installed a second time beside itself: a CUDA runtime in cuda_home that dpkg did not install
    as the toolkit package."""
    status = observed["packages"].get(settings["toolkit_package"], ("", ""))[0]
    return bool(settings["adopt_existing"] and observed["runtime_exists"] and not INSTALLED_BY_DPKG.fullmatch(status))


def _preflight_reasons(settings):
    """What preflight.yml would refuse; the role's own tasks then say it, with their messages."""
    reasons = []
    if (settings["os_id"] not in settings["supported_os"]
            or settings["architecture"] not in settings["supported_architectures"]
            or not settings["repo_architecture"]):
        reasons.append("%s on %s is not a platform of the stack profile"
                       % (settings["os_id"], settings["architecture"]))
    reasons.extend(cuda_home_problems(settings["cuda_home"], settings["cuda_series"]))
    gpu = settings["gpu"]
    if not isinstance(gpu, dict):
        reasons.append("the GPU driver was not read")
    elif not settings["driver_install"] and gpu.get("state") == "ok":
        branch = str(gpu.get("driver_version") or "").split(".", 1)[0]
        if not DIGITS.fullmatch(branch) or int(branch) < settings["driver_branch_min"]:
            reasons.append("driver %s is older than branch %d" % (gpu.get("driver_version"),
                                                                  settings["driver_branch_min"]))
    return reasons


def managed(settings, observed):
    """Everything the role keeps on this host, each thing once, in the order its tasks make it so.

    The converged check reads and compares exactly these (``unconverged_reasons``); the cuda scenario's drift step
    changes each behind the role's back, one at a time, and expects the next run to notice and repair it.

    Each is a dict: ``kind`` (package, directory, file, alternative, link), ``part`` (repository, toolkit or
    registration: the role's tasks that keep it), its ``path`` or ``name``, and what the role leaves there:
    a package installed (at ``version``, with dpkg's ``selection``), a directory's or a root file's ``mode``, a
    file's ``content`` (text, written as UTF-8) or the ``source`` file on the host it is a copy of, an
    alternative's ``value``, a link's ``target``.

    The role's tasks keep exactly these, each read from where it is declared, so that a thing declared is kept,
    checked and drifted with no other change: the repository's and the toolkit's as the check returns them, the
    registration's link and alternative from ``registration_links``, its files from the role's
    ``__cuda_registration_files``, which the check is given. The unit tests of the role's tasks fail for a thing
    the tasks keep that is not declared, one declared that they do not keep, or one they state themselves.
    """
    things = []
    if not adopted(settings, observed):
        things.extend(dict(kind="package", part="repository", name=tool) for tool in REPOSITORY_TOOLS)
        things.extend([
            dict(kind="directory", part="repository", path=settings["state_dir"], mode="0755"),
            # A copy of the key gpg exported from the download: the same bytes, or the copy would change it.
            dict(kind="file", part="repository", path=settings["keyring"], mode="0644",
                 source=settings["exported_key"]),
            dict(kind="file", part="repository", path=settings["repository"]["list_path"], mode="0644",
                 content=settings["repository"]["list_content"]),
            dict(kind="package", part="toolkit", name=settings["toolkit_package"],
                 version=settings["toolkit_version"], selection="hold" if settings["hold"] else "install"),
        ])
    if settings["registered"]:
        things.extend(registration_links(settings["cuda_home"], observed["alternative"] is not None))
        things.extend(dict(kind="file", part="registration", path=path, mode=REGISTRATION_FILE_MODE,
                           content=content)
                      for path, content in sorted(settings["registration_files"].items()))
    return things


def registration_links(cuda_home, alternative):
    """The things of managed that register cuda_home besides the registration's files, in the order register.yml
    keeps them: the cuda alternative where update-alternatives has one (alternative), and /usr/local/cuda, through
    that alternative's own link or straight to cuda_home.

    register.yml reads them here (the cuda_registration_links filter), as the upgrade's switch runs it without the
    check. The alternative's Value is read from its own link: /usr/local/cuda may point elsewhere all the same."""
    things = []
    if alternative:
        things.append(dict(kind="alternative", part="registration", name=ALTERNATIVE, value=cuda_home))
    things.append(dict(kind="link", part="registration", path=USR_LOCAL_CUDA,
                       target=ALTERNATIVE_LINK if alternative else cuda_home))
    return things


def _package_reasons(thing, observed):
    name = thing["name"]
    if "version" not in thing:
        # apt's state=present leaves an installed package's selection as it is: so does the check.
        status = observed["packages"].get(name, ("", ""))[0]
        return [] if INSTALLED_BY_DPKG.fullmatch(status) else ["%s is not installed" % name]
    status, installed = observed["packages"].get(name, ("not known to dpkg", ""))
    if not INSTALLED.fullmatch(status) or installed != thing["version"]:
        return ["%s is %s at %r, not installed at %s" % (name, status, installed, thing["version"])]
    if status.split(" ")[0] != thing["selection"]:
        return ["%s's selection is %s, cuda_hold is %s" % (name, status.split(" ")[0], thing["selection"] == "hold")]
    return []


def _directory_reasons(thing, observed):
    if observed["directories"].get(thing["path"]) != thing["mode"]:
        return ["%s is not a directory with mode %s" % (thing["path"], thing["mode"])]
    return []


def _file_reasons(thing, observed):
    """A regular file, root's, with the mode and exactly the bytes the role writes: its text as UTF-8, or a copy
    of its source's."""
    path, found = thing["path"], observed["files"].get(thing["path"])
    if "source" in thing:
        content = (observed["files"].get(thing["source"]) or {}).get("data")
    else:
        content = thing["content"].encode("utf-8")
    if found is None:
        return ["%s is missing" % path]
    if not found["regular"]:
        return ["%s is not a regular file" % path]
    if found["uid"] != 0 or found["mode"] != thing["mode"]:
        return ["%s is owned by uid %d with mode %s, not root's with %s"
                % (path, found["uid"], found["mode"], thing["mode"])]
    if found["data"] != content:
        return ["%s differs from what the role writes" % path]
    return []


def _alternative_reasons(thing, observed):
    return ["the %s alternative lacks '%s'" % (thing["name"], line)
            for line in ("Alternative: " + thing["value"], "Value: " + thing["value"])
            if line not in observed["alternative"]]


def _link_reasons(thing, observed):
    found = observed["links"].get(thing["path"])
    if found is None:
        return ["%s is not a link (to %s)" % (thing["path"], thing["target"])]
    if found != thing["target"]:
        return ["%s links to %s, not to %s" % (thing["path"], found, thing["target"])]
    return []


KIND_REASONS = dict(package=_package_reasons, directory=_directory_reasons, file=_file_reasons,
                    alternative=_alternative_reasons, link=_link_reasons)


def _revoked_reasons(settings, observed):
    if not settings["revoked_key_ids"]:
        return []
    if observed["apt_key_ids"] is None:
        return ["apt-key could not list the keys apt trusts"]
    reasons = []
    for key_id in settings["revoked_key_ids"]:
        parsed = HEX_ID.fullmatch(str(key_id))
        tail = parsed.group(2).upper()[-16:] if parsed else None
        if tail is None or any(found.endswith(tail) for found in observed["apt_key_ids"]):
            reasons.append("apt still trusts revoked key %s" % key_id)
    return reasons


def _repository_reasons(settings, observed):
    """What repository.yml and toolkit.yml check beyond the things they keep: the keyring holds exactly the pinned
    key, no revoked key is trusted, the repository offers the toolkit's version."""
    reasons = []
    if observed["keyring_colons"] is None:
        reasons.append("gpg could not read %s" % settings["keyring"])
    else:
        reasons.extend(repository_key_problems(observed["keyring_colons"], settings["key_fingerprint"],
                                               settings["keyring"]))
    reasons.extend(_revoked_reasons(settings, observed))
    if settings["toolkit_version"] not in observed["available"]:
        reasons.append("%s=%s is not in the repository's lists" % (settings["toolkit_package"],
                                                                   settings["toolkit_version"]))
    return reasons


def _registration_reasons(settings, observed):
    """What register.yml and verify.yml check beyond the things they keep: no linker entry of another CUDA major
    version, and the linker resolving CUDA's runtime and NVRTC of the stack's version into cuda_home."""
    reasons = []
    if observed["stale_linker_entries"] is None:
        reasons.append("%s could not be read" % settings["linker_conf_dir"])
    for stale in observed["stale_linker_entries"] or []:
        reasons.append("%s lists %s (CUDA %s)" % (stale["file"], stale["entry"], stale["major"]))
    for path in observed["undecodable_linker_files"]:
        reasons.append("%s is not UTF-8 text" % path)
    reasons.extend(_linked_reasons(settings, observed["linked"]))
    return reasons


def _linked_reasons(settings, linked):
    if not isinstance(linked, dict) or not isinstance(linked.get("cache"), dict):
        return ["the linker's resolution of CUDA's libraries could not be read"]
    major = settings["cuda_series"].split(".")[0]
    reasons = []
    for soname in ("libcudart.so." + major, "libnvrtc.so." + major):
        paths = linked["cache"].get(soname)
        if not paths:
            reasons.append("the linker's cache lacks %s" % soname)
        elif any(not str(path).startswith(settings["cuda_home"] + "/") for path in paths):
            reasons.append("%s resolves outside %s: %s" % (soname, settings["cuda_home"], ", ".join(paths)))
    for library in ("cudart", "nvrtc"):
        if linked.get(library + "_version") != settings["cuda_series"]:
            reasons.append("lib%s reports %s, not %s" % (library, linked.get(library + "_version"),
                                                         settings["cuda_series"]))
    return reasons


def unconverged_reasons(settings, observed):
    """Why the role's tasks must run on this host; empty when every one of them would change nothing."""
    reasons = _preflight_reasons(settings)
    for thing in managed(settings, observed):
        reasons.extend(KIND_REASONS[thing["kind"]](thing, observed))
    if not adopted(settings, observed):
        reasons.extend(_repository_reasons(settings, observed))
    if settings["registered"]:
        reasons.extend(_registration_reasons(settings, observed))
    return reasons
