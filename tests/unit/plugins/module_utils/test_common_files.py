"""_common/files.py: what root reads, writes and walks in a tree another user can change."""
import errno
import os
import stat

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import files
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption

NOBODY = 65534


def test_a_regular_file_is_read_with_its_owner_and_mode(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    os.chmod(str(tmp_path / "f"), 0o640)
    assert files.read_regular(str(tmp_path / "f"), 10) == {"uid": 0, "gid": 0, "mode": 0o640, "size": 3, "data": b"abc"}
    assert files.read_regular(str(tmp_path / "missing"), 10) is None


@pytest.mark.parametrize("make, kind", [
    (lambda path: os.symlink("/etc/shadow", path), "is a symbolic link"),
    (lambda path: os.symlink("/dev/zero", path), "is a symbolic link"),
    (os.mkfifo, "is a FIFO, not a regular file"),
    (os.mkdir, "is a directory, not a regular file"),
])
def test_links_fifos_and_directories_are_refused_at_once_without_blocking(tmp_path, make, kind):
    path = str(tmp_path / "f")
    make(path)
    with pytest.raises(files.FileRefused) as refused:
        files.read_regular(path, 10)
    assert str(refused.value).startswith("%s %s" % (path, kind))


def test_a_file_over_its_bound_is_refused_or_cut_and_never_read_whole(tmp_path):
    path = str(tmp_path / "sparse")
    with open(path, "wb") as sparse:
        sparse.truncate(8 << 30)
    with pytest.raises(files.FileRefused, match="is larger than the 16 bytes it may hold here"):
        files.read_regular(path, 16)
    assert files.read_regular(path, 16, cut=True)["data"] == b"\0" * 16
    assert files.file_state(path, 16) is None
    with pytest.raises(files.FileRefused):
        files.sha1_regular(path, 1 << 20)


def test_the_hash_is_of_the_content_read_through_one_descriptor(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert files.sha1_regular(str(tmp_path / "f"), 3) == "a9993e364706816aba3e25717850c26c9cd0d89d"
    os.mkfifo(str(tmp_path / "fifo"))
    with pytest.raises(files.FileRefused):
        files.sha1_regular(str(tmp_path / "fifo"), 3)


def test_a_walk_never_takes_a_link_or_dot_dot_and_knows_each_levels_owner(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.chown(str(tmp_path / "a"), NOBODY, NOBODY)
    os.symlink("/etc", str(tmp_path / "a" / "link"))
    root = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        descriptor, levels = files.walk(root, "a/b", "x")
        os.close(descriptor)
        assert [(name, uid) for name, uid, _gid, _mode in levels] == [("a", NOBODY), ("b", 0)]
        with pytest.raises(files.FileRefused):
            files.walk(root, "a/link", "x")
        for relative in ("a/../a", "/a", "a//b", "./a"):
            with pytest.raises(InvalidOption):
                files.walk(root, relative, "x")
        descriptor, levels = files.walk(root, "a/new/deeper", "x", create_mode=0o750, owner=(NOBODY, NOBODY))
        os.close(descriptor)
        info = os.lstat(str(tmp_path / "a" / "new" / "deeper"))
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (NOBODY, 0o750)
    finally:
        os.close(root)


def test_a_directory_is_trusted_only_when_root_alone_can_change_every_level(tmp_path):
    os.close(files.trusted_directory(str(tmp_path), "state_dir"))  # /tmp is sticky, the levels below root's
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o777)
    with pytest.raises(InvalidOption, match=r"^state_dir=%s/x: %s its group or others can write it \(mode 0777\)" % (
            shared, shared)):
        files.trusted_directory(str(shared / "x"), "state_dir", 0o700)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(str(theirs), NOBODY, NOBODY)
    with pytest.raises(InvalidOption, match="it belongs to nobody, not to root"):
        files.trusted_directory(str(theirs), "state_dir")
    os.symlink(str(tmp_path), str(tmp_path / "link"))
    with pytest.raises(InvalidOption, match="is a symbolic link, not a directory"):
        files.trusted_directory(str(tmp_path / "link" / "x"), "state_dir", 0o700)
    created = tmp_path / "new" / "state"
    os.close(files.trusted_directory(str(created), "state_dir", 0o700))
    info = os.lstat(str(created))
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o700)
    with pytest.raises(FileNotFoundError):
        files.trusted_directory(str(tmp_path / "absent"), "state_dir")


def test_a_state_subdirectory_is_root_s_alone_created_0700_under_a_0750_state_dir_or_none(tmp_path):
    state_dir = tmp_path / "state"
    assert files.trusted_state_subdirectory(str(state_dir), "snapshots", "the snapshots of state_dir") is None
    os.close(files.trusted_state_subdirectory(str(state_dir), "snapshots", "the snapshots of state_dir", True))
    modes = [(os.lstat(str(path)).st_uid, stat.S_IMODE(os.lstat(str(path)).st_mode))
             for path in (state_dir, state_dir / "snapshots")]
    assert modes == [(0, 0o750), (0, 0o700)]
    os.close(files.trusted_state_subdirectory(str(state_dir), "snapshots", "the snapshots of state_dir"))
    os.chmod(str(state_dir / "snapshots"), 0o770)
    with pytest.raises(InvalidOption, match=r"^the snapshots of state_dir=%s/snapshots: .* its group or others can "
                                            r"write it" % state_dir):
        files.trusted_state_subdirectory(str(state_dir), "snapshots", "the snapshots of state_dir")


def test_a_write_replaces_a_planted_link_and_leaves_nothing_when_it_fails(tmp_path, monkeypatch):
    target = tmp_path / "target"
    target.write_text("kept")
    os.symlink(str(target), str(tmp_path / "f"))
    directory = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        files.write_atomically(directory, "f", "new", 0o600, (NOBODY, NOBODY))
        info = os.lstat(str(tmp_path / "f"))
        assert (target.read_text(), (tmp_path / "f").read_text()) == ("kept", "new")
        assert (stat.S_ISREG(info.st_mode), info.st_uid, stat.S_IMODE(info.st_mode)) == (True, NOBODY, 0o600)

        def full(descriptor, data):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(files.os, "write", full)
        with pytest.raises(OSError):
            files.write_atomically(directory, "f", "newer", 0o600)
        assert sorted(os.listdir(str(tmp_path))) == ["f", "target"] and (tmp_path / "f").read_text() == "new"
    finally:
        os.close(directory)


@pytest.mark.parametrize("drift", ["mode", "owner", "text", "link", "missing"])
def test_a_settled_file_is_rewritten_when_its_mode_owner_or_text_drifted_and_only_told_in_check_mode(tmp_path, drift):
    path = tmp_path / "unit"
    (tmp_path / "target").write_text("kept")
    if drift == "link":
        os.symlink(str(tmp_path / "target"), str(path))
    elif drift != "missing":
        path.write_text("old" if drift == "text" else "text")
        os.chmod(str(path), 0o666 if drift == "mode" else 0o644)
        os.chown(str(path), NOBODY if drift == "owner" else 0, 0)
    before = os.lstat(str(path)) if drift != "missing" else None
    directory = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert files.settle_file(directory, "unit", "text", 0o644, check=True) is True
        if before is not None:
            after = os.lstat(str(path))
            assert (after.st_ino, after.st_mode, after.st_uid) == (before.st_ino, before.st_mode, before.st_uid)
        else:
            assert not os.path.lexists(str(path))
        assert files.settle_file(directory, "unit", "text", 0o644) is True
        info = os.lstat(str(path))
        assert (stat.S_ISREG(info.st_mode), stat.S_IMODE(info.st_mode), info.st_uid) == (True, 0o644, 0)
        assert path.read_text() == "text" and (tmp_path / "target").read_text() == "kept"
        assert files.settle_file(directory, "unit", "text", 0o644) is False
        assert files.settle_file(directory, "unit", "text", 0o644, check=True) is False
    finally:
        os.close(directory)


def test_a_link_is_repointed_in_one_rename_keeping_its_owner_and_nothing_else_is_replaced(tmp_path):
    os.symlink("old", str(tmp_path / "link"))
    os.lchown(str(tmp_path / "link"), NOBODY, NOBODY)
    (tmp_path / "file").write_text("x")
    directory = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        files.replace_link(directory, "link", "new", str(tmp_path / "link"))
        assert os.readlink(str(tmp_path / "link")) == "new" and os.lstat(str(tmp_path / "link")).st_uid == NOBODY
        with pytest.raises(files.FileRefused, match="is a file, not a link"):
            files.replace_link(directory, "file", "new", str(tmp_path / "file"))
    finally:
        os.close(directory)


def test_a_directory_below_a_users_home_is_entered_only_as_itself(tmp_path):
    home = tmp_path / "home"
    (home / "venv").mkdir(parents=True)
    os.close(files.open_beneath(str(home / "venv"), "venv_path"))
    os.rename(str(home / "venv"), str(home / "moved"))
    os.symlink("/etc", str(home / "venv"))
    with pytest.raises(InvalidOption, match="is a link or not a directory"):
        files.open_beneath(str(home / "venv"), "venv_path")
    with pytest.raises(FileNotFoundError):
        files.open_beneath(str(home / "absent"), "venv_path")


def hand_over(tree, check=False):
    """chown_tree of tree to nobody: whether it handed (with check, would hand) anything over."""
    directory = os.open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
    try:
        return files.chown_tree(directory, str(tree), NOBODY, NOBODY, check)
    finally:
        os.close(directory)


def owners(tree):
    return dict((str(path.relative_to(tree)), os.lstat(str(path)).st_uid) for path in [tree] + list(tree.rglob("*")))


def root_tree(tmp_path):
    """A tree of root's with a module two levels down, and a file of root's outside it."""
    tree = tmp_path / "tree"
    (tree / "lib" / "site").mkdir(parents=True)
    (tree / "lib" / "site" / "x.py").write_text("")
    outside = tmp_path / "outside"
    outside.write_text("")
    return tree, outside


def test_a_tree_is_handed_over_bottom_up_links_themselves_never_their_targets(tmp_path):
    tree, outside = root_tree(tmp_path)
    os.symlink(str(outside), str(tree / "lib" / "link"))
    assert hand_over(tree) is True
    assert set(owners(tree).values()) == {NOBODY} and os.lstat(str(outside)).st_uid == 0
    assert hand_over(tree) is False and hand_over(tree, check=True) is False


@pytest.mark.parametrize("entry", ["", "lib", "lib/site/x.py"])
def test_check_mode_tells_whether_anything_would_be_handed_over_and_hands_nothing(tmp_path, entry):
    tree, _outside = root_tree(tmp_path)
    hand_over(tree)
    os.lchown(str(tree / entry), 0, 0)
    before = owners(tree)
    assert hand_over(tree, check=True) is True and owners(tree) == before
    assert hand_over(tree) is True and set(owners(tree).values()) == {NOBODY}


def test_check_mode_refuses_a_hard_link_as_the_run_would(tmp_path):
    tree, outside = root_tree(tmp_path)
    os.link(str(outside), str(tree / "lib" / "linked"))
    before = owners(tree)
    with pytest.raises(files.FileRefused, match="has 2 hard links"):
        hand_over(tree, check=True)
    assert owners(tree) == before


@pytest.mark.parametrize("uid, name", [(0, "root"), (1, "daemon")])
def test_a_hard_link_to_a_file_outside_is_refused_before_anything_is_handed_over(tmp_path, uid, name):
    tree, outside = root_tree(tmp_path)
    os.chown(str(outside), uid, uid)
    # The owner links a file from elsewhere on the filesystem into a directory of the tree it can write.
    os.link(str(outside), str(tree / "lib" / "linked"))
    before = owners(tree)
    with pytest.raises(files.FileRefused) as refused:
        hand_over(tree)
    assert str(refused.value) == (
        "%s belongs to %s and has 2 hard links: giving it to the virtualenv's owner would give them a file outside "
        "the virtualenv. Remove the hard link from the virtualenv" % (tree / "lib" / "linked", name))
    # lib/site and x.py, walked before lib/linked, were not handed over either.
    assert owners(tree) == before and os.lstat(str(outside)).st_uid == uid


def test_a_hard_linked_file_that_is_already_the_owners_is_left_alone(tmp_path):
    tree, elsewhere = root_tree(tmp_path)
    os.chown(str(elsewhere), NOBODY, NOBODY)
    os.chmod(str(elsewhere), 0o4755)
    os.link(str(elsewhere), str(tree / "lib" / "tool"))
    hand_over(tree)
    assert set(owners(tree).values()) == {NOBODY}
    # Not even given to its own owner again, which would have taken its set-user-ID bit.
    assert stat.S_IMODE(os.stat(str(elsewhere)).st_mode) == 0o4755


def link_on_open(monkeypatch, tmp_path, outside, entry):
    """Make the walk's open of entry (its name in its directory) find a hard link to outside there instead: what
    a tree's owner can swap in after root looked at the entry."""
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):
        if path == entry.name:
            os.link(str(outside), str(tmp_path / "linked"))
            os.rename(str(tmp_path / "linked"), str(entry))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)


def test_a_hard_link_swapped_in_after_the_lstat_is_refused_by_its_fstat(tmp_path, monkeypatch):
    tree, outside = root_tree(tmp_path)
    # Root's own module, looked at and found to be handed over, is replaced by a hard link to root's file.
    link_on_open(monkeypatch, tmp_path, outside, tree / "lib" / "site" / "x.py")
    with pytest.raises(files.FileRefused) as refused:
        hand_over(tree)
    assert str(refused.value).startswith("%s belongs to root and has 2 hard links" % (tree / "lib" / "site" / "x.py"))
    assert os.lstat(str(outside)).st_uid == 0


def test_a_file_is_created_exclusively_once_and_a_link_at_its_name_is_left_alone(tmp_path):
    directory = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert files.create_exclusively(directory, "lock", "first\n", 0o600) is True
        assert files.create_exclusively(directory, "lock", "second\n", 0o600) is False
        os.symlink("/etc/passwd-of-nobody", str(tmp_path / "planted"))
        assert files.create_exclusively(directory, "planted", "third\n", 0o600) is False
    finally:
        os.close(directory)
    assert (tmp_path / "lock").read_text() == "first\n"
    assert stat.S_IMODE(os.stat(str(tmp_path / "lock")).st_mode) == 0o600
    assert os.readlink(str(tmp_path / "planted")) == "/etc/passwd-of-nobody"
    assert sorted(os.listdir(str(tmp_path))) == ["lock", "planted"]


def closable_tree(tmp_path):
    """A virtualenv of nobody's whose file, directory and FIFO its group or others can write, a root's file among
    them, and a link to a file of root's outside it that anyone can write."""
    tree = tmp_path / "venv"
    (tree / "lib" / "site").mkdir(parents=True)
    (tree / "lib" / "site" / "x.py").write_text("")
    (tree / "pip.conf").write_text("")
    os.mkfifo(str(tree / "lib" / "fifo"))
    outside = tmp_path / "outside"
    outside.write_text("")
    os.symlink(str(outside), str(tree / "lib" / "link"))
    for path in (tree, tree / "lib", tree / "lib" / "site", tree / "lib" / "site" / "x.py", tree / "lib" / "fifo"):
        os.chown(str(path), NOBODY, NOBODY)
    for path, mode in ((tree / "lib" / "site" / "x.py", 0o646), (tree / "lib" / "site", 0o775),
                       (tree / "lib" / "fifo", 0o662), (tree / "pip.conf", 0o664), (outside, 0o666),
                       (tree / "lib", 0o755), (tree, 0o777)):
        os.chmod(str(path), mode)
    return tree, outside


def modes(tree):
    return dict((str(path.relative_to(tree)), stat.S_IMODE(os.lstat(str(path)).st_mode))
                for path in [tree] + list(tree.rglob("*")) if not path.is_symlink())


def test_group_and_other_write_is_cleared_bottom_up_through_descriptors_never_through_a_link(tmp_path):
    tree, outside = closable_tree(tmp_path)
    before = modes(tree)
    directory = os.open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
    try:
        would = list(files.clear_group_other_write(directory, str(tree) + "/", (NOBODY, 0), check=True))
        assert modes(tree) == before
        cleared = list(files.clear_group_other_write(directory, str(tree), (NOBODY, 0)))
        assert list(files.clear_group_other_write(directory, str(tree), (NOBODY, 0))) == []
    finally:
        os.close(directory)
    assert would == cleared
    # Bottom-up: below a directory comes before it, the tree itself last.
    assert sorted(cleared[:2]) == [(str(tree / "lib" / "fifo"), 0o662, 0o640),
                                   (str(tree / "lib" / "site" / "x.py"), 0o646, 0o644)]
    assert cleared[2:] == [(str(tree / "lib" / "site"), 0o775, 0o755), (str(tree / "pip.conf"), 0o664, 0o644),
                           (str(tree), 0o777, 0o755)]
    assert modes(tree) == {".": 0o755, "lib": 0o755, "lib/site": 0o755, "lib/site/x.py": 0o644, "lib/fifo": 0o640,
                           "pip.conf": 0o644}
    assert stat.S_IMODE(os.stat(str(outside)).st_mode) == 0o666


@pytest.mark.parametrize("check", [True, False])
def test_an_entry_of_another_user_is_refused_by_name_whatever_its_mode(tmp_path, check):
    tree, _outside = closable_tree(tmp_path)
    os.chown(str(tree / "lib" / "site" / "x.py"), 1, 1)
    os.chmod(str(tree / "lib" / "site" / "x.py"), 0o644)
    before = modes(tree)
    directory = os.open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(files.FileRefused) as refused:
            list(files.clear_group_other_write(directory, str(tree), (NOBODY, 0), check))
        # The first entry of the walk: nothing was changed before it.
        assert modes(tree) == before
        assert len(list(files.clear_group_other_write(directory, str(tree), None, check=True))) == 4
    finally:
        os.close(directory)
    assert str(refused.value) == (
        "%s belongs to daemon, who can change it: root changes modes only on entries of nobody or root. Give it to "
        "its owner (chown) or remove it" % (tree / "lib" / "site" / "x.py"))


def test_a_socket_its_group_can_write_is_refused_and_never_opened(tmp_path):
    import socket
    tree = tmp_path / "venv"
    tree.mkdir()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tree / "socket"))
        os.chmod(str(tree / "socket"), 0o775)
        directory = os.open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(files.FileRefused, match="socket is a socket that its group or others can write"):
                list(files.clear_group_other_write(directory, str(tree), (0,)))
        finally:
            os.close(directory)
    finally:
        server.close()


def test_a_walk_past_its_bound_stops_before_it_changes_more(tmp_path):
    tree, _outside = closable_tree(tmp_path)
    directory = os.open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
    try:
        # Six entries below the tree, the fourth to change the last before the sixth.
        cleared = []
        with pytest.raises(files.FileRefused, match="it holds more than 5 entries"):
            for entry in files.clear_group_other_write(directory, str(tree), (NOBODY, 0), max_entries=5):
                cleared.append(entry)
        assert len(cleared) == 4 and stat.S_IMODE(os.stat(str(tree)).st_mode) == 0o777
        assert [entry[0] for entry in files.clear_group_other_write(directory, str(tree), (NOBODY, 0),
                                                                    max_entries=6)] == [str(tree)]
    finally:
        os.close(directory)
    assert files.clear_group_other_write.__defaults__ == (False, files.TREE_ENTRIES)
    assert files.TREE_ENTRIES == 500000


def test_an_entry_swapped_after_it_was_looked_at_is_judged_by_itself(tmp_path, monkeypatch):
    tree, _outside = closable_tree(tmp_path)
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):
        if path == "x.py":
            # The owner puts a private file of root's (a hard link to one, say) where the open file was.
            swapped = tmp_path / "secret"
            swapped.write_text("")
            os.chmod(str(swapped), 0o600)
            os.rename(str(swapped), str(tree / "lib" / "site" / "x.py"))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    directory = real_open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
    try:
        cleared = [entry[0] for entry in files.clear_group_other_write(directory, str(tree), (NOBODY, 0))]
    finally:
        os.close(directory)
    assert str(tree / "lib" / "site" / "x.py") not in cleared and len(cleared) == 4
    assert stat.S_IMODE(os.lstat(str(tree / "lib" / "site" / "x.py")).st_mode) == 0o600


def clear(tree, uids=(NOBODY, 0), check=False):
    """The (entry, mode before, mode after) of every entry clear_group_other_write changes in tree."""
    directory = os.open(str(tree), os.O_RDONLY | os.O_DIRECTORY)
    try:
        return list(files.clear_group_other_write(directory, str(tree), uids, check))
    finally:
        os.close(directory)


@pytest.mark.parametrize("check", [True, False])
def test_a_hard_link_to_a_file_of_roots_is_refused_and_the_file_left_as_it_was(tmp_path, check):
    tree, outside = closable_tree(tmp_path)
    # The owner links a file of root's that anyone can write, from elsewhere on the filesystem, into its tree.
    os.link(str(outside), str(tree / "lib" / "site" / "linked.py"))
    with pytest.raises(files.FileRefused) as refused:
        clear(tree, check=check)
    assert str(refused.value) == (
        "%s is a file of root's with 2 hard links: changing its mode would change root's file outside the "
        "virtualenv. Remove the hard link from the virtualenv" % (tree / "lib" / "site" / "linked.py"))
    assert stat.S_IMODE(os.stat(str(outside)).st_mode) == 0o666


def test_a_hard_link_of_roots_swapped_in_after_the_lstat_is_refused_by_its_fstat(tmp_path, monkeypatch):
    tree, outside = closable_tree(tmp_path)
    # The owner's own file, closable, is replaced by a hard link to root's file once root has looked at it.
    link_on_open(monkeypatch, tmp_path, outside, tree / "lib" / "site" / "x.py")
    with pytest.raises(files.FileRefused, match=r"^%s is a file of root's with 2 hard links" % (
            tree / "lib" / "site" / "x.py")):
        clear(tree)
    assert stat.S_IMODE(os.stat(str(outside)).st_mode) == 0o666


@pytest.mark.parametrize("owner, uids", [(NOBODY, (NOBODY, 0)), (0, (0, 0))], ids=["owners", "roots-in-roots"])
def test_a_hard_linked_file_of_the_trees_owner_is_changed(tmp_path, owner, uids):
    tree = tmp_path / "venv"
    tree.mkdir()
    elsewhere = tmp_path / "cache-entry"
    elsewhere.write_text("")
    os.link(str(elsewhere), str(tree / "linked.py"))
    for path in (tree, elsewhere):
        os.chown(str(path), owner, owner)
    os.chmod(str(tree), 0o755)
    os.chmod(str(elsewhere), 0o666)
    # Its owner could make the same change: root grants it nothing by making it.
    assert clear(tree, uids) == [(str(tree / "linked.py"), 0o666, 0o644)]
    assert stat.S_IMODE(os.stat(str(elsewhere)).st_mode) == 0o644


def test_an_entry_swapped_for_a_link_between_the_lstat_and_the_open_is_refused_by_name(tmp_path, monkeypatch):
    tree, outside = closable_tree(tmp_path)
    real_open = os.open
    swapped = []

    def swapping_open(path, flags, *args, **kwargs):
        if path == "x.py" and not swapped:
            # Root has looked at the owner's file, closable; the owner puts a link to root's open file at its name.
            swapped.append(path)
            os.unlink(str(tree / "lib" / "site" / "x.py"))
            os.symlink(str(outside), str(tree / "lib" / "site" / "x.py"))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(files.FileRefused) as refused:
        clear(tree)
    assert swapped and str(refused.value) == (
        "changing the mode of %s failed: it was replaced by a symbolic link after root looked at it, and root does "
        "not follow a link there" % (tree / "lib" / "site" / "x.py"))
    assert stat.S_IMODE(os.stat(str(outside)).st_mode) == 0o666


def test_an_entry_whose_mode_change_fails_is_named_with_what_happened(tmp_path, monkeypatch):
    tree, _outside = closable_tree(tmp_path)
    stubborn = os.lstat(str(tree / "pip.conf")).st_ino
    real_fchmod = os.fchmod

    def failing_fchmod(descriptor, mode):
        if os.fstat(descriptor).st_ino == stubborn:
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
        real_fchmod(descriptor, mode)

    monkeypatch.setattr(os, "fchmod", failing_fchmod)
    with pytest.raises(files.FileRefused) as refused:
        clear(tree)
    assert str(refused.value) == "changing the mode of %s failed: %s" % (tree / "pip.conf", os.strerror(errno.EPERM))
