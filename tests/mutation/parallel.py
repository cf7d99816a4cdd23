"""Mutation testing of the pure-Python cores over N worker processes, with a deadline (`make mutation`).

usage: python tests/mutation/parallel.py [-j N] [--deadline SECONDS] [--reports DIR] [--scores FILE] [FILE...]
       (default FILE: plugins/module_utils/_*/*.py and plugins/filter/*.py, largest first)

mutmut 2.5.1 runs one mutant at a time; this driver makes the same mutants with mutmut's own functions
(list_mutations and mutate, the same Context as `mutmut run` without a config) and tests each one against the unit
test files that import the mutated file, on N workers. Each worker owns a staged copy of the tree
(the checkout is never mutated, even when this is killed): it writes one mutant into its copy, runs pytest there
with a per-mutant timeout, and puts the original back. The mutants of every file share one queue, largest file
first, so the workers stay busy to the end.

When the deadline passes (or on SIGTERM/SIGINT) the mutants not started are dropped and the report of every file
that is not finished is written as partial, with the number left untested, so a run that is about to be killed
still leaves its results. Reports: DIR/<file>.txt (the score, then the diff of each surviving and timed-out
mutant) and one line per file added to DIR/summary.txt. The score of each file whose every mutant was tested
replaces that file's line in tests/mutation/scores.txt (--scores), with the commit it was measured at: the
current report, kept in git; a run with --only, or a file the deadline left partial, changes no line.
"""
import argparse
import concurrent.futures
import difflib
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = Path("ansible_collections") / "blackwell" / "gpu_node"
# Copied into no worker's tree: build output (the stage itself is under .build), links to the shared toolchain,
# test output, and the wheels that device.sh installs from.
NOT_STAGED = {".build", ".venv", ".cache", ".git", ".whl", ".whl-mutation", "output", "__pycache__", ".ansible",
              ".pytest_cache", "benchmarks"}
# A mutant that runs its tests this many times longer than the unmutated code (and at least MIN_TIMEOUT) is
# stopped and counted as killed by timeout, as mutmut counts a loop that no longer ends.
TIMEOUT_FACTOR = 10
MIN_TIMEOUT = 30.0
SCORES = ROOT / "tests" / "mutation" / "scores.txt"


def tracked_files(root):
    """The files git would commit (tracked and untracked-not-ignored), or None where the tree is no git checkout."""
    if not (root / ".git").exists():
        return None  # also where root is a copy inside another checkout: git would list that checkout's files
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in listed.stdout.decode().split("\0") if name]


def stage(root, destination):
    """Copy the tree into destination/ansible_collections/blackwell/gpu_node with its own .build/collections link."""
    copy = destination / COLLECTION
    shutil.rmtree(destination, ignore_errors=True)
    files = tracked_files(root)
    if files is None:
        # A copy of a working tree without its .git (the device machine's): everything but NOT_STAGED.
        shutil.copytree(root, copy, symlinks=True, ignore=lambda folder, names: [n for n in names if n in NOT_STAGED])
    else:
        for name in files:
            source = root / name
            if not os.path.lexists(source) or name.split("/")[0] in NOT_STAGED:
                continue
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    link = copy / ".build" / "collections" / "ansible_collections" / "blackwell" / "gpu_node"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(copy)
    return copy


def unit_tests_of(root, file):
    """The unit test files that import file (module_utils by file name, filters by import path)."""
    name = Path(file).stem
    if file.startswith("plugins/filter/"):
        pattern = re.compile(r"plugins\.filter\.%s\b|plugins/filter/%s\.py" % (name, name))
    else:
        package = Path(file).parent.name
        pattern = re.compile(r"module_utils\.%s\.%s\b|module_utils\.%s import .*\b%s\b" % (package, name, package, name))
    return sorted(str(path.relative_to(root)) for path in (root / "tests" / "unit").rglob("test_*.py")
                  if pattern.search(path.read_text(encoding="utf-8", errors="replace")))


def mutants_of(root, file):
    """mutmut 2.5.1's mutation ids of file, in mutmut's order."""
    import mutmut  # pylint: disable=import-outside-toplevel
    context = mutmut.Context(source=(root / file).read_text(encoding="utf-8"), filename=file)
    return mutmut.list_mutations(context)


def mutated_source(source, file, mutation_id):
    import mutmut  # pylint: disable=import-outside-toplevel
    return mutmut.mutate(mutmut.Context(source=source, filename=file, mutation_id=mutation_id))[0]


# --- the worker processes: each takes a free staged copy when it starts ---
_WORKER = {}


def _start_worker(free_copies):
    _WORKER["copy"] = Path(free_copies.get())
    # The deadline is the parent's to keep: a worker ignores SIGINT from the terminal, and on the parent's SIGTERM
    # it kills the pytest it waits for and exits at once (a SystemExit would be caught by the pool's worker loop,
    # which would go on with the mutants queued already).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _end_worker)


def _end_worker(signal_number, frame):
    if _WORKER.get("test") is not None:
        _WORKER["test"].kill()
    os._exit(128 + signal_number)


def _pytest(copy, tests, timeout):
    """Run tests in copy; True when they pass, False when they fail, None when they ran past timeout."""
    # No .pyc files: two mutants of the same size written within one second would otherwise share a stale one.
    environment = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    _WORKER["test"] = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"] + tests,
                                       cwd=copy, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return _WORKER["test"].wait(timeout) == 0
    except subprocess.TimeoutExpired:
        _WORKER["test"].kill()
        _WORKER["test"].wait()
        return None
    finally:
        _WORKER["test"] = None


def baseline(tests):
    """(seconds, None) of the unmutated file's tests in this worker's copy, or (seconds, the end of pytest's output)
    when they fail, for the report to say why."""
    start = time.monotonic()
    if _pytest(_WORKER["copy"], tests, timeout=600):
        return time.monotonic() - start, None
    failed = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"] + tests,
                            cwd=_WORKER["copy"], capture_output=True, text=True, timeout=600, check=False)
    return time.monotonic() - start, (failed.stdout + failed.stderr)[-3000:]


def test_mutant(file, tests, mutation_id, timeout):
    """(status, diff) of one mutant: status is killed, survived or timeout; the copy is restored either way."""
    path = _WORKER["copy"] / file
    original = path.read_text(encoding="utf-8")
    mutated = mutated_source(original, file, mutation_id)
    try:
        path.write_text(mutated, encoding="utf-8")
        passed = _pytest(_WORKER["copy"], tests, timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    status = {True: "survived", False: "killed", None: "timeout"}[passed]
    diff = "".join(line + "\n" for line in difflib.unified_diff(
        original.split("\n"), mutated.split("\n"), fromfile=file, tofile=file, lineterm=""))
    return status, diff


# --- the parent: queue, deadline, reports ---
class FileResult:
    def __init__(self, file, tests, mutants):
        self.file, self.tests, self.total = file, tests, len(mutants)
        self.mutants = dict(enumerate(mutants, start=1))  # number -> mutmut's mutation id
        self.results = {}  # mutant number (1-based, mutmut's order) -> (status, diff)
        self.problem = None
        self.failure = ""  # the end of pytest's output when the unmutated code fails its tests

    def count(self, status):
        return sum(1 for found, _diff in self.results.values() if found == status)

    def complete(self):
        """Whether every mutant of the file was tested."""
        return not self.problem and len(self.results) == self.total

    def score(self):
        """"99.2% killed (251 of 253, 0 by timeout; 2 survived)" of the mutants tested."""
        killed, timeout, survived = self.count("killed"), self.count("timeout"), self.count("survived")
        tested = len(self.results)
        score = "%.1f%% killed" % (100.0 * (killed + timeout) / tested) if tested else "no score"
        return "%s (%d of %d, %d by timeout; %d survived)" % (score, killed + timeout, tested, timeout, survived)

    def report(self):
        """(the summary line, the report text)."""
        if self.problem:
            return "%s: %s" % (self.file, self.problem), "%s: %s\n%s" % (self.file, self.problem, self.failure)
        untested = self.total - len(self.results)
        partial = "partial (%d of %d mutants untested at the deadline): " % (untested, self.total) if untested else ""
        line = "%s: %s%s by %s" % (self.file, partial, self.score(), " ".join(self.tests))
        text = [line + "\n"]
        for kind in ("survived", "timeout"):
            for number in sorted(self.results):
                status, diff = self.results[number]
                if status == kind:
                    text.append("\n--- %s: mutant %d\n%s" % (kind, number, diff))
        return line, "".join(text)


def write_report(reports, result):
    line, text = result.report()
    (reports / ("%s.txt" % Path(result.file).stem)).write_text(text, encoding="utf-8")
    with open(reports / "summary.txt", "a", encoding="utf-8") as summary:
        summary.write(line + "\n")
    print(line, flush=True)


def measured_at(root, paths):
    """The commit the scores of paths are measured at: "<short hash> <date>", "with uncommitted changes" added when
    any of paths differs from it; None where root is no git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h %cd", "--date=short"],
                              capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--"] + list(paths),
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (" with uncommitted changes" if changed else "")


def record_scores(path, lines, files):
    """Put lines ({file: its line}) in the scores file path in place of those files' lines, with a line for each
    of files (those a run tests by default): "not measured" where there is none, and none for a file not among
    them or lines. The file's leading comment stays; the lines are sorted by file."""
    header, scores = [], {}
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    for line in text.splitlines():
        if line.startswith("#") and not scores:
            header.append(line)
        elif line.strip():
            scores[line.split(": ", 1)[0]] = line
    scores = dict((file, scores.get(file, "%s: not measured" % file)) for file in files)
    scores.update(lines)
    body = [scores[file] for file in sorted(scores)]
    path.write_text("\n".join(header + [""] + body if header else body) + "\n", encoding="utf-8")


def record_complete_scores(arguments, results):
    """The scores.txt line of every file whose mutants were all tested, unless --only chose some."""
    if arguments.only or not arguments.scores:
        return
    lines = {}
    for file, result in results.items():
        if result.complete():
            at = arguments.measured_at or measured_at(ROOT, [file] + result.tests) or "an unknown commit"
            lines[file] = "%s: %s at %s" % (file, result.score(), at)
    if lines:
        record_scores(Path(arguments.scores), lines, default_files(ROOT))
        print("%d scores recorded in %s" % (len(lines), arguments.scores), flush=True)


def default_files(root):
    """The files a run tests when none is named: every core and filter."""
    files = sorted(root.glob("plugins/module_utils/_*/[a-z]*.py")) + sorted(root.glob("plugins/filter/*.py"))
    return [str(path.relative_to(root)) for path in files]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("files", nargs="*", help="files to mutate, relative to the checkout (default: every core)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--deadline", type=float, default=0,
                        help="seconds after which no new mutant starts and partial reports are written (0: none)")
    parser.add_argument("--reports", type=Path, default=ROOT / "tests" / "output" / "mutation",
                        help="folder for <file>.txt and summary.txt")
    parser.add_argument("--scores", default=str(SCORES),
                        help="the scores file whose lines of the files tested in full are replaced (empty: none)")
    parser.add_argument("--measured-at", default=None,
                        help="the commit the tree is, for the scores, where it is no git checkout (device.sh)")
    parser.add_argument("--only", type=lambda text: set(int(number) for number in text.split(",")), default=None,
                        help="test only these mutant numbers (as a report numbers them; one FILE), to see a new test "
                             "kill the survivors")
    parser.add_argument("--stage", type=Path, default=ROOT / ".build" / "mutation-parallel",
                        help="folder for the workers' copies of the tree")
    arguments = parser.parse_args(argv)
    started = time.monotonic()
    deadline = started + arguments.deadline if arguments.deadline else float("inf")
    stopping = []
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda number, frame: stopping.append(number))

    files = arguments.files or default_files(ROOT)
    files.sort(key=lambda name: (ROOT / name).stat().st_size, reverse=True)
    arguments.reports.mkdir(parents=True, exist_ok=True)
    copies = [stage(ROOT, arguments.stage / ("w%d" % number)) for number in range(arguments.jobs)]
    print("%d workers staged in %.0f s" % (len(copies), time.monotonic() - started), flush=True)

    results = {}
    for file in files:
        tests = unit_tests_of(ROOT, file)
        mutants = mutants_of(ROOT, file)
        results[file] = FileResult(file, tests, mutants)
        if arguments.only:
            results[file].mutants = dict((number, mutants[number - 1]) for number in sorted(arguments.only))
            results[file].total = len(arguments.only)
        if not tests:
            results[file].problem = "no unit test imports it"
    print("%d mutants in %d files" % (sum(r.total for r in results.values()), len(files)), flush=True)

    free_copies = multiprocessing.Queue()
    for copy in copies:
        free_copies.put(str(copy))
    pool = concurrent.futures.ProcessPoolExecutor(arguments.jobs, initializer=_start_worker,
                                                  initargs=(free_copies,))
    timeouts = {}
    baselines = {pool.submit(baseline, r.tests): file for file, r in results.items() if not r.problem}
    for future in concurrent.futures.as_completed(baselines):
        file = baselines[future]
        seconds, failure = future.result()
        if failure is not None:
            results[file].problem = "its unit tests fail without a mutant: %s" % " ".join(results[file].tests)
            results[file].failure = failure
        timeouts[file] = max(MIN_TIMEOUT, TIMEOUT_FACTOR * seconds)
    print("baselines done at %.0f s" % (time.monotonic() - started), flush=True)

    for file in files:
        if results[file].problem:
            write_report(arguments.reports, results[file])
    pending = {}
    remaining = {file: results[file].total for file in files if not results[file].problem}
    for file in remaining:
        for number, mutation_id in results[file].mutants.items():
            future = pool.submit(test_mutant, file, results[file].tests, mutation_id, timeouts[file])
            pending[future] = (file, number)
    if not remaining:
        pool.shutdown()
        return 0

    total, next_progress = len(pending), time.monotonic() + 60
    while pending and not stopping and time.monotonic() < deadline:
        if time.monotonic() >= next_progress:
            print("%d of %d mutants tested at %.0f s" % (total - len(pending), total, time.monotonic() - started),
                  flush=True)
            next_progress += 60
        done = concurrent.futures.wait(pending, timeout=1, return_when=concurrent.futures.FIRST_COMPLETED).done
        for future in done:
            file, number = pending.pop(future)
            results[file].results[number] = future.result()
            remaining[file] -= 1
            if not remaining[file]:
                write_report(arguments.reports, results[file])
    record_complete_scores(arguments, results)
    if pending:
        print("stopped at %.0f s with %d mutants untested" % (time.monotonic() - started, len(pending)), flush=True)
        for file in files:
            if file in remaining and remaining[file]:
                write_report(arguments.reports, results[file])
        # Workers still in a test are ended with their pytest, and this exits without waiting for the pool, so
        # that it returns before whoever set the deadline kills it; their mutants count as untested.
        workers = list(pool._processes.values())  # pylint: disable=protected-access
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(10)
        sys.stdout.flush()
        os._exit(0)
    pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
