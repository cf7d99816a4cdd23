# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Whether the cuda role has nothing to do on a host: its preflight would pass, and the repository, the toolkit,
the registration with the linker and login shells, and the linker's proof are all as its tasks leave them.

``observe_host`` asks the host (commands through ``run``, files read without following links);
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
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.linker import classify, read_conf_files
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
# The link the role keeps; where a cuda alternative manages it (NVIDIA's packages register one), it points at the
# alternative's own link, which update-alternatives points at the chosen installation. register.yml names both too.
USR_LOCAL_CUDA = "/usr/local/cuda"
ALTERNATIVE_LINK = "/etc/alternatives/cuda"


def platform_settings(settings, facts):
    """The settings that come from the host's facts: its OS and architecture as NVIDIA's repository names them,
    the repository's address and the list the role writes for it (repository.yml writes this list)."""
    host_os = os_id(facts.get("distribution"), facts.get("distribution_version"))
    repo_architecture = settings["repo_architectures"].get(facts.get("architecture"), "")
    url = "%s/%s/%s" % (re.sub(r"/+$", "", settings["repo_base_url"]), host_os, repo_architecture)
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
    """Everything ``unconverged_reasons`` needs, read from the host; changes nothing.

    run: a command runner returning (rc, stdout, stderr), like AnsibleModule.run_command, taking an argv list.
    python: the interpreter that runs the role's linker script, as verify.yml runs it.
    """
    package = settings["toolkit_package"]
    major = settings["cuda_series"].split(".")[0]
    query = ["dpkg-query", "--show", "--showformat=${Package}\t${Status}\t${Version}\n", package]
    _rc, out, _err = run(query + list(REPOSITORY_TOOLS))
    observed = dict(packages=_packages(out), runtime_exists=os.path.exists(
        "%s/lib64/libcudart.so.%s" % (settings["cuda_home"], major)))
    _rc, out, _err = run(["apt-cache", "madison", package])
    observed["available"] = [line.split("|")[1].strip() for line in out.splitlines() if line.count("|") >= 2]
    observed["state_dir_mode"] = _directory_mode(settings["state_dir"])
    observed["files"] = dict((path, observed_file(path)) for path in
                             sorted(set([settings["repository"]["list_path"]]) | set(settings["registration_files"])
                                    | set([settings["keyring"], settings["exported_key"]])))
    rc, out, _err = run(["gpg", "--batch", "--no-default-keyring", "--show-keys", "--with-colons",
                         settings["keyring"]])
    observed["keyring_colons"] = out if rc == 0 else None
    observed["apt_key_ids"] = None
    if settings["revoked_key_ids"]:
        rc, out, _err = run(["apt-key", "adv", "--list-public-keys", "--with-colons"])
        observed["apt_key_ids"] = _apt_key_ids(out) if rc == 0 else None
    rc, out, _err = run(["update-alternatives", "--query", "cuda"])
    observed["alternative"] = out.splitlines() if rc == 0 else None
    observed["usr_local_cuda"] = os.readlink(USR_LOCAL_CUDA) if os.path.islink(USR_LOCAL_CUDA) else None
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


def _file_reasons(expected, observed):
    """Each file must be a regular file, root's, mode 0644, with exactly the bytes the role writes (text is
    written as UTF-8)."""
    reasons = []
    for path in sorted(expected):
        found = observed.get(path)
        if found is None:
            reasons.append("%s is missing" % path)
        elif not found["regular"]:
            reasons.append("%s is not a regular file" % path)
        elif found["uid"] != 0 or found["mode"] != "0644":
            reasons.append("%s is owned by uid %d with mode %s, not root's with 0644"
                           % (path, found["uid"], found["mode"]))
        elif found["data"] != (expected[path].encode("utf-8") if isinstance(expected[path], str) else expected[path]):
            reasons.append("%s differs from what the role writes" % path)
    return reasons


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
    """repository.yml: its tools installed, its state directory, the keyring exactly the pinned key as exported,
    the list as the role writes it, no revoked key trusted."""
    reasons = []
    for tool in REPOSITORY_TOOLS:
        if not INSTALLED.fullmatch(observed["packages"].get(tool, ("", ""))[0]):
            reasons.append("%s is not installed" % tool)
    if observed["state_dir_mode"] != "0755":
        reasons.append("%s is not a directory with mode 0755" % settings["state_dir"])
    files = observed["files"]
    # The keyring is a copy of the key gpg exported from the download: the same bytes, or the copy would change it.
    reasons.extend(_file_reasons({settings["keyring"]: (files.get(settings["exported_key"]) or {}).get("data")},
                                 files))
    if observed["keyring_colons"] is None:
        reasons.append("gpg could not read %s" % settings["keyring"])
    else:
        reasons.extend(repository_key_problems(observed["keyring_colons"], settings["key_fingerprint"],
                                               settings["keyring"]))
    reasons.extend(_file_reasons({settings["repository"]["list_path"]: settings["repository"]["list_content"]}, files))
    reasons.extend(_revoked_reasons(settings, observed))
    return reasons


def _toolkit_reasons(settings, observed):
    """toolkit.yml: the version in the repository, installed exactly, held or not as cuda_hold asks."""
    package, version = settings["toolkit_package"], settings["toolkit_version"]
    reasons = []
    if version not in observed["available"]:
        reasons.append("%s=%s is not in the repository's lists" % (package, version))
    status, installed = observed["packages"].get(package, ("not known to dpkg", ""))
    if not INSTALLED.fullmatch(status) or installed != version:
        reasons.append("%s is %s at %r, not installed at %s" % (package, status, installed, version))
    elif status.split(" ")[0] != ("hold" if settings["hold"] else "install"):
        reasons.append("%s's selection is %s, cuda_hold is %s" % (package, status.split(" ")[0], settings["hold"]))
    return reasons


def _registration_reasons(settings, observed):
    """register.yml and verify.yml: /usr/local/cuda on cuda_home (through the cuda alternative where there is one),
    the linker's and shells' files, no stale entry, and the linker resolving CUDA's runtime and NVRTC of the stack's
    version into cuda_home."""
    home = settings["cuda_home"]
    reasons = []
    # The alternative's Value is read from its own link: /usr/local/cuda may point elsewhere all the same.
    wanted_link = home
    if observed["alternative"] is not None:
        wanted_link = ALTERNATIVE_LINK
        for line in ("Alternative: " + home, "Value: " + home):
            if line not in observed["alternative"]:
                reasons.append("the cuda alternative lacks '%s'" % line)
    if observed["usr_local_cuda"] is None:
        reasons.append("%s is not a link (to %s)" % (USR_LOCAL_CUDA, wanted_link))
    elif observed["usr_local_cuda"] != wanted_link:
        reasons.append("%s links to %s, not to %s" % (USR_LOCAL_CUDA, observed["usr_local_cuda"], wanted_link))
    reasons.extend(_file_reasons(settings["registration_files"], observed["files"]))
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
    if not adopted(settings, observed):
        reasons.extend(_repository_reasons(settings, observed))
        reasons.extend(_toolkit_reasons(settings, observed))
    if settings["registered"]:
        reasons.extend(_registration_reasons(settings, observed))
    return reasons
