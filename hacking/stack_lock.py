"""Write a stack profile's lock: every distribution of its Python stack, with the wheel and sha256 of each, per
environment (CPython release and machine), as the ml_stack role installs it. The format (1) is described in
plugins/module_utils/_stack/lock.py, which reads it; a lock it would refuse is not written.

    make stack-lock PROFILE=sglang-0.5.17-cu130 [AGAINST=sglang-0.5.9-cu130] [STACK_LOCK_ARGS='--mirror ...']
    .venv/bin/python hacking/stack_lock.py PROFILE [--profiles FILE] [--output PATH] [--environments cp312-x86_64,...]
        [--index-url URL] [--mirror ORIG=NEW ...] [--against OTHER]
    .venv/bin/python hacking/stack_lock.py --diff-only A B

(run directly, after `make toolchain`, which links the collection where this imports it from).

The profile's top-level packages (roles/stack/defaults/main.yml, or FILE's stack_profiles and
stack_profiles_custom) are resolved by pip's own resolver, metadata only (`pip install --dry-run --report`), once
per environment cp3X-<machine>: every CPython from the profile's python.min_version to 3.13, on each of its
architectures, for the manylinux tags the oldest glibc among its operating systems allows. As the role does
without a lock, sglang is taken alone (--no-deps, from its own source) and its other requirements are resolved
with the profile's pins, which win over sglang's own.

pip evaluates environment markers against the interpreter that runs it, whatever --platform and --python-version
say: here pip runs with its marker environment set to the target's (CPython X.Y.0 on Linux <machine>), which its
report echoes and this tool checks. A lock holds one version per distribution: where environments resolve to
different versions (a release that dropped the oldest Python), every environment is resolved again with the
oldest of them as a constraint. pip cannot take a package from one index only: each wheel's index is the one
whose page lists that file with that sha256, and a top-level package's wheel must come from the index its
profile names.

--mirror ORIG=NEW fetches from NEW what the profile names ORIG (longest prefix wins, as ml_stack_index_mirrors)
and records ORIG: the indexes, the direct URLs, and a wheel's URL under NEW. A mirror that serves an index's files
from elsewhere than under NEW (as the test fixture's <source>/files/) leaves their URL as it served them: only the
index is known to stand for ORIG, and an index's wheel installs by name and version from its index.
--against OTHER (a profile or a lock file) prints what changed from OTHER's lock to this one; --diff-only compares
two locks without resolving anything.
"""
import argparse
import functools
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import (  # noqa: E402
    FORMAT,
    mirrored,
    normalized,
    problems as lock_problems,
    wheel_file,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (  # noqa: E402
    PACKAGES,
    PIP_OPTIONS,
    URL,
    dependencies,
    manylinux_platforms,
    profile_versions,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import (  # noqa: E402
    StackProfileError,
    resolve,
)

PROFILES = CHECKOUT / "roles" / "stack" / "defaults" / "main.yml"
LOCKS = CHECKOUT / "roles" / "stack" / "files" / "locks"
# The index for what the profile does not pin, as the role's ml_stack_index_url.
ROLE_DEFAULTS = CHECKOUT / "roles" / "ml_stack" / "defaults" / "main.yml"
# The glibc of each operating system a profile may name: its oldest decides the manylinux tags.
OS_GLIBC = {"debian12": "2.36", "ubuntu2204": "2.35", "ubuntu2404": "2.39"}
NEWEST_PYTHON = (3, 13)
ENVIRONMENT = re.compile(r"cp(\d)(\d+)-(x86_64|aarch64)")
# This machine's pip settings that choose where packages come from (its index, find-links, constraints) are left
# out of the resolution; those that only say how to reach an index are kept.
PIP_KEPT = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_TIMEOUT", "PIP_PROXY",
            "PIP_TRUSTED_HOST", "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR")
# pip with its marker environment replaced by the target's (argv[1], JSON); the rest of argv is pip's.
PIP_IN_ENVIRONMENT = """
import json, runpy, sys
import pip._vendor.packaging.markers as markers
target = json.loads(sys.argv[1])
def environment():
    return dict(target)
markers.default_environment = environment
sys.argv = ["pip"] + sys.argv[2:]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""
PIP_TIMEOUT_S = 1800
INDEX_TIMEOUT_S = 60
PAGE_LIMIT = 64 << 20
REPORT_LIMIT = 256 << 20
LOCK_LIMIT = 64 << 20
# Rounds of resolution that may pin distributions to one version for every environment.
UNIFY_ROUNDS = 3


class LockError(Exception):
    pass


def oldest_glibc(profile):
    """The glibc of the oldest operating system the profile names; an OS id this tool does not know is refused."""
    unknown = [os_id for os_id in profile["operating_systems"] if os_id not in OS_GLIBC]
    if unknown:
        raise LockError("stack_profiles.%s.operating_systems names %s, whose glibc this tool does not know (it knows "
                        "%s): add it to OS_GLIBC in hacking/stack_lock.py"
                        % (profile["name"], ", ".join(unknown), ", ".join(sorted(OS_GLIBC))))
    return min((OS_GLIBC[os_id] for os_id in profile["operating_systems"]),
               key=lambda glibc: tuple(int(part) for part in glibc.split(".")))


def platform_tags(glibc, machine):
    """The --platform tags of a host with this glibc, newest first: manylinux down to manylinux2014, and linux."""
    tags = manylinux_platforms(glibc, machine)
    return tags[:tags.index("manylinux2014_" + machine) + 1] + ["linux_" + machine]


def environments(profile, only=None):
    """cp3X-<machine> for every CPython from python.min_version to 3.13 on each architecture, or those of only."""
    major, minor = (int(part) for part in profile["python"]["min_version"].split("."))
    names = ["cp%d%d-%s" % (major, release, machine) for machine in profile["architectures"]
             for release in range(minor, NEWEST_PYTHON[1] + 1) if major == NEWEST_PYTHON[0]]
    if not names:
        raise LockError("stack_profiles.%s.python.min_version=%s: no CPython up to %d.%d to lock for"
                        % (profile["name"], profile["python"]["min_version"], NEWEST_PYTHON[0], NEWEST_PYTHON[1]))
    if only is None:
        return names
    unknown = [name for name in only if name not in names]
    if unknown:
        raise LockError("--environments names %s, which profile %s does not run on; its environments: %s"
                        % (", ".join(unknown), profile["name"], ", ".join(names)))
    return [name for name in names if name in only]


def marker_environment(name):
    """PEP 508's marker variables of environment cp3X-<machine>: CPython X.Y.0 on Linux."""
    major, minor, machine = ENVIRONMENT.fullmatch(name).groups()
    version = "%s.%s" % (major, minor)
    return {"implementation_name": "cpython", "implementation_version": version + ".0", "os_name": "posix",
            "platform_machine": machine, "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "", "python_full_version": version + ".0",
            "python_version": version, "sys_platform": "linux"}


def top_level(profile, mirrors):
    """The profile's packages that have a version, in install order: distribution, version, source, the
    requirement as the lock records it and as pip is given it (through the mirrors)."""
    keys = [key for key, _default in PACKAGES if profile["python"][key]["version"] is not None]
    packages = []
    for key, (name, version) in zip(keys, profile_versions(profile).items()):
        source = profile["python"][key]["source"]
        package = {"key": key, "distribution": name, "version": version, "source": source,
                   "wheel": wheel_file(source).endswith(".whl")}
        if package["wheel"]:
            package["requirement"] = "%s @ %s" % (name, source)
            package["fetch"] = "%s @ %s" % (name, mirrored(source, mirrors))
        else:
            package["requirement"] = package["fetch"] = "%s==%s" % (name, version)
        packages.append(package)
    return packages


def index_sources(packages, main_index):
    """The main index, then every other index a package names, in the profile's order."""
    indexes = [main_index]
    for package in packages:
        if not package["wheel"] and package["source"] not in indexes:
            indexes.append(package["source"])
    return indexes


def parse_mirrors(values):
    """--mirror ORIG=NEW values as {ORIG: NEW}."""
    mirrors = {}
    for value in values:
        orig, separator, new = value.partition("=")
        if not (separator and URL.fullmatch(orig) and URL.fullmatch(new)):
            raise LockError("--mirror %s is not ORIG=NEW with two URLs (http://, https:// or file://), like "
                            "https://pypi.org/simple=http://127.0.0.1:8765/pypi/simple" % value)
        mirrors[orig] = new
    return mirrors


def recorded_url(url, mirrors):
    """A URL pip was served, as the lock records it: under a mirror, the URL it stands for."""
    return mirrored(url, dict((new, orig) for orig, new in mirrors.items()))


def _sha256(item):
    info = item["download_info"].get("archive_info") or {}
    digest = (info.get("hashes") or {}).get("sha256")
    if digest is None and (info.get("hash") or "").startswith("sha256="):
        digest = info["hash"][len("sha256="):]
    return digest


def _requirements(item):
    name = normalized(item["metadata"]["name"])
    parsed = []
    for text in item["metadata"].get("requires_dist") or []:
        try:
            parsed.append(Requirement(text))
        except InvalidRequirement as error:
            raise LockError("%s %s declares Requires-Dist %r, which is not a valid requirement: %s"
                            % (name, item["metadata"]["version"], text, error)) from error
    return name, parsed


def resolved_graph(items, marker_env):
    """{name: the names of items it requires} for one environment's resolution, the extras requested on the way
    included: pip's report names only the extras of the requirements it was given, not those a requirement of a
    dependency asks for (torch's cuda-toolkit[cublas,...])."""
    requirements = dict(_requirements(item) for item in items)
    extras = dict((normalized(item["metadata"]["name"]), set(item.get("requested_extras") or [])) for item in items)

    def edges(name):
        """(name required, its requirement) of each requirement of name that this environment takes."""
        for requirement in requirements[name]:
            wanted = normalized(requirement.name)
            if wanted in extras and (requirement.marker is None or any(
                    requirement.marker.evaluate(dict(marker_env, extra=extra)) for extra in [""] + sorted(extras[name]))):
                yield wanted, requirement

    changed = True
    while changed:
        changed = False
        for name in requirements:
            for wanted, requirement in edges(name):
                changed = changed or not requirement.extras <= extras[wanted]
                extras[wanted] |= requirement.extras
    return dict((name, set(wanted for wanted, _requirement in edges(name) if wanted != name)) for name in requirements)


class VersionSplit(LockError):
    """Environments resolved a distribution to different versions: {name: {version: [environments]}}."""

    def __init__(self, split):
        lines = []
        for name, versions in sorted(split.items()):
            lines.append("  %s: %s" % (name, ", ".join("%s in %s" % (version, " ".join(versions[version]))
                                                       for version in sorted(versions, key=Version))))
        super().__init__("\n".join(lines))
        self.split = split


def lock_from_reports(profile_name, requirements, indexes, reports, mirrors, index_of):
    """The lock of pip's reports ({environment: report}, in the lock's order of environments).
    index_of(name, url, sha256) is the index that served that wheel (url as pip was served it); a direct URL's
    wheel has none."""
    distributions, split = {}, {}
    for env, report in reports.items():
        marker_env = marker_environment(env)
        if dict((key, report["environment"].get(key)) for key in marker_env) != marker_env:
            raise LockError("%s: pip resolved for %s, not for this environment's markers: the pip that ran ignores "
                            "the marker environment this tool sets (PIP_IN_ENVIRONMENT)" % (env, report["environment"]))
        graph = resolved_graph(report["install"], marker_env)
        for item in report["install"]:
            name, version = normalized(item["metadata"]["name"]), item["metadata"]["version"]
            url = item["download_info"]["url"]
            wheel, digest = wheel_file(url), _sha256(item)
            if not wheel.endswith(".whl") or digest is None:
                raise LockError("%s: pip chose %s for %s %s, not a wheel with a sha256" % (env, url, name, version))
            entry = distributions.setdefault(name, {"version": version, "requires": set(), "wheels": {}})
            chosen = split.setdefault(name, {})
            if any(env in envs for envs in chosen.values()):
                raise LockError("%s: the resolution has %s twice (sglang alone, and again as a requirement of the "
                                "others?)" % (env, name))
            chosen.setdefault(version, []).append(env)
            entry["requires"] |= graph[name]
            record = entry["wheels"].setdefault(wheel, {
                "sha256": digest, "url": recorded_url(url, mirrors),
                "index": None if item.get("is_direct") else index_of(name, url, digest), "environments": []})
            if record["sha256"] != digest:
                raise LockError("%s: %s has sha256 %s here and %s in %s"
                                % (env, wheel, digest, record["sha256"], ", ".join(record["environments"])))
            record["environments"].append(env)
    split = dict((name, versions) for name, versions in split.items() if len(versions) > 1)
    if split:
        raise VersionSplit(split)
    for entry in distributions.values():
        entry["requires"] = sorted(entry["requires"])
    return {"format": FORMAT, "profile": profile_name, "requirements": requirements, "indexes": indexes,
            "environments": list(reports), "distributions": distributions}


def dumps(lock):
    return json.dumps(lock, sort_keys=True, indent=1) + "\n"


def read_lock(path):
    """A lock file's content; what is not a lock of this format is refused, naming the file."""
    try:
        with open(str(path), "rb") as handle:
            text = handle.read(LOCK_LIMIT + 1)
    except OSError as error:
        raise LockError("cannot read the lock %s: %s" % (path, error.strerror)) from error
    if len(text) > LOCK_LIMIT:
        raise LockError("%s is larger than %d bytes: not a lock" % (path, LOCK_LIMIT))
    try:
        lock = json.loads(text)
    except ValueError as error:
        raise LockError("%s is not JSON: %s" % (path, error)) from error
    if not (isinstance(lock, dict) and lock.get("format") == FORMAT and isinstance(lock.get("distributions"), dict)):
        raise LockError("%s is not a stack lock of format %d" % (path, FORMAT))
    return lock


def diff_lines(old, new):
    """What changed from lock old to lock new: a line per distribution up, down, added or removed, sorted by
    name, then the count."""
    before = dict((name, entry["version"]) for name, entry in old["distributions"].items())
    after = dict((name, entry["version"]) for name, entry in new["distributions"].items())
    counts = {"up": 0, "down": 0, "added": 0, "removed": 0}
    lines = []
    for name in sorted(set(before) | set(after)):
        if name not in before:
            kind, text = "added", after[name]
        elif name not in after:
            kind, text = "removed", before[name]
        elif Version(before[name]) == Version(after[name]):
            continue
        else:
            kind = "up" if Version(after[name]) > Version(before[name]) else "down"
            text = "%s -> %s" % (before[name], after[name])
        counts[kind] += 1
        lines.append("%-7s %s %s" % (kind, name, text))
    unchanged = len(set(before) & set(after)) - counts["up"] - counts["down"]
    lines.append("%d changed (%s), %d unchanged" % (
        sum(counts.values()), ", ".join("%d %s" % (count, kind) for kind, count in counts.items()), unchanged))
    return lines


class _Links(HTMLParser):
    """The anchors of a PEP 503 page: {file name: sha256 or None}."""

    def __init__(self, page_url):
        super().__init__()
        self.page_url, self.files = page_url, {}

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href")
        if tag == "a" and href:
            url = urljoin(self.page_url, href)
            fragment = urlsplit(url).fragment
            self.files[wheel_file(url)] = fragment[len("sha256="):] if fragment.startswith("sha256=") else None


def page_files(html, page_url):
    parser = _Links(page_url)
    parser.feed(html)
    return parser.files


def _ssl_context():
    return ssl.create_default_context(cafile=os.environ.get("PIP_CERT"))


def read_url(url, limit, timeout=INDEX_TIMEOUT_S):
    """The bytes at url (http(s), or file:// where a directory means its index.html, as pip reads it); None when
    it is not there (HTTP 404, no such file); LockError when it does not answer."""
    try:
        if url.startswith("file://"):
            path = Path(urllib.request.url2pathname(urlsplit(url).path))
            path = path / "index.html" if path.is_dir() else path
            if not path.is_file():
                return None
            with open(str(path), "rb") as handle:
                body = handle.read(limit + 1)
        else:
            request = urllib.request.Request(url, headers={"Accept": "text/html"})
            with urllib.request.urlopen(request, timeout=timeout, context=_ssl_context()) as response:
                body = response.read(limit + 1)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise LockError("%s answered HTTP %d %s" % (url, error.code, error.reason)) from error
    except (urllib.error.URLError, OSError) as error:
        raise LockError("%s does not answer: %s" % (url, getattr(error, "reason", error))) from error
    if len(body) > limit:
        raise LockError("%s is larger than %d bytes" % (url, limit))
    return body


def answers(url):
    """Whether url answers at all (any HTTP status), or for file:// exists."""
    if url.startswith("file://"):
        return Path(urllib.request.url2pathname(urlsplit(url).path)).exists()
    try:
        with urllib.request.urlopen(url, timeout=INDEX_TIMEOUT_S, context=_ssl_context()) as response:
            response.read(1)
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False
    return True


def probe_indexes(indexes, mirrors, answer=answers):
    """Refuse an index that does not answer before pip retries it for minutes."""
    for index in indexes:
        fetched = mirrored(index, mirrors)
        if not answer(fetched):
            raise LockError("the index %s does not answer%s: check the URL%s" % (
                index, "" if fetched == index else " at its mirror %s" % fetched,
                " or pass --mirror %s=NEW" % index if fetched == index else " and --mirror"))


class Indexes:
    """Which of the profile's indexes served a wheel: the one whose page for the project lists that file with
    that sha256. A top-level package's wheel must come from the index the profile names for it."""

    def __init__(self, indexes, mirrors, pinned, fetch=read_url):
        self.indexes, self.mirrors, self.pinned, self.fetch = indexes, mirrors, pinned, fetch
        self.pages = {}

    def files(self, index, name):
        if (index, name) not in self.pages:
            url = mirrored(index, self.mirrors).rstrip("/") + "/" + name + "/"
            body = self.fetch(url, PAGE_LIMIT)
            self.pages[(index, name)] = page_files(body.decode("utf-8", "replace"), url) if body else {}
        return self.pages[(index, name)]

    def index_of(self, name, url, digest):
        wheel = wheel_file(url)
        candidates = [self.pinned[name]] if name in self.pinned else self.indexes
        if self.indexes == [candidates[0]]:
            return candidates[0]
        for index in candidates:
            files = self.files(index, name)
            if wheel in files and files[wheel] in (None, digest):
                return index
        if name in self.pinned:
            raise LockError("pip took %s from another index than %s, the one the profile names for %s: pip cannot "
                            "take a package from one index only; make the version exact enough for that index "
                            "alone to have it (a local label such as +cu130), or name the wheel's URL as the source"
                            % (wheel, self.pinned[name], name))
        raise LockError("none of the indexes %s lists %s with sha256 %s, which pip chose"
                        % (", ".join(self.indexes), wheel, digest))


def pip_environment(environ):
    env = dict((name, value) for name, value in environ.items() if not name.startswith("PIP_") or name in PIP_KEPT)
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def pip_argv(python, env, work, options, requirements):
    """`pip install --dry-run --report` for environment env: what pip resolves there, nothing installed."""
    major, minor, machine = ENVIRONMENT.fullmatch(env).groups()
    argv = [python, "-c", PIP_IN_ENVIRONMENT, json.dumps(marker_environment(env)), "install", "--dry-run",
            "--ignore-installed", "--quiet", "--report", str(work / "report.json"),
            # pip takes --platform with install only together with --target; a dry run writes nothing there.
            "--target", str(work / "target"), "--only-binary=:all:"] + PIP_OPTIONS
    for tag in options["platforms"][machine]:
        argv += ["--platform", tag]
    argv += ["--python-version", "%s.%s" % (major, minor), "--implementation", "cp"] + options["sources"]
    if options.get("constraints"):
        pins = "".join("%s==%s\n" % item for item in sorted(options["constraints"].items()))
        (work / "constraints.txt").write_text(pins, encoding="utf-8")
        argv += ["--constraint", str(work / "constraints.txt")]
    return argv + requirements


def run_pip(python, env, options, requirements, what):
    """pip's report of the resolution of requirements for env; its message, named with env, when it fails."""
    with tempfile.TemporaryDirectory(prefix="stack-lock-") as work:
        argv = pip_argv(python, env, Path(work), options, requirements)
        try:
            done = subprocess.run(argv, env=pip_environment(os.environ), capture_output=True, text=True,
                                  timeout=PIP_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as error:
            raise LockError("%s: pip resolving %s ran longer than %d s" % (env, what, PIP_TIMEOUT_S)) from error
        if done.returncode != 0:
            raise LockError("%s: pip could not resolve %s:\n%s" % (env, what, done.stderr.strip()[-6000:]))
        report = Path(work) / "report.json"
        if report.stat().st_size > REPORT_LIMIT:
            raise LockError("%s: pip's report is larger than %d bytes" % (env, REPORT_LIMIT))
        return json.loads(report.read_text(encoding="utf-8"))


def resolve_environment(python, env, options, packages):
    """pip's report for env, as the role installs without a lock: sglang alone from its own source, then the
    other pins with sglang's other requirements (the profile's pins over sglang's own), merged into one."""
    sglang = [package for package in packages if package["key"] == "sglang"][0]
    others = [package for package in packages if package is not sglang]
    sources = ["--no-index"] if sglang["wheel"] else ["--index-url", mirrored(sglang["source"], options["mirrors"])]
    first = run_pip(python, env, dict(options, sources=sources + ["--no-deps"], constraints=None),
                    [sglang["fetch"]], sglang["requirement"])
    requires = first["install"][0]["metadata"].get("requires_dist")
    pinned = [package["distribution"] for package in packages]
    stack = [package["fetch"] for package in others] + dependencies(requires, pinned)
    second = run_pip(python, env, options, stack, "the profile's other pins with sglang's requirements")
    return dict(second, install=first["install"] + second["install"])


def resolve_all(python, envs, options, packages, lock_of, log):
    """The lock, each environment resolved; distributions whose version differs between environments are
    constrained to the oldest of those versions and every environment resolved again."""
    constraints = {}
    for _attempt in range(UNIFY_ROUNDS):
        reports, failed = {}, []
        for env in envs:
            try:
                reports[env] = resolve_environment(python, env, dict(options, constraints=constraints), packages)
            except LockError as error:
                failed.append(str(error))
                log("%s: failed (below)" % env)
                continue
            log("%s: %d distributions" % (env, len(reports[env]["install"])))
        if failed:
            others = ("A lock of the others alone: --environments %s" % ",".join(reports) if reports
                      else "Every environment failed.")
            raise LockError("\n".join(failed + [others]))
        try:
            return lock_of(reports)
        except VersionSplit as split:
            if set(split.split) & set(constraints):
                raise LockError("no one version of each distribution suits every environment (a lock holds one):\n%s"
                                % split) from split
            oldest = dict((name, min(versions, key=Version)) for name, versions in split.split.items())
            log("the environments resolve different versions, and a lock holds one:\n%s\nresolving every environment "
                "again with %s" % (split, " ".join("%s==%s" % item for item in sorted(oldest.items()))))
            constraints.update(oldest)
    raise LockError("the environments still differ after %d rounds of resolution" % UNIFY_ROUNDS)


def load_profiles(path):
    try:
        with open(str(path), encoding="utf-8") as handle:
            data = yaml.safe_load(handle.read(LOCK_LIMIT))
    except (OSError, yaml.YAMLError) as error:
        raise LockError("cannot read the profiles of --profiles %s: %s" % (path, error)) from error
    if not (isinstance(data, dict) and ("stack_profiles" in data or "stack_profiles_custom" in data)):
        raise LockError("--profiles %s has neither stack_profiles nor stack_profiles_custom" % path)
    if "stack_profiles" not in data:
        with open(str(PROFILES), encoding="utf-8") as handle:
            data["stack_profiles"] = yaml.safe_load(handle)["stack_profiles"]
    return data["stack_profiles"], data.get("stack_profiles_custom") or {}


def profile_named(name, profiles_file):
    profiles, custom = load_profiles(profiles_file)
    try:
        return resolve(name, profiles, custom)
    except StackProfileError as error:
        raise LockError(str(error)) from error


def lock_path(profile):
    """Where the profile's python.lock says its lock is: a name under roles/stack/files/locks, or a path."""
    name = profile["python"]["lock"]
    if name is None:
        return None
    return Path(name) if name.startswith("/") else LOCKS / name


def lock_of_reference(reference, profiles_file):
    """The lock that --against or --diff-only names: a file (a path, or a name ending in .json), else a profile's."""
    if os.sep in reference or reference.endswith(".json"):
        return read_lock(reference)
    path = lock_path(profile_named(reference, profiles_file))
    if path is None:
        raise LockError("profile %s has no lock (python.lock is null): name its lock file instead" % reference)
    return read_lock(path)


def write_lock(path, lock):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=str(path.parent), prefix=".%s." % path.name, delete=False,
                                     encoding="utf-8") as handle:
        handle.write(dumps(lock))
    # A tracked file: readable by all, as git checks it out.
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, str(path))


def main_index():
    with open(str(ROLE_DEFAULTS), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["ml_stack_index_url"]


def make_lock(args, log):
    profile = profile_named(args.profile, args.profiles)
    output = Path(args.output) if args.output else lock_path(profile)
    if output is None:
        raise LockError("stack_profiles.%s.python.lock is null and no --output was given: name the lock file in the "
                        "profile (python.lock) or pass --output PATH" % profile["name"])
    envs = environments(profile, args.environments.split(",") if args.environments else None)
    glibc = oldest_glibc(profile)
    mirrors = parse_mirrors(args.mirror)
    packages = top_level(profile, mirrors)
    indexes = index_sources(packages, args.index_url or main_index())
    probe_indexes(indexes, mirrors)
    sources = ["--index-url", mirrored(indexes[0], mirrors)]
    for extra in indexes[1:]:
        sources += ["--extra-index-url", mirrored(extra, mirrors)]
    options = {"mirrors": mirrors, "sources": sources,
               "platforms": dict((machine, platform_tags(glibc, machine)) for machine in profile["architectures"])}
    served = Indexes(indexes, mirrors, dict((normalized(package["distribution"]), package["source"])
                                            for package in packages if not package["wheel"]))
    log("locking %s for %s (glibc %s) from %s" % (profile["name"], ", ".join(envs), glibc, ", ".join(indexes)))
    lock_of = functools.partial(lock_from_reports, profile["name"], [package["requirement"] for package in packages],
                                indexes, mirrors=mirrors, index_of=served.index_of)
    lock = resolve_all(sys.executable, envs, options, packages, lock_of, log)
    # What the ml_stack role would refuse is never written.
    found = lock_problems(lock, profile, profile_versions(profile))
    if found:
        raise LockError("the lock of %s would not install:\n- %s" % (profile["name"], "\n- ".join(found)))
    write_lock(output, lock)
    log("wrote %s: %d distributions" % (output, len(lock["distributions"])))
    return lock


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("profile", nargs="?", help="the stack profile (a name or an alias)")
    parser.add_argument("--profiles", default=str(PROFILES),
                        help="a YAML file with stack_profiles and/or stack_profiles_custom (default: the shipped)")
    parser.add_argument("--output", help="the lock file (default: the profile's python.lock)")
    parser.add_argument("--environments", help="only these environments, comma-separated (cp312-x86_64,...)")
    parser.add_argument("--index-url", help="the index for what the profile does not pin (default: the ml_stack "
                        "role's ml_stack_index_url)")
    parser.add_argument("--mirror", action="append", default=[], metavar="ORIG=NEW",
                        help="fetch from NEW what the profile names ORIG, recording ORIG (repeatable)")
    parser.add_argument("--against", metavar="OTHER", help="print what changed from OTHER's lock (a profile or file)")
    parser.add_argument("--diff-only", nargs=2, metavar=("A", "B"),
                        help="print what changed from lock A to lock B (profiles or files); resolve nothing")
    args = parser.parse_args(argv)
    if (args.profile is None) == (args.diff_only is None):
        parser.error("name a profile to lock, or --diff-only A B")
    return args


def main(argv=None):
    args = parse_args(argv)

    def log(text):
        print(text, file=sys.stderr)

    try:
        if args.diff_only:
            old, new = (lock_of_reference(reference, args.profiles) for reference in args.diff_only)
        else:
            old = lock_of_reference(args.against, args.profiles) if args.against else None
            new = make_lock(args, log)
    except LockError as error:
        sys.exit("stack_lock: %s" % error)
    if old is not None:
        print("\n".join(diff_lines(old, new)))


if __name__ == "__main__":
    main()
