"""What each step of `make test` costs alone: wall seconds and CPU seconds, against 2 cores x 20 minutes.

    .venv/bin/python bench/test_steps.py [--steps units,lint,molecule:cuda] [--dry-run]
    .venv/bin/python bench/test_steps.py --from-log [.build/beside.times]

Each step runs alone, one after another, never two at once: `make --no-print-directory STEP`, its output in
.build/test-steps/STEP.log. The steps are those of the Makefile's `test` target: its prerequisites (toolchain,
engine), the other cores' virtualenvs (core-venvs, made three at once as `make test` makes them), the steps of
$(BESIDE) in the Makefile's order, and what `make molecule` runs (tests/run_scenarios.py), a row per job:
- a scenario (each directory under molecule/ with a molecule.yml): `make molecule SCENARIO=NAME`, which runs
  `molecule test -s NAME` with the images and fixtures the scenarios name, as a scenario's job does;
- another core's job (molecule:default@VERSION, each of the Makefile's CORES): run_scenarios.py's own job for that
  core (its unit tests, a syntax check of every playbook, the default scenario's converge and idempotence), through
  a rule given to make on its command line, so that it gets the same fixtures and the same virtualenv (in the
  Debian 13 image for the CONTAINER_CORES) as under `make molecule`.
The jobs run in the order run_scenarios.py's lanes take them.

A row gives the wall seconds; the CPU seconds (user and system) of the step's whole process tree, from
getrusage(RUSAGE_CHILDREN) before and after it, which counts every descendant that was waited for; that as a share
of the goal; the seconds the whole machine spent busy meanwhile (/proc/stat), which also counts what Docker runs for
the step (the scenarios' nodes, the containers of node-python and of sanity on the newest core, image builds),
none of which descends from it, and any other work on the machine; and the step's status. Then the totals, and the
CPU seconds against the goal: 2 cores x 20 minutes, 2,400 CPU seconds.

--from-log prints the table of a `make test` that ran, from the .build/beside.times it wrote (the steps beside
molecule, one after another: wall seconds only), without running anything.
"""

import argparse
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests"))
import run_scenarios  # noqa: E402

GOAL_CORES = 2
GOAL_SECONDS = 20 * 60
GOAL_CPU_SECONDS = GOAL_CORES * GOAL_SECONDS
LOGS = CHECKOUT / ".build" / "test-steps"
BESIDE_TIMES = CHECKOUT / ".build" / "beside.times"
# run_scenarios.py's --timeout default: what one job may take under `make molecule`.
JOB_TIMEOUT = 3600
# Another core's job as `make molecule` runs it: after the same prerequisites, fixtures and scenario images, with
# the --core argument that the molecule target gives run_scenarios.py for that core.
CORE_JOB_RULE = ("bench-core-job: toolchain engine $(CURDIR)/.build/core-$(CORE)/.installed ; "
                 "$(FIXTURES); $(SCENARIO_IMAGES); python bench/test_steps.py --core-job "
                 "$(CORE)=$(CURDIR)/.build/core-$(CORE)"
                 "$(if $(filter $(CORE),$(CONTAINER_CORES)),@$$(tests/fixtures/base_image/build.sh debian13))")
# A line of beside.times, as the test target's printf writes it: step, status, seconds. run_scenarios.py prints its
# jobs' lines in the same layout, with statuses of several words.
TIMES_LINE = re.compile(r"^\s+(\S+)\s+(\S.*?)\s+(\d+) s$")
DIFFERENCES = """Where this differs from `make test`:
- Each row runs alone. `make test` runs the steps of BESIDE one after another in one lane, beside the core
  virtualenvs (three at once) and then two scenario lanes (three once the lane beside is done): there, the steps
  share 2 cores, and their wall seconds are longer than alone. The sum of the wall seconds here is no wall time of
  `make test`; the CPU seconds are what each step asks of the cores, alone or not.
- Each scenario row checks the images and fixtures before its scenario (found by their digests once built), which
  `make test` does once for every job; and runs `molecule test -s NAME` without run_scenarios.py's timeout of %d s.
- A step whose outputs are up to date (toolchain, engine, core-venvs, the images) costs what make and the build
  scripts take to find so, as in any `make test` after the first.
- cpu s misses what Docker runs for a step (its containers and image builds run under dockerd); machine cpu s
  counts it, and whatever else the machine ran meanwhile.""" % JOB_TIMEOUT


def make(*arguments):
    return ["make", "--no-print-directory"] + list(arguments)


def makefile_variable(text, name):
    """The words of a `NAME := words` line of the Makefile."""
    found = re.search(r"^%s :=(.*)$" % re.escape(name), text, re.M)
    if found is None:
        raise ValueError("the Makefile sets no %s" % name)
    return found.group(1).split()


def steps(makefile_text, scenario_names):
    """(row name, argv) of every step of `make test`, in the order they run here."""
    rows = [("toolchain", make("toolchain")), ("engine", make("engine")), ("core-venvs", make("-j3", "core-venvs"))]
    rows += [(step, make(step)) for step in makefile_variable(makefile_text, "BESIDE")]
    cores = ["%s@%s" % (run_scenarios.CORE_SCENARIO, core) for core in makefile_variable(makefile_text, "CORES")]
    for job in run_scenarios.longest_first(list(scenario_names) + cores):
        if "@" in job:
            argv = make("--eval=" + CORE_JOB_RULE, "bench-core-job", "CORE=" + job.split("@", 1)[1])
        else:
            argv = make("molecule", "SCENARIO=" + job)
        rows.append(("molecule:" + job, argv))
    return rows


def select(rows, names):
    """The rows named (molecule: every job of `make molecule`), in their order; the names no row has."""
    wanted = set(names)
    chosen = [(name, argv) for name, argv in rows
              if name in wanted or ("molecule" in wanted and name.startswith("molecule:"))]
    known = set(name for name, _argv in rows) | {"molecule"}
    return chosen, sorted(wanted - known)


def machine_busy():
    """CPU seconds this whole machine has spent busy (every process: the other work on it included); None where
    there is no /proc/stat."""
    try:
        fields = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def measure(argv, log):
    """Run argv alone, its output in log: (wall seconds, CPU seconds of its process tree, machine busy seconds or
    None, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = machine_busy()
    started = time.monotonic()
    with open(log, "w") as output:
        status = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(CHECKOUT), check=False).returncode
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_after = machine_busy()
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, None if busy is None or busy_after is None else busy_after - busy, status


def verdict(status):
    return "passed" if status == 0 else "FAILED (exit status %d)" % status


def share(cpu_seconds):
    return "%.1f%%" % (100.0 * cpu_seconds / GOAL_CPU_SECONDS)


def row_line(name, wall, cpu, machine, status):
    return "%-28s %8.1f %8.1f %10s %14s  %s" % (name, wall, cpu, share(cpu),
                                                "-" if machine is None else "%.1f" % machine, status)


def run_steps(rows):
    """Run the rows one after another, printing each as it ends; the exit status: 1 when one failed."""
    LOGS.mkdir(parents=True, exist_ok=True)
    print("%-28s %8s %8s %10s %14s  %s" % ("step", "wall s", "cpu s", "of 2,400", "machine cpu s", "status"),
          flush=True)
    results = []
    for name, argv in rows:
        log = LOGS / (name.replace(":", "-") + ".log")
        wall, cpu, machine, status = measure(argv, log)
        results.append((wall, cpu, machine, status))
        print(row_line(name, wall, cpu, machine, verdict(status) if status == 0 else "%s: %s" % (verdict(status), log)),
              flush=True)
    wall = sum(result[0] for result in results)
    cpu = sum(result[1] for result in results)
    machines = [result[2] for result in results]
    machine = None if None in machines else sum(machines)
    failed = sum(1 for result in results if result[3] != 0)
    print(row_line("total", wall, cpu, machine, "%d of %d failed" % (failed, len(results)) if failed
                   else "all %d passed" % len(results)))
    print("\nCPU seconds against the goal, %d cores x %d minutes = %s CPU seconds: %.0f of the steps' process trees"
          " (%s)%s." % (GOAL_CORES, GOAL_SECONDS // 60, format(GOAL_CPU_SECONDS, ","), cpu, share(cpu),
                        "" if machine is None else ", %.0f of the whole machine busy meanwhile (%s)"
                        % (machine, share(machine))))
    print("Alone, one after another, the steps took %.0f s of wall (%.1fx the goal's %d minutes); the logs are in %s."
          % (wall, wall / GOAL_SECONDS, GOAL_SECONDS // 60, LOGS))
    print("\n" + DIFFERENCES)
    return 1 if failed else 0


def parse_times(text):
    """(step, status, seconds) of each line of a beside.times; other lines are left out."""
    rows = []
    for line in text.splitlines():
        found = TIMES_LINE.match(line)
        if found:
            rows.append((found.group(1), found.group(2), int(found.group(3))))
    return rows


def report_times(path, rows):
    print("The steps beside molecule in the `make test` that wrote %s, one after another (wall only):" % path)
    print("%-28s %8s  %s" % ("step", "wall s", "status"))
    for step, status, seconds in rows:
        print("%-28s %8d  %s" % (step, seconds, status))
    total = sum(seconds for _step, _status, seconds in rows)
    failed = sum(1 for _step, status, _seconds in rows if status != "passed")
    print("%-28s %8d  %s" % ("total", total, "%d of %d failed" % (failed, len(rows)) if failed
                             else "all %d passed" % len(rows)))
    print("\nThey took %d s of the goal's %d minutes (%s s) of wall, in the one lane beside the scenarios: %.0f%%."
          % (total, GOAL_SECONDS // 60, format(GOAL_SECONDS, ","), 100.0 * total / GOAL_SECONDS))


def core_job(spec, logs=None):
    """Run another core's job (VERSION=VENV[@IMAGE], as `make molecule` gives run_scenarios.py) as
    run_scenarios.py runs it, and print its log; the exit status."""
    version, _equals, core = spec.partition("=")
    job = "%s@%s" % (run_scenarios.CORE_SCENARIO, version)
    logs = CHECKOUT / ".build" / "molecule" if logs is None else Path(logs)
    logs.mkdir(parents=True, exist_ok=True)
    status = run_scenarios.Lanes([job], logs, JOB_TIMEOUT, {version: core}).job(job)
    sys.stdout.write((logs / (job + ".log")).read_text(errors="replace"))
    print("==> %s: %s" % (job, run_scenarios.verdict(status)))
    return 0 if status == 0 else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--steps", help="comma-separated rows to run, e.g. units,lint,molecule:cuda (molecule: every"
                        " job of make molecule; default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print each row's command, run nothing")
    parser.add_argument("--from-log", nargs="?", const=str(BESIDE_TIMES), metavar="FILE",
                        help="print the table of the beside.times a make test wrote (default %s), run nothing"
                        % BESIDE_TIMES.relative_to(CHECKOUT))
    parser.add_argument("--core-job", metavar="VERSION=VENV[@IMAGE]",
                        help="run another core's job as run_scenarios.py does (what a molecule:default@VERSION row"
                        " runs, through make, with the scenarios' fixtures)")
    args = parser.parse_args(argv)
    if args.core_job:
        return core_job(args.core_job)
    if args.from_log:
        try:
            rows = parse_times(Path(args.from_log).read_text(errors="replace"))
        except OSError as error:
            parser.error("%s cannot be read (%s): run make test first, which writes it" % (args.from_log, error.strerror))
        if not rows:
            parser.error("%s holds no line of a step's seconds" % args.from_log)
        report_times(args.from_log, rows)
        return 0
    rows = steps((CHECKOUT / "Makefile").read_text(), run_scenarios.scenarios(CHECKOUT))
    if args.steps:
        chosen, unknown = select(rows, [name.strip() for name in args.steps.split(",") if name.strip()])
        if unknown:
            parser.error("no such step: %s (known: molecule, %s)"
                         % (", ".join(unknown), ", ".join(name for name, _argv in rows)))
        rows = chosen
    if args.dry_run:
        for name, command in rows:
            print("%-28s %s" % (name, shlex.join(command)))
        return 0
    return run_steps(rows)


if __name__ == "__main__":
    sys.exit(main())
