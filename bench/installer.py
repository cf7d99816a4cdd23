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
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (  # noqa: E402
    PIP_OPTIONS,
    build_plan,
    classify_pip_check,
    dependencies,
)

UV_VERSION = "0.13.9"
INDEX = "https://pypi.org/simple"
PYTHON = "/usr/bin/python3"
REQUIREMENTS_OF = CHECKOUT / "roles" / "ml_stack" / "files" / "requirements_of.py"
# An older torch than the profile's: what a later install in the virtualenv must not be allowed to put there.
OTHER_TORCH = "torch==2.8.0"
# A build of the real stack takes minutes; an installer that hangs is stopped.
STEP_TIMEOUT_S = 3600


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


def plan(work, offline):
    settings = dict(venv_path=str(work / "ml-env"), venv_owner=None, python=PYTHON, index_url=INDEX, index_mirrors={},
                    pip_environment={}, offline=offline, wheelhouse_path=str(work / "wheelhouse"),
                    wheelhouse_controller_path=str(work / "controller") if offline else None, system_packages=[])
    host = {"python": host_python(), "owner": True, "venv_path": {}, "parent_exists": True, "dpkg": ""}
    result = build_plan(settings, profile(), host)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--work", default=None, help="where the virtualenvs, caches and the wheelhouse go")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (the wheelhouse) afterwards")
    options = parser.parse_args()
    work = Path(options.work or tempfile.mkdtemp(prefix="blackwell-bench-installer-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        uv = install_uv(work)
        online, offline = plan(work, offline=False), plan(work, offline=True)
        results = {}
        results["pip, index"] = measure("pip", uv, online, work, None)
        reference = results["pip, index"]
        results["uv, index"] = measure("uv", uv, online, work, reference)
        download_seconds = download_wheelhouse(offline, work)
        results["pip, wheelhouse"] = measure("pip", uv, offline, work, reference)
        results["uv, wheelhouse"] = measure("uv", uv, offline, work, reference)
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(results, download_seconds, reference)


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
