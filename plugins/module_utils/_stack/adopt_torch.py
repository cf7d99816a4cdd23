# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Adopting a torch the host already has (ml_stack_torch_from) into a stack profile's virtualenv: whether the tree
can be adopted, and the pieces of the plan that adopt it. Pure Python, no Ansible imports: the role's filter plugin
is a thin shell over these functions, and the unit tests import this module directly.

The adopted tree is a virtualenv (/opt/torch/.venv) or the system interpreter's site-packages. It is shared by every
profile that adopts it and never replaced, so:

- every directory from / down to its site-packages, and everything in that site-packages, must be root's and
  writable by root alone: what another user could change there, every profile's server would load;
- its torch must be the profile's (the public version, its local label aside, and the CUDA it was built for), and
  import, with the Python X.Y the profile's virtualenv is made with;
- the profile's virtualenv sees it through one line of a .pth file in its own site-packages, after its own
  packages; the distributions of the lock that only torch needs are not installed (the lock's closure of torch),
  and where the tree has another version of one than the lock, that is said.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import os
import posixpath
import re
import stat as stat_module

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import owner_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import normalized

VARIABLE = "ml_stack_torch_from"
# Its one line appends the adopted site-packages to the virtualenv's sys.path, after the virtualenv's own.
PTH_NAME = "blackwell-gpu-node-adopted-torch.pth"
# inspect_torch.py's second argument that has it read the tree's metadata alone, without importing torch: what the
# converged check and preflight ask, which import torch in the virtualenv or not at all.
METADATA_ONLY = "--metadata-only"
# A uid as find prints it; ASCII digits only, as str.isdigit() also takes "²".
UID = re.compile(r"[0-9]{1,10}")
# What inspect_torch.py may print: the JSON of a few thousand distributions, and an error's text.
REPORT_LIMIT = 1 << 20
ERROR_LIMIT = 2000
TRUST_FIX = ("chown root: %s; chmod go-w %s, or adopt a tree that only root can change (the service user runs it, "
             "and every profile that adopts it loads it)")


def public_version(version):
    """2.11.0 from 2.11.0+cu130: a version without its local label."""
    return version.split("+", 1)[0]


def series(version):
    """3.11 from 3.11.2."""
    return ".".join(version.split(".")[:2])


def torch_from_problems(value):
    """Why ml_stack_torch_from names no tree that can be adopted: [] for null, or an absolute path of plain
    components (it goes, resolved, into a .pth line, where a newline would add a line of code)."""
    if value is None:
        return []
    problem = control_character_problem(value, VARIABLE)
    if problem:
        return [problem]
    if not isinstance(value, str) or not value.startswith("/") or value.rstrip("/") == "":
        return ["%s=%r is not the absolute path of a virtualenv (like /opt/torch/.venv) or of a site-packages "
                "directory: name one, or set it to null to install the profile's torch" % (VARIABLE, value)]
    if any(name in (".", "..") for name in value.split("/")):
        return ["%s=%s holds '.' or '..': name the tree by its own path" % (VARIABLE, value)]
    return []


def interpreter(torch_from, is_virtualenv, system_python):
    """The interpreter that inspects the tree: a virtualenv's own, or for a site-packages directory the one the
    profile's virtualenv is made with (ml_stack_python), whose site-packages it must be."""
    return posixpath.join(torch_from, "bin", "python") if is_virtualenv else system_python


def inspect_argv(torch_from, is_virtualenv, system_python, script, imports=True):
    """The command that runs inspect_torch.py (script) on the tree, as adopt_torch.yml runs it: -I -S, so that
    nothing of the tree is on sys.path and none of its .pth files run before the script imports torch itself."""
    return ([interpreter(torch_from, is_virtualenv, system_python), "-I", "-S", "-B", "-c", script, torch_from]
            + ([] if imports else [METADATA_ONLY]))


def inside_argv(torch_from):
    """adopt_torch.yml's find of the first entry of the tree that is not root's or that its group or others can
    write, for parse_inside(). -H: the named path may be a link; nothing below it is followed. A file named .lock
    that root owns, with no other name, is passed over: uv leaves one writable by everyone (mode 666, on purpose,
    so that other users can take the lock) in every environment it installs into, and Python never imports or runs
    it."""
    return ["find", "-H", torch_from, "(", "!", "-uid", "0", "-o", "-perm", "/022", ")", "!", "-type", "l",
            "!", "(", "-name", ".lock", "-type", "f", "-uid", "0", "-links", "1", ")",
            "-printf", "%p\\t%u\\t%U\\t%m\\n", "-quit"]


def observe_tree(torch_from, system_python, script, run, uid, option, imports=True):
    """inspected_state() of inspect_torch.py run on the tree as adopt_torch.yml runs it, as uid (the virtualenv's
    owner; root runs it only as the role does, without one) in an empty environment. run(argv) returns (rc,
    stdout, stderr); option names the owner's variable where uid has no user name."""
    is_virtualenv = os.path.exists(posixpath.join(torch_from, "pyvenv.cfg"))
    argv = owner_argv(uid, inspect_argv(torch_from, is_virtualenv, system_python, script, imports), option)
    return inspected_state(*run(argv))


def level_state(path, user_name):
    """What ansible.builtin.stat (follow: false) reports of a level that _level_problem weighs; user_name(uid)
    gives the owner's name or None."""
    try:
        found = os.lstat(path)
    except OSError:
        return {"exists": False}
    state = {"exists": True, "islnk": stat_module.S_ISLNK(found.st_mode), "isdir": stat_module.S_ISDIR(found.st_mode),
             "uid": found.st_uid, "mode": "%04o" % stat_module.S_IMODE(found.st_mode), "pw_name": user_name(found.st_uid)}
    if state["islnk"]:
        state["lnk_source"] = os.path.realpath(path)
    return state


def recheck(profile, torch_from, python_version, system_python, script, run, uid, user_name):
    """decide() of the tree as the converged check makes it, cheaply: inspect_torch.py reads the tree's metadata
    as uid without importing torch (the check imports torch in the virtualenv, through its .pth file, and compares
    torch.version.cuda there), root looks at every level and walks the tree as adopt_torch.yml does."""
    report = observe_tree(torch_from, system_python, script, run, uid, "ml_stack_venv_owner", imports=False)
    stats = [level_state(path, user_name) for path in levels(looked_at(torch_from, report))]
    inside = parse_inside(*run(inside_argv(torch_from)))
    return decide(profile, torch_from, report, stats, inside, python_version, imports=False)


def levels(path):
    """Every directory from / down to path, whose owners and modes decide who can change what lies below."""
    names = [name for name in path.split("/") if name]
    return ["/"] + ["/" + "/".join(names[:count]) for count in range(1, len(names) + 1)]


def _level_problem(path, state):
    """Why a level of the tree lets someone other than root change what lies below it, or None. state: what
    ansible.builtin.stat (follow: false) reports about it."""
    if not state.get("exists"):
        return "%s does not exist: fix %s" % (path, VARIABLE)
    if state.get("islnk"):
        return ("%s is a symbolic link (to %s): name the tree by its real path in %s, whose every level root owns"
                % (path, state.get("lnk_source"), VARIABLE))
    if not state.get("isdir"):
        return "%s is not a directory: fix %s" % (path, VARIABLE)
    mode = int(state["mode"], 8)
    if state["uid"] != 0:
        return "%s belongs to %s (uid %d, mode %s), not to root: %s" % (
            path, state.get("pw_name") or "no user", state["uid"], state["mode"], TRUST_FIX % (path, path))
    if mode & 0o022:
        return "%s is writable by its group or others (owner %s, mode %s): %s" % (
            path, state.get("pw_name") or "root", state["mode"], TRUST_FIX % (path, path))
    return None


def parse_inside(rc, stdout, stderr):
    """The first entry of the tree that root does not own or that its group or others can write, from find's
    -printf '%p\\t%u\\t%U\\t%m\\n' -quit: {path, owner, uid, mode}; None when there is none, {error} when find
    could not walk the tree."""
    fields = (stdout or "").split("\n", 1)[0].rsplit("\t", 3)
    if len(fields) == 4 and UID.fullmatch(fields[2]):
        return {"path": fields[0], "owner": fields[1], "uid": int(fields[2]), "mode": fields[3]}
    if rc != 0:
        lines = [line for line in (stderr or "").splitlines() if line.strip()]
        return {"error": (lines[-1] if lines else "find exited with status %d" % rc)[:ERROR_LIMIT]}
    return None


def trust_problems(site_packages, stats, tree, inside):
    """Why the tree cannot be trusted: [] when every level from / to site_packages is a directory that root owns and
    only root can write, and nothing in the tree is anyone else's.

    stats: ansible.builtin.stat's stat (follow: false) of each of levels(site_packages), in that order. tree: the
    adopted tree's path; inside: parse_inside() of the first entry in it that another user could change."""
    paths = levels(site_packages)
    if len(stats) != len(paths):
        raise ValueError("%d stats for the %d levels of %s" % (len(stats), len(paths), site_packages))
    problems = []
    for path, state in zip(paths, stats):
        problem = _level_problem(path, state)
        if problem:
            problems.append(problem)
        if not state.get("exists") or state.get("islnk") or not state.get("isdir"):
            break
    if inside is not None and "error" in inside:
        # A tree that is not there, or not a directory, says so above.
        if not problems:
            problems.append("%s could not be walked whole, so it is not known that only root can change it: %s" % (
                tree, inside["error"]))
    elif inside is not None:
        problems.append("%s, in the adopted tree %s, %s (owner %s, uid %d, mode %s): chown -R root: %s; chmod -R go-w "
                        "%s, or adopt a tree that only root can change" % (
                            inside["path"], tree, "belongs to another user than root" if inside["uid"] != 0
                            else "is writable by its group or others", inside["owner"], inside["uid"],
                            inside["mode"], tree, tree))
    return problems


def inspected_state(rc, stdout, stderr):
    """What inspect_torch.py printed, or {error} when it did not run to its end."""
    if rc == 0 and len(stdout) <= REPORT_LIMIT:
        try:
            report = json.loads(stdout)
        except ValueError:
            report = None
        if isinstance(report, dict):
            return report
        return {"error": "it printed no JSON object: %s" % stdout.strip()[:ERROR_LIMIT]}
    if rc == 0:
        return {"error": "it printed more than %d bytes" % REPORT_LIMIT}
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    return {"error": (lines[-1] if lines else "exit status %d and no error text" % rc)[:ERROR_LIMIT]}


def looked_at(torch_from, report):
    """The directory whose levels decide() weighs: the site-packages the report names, else torch_from itself."""
    return (None if "error" in report else report.get("site_packages")) or torch_from


def _below(path, root):
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


def _torch_problems(profile, torch_from, report, python_version, imports):
    """Why the tree's torch is not the profile's, by kind: [(kind, problem)]; what importing it said only with
    imports."""
    wanted = profile["python"]["torch"]
    name = profile["name"]
    found = []
    site_packages = report.get("site_packages")
    if not site_packages or not _below(site_packages, report.get("path") or ""):
        found.append(("not_importable", "%s=%s is neither a virtualenv nor a site-packages directory of %s (its "
                                        "site-packages: %s): name one of them" % (
                                            VARIABLE, torch_from, report.get("executable"),
                                            ", ".join(report.get("candidates") or []) or "none")))
        return found
    if series(report.get("python") or "") != series(python_version):
        found.append(("python_mismatch", "%s=%s is for Python %s, the profile's virtualenv is made with Python %s "
                                         "(ml_stack_python): torch's extension modules load in one Python X.Y only; "
                                         "adopt a tree of Python %s, or set ml_stack_python to an interpreter of %s" % (
                                             VARIABLE, torch_from, report.get("python"), python_version,
                                             series(python_version), series(report.get("python") or ""))))
    distribution = report.get("torch_distribution")
    if distribution is None:
        found.append(("not_importable", "%s=%s has no torch distribution in %s: name the tree torch is installed "
                                        "in, or set %s to null to install torch %s" % (
                                            VARIABLE, torch_from, site_packages, VARIABLE, wanted["version"])))
        return found
    if public_version(distribution) != public_version(wanted["version"]):
        found.append(("version_mismatch", "%s=%s has torch %s, stack profile %s wants torch %s "
                                          "(stack_profiles.%s.python.torch.version): adopt a tree with torch %s, "
                                          "or set %s to null to install it" % (
                                              VARIABLE, torch_from, distribution, name, wanted["version"], name,
                                              public_version(wanted["version"]), VARIABLE)))
    if not imports:
        return found
    imported = report.get("import") or {}
    if not imported.get("ok"):
        found.append(("not_importable", "%s=%s: import torch fails for the service user: %s. Make the tree importable "
                                        "(the service user must read it; the libraries it loads must be there), or "
                                        "set %s to null" % (VARIABLE, torch_from,
                                                            (imported.get("error") or "no error text")[:ERROR_LIMIT],
                                                            VARIABLE)))
        return found
    if not _below(imported.get("file") or "", site_packages):
        found.append(("not_importable", "%s=%s: import torch takes %s, not the torch of %s: remove the other torch "
                                        "from the interpreter's path" % (VARIABLE, torch_from, imported.get("file"),
                                                                         site_packages)))
    if imported.get("cuda") != wanted["cuda"]:
        found.append(("cuda_mismatch", "%s=%s has torch %s built for CUDA %s (torch.version.cuda), stack profile %s "
                                       "wants CUDA %s (stack_profiles.%s.python.torch.cuda): adopt a torch built for "
                                       "CUDA %s, or set %s to null to install the profile's" % (
                                           VARIABLE, torch_from, imported.get("version"), imported.get("cuda"), name,
                                           wanted["cuda"], name, wanted["cuda"], VARIABLE)))
    return found


def pth(site_packages):
    """The .pth file that makes a virtualenv see the adopted site-packages, after its own: its name and its one
    line."""
    return {"name": PTH_NAME, "content": site_packages + "\n"}


def adopted(report):
    """What the plan of a virtualenv built on the tree takes of inspect_torch.py's report: site_packages (the .pth
    file's line; None when the script failed), torch (what importing it said, where it was imported, and its
    distribution's version) and distributions (the tree's, for skip_plan)."""
    return {"site_packages": report.get("site_packages") if "error" not in report else None,
            "torch": dict(report.get("import") or {}, distribution=report.get("torch_distribution")),
            "distributions": report.get("distributions") or {}}


def decide(profile, torch_from, report, stats, inside, python_version, imports=True):
    """Whether the tree at torch_from can be adopted for profile, every problem at once.

    report: inspected_state() of what inspect_torch.py printed. stats: ansible.builtin.stat's stat of each of
    levels(looked_at(torch_from, report)). inside: parse_inside() of find's first entry in the tree that another
    user could change.
    python_version: the version of the interpreter the profile's virtualenv is made with (ml_stack_python).
    imports: whether the report says what importing torch did; the converged check's does not (see recheck).

    Returns decision (match, or the first refusal's kind: untrusted, not_importable, python_mismatch,
    version_mismatch, cuda_mismatch), ok, problems, site_packages, torch (what the tree reports of it),
    distributions (the tree's, for skip_plan) and, when ok, pth: the file to put into the profile's site-packages
    and its text."""
    site_packages = adopted(report)["site_packages"]
    found = [("untrusted", problem)
             for problem in trust_problems(looked_at(torch_from, report), stats, report.get("path") or torch_from, inside)]
    if "error" in report:
        found.append(("not_importable", "%s=%s could not be inspected as the service user: %s" % (
            VARIABLE, torch_from, report["error"])))
    elif control_character_problem(site_packages, "the adopted site-packages"):
        # Its path is the .pth file's line: a newline in it would add a line, which Python runs if it is an import.
        found.append(("untrusted", control_character_problem(site_packages, "the adopted site-packages")))
    else:
        found.extend(_torch_problems(profile, torch_from, report, python_version, imports))
    result = dict(adopted(report), decision=found[0][0] if found else "match", ok=not found,
                  problems=[problem for _kind, problem in found])
    if not found:
        result["pth"] = pth(site_packages)
    return result


def skip_plan(closure, tree_versions, lock):
    """Which of the lock's distributions the adopted tree stands in for.

    closure: the names lock.closure(lock, "torch", environment) returns, torch and what only torch needs. tree_versions:
    {distribution: version} the tree has (inspect_torch.py's distributions). Returns skip (the closure's
    distributions the tree has: not installed into the virtualenv), versions (the tree's version of each of them),
    install (those it lacks: installed from the lock as usual) and differences, one line for each skipped
    distribution whose version in the tree is not the lock's (torch is matched by decide(), its local label
    aside)."""
    tree = dict((normalized(name), version) for name, version in tree_versions.items())
    skip = sorted(name for name in closure if name in tree)
    differences = ["%s %s of the adopted tree (%s) stands in for the lock's %s" % (
        name, tree[name], VARIABLE, lock["distributions"][name]["version"])
        for name in skip if name != "torch" and tree[name] != lock["distributions"][name]["version"]]
    return {"skip": skip, "versions": dict((name, tree[name]) for name in skip),
            "install": sorted(name for name in closure if name not in tree), "differences": differences}
