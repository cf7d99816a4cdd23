"""The timeout of run_module's runner ends every process it started, also those in sessions of their own."""
import subprocess
import sys
import time

import pytest

from process_tree import run_bounded

# Started the way Ansible starts its workers: in a session of its own, so that killing the
# runner's process group misses it. It reads /dev/zero, as a stuck module would.
SPAWN_ESCAPED_READER = (
    "import subprocess, sys, time\n"
    "reader = subprocess.Popen(['cat', '/dev/zero'], stdout=subprocess.DEVNULL, start_new_session=True)\n"
    "with open(sys.argv[1], 'w') as handle:\n"
    "    handle.write(str(reader.pid))\n"
    "time.sleep(600)\n"
)


def is_running(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_timeout_kills_a_descendant_in_a_session_of_its_own(tmp_path):
    pid_file = tmp_path / "reader.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded([sys.executable, "-c", SPAWN_ESCAPED_READER, str(pid_file)], timeout=3)
    reader = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while is_running(reader) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_running(reader), "the /dev/zero reader %d outlived the timeout" % reader


def test_output_and_status_come_back_when_in_time():
    completed = run_bounded([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=30)
    assert (completed.returncode, completed.stdout) == (3, "out\n")
