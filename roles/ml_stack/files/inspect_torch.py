# Run by the ml_stack role as the service user, with the interpreter of the tree ml_stack_torch_from names (a
# virtualenv's own, or ml_stack_python for a site-packages directory), as `python -I -S -B -c <this> <path>`:
# without site, nothing of the tree is on sys.path and no .pth file of it runs, so the first code of the tree that
# runs is `import torch`, in a Python of its own. Prints one JSON object: the interpreter, the tree's site-packages
# and its distributions (read from their metadata, no code run), and what importing torch there says. With a second
# argument, --metadata-only (the converged check's and preflight's), torch is not imported: the tree's metadata only.
import importlib.metadata
import json
import os
import platform
import site
import subprocess
import sys

IMPORT_TIMEOUT_S = 600
# Bounds of what is printed: the distributions of one tree, an error's text.
DISTRIBUTIONS_LIMIT = 5000
TEXT_LIMIT = 2000
# Run by a Python of its own with the site-packages alone appended to its path, as the profile's virtualenv appends
# it: torch's version, the CUDA it was built for, where it was imported from, and the cuDNN and NCCL it loads, which
# load without a GPU.
IMPORT = """
import json, sys
sys.path.append(sys.argv[1])
report = {"ok": False}
try:
    import torch
except Exception as exc:
    report["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip())
else:
    report.update(ok=True, version=str(torch.__version__), cuda=torch.version.cuda, file=torch.__file__,
                  extension=hasattr(torch, "_C"))
    try:
        report["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        report["cudnn_error"] = "%s: %s" % (type(exc).__name__, str(exc).strip())
    try:
        report["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    except Exception as exc:
        report["nccl_error"] = "%s: %s" % (type(exc).__name__, str(exc).strip())
print(json.dumps(report))
"""


def site_packages(named):
    """(the site-packages directory named stands for, the candidates): for a virtualenv (a pyvenv.cfg there) the
    first of its site-packages that exists, as site would add it; else named itself when it is one of the
    interpreter's own. Without site, sys.prefix is the base interpreter's even in a virtualenv, and Debian's
    site.getsitepackages() names dist-packages for any prefix, where a virtualenv has site-packages: the
    virtualenv's are the venv module's layout, by its path."""
    is_virtualenv = os.path.isfile(os.path.join(named, "pyvenv.cfg"))
    if is_virtualenv:
        series = "python%d.%d" % sys.version_info[:2]
        candidates = []
        for lib in ("lib", "lib64"):
            path = os.path.realpath(os.path.join(named, lib, series, "site-packages"))
            candidates += [] if path in candidates else [path]
    else:
        candidates = [os.path.realpath(path) for path in site.getsitepackages()]
    if is_virtualenv:
        return next((path for path in candidates if os.path.isdir(path)), None), candidates
    return (named if named in candidates else None), candidates


def distributions(directory):
    """{name: version} of the distributions installed in directory, at most DISTRIBUTIONS_LIMIT, and whether that
    is all of them."""
    found = {}
    for distribution in importlib.metadata.distributions(path=[directory]):
        if len(found) >= DISTRIBUTIONS_LIMIT:
            return found, False
        name = distribution.metadata["Name"]
        if name:
            found[name] = distribution.version
    return found, True


def imported(directory):
    try:
        run = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", IMPORT, directory], capture_output=True,
                             text=True, timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "import torch took longer than %d s" % IMPORT_TIMEOUT_S}
    lines = run.stdout.strip().splitlines()
    if run.returncode == 0 and lines:
        report = json.loads(lines[-1])
        return dict((key, value[:TEXT_LIMIT] if isinstance(value, str) else value) for key, value in report.items())
    if run.returncode < 0:
        return {"ok": False, "error": "the interpreter died of signal %d while importing torch" % -run.returncode}
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    return {"ok": False, "error": (errors[-1] if errors else "exit status %d and no error text" % run.returncode)[
        :TEXT_LIMIT]}


def main():
    named = os.path.realpath(sys.argv[1])
    metadata_only = sys.argv[2:] == ["--metadata-only"]
    directory, candidates = site_packages(named)
    report = {"executable": sys.executable, "python": platform.python_version(), "path": named,
              "candidates": candidates, "site_packages": directory}
    if directory is not None:
        report["distributions"], report["distributions_complete"] = distributions(directory)
        torch = [version for name, version in report["distributions"].items() if name.lower() == "torch"]
        report["torch_distribution"] = torch[0] if torch else None
        report["import"] = imported(directory) if torch and not metadata_only else None
    print(json.dumps(report))


if __name__ == "__main__":
    main()
