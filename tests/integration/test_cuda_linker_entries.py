"""cuda_linker_entries on a directory of linker configuration files."""
import os

from conftest import run_module


def conf_dir(tmp_path):
    (tmp_path / "987_cuda-12.conf").write_text("/usr/local/cuda-12/targets/x86_64-linux/lib\n")
    (tmp_path / "987_cuda-13.conf").write_text("/usr/local/cuda-13/targets/x86_64-linux/lib\n")
    (tmp_path / "mixed.conf").write_text("/usr/local/cuda-12.8/lib64\n/opt/vendor/lib\n")
    (tmp_path / "README").write_text("/usr/local/cuda-12.8/lib64\n")  # not a .conf file: ldconfig ignores it
    return tmp_path


def test_disables_the_files_made_only_of_stale_entries_and_reports_mixed_ones(tmp_path):
    directory = conf_dir(tmp_path)
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(directory))
    assert result["changed"] is True
    assert result["disabled"] == [{"from": str(directory / "987_cuda-12.conf"),
                                   "to": str(directory / "987_cuda-12.conf.disabled-by-blackwell-gpu-node")}]
    assert result["mixed_files"] == [str(directory / "mixed.conf")]
    assert sorted(os.listdir(directory)) == ["987_cuda-12.conf.disabled-by-blackwell-gpu-node", "987_cuda-13.conf",
                                             "README", "mixed.conf"]
    again = run_module("cuda_linker_entries", major=13, conf_dir=str(directory))
    assert again["changed"] is False and again["disabled"] == []
    assert [entry["file"] for entry in again["stale_entries"]] == [str(directory / "mixed.conf")]


def test_check_mode_and_report_change_nothing(tmp_path):
    directory = conf_dir(tmp_path)
    predicted = run_module("cuda_linker_entries", check_mode=True, major=13, conf_dir=str(directory))
    assert predicted["changed"] is True and len(predicted["disabled"]) == 1
    reported = run_module("cuda_linker_entries", major=13, conf_dir=str(directory), stale="report")
    assert reported["changed"] is False and reported["disabled"] == []
    assert len(reported["stale_entries"]) == 2
    assert (directory / "987_cuda-12.conf").exists()


def test_missing_directory_fails_naming_it(tmp_path):
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(tmp_path / "nope"))
    assert result["failed"] is True and result["msg"] == "conf_dir=%s is not a directory" % (tmp_path / "nope")


def test_a_file_that_is_not_utf8_is_left_alone_with_a_warning(tmp_path):
    directory = conf_dir(tmp_path)
    (directory / "latin1.conf").write_bytes(b"# R\xe9glage\n/usr/local/cuda-12.8/lib64\n")
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(directory))
    assert result["undecodable_files"] == [str(directory / "latin1.conf")]
    assert any("latin1.conf is not UTF-8 text" in warning for warning in result["warnings"])
    assert (directory / "latin1.conf").exists() and len(result["disabled"]) == 1


def test_a_suffix_ending_in_conf_fails_before_anything_is_renamed(tmp_path):
    directory = conf_dir(tmp_path)
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(directory), suffix=".old.conf")
    assert result["failed"] is True
    assert result["msg"] == "suffix='.old.conf' must not end in .conf: ldconfig would still read the file"
    assert (directory / "987_cuda-12.conf").exists()


def test_own_file_is_written_first_and_its_earlier_text_is_not_taken_for_a_stale_entry(tmp_path):
    directory = conf_dir(tmp_path)
    own = directory / "000-blackwell-gpu-node-cuda.conf"
    # What the host ran before: CUDA 12.8's lib64, in the file the role now points at CUDA 13.0.
    own.write_text("/usr/local/cuda-12.8/lib64\n")
    own.chmod(0o600)
    content = "# managed\n/usr/local/cuda-13.0/lib64\n"
    predicted = run_module("cuda_linker_entries", check_mode=True, major=13, conf_dir=str(directory),
                           own_file=str(own), own_content=content)
    assert predicted["changed"] is True and predicted["own_file_changed"] is True
    assert own.read_text() == "/usr/local/cuda-12.8/lib64\n"
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(directory), own_file=str(own),
                        own_content=content)
    assert result["own_file_changed"] is True
    assert own.read_text() == content and oct(own.stat().st_mode & 0o7777) == "0o644" and own.stat().st_uid == 0
    assert [rename["from"] for rename in result["disabled"]] == [str(directory / "987_cuda-12.conf")]
    assert str(own) not in [entry["file"] for entry in result["stale_entries"]]
    again = run_module("cuda_linker_entries", major=13, conf_dir=str(directory), own_file=str(own),
                       own_content=content)
    assert again["changed"] is False and again["own_file_changed"] is False


def test_own_file_replaces_a_link_rather_than_writing_through_it(tmp_path):
    directory = conf_dir(tmp_path)
    target = tmp_path.parent / (tmp_path.name + "-elsewhere")
    target.write_text("untouched\n")
    own = directory / "000-blackwell-gpu-node-cuda.conf"
    own.symlink_to(target)
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(directory), own_file=str(own),
                        own_content="/usr/local/cuda-13.0/lib64\n")
    assert result["own_file_changed"] is True
    assert not own.is_symlink() and own.read_text() == "/usr/local/cuda-13.0/lib64\n"
    assert target.read_text() == "untouched\n"


def test_own_file_outside_conf_dir_fails_before_anything_changes(tmp_path):
    directory = conf_dir(tmp_path)
    result = run_module("cuda_linker_entries", major=13, conf_dir=str(directory), own_file=str(tmp_path.parent / "x.conf"),
                        own_content="/usr/local/cuda-13.0/lib64\n")
    assert result["failed"] is True
    assert result["msg"] == "own_file=%s must be a *.conf file directly in conf_dir=%s, which ldconfig reads" % (
        tmp_path.parent / "x.conf", directory)
    assert (directory / "987_cuda-12.conf").exists()
