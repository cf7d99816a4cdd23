"""The site playbook on converged nodes: its wall time, task count and controller CPU, against the floor and 1 node.

    make bench-site        (or, with the FIXTURES variables of the Makefile exported: .venv/bin/python bench/site.py)

For 1 and for 8 nodes at once (Debian 12 containers on this machine, the demo inventory's settings, as many forks
as nodes): the first `site` run on fresh nodes, a second, unchanged run, and the floor: a play of as many
`ansible.builtin.ping` tasks as the second run executed on each node, over the same connections. The second run
is compared with issue 18's figures for it (45 s, 82 tasks), with the floor, and, per node, with 1 node. The
controller's CPU seconds are those of ansible-playbook and everything it started here (its workers, the docker
clients), not the docker daemon's.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from process_tree import run_bounded  # noqa: E402

# Issue 18's second `site` run on the demo node, "today": what the converged run is measured against.
TODAY_SECONDS = 45
TODAY_TASKS = 82
# One playbook run on up to 8 fresh nodes takes minutes; one that hangs is ended with all its workers.
PLAYBOOK_TIMEOUT = 1800
IMAGE = os.environ.get("BLACKWELL_IMAGE_DEBIAN12")
FIXTURES = [os.environ.get("BLACKWELL_CUDA_REPO"), os.environ.get("BLACKWELL_STACK_INDEX")]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def controller_cpu():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def playbook(inventory, *args):
    """Wall seconds, controller CPU seconds, and each host's ok and changed counts of one run."""
    started, cpu = time.monotonic(), controller_cpu()
    try:
        done = run_bounded(["ansible-playbook", "-i", str(inventory)] + list(args), PLAYBOOK_TIMEOUT, cwd=CHECKOUT)
    except subprocess.TimeoutExpired:
        sys.exit("ansible-playbook %s ran past %d s; every process it started was killed"
                 % (" ".join(args), PLAYBOOK_TIMEOUT))
    elapsed, cpu = time.monotonic() - started, controller_cpu() - cpu
    if done.returncode != 0:
        sys.exit("ansible-playbook %s failed:\n%s" % (" ".join(args), done.stdout[-4000:] + done.stderr[-2000:]))
    counts = {host: dict(ok=int(ok), changed=int(changed))
              for host, ok, changed, _u, _f, _s in RECAP.findall(done.stdout)}
    return elapsed, cpu, counts


def start_nodes(names):
    for name in names:
        volumes = sum((["--volume", "%s:%s:ro" % (path, path)] for path in FIXTURES), [])
        subprocess.run(["docker", "run", "--detach", "--name", name, "--network", "host"] + volumes
                       + [IMAGE, "sleep", "infinity"], check=True, stdout=subprocess.DEVNULL)


def remove_nodes(names):
    subprocess.run(["docker", "rm", "--force"] + names, check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def inventory_for(directory, names):
    """The demo inventory's group variables, for these nodes, each serving on a port of its own."""
    (directory / "group_vars").symlink_to(CHECKOUT / "inventory" / "demo" / "group_vars")
    lines = ["all:", "  children:", "    gpu_nodes:", "      hosts:"]
    for number, name in enumerate(names):
        lines += ["        %s:" % name, "          ansible_connection: community.docker.docker",
                  "          gpu_node_become: false", "          sglang_server_port: %d" % (38400 + number)]
    (directory / "hosts.yml").write_text("\n".join(lines) + "\n")
    return directory


def floor_playbook(directory, tasks):
    body = ["- hosts: gpu_nodes", "  gather_facts: false", "  tasks:"]
    body += ["    - name: No-op %d\n      ansible.builtin.ping:" % number for number in range(tasks)]
    path = directory / "floor.yml"
    path.write_text("\n".join(body) + "\n")
    return path


def measure(count):
    """One row: nodes, forks, fresh wall seconds, second run's wall and CPU seconds, the floor's, tasks per node."""
    names = ["bench-site-%d" % number for number in range(count)]
    forks = "--forks=%d" % count
    remove_nodes(names)
    start_nodes(names)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            inventory = inventory_for(Path(scratch), names)
            playbook(inventory, forks, "molecule/resources/prepare_model.yml")
            fresh = playbook(inventory, forks, "blackwell.gpu_node.site")[0]
            again, again_cpu, recap = playbook(inventory, forks, "blackwell.gpu_node.site")
            if any(host["changed"] for host in recap.values()):
                sys.exit("The second site run changed something: %s" % recap)
            tasks = max(host["ok"] for host in recap.values())
            floor, floor_cpu = playbook(inventory, forks, str(floor_playbook(Path(scratch), tasks)))[:2]
            return dict(nodes=count, forks=count, fresh=fresh, again=again, again_cpu=again_cpu, floor=floor,
                        floor_cpu=floor_cpu, tasks=tasks)
    finally:
        remove_nodes(names)


def report(rows):
    cores = os.cpu_count()
    print("\nsite playbook, second (unchanged) run; %d cores on this machine, containers on it as nodes" % cores)
    print("   %-6s %-6s %-11s %-10s %-13s %-11s %-12s %-14s %-14s"
          % ("nodes", "forks", "fresh s", "again s", "tasks/node", "floor s", "again/floor", "CPU s/node",
             "CPU busy"))
    for row in rows:
        print("   %-6d %-6d %-11.1f %-10.1f %-13d %-11.1f %-12.2f %-14.1f %.0f%% of %d cores"
              % (row["nodes"], row["forks"], row["fresh"], row["again"], row["tasks"], row["floor"],
                 row["again"] / row["floor"], row["again_cpu"] / row["nodes"],
                 100 * row["again_cpu"] / row["again"] / cores, cores))
    one = rows[0]
    if one["nodes"] == 1:
        print("\n   1 node against issue 18's today (%d s, %d tasks): time %.2fx, tasks %.2fx (target: at most 0.33x);"
              " against the floor: %.2fx (target: at most 1.5x)"
              % (TODAY_SECONDS, TODAY_TASKS, one["again"] / TODAY_SECONDS, one["tasks"] / TODAY_TASKS,
                 one["again"] / one["floor"]))
        for row in rows[1:]:
            print("   %d nodes against 1: wall %.2fx, controller CPU per node %.2fx; the floor's CPU per node"
                  " %.1f s. CPU busy near 100%% of the cores means the controller's CPU bounds it."
                  % (row["nodes"], row["again"] / one["again"],
                     (row["again_cpu"] / row["nodes"]) / one["again_cpu"], row["floor_cpu"] / row["nodes"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    if not IMAGE or not all(FIXTURES):
        sys.exit("Run it through `make bench-site`, which builds the image and the fixtures and names them.")
    rows = []
    for count in args.nodes:
        rows.append(measure(count))
        # Each row as soon as it is measured: an 8-node run on a loaded machine may be stopped before the end.
        print("measured: %s" % rows[-1], flush=True)
    report(rows)


if __name__ == "__main__":
    main()
