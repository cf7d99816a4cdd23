"""Run every molecule scenario (or the ones named), as `molecule test -s NAME` each, in lanes side by side.

Most of a scenario's time is spent waiting on apt, pip and the servers it starts, so that one scenario at a time
leaves a core idle; lanes fill it. Each lane takes the longest scenario still waiting whenever it is free, so that
the lanes end together. The containers share the host's network, which is why no two scenarios bind the same port
(tests/unit/test_run_scenarios.py holds them to it).

A scenario's output goes to .build/molecule/NAME.log. When all are done, the logs are printed (those of failed
scenarios last), then a line per scenario: passed or failed, and its seconds. A scenario that runs past --timeout
is killed with every process it started, and its instances destroyed.
"""
import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from process_tree import kill_tree  # noqa: E402

# Seconds each scenario took in `make test` on CI's 2 cores, one scenario at a time: only the order the lanes take
# them in depends on these. A scenario missing here counts as DEFAULT_SECONDS.
SECONDS = {
    "benchmark": 143,
    "cuda": 390,
    "cuda_errors": 163,
    "default": 164,
    "diagnose": 67,
    "driver": 240,
    "fabric": 159,
    "ml_stack": 300,
    "ml_stack_errors": 410,
    "monitoring": 150,
    "preflight": 150,
    "runtime_env": 250,
    "runtime_env_errors": 150,
    "sglang_failure": 150,
    "sglang_multinode": 150,
    "sglang_systemd": 200,
    "upgrade": 1500,
    "upgrade_fleet": 400,
}
DEFAULT_SECONDS = 300


def scenarios(root):
    """The scenarios under root/molecule, as `molecule test --all` finds them: each directory with a molecule.yml."""
    return sorted(path.parent.name for path in (root / "molecule").glob("*/molecule.yml"))


def longest_first(names, seconds=None):
    """names in the order the lanes take them: the longest first, ties by name."""
    seconds = SECONDS if seconds is None else seconds
    return sorted(names, key=lambda name: (-seconds.get(name, DEFAULT_SECONDS), name))


class Lanes:
    """The scenarios still waiting, and what each that ran gave: (name, exit status or None on timeout, seconds)."""

    def __init__(self, names, logs, timeout):
        self.waiting = list(names)
        self.results = []
        self.logs, self.timeout = logs, timeout
        self.lock = threading.Lock()

    def next(self):
        with self.lock:
            return self.waiting.pop(0) if self.waiting else None

    def say(self, text):
        with self.lock:
            print("==> " + text, flush=True)

    def run(self, lane):
        while True:
            name = self.next()
            if name is None:
                return
            self.say("%s: started in lane %d" % (name, lane))
            started = time.monotonic()
            status = self.scenario(name)
            seconds = round(time.monotonic() - started)
            with self.lock:
                self.results.append((name, status, seconds))
            self.say("%s: %s in %d s" % (name, verdict(status), seconds))

    def scenario(self, name):
        """molecule test -s name, its output in its log; its exit status, None when it ran past the timeout."""
        with open(self.logs / (name + ".log"), "w") as log:
            process = subprocess.Popen(["molecule", "test", "-s", name], stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(CHECKOUT))
            try:
                return process.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                kill_tree(process.pid)
                process.wait()
                log.write("\n==> killed after %d s, with every process it started\n" % self.timeout)
                log.flush()
                destroy = subprocess.Popen(["molecule", "destroy", "-s", name], stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(CHECKOUT))
                try:
                    destroy.wait(timeout=300)
                except subprocess.TimeoutExpired:
                    kill_tree(destroy.pid)
                    destroy.wait()
                return None


def verdict(status):
    if status is None:
        return "KILLED (timeout)"
    return "passed" if status == 0 else "FAILED (exit status %d)" % status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("names", nargs="*", help="scenarios to run (default: all)")
    parser.add_argument("--lanes", type=int, default=int(os.environ.get("MOLECULE_LANES", "2")),
                        help="scenarios run at once (MOLECULE_LANES, default 2)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds one scenario may take (default 3600)")
    args = parser.parse_args(argv)
    known = scenarios(CHECKOUT)
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        parser.error("no such scenario: %s (known: %s)" % (", ".join(unknown), ", ".join(known)))
    logs = CHECKOUT / ".build" / "molecule"
    logs.mkdir(parents=True, exist_ok=True)
    lanes = Lanes(longest_first(args.names or known), logs, args.timeout)
    threads = [threading.Thread(target=lanes.run, args=(lane,)) for lane in range(1, max(1, args.lanes) + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Failed scenarios last, so that the end of the output shows them.
    for name, status, _seconds in sorted(lanes.results, key=lambda result: result[1] != 0):
        print("==> %s (%s): %s" % (name, verdict(status), logs / (name + ".log")), flush=True)
        sys.stdout.write((logs / (name + ".log")).read_text(errors="replace"))
    print("==> molecule, %d lane(s):" % args.lanes)
    for name, status, seconds in sorted(lanes.results):
        print("    %-22s %-28s %5d s" % (name, verdict(status), seconds))
    return 0 if all(status == 0 for _name, status, _seconds in lanes.results) else 1


if __name__ == "__main__":
    sys.exit(main())
