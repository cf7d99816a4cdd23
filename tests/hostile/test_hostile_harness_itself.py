"""The namespace sees what a module would do wrong: a write or a removal outside the tree lands in an overlay
(and never on this machine), the virtualenv's code run as root shows in the probe, a run past its bound is
killed whole, and what a run leaves running is found and ended."""
import os
import time

import hostile_harness


def command_line(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def test_a_write_outside_the_tree_is_seen_and_never_reaches_the_host(hostile):
    case = hostile("harness", "writes")
    name = "/etc/blackwell-hostile-write-%d" % os.getpid()
    run = case._run([hostile_harness.PYTHON, "-c", "open(%r, 'w').write('x'); import os; os.chown('/etc/hosts', 0, 0)"
                     % name], 10, hostile_harness.MEMORY_BOUND, {})
    assert run.rc == 0, run.stderr
    assert "%s (file)" % name in run.writes
    assert "/etc/hosts (file)" in run.writes
    assert not os.path.exists(name)
    assert case.check(run, "bounded") != []
    case.discard()


def test_the_virtualenv_run_as_root_shows_in_the_probe(hostile):
    case = hostile("harness", "probe")
    venv = case.make_venv()
    run = case._run([str(venv.path / "bin" / "python"), "-c", "pass"], 10, hostile_harness.MEMORY_BOUND, {})
    assert run.root_probes() and len(run.probes) == 3, run.probes  # the wrapper, and the .pth (lib and lib64)
    run = case._run(["runuser", "-u", case.user.name, "--", str(venv.path / "bin" / "python"), "-S", "-c", "pass"],
                    10, hostile_harness.MEMORY_BOUND, {})
    assert run.probes and not run.root_probes(), run.probes
    case.discard()


def test_a_run_past_its_bound_is_killed_with_all_it_started_and_leftovers_are_ended(hostile):
    case = hostile("harness", "bounds")
    started = time.monotonic()
    run = case._run(["bash", "-c", "setsid sleep 300.25 & sleep 300.5"], 1, hostile_harness.MEMORY_BOUND, {})
    assert run.timed_out and time.monotonic() - started < 20
    run = case._run(["bash", "-c", "setsid sleep 301.25 </dev/null >/dev/null 2>&1 &"], 10,
                    hostile_harness.MEMORY_BOUND, {})
    assert not run.timed_out and [process["argv"] for process in run.left_running] == ["sleep 301.25"]
    # Only the sleeps this test started, by their odd durations: the scenarios beside it run sleeps of their own.
    started_here = (b"sleep\x00300.25\x00", b"sleep\x00300.5\x00", b"sleep\x00301.25\x00")
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and command_line(pid) in started_here]
    case.discard()
