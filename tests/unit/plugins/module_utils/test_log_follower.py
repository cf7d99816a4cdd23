import os
import socket
import stat
import warnings

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import (
    MAX_BYTES_PER_CALL,
    LogFollower,
    LogPathError,
    refuse_unless_regular,
)


def append(path, data):
    with open(path, "ab") as handle:
        handle.write(data)


def test_missing_file_yields_nothing_until_it_appears(tmp_path):
    log = tmp_path / "server.log"
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == []
    append(log, b"first\n")
    assert list(follower.read_lines()) == ["first"]


def test_reads_only_new_bytes_from_the_offset(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"old run: The server is fired up and ready to roll!\n")
    follower = LogFollower(str(log), offset=os.path.getsize(log))
    append(log, b"new 1\nnew 2\n")
    assert list(follower.read_lines()) == ["new 1", "new 2"]
    assert list(follower.read_lines()) == []
    append(log, b"new 3\n")
    assert list(follower.read_lines()) == ["new 3"]
    assert follower.offset == os.path.getsize(log)
    assert follower.bytes_read == len(b"new 1\nnew 2\nnew 3\n")


def test_partial_line_waits_for_its_end(tmp_path):
    log = tmp_path / "server.log"
    follower = LogFollower(str(log))
    append(log, b"Load weight be")
    assert list(follower.read_lines()) == []
    assert follower.pending_partial_line() == "Load weight be"
    append(log, b"gin.\r\n")
    assert list(follower.read_lines()) == ["Load weight begin."]
    assert follower.pending_partial_line() == ""


def test_non_utf8_bytes_are_replaced(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"caf\xe9 \xff\xfe ok\n")
    assert list(LogFollower(str(log)).read_lines()) == ["caf\ufffd \ufffd\ufffd ok"]


def test_very_long_line_is_cut_and_says_so(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"x" * 5000 + b"\nnext\n")
    lines = list(LogFollower(str(log), max_line_bytes=100).read_lines())
    assert lines == ["x" * 100 + " [... 4900 bytes cut]", "next"]


def test_truncation_in_place_restarts_from_the_beginning(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\ntwo\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one", "two"]
    with open(log, "wb") as handle:  # copytruncate
        handle.write(b"3\n")
    assert list(follower.read_lines()) == ["3"]
    assert follower.truncations == 1 and follower.offset == 2


def test_rotation_reads_the_rest_of_the_old_file_then_the_new_one(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one"]
    append(log, b"two\n")
    os.rename(log, tmp_path / "server.log.1")
    append(log, b"three\n")
    assert list(follower.read_lines()) == ["two", "three"]
    assert follower.rotations == 1
    assert follower.offset == len(b"three\n")


def test_offset_beyond_the_end_means_the_file_was_replaced(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"short\n")
    follower = LogFollower(str(log), offset=10_000)
    assert list(follower.read_lines()) == ["short"]
    assert follower.truncations == 1 and follower.offset == 6


def test_moved_away_and_not_recreated_keeps_reading_the_old_file(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one"]
    os.rename(log, tmp_path / "server.log.1")
    append(tmp_path / "server.log.1", b"two\n")
    assert list(follower.read_lines()) == ["two"]
    append(tmp_path / "server.log.1", b"three\n")
    assert list(follower.read_lines()) == ["three"]
    assert follower.rotations == 0


@pytest.mark.parametrize("kind", ["a FIFO", "a character device", "a directory", "a socket"])
def test_only_regular_files_are_followed(tmp_path, kind):
    # A FIFO without a writer blocks open(); /dev/zero never ends; a directory cannot be read.
    path = {"a character device": "/dev/zero"}.get(kind, str(tmp_path / "server.log"))
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a directory":
        os.mkdir(path)
    elif kind == "a socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
    with pytest.raises(LogPathError) as refused:
        list(LogFollower(path).read_lines())
    assert str(refused.value).startswith("log_path %s is %s, not a regular file" % (path, kind))


def test_a_link_is_never_followed_as_a_log(tmp_path):
    target = tmp_path / "elsewhere.log"
    append(target, b"secret\n")
    os.symlink(str(target), str(tmp_path / "server.log"))
    with pytest.raises(LogPathError, match=r"cannot be read: Too many levels of symbolic links$"):
        list(LogFollower(str(tmp_path / "server.log")).read_lines())


def test_unreadable_log_names_log_path(tmp_path):
    log = tmp_path / "server.log"
    os.symlink(log, log)  # a loop: stat fails with ELOOP, even for root
    with pytest.raises(LogPathError, match=r"^log_path %s cannot be read: Too many levels of symbolic links$" % log):
        list(LogFollower(str(log)).read_lines())


def test_replaced_by_a_fifo_reads_the_rest_of_the_old_file_then_refuses(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one"]
    append(log, b"two\n")
    os.rename(log, tmp_path / "server.log.1")
    os.mkfifo(log)
    lines = []
    with pytest.raises(LogPathError, match="is a FIFO, not a regular file"):
        for line in follower.read_lines():
            lines.append(line)
    assert lines == ["two"]


def test_a_huge_backlog_is_read_a_bounded_amount_per_call(tmp_path):
    log = tmp_path / "server.log"
    with open(log, "wb") as handle:
        handle.truncate(1024 ** 3)  # 1 GiB of NUL bytes, sparse: no line end anywhere
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == []
    assert follower.offset == MAX_BYTES_PER_CALL
    assert follower.behind


def test_many_short_lines_are_read_a_bounded_number_per_call(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"".join(b"%d\n" % n for n in range(100000)))
    follower = LogFollower(str(log), max_lines_per_call=1000)
    first = list(follower.read_lines())
    assert 1000 <= len(first) < 100000 and follower.behind
    rest = []
    while follower.behind:
        rest += follower.read_lines()
    assert first + rest == [str(n) for n in range(100000)]


def test_rotation_reads_a_backlog_of_the_old_file_before_the_new_one(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"start\n")
    follower = LogFollower(str(log), max_bytes_per_call=64 * 1024)
    assert list(follower.read_lines()) == ["start"]
    old = [b"old %06d" % n for n in range(20000)]
    append(log, b"\n".join(old) + b"\n")
    os.rename(log, tmp_path / "server.log.1")
    append(log, b"new\n")
    lines = list(follower.read_lines())
    while follower.behind:
        lines += follower.read_lines()
    assert lines == [line.decode() for line in old] + ["new"]
    assert follower.rotations == 1


def test_carriage_returns_end_lines_so_progress_bars_do_not_hide_the_ready_line(tmp_path):
    log = tmp_path / "server.log"
    updates = b"".join(b"\rLoading safetensors checkpoint shards: %3d%% Completed | %d/2000" % (n // 20, n)
                       for n in range(2000))
    assert len(updates) > 64 * 1024
    append(log, updates + b"\r\n[2026-11-30 10:00:00] The server is fired up and ready to roll!\n")
    lines = list(LogFollower(str(log)).read_lines())
    assert lines[-1] == "[2026-11-30 10:00:00] The server is fired up and ready to roll!"
    assert lines[-2] == "Loading safetensors checkpoint shards:  99% Completed | 1999/2000"
    assert len(lines) == 1 + 2000 + 1  # the empty line before the first \r, each update, the ready line


def test_a_crlf_pair_split_between_two_reads_is_one_line_end(tmp_path):
    log = tmp_path / "server.log"
    follower = LogFollower(str(log))
    append(log, b"Load weight begin.\r")
    assert list(follower.read_lines()) == ["Load weight begin."]
    append(log, b"\nLoad weight end.\r\n\r\n")
    assert list(follower.read_lines()) == ["Load weight end.", ""]


def test_a_crlf_pair_split_between_two_chunks_is_one_line_end(tmp_path, monkeypatch):
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import log_follower as _log_follower

    monkeypatch.setattr(_log_follower, "READ_CHUNK", 8)
    log = tmp_path / "server.log"
    append(log, b"1234567\r\nnext\n")
    assert list(LogFollower(str(log)).read_lines()) == ["1234567", "next"]


def test_resuming_at_the_end_of_the_file_is_not_a_truncation(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"old run\n")
    follower = LogFollower(str(log), offset=os.path.getsize(log))
    assert list(follower.read_lines()) == []
    assert follower.truncations == 0 and follower.offset == len(b"old run\n")
    append(log, b"new run\n")
    assert list(follower.read_lines()) == ["new run"]


def test_the_log_is_opened_so_that_open_cannot_block(tmp_path, monkeypatch):
    # A FIFO swapped in between the stat and the open must not block the open: O_NONBLOCK.
    log = tmp_path / "server.log"
    append(log, b"one\n")
    flags = []
    real_open = os.open

    def recording_open(path, flag, *args):
        flags.append(flag)
        return real_open(path, flag, *args)

    monkeypatch.setattr(os, "open", recording_open)
    assert list(LogFollower(str(log)).read_lines()) == ["one"]
    assert flags and all(flag & os.O_NONBLOCK for flag in flags)


def test_reading_is_unbuffered_and_warns_about_nothing(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(follower.read_lines()) == ["one"]
        follower.close()


def test_a_path_that_stops_being_readable_while_followed_names_log_path(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one"]
    os.rename(folder, tmp_path / "logs.old")
    (tmp_path / "logs").write_text("a file where the folder was")
    with pytest.raises(LogPathError) as refused:
        list(follower.read_lines())
    assert str(refused.value) == "log_path %s cannot be read: Not a directory" % log


def test_an_empty_first_line_is_a_line(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"\nready\n")
    assert list(LogFollower(str(log)).read_lines()) == ["", "ready"]


def test_closing_and_reading_again_resumes_at_the_offset(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one"]
    follower.close()
    append(log, b"two\n")
    assert list(follower.read_lines()) == ["two"]


def test_the_documented_bounds_are_the_defaults(tmp_path):
    # wait_for_server's documentation: lines kept up to 64 KiB, at most 4 MiB or 20000 lines per poll.
    follower = LogFollower(str(tmp_path / "server.log"))
    assert (follower.max_line_bytes, follower.max_bytes_per_call, follower.max_lines_per_call) == (
        64 * 1024, 4 * 1024 * 1024, 20000)


def test_a_line_of_64_kib_is_kept_whole_and_one_byte_more_is_cut(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"x" * 65536 + b"\n" + b"y" * 65537 + b"\n")
    assert list(LogFollower(str(log)).read_lines()) == ["x" * 65536, "y" * 65536 + " [... 1 bytes cut]"]


@pytest.mark.parametrize("mode,kind", [(stat.S_IFBLK, "a block device"), (0, "not a regular file")])
def test_the_refusal_names_the_kind_and_the_fix(mode, kind):
    with pytest.raises(LogPathError) as refused:
        refuse_unless_regular("/var/log/x", mode)
    assert str(refused.value) == (
        "log_path /var/log/x is %s, not a regular file: only regular files are followed as logs (reading anything "
        "else can block or never end); point log_path at the file the server writes its output to" % kind)


def test_every_truncation_is_counted(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\ntwo\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one", "two"]
    for expected in (1, 2):
        with open(log, "wb") as handle:
            handle.write(b"x\n")
        assert list(follower.read_lines()) == ["x"]
        append(log, b"longer than before\n")
        assert list(follower.read_lines()) == ["longer than before"]
        assert follower.truncations == expected
    follower.close()
    with open(log, "wb") as handle:  # truncated while closed: found when it is opened again
        handle.write(b"y\n")
    assert list(follower.read_lines()) == ["y"]
    assert follower.truncations == 3


def test_after_a_truncation_an_empty_first_line_is_a_line(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"first\r")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["first"]
    with open(log, "wb") as handle:  # shorter than what was read: a truncation
        handle.write(b"\nx\n")
    assert list(follower.read_lines()) == ["", "x"]


def test_a_call_with_budget_left_is_not_behind(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"abc\n")
    follower = LogFollower(str(log), max_bytes_per_call=5, max_lines_per_call=2)
    assert list(follower.read_lines()) == ["abc"]
    assert follower.behind is False


def test_a_call_that_used_its_whole_line_budget_is_behind_and_the_next_one_reads_on(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"a\n")
    follower = LogFollower(str(log), max_lines_per_call=1)
    assert list(follower.read_lines()) == ["a"] and follower.behind is True
    assert list(follower.read_lines()) == [] and follower.behind is False


# The tests below were written against the mutants of _log_follower that survived on the device's batch
# (tests/mutation/scores.txt).

def test_a_file_that_starts_with_an_empty_line_and_then_a_carriage_return(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"\nab\rc\n")
    assert list(LogFollower(str(log)).read_lines()) == ["", "ab", "c"]


def test_a_long_line_cut_over_several_calls_counts_every_byte_cut(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"abcdefghij\n")
    follower = LogFollower(str(log), max_line_bytes=4, max_bytes_per_call=4)
    # three calls: "abcd", then "efgh" (all cut), then "ij\n" (cut, and the line ends)
    lines = list(follower.read_lines()) + list(follower.read_lines()) + list(follower.read_lines())
    assert lines == ["abcd [... 6 bytes cut]"]


def test_every_rotation_is_counted_and_a_carriage_return_at_the_end_of_the_old_file_ends_there(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"a\r")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["a"]
    for number, data in ((1, b"\nb\n"), (2, b"c\n")):
        os.rename(str(log), str(tmp_path / ("server.log.%d" % number)))
        append(log, data)
        lines = list(follower.read_lines())
        assert follower.rotations == number
        # the new file's first "\n" is a line of its own, not the end of the old file's "\r"
        assert lines == {1: ["", "b"], 2: ["c"]}[number]


def test_an_unterminated_last_line_with_bytes_that_are_not_utf8(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"Traceback \xff")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == []
    assert follower.pending_partial_line() == "Traceback \ufffd"
