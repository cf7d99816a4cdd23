import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._log_follower import LogFollower


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
    assert follower.truncations == 1


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
    assert list(LogFollower(str(log), offset=10_000).read_lines()) == ["short"]


def test_moved_away_and_not_recreated_keeps_reading_the_old_file(tmp_path):
    log = tmp_path / "server.log"
    append(log, b"one\n")
    follower = LogFollower(str(log))
    assert list(follower.read_lines()) == ["one"]
    os.rename(log, tmp_path / "server.log.1")
    append(tmp_path / "server.log.1", b"two\n")
    assert list(follower.read_lines()) == ["two"]
