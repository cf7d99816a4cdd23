"""venv_files against a virtualenv directory its owner swaps for a link to a directory of root's, and FIFOs and
links planted at the names of the files root writes there: root writes into the owner's directory or nowhere,
replaces what was planted instead of writing through it, and hands over nothing but the virtualenv's own entries."""
import os

import pytest

MODULE = "venv_files"
FILES = [
    {"name": "pip.conf", "content": "[global]\nconstraint = ml-stack-constraints.txt\n", "root": True},
    {"name": "ml-stack-constraints.txt", "content": "torch===2.9.1+cu130\n", "root": True},
    {"name": "ml-stack.json", "content": "{\"profile\": \"cu130\"}\n", "root": False},
]


def setting(case, **args):
    if not case.collection.has_module(MODULE):
        case.not_applicable("no venv_files module in this collection (the ml_stack role wrote the files itself)")
        pytest.skip("no venv_files")
    venv = case.make_venv()
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


def test_the_virtualenv_swapped_with_a_link_to_etc_in_a_loop_is_never_written_through(hostile):
    case = hostile(MODULE, "venv dir <-> link to /etc swap loop")
    venv, args = setting(case)
    link = case.replace(case.home / "etc.link", "link", "/etc")
    with case.swapping(venv.path, link):
        for _attempt in range(5):
            run = case.module(MODULE, args)
            case.check(run, "bounded")
    case.finish()
