"""plugins/modules/model_readahead.py: a thin shell over the read-ahead core that never reports a change, reads
nothing in check mode, and refuses an option out of its range by the option's name."""
import json
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.modules import model_readahead as module


def result_of(args, capsys, monkeypatch):
    # How a module receives its arguments on every supported core, ansible-core 2.15 on Python 3.9 included.
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # ansible-core 2.19 decodes them by a named profile; older cores have none.
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture(name="model")
def fixture_model(tmp_path):
    """A model directory of a config and two shards, none of them in the page cache where the filesystem lets go."""
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    for number in (1, 2):
        (tmp_path / ("model-%05d-of-00002.safetensors" % number)).write_bytes(b"w" * (1 << 20))
    for path in tmp_path.iterdir():
        descriptor = os.open(str(path), os.O_RDONLY)
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(descriptor)
    return tmp_path


def test_a_run_reads_the_model_and_changes_nothing(model, capsys, monkeypatch):
    before = sorted((path.name, path.stat().st_mtime_ns, path.stat().st_size) for path in model.iterdir())
    result = result_of({"path": str(model)}, capsys, monkeypatch)
    assert not result.get("failed") and result["changed"] is False
    assert [item["name"] for item in result["files"]] == ["config.json", "model-00001-of-00002.safetensors",
                                                          "model-00002-of-00002.safetensors"]
    assert all(item["status"] in ("read", "resident") for item in result["files"])
    assert result["warm_after_bytes"] in (None, result["total_bytes"])
    assert result["summary"].startswith("Read ")
    assert sorted((path.name, path.stat().st_mtime_ns, path.stat().st_size) for path in model.iterdir()) == before


def test_check_mode_plans_and_reads_nothing(model, capsys, monkeypatch):
    def refuse(*args):
        raise AssertionError("read in check mode")
    monkeypatch.setattr(os, "readv", refuse)
    monkeypatch.setattr(os, "posix_fadvise", refuse)
    result = result_of({"path": str(model), "_ansible_check_mode": True}, capsys, monkeypatch)
    assert not result.get("failed") and result["changed"] is False and result["check_mode"]
    assert [item["status"] for item in result["files"]] == ["planned"] * 3 and result["read_bytes"] == 0


def test_what_is_passed_over_does_not_mark_the_task_skipped(model, capsys, monkeypatch):
    os.mkfifo(str(model / "fifo.safetensors"))
    result = result_of({"path": str(model)}, capsys, monkeypatch)
    # Ansible takes a true `skipped` in a result for a skipped task.
    assert "skipped" not in result and not result.get("failed")
    assert [item["name"] for item in result["passed_over"]] == ["fifo.safetensors"]


@pytest.mark.parametrize("options, message", [
    ({"share": 0}, "share=0.0: give the fraction of MemAvailable read-ahead may fill, more than 0 and at most 0.9"),
    ({"share": 0.95}, "share=0.95: give the fraction of MemAvailable read-ahead may fill, more than 0 and at most 0.9"),
    ({"max_bytes": 0}, "max_bytes=0: give a positive number of bytes, or leave max_bytes out for no cap beyond share"),
    ({"timeout": 0}, "timeout=0: give at least 1 second"),
])
def test_an_option_out_of_its_range_is_refused_by_its_name_before_anything_is_read(
        model, capsys, monkeypatch, options, message):
    monkeypatch.setattr(module, "read_ahead", lambda *args: pytest.fail("read with a bad option"))
    result = result_of(dict({"path": str(model)}, **options), capsys, monkeypatch)
    assert result["failed"] and result["msg"].startswith(message)


def test_a_path_that_is_no_directory_fails_naming_it(tmp_path, capsys, monkeypatch):
    result = result_of({"path": str(tmp_path / "missing")}, capsys, monkeypatch)
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("path=%s is missing: point path at the model directory" % (tmp_path / "missing"))
