# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Stack locks: every distribution of a stack profile's Python stack, at one version, with the sha256 of the wheel
each environment (cp312-x86_64) installs. hacking/stack_lock.py (make stack-lock) writes them; the stack role
reads the profile's lock on the controller, and the ml_stack role installs exactly it, with pip's
--require-hashes, and compares every distribution of a virtualenv with it.

The format (version 1), one JSON object::

    {"format": 1, "profile": NAME, "requirements": [...], "indexes": [URL, ...], "environments": [ENV, ...],
     "distributions": {NAME: {"version": V, "requires": [NAME, ...],
                              "wheels": {FILE: {"sha256": HEX, "url": URL, "index": URL or null,
                                                "environments": [ENV, ...]}}}}}

Distribution names are PEP 503-normalized; each environment a distribution needs has exactly one of its wheels;
a wheel whose index is null is installed from its URL (name @ url), any other by name and version from the index
(or its mirror). Pure Python: the stack_lock filter, the ml_stack core and the unit tests import it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import posixpath
import re

from urllib.parse import unquote, urlsplit

FORMAT = 1
MAKE = "make stack-lock (hacking/stack_lock.py)"
# cp<major><minor>-<machine>, as the lock tool resolves them.
ENVIRONMENT = re.compile(r"cp3\d{1,2}-(x86_64|aarch64)")
NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
# Whatever a distribution's metadata reports, as long as it cannot break a requirement line out of its place.
VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.!+_-]*")
SHA256 = re.compile(r"[0-9a-f]{64}")
URL = re.compile(r"(https?://[^/\s]+|file://)/\S*")
WHEEL = re.compile(r"([A-Za-z0-9][A-Za-z0-9._]*)-[^\s/]+\.whl")
# What ensurepip puts into every new virtualenv: no extra distribution, unless the lock names it (then it is
# compared like any other).
BOOTSTRAP = ("pip", "setuptools")
# pip's HashMismatch, as every pip since 8 prints it: the head, then per requirement "    REQ:" and its
# "Expected sha256 HEX" (one or more) and "Got HEX" lines.
HASH_MISMATCH = "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE"
MISMATCH_REQUIREMENT = re.compile(r"^    (?P<requirement>\S.*):$")
MISMATCH_EXPECTED = re.compile(r"^\s+Expected sha256 (?P<sha256>[0-9a-f]{64})$")
MISMATCH_ALSO = re.compile(r"^\s+or (?P<sha256>[0-9a-f]{64})$")
MISMATCH_GOT = re.compile(r"^\s+Got\s+(?P<sha256>[0-9a-f]{64})$")
REQUIREMENT_URL = re.compile(r" from (?P<url>\S+)")
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class LockError(ValueError):
    pass


def normalized(name):
    """PEP 503 project name: flashinfer_python, Flashinfer.Python -> flashinfer-python."""
    return re.sub(r"[-_.]+", "-", name).lower()


def mirrored(url, mirrors):
    """url with the longest matching prefix among mirrors replaced by its mirror."""
    matches = [prefix for prefix in mirrors if url.startswith(prefix)]
    if not matches:
        return url
    prefix = max(matches, key=len)
    return mirrors[prefix] + url[len(prefix):]


def wheel_file(url):
    return unquote(posixpath.basename(urlsplit(url).path))


def _strings(value, pattern):
    return isinstance(value, list) and all(isinstance(item, str) and pattern.fullmatch(item) for item in value)


def _wheel_problems(name, file_name, wheel, lock):
    where = "distributions.%s.wheels[%s]" % (name, file_name)
    if not isinstance(wheel, dict):
        return ["%s is not a mapping" % where]
    problems = []
    named = WHEEL.fullmatch(file_name)
    if named is None or normalized(named.group(1)) != name:
        problems.append("%s is not the file name of a wheel of %s" % (where, name))
    if not (isinstance(wheel.get("sha256"), str) and SHA256.fullmatch(wheel["sha256"])):
        problems.append("%s.sha256=%r is not 64 lowercase hexadecimal digits: the wheel has no hash to install it by"
                        % (where, wheel.get("sha256")))
    if not (isinstance(wheel.get("url"), str) and URL.fullmatch(wheel["url"])):
        problems.append("%s.url=%r is not an http(s):// or file:// URL" % (where, wheel.get("url")))
    elif wheel.get("index") is None and wheel_file(wheel["url"]) != file_name:
        problems.append("%s.url=%s is installed from that URL, and names another file" % (where, wheel["url"]))
    if wheel.get("index") is not None and wheel.get("index") not in (lock.get("indexes") or []):
        problems.append("%s.index=%r is not null and not one of the lock's indexes" % (where, wheel.get("index")))
    environments = wheel.get("environments")
    if not (_strings(environments, ENVIRONMENT) and environments
            and set(environments) <= set(lock.get("environments") or [])):
        problems.append("%s.environments=%r is not a non-empty list of the lock's environments" % (where, environments))
    return problems


def _distribution_problems(name, distribution, lock):
    where = "distributions.%s" % name
    if not NAME.fullmatch(name):
        return ["%s: %r is not a PEP 503-normalized name" % (where, name)]
    if not isinstance(distribution, dict):
        return ["%s is not a mapping" % where]
    problems = []
    if not (isinstance(distribution.get("version"), str) and VERSION.fullmatch(distribution["version"])):
        problems.append("%s.version=%r is not a version" % (where, distribution.get("version")))
    requires = distribution.get("requires")
    if not (_strings(requires, NAME) and set(requires) <= set(lock["distributions"])):
        problems.append("%s.requires=%r is not a list of the lock's distributions" % (where, requires))
    wheels = distribution.get("wheels")
    if not (isinstance(wheels, dict) and wheels):
        return problems + ["%s.wheels is not a non-empty mapping of wheel file names" % where]
    seen = {}
    for file_name, wheel in sorted(wheels.items()):
        found = _wheel_problems(name, file_name, wheel, lock)
        problems += found
        for environment in [] if found else wheel["environments"]:
            seen.setdefault(environment, []).append(file_name)
    problems += ["%s has %d wheels for %s (%s); an environment installs one"
                 % (where, len(files), environment, ", ".join(files))
                 for environment, files in sorted(seen.items()) if len(files) > 1]
    return problems


def problems(lock, profile, pins):
    """What makes lock unusable for profile (its name and aliases), whose pinned distributions ({name: version})
    the lock must hold at those versions, in every environment it has."""
    if not isinstance(lock, dict):
        return ["it is not a JSON object"]
    if lock.get("format") != FORMAT:
        return ["format=%r; this collection reads format %d" % (lock.get("format"), FORMAT)]
    found = []
    names = [profile["name"]] + list(profile.get("aliases") or [])
    if lock.get("profile") not in names:
        found.append("profile=%r: it is the lock of another profile than %s" % (lock.get("profile"), profile["name"]))
    if not (isinstance(lock.get("requirements"), list) and lock["requirements"]
            and all(isinstance(item, str) for item in lock["requirements"])):
        found.append("requirements=%r is not a non-empty list of requirements" % (lock.get("requirements"),))
    if not _strings(lock.get("indexes"), URL):
        found.append("indexes=%r is not a list of http(s):// or file:// URLs" % (lock.get("indexes"),))
    environments = lock.get("environments")
    if not (_strings(environments, ENVIRONMENT) and environments and len(set(environments)) == len(environments)):
        found.append("environments=%r is not a non-empty list of environments like cp312-x86_64, each once"
                     % (environments,))
    if not (isinstance(lock.get("distributions"), dict) and lock["distributions"]):
        return found + ["distributions is not a non-empty mapping"]
    if found:
        return found
    for name, distribution in sorted(lock["distributions"].items()):
        found += _distribution_problems(name, distribution, lock)
    if found:
        return found
    for name, version in sorted(pins.items()):
        locked = lock["distributions"].get(name)
        if locked is None:
            found.append("it has no %s, which the profile pins at %s" % (name, version))
            continue
        if locked["version"] != version:
            found.append("it has %s %s, the profile pins %s" % (name, locked["version"], version))
        lacking = [environment for environment in environments if environment not in
                   [each for wheel in locked["wheels"].values() for each in wheel["environments"]]]
        if lacking:
            found.append("it has no wheel of %s for %s" % (name, ", ".join(lacking)))
    return found


def read(text, path, profile, pins):
    """The lock in text (the file at path on the controller, None when it could not be read), checked against
    the profile, with its path under "path"; or LockError naming the file and the fix."""
    variable = "python.lock=%s of stack profile %s" % (profile["python"]["lock"], profile["name"])
    fix = ("Make it with %s, or set stack_profiles_custom.%s.python.lock to null to install without a lock."
           % (MAKE, profile["name"]))
    if text is None:
        raise LockError("The lock %s (%s) does not exist on the controller, or cannot be read. %s" % (path, variable, fix))
    try:
        lock = json.loads(text)
    except ValueError as exc:
        raise LockError("The lock %s (%s) is not JSON: %s. %s" % (path, variable, exc, fix))
    found = problems(lock, profile, pins)
    if found:
        raise LockError("The lock %s (%s) cannot be used:\n- %s\n%s" % (path, variable, "\n- ".join(found), fix))
    return dict(lock, path=path)


def environment(python):
    """The lock's name of the environment of an interpreter, as inspect_python.py reports it: cp312-x86_64."""
    series = re.findall(r"\d+", python["version"])[:2]
    return "cp%s-%s" % ("".join(series), python["machine"])


def environment_problem(lock, profile_name, python, interpreter):
    """Why the lock cannot install on an interpreter (inspect_python.py's report), or None."""
    found = environment(python)
    if found in lock["environments"]:
        return None
    return ("stack profile %s is locked (%s) for %s, not for %s, which ml_stack_python=%s is (Python %s on %s): "
            "make a lock for it too with %s, or point ml_stack_python at a Python of one of those"
            % (profile_name, lock["path"], ", ".join(lock["environments"]), found, interpreter, python["version"],
               python["machine"], MAKE))


def wheels_for(lock, environment_name):
    """The wheel each distribution installs in the environment, by distribution name: {"distribution",
    "version", "wheel" (its file name), "sha256", "url", "index"}."""
    chosen = []
    for name, distribution in sorted(lock["distributions"].items()):
        for file_name, wheel in sorted(distribution["wheels"].items()):
            if environment_name in wheel["environments"]:
                chosen.append({"distribution": name, "version": distribution["version"], "wheel": file_name,
                               "sha256": wheel["sha256"], "url": wheel["url"], "index": wheel["index"]})
    return chosen


def requirement_lines(wheels, mirrors, wheelhouse=None):
    """pip's requirements, one per wheel, each with its hash: name==version from an index, name @ url for a
    wheel that is only at its URL (through ml_stack_index_mirrors, or in the wheelhouse)."""
    lines = []
    for wheel in wheels:
        if wheel["index"] is not None:
            requirement = "%s==%s" % (wheel["distribution"], wheel["version"])
        elif wheelhouse:
            requirement = "%s @ file://%s/%s" % (wheel["distribution"], wheelhouse, wheel["wheel"])
        else:
            requirement = "%s @ %s" % (wheel["distribution"], mirrored(wheel["url"], mirrors))
        lines.append("%s --hash=sha256:%s" % (requirement, wheel["sha256"]))
    return lines


def indexes(lock, wheels):
    """The lock's indexes that the wheels come from, in the lock's order."""
    used = set(wheel["index"] for wheel in wheels)
    return [index for index in lock["indexes"] if index in used]


def closure(lock, name, environment_name=None):
    """name and what only name's own requirements need, transitively: the distributions that go when a host's
    own name is adopted instead of the lock's (torch, with its nvidia-* runtime wheels and triton), and none that
    another distribution of the lock requires too. Within an environment, only the distributions it installs."""
    present = set(lock["distributions"]) if environment_name is None else set(
        wheel["distribution"] for wheel in wheels_for(lock, environment_name))
    if name not in present:
        return []
    requires = dict((each, [required for required in lock["distributions"][each]["requires"] if required in present])
                    for each in present)
    reached, pending = set([name]), [name]
    while pending:
        for required in requires[pending.pop()]:
            if required not in reached:
                reached.add(required)
                pending.append(required)
    # A fixpoint: drop what a distribution outside the set requires, which may leave others required from outside.
    changed = True
    while changed:
        outside = present - reached
        needed = set(required for each in outside for required in requires[each])
        kept = set(each for each in reached if each == name or each not in needed)
        changed = kept != reached
        reached = kept
    return sorted(reached)


def compare(installed, wheels):
    """What a virtualenv holds (installed: {normalized name: version}, as inspect_stack.py reports every
    distribution) against the wheels of its environment: {"missing": [(name, version)], "changed": [(name,
    found, locked)], "extra": [(name, found)]}. ensurepip's own distributions are extra only where the lock
    names them."""
    locked = dict((wheel["distribution"], wheel["version"]) for wheel in wheels)
    installed = dict((normalized(name), version) for name, version in installed.items())
    return {
        "missing": [(name, version) for name, version in sorted(locked.items()) if name not in installed],
        "changed": [(name, installed[name], version) for name, version in sorted(locked.items())
                    if name in installed and installed[name] != version],
        "extra": [(name, version) for name, version in sorted(installed.items())
                  if name not in locked and name not in BOOTSTRAP],
    }


def describe(differences):
    """One line per difference compare found, naming the distribution."""
    return (["%s is not installed (the lock pins %s)" % item for item in differences["missing"]]
            + ["%s is %s, the lock pins %s" % item for item in differences["changed"]]
            + ["%s %s is installed, and the lock has no %s" % (name, version, name)
               for name, version in differences["extra"]])


def hash_mismatches(output):
    """The requirements whose download pip refused in --require-hashes mode because its sha256 is not the
    requirement's: [{"name", "url" (where pip got it, or None), "expected": [sha256...], "got"}]."""
    if HASH_MISMATCH not in (output or ""):
        return []
    found = []
    for line in output.splitlines():
        requirement = MISMATCH_REQUIREMENT.match(line)
        if requirement:
            url = REQUIREMENT_URL.search(requirement.group("requirement"))
            found.append({"name": normalized(REQUIREMENT_NAME.match(requirement.group("requirement")).group(1)),
                          "url": url.group("url").split("#", 1)[0] if url else None, "expected": [], "got": None})
            continue
        expected = MISMATCH_EXPECTED.match(line) or MISMATCH_ALSO.match(line)
        got = MISMATCH_GOT.match(line)
        if found and expected:
            found[-1]["expected"].append(expected.group("sha256"))
        elif found and got:
            found[-1]["got"] = got.group("sha256")
    return [mismatch for mismatch in found if mismatch["got"]]
