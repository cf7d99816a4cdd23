"""plugins/modules/runtime_env_state.py and the JIT cache directories: looked at with the virtualenv, reported as
reasons, made only when rendering and not in check mode, and a bad owner refused before anything changes. The
virtualenv itself is a converged stand-in here (its own paths are tested in test_runtime_env.py and the hostile
suite)."""
import errno
import json
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import user_name
from ansible_collections.blackwell.gpu_node.plugins.modules import runtime_env_state as module

SITE_PACKAGES = "/opt/ml-env/lib/python3.11/site-packages"
DIRECTORIES = ["cu130-0123456789ab", "cu130-0123456789ab/triton", "cu130-0123456789ab/triton/cache"]


def result_of(args, capsys, monkeypatch):
    # How a module receives its arguments on every supported core, ansible-core 2.15 on Python 3.9 included.
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # ansible-core 2.19 decodes them by a named profile; older cores have none.
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture(name="args")
def fixture_args(tmp_path, monkeypatch):
    """The module's arguments for a converged virtualenv and a cache root below tmp_path, this user's."""
    monkeypatch.setattr(module, "observe_venv", lambda venv_path, script, names, run: {
        "venv": {"purelib": SITE_PACKAGES, "hook": SITE_PACKAGES + "/_blackwell_gpu_node_env.py", "environ": {}},
        "files": {}, "not_regular": []})
    monkeypatch.setattr(module, "unconverged_reasons", lambda observed, environment, files: [])
    monkeypatch.setattr(module, "to_write", lambda venv_path, observed, files: [])
    monkeypatch.setattr(module, "render", lambda venv_path, observed, files, names, written: None)
    monkeypatch.setattr(module, "verify", lambda venv_path, observed, script, environment, run: (
        None, {"hook": SITE_PACKAGES + "/_blackwell_gpu_node_env.py"}))
    os.chmod(str(tmp_path), 0o755)
    return dict(venv_path="/opt/ml-env", script="", environment={"CUDA_HOME": "/usr/local/cuda-13.0"}, files={},
                cache_root=str(tmp_path / "home" / ".cache" / "blackwell-gpu-node"), cache_directories=DIRECTORIES,
                cache_owner=user_name(os.getuid()))


def test_missing_cache_directories_are_reasons_and_a_look_makes_none(args, capsys, monkeypatch):
    result = result_of(dict(args, render=False), capsys, monkeypatch)
    assert not result["converged"] and not result["changed"]
    assert result["reasons"][-1] == "the JIT cache directory %s/%s is missing" % (args["cache_root"], DIRECTORIES[-1])
    assert not os.path.exists(os.path.dirname(args["cache_root"]))


def test_check_mode_names_the_directories_it_would_make_and_makes_none(args, capsys, monkeypatch):
    result = result_of(dict(args, _ansible_check_mode=True), capsys, monkeypatch)
    assert result["changed"] and result["written"] == []
    assert result["cache_directories"][-1] == args["cache_root"] + "/" + DIRECTORIES[-1]
    assert not os.path.exists(os.path.dirname(args["cache_root"]))


def test_rendering_makes_them_and_the_next_run_is_converged(args, capsys, monkeypatch):
    result = result_of(args, capsys, monkeypatch)
    assert result["changed"] and not result.get("failed")
    assert all(os.path.isdir(args["cache_root"] + "/" + below) for below in DIRECTORIES)
    again = result_of(args, capsys, monkeypatch)
    assert again["converged"] and not again["changed"] and again["cache_directories"] == []


def test_an_owner_the_host_lacks_fails_before_anything_changes(args, capsys, monkeypatch):
    result = result_of(dict(args, cache_owner="nobody-here"), capsys, monkeypatch)
    assert result["failed"] and result["msg"] == (
        "runtime_env_cache_owner=nobody-here is not a user on this host: the JIT caches belong to the user the server "
        "runs as (the role blackwell.gpu_node.service_user creates it). Nothing was changed on the host.")
    assert not os.path.exists(os.path.dirname(args["cache_root"]))


def test_a_link_in_the_cache_tree_fails_before_the_virtualenv_is_written(args, capsys, monkeypatch, tmp_path):
    written = []
    monkeypatch.setattr(module, "to_write", lambda venv_path, observed, files: ["_blackwell_gpu_node_env.py"])
    monkeypatch.setattr(module, "render", lambda venv_path, observed, files, names, done: written.append(names))
    os.makedirs(args["cache_root"])
    os.symlink(str(tmp_path), args["cache_root"] + "/" + DIRECTORIES[0])
    result = result_of(args, capsys, monkeypatch)
    assert result["failed"] and "is a symbolic link, not a directory" in result["msg"]
    assert result["msg"].startswith("runtime_env_cache_root=%s: " % args["cache_root"])
    assert written == []


def test_without_a_cache_root_no_directory_is_looked_at(args, capsys, monkeypatch):
    result = result_of(dict(args, cache_root=None, cache_owner=None), capsys, monkeypatch)
    assert result["converged"] and result["cache_directories"] == []
    assert not os.path.exists(os.path.dirname(args["cache_root"]))


def test_a_failing_look_names_the_cache_root_and_changes_nothing(args, capsys, monkeypatch):
    def failing(root, directories, owner, create=False):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(module, "settle_cache_directories", failing)
    result = result_of(args, capsys, monkeypatch)
    assert result["failed"] and result["msg"] == (
        "runtime_env_cache_root=%s: looking at the JIT cache directories failed: Input/output error. Nothing was "
        "changed on the host." % args["cache_root"])


def test_a_directory_that_cannot_be_made_names_the_cache_root_and_writes_nothing_into_the_virtualenv(
        args, capsys, monkeypatch):
    written, real = [], module.settle_cache_directories

    def full(root, directories, owner, create=False):
        if create:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(root, directories, owner, create)

    monkeypatch.setattr(module, "settle_cache_directories", full)
    monkeypatch.setattr(module, "to_write", lambda venv_path, observed, files: ["_blackwell_gpu_node_env.py"])
    monkeypatch.setattr(module, "render", lambda venv_path, observed, files, names, done: written.append(names))
    result = result_of(args, capsys, monkeypatch)
    assert result["failed"] and result["written"] == [] and written == []
    assert result["msg"].startswith("runtime_env_cache_root=%s: making the JIT cache directories failed: No space "
                                    "left on device. Nothing was written into the virtualenv" % args["cache_root"])
