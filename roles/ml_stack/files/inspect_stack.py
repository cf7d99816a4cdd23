# Run by the ml_stack role with the virtualenv's Python; prints one JSON object.
# Argument: JSON {"distributions": [...], "marker": path, "imports": [...], "every_distribution": bool, and
# "adopted": path where the virtualenv adopts a tree's torch}. Reports each distribution's version and the URL it
# was installed from (direct_url.json, the only trace that tells two builds of one version apart), and the
# completion marker. With every_distribution (a locked profile): every distribution installed, by PEP 503 name,
# under "installed"; with adopted, those of that site-packages (which the virtualenv's .pth file puts on its
# path) apart, under "adopted", and not under "installed". With imports: imports each module in a Python of its
# own (so that one failure or crash does not hide the others) and runs pip check.
import importlib.metadata
import json
import os
import re
import stat
import subprocess
import sys

IMPORT_TIMEOUT_S = 600
# Run by a Python of its own: prints the module's version and, for torch, the CUDA release it was built for; or
# the whole exception text (sgl_kernel lists every library it failed to load, the first being the cause).
IMPORT = """
import importlib, json
try:
    module = importlib.import_module(%r)
except Exception as exc:
    print(json.dumps({"ok": False, "error": "%%s: %%s" %% (type(exc).__name__, str(exc).strip())}))
else:
    print(json.dumps({"ok": True, "version": str(getattr(module, "__version__", None)),
                      "cuda": getattr(getattr(module, "version", None), "cuda", None)}))
"""


def every_installed(entries):
    """{normalized name: version} of every distribution in entries of the interpreter's path, the first of a name
    as imports find it."""
    found = {}
    for distribution in importlib.metadata.distributions(path=entries):
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), distribution.version)
    return found


def path_entries(adopted):
    """(the interpreter's path but the adopted site-packages, the adopted one where the path holds it). Not the
    current directory, which -c puts first on the path: what lies there is not the virtualenv's."""
    own, seen = [], []
    for entry in sys.path:
        if entry and adopted and os.path.realpath(entry) == adopted:
            seen.append(entry)
        elif entry:
            own.append(entry)
    return own, seen[:1]


def installed(name):
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None, None
    direct_url = distribution.read_text("direct_url.json")
    return distribution.version, json.loads(direct_url).get("url") if direct_url else None


# The marker is a few hundred bytes. It is opened without blocking and without following a link, and read no
# further than this: a FIFO or a huge file there must not hang or exhaust the check (this runs in the
# virtualenv's interpreter, which cannot import the collection's own reader).
MARKER_LIMIT = 1 << 16


def marker(path):
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        data = os.read(descriptor, MARKER_LIMIT + 1)
    finally:
        os.close(descriptor)
    try:
        return json.loads(data.decode("utf-8")) if len(data) <= MARKER_LIMIT else None
    except ValueError:
        return None


def imported(module):
    try:
        run = subprocess.run([sys.executable, "-B", "-c", IMPORT % module], capture_output=True, text=True,
                             timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "import %s took longer than %d s" % (module, IMPORT_TIMEOUT_S)}
    if run.returncode == 0 and run.stdout.strip():
        return json.loads(run.stdout.strip().splitlines()[-1])
    if run.returncode < 0:
        return {"ok": False, "error": "the interpreter died of signal %d while importing %s" % (-run.returncode, module)}
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    return {"ok": False, "error": lines[-1] if lines else "exit status %d and no error text" % run.returncode}


def main():
    request = json.loads(sys.argv[1])
    report = {"versions": {}, "direct_urls": {}, "marker": marker(request["marker"])}
    for name in request["distributions"]:
        report["versions"][name], report["direct_urls"][name] = installed(name)
    if request.get("every_distribution"):
        own, adopted = path_entries(request.get("adopted"))
        report["installed"] = every_installed(own)
        if request.get("adopted"):
            report["adopted"] = every_installed(adopted)
    if request["imports"]:
        report["modules"] = dict((module, imported(module)) for module in request["imports"])
        check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False,
                               env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        # Exit status 1 means conflicts, which stdout lists; anything else is pip failing to check.
        report["pip_check"] = check.stdout if check.returncode in (0, 1) else "pip check failed: %s" % check.stderr.strip()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
