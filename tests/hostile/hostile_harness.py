"""The hostile-user suite's machinery: the user, its trees, module runs in a private namespace, the verdicts.

A case builds a tree under a temporary directory of root's: the user's part (a home with a virtualenv laid out
as ml_stack lays it out, a log directory, whatever the case needs) belongs to the unprivileged user
HOSTILE_USER, root's part (module arguments, state directories, reports) to root. The user then does its worst
there, and the module runs as root, for real, without the Ansible controller: its file is executed with its
arguments in a JSON file, as AnsiballZ does, inside a private mount namespace where every system directory is an
overlay (hostile_namespace.py), bounded in wall time and address space. A case passes when the module refuses
(a failed result whose message names the path or variable) or stays bounded (returns within its bounds without
reading the hostile thing whole), writes nothing outside the tree, runs nothing of the user's as root and leaves
nothing running.

Environment:
  HOSTILE_COLLECTION   the collection to run: its directory (.../ansible_collections/blackwell/gpu_node) or the
                       directory that holds ansible_collections; default: this checkout's .build/collections.
  HOSTILE_REPORT_ONLY  1: every case records its outcome in the table instead of asserting (for a BEFORE table
                       of an older commit).
  HOSTILE_TABLE        where the table is written; default: .build/hostile/table.txt of this checkout.
"""
import contextlib
import itertools
import json
import os
import platform
import pwd
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from process_tree import kill_tree, run_bounded  # noqa: E402

CHECKOUT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("hostile_namespace.py")
HOSTILE_USER = "blackwell-hostile"
# The suite's interpreter has ansible-core; the hostile virtualenvs are made from the system's Python, as the
# ml_stack role makes them (ml_stack_python).
PYTHON = sys.executable
SYSTEM_PYTHON = "/usr/bin/python3"
PYTHON_SERIES = "python%d.%d" % tuple(int(part) for part in subprocess.run(
    [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
    capture_output=True, text=True, check=True).stdout.split())
VENV_NAME = "ml-env.cu130-1a2b3c4d"
GIB = 1 << 30
SPARSE = 8 * GIB
# A module run: its wall time, its address space (RLIMIT_AS), and the peak RSS above which it read too much.
WALL_BOUND_S = 10
MEMORY_BOUND = 2 * GIB
RSS_BOUND_MIB = 256
# renameat2(2): RENAME_EXCHANGE swaps two names in one step.
RENAMEAT2 = {"x86_64": 316, "aarch64": 276}
SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(path) for path in sys.argv[1:3])
while True:
    libc.syscall(%d, -100, a, -100, b, 2)
    os.sched_yield()
""" % RENAMEAT2.get(platform.machine(), 316)
# Records who ran the virtualenv's code: put into site-packages as a .pth file, and as a wrapper at bin/python
# (which also catches an interpreter started with -S or -I, where .pth files do not run).
PROBE_PTH = "import os, sys; open(%r, 'a').write('pth %%d %%d %%r\\n' %% (os.getuid(), os.geteuid(), sys.argv[:3]))\n"
PROBE_WRAPPER = """#!/bin/bash
echo "wrapper $(id -u) $(id -u -r) $1 ${2:0:40}" >> %s
exec -a "$0" %s "$@"
"""


def _shadow_lines():
    """The lines of /etc/shadow, which no result may show (a link to it is planted in several cases)."""
    try:
        with open("/etc/shadow") as handle:
            return [line.strip() for line in handle if len(line.strip()) > 12]
    except OSError:
        return []


SHADOW_LINES = _shadow_lines()
# A line in /etc/shadow's format (name:hash:changed:min:max:warn:inactive:expire:), wherever a result shows one.
SHADOW_FORMAT = re.compile(r"\b[a-z_][a-z0-9_.-]*\$?:[^:\s]*:\d*:\d*:\d*:\d*:\d*:\d*:\S*")


def redacted(text):
    """text with every line of /etc/shadow it shows replaced: the suite's reports never carry them."""
    for line in SHADOW_LINES:
        text = text.replace(line, "<a line of /etc/shadow>")
    return SHADOW_FORMAT.sub("<a line of /etc/shadow>", text)


def _environment_path(name, default):
    value = os.environ.get(name)
    return Path(value) if value else default


def collections_root():
    """The directory that holds ansible_collections/blackwell/gpu_node for this run."""
    given = _environment_path("HOSTILE_COLLECTION", CHECKOUT / ".build" / "collections")
    if (given / "ansible_collections").is_dir():
        return given
    if given.parts[-3:] == ("ansible_collections", "blackwell", "gpu_node"):
        return given.parents[2]
    raise RuntimeError("HOSTILE_COLLECTION=%s holds no ansible_collections/blackwell/gpu_node" % given)


REPORT_ONLY = os.environ.get("HOSTILE_REPORT_ONLY", "") not in ("", "0")
TABLE = _environment_path("HOSTILE_TABLE", CHECKOUT / ".build" / "hostile" / "table.txt")


class Collection(object):
    """The collection under test, and what its modules offer (the baseline had other names and options)."""

    def __init__(self, root):
        self.root = root
        self.path = root / "ansible_collections" / "blackwell" / "gpu_node"
        if not (self.path / "plugins" / "modules").is_dir():
            raise RuntimeError("%s is not the collection blackwell.gpu_node" % self.path)

    def module_file(self, name):
        return self.path / "plugins" / "modules" / (name + ".py")

    def has_module(self, name):
        return self.module_file(name).is_file()

    def has_option(self, module, option):
        """Whether the module's argument_spec names option."""
        source = self.module_file(module).read_text() if self.has_module(module) else ""
        return re.search(r"\b%s=dict\(" % re.escape(option), source) is not None

    def role_file(self, role, relative):
        return (self.path / "roles" / role / relative).read_text()

    def python(self, code, *args):
        """What code prints when run by the suite's interpreter with this collection importable (JSON)."""
        completed = subprocess.run([PYTHON, "-c", code] + list(args), capture_output=True, text=True, check=True,
                                   env=dict(os.environ, PYTHONPATH=str(self.root)), timeout=60)
        return json.loads(completed.stdout)


class User(object):
    def __init__(self, name):
        entry = pwd.getpwnam(name)
        self.name, self.uid, self.gid = name, entry.pw_uid, entry.pw_gid


def ensure_user(name=HOSTILE_USER):
    """The unprivileged user, created (a system account with a home) when missing; an existing one is kept."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    return User(name)


class Run(object):
    """One module (or playbook) run in the namespace: its result and what it did."""

    def __init__(self, report, probes):
        self.rc = report["rc"]
        self.timed_out = report["timed_out"]
        self.wall_s = report["wall_s"]
        self.peak_mib = report["maxrss_kib"] / 1024.0
        self.stdout, self.stderr = report["stdout"], report["stderr"]
        self.left_running = report["left_running"]
        self.writes = ["%s (%s)" % (root.rstrip("/") + entry["path"], entry["kind"])
                       for root, found in sorted(report["writes"].items()) for entry in found]
        self.probes = probes
        try:
            self.result = json.loads(self.stdout[self.stdout.index("{"):]) if "{" in self.stdout else None
        except ValueError:
            self.result = None

    @property
    def failed(self):
        return bool(self.result and self.result.get("failed"))

    @property
    def msg(self):
        return (self.result or {}).get("msg") or ""

    def root_probes(self):
        """The probe lines that say the virtualenv's code ran as root (uid or euid 0)."""
        return [line for line in self.probes if "0" in line.split()[1:3]]


class Case(object):
    """One case's tree and its runs; records one row of the table."""

    counter = itertools.count()

    def __init__(self, base, user, collection, table, module, name):
        self.user, self.collection, self.table = user, collection, table
        self.module_name, self.name = module, name
        self.dir = base / ("%03d-%s-%s" % (next(self.counter), module, re.sub(r"[^A-Za-z0-9_.-]", "_", name)))
        self.dir.mkdir(mode=0o755)
        self.home = self.dir / "home"
        self.home.mkdir(mode=0o755)
        self.chown(self.home)
        self.private = self.dir / "root"
        self.private.mkdir(mode=0o700)
        self.probe = self.home / "uid-probe.log"
        self.probe.touch()
        self.chown(self.probe)
        self.runs = []
        self.problems = []
        self.swappers = []
        self.recorded = False
        self.expectations = []

    # The user's doings. Made as root and handed to the user: what matters to root is whose they are.
    def chown(self, path):
        os.lchown(str(path), self.user.uid, self.user.gid)
        return path

    def as_user(self, argv, **kwargs):
        return subprocess.run(argv, user=self.user.uid, group=self.user.gid, extra_groups=[], check=True,
                              capture_output=True, timeout=60, cwd=str(self.home), **kwargs)

    def user_dir(self, relative, mode=0o755):
        path = self.home / relative
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        os.chmod(str(path), mode)
        return self.chown(path)

    def root_dir(self, relative, mode=0o755):
        path = self.private / relative
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        os.chmod(str(path), mode)
        return path

    def replace(self, path, kind, target=None, size=SPARSE):
        """Put the user's kind of thing at path: a fifo, a link to target, a sparse file of size, a file."""
        path = Path(path)
        if path.is_symlink() or path.is_file() or path.is_fifo():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(str(path))
        if kind == "fifo":
            os.mkfifo(str(path))
        elif kind == "link":
            os.symlink(str(target), str(path))
        elif kind == "sparse":
            with open(str(path), "wb") as handle:
                handle.truncate(size)
        else:
            path.write_text(target or "")
        return self.chown(path)

    def make_venv(self, name=VENV_NAME, link="ml-env", marker=None, probe=True, parent=None, owner=True):
        """A virtualenv of the user's (python3 -m venv --without-pip), laid out as ml_stack's: the directory
        name, beside it the stable link, a marker ml-stack.json; the uid probes in place."""
        parent = Path(parent) if parent else self.home
        venv = parent / name
        command = [SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)]
        if owner:
            self.as_user(command)
        else:
            subprocess.run(command, check=True, capture_output=True, timeout=60)
        site = venv / "lib" / PYTHON_SERIES / "site-packages"
        if marker is not False:
            (venv / "ml-stack.json").write_text(json.dumps(marker or {"profile": "cu130"}) + "\n")
            if owner:
                self.chown(venv / "ml-stack.json")
        if probe:
            self.add_probe(venv)
        if link:
            os.symlink(name, str(parent / link))
            if owner:
                self.chown(parent / link)
        return Venv(self, venv, site, parent / link if link else venv)

    def add_probe(self, venv):
        site = venv / "lib" / PYTHON_SERIES / "site-packages"
        owner = os.lstat(str(venv)).st_uid
        (site / "zz-hostile-uid-probe.pth").write_text(PROBE_PTH % str(self.probe))
        python = venv / "bin" / "python"
        python.unlink()
        python.write_text(PROBE_WRAPPER % (self.probe, SYSTEM_PYTHON))
        python.chmod(0o755)
        if owner:
            self.chown(site / "zz-hostile-uid-probe.pth")
            self.chown(python)

    @contextlib.contextmanager
    def swapping(self, first, second):
        """A process of the user's that swaps the two names in one step (renameat2 RENAME_EXCHANGE), without
        pause, for as long as the block runs; killed afterwards."""
        script = self.home / ("swap-%d.py" % len(self.swappers))
        script.write_text(SWAPPER)
        self.chown(script)
        process = subprocess.Popen([SYSTEM_PYTHON, str(script), str(first), str(second)], user=self.user.uid,
                                   group=self.user.gid, extra_groups=[], start_new_session=True, cwd=str(self.home),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.swappers.append(process)
        try:
            yield process
        finally:
            kill_tree(process.pid)
            process.wait()

    # Root's runs.
    def module(self, name, args, check_mode=False, diff=False, timeout=WALL_BOUND_S, memory=MEMORY_BOUND):
        """Run the module file with args, as AnsiballZ would, in the namespace; the Run."""
        arguments = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        args_file = self.private / ("args-%d.json" % len(self.runs))
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": arguments}))
        return self._run([PYTHON, str(self.collection.module_file(name)), str(args_file)], timeout, memory,
                         environment={"PYTHONPATH": str(self.collection.root)})

    def playbook(self, text, extra_vars=None, timeout=120, memory=4 * GIB):
        """ansible-playbook -c local on localhost with the play text, in the namespace; the Run (its result is
        the json callback's report)."""
        playbook = self.private / ("play-%d.yml" % len(self.runs))
        playbook.write_text(text)
        ansible_home = self.root_dir("ansible-home", 0o700)
        argv = [str(Path(PYTHON).with_name("ansible-playbook")), "-c", "local", "-i", "localhost,", "-e",
                "ansible_python_interpreter=" + PYTHON]
        if extra_vars:
            argv += ["-e", json.dumps(extra_vars)]
        environment = {
            "ANSIBLE_COLLECTIONS_PATH": str(self.collection.root), "ANSIBLE_STDOUT_CALLBACK": "json",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_HOME": str(ansible_home),
            "ANSIBLE_LOCAL_TEMP": str(ansible_home / "tmp"), "ANSIBLE_REMOTE_TEMP": str(ansible_home / "remote"),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0",
        }
        return self._run(argv + [str(playbook)], timeout, memory, environment)

    def _run(self, argv, timeout, memory, environment):
        index = len(self.runs)
        state = self.root_dir("namespace-%d" % index, 0o700)
        report = self.private / ("report-%d.json" % index)
        environ = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                   "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        environ.update(environment)
        before = self.probe.read_text().splitlines()
        try:
            run_bounded(["unshare", "-m", "--propagation", "private", PYTHON, str(HELPER), str(state), str(report),
                         str(timeout), str(memory), "--"] + argv, timeout=timeout + 30, env=environ, cwd="/")
        except subprocess.TimeoutExpired:
            raise AssertionError("the namespace of %s did not end within %ss" % (argv, timeout + 30))
        if not report.exists():
            raise AssertionError("the namespace helper wrote no report for %s" % argv)
        run = Run(json.loads(report.read_text()), self.probe.read_text().splitlines()[len(before):])
        self.runs.append(run)
        return run

    # Verdicts.
    def ran_as_owner(self, run, required=False):
        """Problems unless every probe line of run is of the user's uid and, when required, there is one (the
        virtualenv's code ran)."""
        if required and not run.probes:
            return ["the virtualenv's code never ran (no probe line)"]
        strangers = [line for line in run.probes if line.split()[1:3] != [str(self.user.uid)] * 2]
        return ["the virtualenv's code ran as another uid: %s" % strangers[0]] if strangers else []

    def check(self, run, expect, needle=None, allowed_writes=(), problems=(), setup=False):
        """Judge one run: expect is `refused` (a failed result whose message holds needle), `bounded` (returned
        within the bounds, failed or not) or `ok` (returned and did not fail). Whatever the expectation: no
        timeout, a JSON result, a peak RSS under RSS_BOUND_MIB, no write outside the tree but those matching an
        entry of allowed_writes (regular expressions), no probe line of uid 0, nothing left running. problems:
        the case's own findings about the result. setup: a run that prepares the case (its problems count, its
        expectation does not name the outcome). Returns this run's problems."""
        # The case's own findings are about the result: with none, what matters is that there was none.
        found = list(problems) if run.result is not None and not run.timed_out else []
        if not setup:
            self.expectations.append((expect, run))
        if run.timed_out:
            found.append("did not return within %ss: killed" % (round(run.wall_s)))
        elif run.result is None:
            found.append("printed no result (rc %s): %s" % (run.rc, last_line(run.stderr)))
        if run.peak_mib > RSS_BOUND_MIB:
            found.append("peak RSS %.0f MiB: read more than it should" % run.peak_mib)
        for write in run.writes:
            if not any(re.match(pattern, write) for pattern in allowed_writes):
                found.append("wrote outside the tree: %s" % write)
        if any(line in run.stdout for line in SHADOW_LINES):
            found.append("its result shows a line of /etc/shadow")
        if run.root_probes():
            found.append("ran the virtualenv's code as root: %s" % run.root_probes()[0])
        for process in run.left_running:
            found.append("left running: pid %d uid %d %s" % (process["pid"], process["uid"], process["argv"][:80]))
        if run.result is not None and not run.timed_out:
            found.extend("its result holds a control character from outside at %s" % where
                         for where in control_text(run.result)[:3])
            if expect == "refused":
                if not run.failed:
                    found.append("not refused (changed=%s)" % run.result.get("changed"))
                elif needle is not None and needle not in run.msg:
                    found.append("refused without naming %s: %s" % (needle, one_line(run.msg)[:300]))
            elif expect == "ok" and run.failed:
                found.append("failed: %s" % one_line(run.msg)[:300])
        self.problems += found
        return found

    def outcome(self):
        """FAILED with any problem; else refused when a run refused as expected, ok when every run was a
        control that succeeded, bounded otherwise."""
        if self.problems:
            return "FAILED"
        if any(expect in ("refused", "bounded") and run.failed for expect, run in self.expectations):
            return "refused"
        if self.expectations and all(expect == "ok" for expect, _run in self.expectations):
            return "ok"
        return "bounded"

    def finish(self):
        """Record the row; assert, unless the suite only reports."""
        self.recorded = True
        wall = max([run.wall_s for run in self.runs] or [0])
        peak = max([run.peak_mib for run in self.runs] or [0])
        self.table.add(self.module_name, self.name, self.outcome(), wall, peak, self.problems,
                       [redacted(run.msg[:500]) for run in self.runs])
        if not REPORT_ONLY:
            shown = "\n  ".join(one_line(problem) for problem in self.problems)
            assert not self.problems, "%s %s:\n  %s" % (self.module_name, self.name, shown)

    def discard(self):
        """A run of the suite's own checks: no row."""
        self.recorded = True

    def not_applicable(self, why):
        self.recorded = True
        self.table.add(self.module_name, self.name, "n/a", None, None, [why])

    def cleanup(self):
        for process in self.swappers:
            if process.poll() is None:
                kill_tree(process.pid)
                process.wait()
        shutil.rmtree(str(self.dir), ignore_errors=True)


class Venv(object):
    def __init__(self, case, path, site, stable):
        self.case, self.path, self.site, self.stable = case, path, site, stable

    def pth(self, name, line):
        """A .pth file of the user's in the virtualenv's site-packages."""
        path = self.site / name
        path.write_text(line if line.endswith("\n") else line + "\n")
        self.case.chown(path)
        return path


# What no result may show of text from outside: terminal sequences start with ESC (or the C1 CSI), and any other
# control character but the line end and the tab acts in the terminal, log viewer or browser that shows it.
RESULT_CONTROL = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def control_text(value, path="result"):
    """Where value (a parsed JSON result) holds a control character, as 'path: U+XXXX' lines: the walk every run's
    result gets, whatever its module, so that text a module took from outside reaches no result uncleaned."""
    if isinstance(value, dict):
        return [found for key, item in sorted(value.items(), key=lambda pair: str(pair[0]))
                for found in control_text(key, "%s key" % path) + control_text(item, "%s.%s" % (path, key))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in control_text(item, "%s[%d]" % (path, index))]
    if isinstance(value, str):
        found = RESULT_CONTROL.search(value)
        return ["%s: U+%04X" % (path, ord(found.group()))] if found else []
    return []


def strings(value):
    """Every text of value (a parsed JSON result), at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (dict, list)):
        for item in (value.values() if isinstance(value, dict) else value):
            yield from strings(item)


def one_line(text):
    return " ".join(redacted(text or "").split())


def last_line(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


class Table(object):
    """module x case: outcome, wall time, peak memory; written to TABLE and printed at the end."""

    def __init__(self, collection):
        self.collection = collection
        self.rows = []
        self.messages = []

    def add(self, module, case, outcome, wall, peak, notes, messages=()):
        unique = []
        for note in notes:
            if one_line(note) not in unique:
                unique.append(one_line(note))
        self.rows.append((module, case, outcome, wall, peak, unique))
        self.messages.append(list(messages))

    def text(self):
        header = ("module", "case", "outcome", "wall s", "peak MiB")
        lines = [(module, case, outcome, "-" if wall is None else "%.2f" % wall,
                  "-" if peak is None else "%.0f" % peak) for module, case, outcome, wall, peak, _notes in self.rows]
        widths = [max(len(row[index]) for row in [header] + lines) for index in range(len(header))]

        def line(row):
            return "  ".join(cell.ljust(width) if index < 3 else cell.rjust(width)
                             for index, (cell, width) in enumerate(zip(row, widths))).rstrip()
        counts = {}
        for row in self.rows:
            counts[row[2]] = counts.get(row[2], 0) + 1
        out = ["hostile-user suite against %s%s" % (self.collection.path, " (report only)" if REPORT_ONLY else ""),
               line(header), line(tuple("-" * width for width in widths))]
        out += [line(row) for row in lines]
        out.append("")
        out.append("; ".join("%s: %d" % (key, counts[key]) for key in sorted(counts)))
        notes = [(module, case, outcome, row_notes) for module, case, outcome, _wall, _peak, row_notes in self.rows
                 if row_notes and outcome in ("FAILED", "n/a")]
        if notes:
            out += ["", "Why:"]
            for module, case, outcome, row_notes in notes:
                out.append("- %s %s (%s): %s" % (module, case, outcome, "; ".join(row_notes)))
        return "\n".join(out) + "\n"

    def write(self):
        """The table, and beside it (.json) every row with the messages of its runs."""
        TABLE.parent.mkdir(parents=True, exist_ok=True)
        TABLE.write_text(self.text())
        rows = [dict(module=module, case=case, outcome=outcome, wall_s=wall, peak_mib=peak, problems=notes,
                     messages=messages)
                for (module, case, outcome, wall, peak, notes), messages in zip(self.rows, self.messages)]
        TABLE.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
