"""venv_files, as root, on a virtualenv of an unprivileged user's: root's and the owner's files
written through the directory's descriptor, never through a link the owner planted."""
import os

from conftest import run_module

NOBODY = 65534


def make_venv(tmp_path):
    home = tmp_path / "home"
    venv = home / "ml-env.cu130-1a2b3c4d"
    (venv / "bin").mkdir(parents=True)
    for path in (home, venv, venv / "bin"):
        os.chown(str(path), NOBODY, NOBODY)
    return venv


FILES = [{"name": "pip.conf", "content": "[install]\nconstraint = /x\n", "root": True},
         {"name": "ml-stack.json", "content": "{}\n"}]


def owner_mode(path):
    info = os.lstat(str(path))
    return info.st_uid, info.st_gid, info.st_mode & 0o7777


def test_root_and_owner_files_are_written_once_and_then_left_alone(tmp_path):
    venv = make_venv(tmp_path)
    result = run_module("venv_files", path=str(venv), owner="nobody", files=FILES)
    assert result["changed"] and result["written"] == ["pip.conf", "ml-stack.json"], result
    assert owner_mode(venv / "pip.conf") == (0, 0, 0o644)
    assert owner_mode(venv / "ml-stack.json")[:2] == (NOBODY, NOBODY)
    assert not run_module("venv_files", path=str(venv), owner="nobody", files=FILES)["changed"]
    removed = run_module("venv_files", path=str(venv), owner="nobody", files=[{"name": "ml-stack.json", "state": "absent"}])
    assert removed["removed"] == ["ml-stack.json"] and not (venv / "ml-stack.json").exists()


def test_check_mode_says_what_it_would_write_and_writes_nothing(tmp_path):
    venv = make_venv(tmp_path)
    result = run_module("venv_files", check_mode=True, path=str(venv), owner="nobody", files=FILES)
    assert result["changed"] and result["written"] == ["pip.conf", "ml-stack.json"]
    assert sorted(os.listdir(str(venv))) == ["bin"]


def test_a_virtualenv_swapped_for_a_link_is_never_entered(tmp_path):
    venv = make_venv(tmp_path)
    etc = tmp_path / "etc"
    etc.mkdir()
    os.rename(str(venv), str(tmp_path / "moved"))
    os.symlink(str(etc), str(venv))
    result = run_module("venv_files", path=str(venv), owner="nobody", files=FILES)
    assert result.get("failed") and "is a link or not a directory" in result["msg"], result
    assert os.listdir(str(etc)) == []


def test_a_link_planted_at_a_file_name_is_replaced_never_written_through(tmp_path):
    venv = make_venv(tmp_path)
    target = tmp_path / "shadow"
    target.write_text("root's\n")
    os.symlink(str(target), str(venv / "pip.conf"))
    os.mkfifo(str(venv / "ml-stack.json"))
    result = run_module("venv_files", path=str(venv), owner="nobody", files=FILES, run_timeout=60)
    assert result["changed"], result
    assert target.read_text() == "root's\n" and not os.path.islink(str(venv / "pip.conf"))
    assert (venv / "ml-stack.json").read_text() == "{}\n"


def test_a_virtualenv_of_another_owner_is_refused(tmp_path):
    venv = make_venv(tmp_path)
    os.chown(str(venv), 1, 1)
    result = run_module("venv_files", path=str(venv), owner="nobody", files=FILES)
    assert result.get("failed") and "belongs to daemon, not to nobody" in result["msg"], result
    assert sorted(os.listdir(str(venv))) == ["bin"]


def roots_venv(tmp_path, link):
    """A virtualenv of root's, as an earlier release built them, with link(target, name) of a file of root's
    outside it placed in its bin; (the virtualenv, that file)."""
    venv = make_venv(tmp_path)
    for path in (venv, venv / "bin"):
        os.chown(str(path), 0, 0)
    outside = tmp_path / "outside"
    outside.write_text("x")
    link(str(outside), str(venv / "bin" / "linked"))
    return venv, outside


def test_taking_ownership_hands_over_links_themselves_never_their_targets(tmp_path):
    venv, outside = roots_venv(tmp_path, os.symlink)
    checked = run_module("venv_files", check_mode=True, path=str(venv), owner="nobody", take_ownership=True)
    assert checked["changed"] and owner_mode(venv / "bin")[:2] == (0, 0), checked
    result = run_module("venv_files", path=str(venv), owner="nobody", take_ownership=True)
    assert result["changed"], result
    assert owner_mode(venv / "bin")[:2] == (NOBODY, NOBODY) and owner_mode(venv / "bin" / "linked")[:2] == (NOBODY, NOBODY)
    assert owner_mode(outside)[:2] == (0, 0) and owner_mode(venv)[:2] == (NOBODY, NOBODY)
    for check_mode in (True, False):
        again = run_module("venv_files", check_mode=check_mode, path=str(venv), owner="nobody", take_ownership=True)
        assert not again["changed"], again


def test_check_mode_refuses_a_hard_link_that_taking_ownership_would_refuse(tmp_path):
    venv, outside = roots_venv(tmp_path, os.link)
    checked = run_module("venv_files", check_mode=True, path=str(venv), owner="nobody", take_ownership=True)
    assert checked.get("failed") and "bin/linked belongs to root and has 2 hard links" in checked["msg"], checked
    assert owner_mode(venv / "bin")[:2] == (0, 0) and owner_mode(outside)[:2] == (0, 0)


def test_what_a_group_or_others_can_write_is_closed_to_them_links_never_followed(tmp_path):
    venv = make_venv(tmp_path)
    module = venv / "lib" / "python3.11" / "site-packages" / "some.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    outside = tmp_path / "outside"
    outside.write_text("")
    os.symlink(str(outside), str(venv / "bin" / "python"))
    for path, mode in ((module, 0o646), (venv / "bin", 0o775), (outside, 0o666)):
        os.chmod(str(path), mode)
    checked = run_module("venv_files", check_mode=True, path=str(venv), owner="nobody", clear_group_other_write=True)
    assert checked["changed"] and checked["write_cleared_count"] == 2, checked
    assert owner_mode(module)[2] == 0o646 and owner_mode(venv / "bin")[2] == 0o775
    result = run_module("venv_files", path=str(venv), owner="nobody", files=FILES, clear_group_other_write=True)
    assert result["write_cleared"] == checked["write_cleared"] == [
        {"path": str(module), "mode_before": "0646", "mode": "0644"},
        {"path": str(venv / "bin"), "mode_before": "0775", "mode": "0755"}], result
    assert owner_mode(module)[2] == 0o644 and owner_mode(venv / "bin")[2] == 0o755 and owner_mode(outside)[2] == 0o666
    again = run_module("venv_files", path=str(venv), owner="nobody", files=FILES, clear_group_other_write=True)
    assert not again["changed"] and again["write_cleared"] == [] and again["write_cleared_count"] == 0, again


def test_an_entry_of_a_third_user_fails_naming_it(tmp_path):
    venv = make_venv(tmp_path)
    os.chown(str(venv / "bin"), 1, 1)
    result = run_module("venv_files", path=str(venv), owner="nobody", files=FILES, clear_group_other_write=True)
    assert result.get("failed"), result
    assert result["msg"] == (
        "ml_stack_venv_path=%s: %s belongs to daemon, who can change it: root changes modes only on entries of nobody "
        "or root. Give it to its owner (chown) or remove it, then run again." % (venv, venv / "bin"))
    assert sorted(os.listdir(str(venv))) == ["bin"]


def test_the_entries_closed_are_counted_all_and_listed_first_twenty(tmp_path):
    venv = make_venv(tmp_path)
    for index in range(25):
        (venv / "bin" / str(index)).write_text("")
        os.chmod(str(venv / "bin" / str(index)), 0o666)
    result = run_module("venv_files", check_mode=True, path=str(venv), owner="nobody", clear_group_other_write=True)
    assert result["write_cleared_count"] == 25 and len(result["write_cleared"]) == 20, result
