"""venv_files against a virtualenv directory its owner swaps for a link to a directory of root's, and FIFOs and
links planted at the names of the files root writes there: root writes into the owner's directory or nowhere,
replaces what was planted instead of writing through it, and hands over nothing but the virtualenv's own entries.
Told to take the group's and others' write from the virtualenv, it changes the modes of the virtualenv's own
entries and of nothing a link there points at, nor of what the owner swaps in while root works, and never opens a
socket or blocks on a FIFO."""
import os
import stat

import pytest

import hostile_harness

MODULE = "venv_files"
FILES = [
    {"name": "pip.conf", "content": "[global]\nconstraint = ml-stack-constraints.txt\n", "root": True},
    {"name": "ml-stack-constraints.txt", "content": "torch===2.9.1+cu130\n", "root": True},
    {"name": "ml-stack.json", "content": "{\"profile\": \"cu130\"}\n", "root": False},
]


def setting(case, built_by_owner=True, **args):
    if not case.collection.has_module(MODULE):
        case.not_applicable("no venv_files module in this collection (the ml_stack role wrote the files itself)")
        pytest.skip("no venv_files")
    venv = case.make_venv(owner=built_by_owner)
    return venv, dict(dict(path=str(venv.path), owner=case.user.name, files=FILES), **args)


def regular_files(case, venv):
    """The written files, regular and of the owners asked; problems otherwise."""
    problems = []
    for entry in FILES:
        path = venv.path / entry["name"]
        if path.is_symlink() or not path.is_file():
            problems.append("%s is not a regular file afterwards" % entry["name"])
        elif os.stat(str(path)).st_uid != (0 if entry["root"] else case.user.uid):
            problems.append("%s has the wrong owner" % entry["name"])
    return problems


def test_control_writes_the_files(hostile):
    case = hostile(MODULE, "control")
    venv, args = setting(case)
    run = case.module(MODULE, args)
    case.check(run, "ok", problems=regular_files(case, venv))
    case.finish()


@pytest.mark.parametrize("take_ownership", [False, True], ids=["write", "take_ownership"])
def test_the_virtualenv_swapped_for_a_link_to_etc_is_refused(hostile, take_ownership):
    case = hostile(MODULE, "venv dir -> /etc%s" % (" (take_ownership)" if take_ownership else ""))
    venv, args = setting(case, take_ownership=take_ownership)
    venv.path.rename(venv.path.with_name("moved"))
    case.replace(venv.path, "link", "/etc")
    run = case.module(MODULE, args)
    case.check(run, "refused", needle="ml_stack_venv_path")
    case.finish()


def test_fifos_and_links_at_the_file_names_are_replaced_not_followed(hostile):
    case = hostile(MODULE, "pip.conf -> /etc/shadow, constraints FIFO, marker -> /dev/zero")
    venv, args = setting(case)
    case.replace(venv.path / "pip.conf", "link", "/etc/shadow")
    case.replace(venv.path / "ml-stack-constraints.txt", "fifo")
    case.replace(venv.path / "ml-stack.json", "link", "/dev/zero")
    run = case.module(MODULE, args)
    case.check(run, "bounded", problems=regular_files(case, venv))
    case.finish()


def test_take_ownership_hands_over_no_link_target(hostile):
    case = hostile(MODULE, "take_ownership with links to /etc/shadow and /etc inside")
    venv, args = setting(case, take_ownership=True)
    for name, target in (("shadow", "/etc/shadow"), ("etc", "/etc")):
        os.symlink(target, str(venv.path / name))  # root's links: take_ownership hands them over, never follows
    run = case.module(MODULE, args)
    problems = [] if os.stat("/etc/shadow").st_uid == 0 else ["/etc/shadow changed owner"]
    case.check(run, "bounded", problems=problems + regular_files(case, venv))
    case.finish()


def test_take_ownership_refuses_a_hard_link_to_a_file_of_roots(hostile):
    case = hostile(MODULE, "take_ownership, hard link to root's 0666 file inside")
    # Built as root, as an earlier release did, with a package directory its owner can write (one it installed).
    venv, args = setting(case, built_by_owner=False, take_ownership=True)
    package = venv.site / "own_package"
    package.mkdir()
    case.chown(package)
    # A file of root's that anyone can write, on the virtualenv's filesystem: the kernel lets the owner link it
    # (fs.protected_hardlinks asks no more than read and write access), for root to give it with the virtualenv.
    open_file = case.dir / "anyone.txt"
    open_file.write_text("")
    os.chmod(str(open_file), 0o666)
    linked = package / "linked.py"
    case.as_user(["ln", str(open_file), str(linked)])
    before = modes(case, leaving_out=venv.path)
    run = case.module(MODULE, args)
    problems = unchanged(before, modes(case, leaving_out=venv.path))
    if os.lstat(str(open_file)).st_uid != 0:
        problems.append("root's file linked into the virtualenv was given to uid %d" % os.lstat(str(open_file)).st_uid)
    case.check(run, "refused", needle=str(linked), problems=problems)
    case.finish()


def test_the_virtualenv_swapped_with_a_link_to_etc_in_a_loop_is_never_written_through(hostile):
    case = hostile(MODULE, "venv dir <-> link to /etc swap loop")
    venv, args = setting(case)
    link = case.replace(case.home / "etc.link", "link", "/etc")
    with case.swapping(venv.path, link):
        for _attempt in range(5):
            run = case.module(MODULE, args)
            case.check(run, "bounded")
    case.finish()


# clear_group_other_write: root changes modes in a tree its owner keeps changing. What the links planted there point
# at, and what the owner swaps in for a file or a directory root is about to change, lies outside the virtualenv:
# its mode and owner must stay what they were.
SYSTEM_TARGETS = ("/etc", "/etc/shadow", "/tmp")


def closable(case):
    """setting() with clear_group_other_write, and in the virtualenv a package directory, a module in it and the
    virtualenv's directory itself opened to the group and others, as its owner may leave them."""
    if not case.collection.has_option(MODULE, "clear_group_other_write"):
        case.not_applicable("venv_files has no clear_group_other_write (the role changed no mode in the virtualenv)")
        pytest.skip("no clear_group_other_write")
    venv, args = setting(case, clear_group_other_write=True)
    package = venv.site / "opened"
    package.mkdir()
    case.chown(package)
    module = case.replace(package / "__init__.py", "file")
    for path, mode in ((module, 0o666), (package, 0o777), (venv.path, 0o775)):
        os.chmod(str(path), mode)
    return venv, args


def open_to_all(case):
    """A file of root's and a directory of root's, with a file in it, outside the virtualenv, that anyone can
    write: what the owner's links point at. Their modes are what root must never change."""
    shared = case.root_dir("shared", 0o777)
    for path in (shared / "anyone.txt", case.private / "anyone.conf"):
        path.write_text("")
        os.chmod(str(path), 0o666)
    return case.private / "anyone.conf", shared


def plant_links(case, venv):
    """The owner's links in the virtualenv to root's files and directories, and to a directory of its own outside
    the virtualenv, each writable by the group or others or private to root."""
    open_file, shared = open_to_all(case)
    spare = case.user_dir("spare", 0o777)
    os.chmod(str(case.replace(spare / "notes.txt", "file")), 0o666)
    for name, target in (("shadow", "/etc/shadow"), ("etc", "/etc"), ("tmp", "/tmp"), ("anyone.conf", open_file),
                         ("shared", shared), ("spare", "../spare")):
        case.replace(venv.path / name, "link", target)
    case.replace(venv.site / "opened" / "sitecustomize.py", "link", open_file)


def modes(case, leaving_out=None):
    """(mode, owner, group) of every entry of the case's tree, links not followed, leaving out the directory
    leaving_out and all below it (the virtualenv), and of the system's entries the planted links point at."""
    found = dict((path, os.lstat(path)) for path in SYSTEM_TARGETS)
    found[str(case.dir)] = os.lstat(str(case.dir))
    for directory, dirs, names in os.walk(str(case.dir)):
        dirs[:] = [name for name in dirs if os.path.join(directory, name) != str(leaving_out)]
        for name in dirs + names:
            path = os.path.join(directory, name)
            found[path] = os.lstat(path)
    return dict((path, (info.st_mode, info.st_uid, info.st_gid)) for path, info in found.items())


def unchanged(before, after):
    """Problems for each entry of before whose mode or owner is not the same in after."""
    def shown(entry):
        return "gone" if entry is None else "%s %d:%d" % (stat.filemode(entry[0]), entry[1], entry[2])
    return ["%s is %s, was %s" % (path, shown(after.get(path)), shown(before[path]))
            for path in sorted(before) if after.get(path) != before[path]]


def still_open(venv):
    """Problems for each entry of the virtualenv, its directory included and links excepted, that its group or
    others can still write."""
    paths = [str(venv.path)]
    for directory, dirs, names in os.walk(str(venv.path)):
        paths += [os.path.join(directory, name) for name in dirs + names]
    found = [(path, os.lstat(path).st_mode) for path in paths]
    return ["%s is still writable by its group or others" % path for path, mode in found
            if not stat.S_ISLNK(mode) and mode & 0o022]


def test_clear_group_other_write_control_closes_the_virtualenv(hostile):
    case = hostile(MODULE, "clear_group_other_write control")
    venv, args = closable(case)
    run = case.module(MODULE, args)
    case.check(run, "ok", problems=still_open(venv) + regular_files(case, venv))
    case.finish()


def closes_it_all_and_nothing_outside(case, venv, args):
    """Run the module on the virtualenv; bounded when it closed every entry and changed nothing outside."""
    before = modes(case, leaving_out=venv.path)
    run = case.module(MODULE, args)
    problems = unchanged(before, modes(case, leaving_out=venv.path)) + still_open(venv) + regular_files(case, venv)
    case.check(run, "bounded", problems=problems)
    case.finish()


def test_clear_group_other_write_changes_nothing_a_link_inside_points_at(hostile):
    case = hostile(MODULE, "clear_group_other_write, links to /etc/shadow, /etc, /tmp, 0666 file, 0777 dir inside")
    venv, args = closable(case)
    plant_links(case, venv)
    closes_it_all_and_nothing_outside(case, venv, args)


def test_clear_group_other_write_in_a_swap_loop_changes_no_link_target(hostile):
    case = hostile(MODULE, "clear_group_other_write, g+w file and dir <-> links to 0666 file, 0777 dir swap loop")
    venv, args = closable(case)
    open_file, shared = open_to_all(case)
    module = case.replace(venv.site / "swapped.py", "file")
    pairs = ((module, case.replace(venv.site / "swapped-link.py", "link", open_file)),
             (venv.site / "opened", case.replace(venv.site / "swapped-link", "link", shared)))
    before = modes(case, leaving_out=venv.path)
    for _attempt in range(5):
        # The owner opens whichever of each pair is its own again, for root to close while it swaps the two names.
        for first, second in pairs:
            own = second if first.is_symlink() else first
            for entry in [own] + (list(own.iterdir()) if own.is_dir() else []):
                os.chmod(str(entry), 0o777 if entry.is_dir() else 0o666)
        with case.swapping(*pairs[0]), case.swapping(*pairs[1]):
            run = case.module(MODULE, args)
            case.check(run, "bounded", problems=unchanged(before, modes(case, leaving_out=venv.path)))
    case.finish()


def test_clear_group_other_write_closes_a_fifo_without_blocking(hostile):
    case = hostile(MODULE, "clear_group_other_write, FIFO o+w inside, no writer")
    venv, args = closable(case)
    os.chmod(str(case.replace(venv.site / "opened" / "queue", "fifo")), 0o666)
    closes_it_all_and_nothing_outside(case, venv, args)


def test_clear_group_other_write_refuses_a_socket_without_opening_it(hostile):
    case = hostile(MODULE, "clear_group_other_write, socket o+w inside")
    venv, args = closable(case)
    path = venv.site / "opened" / "control.sock"
    # The owner's socket, bound by a path relative to its home: the whole path is longer than a socket's may be.
    case.as_user([hostile_harness.SYSTEM_PYTHON, "-c", "import os, socket, sys; socket.socket(socket.AF_UNIX)"
                  ".bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777)", str(path.relative_to(case.home))])
    before = modes(case, leaving_out=venv.path)
    run = case.module(MODULE, args)
    problems = unchanged(before, modes(case, leaving_out=venv.path))
    if stat.S_IMODE(os.lstat(str(path)).st_mode) != 0o777:
        problems.append("the socket's mode changed")
    case.check(run, "refused", needle=str(path), problems=problems)
    case.finish()


def test_clear_group_other_write_in_check_mode_changes_nothing(hostile):
    case = hostile(MODULE, "clear_group_other_write in check mode, links inside")
    venv, args = closable(case)
    plant_links(case, venv)
    opened = len(still_open(venv))
    before = modes(case)
    run = case.module(MODULE, args, check_mode=True)
    problems = unchanged(before, modes(case))
    if run.result is not None and not (run.result.get("changed") and run.result.get("write_cleared_count") == opened):
        problems.append("did not report the %d entries it would close: %s" % (opened, run.result.get("write_cleared")))
    case.check(run, "bounded", problems=problems)
    case.finish()


def test_clear_group_other_write_refuses_a_hard_link_to_a_file_of_roots(hostile):
    case = hostile(MODULE, "clear_group_other_write, hard link to root's 0666 file inside")
    venv, args = closable(case)
    # A file of root's that anyone can write, where the owner can reach it, on the virtualenv's filesystem: the
    # kernel lets the owner link it (fs.protected_hardlinks asks no more than read and write access).
    open_file = case.dir / "anyone.txt"
    open_file.write_text("")
    os.chmod(str(open_file), 0o666)
    linked = venv.site / "opened" / "linked.py"
    case.as_user(["ln", str(open_file), str(linked)])
    before = modes(case, leaving_out=venv.path)
    run = case.module(MODULE, args)
    problems = unchanged(before, modes(case, leaving_out=venv.path))
    if stat.S_IMODE(os.stat(str(open_file)).st_mode) != 0o666:
        problems.append("root's file linked into the virtualenv is %04o, was 0666"
                        % stat.S_IMODE(os.stat(str(open_file)).st_mode))
    case.check(run, "refused", needle=str(linked), problems=problems)
    case.finish()
