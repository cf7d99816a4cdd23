"""_common/owner.py: whose code a virtualenv runs, and running it as that user, bounded."""
import os
import time

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import owner
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption

NOBODY = 65534


def make_venv(root):
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    os.symlink("/usr/bin/python3", str(root / "bin" / "python"))
    return root


@pytest.mark.parametrize("owned", ["", "bin", "bin/python", "lib"])
def test_whoever_owns_what_decides_the_code_is_the_owner(tmp_path, owned):
    venv = make_venv(tmp_path / "venv")
    os.chown(str(venv / owned) if owned else str(venv), NOBODY, NOBODY, follow_symlinks=False)
    assert owner.venv_owner_uid(str(venv)) == NOBODY


def test_the_stable_link_counts_and_root_alone_is_root(tmp_path):
    make_venv(tmp_path / "venv.cu130")
    os.symlink("venv.cu130", str(tmp_path / "venv"))
    assert owner.venv_owner_uid(str(tmp_path / "venv")) == 0
    os.lchown(str(tmp_path / "venv"), NOBODY, NOBODY)
    assert owner.venv_owner_uid(str(tmp_path / "venv")) == NOBODY


def test_a_missing_virtualenv_is_named(tmp_path):
    with pytest.raises(InvalidOption) as raised:
        owner.venv_owner_uid(str(tmp_path / "absent"))
    assert str(raised.value) == "venv_path=%s: No such file or directory" % (tmp_path / "absent")


def test_code_runs_as_its_owner_in_an_empty_environment_and_never_as_root_for_a_user_without_a_name():
    assert owner.owner_argv(NOBODY, ["/v/bin/python", "-c", "x"], "venv_path", {"B": "2", "A": "1"}) == [
        "runuser", "-u", "nobody", "--", "env", "-i", owner.CLEAN_PATH, "A=1", "B=2", "/v/bin/python", "-c", "x"]
    assert owner.owner_argv(0, ["/v/bin/python"], "venv_path") == ["env", "-i", owner.CLEAN_PATH, "/v/bin/python"]
    with pytest.raises(InvalidOption) as raised:
        owner.owner_argv(4242, ["/v/bin/python"], "venv_path=/v")
    assert str(raised.value).startswith("venv_path=/v belongs to uid 4242, which has no user on this host")


def test_a_run_that_hangs_is_killed_with_everything_it_started_at_its_deadline():
    begin = time.monotonic()
    rc, _out, err = owner.run_as_owner(NOBODY, ["/bin/sh", "-c", "sleep 60 & sleep 60"], "venv_path", timeout=1)
    assert time.monotonic() - begin < 10
    assert rc == -9 and err.endswith("the command did not finish within 1 s and was killed")


def test_output_and_files_are_bounded(tmp_path):
    rc, out, _err = owner.run_bounded(["/bin/sh", "-c", "head -c 40000000 /dev/zero"], timeout=60)
    assert len(out) == owner.OUTPUT_LIMIT and rc != 0
    target = tmp_path / "big"
    rc, _out, _err = owner.run_bounded(["/bin/sh", "-c", "head -c 40000000 /dev/zero > %s" % target], timeout=60)
    assert rc != 0 and target.stat().st_size <= owner.OUTPUT_LIMIT


def test_a_run_as_a_user_really_runs_as_that_user():
    rc, out, _err = owner.run_as_owner(NOBODY, ["/usr/bin/id", "-u"], "venv_path", timeout=30)
    assert (rc, out.strip()) == (0, str(NOBODY))


def test_accounts_are_looked_up_by_name_with_their_supplementary_groups():
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account, user_name
    assert account("nobody")["uid"] == NOBODY and user_name(NOBODY) == "nobody"
    assert account("nobody-here-at-all") is None and user_name(4242) is None


def test_an_address_space_bound_stops_a_run_that_reads_without_end():
    rc, _out, err = owner.run_bounded(["/usr/bin/python3", "-c", "open('/dev/zero', 'rb').read()"], timeout=60,
                                      memory=128 << 20)
    assert rc != 0 and "MemoryError" in err


def test_a_command_that_cannot_start_is_answered_as_a_shell_would():
    assert owner.run_answered(["/nonexistent/nvidia-smi", "-q"], timeout=5) == (
        127, "", "/nonexistent/nvidia-smi: No such file or directory")
    begin = time.monotonic()
    rc, _out, err = owner.run_answered(["/bin/sh", "-c", "sleep 60"], timeout=1)
    assert time.monotonic() - begin < 10 and rc == -9 and "killed" in err
