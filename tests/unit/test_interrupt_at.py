"""molecule/resources/interrupt_at.py: the operator's Ctrl-C the upgrade scenario gives ansible-playbook."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
INTERRUPT_AT = CHECKOUT / "molecule" / "resources" / "interrupt_at.py"

# Stands in for ansible-playbook: prints a task's header, and takes SIGINT as its handler does (reset to the default
# action, then raise). HANG makes the raise end in a silent wait, as a SIGINT that lands while ansible-core loads an
# included role can; GO_ON makes it start a further task instead, as one it misses does; WORKER starts a process in a
# session of its own first, as ansible-core's workers are.
PLAYBOOK = r"""
import os, signal, subprocess, sys, time
def handler(signum, frame):
    signal.signal(signum, signal.SIG_DFL)
    raise KeyboardInterrupt
signal.signal(signal.SIGINT, handler)
if os.environ.get("WORKER"):
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    with open(os.environ["WORKER"], "w") as handle:
        handle.write(str(worker.pid))
try:
    os.write(1, b"TASK [Stop the server] ***\n")
    time.sleep(600)
except KeyboardInterrupt:
    if os.environ.get("GO_ON"):
        os.write(1, b"TASK [Wait until the server is ready] ***\n")
        time.sleep(600)
    if os.environ.get("HANG"):
        time.sleep(600)
    print("[ERROR]: User interrupted execution", flush=True)
    sys.exit(99)
"""


def interrupt(*extra, env=None, script=PLAYBOOK):
    return subprocess.run([sys.executable, str(INTERRUPT_AT), "--at", "TASK [Stop the server]", "--timeout", "60",
                           *extra, "--", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=90, env={**os.environ, **(env or {})}, check=False)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_run_that_takes_the_sigint_ends_with_its_own_status():
    run = interrupt()
    assert run.returncode == 99, run.stdout
    assert "interrupt_at: SIGINT sent 0.0 s after" in run.stdout
    assert "User interrupted execution" in run.stdout
    assert "SIGINT sent again" not in run.stdout


def test_a_run_left_silent_by_the_sigint_gets_another_and_its_workers_are_ended(tmp_path):
    worker_file = tmp_path / "worker.pid"
    started = time.monotonic()
    run = interrupt("--stalled", "2", env={"HANG": "1", "WORKER": str(worker_file)})
    assert run.returncode == 128 + signal.SIGINT, run.stdout
    assert "interrupt_at: SIGINT sent again: silent for 2 s after the last one" in run.stdout
    assert time.monotonic() - started < 30
    worker = int(worker_file.read_text())
    deadline = time.monotonic() + 10
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)


def test_a_run_that_goes_on_to_another_task_gets_another_and_its_workers_are_ended(tmp_path):
    worker_file = tmp_path / "worker.pid"
    run = interrupt("--stalled", "30", env={"GO_ON": "1", "WORKER": str(worker_file)})
    assert run.returncode == 128 + signal.SIGINT, run.stdout
    assert "interrupt_at: SIGINT sent again: it went on to another task" in run.stdout
    assert "silent for" not in run.stdout
    worker = int(worker_file.read_text())
    deadline = time.monotonic() + 10
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)


def test_a_run_that_ends_before_the_marker_was_not_interrupted():
    run = interrupt(script="print('PLAY RECAP')")
    assert run.returncode == 3
    assert "nothing was interrupted" in run.stdout
