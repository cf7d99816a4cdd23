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


def test_taking_ownership_hands_over_links_themselves_never_their_targets(tmp_path):
    venv = make_venv(tmp_path)
    for path in (venv, venv / "bin"):
        os.chown(str(path), 0, 0)
    outside = tmp_path / "outside"
    outside.write_text("x")
    os.symlink(str(outside), str(venv / "bin" / "python"))
    result = run_module("venv_files", path=str(venv), owner="nobody", take_ownership=True)
    assert result["changed"], result
    assert owner_mode(venv / "bin")[:2] == (NOBODY, NOBODY) and owner_mode(venv / "bin" / "python")[:2] == (NOBODY, NOBODY)
    assert owner_mode(outside)[:2] == (0, 0) and owner_mode(venv)[:2] == (NOBODY, NOBODY)
