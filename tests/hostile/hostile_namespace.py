"""Run one command as root where nothing it writes can reach this machine, and report what it wrote.

    unshare -m --propagation private python hostile_namespace.py STATE REPORT TIMEOUT MEMORY -- ARGV...

In the private mount namespace, every directory of GUARDED is covered by an overlay whose lower layer is the
directory itself and whose upper layer lies on a tmpfs mounted at STATE (a directory of root's): the command reads
the host as it is, and whatever it creates, changes, chowns or removes there lands in the upper layer instead,
which is thrown away with the namespace. The hostile tree the suite builds lies outside GUARDED (under /var/tmp),
so the command reaches it for real.

ARGV runs with its address space bounded to MEMORY bytes (RLIMIT_AS) and its wall time to TIMEOUT seconds; past
that, its whole tree is stopped and killed (tests/integration/process_tree.py's kill_tree, which follows sessions
and process groups, not only the group). This process is the children's subreaper, so whatever ARGV leaves
running is found and killed too. REPORT gets one JSON object: the exit status, whether it timed out, wall time,
peak RSS (wait4's ru_maxrss over ARGV and the children it waited for), its stdout and the tail of its stderr,
every entry of every upper layer (what it wrote outside the tree), and what it left running.

private_tree.py (tests/integration) binds a test's tree over the few directories node_snapshot changes, to check
what was written there; this one layers overlays over the whole system instead, to check that nothing was.
"""
import ctypes
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))

from private_tree import mount  # noqa: E402  (tests/integration, on the path above)
from process_tree import descendants, kill_tree  # noqa: E402

# Everything root could write outside the hostile tree: configuration, programs and libraries (the system
# Python's dist-packages and stdlib included, under /usr), state, logs, caches, root's home, run-time files and
# the temporary directory (a file left there is reported too).
GUARDED = ("/etc", "/usr", "/opt", "/srv", "/home", "/root", "/var/lib", "/var/log", "/var/cache", "/var/spool",
           "/run", "/tmp")
PR_SET_CHILD_SUBREAPER = 36
STDERR_TAIL = 20000
STDOUT_LIMIT = 4 << 20


def overlay(path, state):
    name = path.strip("/").replace("/", "_")
    upper, work = os.path.join(state, name, "upper"), os.path.join(state, name, "work")
    os.makedirs(upper)
    os.makedirs(work)
    mount("-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (path, upper, work), path)
    return upper


def entries(upper):
    """Every entry of an upper layer: path (as seen on the host), kind, size, owner."""
    found = []
    for directory, dirnames, filenames in os.walk(upper):
        for name in sorted(dirnames + filenames):
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                kind = "removed"  # an overlay whiteout: the command removed what the host has there
            elif stat.S_ISDIR(info.st_mode):
                kind = "directory"
            elif stat.S_ISLNK(info.st_mode):
                kind = "link -> %s" % os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                kind = "file"
            else:
                kind = "special"
            found.append({"path": path[len(upper):], "kind": kind, "size": info.st_size, "uid": info.st_uid})
    return found


def leftovers(root_pid):
    """(pid, uid, command line) of each process still running below root_pid, this process excluded."""
    found = []
    for pid in sorted(descendants(root_pid) - {root_pid}):
        try:
            with open("/proc/%d/status" % pid) as handle:
                status = dict(line.split(":", 1) for line in handle if ":" in line)
            if status["State"].split()[0] in ("Z", "X"):
                continue  # dead, not yet reaped
            uid = int(status["Uid"].split()[0])
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                argv = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, KeyError, IndexError, ValueError):
            continue
        found.append({"pid": pid, "uid": uid, "argv": argv[:300]})
    return found


def reap():
    """Collect the exit of every child that has ended (this process is their subreaper)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def run(argv, timeout, memory, output_dir):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    stdout_path, stderr_path = os.path.join(output_dir, "stdout"), os.path.join(output_dir, "stderr")
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                   start_new_session=True, preexec_fn=limit)
        deadline = started + timeout
        timed_out = False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                kill_tree(process.pid)
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.01)
        wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    with open(stdout_path, "rb") as handle:
        out = handle.read(STDOUT_LIMIT).decode("utf-8", "replace")
    with open(stderr_path, "rb") as handle:
        handle.seek(max(0, os.fstat(handle.fileno()).st_size - STDERR_TAIL))
        err = handle.read().decode("utf-8", "replace")
    return {"rc": process.returncode, "timed_out": timed_out, "wall_s": round(wall, 3),
            "maxrss_kib": usage.ru_maxrss, "stdout": out, "stderr": err}


def main(argv):
    separator = argv.index("--")
    state, report, timeout, memory = argv[:separator]
    command = argv[separator + 1:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    mount("-t", "tmpfs", "-o", "size=512m,mode=0700", "tmpfs", state)
    output_dir = os.path.join(state, "output")
    os.mkdir(output_dir)
    uppers = dict((path, overlay(path, os.path.join(state, "layers"))) for path in GUARDED if os.path.isdir(path))
    result = run(command, float(timeout), int(memory), output_dir)
    # What the command left running (a detached child, a process of the user's it started) is ended here, in
    # the namespace, before the overlays go away with it.
    time.sleep(0.05)
    reap()
    result["left_running"] = leftovers(os.getpid())
    for pid in [entry["pid"] for entry in result["left_running"]]:
        try:
            kill_tree(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while leftovers(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.01)
    reap()
    result["writes"] = dict((path, entries(upper)) for path, upper in uppers.items())
    with open(report, "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
