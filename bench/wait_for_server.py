"""wait_for_server against ansible.builtin.wait_for and the reference shell loop, side by side.

    make bench-wait        (or: .venv/bin/python bench/wait_for_server.py [--runs N] [--skip-cpu])

1. False alarms over the real logs in tests/data/sglang_logs: the module's classifier
   against a case-insensitive `error|traceback|exception|failed` grep, and the reference
   loop itself (its greps run on each log replayed line by line).
2. Latency from the ready line being written to the task returning, and from a traceback
   being written to the task failing, each as an ansible-playbook task (median and max).
3. CPU seconds of the whole ansible-playbook process tree while waiting 30 s on a log that
   already holds 1 GiB and keeps growing.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogFollower  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readiness import Waiter  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier  # noqa: E402
from process_tree import kill_tree  # noqa: E402

READY_LINE = "[2026-11-30 10:00:00] The server is fired up and ready to roll!"
TRACEBACK = (
    "[2026-11-30 10:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "scheduler.py", line 2950, in run_scheduler_process\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
)
NAIVE = re.compile(r"error|traceback|exception|failed", re.IGNORECASE)
# The reference loop as operators wrote it: `while true; do grep -q "fired up" log && break;
# grep -iE "error|traceback|exception|failed" log && break; sleep 5; done`. Its first grep that hits
# ends it; here a hit of the second one exits 1 (the task fails) and the timeout bounds it.
REFERENCE_LOOP_BODY = """while true; do
  grep -q "fired up" "{log}" && break
  grep -iqE "error|traceback|exception|failed" "{log}" && exit 1
  [ $SECONDS -lt $end ] || exit 1
  sleep 5
done"""
# One poll of that loop: what it concludes from the file as it is now.
REFERENCE_POLL = """grep -q "fired up" "$1" && echo ready && exit
grep -iqE "error|traceback|exception|failed" "$1" && echo failed && exit
echo waiting"""
FAILURE_TIMEOUT = 10  # what wait_for and the shell loop are given in the failure case

TASKS = {
    "wait_for_server": """
    - blackwell.gpu_node.wait_for_server:
        log_path: "{log}"
        offset: {offset}
        timeout: {timeout}
""",
    "ansible.builtin.wait_for": """
    - ansible.builtin.wait_for:
        path: "{log}"
        search_regex: "The server is fired up and ready to roll!"
        timeout: {timeout}
""",
    "reference loop (grep every 5 s)": """
    - ansible.builtin.shell: |
        end=$((SECONDS + {timeout}))
""" + "\n".join("        " + line for line in REFERENCE_LOOP_BODY.format(log="{log}").splitlines()) + """
      args:
        executable: /bin/bash
      changed_when: false
""",
}
# What ansible-playbook itself costs for a task of that length: the floor under every row.
FLOOR = """
    - ansible.builtin.command: sleep {timeout}
      changed_when: false
"""


def reference_loop_verdict(path, directory):
    """Replay a real log into a file line by line and poll it with the reference loop's own greps after
    each line: a 5 s poll on a start-up of minutes sees the lines that come before the ready line on their
    own. ready, failed (and at which line) or waiting at the end."""
    replay = Path(directory) / "replay.log"
    lines = path.read_text(errors="replace").splitlines(True)
    replay.write_text("")
    for number, line in enumerate(lines, 1):
        with open(replay, "a") as handle:
            handle.write(line)
        verdict = subprocess.run(["bash", "-c", REFERENCE_POLL, "poll", str(replay)], capture_output=True,
                                 text=True, check=True).stdout.strip()
        if verdict != "waiting":
            return verdict, number
    return "waiting", len(lines)


def false_alarms():
    logs = sorted((CHECKOUT / "tests" / "data" / "sglang_logs").glob("*.log"))
    rows = {"classifier": [0, 0, 0, 0], "naive grep": [0, 0, 0, 0], "reference loop": [0, 0, 0, 0]}
    successes = [p for p in logs if p.name.startswith("success-")]
    failures = [p for p in logs if p.name.startswith("failure-")]
    for path in successes:
        lines = path.read_text(errors="replace").splitlines()
        waiter = Waiter(LogFollower(str(path)), StartupClassifier(), timeout=0, poll_interval=0,
                        sleep=lambda seconds: None)
        flagged = not waiter.run()["ready"]
        rows["classifier"][0] += flagged
        grep_lines = sum(1 for line in lines if NAIVE.search(line))
        rows["naive grep"][0] += grep_lines > 0
        rows["naive grep"][1] += grep_lines
        rows["classifier"][1] += flagged
    total_lines = sum(len(p.read_text(errors="replace").splitlines()) for p in successes)
    for path in failures:
        waiter = Waiter(LogFollower(str(path)), StartupClassifier(), timeout=0, poll_interval=0, pid=1,
                        is_running=lambda pid: False, sleep=lambda seconds: None)
        result = waiter.run()
        rows["classifier"][2] += result["failure"]["cause"] is not None and "exited before" not in result["failure"]["cause"]
        rows["classifier"][3] += result["failure"]["diagnosis"] is not None
        rows["naive grep"][2] += any(NAIVE.search(line) for line in path.read_text(errors="replace").splitlines())
    stopped = {}
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as directory:
        for path in successes + failures:
            stopped[path.name] = reference_loop_verdict(path, directory)
    for path in successes:
        verdict, _line = stopped[path.name]
        rows["reference loop"][0] += verdict == "failed"
    rows["reference loop"][1] = "-"
    for path in failures:
        rows["reference loop"][2] += stopped[path.name][0] == "failed"
    print("\n1. False alarms over %d real successful start-ups (%d lines) and %d real failed ones"
          % (len(successes), total_lines, len(failures)))
    header = ("", "successes flagged as failed", "lines flagged in them", "failures caught", "failures diagnosed")
    print("   %-14s %-26s %-22s %-22s %s" % header)
    for name, (logs_flagged, lines_flagged, caught, diagnosed) in rows.items():
        print("   %-14s %-26s %-22s %-22s %s" % (
            name, "%d/%d" % (logs_flagged, len(successes)), lines_flagged, "%d/%d" % (caught, len(failures)),
            ("%d/%d" % (diagnosed, len(failures))) if name == "classifier" else "no"))
    print("   reference loop: the poll that stops it, per successful start-up that it calls failed:")
    for path in successes:
        verdict, line = stopped[path.name]
        if verdict == "failed":
            print("     %s: line %d of %d" % (path.name, line, len(path.read_text(errors="replace").splitlines())))


def core_latency(directory, payload, runs, poll_interval=0.1):
    """The module's own part: from the write to the Waiter returning, in-process."""
    samples = []
    for run in range(runs):
        log = Path(directory) / "core.log"
        log.write_text("[2026-11-30 09:59:59] Load weight begin.\n")
        waiter = Waiter(LogFollower(str(log), log.stat().st_size), StartupClassifier(), timeout=60,
                        poll_interval=poll_interval)
        written = []

        def write_later():
            time.sleep(0.3 + 0.037 * run)  # spread the writes over the poll cycle
            with open(log, "a") as handle:
                handle.write(payload)
            written.append(time.monotonic())

        writer = threading.Thread(target=write_later)
        writer.start()
        waiter.run()
        returned = time.monotonic()
        writer.join()
        samples.append(returned - written[0])
    return samples


def playbook(directory, task, log, offset, timeout):
    path = Path(directory) / "bench.yml"
    path.write_text("- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:"
                    + task.format(log=log, offset=offset, timeout=timeout))
    return path


def run_playbook(path):
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(CHECKOUT / ".build" / "collections"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-e",
         "ansible_python_interpreter=" + sys.executable, str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ, start_new_session=True)
    return process, before


def wait_bounded(process, timeout):
    """The playbook's exit code; past timeout, every process it started (its workers run in sessions of
    their own) is killed and the run counts as failed."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        process.wait()
        return None


def latency(directory, tool, payload, runs, timeout):
    samples, outcomes = [], set()
    for run in range(runs):
        log = Path(directory) / "server.log"
        log.write_text("[2026-11-30 09:59:59] Load weight begin.\n")
        process, _before = run_playbook(playbook(directory, TASKS[tool], log, log.stat().st_size, timeout))
        time.sleep(4)  # ansible-playbook is up and the task is waiting
        with open(log, "a") as handle:
            handle.write(payload)
        written = time.monotonic()
        code = wait_bounded(process, timeout + 60)
        samples.append(time.monotonic() - written)
        outcomes.add("ok" if code == 0 else "failed")
    return samples, "/".join(sorted(outcomes))


def cpu_while_waiting(directory, task, size, seconds=30):
    log = Path(directory) / ("log-%d" % size)
    if not log.exists():
        line = b"[2026-11-30 09:00:00 TP0] Decode batch. #running-req: 8, #token: 4096, gen throughput (token/s): 512.00\n"
        with open(log, "wb") as handle:
            block = line * max(1, min(size, 8 * 2 ** 20) // len(line))
            while handle.tell() < size:
                handle.write(block)
    stop = threading.Event()

    def grow():
        with open(log, "ab") as handle:
            while not stop.is_set():
                handle.write(b"[2026-11-30 09:00:01 TP0] Prefill batch. #new-seq: 1\n" * 100)
                handle.flush()
                stop.wait(1)

    writer = threading.Thread(target=grow)
    writer.start()
    process, before = run_playbook(playbook(directory, task, log, log.stat().st_size, seconds))
    wait_bounded(process, seconds + 120)
    stop.set()
    writer.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-cpu", action="store_true")
    options = parser.parse_args()
    false_alarms()
    with tempfile.TemporaryDirectory(prefix="bench-wait-") as directory:
        print("\n2. Latency (seconds) from the line being written to the ansible-playbook task returning,"
              " %d runs each" % options.runs)
        print("   %-30s %-28s %s" % ("", "ready line: median / max", "traceback: median / max (outcome)"))
        for tool in TASKS:
            ready, _outcome = latency(directory, tool, READY_LINE + "\n", options.runs, 600)
            failed, outcome = latency(directory, tool, TRACEBACK, options.runs, FAILURE_TIMEOUT)
            print("   %-30s %-28s %s" % (
                tool, "%.2f / %.2f" % (statistics.median(ready), max(ready)),
                "%.2f / %.2f (%s%s)" % (statistics.median(failed), max(failed), outcome,
                                        ", only at its timeout of %ds" % FAILURE_TIMEOUT
                                        if tool == "ansible.builtin.wait_for" else "")))
        for label, payload in (("ready line", READY_LINE + "\n"), ("traceback", TRACEBACK)):
            samples = core_latency(directory, payload, 20)
            print("   %-30s %s: median %.3f / max %.3f (20 runs, poll_interval 0.1)" % (
                "wait_for_server core alone", label, statistics.median(samples), max(samples)))
        print("   Each includes ansible-playbook's own exit. The line is written 4 s after the playbook starts;"
              " wait_for fails\n   only when its timeout, counted from the task's start, runs out (its default is"
              " 300 s); the reference loop\n   stops at its next 5 s poll on any line with error, traceback, exception"
              " or failed in it.")
        if not options.skip_cpu:
            print("\n3. CPU seconds (user+system, whole ansible-playbook process tree) while waiting 30 s on a log"
                  " growing by 100 lines/s")
            rows = [("ansible-playbook floor (sleep 30)", FLOOR, 2 ** 30)]
            rows += [(tool, TASKS[tool], 2 ** 30) for tool in TASKS]
            rows += [("wait_for_server, 1 MiB log", TASKS["wait_for_server"], 2 ** 20)]
            for name, task, size in rows:
                seconds = cpu_while_waiting(directory, task, size)
                print("   %-40s %-10s %.2f" % (name, "1 GiB log" if size == 2 ** 30 else "1 MiB log", seconds))


if __name__ == "__main__":
    main()
