import re
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.linker import (
    classify,
    cuda_major,
    entries,
    option_problems,
    own_file_needs_writing,
    own_file_problem,
    read_conf_files,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

DATA = Path(__file__).resolve().parents[3] / "data"


def recorded_ld_so_conf_d():
    """/etc/ld.so.conf.d of the 2x H200 host, as `head -n 50 /etc/ld.so.conf.d/*` printed it there."""
    text = (DATA / "h200" / "cuda_host.txt").read_text()
    section = text.split("$ head -n 50 /etc/ld.so.conf.d/*\n", 1)[1].split("\n[exit ", 1)[0]
    files = {}
    for match in re.finditer(r"==> (\S+) <==\n(.*?)(?=\n==> |\Z)", section, flags=re.S):
        files[match.group(1)] = match.group(2)
    return files


def links(mapping):
    """A realpath() over the given links (each a prefix), for hosts other than this one."""
    def resolve(path):
        for link, target in mapping.items():
            if path == link or path.startswith(link + "/"):
                return target + path[len(link):]
        return path
    return resolve


H200_LINKS = links({"/usr/local/cuda": "/usr/local/cuda-13.0", "/usr/local/cuda-13": "/usr/local/cuda-13.0"})


def test_the_recorded_h200_host_has_nothing_stale_for_cuda_13():
    files = recorded_ld_so_conf_d()
    assert "/etc/ld.so.conf.d/987_cuda-13.conf" in files and len(files) == 7
    assert classify(files, 13, H200_LINKS) == dict(stale_entries=[], stale_files=[], mixed_files=[])


def test_the_recorded_h200_host_seen_from_cuda_12_is_all_stale_but_the_mixed_file_is_left_alone():
    files = recorded_ld_so_conf_d()
    files["/etc/ld.so.conf.d/nvidia.conf"] += "/opt/other/lib\n"
    found = classify(files, 12, H200_LINKS)
    assert found["stale_files"] == ["/etc/ld.so.conf.d/000_cuda.conf", "/etc/ld.so.conf.d/987_cuda-13.conf",
                                    "/etc/ld.so.conf.d/gds-13-0.conf"]
    assert found["mixed_files"] == ["/etc/ld.so.conf.d/nvidia.conf"]
    assert {entry["major"] for entry in found["stale_entries"]} == {13}


def test_a_cuda_12_8_entry_on_a_cuda_13_host():
    files = {"/etc/ld.so.conf.d/987_cuda-12.conf": "/usr/local/cuda-12/targets/x86_64-linux/lib\n",
             "/etc/ld.so.conf.d/987_cuda-13.conf": "/usr/local/cuda-13/targets/x86_64-linux/lib\n",
             "/etc/ld.so.conf.d/cuda-12-8.conf": "# added by the runfile\n/usr/local/cuda-12.8/lib64\n\n"}
    found = classify(files, 13, links({"/usr/local/cuda-12": "/usr/local/cuda-12.8"}))
    assert found["stale_files"] == ["/etc/ld.so.conf.d/987_cuda-12.conf", "/etc/ld.so.conf.d/cuda-12-8.conf"]
    assert found["stale_entries"][1] == dict(file="/etc/ld.so.conf.d/cuda-12-8.conf", entry="/usr/local/cuda-12.8/lib64",
                                             major=12)


def test_unversioned_link_counts_as_the_version_it_points_at():
    files = {"/etc/ld.so.conf.d/000_cuda.conf": "/usr/local/cuda/targets/x86_64-linux/lib\n"}
    assert classify(files, 13, links({"/usr/local/cuda": "/usr/local/cuda-12.8"}))["stale_files"] == [
        "/etc/ld.so.conf.d/000_cuda.conf"]
    assert classify(files, 13, links({"/usr/local/cuda": "/usr/local/cuda-13.0"}))["stale_files"] == []


@pytest.mark.parametrize("entry,major", [("/usr/local/cuda-12.8/lib64", 12), ("/usr/local/cuda-13/lib64", 13),
                                         ("/usr/local/cuda-13.0", 13), ("/usr/local/cuda-130x/lib", None),
                                         ("/usr/lib/x86_64-linux-gnu", None), ("/usr/local/cuda-\u0661\u0662/lib", None)])
def test_cuda_major(entry, major):
    assert cuda_major(entry, lambda path: path) == major


def test_entries_skip_comments_blank_lines_and_includes():
    assert entries("# multiarch\n/lib/x86_64-linux-gnu  # main\n\ninclude /etc/other/*.conf\n/usr/lib\n") == [
        "/lib/x86_64-linux-gnu", "/usr/lib"]


def test_a_file_that_is_not_utf8_is_reported_and_never_classified(tmp_path):
    (tmp_path / "latin1.conf").write_bytes(b"# R\xe9glage du site\n/usr/local/cuda-12/lib64\n")
    (tmp_path / "987_cuda-12.conf").write_bytes(b"/usr/local/cuda-12/targets/x86_64-linux/lib\n")
    (tmp_path / "notes.txt").write_bytes(b"\xff\n")
    files, undecodable = read_conf_files(str(tmp_path))
    assert files == {str(tmp_path / "987_cuda-12.conf"): "/usr/local/cuda-12/targets/x86_64-linux/lib\n"}
    assert undecodable == [str(tmp_path / "latin1.conf")]


@pytest.mark.parametrize("major, suffix, problem", [
    (0, ".disabled", "major=0 must be a CUDA major version, 1 or more"),
    (-12, ".disabled", "major=-12 must be a CUDA major version, 1 or more"),
    (13, "", "suffix='' must not be empty: the file would keep its name"),
    (13, "/../../x", "suffix='/../../x' must not hold '/': the file would move out of conf_dir"),
    (13, ".old.conf", "suffix='.old.conf' must not end in .conf: ldconfig would still read the file"),
])
def test_options_that_would_disable_the_wrong_files_are_refused(major, suffix, problem):
    assert option_problems(major, suffix) == [problem]


def test_a_control_character_in_the_suffix_is_refused():
    assert option_problems(13, ".off\n") == [control_character_problem(".off\n", "suffix")]


def test_the_default_options_are_fine():
    assert option_problems(13, ".disabled-by-blackwell-gpu-node") == []


def test_cuda_1_is_a_major_version():
    assert option_problems(1, ".disabled-by-blackwell-gpu-node") == []


def test_own_file_must_be_a_conf_file_directly_in_conf_dir():
    assert own_file_problem("/etc/ld.so.conf.d", "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf") is None
    assert own_file_problem("/etc/ld.so.conf.d/", "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf") is None
    for path in ("/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda", "/etc/000-blackwell-gpu-node-cuda.conf",
                 "/etc/ld.so.conf.d/sub/x.conf"):
        assert own_file_problem("/etc/ld.so.conf.d", path) == (
            "own_file=%s must be a *.conf file directly in conf_dir=/etc/ld.so.conf.d, which ldconfig reads" % path)


def test_own_file_is_written_unless_it_is_roots_0644_with_exactly_the_content():
    content = "/usr/local/cuda-13.0/lib64\n"
    good = {"uid": 0, "gid": 0, "mode": 0o644, "content": content}
    assert not own_file_needs_writing(good, content)
    assert own_file_needs_writing(None, content)
    assert own_file_needs_writing(dict(good, uid=1000), content)
    assert own_file_needs_writing(dict(good, mode=0o664), content)
    assert own_file_needs_writing(dict(good, content="/usr/local/cuda-12.8/lib64\n"), content)
    # The group is not compared, as the converged check does not compare it either.
    assert not own_file_needs_writing(dict(good, gid=4), content)
