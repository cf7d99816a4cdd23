"""The site playbook on converged nodes: wall time, task count and controller CPU, against the floor, 1 node and SSH.

    make bench-site                       (or, with the FIXTURES variables of the Makefile exported:
    .venv/bin/python bench/site.py)        --fleet 0 skips the fleet, --skip-ssh the SSH rows: quicker, for iterating

Every node is a Debian 12 container on this machine (host network) with the demo inventory's settings, from the
debian12 image with openssh-server added (tests/fixtures/sshd_image). Converging a node takes minutes of this
machine's CPU, so only one node is converged from fresh; the rest are measured on copies of it:

1. Node 0 is converged: a fresh `site` run, then the measured second (unchanged) run over the docker connection,
   then the floor: a play of as many `ansible.builtin.ping` tasks as that run executed, over the same connection.
2. The fleet (--fleet, default 8 nodes): node 0 is committed into an image and the other nodes start from it, each
   with a server port of its own. A copy's server is not running (a container's processes do not survive a commit)
   and its port differs, so a first `site` run over the whole fleet restarts the copies' servers (its wall time and
   changes are printed as "settle"); the second run, with as many forks as nodes, is the one measured.
3. SSH, as fleets reach their nodes: sshd runs in node 0, bound to 127.0.0.1 on a port of its own, root with a key
   generated for this run only; ControlMaster with ControlPersist=60s (Ansible's own default ssh_args). The
   converged run and its floor are measured with pipelining on (the demo inventory's setting) and off.

The second run is compared with issue 18's figures for it (45 s, 82 tasks), with its floor, and, per node, with 1
node. The controller's CPU seconds are those of ansible-playbook and every process it started and waited for (its
workers, the docker and ssh clients); not the docker daemon's, not the nodes' (sshd, modules), and not the SSH
ControlPersist masters', which detach and are never waited for (at most a few percent of a run: they relay bytes).
"""

import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from process_tree import descendants, kill_tree, run_bounded  # noqa: E402

# Issue 18's second `site` run on the demo node, "today": what the converged run is measured against.
TODAY_SECONDS = 45
TODAY_TASKS = 82
# One playbook run on 8 nodes takes minutes on 2 cores; one that hangs is ended with all its workers.
PLAYBOOK_TIMEOUT = 1500
COMMAND_TIMEOUT = 600
BASE_IMAGE = os.environ.get("BLACKWELL_IMAGE_DEBIAN12")
FIXTURES = [os.environ.get("BLACKWELL_CUDA_REPO"), os.environ.get("BLACKWELL_STACK_INDEX")]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)
# Names of everything this bench starts; no other helper or scenario uses them.
PREFIX = "bench6-site-"
CONVERGED_IMAGE = "bench6-site-converged:%d" % os.getpid()
SERVER_PORT = 28400
SSHD_PORT = 28500
SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s"


def controller_cpu():
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def node_cpu(names):
    """CPU seconds the nodes' containers have used (their cgroups: cgroup v1's cpuacct, or v2's cpu.stat)."""
    total = 0.0
    for container in command(["docker", "inspect", "--format", "{{.Id}}"] + names).split():
        version1 = Path("/sys/fs/cgroup/cpuacct/docker", container, "cpuacct.usage")
        if version1.exists():
            total += int(version1.read_text()) / 1e9
            continue
        stat = Path("/sys/fs/cgroup/system.slice", "docker-%s.scope" % container, "cpu.stat").read_text()
        total += int(re.search(r"^usage_usec (\d+)$", stat, re.M).group(1)) / 1e6
    return total


def machine_busy():
    """CPU seconds this whole machine has spent busy (every process: the other work on it included)."""
    fields = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def command(argv, stdin=None):
    """Run a docker or ssh-keygen command, bounded; its stdout, or the end of the bench with what it printed."""
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        sys.exit("%s ran past %d s" % (" ".join(argv), COMMAND_TIMEOUT))
    if done.returncode != 0:
        sys.exit("%s failed:\n%s%s" % (" ".join(argv), done.stdout[-2000:], done.stderr[-2000:]))
    return done.stdout.strip()


def playbook(inventory, playbook_name, forks, extra=(), environment=None):
    """One run: wall seconds, CPU seconds (the controller's, the nodes', the whole machine's), each host's counts."""
    argv = ["ansible-playbook", "-i", str(inventory), "--forks=%d" % forks] + list(extra) + [playbook_name]
    nodes = sorted(json.loads((Path(inventory) / "hosts.yml").read_text())["all"]["children"]["gpu_nodes"]["hosts"])
    nodes_cpu, busy = node_cpu(nodes), machine_busy()
    started, cpu = time.monotonic(), controller_cpu()
    try:
        done = run_bounded(argv, PLAYBOOK_TIMEOUT, cwd=CHECKOUT, env=dict(os.environ, **(environment or {})))
    except subprocess.TimeoutExpired:
        sys.exit("%s ran past %d s; every process it started was killed" % (" ".join(argv), PLAYBOOK_TIMEOUT))
    elapsed, cpu = time.monotonic() - started, controller_cpu() - cpu
    busy, nodes_cpu = machine_busy() - busy, node_cpu(nodes) - nodes_cpu
    if done.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(argv), done.stdout[-4000:] + done.stderr[-2000:]))
    counts = {host: dict(ok=int(ok), changed=int(changed))
              for host, ok, changed, _unreachable, _failed, _skipped in RECAP.findall(done.stdout)}
    return dict(wall=elapsed, cpu=cpu, nodes_cpu=nodes_cpu, busy=busy, counts=counts)


def start_node(name, image):
    volumes = sum((["--volume", "%s:%s:ro" % (path, path)] for path in FIXTURES), [])
    command(["docker", "run", "--detach", "--name", name, "--network", "host"] + volumes
            + [image, "sleep", "infinity"])


def remove_nodes(names):
    subprocess.run(["docker", "rm", "--force"] + names, check=False, capture_output=True, timeout=COMMAND_TIMEOUT)


def docker_host(number):
    return {"ansible_connection": "community.docker.docker", "gpu_node_become": False,
            "sglang_server_port": SERVER_PORT + number}


def ssh_host(number, key):
    return {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": SSHD_PORT + number,
            "ansible_user": "root", "ansible_ssh_private_key_file": str(key), "ansible_ssh_args": SSH_ARGS,
            # A key made for this run and nodes made for it: nothing to verify, nothing worth remembering.
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                                       " -o IdentitiesOnly=yes -o LogLevel=ERROR",
            "gpu_node_become": False, "sglang_server_port": SERVER_PORT + number}


def inventory(directory, label, hosts):
    """The demo inventory's group variables, for these hosts (name -> host variables); written as JSON (YAML)."""
    path = directory / label
    path.mkdir()
    (path / "group_vars").symlink_to(CHECKOUT / "inventory" / "demo" / "group_vars")
    (path / "hosts.yml").write_text(json.dumps({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, indent=1))
    return path


def floor_playbook(directory, tasks):
    body = ["- hosts: gpu_nodes", "  gather_facts: false", "  tasks:"]
    body += ["    - name: No-op %d\n      ansible.builtin.ping:" % number for number in range(tasks)]
    path = directory / ("floor-%d.yml" % tasks)
    path.write_text("\n".join(body) + "\n")
    return path


def converged_run(directory, inventory_path, label, nodes, forks, extra=(), environment=None):
    """The second site run and its floor: one row of the table."""
    again = playbook(inventory_path, "blackwell.gpu_node.site", forks, extra, environment)
    changed = {host: counts["changed"] for host, counts in again["counts"].items() if counts["changed"]}
    if changed:
        sys.exit("%s: the converged site run changed something: %s" % (label, changed))
    tasks = max(counts["ok"] for counts in again["counts"].values())
    floor = playbook(inventory_path, str(floor_playbook(directory, tasks)), forks, extra, environment)
    row = dict(label=label, nodes=nodes, forks=forks, tasks=tasks, again=again["wall"], again_cpu=again["cpu"],
               floor=floor["wall"], floor_cpu=floor["cpu"], nodes_cpu=again["nodes_cpu"], busy=again["busy"])
    # Each row as soon as it is measured: a long run on a loaded machine may be stopped before the end.
    print("measured: %s" % row, flush=True)
    return row


def start_sshd(name, port, public_key):
    """sshd in the node on 127.0.0.1:port, root by this key only; returns once it accepts connections."""
    command(["docker", "exec", "-i", name, "sh", "-c",
             "mkdir -p -m 700 /root/.ssh /run/sshd && cat > /root/.ssh/authorized_keys"], stdin=public_key)
    command(["docker", "exec", name, "/usr/sbin/sshd", "-p", str(port), "-o", "ListenAddress=127.0.0.1",
             "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
             "-o", "PermitRootLogin=prohibit-password"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("sshd in %s did not listen on 127.0.0.1:%d within 30 s" % (name, port))


def stop_ssh_masters(control_dir):
    """End the ControlPersist masters of this run (they detach from ansible-playbook and outlive it)."""
    for control_path in control_dir.glob("*"):
        subprocess.run(["ssh", "-o", "ControlPath=%s" % control_path, "-O", "exit", "node"], check=False,
                       capture_output=True, timeout=30)


def measure(scratch, fleet, with_ssh):
    rows, first = [], PREFIX + "0"
    sshd_image = command([str(CHECKOUT / "tests" / "fixtures" / "sshd_image" / "build.sh"), BASE_IMAGE])
    start_node(first, sshd_image)
    single = inventory(scratch, "single", {first: docker_host(0)})
    playbook(single, "molecule/resources/prepare_model.yml", 1)
    fresh = playbook(single, "blackwell.gpu_node.site", 1)
    print("fresh site run on 1 node: %.1f s" % fresh["wall"], flush=True)
    rows.append(converged_run(scratch, single, "docker", 1, 1))
    rows[-1]["fresh"] = fresh["wall"]

    if with_ssh:
        key = scratch / "id_ed25519"
        command(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench-site", "-f", str(key)])
        start_sshd(first, SSHD_PORT, key.with_suffix(".pub").read_text())
        over_ssh = inventory(scratch, "ssh", {first: ssh_host(0, key)})
        control_dir = scratch / "cp"
        control_dir.mkdir()
        environment = {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir)}
        try:
            for pipelining in (True, False):
                rows.append(converged_run(scratch, over_ssh, "ssh, pipelining %s" % ("on" if pipelining else "off"),
                                          1, 1, ["-e", json.dumps({"ansible_pipelining": pipelining})],
                                          environment))
        finally:
            stop_ssh_masters(control_dir)

    if fleet > 1:
        command(["docker", "commit", first, CONVERGED_IMAGE])
        copies = [PREFIX + str(number) for number in range(1, fleet)]
        for name in copies:
            start_node(name, CONVERGED_IMAGE)
        whole = inventory(scratch, "fleet", {PREFIX + str(number): docker_host(number) for number in range(fleet)})
        settle = playbook(whole, "blackwell.gpu_node.site", fleet)
        print("settle run on %d nodes (the copies' servers restarted): %.1f s, changes %s"
              % (fleet, settle["wall"], {host: counts["changed"] for host, counts in settle["counts"].items()}),
              flush=True)
        rows.append(converged_run(scratch, whole, "docker", fleet, fleet))
        rows[-1]["settle"] = settle["wall"]
        remove_nodes(copies)
    return rows


def ratio(numerator, denominator):
    return "%.2fx" % (numerator / denominator)


def report(rows):
    cores = os.cpu_count()
    print("\nsite playbook, second (unchanged) run against the floor (as many ping tasks); %d cores here, containers"
          " on it as nodes. CPU s/node: the controller's; node CPU: the node containers'; busy: the whole machine"
          " during the run (other work on it included)" % cores)
    header = ("connection", "nodes", "forks", "tasks/node", "again s", "floor s", "again/floor", "ms/task",
              "floor ms/task", "CPU s/node", "floor CPU s/node", "node CPU s/node", "busy")
    print("   %-20s %5s %5s %10s %8s %8s %11s %8s %13s %10s %16s %15s %5s" % header)
    for row in rows:
        print("   %-20s %5d %5d %10d %8.1f %8.1f %11s %8.0f %13.0f %10.1f %16.1f %15.1f %4.0f%%"
              % (row["label"], row["nodes"], row["forks"], row["tasks"], row["again"], row["floor"],
                 ratio(row["again"], row["floor"]), 1000 * row["again"] / row["tasks"],
                 1000 * row["floor"] / row["tasks"], row["again_cpu"] / row["nodes"],
                 row["floor_cpu"] / row["nodes"], row["nodes_cpu"] / row["nodes"],
                 100 * row["busy"] / row["again"] / cores))
    one = rows[0]
    print("\n   1 node (fresh run %.1f s) against issue 18's today (%d s, %d tasks): time %s, tasks %s (target: at"
          " most 0.33x); against the floor %s (target: at most 1.5x)"
          % (one["fresh"], TODAY_SECONDS, TODAY_TASKS, ratio(one["again"], TODAY_SECONDS),
             ratio(one["tasks"], TODAY_TASKS), ratio(one["again"], one["floor"])))
    for row in rows[1:]:
        if row["label"] == "docker":
            spent = row["again_cpu"] + row["nodes_cpu"]
            busy = row["busy"] / cores / row["again"]
            print("   %d nodes (%d forks) against 1: wall %s, controller CPU per node %s (settle run before it:"
                  " %.1f s). The controller's %.1f CPU s and the nodes' %.1f, on %d cores, need at least %.1f s:"
                  " %.0f%% of the wall time (%.1f s); the machine was busy %.0f%% of it: %s."
                  % (row["nodes"], row["forks"], ratio(row["again"], one["again"]),
                     ratio(row["again_cpu"] / row["nodes"], one["again_cpu"]), row["settle"], row["again_cpu"],
                     row["nodes_cpu"], cores, spent / cores, 100 * spent / cores / row["again"], row["again"],
                     100 * busy,
                     # Cores busy all along bound the run, whoever kept them busy; idle cores mean it waited.
                     ("the cores bound it, and this bench had %.0f%% of them (other work took the rest)"
                      % (100 * spent / cores / row["again"])) if busy > 0.9
                     else "not the CPU alone: the run waited with cores idle (docker exec, the daemon, I/O)"))
    ssh = {row["label"]: row for row in rows if row["label"].startswith("ssh")}
    if ssh:
        on, off = ssh["ssh, pipelining on"], ssh["ssh, pipelining off"]
        print("   ssh against docker (1 node, per task): converged run %s, floor %s; controller CPU per run %s"
              % (ratio(on["again"] / on["tasks"], one["again"] / one["tasks"]),
                 ratio(on["floor"] / on["tasks"], one["floor"] / one["tasks"]),
                 ratio(on["again_cpu"], one["again_cpu"])))
        print("   ssh, pipelining off against on (per task): converged run %s, floor %s; controller CPU per run %s"
              % (ratio(off["again"] / off["tasks"], on["again"] / on["tasks"]),
                 ratio(off["floor"] / off["tasks"], on["floor"] / on["tasks"]),
                 ratio(off["again_cpu"], on["again_cpu"])))


def terminate(number, _frame):
    """On TERM (a timeout around the bench): end the playbook running now, with its workers, then leave through
    main's finally, which removes the containers."""
    for pid in descendants(os.getpid()) - {os.getpid()}:
        kill_tree(pid)
    sys.exit("terminated by signal %d" % number)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", type=int, default=8, help="nodes in the fleet row (node 0 and copies of it;"
                        " 0 or 1: no fleet row)")
    parser.add_argument("--skip-ssh", action="store_true", help="no SSH rows")
    args = parser.parse_args()
    if not BASE_IMAGE or not all(FIXTURES):
        sys.exit("Run it through `make bench-site`, which builds the image and the fixtures and names them.")
    signal.signal(signal.SIGTERM, terminate)
    names = [PREFIX + str(number) for number in range(max(args.fleet, 1))]
    remove_nodes(names)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-site-") as scratch:
            rows = measure(Path(scratch), args.fleet, not args.skip_ssh)
    finally:
        remove_nodes(names)
        subprocess.run(["docker", "image", "rm", "--force", CONVERGED_IMAGE], check=False, capture_output=True,
                       timeout=COMMAND_TIMEOUT)
    report(rows)


if __name__ == "__main__":
    main()
