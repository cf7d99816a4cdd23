"""wait_for_server on a log the service user controls: a FIFO, links to /dev/zero and /etc/shadow, an 8 GiB
sparse file, a log swapped with a FIFO in a loop. The wait returns within its timeout with a clear failure,
reading each poll bounded."""
import pytest

MODULE = "wait_for_server"
TIMEOUT = 3
READY = "[2026-12-01 10:00:00] The server is fired up and ready to roll!\n"


def setting(case):
    logs = case.user_dir("logs")
    return logs / "sglang.log", dict(log_path=str(logs / "sglang.log"), timeout=TIMEOUT, poll_interval=0.1)


def within_timeout(run):
    return [] if run.wall_s < TIMEOUT + 4 else ["took %.1f s for a timeout of %d s" % (run.wall_s, TIMEOUT)]


def test_control_sees_the_ready_line(hostile):
    case = hostile(MODULE, "control")
    log, args = setting(case)
    case.replace(log, "file", "[2026-12-01 09:59:59] Load weight begin\n" + READY)
    run = case.module(MODULE, args)
    case.check(run, "ok", problems=[] if (run.result or {}).get("ready") else ["not ready"])
    case.finish()


REFUSED = {
    "log FIFO": ("fifo", None),
    "log -> /dev/zero": ("link", "/dev/zero"),
    "log -> /etc/shadow": ("link", "/etc/shadow"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_log_that_is_no_regular_file_fails_at_once_naming_log_path(hostile, name):
    case = hostile(MODULE, name)
    log, args = setting(case)
    kind, target = REFUSED[name]
    case.replace(log, kind, target)
    run = case.module(MODULE, args)
    case.check(run, "refused", needle="log_path", problems=within_timeout(run))
    case.finish()


def test_an_8_gib_sparse_log_ends_at_the_timeout_read_bounded(hostile):
    case = hostile(MODULE, "log sparse 8 GiB")
    log, args = setting(case)
    case.replace(log, "sparse")
    run = case.module(MODULE, args)
    case.check(run, "refused", problems=within_timeout(run))
    case.finish()


def test_a_log_swapped_with_a_fifo_in_a_loop_fails_within_the_timeout(hostile):
    case = hostile(MODULE, "log <-> FIFO swap loop")
    log, args = setting(case)
    case.replace(log, "file", "[2026-12-01 09:59:59] Load weight begin\n" * 1000)
    fifo = case.replace(log.with_name("swap.fifo"), "fifo")
    with case.swapping(log, fifo):
        run = case.module(MODULE, args)
    case.check(run, "refused", problems=within_timeout(run))
    case.finish()
