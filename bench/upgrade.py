"""How long one node is out of service when the upgrade playbook switches it, task by task, against a reinstall.

    make bench-upgrade        (or, with the FIXTURES variables of the Makefile exported: .venv/bin/python bench/upgrade.py)

One Debian 12 container on this machine as the node (the demo inventory's settings), serving on cu128 as in the
upgrade molecule scenario. Then:
- upgrade: `blackwell.gpu_node.upgrade -e stack_profile=cu130`, its output taken as JSON (the json callback), so
  that every task of the switch is timed. Out of service is the report's time from the stop of the old server to
  the new one answering the generate request (the new stack was built while the old served). The breakdown gives
  each step of the switch, and the server's own start to ready (its readiness wait) apart from the playbook's tasks;
- reinstall in place of the same stack: stop the server, remove the cu130 virtualenv, and run `site` for cu130,
  which builds it again and starts the server; out of service is the whole of it.

Beside it, "before": the switch when it ran the cuda, ml_stack and runtime_env roles whole while the server was
down. Its outage (46.1 s) was measured with this bench; its steps come from a run of the same switch by hand on a
container node, timed from outside (49 s in all).
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("bench_site", Path(__file__).resolve().parent / "site.py")
bench_site = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_site)

NODE = "bench6-upgrade-0"
CU128_WITHOUT_JIT_CACHE = {"cu128": {"python": {"flashinfer_jit_cache": {"version": None}}}}
BASELINE = ["-e", json.dumps({"stack_profile": "cu128", "cuda_register": False,
                              "stack_profiles_custom": CU128_WITHOUT_JIT_CACHE})]
# The switch that ran the cuda, ml_stack and runtime_env roles whole while the server was down: the outage as this
# bench measured it, the steps as timed from outside on a container node.
BEFORE = {"outage": 46.1, "stop": 1.0, "cuda": 20.0, "link": 12.0, "runtime_env": 10.0, "start to ready": 2.0,
          "generate": 1.0}
# The switch's steps, by the name of the upgrade's task that begins each; every task after it counts for it.
STEPS = [
    ("record", "Record the switch on the node before its server stops"),
    ("stop", "Stop the server"),
    ("cuda", "Register the target's CUDA and prove the linker resolves it"),
    ("link", "Point the stable path at the target's virtualenv"),
    ("start", "Start the server on the new stack and wait for the ready line and /health"),
    ("generate", "Ask the new server for one generation"),
    ("after", "Note that the node serves on the new stack"),
]
READY_WAIT = "Wait until the server is ready"


def seconds(stamp):
    return datetime.fromisoformat(stamp.rstrip("Z")).timestamp()


def breakdown(report):
    """The switch play's tasks from the record to the generation, from the json callback's report: {step: seconds
    its tasks took}, the server's own readiness wait, the seconds between tasks (Ansible's own: includes, templating,
    starting each task), and every task as (step, name, seconds)."""
    names = dict((name, step) for step, name in STEPS)
    switch = next(play for play in report["plays"] if play["play"]["name"].startswith("Switch each node"))
    steps, step, ready, tasks, first, last = {}, None, 0.0, [], None, None
    for task in switch["tasks"]:
        name = task["task"]["name"]
        step = names.get(name, step)
        if step is None or step == "after" or NODE not in task["hosts"]:
            continue
        start, end = seconds(task["task"]["duration"]["start"]), seconds(task["task"]["duration"]["end"])
        first, last = start if first is None else first, end
        steps[step] = steps.get(step, 0.0) + end - start
        tasks.append((step, name, end - start))
        if name.endswith(READY_WAIT):
            ready += end - start
    return steps, ready, (last - first) - sum(steps.values()), tasks


def main():
    if not bench_site.BASE_IMAGE or not all(bench_site.FIXTURES):
        sys.exit("Run it through `make bench-upgrade`, which builds the image and the fixtures and names them.")
    bench_site.remove_nodes([NODE])
    bench_site.start_node(NODE, bench_site.BASE_IMAGE)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            inventory = bench_site.inventory(Path(scratch), "upgrade", {NODE: bench_site.docker_host(0)})
            for name in ("molecule/resources/prepare_model.yml", "molecule/resources/prepare_cuda128.yml"):
                bench_site.playbook(inventory, name, 1)
            bench_site.playbook(inventory, "blackwell.gpu_node.site", 1, BASELINE)
            report = Path(scratch) / "report.json"
            argv = ["ansible-playbook", "-i", str(inventory), "blackwell.gpu_node.upgrade", "-e", json.dumps(
                {"stack_profile": "cu130", "gpu_node_upgrade_report": str(report),
                 "stack_profiles_custom": CU128_WITHOUT_JIT_CACHE})]
            started = time.monotonic()
            done = bench_site.run_bounded(argv, bench_site.PLAYBOOK_TIMEOUT, cwd=bench_site.CHECKOUT,
                                          env=dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json"))
            whole = time.monotonic() - started
            switched = json.loads(report.read_text())["hosts"][0]
            if done.returncode != 0 or switched["outcome"] != "upgraded":
                sys.exit("The upgrade did not succeed: %s\n%s" % (switched, done.stderr[-2000:]))
            steps, ready, between, tasks = breakdown(json.loads(done.stdout))
            started = time.monotonic()
            bench_site.playbook(inventory, "blackwell.gpu_node.stop", 1)
            subprocess.run(["docker", "exec", NODE, "sh", "-c", 'rm -rf "$(readlink -f /opt/ml-env)"'], check=True)
            bench_site.playbook(inventory, "blackwell.gpu_node.site", 1, ["-e", "stack_profile=cu130"])
            reinstall = time.monotonic() - started
    finally:
        bench_site.remove_nodes([NODE])
    outage = switched["seconds_to_ready"]
    print("\nOne node out of service, wall seconds (%d cores on this machine; a container as the node)"
          % os.cpu_count())
    print("   %-52s %6s %8s" % ("", "now", "before"))
    print("   %-52s %6.1f %8.1f   (the whole upgrade run: %.1f)" % (
        "upgrade, stop to ready (new stack prepared beside)", outage, BEFORE["outage"], whole))
    for step, label in (("record", "record the switch"), ("stop", "stop the server"),
                        ("cuda", "register CUDA (and prove the linker)"), ("link", "move the link"),
                        ("runtime_env", "render the runtime environment"), ("start", "start, until ready"),
                        ("generate", "one generation")):
        print("   %-52s %6.1f %8s" % ("  " + label, steps.get(step, 0.0),
                                      "%.1f" % BEFORE[step] if step in BEFORE else "-"))
    print("   %-52s %6.1f %8s" % ("  Ansible between those tasks", between, "-"))
    print("   %-52s %6.1f %8.1f" % ("  of which the server's own start to ready", ready, BEFORE["start to ready"]))
    print("   %-52s %6.1f %8.1f" % ("outage minus the server's own start to ready", outage - ready,
                                    BEFORE["outage"] - BEFORE["start to ready"]))
    print("   %-52s %6.1f" % ("reinstall in place: stop, rebuild, start", reinstall))
    print("\nEvery task of the switch, seconds:")
    for step, name, took in tasks:
        print("   %-9s %5.2f  %s" % (step, took, name))


if __name__ == "__main__":
    main()
