"""Run a command (ansible-playbook) and interrupt it as an operator's Ctrl-C does, when a line of its output
holds a marker (a task's header) and a delay has passed: SIGINT to its process. Its output is passed through.
Exits with the command's status (128 + the signal's number when a signal ended it), or 3 when it ended before it
was interrupted. Past --timeout every process the command started is killed, and the exit status is 124.

    interrupt_at.py --at 'TASK [Stop the server]' [--after 5] [--timeout 900] [--stalled 20] -- ansible-playbook ...
"""
import argparse
import os
import select
import signal
import subprocess
import sys
import time

RESEND = 1.0
# ansible-playbook ends within a few seconds of a SIGINT it takes. One that lands as it loads an included role can
# leave it waiting for a result that never comes, silent; an operator then presses Ctrl-C again, and the default
# action (its handler is reset by the first) ends it.
STALLED = 20.0

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration"))
from process_tree import descendants, kill_tree  # noqa: E402 (after its directory is on the path)


def end_leftovers(pids):
    """Kill what is left of processes the command started: its workers lead sessions of their own and outlive it."""
    for pid in pids:
        kill_tree(pid)


def send_again(child, started_by_command, why):
    """Send the command another SIGINT, as an operator's second Ctrl-C: its handler was reset by the first, so this
    one ends it. What it started is noted first, to be ended after it."""
    started_by_command.update(descendants(child.pid) - {child.pid})
    child.send_signal(signal.SIGINT)
    print("interrupt_at: SIGINT sent again: %s" % why, flush=True)
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--at", required=True)
    parser.add_argument("--after", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--stalled", type=float, default=STALLED)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    deadline = time.monotonic() + args.timeout
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    interrupt_at, sent, pending = None, False, b""
    tasks_seen, tasks_at_signal, last_signal_check = 0, 0, time.monotonic()
    last_output, resent, resent_when_silent, started_by_command = time.monotonic(), False, False, set()
    while True:
        now = time.monotonic()
        if now > deadline:
            kill_tree(child.pid)
            child.wait()
            print("interrupt_at: killed after %.0f s" % args.timeout, flush=True)
            return 124
        if interrupt_at is not None and now >= interrupt_at:
            child.send_signal(signal.SIGINT)
            sent, sent_at = True, now
            print("interrupt_at: SIGINT sent %.1f s after %r" % (args.after, args.at), flush=True)
            # ansible-playbook can miss a SIGINT (one that lands while it loads an included role): as an operator
            # presses Ctrl-C again, another follows when it starts a further task within RESEND seconds.
            interrupt_at, tasks_at_signal = float("inf"), tasks_seen
        if sent and tasks_seen > tasks_at_signal and now - last_signal_check >= RESEND:
            resent = send_again(child, started_by_command, "it went on to another task")
            tasks_at_signal = tasks_seen
        if sent and now - last_signal_check >= RESEND:
            last_signal_check = now
        if sent and not resent_when_silent and now - max(last_output, sent_at) >= args.stalled:
            resent = resent_when_silent = send_again(
                child, started_by_command, "silent for %.0f s after the last one" % args.stalled)
        if resent and child.poll() is not None:
            break  # its leftovers may hold the output open
        readable = select.select([child.stdout], [], [], 0.2)[0]
        if not readable:
            continue
        chunk = os.read(child.stdout.fileno(), 65536)
        if not chunk:
            break
        last_output = time.monotonic()
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        tasks_seen += ((pending[-1:] or b"\n") + chunk).count(b"\nTASK [")  # a header can start a chunk
        pending = (pending + chunk)[-4096:]
        if interrupt_at is None and args.at.encode() in pending:
            interrupt_at = time.monotonic() + args.after
    status = child.wait()
    end_leftovers(started_by_command)
    if not sent:
        print("interrupt_at: the command ended before %r and %.1f s; nothing was interrupted" % (args.at, args.after),
              flush=True)
        return 3
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main())
