"""The site playbook's wall time on fresh and on unchanged nodes, against the floor of as many no-op tasks.

    make bench-site        (or, with the FIXTURES variables of the Makefile exported: .venv/bin/python bench/site.py)

For 1 and for 4 nodes at once (Debian 12 containers on this machine, the demo inventory's settings):
the first `site` run on fresh nodes, a second, unchanged run, and the floor: a play of as many
`ansible.builtin.ping` tasks as the second run executed on each node, over the same connections.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from process_tree import run_bounded  # noqa: E402

# One playbook run on up to 4 fresh nodes takes minutes; one that hangs is ended with all its workers.
PLAYBOOK_TIMEOUT = 1800
IMAGE = os.environ.get("BLACKWELL_IMAGE_DEBIAN12")
FIXTURES = [os.environ.get("BLACKWELL_CUDA_REPO"), os.environ.get("BLACKWELL_STACK_INDEX")]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def playbook(inventory, *args):
    started = time.monotonic()
    try:
        done = run_bounded(["ansible-playbook", "-i", str(inventory)] + list(args), PLAYBOOK_TIMEOUT, cwd=CHECKOUT)
    except subprocess.TimeoutExpired:
        sys.exit("ansible-playbook %s ran past %d s; every process it started was killed"
                 % (" ".join(args), PLAYBOOK_TIMEOUT))
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit("ansible-playbook %s failed:\n%s" % (" ".join(args), done.stdout[-4000:] + done.stderr[-2000:]))
    return elapsed, {host: dict(ok=int(ok), changed=int(changed)) for host, ok, changed, _u, _f, _s
                     in RECAP.findall(done.stdout)}


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
    names = ["bench-site-%d" % number for number in range(count)]
    remove_nodes(names)
    start_nodes(names)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            inventory = inventory_for(Path(scratch), names)
            playbook(inventory, "molecule/resources/prepare_model.yml")
            fresh = playbook(inventory, "blackwell.gpu_node.site")[0]
            again, recap = playbook(inventory, "blackwell.gpu_node.site")
            if any(host["changed"] for host in recap.values()):
                sys.exit("The second site run changed something: %s" % recap)
            tasks = max(host["ok"] for host in recap.values())
            floor = playbook(inventory, str(floor_playbook(Path(scratch), tasks)))[0]
            return fresh, again, floor, tasks
    finally:
        remove_nodes(names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    if not IMAGE or not all(FIXTURES):
        sys.exit("Run it through `make bench-site`, which builds the image and the fixtures and names them.")
    rows = [(count,) + measure(count) for count in args.nodes]
    print("\nsite playbook, wall seconds (%d cores on this machine; containers on it as nodes)" % os.cpu_count())
    print("   %-6s %-12s %-16s %-32s" % ("nodes", "fresh site", "unchanged site", "floor: the same number of no-ops"))
    for count, fresh, again, floor, tasks in rows:
        print("   %-6d %-12.1f %-16.1f %.1f (%d ping tasks per node)" % (count, fresh, again, floor, tasks))


if __name__ == "__main__":
    main()
