"""Run a command (ansible-playbook) and interrupt it as an operator's Ctrl-C does, when a line of its output
holds a marker (a task's header) and a delay has passed: SIGINT to its process. Its output is passed through.
Exits with the command's status, or 3 when it ended before it was interrupted. Past --timeout
every process the command started is killed, and the exit status is 124.

    interrupt_at.py --at 'TASK [Stop the server]' [--after 5] [--timeout 900] -- ansible-playbook ...
"""
import argparse
import os
import select
import signal
import subprocess
import sys
import time

RESEND = 1.0

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration"))
from process_tree import kill_tree  # noqa: E402 (after its directory is on the path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--at", required=True)
    parser.add_argument("--after", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    deadline = time.monotonic() + args.timeout
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    interrupt_at, sent, pending = None, False, b""
    tasks_seen, tasks_at_signal, last_signal_check = 0, 0, time.monotonic()
    while True:
        now = time.monotonic()
        if now > deadline:
            kill_tree(child.pid)
            child.wait()
            print("interrupt_at: killed after %.0f s" % args.timeout, flush=True)
            return 124
        if interrupt_at is not None and now >= interrupt_at:
            child.send_signal(signal.SIGINT)
            sent = True
            print("interrupt_at: SIGINT sent %.1f s after %r" % (args.after, args.at), flush=True)
            # ansible-playbook can miss a SIGINT (one that lands while it loads an included role): as an operator
            # presses Ctrl-C again, another follows when it starts a further task within RESEND seconds.
            interrupt_at, tasks_at_signal = float("inf"), tasks_seen
        if sent and tasks_seen > tasks_at_signal and now - last_signal_check >= RESEND:
            child.send_signal(signal.SIGINT)
            print("interrupt_at: SIGINT sent again: it went on to another task", flush=True)
            tasks_at_signal = tasks_seen
        if sent and now - last_signal_check >= RESEND:
            last_signal_check = now
        readable = select.select([child.stdout], [], [], 0.2)[0]
        if not readable:
            continue
        chunk = os.read(child.stdout.fileno(), 65536)
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        tasks_seen += chunk.count(b"\nTASK [")
        pending = (pending + chunk)[-4096:]
        if interrupt_at is None and args.at.encode() in pending:
            interrupt_at = time.monotonic() + args.after
    status = child.wait()
    if not sent:
        print("interrupt_at: the command ended before %r and %.1f s; nothing was interrupted" % (args.at, args.after),
              flush=True)
        return 3
    return status


if __name__ == "__main__":
    sys.exit(main())
