"""Run a command with a timeout that ends every process it started, not only the first one.

Ansible's worker processes start sessions of their own, so killing the process (or the
process group) of `ansible` leaves the module running: a module stuck reading
/dev/zero would keep a core busy long after the test gave up. On timeout, every process
that descends from the command (by parent, or by a session or process group led by one
of them) is stopped first, so that none can fork or escape while the tree is walked, and
then killed. Only /proc is used.
"""
import os
import signal
import subprocess


def _processes():
    """pid -> (parent pid, process group, session) of every process, from /proc/<pid>/stat."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as handle:
                # The command name in parentheses may hold spaces and parentheses itself.
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def descendants(root):
    """root and every process started from it: by parentage, or in a group or session one of them leads."""
    tree = {root}
    while True:
        grown = {pid for pid, (parent, group, session) in _processes().items()
                 if parent in tree or group in tree or session in tree} - tree
        if not grown:
            return tree
        tree |= grown


def kill_tree(root):
    """SIGSTOP the whole tree until it stops growing, then SIGKILL all of it."""
    stopped = set()
    while True:
        tree = descendants(root) - stopped
        if not tree:
            break
        for pid in tree:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped |= tree
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_bounded(argv, timeout, **popen_args):
    """subprocess.run(argv, capture_output=True, text=True) that kills the whole tree on timeout
    (and then raises subprocess.TimeoutExpired, as subprocess.run does)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, **popen_args)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        process.communicate()
        raise
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
