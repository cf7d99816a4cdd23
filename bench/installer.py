"""pip against uv as the installer of the real cu128 stack, side by side: the time, whether the virtualenvs are the
same, and whether the torch guard holds for a later install.

    make bench-installer      (or: .venv/bin/python bench/installer.py [--work DIR] [--keep])

The profile is the collection's own cu128 (torch 2.9.1, PyPI's CUDA 12.8 build, with its nvidia-* wheels,
sgl-kernel 0.3.21, flashinfer 0.6.4, SGLang 0.5.9 and all their requirements: several GB), without flashinfer's
JIT cache, which comes from flashinfer.ai and this machine cannot reach. The steps are the ml_stack role's, from
its own plan (ml_stack.build_plan): sglang alone with --no-deps, then the pinned packages with sglang's other
requirements in one resolution, every pin in the virtualenv's constraints file. This machine's interpreter and
disk stand in for a node's; the work goes under /var/tmp (tens of GB while it runs; each virtualenv and cache is
removed once measured).

Four builds, each into a new virtualenv with an empty cache of its own:
- pip and uv from the index (https://pypi.org/simple), as a node with internet builds;
- pip and uv offline from a wheelhouse (--no-index --find-links), as ml_stack_offline builds; the wheelhouse is
  downloaded first with the role's own `pip download` steps, and that time is printed too.

Each virtualenv is then checked: every distribution's version (against pip's build from the index), `pip check`
(only the lines the profile causes on purpose), torch's version and CUDA, and the guard: a later
`pip install torch==2.8.0` there must fail on the constraints that the virtualenv's pip.conf names. uv reads no
pip.conf, so a later `uv pip install` there is tried too, and the table says whether the constraints stopped it.

    make bench-installer BENCH_INSTALLER_ARGS='--lock sglang-0.5.17-cu130'

measures a locked profile instead (roles/stack/files/locks), installed as the role installs a lock: one
`pip install --require-hashes --no-deps -r FILE` of the lock's wheels for this interpreter's environment
(cp311-x86_64), against `uv pip install` of the same file. Five installs, each into a new virtualenv with an empty
cache: pip and uv from the index, then the wheelhouse downloaded once with the role's own `pip download` of the
lock's files (each refused unless its sha256 is the lock's, and the folder then checked to hold exactly the lock's
files with those hashes), pip and uv from it, and uv once more with --compile-bytecode (pip compiles every module to
byte code; uv does not unless asked). Each is timed (wall and the CPU seconds of its processes), `pip check` run,
its distributions compared with the lock, and every file that each distribution's RECORD lists hashed; each
virtualenv is then compared with pip's from the index file by file, and the differences sorted into what
installers write differently on purpose (their own dist-info files, byte code, the entry-point scripts they
generate, the interpreter line of a wheel's scripts), a file that several wheels ship (the one installed last
wins, in whatever order the installer took), and the wheels' own files, which should not differ.
"""

import argparse
import configparser
import csv
import email.parser
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import lock as stack_lock  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack import profile as stack_profile  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (  # noqa: E402
    PIP_OPTIONS,
    build_plan,
    classify_pip_check,
    dependencies,
    profile_versions,
)

UV_VERSION = "0.13.9"
INDEX = "https://pypi.org/simple"
PYTHON = "/usr/bin/python3"
REQUIREMENTS_OF = CHECKOUT / "roles" / "ml_stack" / "files" / "requirements_of.py"
# An older torch than the profile's: what a later install in the virtualenv must not be allowed to put there.
OTHER_TORCH = "torch==2.8.0"
# A build of the real stack takes minutes; an installer that hangs is stopped.
STEP_TIMEOUT_S = 3600
# What an installer writes into a dist-info about the install itself, from no file of the wheel: each writes its own
# (uv_cache.json is uv's note of the cache entry it installed from).
INSTALLER_FILES = ("INSTALLER", "RECORD", "REQUESTED", "direct_url.json", "uv_cache.json")
# The kinds of difference between two virtualenvs of the same wheels, in the order they are reported. All but the
# last two are the installers' own doing; a file that several wheels ship is the last installed one's, and which
# one that is depends on the installer's order.
KINDS = ("installer metadata", "byte code", "entry-point scripts", "script interpreter lines", "files several wheels ship",
         "package files")
# The largest file read whole when its interpreter line is set aside: a wheel's scripts are small.
SCRIPT_BYTES = 1 << 20


def profile():
    profiles = yaml.safe_load((CHECKOUT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
    cu128 = dict(profiles["cu128"], name="cu128")
    cu128["python"]["flashinfer_jit_cache"]["version"] = None
    return cu128


def host_python():
    code = ("import json, platform, sys; print(json.dumps({'version': platform.python_version(), "
            "'implementation': sys.implementation.name, 'machine': platform.machine(), "
            "'glibc': platform.libc_ver()[1]}))")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def plan(work, offline, stack, lock=None):
    """The ml_stack role's plan for the stack profile on this machine, from the index or (offline) a wheelhouse."""
    settings = dict(venv_path=str(work / "ml-env"), venv_owner=None, python=PYTHON, index_url=INDEX, index_mirrors={},
                    pip_environment={}, offline=offline, wheelhouse_path=str(work / "wheelhouse"),
                    wheelhouse_controller_path=str(work / "controller") if offline else None, system_packages=[])
    host = {"python": host_python(), "owner": True, "venv_path": {}, "parent_exists": True, "dpkg": ""}
    result = build_plan(settings, stack, host, lock)
    if result["problems"]:
        sys.exit("the ml_stack plan has problems: %s" % result["problems"])
    return result


def environment(cache, config=os.devnull):
    """This machine's pip settings left out (its own index, find-links and constraints), the CA it needs kept."""
    env = dict((name, value) for name, value in os.environ.items() if not name.startswith(("PIP_", "UV_")))
    env.update(PIP_CONFIG_FILE=config, PIP_CACHE_DIR=str(cache), UV_CACHE_DIR=str(cache), UV_NO_CONFIG="1",
               PIP_DEFAULT_TIMEOUT="180", UV_HTTP_TIMEOUT="180")
    return env


def run(argv, env, check=True):
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        sys.exit("%s exited with %d:\n%s" % (" ".join(argv[:6]), done.returncode, (done.stderr or done.stdout)[-4000:]))
    return done


def uv_arguments(pip_arguments):
    """The role's pip install arguments as `uv pip install` takes them: pip's own options left out."""
    assert pip_arguments[0] == "install"
    rest = pip_arguments[1:]
    for option in PIP_OPTIONS:
        rest.remove(option)
    return rest


def installer_argv(installer, uv, venv, constraints, arguments):
    python = str(venv / "bin" / "python")
    if installer == "pip":
        return [python, "-m", "pip"] + arguments + ["--constraint", constraints]
    return [uv, "pip", "install", "--python", python, "--constraint", constraints] + uv_arguments(arguments)


def build(installer, uv, the_plan, work):
    """Build the profile into a new virtualenv with installer; (seconds, the virtualenv)."""
    venv, cache = work / ("venv-" + installer), work / ("cache-" + installer)
    for path in (venv, cache):
        shutil.rmtree(path, ignore_errors=True)
    env = environment(cache)
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    constraints = venv / "ml-stack-constraints.txt"
    constraints.write_text(the_plan["constraints"])
    (venv / "pip.conf").write_text(the_plan["pip_conf"].replace(the_plan["files"]["constraints"], str(constraints)))
    started = time.monotonic()
    run(installer_argv(installer, uv, venv, str(constraints), the_plan["install"]["sglang"]), env)
    requires = json.loads(run([str(venv / "bin" / "python"), "-B", str(REQUIREMENTS_OF), "sglang"], env).stdout)
    stack = the_plan["install"]["stack"] + dependencies(requires, list(the_plan["versions"]))
    run(installer_argv(installer, uv, venv, str(constraints), stack), env)
    seconds = time.monotonic() - started
    shutil.rmtree(cache, ignore_errors=True)
    return seconds, venv


def inspect(venv, uv, work, the_plan):
    """What the virtualenv holds and whether the guard holds there. pip check passes when it reports only what
    the profile does on purpose (sglang's flashinfer pin overridden), as the role's verification decides."""
    python = str(venv / "bin" / "python")
    env = environment(work / "cache-inspect")
    versions = dict(line.split("==", 1) for line in run([python, "-m", "pip", "list", "--format=freeze"], env)
                    .stdout.split() if "==" in line)
    check = run([python, "-m", "pip", "check"], env, check=False)
    deliberate, unexpected = classify_pip_check(check.stdout, the_plan["versions"])
    torch = run([python, "-c", "import torch; print(torch.__version__, torch.version.cuda)"], env).stdout.split()
    # As on a node: pip reads the virtualenv's own pip.conf, which names the constraints.
    guarded_env = environment(work / "cache-inspect", config=str(venv / "pip.conf"))
    pip_later = run([python, "-m", "pip", "install", "--dry-run", "--no-deps", OTHER_TORCH], guarded_env, check=False)
    uv_later = run([uv, "pip", "install", "--python", python, "--dry-run", "--no-deps", OTHER_TORCH], env, check=False)
    shutil.rmtree(work / "cache-inspect", ignore_errors=True)
    size = int(run(["du", "-sm", str(venv)], env).stdout.split()[0])
    return {"versions": versions, "pip_check": not unexpected, "pip_check_output": check.stdout.strip(),
            "pip_check_deliberate": len(deliberate),
            "torch": torch,
            "pip_guard": pip_later.returncode != 0 and "onstraint" in pip_later.stdout + pip_later.stderr,
            "uv_guard": uv_later.returncode != 0, "size_mb": size}


def download_wheelhouse(the_plan, work):
    """The role's controller download (wheelhouse_download.yml), into the wheelhouse; its seconds."""
    download = the_plan["download"]
    shutil.rmtree(download["partial"], ignore_errors=True)
    cache = work / "cache-download"
    env = environment(cache)
    started = time.monotonic()
    run([sys.executable, "-m", "pip"] + download["sglang"], env)
    requires = json.loads(run([sys.executable, "-B", str(REQUIREMENTS_OF), "sglang", download["partial"]], env).stdout)
    run([sys.executable, "-m", "pip"] + download["stack"] + dependencies(requires, download["pinned"]), env)
    seconds = time.monotonic() - started
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(work / "wheelhouse", ignore_errors=True)
    os.rename(download["partial"], work / "wheelhouse")
    return seconds


def install_uv(work):
    tool = work / "uv-tool"
    subprocess.run([PYTHON, "-m", "venv", str(tool)], check=True)
    run([str(tool / "bin" / "python"), "-m", "pip", "install", "uv==%s" % UV_VERSION], environment(work / "cache-uv"))
    shutil.rmtree(work / "cache-uv", ignore_errors=True)
    return str(tool / "bin" / "uv")


def measure(installer, uv, the_plan, work, reference):
    seconds, venv = build(installer, uv, the_plan, work)
    found = inspect(venv, uv, work, the_plan)
    shutil.rmtree(venv, ignore_errors=True)
    found["seconds"] = seconds
    if reference is not None:
        found["differs"] = ["%s %s (pip: %s)" % (name, found["versions"].get(name, "absent"),
                                                 reference["versions"].get(name, "absent"))
                            for name in sorted(set(found["versions"]) | set(reference["versions"]))
                            if found["versions"].get(name) != reference["versions"].get(name)
                            and name.lower() not in ("pip", "uv")]
    return found


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def script_body_sha256(path):
    """The sha256 of a script after its #! line (the interpreter, which each installer writes), or None for a
    file without one."""
    if os.path.getsize(path) > SCRIPT_BYTES:
        return None
    with open(path, "rb") as handle:
        content = handle.read(SCRIPT_BYTES)
    if not content.startswith(b"#!"):
        return None
    return hashlib.sha256(content.partition(b"\n")[2]).hexdigest()


def entry_points(info):
    """The console and GUI script names that a dist-info's entry_points.txt declares: the installer writes those."""
    path = info / "entry_points.txt"
    if not path.is_file():
        return set()
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str
    parser.read_string(path.read_text())
    return set(name for section in ("console_scripts", "gui_scripts") if parser.has_section(section)
               for name in parser.options(section))


def manifest(venv):
    """Every file that a RECORD in the virtualenv lists, by its path relative to the virtualenv ({"distributions"
    (each whose RECORD lists it), "sha256" (None where the file is absent), "body" (a bin/ script's sha256 after
    its #! line, or None), "entry_point"}), and {distribution: version} from each dist-info's METADATA."""
    files, versions = {}, {}
    for site in sorted(venv.glob("lib/python3*/site-packages")):
        for info in sorted(site.glob("*.dist-info")):
            metadata = email.parser.HeaderParser().parsestr((info / "METADATA").read_text(errors="replace"))
            name = stack_lock.normalized(metadata["Name"])
            versions[name] = metadata["Version"]
            scripts = entry_points(info)
            with open(info / "RECORD", newline="") as record:
                rows = [row for row in csv.reader(record) if row]
            for row in rows:
                path = os.path.normpath(os.path.join(str(site), row[0]))
                relative = os.path.relpath(path, str(venv))
                in_bin = relative.startswith("bin" + os.sep)
                generated = in_bin and os.path.basename(relative) in scripts
                if relative in files:
                    files[relative]["distributions"] = sorted(set(files[relative]["distributions"] + [name]))
                    files[relative]["entry_point"] = files[relative]["entry_point"] or generated
                    continue
                present = os.path.isfile(path)
                files[relative] = {
                    "distributions": [name],
                    "sha256": file_sha256(path) if present else None,
                    "body": script_body_sha256(path) if present and in_bin else None,
                    "entry_point": generated,
                }
    return files, versions


def kind(path, ours, theirs):
    """Which of KINDS a path that differs between two virtualenvs is (ours, theirs: its manifest entries, None
    where a virtualenv has no such file)."""
    head, name = os.path.split(path)
    if head.endswith(".dist-info") and name in INSTALLER_FILES:
        return KINDS[0]
    if path.endswith(".pyc"):
        return KINDS[1]
    if any(entry is not None and entry["entry_point"] for entry in (ours, theirs)):
        return KINDS[2]
    if ours is not None and theirs is not None and ours["body"] is not None and ours["body"] == theirs["body"]:
        return KINDS[3]
    if any(entry is not None and len(entry["distributions"]) > 1 for entry in (ours, theirs)):
        return KINDS[4]
    return KINDS[5]


def compare_files(reference, other):
    """The paths whose files differ between two manifests, sorted: [(path, kind, how)], how being "content", or
    "only in the reference" / "only in the other" for a file that one RECORD lists and the other does not."""
    differences = []
    for path in sorted(set(reference) | set(other)):
        ours, theirs = reference.get(path), other.get(path)
        if ours is None:
            how = "only in the other"
        elif theirs is None:
            how = "only in the reference"
        elif ours["sha256"] != theirs["sha256"]:
            how = "content"
        else:
            continue
        differences.append((path, kind(path, ours, theirs), how))
    return differences


def shared_files(files):
    """[(path, [distribution, ...])] of each file of a manifest that more than one distribution's RECORD lists."""
    return sorted((path, found["distributions"]) for path, found in files.items() if len(found["distributions"]) > 1)


def count_kinds(differences):
    """{kind: count} of compare_files' differences, every kind present, in KINDS' order."""
    counts = dict((each, 0) for each in KINDS)
    for difference in differences:
        counts[difference[1]] += 1
    return counts


def wheelhouse_problems(folder, wheels):
    """What makes a downloaded wheelhouse other than exactly the lock's wheels (lock.wheels_for's list), each with
    the lock's sha256."""
    expected = dict((wheel["wheel"], wheel["sha256"]) for wheel in wheels)
    found = sorted(os.listdir(str(folder)))
    problems = ["%s is not one of the lock's wheels" % name for name in found if name not in expected]
    problems += ["%s is missing" % name for name in sorted(expected) if name not in found]
    problems += ["%s has sha256 %s, the lock says %s" % (name, digest, expected[name]) for name, digest in
                 ((name, file_sha256(Path(folder) / name)) for name in found if name in expected)
                 if digest != expected[name]]
    return problems


def lock_plan(work, name, offline):
    """The role's plan for the locked profile name, its lock read and checked as the stack role does."""
    profiles = yaml.safe_load((CHECKOUT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
    stack = stack_profile.resolve(name, profiles)
    if stack["python"]["lock"] is None:
        sys.exit("stack profile %s has no lock (python.lock); name a locked profile" % name)
    path = CHECKOUT / "roles" / "stack" / "files" / "locks" / stack["python"]["lock"]
    try:
        lock = stack_lock.read(path.read_text() if path.is_file() else None, str(path), stack, profile_versions(stack))
    except stack_lock.LockError as exc:
        sys.exit(str(exc))
    return plan(work, offline, stack, lock)


def timed(argv, env):
    """Run argv; (wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    run(argv, env)
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def measure_locked(installer, uv, the_plan, work, extra=()):
    """Install the lock into a new virtualenv with an empty cache, as the role does with pip; what it holds. Every
    install goes to the same path, so that the scripts' interpreter lines can be the same."""
    venv, cache = work / "venv-locked", work / ("cache-" + installer)
    for path in (venv, cache):
        shutil.rmtree(path, ignore_errors=True)
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    constraints = venv / "ml-stack-constraints.txt"
    constraints.write_text(the_plan["constraints"])
    requirements = Path(the_plan["files"]["requirements"])
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text(the_plan["requirements"])
    argv = installer_argv(installer, uv, venv, str(constraints), the_plan["install"]["lock"]) + list(extra)
    seconds, cpu = timed(argv, environment(cache))
    shutil.rmtree(cache, ignore_errors=True)
    files, versions = manifest(venv)
    # The lock's files only: pip and setuptools, which `python -m venv` bootstraps, are each virtualenv's own.
    locked = set(wheel["distribution"] for wheel in the_plan["lock"]["wheels"])
    files = dict((path, found) for path, found in files.items() if set(found["distributions"]) & locked)
    python = str(venv / "bin" / "python")
    env = environment(work / "cache-inspect")
    check = run([python, "-m", "pip", "check"], env, check=False)
    deliberate, unexpected = classify_pip_check(check.stdout, the_plan["versions"])
    size = int(run(["du", "-sm", str(venv)], env).stdout.split()[0])
    shutil.rmtree(venv, ignore_errors=True)
    return {"seconds": seconds, "cpu": cpu, "files": files, "versions": versions, "size_mb": size,
            "pip_check": not unexpected, "pip_check_output": check.stdout.strip(), "pip_check_deliberate": len(deliberate),
            "against_lock": stack_lock.describe(stack_lock.compare(versions, the_plan["lock"]["wheels"]))}


def download_locked_wheelhouse(the_plan, work):
    """The role's controller download of a locked profile (one pip download of the lock's wheels by their hashes),
    checked to hold exactly the lock's files; its seconds."""
    download = the_plan["download"]
    shutil.rmtree(download["partial"], ignore_errors=True)
    Path(download["requirements"]["path"]).parent.mkdir(parents=True, exist_ok=True)
    Path(download["requirements"]["path"]).write_text(download["requirements"]["content"])
    cache = work / "cache-download"
    started = time.monotonic()
    for step in download["steps"]:
        run([sys.executable, "-m", "pip"] + step, environment(cache))
    seconds = time.monotonic() - started
    shutil.rmtree(cache, ignore_errors=True)
    problems = wheelhouse_problems(download["partial"], the_plan["lock"]["wheels"])
    if problems:
        sys.exit("the wheelhouse is not the lock's wheels:\n- " + "\n- ".join(problems))
    shutil.rmtree(work / "wheelhouse", ignore_errors=True)
    os.rename(download["partial"], work / "wheelhouse")
    return seconds


def measure_lock(name, work):
    uv = install_uv(work)
    online, offline = lock_plan(work, name, False), lock_plan(work, name, True)
    results = {}
    results["pip, index"] = measure_locked("pip", uv, online, work)
    results["uv, index"] = measure_locked("uv", uv, online, work)
    download_seconds = download_locked_wheelhouse(offline, work)
    wheelhouse_mb = int(run(["du", "-sm", str(work / "wheelhouse")], environment(work / "cache-du")).stdout.split()[0])
    results["pip, wheelhouse"] = measure_locked("pip", uv, offline, work)
    results["uv, wheelhouse"] = measure_locked("uv", uv, offline, work)
    results["uv, wheelhouse, byte code"] = measure_locked("uv", uv, offline, work, ["--compile-bytecode"])
    return name, online, results, download_seconds, wheelhouse_mb


def show(differences):
    for path, what, how in differences:
        print("    %-24s %-21s %s" % (what, how, path))


def report_lock(name, the_plan, results, download_seconds, wheelhouse_mb):
    reference = results["pip, index"]
    locked = the_plan["lock"]
    print("The lock of stack profile %s: %d wheels for %s (%d MB), one install each into a new virtualenv with an "
          "empty cache, on this machine (%d cores); uv %s"
          % (name, len(locked["wheels"]), locked["environment"], wheelhouse_mb, os.cpu_count(), UV_VERSION))
    columns = ("", "wall s", "vs pip", "CPU s", "vs pip", "the lock", "pip check", "MB")
    print("%-26s %8s %7s %8s %7s %9s %10s %8s" % columns)
    for label, found in results.items():
        base = results["pip, " + label.split(", ")[1]]
        print("%-26s %8.1f %6.2fx %8.1f %6.2fx %9s %10s %8d" % (
            label, found["seconds"], found["seconds"] / base["seconds"], found["cpu"], found["cpu"] / base["cpu"],
            "exact" if not found["against_lock"] else "DIFFERS", "ok" if found["pip_check"] else "FAILS",
            found["size_mb"]))
    print("wheelhouse download (the role's pip download of the lock's wheels, by their hashes): %.1f s"
          % download_seconds)
    for label, found in results.items():
        for line in found["against_lock"]:
            print("%s against the lock: %s" % (label, line))
        if not found["pip_check"]:
            print("pip check, %s: %s" % (label, found["pip_check_output"]))
    print("\nEvery file that the RECORD of each of the lock's distributions lists, by sha256, against pip from the index "
          "(%d files there):" % len(reference["files"]))
    for label, found in results.items():
        shared = shared_files(found["files"])
        if shared:
            print("%s: files that several wheels ship (the last installed one's is there): %s"
                  % (label, "; ".join("%s (%s)" % (path, ", ".join(names)) for path, names in shared)))
    for label, found in list(results.items())[1:]:
        differences = compare_files(reference["files"], found["files"])
        same_versions = found["versions"] == reference["versions"]
        print("%s: distributions and versions %s; byte-identical: %s" % (
            label, "the same" if same_versions else "DIFFER", "yes" if not differences else "no, %d paths differ"
            % len(differences)))
        if not same_versions:
            print("  versions: %s" % ", ".join("%s %s (pip: %s)" % (each, found["versions"].get(each, "absent"),
                                                                    reference["versions"].get(each, "absent"))
                                               for each in sorted(set(found["versions"]) | set(reference["versions"]))
                                               if found["versions"].get(each) != reference["versions"].get(each)))
        if not differences:
            continue
        print("  by kind: %s" % ", ".join("%s %d" % item for item in count_kinds(differences).items()))
        print("  the first 20:")
        show(differences[:20])
        for each in KINDS:
            of_kind = [difference for difference in differences if difference[1] == each]
            if of_kind and of_kind[:3] != [difference for difference in differences[:20] if difference[1] == each][:3]:
                print("  the first of %s:" % each)
                show(of_kind[:20 if each == KINDS[-1] else 3])
    print(json.dumps(dict((label, dict((key, value) for key, value in found.items() if key not in ("files", "versions")))
                          for label, found in results.items()), sort_keys=True))


def measure_profile(work):
    uv = install_uv(work)
    online, offline = plan(work, False, profile()), plan(work, True, profile())
    results = {}
    results["pip, index"] = measure("pip", uv, online, work, None)
    reference = results["pip, index"]
    results["uv, index"] = measure("uv", uv, online, work, reference)
    download_seconds = download_wheelhouse(offline, work)
    results["pip, wheelhouse"] = measure("pip", uv, offline, work, reference)
    results["uv, wheelhouse"] = measure("uv", uv, offline, work, reference)
    return results, download_seconds, reference


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--work", default=None, help="where the virtualenvs, caches and the wheelhouse go")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (the wheelhouse) afterwards")
    parser.add_argument("--lock", metavar="PROFILE", default=None,
                        help="install the lock of this stack profile instead of building cu128 (e.g. sglang-0.5.17-cu130)")
    options = parser.parse_args()
    work = Path(options.work or tempfile.mkdtemp(prefix="blackwell-bench-installer-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        found = measure_lock(options.lock, work) if options.lock else measure_profile(work)
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    (report_lock if options.lock else report)(*found)


def report(results, download_seconds, reference):
    print("The real cu128 stack (%d distributions, torch %s, CUDA %s), one build each into a new virtualenv with an "
          "empty cache, on this machine (%d cores); uv %s" % (len(reference["versions"]), reference["torch"][0],
                                                              reference["torch"][1], os.cpu_count(), UV_VERSION))
    columns = ("", "seconds", "vs pip", "same", "pip check", "torch", "later pip", "later uv")
    print("%-18s %9s %8s %9s %10s %17s %10s %12s" % columns)
    for name, found in results.items():
        base = results["pip, " + name.split(", ")[1]]["seconds"]
        if "differs" not in found:
            same = "reference"
        else:
            same = "NO (%d)" % len(found["differs"]) if found["differs"] else "yes"
        print("%-18s %9.1f %7.2fx %9s %10s %17s %10s %12s" % (
            name, found["seconds"], found["seconds"] / base, same, "ok" if found["pip_check"] else "FAILS",
            "+".join(found["torch"]), "holds" if found["pip_guard"] else "BROKEN",
            "stopped" if found["uv_guard"] else "NOT stopped"))
    print("wheelhouse download (the role's pip download steps): %.1f s" % download_seconds)
    print("virtualenv size: %s MB" % ", ".join("%s %d" % (name, found["size_mb"]) for name, found in results.items()))
    for name, found in results.items():
        if found.get("differs"):
            print("%s resolves other versions than pip from the index: %s" % (name, ", ".join(found["differs"])))
        if not found["pip_check"]:
            print("pip check, %s: %s" % (name, found["pip_check_output"]))
    print(json.dumps(dict((name, dict((key, value) for key, value in found.items() if key != "versions"))
                          for name, found in results.items()), sort_keys=True))


if __name__ == "__main__":
    main()
