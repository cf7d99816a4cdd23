"""hacking/stack_lock.py: pip's reports made into a stack lock, the diff of two locks, the platform tags and
environments a profile is resolved for, and the pip runs it makes. No network: the reports are small ones written
here the way pip 23 writes them."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CHECKOUT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("stack_lock", str(CHECKOUT / "hacking" / "stack_lock.py"))
stack_lock = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(stack_lock)

PYPI = "https://pypi.org/simple"
PYTORCH = "https://download.pytorch.org/whl/cu130"
FILES = "https://files.pythonhosted.org/packages/aa/bb/"
KERNEL_URL = "https://github.com/sgl-project/whl/releases/download/v0.3.21/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"


def sha(text):
    return (text * 64)[:64]


def item(name, version, url, digest, requires=None, extras=None, direct=False):
    """One `install` entry of pip's --report."""
    entry = {"metadata": {"name": name, "version": version}, "is_direct": direct,
             "download_info": {"url": url, "archive_info": {"hash": "sha256=" + digest, "hashes": {"sha256": digest}}}}
    if requires is not None:
        entry["metadata"]["requires_dist"] = requires
    if extras is not None:
        entry["requested_extras"] = extras
    return entry


def report(env, items):
    return {"version": "1", "environment": stack_lock.marker_environment(env), "install": items}


def single_index(name, url, digest):
    return PYPI


def convert(reports, mirrors=None, index_of=single_index, indexes=(PYPI,)):
    return stack_lock.lock_from_reports("p", ["sglang==0.5.9"], list(indexes), reports, mirrors or {}, index_of)


def test_each_wheel_lists_the_environments_it_was_chosen_for_and_the_lock_lists_them_in_order():
    reports = {
        "cp310-x86_64": report("cp310-x86_64", [
            item("torch", "2.11.0", FILES + "torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl", sha("a")),
            item("filelock", "3.20.0", FILES + "filelock-3.20.0-py3-none-any.whl", sha("c"))]),
        "cp312-x86_64": report("cp312-x86_64", [
            item("torch", "2.11.0", FILES + "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", sha("b")),
            item("filelock", "3.20.0", FILES + "filelock-3.20.0-py3-none-any.whl", sha("c"))]),
    }
    lock = convert(reports)
    assert lock["format"] == 1 and lock["profile"] == "p" and lock["requirements"] == ["sglang==0.5.9"]
    assert lock["indexes"] == [PYPI]
    assert lock["environments"] == ["cp310-x86_64", "cp312-x86_64"]
    assert lock["distributions"]["torch"]["wheels"] == {
        "torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl": {
            "sha256": sha("a"), "url": FILES + "torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl", "index": PYPI,
            "environments": ["cp310-x86_64"]},
        "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl": {
            "sha256": sha("b"), "url": FILES + "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", "index": PYPI,
            "environments": ["cp312-x86_64"]},
    }
    assert lock["distributions"]["filelock"]["wheels"]["filelock-3.20.0-py3-none-any.whl"]["environments"] == [
        "cp310-x86_64", "cp312-x86_64"]


def test_names_are_normalized_and_the_version_is_the_metadatas_and_the_file_name_is_unquoted():
    lock = convert({"cp312-x86_64": report("cp312-x86_64", [
        item("Flashinfer_Python", "0.6.4+cu130", FILES + "flashinfer_python-0.6.4%2Bcu130-py3-none-any.whl", sha("d"))])})
    entry = lock["distributions"]["flashinfer-python"]
    assert entry["version"] == "0.6.4+cu130"
    assert list(entry["wheels"]) == ["flashinfer_python-0.6.4+cu130-py3-none-any.whl"]


def test_requires_are_the_resolved_distributions_whose_markers_hold_for_the_environment():
    requires = ['typing-extensions>=4.10; python_version < "3.11"', "filelock", "not-resolved>=1",
                "numpy; platform_machine == 'aarch64'", "optree>=0.13; extra == 'optree'", "torch"]
    items = [item("torch", "2.11.0", FILES + "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", sha("a"), requires),
             item("filelock", "3.20.0", FILES + "filelock-3.20.0-py3-none-any.whl", sha("c")),
             item("typing_extensions", "4.15.0", FILES + "typing_extensions-4.15.0-py3-none-any.whl", sha("e")),
             item("numpy", "2.3.5", FILES + "numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl", sha("f")),
             item("optree", "0.17.0", FILES + "optree-0.17.0-cp312-cp312-manylinux_2_28_x86_64.whl", sha("0"))]
    x86 = convert({"cp312-x86_64": report("cp312-x86_64", items)})
    # typing-extensions only below 3.11, numpy only on aarch64, optree only with the extra, itself never.
    assert x86["distributions"]["torch"]["requires"] == ["filelock"]
    older = convert({"cp310-aarch64": report("cp310-aarch64", items)})
    assert older["distributions"]["torch"]["requires"] == ["filelock", "numpy", "typing-extensions"]


def test_requires_follow_the_extras_that_a_requirement_of_a_dependency_asks_for():
    """pip's report names only the extras it was given (requested_extras), not torch's cuda-toolkit[cublas]."""
    # cuda-toolkit comes first, as pip may list it: its extras are known only once torch has been read.
    items = [
        item("cuda-toolkit", "13.0.2", FILES + "cuda_toolkit-13.0.2-py2.py3-none-any.whl", sha("b"),
             ["nvidia-cublas==13.1.*; sys_platform == 'linux' and extra == 'cublas'",
              "nvidia-cufft==12.0.*; extra == 'cufft'", "cuda-toolkit[nvtx]; extra == 'cublas'",
              "nvidia-nvtx; extra == 'nvtx'"]),
        item("torch", "2.11.0", FILES + "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", sha("a"),
             ['cuda-toolkit[cublas]==13.0.2; platform_system == "Linux"']),
        item("nvidia-cublas", "13.1.0.3", FILES + "nvidia_cublas-13.1.0.3-py3-none-manylinux_2_27_x86_64.whl", sha("c")),
        item("nvidia-cufft", "12.0.0.61", FILES + "nvidia_cufft-12.0.0.61-py3-none-manylinux_2_27_x86_64.whl", sha("d")),
        item("nvidia-nvtx", "13.0.85", FILES + "nvidia_nvtx-13.0.85-py3-none-manylinux_2_27_x86_64.whl", sha("e")),
        item("uvicorn", "0.38.0", FILES + "uvicorn-0.38.0-py3-none-any.whl", sha("f"),
             ["uvloop>=0.15.1; extra == 'standard'"], extras=["standard"]),
        item("uvloop", "0.22.1", FILES + "uvloop-0.22.1-cp312-cp312-manylinux_2_17_x86_64.whl", sha("0")),
    ]
    lock = convert({"cp312-x86_64": report("cp312-x86_64", items)})
    assert lock["distributions"]["torch"]["requires"] == ["cuda-toolkit"]
    # cublas asked for by torch, nvtx by cuda-toolkit's own cublas extra; cufft by nobody.
    assert lock["distributions"]["cuda-toolkit"]["requires"] == ["nvidia-cublas", "nvidia-nvtx"]
    assert lock["distributions"]["uvicorn"]["requires"] == ["uvloop"]


def test_a_direct_url_wheel_has_no_index_and_a_mirror_is_recorded_as_what_it_stands_for():
    mirrors = {"https://github.com/sgl-project/whl/releases/download/v0.3.21/": "http://127.0.0.1:8765/sgl-kernel/",
               PYTORCH: "http://127.0.0.1:8765/pytorch-cu130"}
    asked = []

    def index_of(name, url, digest):
        asked.append((name, url, digest))
        return PYTORCH

    items = [
        item("sgl-kernel", "0.3.21", "http://127.0.0.1:8765/sgl-kernel/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl",
             sha("a"), direct=True),
        item("torch", "2.9.1+cu130", "http://127.0.0.1:8765/pytorch-cu130/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
             sha("b"))]
    lock = convert({"cp312-x86_64": report("cp312-x86_64", items)}, mirrors, index_of, (PYPI, PYTORCH))
    kernel = lock["distributions"]["sgl-kernel"]
    assert kernel["version"] == "0.3.21"
    assert kernel["wheels"] == {"sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl": {
        "sha256": sha("a"), "url": KERNEL_URL, "index": None, "environments": ["cp312-x86_64"]}}
    torch = lock["distributions"]["torch"]["wheels"]["torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert torch["url"] == PYTORCH + "/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert torch["index"] == PYTORCH
    # The index is asked of the URL pip was served, never of the direct URL's wheel.
    assert asked == [("torch", items[1]["download_info"]["url"], sha("b"))]


def test_environments_that_resolve_different_versions_are_reported_with_the_versions_of_each():
    reports = dict((env, report(env, [item("numpy", version, FILES + "numpy-%s-%s.whl" % (version, env), sha("a"))]))
                   for env, version in (("cp310-x86_64", "2.2.6"), ("cp311-x86_64", "2.10.0"), ("cp312-x86_64", "2.10.0")))
    with pytest.raises(stack_lock.VersionSplit) as raised:
        convert(reports)
    assert raised.value.split == {"numpy": {"2.2.6": ["cp310-x86_64"], "2.10.0": ["cp311-x86_64", "cp312-x86_64"]}}
    # Oldest first, as versions.
    assert str(raised.value) == "  numpy: 2.2.6 in cp310-x86_64, 2.10.0 in cp311-x86_64 cp312-x86_64"


def test_a_distribution_resolved_twice_in_one_environment_is_refused():
    sglang = item("sglang", "0.5.9", FILES + "sglang-0.5.9-py3-none-any.whl", sha("a"))
    with pytest.raises(stack_lock.LockError, match="cp312-x86_64: the resolution has sglang twice"):
        convert({"cp312-x86_64": report("cp312-x86_64", [sglang, sglang])})


def test_a_report_resolved_for_other_markers_than_the_environments_is_refused():
    wrong = report("cp312-x86_64", [])
    wrong["environment"] = dict(wrong["environment"], python_version="3.11")
    with pytest.raises(stack_lock.LockError, match="cp312-x86_64: pip resolved for .*'python_version': '3.11'"):
        convert({"cp312-x86_64": wrong})


def test_the_sha256_is_read_from_the_hash_alone_as_pip_before_23_writes_it():
    older = item("torch", "2.11.0", FILES + "torch-2.11.0-py3-none-any.whl", sha("a"))
    older["download_info"]["archive_info"] = {"hash": "sha256=" + sha("a")}
    lock = convert({"cp312-x86_64": report("cp312-x86_64", [older])})
    assert lock["distributions"]["torch"]["wheels"]["torch-2.11.0-py3-none-any.whl"]["sha256"] == sha("a")


def test_a_download_without_a_sha256_or_that_is_no_wheel_is_refused():
    bare = item("torch", "2.11.0", FILES + "torch-2.11.0.tar.gz", sha("a"))
    with pytest.raises(stack_lock.LockError, match="not a wheel with a sha256"):
        convert({"cp312-x86_64": report("cp312-x86_64", [bare])})
    unhashed = item("torch", "2.11.0", FILES + "torch-2.11.0-py3-none-any.whl", sha("a"))
    unhashed["download_info"]["archive_info"] = {}
    with pytest.raises(stack_lock.LockError, match="not a wheel with a sha256"):
        convert({"cp312-x86_64": report("cp312-x86_64", [unhashed])})


def test_the_lock_file_is_sorted_with_an_indent_of_one_and_ends_with_a_newline():
    text = stack_lock.dumps({"b": [1], "a": {"d": 1, "c": 2}})
    assert text == '{\n "a": {\n  "c": 2,\n  "d": 1\n },\n "b": [\n  1\n ]\n}\n'


def lock_of(versions):
    return {"format": 1, "distributions": dict((name, {"version": version}) for name, version in versions.items())}


def test_the_diff_says_up_down_added_and_removed_a_line_each_sorted_by_name_then_the_count():
    old = lock_of({"torch": "2.11.0", "numpy": "2.3.5", "flashinfer-python": "0.6.15.post1", "gone": "1.0",
                   "same": "1.0", "local": "2.9.1+cu128"})
    new = lock_of({"torch": "2.14.1", "numpy": "2.2.6", "flashinfer-python": "0.7.2", "apache-tvm-ffi": "0.1.8",
                   "same": "1.0", "local": "2.9.1+cu130"})
    assert stack_lock.diff_lines(old, new) == [
        "added   apache-tvm-ffi 0.1.8",
        "up      flashinfer-python 0.6.15.post1 -> 0.7.2",
        "removed gone 1.0",
        "up      local 2.9.1+cu128 -> 2.9.1+cu130",
        "down    numpy 2.3.5 -> 2.2.6",
        "up      torch 2.11.0 -> 2.14.1",
        "6 changed (3 up, 1 down, 1 added, 1 removed), 1 unchanged",
    ]


def test_versions_compare_as_versions_not_as_text():
    assert stack_lock.diff_lines(lock_of({"a": "0.9"}), lock_of({"a": "0.10"}))[0] == "up      a 0.9 -> 0.10"
    assert stack_lock.diff_lines(lock_of({"a": "1.0"}), lock_of({"a": "1.0.0"})) == [
        "0 changed (0 up, 0 down, 0 added, 0 removed), 1 unchanged"]


def test_diff_only_compares_two_lock_files_and_resolves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(stack_lock, "make_lock", None)
    (tmp_path / "a.json").write_text(json.dumps(lock_of({"torch": "2.11.0"})))
    (tmp_path / "b.json").write_text(json.dumps(lock_of({"torch": "2.14.1"})))
    stack_lock.main(["--diff-only", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert capsys.readouterr().out == "up      torch 2.11.0 -> 2.14.1\n1 changed (1 up, 0 down, 0 added, 0 removed), 0 unchanged\n"


def test_what_is_not_a_lock_is_refused_naming_the_file(tmp_path):
    (tmp_path / "x.json").write_text('{"format": 2, "distributions": {}}')
    with pytest.raises(SystemExit, match=r"x.json is not a stack lock of format 1"):
        stack_lock.main(["--diff-only", str(tmp_path / "x.json"), str(tmp_path / "x.json")])
    with pytest.raises(SystemExit, match=r"cannot read the lock .*missing.json"):
        stack_lock.main(["--diff-only", str(tmp_path / "missing.json"), str(tmp_path / "x.json")])


def test_a_profile_names_its_lock_and_a_path_names_a_file(tmp_path, monkeypatch, profiles_file):
    monkeypatch.setattr(stack_lock, "LOCKS", tmp_path)
    (tmp_path / "sglang-0.5.17-cu130.json").write_text(json.dumps(lock_of({"torch": "2.11.0"})))
    (tmp_path / "other.json").write_text(json.dumps(lock_of({"torch": "2.14.1"})))
    assert stack_lock.lock_of_reference("sglang-0.5.17-cu130", profiles_file) == lock_of({"torch": "2.11.0"})
    assert stack_lock.lock_of_reference(str(tmp_path / "other.json"), profiles_file) == lock_of({"torch": "2.14.1"})
    with pytest.raises(stack_lock.LockError, match="profile cu130 has no lock"):
        stack_lock.lock_of_reference("cu130", profiles_file)


@pytest.mark.parametrize("glibc, machine, first", [("2.35", "x86_64", "manylinux_2_35_x86_64"),
                                                   ("2.39", "aarch64", "manylinux_2_39_aarch64")])
def test_the_platform_tags_go_from_the_glibc_down_to_manylinux2014_then_linux(glibc, machine, first):
    tags = stack_lock.platform_tags(glibc, machine)
    assert tags[0] == first
    assert tags[-3:] == ["manylinux_2_17_" + machine, "manylinux2014_" + machine, "linux_" + machine]
    assert len(tags) == int(glibc.split(".")[1]) - 17 + 1 + 2
    assert not [tag for tag in tags if tag.startswith(("manylinux2010", "manylinux1", "manylinux_2_16"))]


def profile(**fields):
    base = {"name": "p", "operating_systems": ["debian12", "ubuntu2204", "ubuntu2404"], "architectures": ["x86_64"],
            "python": {"min_version": "3.10"}}
    return dict(base, **fields)


def test_the_oldest_glibc_of_the_profiles_operating_systems_decides():
    assert stack_lock.oldest_glibc(profile()) == "2.35"
    assert stack_lock.oldest_glibc(profile(operating_systems=["ubuntu2404", "debian12"])) == "2.36"


def test_an_operating_system_the_tool_does_not_know_is_refused_by_name():
    with pytest.raises(stack_lock.LockError, match=r"stack_profiles.p.operating_systems names rhel9, whose glibc this "
                                                   r"tool does not know \(it knows debian12, ubuntu2204, ubuntu2404\)"):
        stack_lock.oldest_glibc(profile(operating_systems=["debian12", "rhel9"]))


def test_environments_are_each_cpython_from_the_minimum_to_3_13_on_each_architecture():
    assert stack_lock.environments(profile(architectures=["x86_64", "aarch64"], python={"min_version": "3.11"})) == [
        "cp311-x86_64", "cp312-x86_64", "cp313-x86_64", "cp311-aarch64", "cp312-aarch64", "cp313-aarch64"]
    assert stack_lock.environments(profile(), ["cp313-x86_64", "cp310-x86_64"]) == ["cp310-x86_64", "cp313-x86_64"]
    with pytest.raises(stack_lock.LockError, match="--environments names cp39-x86_64, cp312-aarch64, which profile p"):
        stack_lock.environments(profile(), ["cp39-x86_64", "cp312-aarch64"])


def test_the_marker_environment_is_cpython_on_linux_for_that_machine():
    assert stack_lock.marker_environment("cp310-aarch64") == {
        "implementation_name": "cpython", "implementation_version": "3.10.0", "os_name": "posix",
        "platform_machine": "aarch64", "platform_python_implementation": "CPython", "platform_release": "",
        "platform_system": "Linux", "platform_version": "", "python_full_version": "3.10.0", "python_version": "3.10",
        "sys_platform": "linux"}


# The shipped profiles with these packages, whatever their defaults say when these tests run.
CUSTOM = {
    "cu130": {"aliases": ["sglang-0.5.9-cu130"], "python": {
        "torch": {"version": "2.9.1+cu130", "source": PYTORCH},
        "sgl_kernel": {"distribution": "sgl-kernel", "version": "0.3.21", "source": KERNEL_URL},
        "flashinfer_python": {"version": "0.6.4", "source": PYPI}, "flashinfer_cubin": {"version": "0.6.4", "source": PYPI},
        "flashinfer_jit_cache": {"version": "0.6.4+cu130", "source": "https://flashinfer.ai/whl/cu130"},
        "sglang": {"version": "0.5.9", "source": PYPI}, "lock": None}},
    "sglang-0.5.17-cu130": {"python": {
        "torch": {"version": "2.11.0", "source": PYPI},
        "sgl_kernel": {"distribution": "sglang-kernel", "version": "0.4.5", "source": PYPI},
        "flashinfer_python": {"version": "0.6.15.post1", "source": PYPI}, "flashinfer_cubin": {"version": None},
        "flashinfer_jit_cache": {"version": None}, "sglang": {"version": "0.5.17", "source": PYPI},
        "lock": "sglang-0.5.17-cu130.json"}},
}


def pinned(name):
    return stack_lock.resolve(name, yaml.safe_load(stack_lock.PROFILES.read_text())["stack_profiles"], CUSTOM)


@pytest.fixture
def profiles_file(tmp_path):
    """A --profiles file with CUSTOM over the shipped profiles."""
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"stack_profiles_custom": CUSTOM}))
    return str(path)


def test_the_requirements_skip_null_versions_name_the_kernel_by_its_distribution_and_a_wheel_by_its_url():
    mirrors = {"https://github.com/": "http://127.0.0.1:1/gh/"}
    packages = stack_lock.top_level(pinned("cu130"), mirrors)
    assert [package["requirement"] for package in packages] == [
        "torch==2.9.1+cu130", "sgl-kernel @ " + KERNEL_URL, "flashinfer-python==0.6.4", "flashinfer-cubin==0.6.4",
        "flashinfer-jit-cache==0.6.4+cu130", "sglang==0.5.9"]
    assert packages[1]["fetch"] == "sgl-kernel @ http://127.0.0.1:1/gh/" + KERNEL_URL[len("https://github.com/"):]
    newer = stack_lock.top_level(pinned("sglang-0.5.17-cu130"), {})
    assert [package["requirement"] for package in newer] == [
        "torch==2.11.0", "sglang-kernel==0.4.5", "flashinfer-python==0.6.15.post1", "sglang==0.5.17"]
    assert [package["key"] for package in newer] == ["torch", "sgl_kernel", "flashinfer_python", "sglang"]
    assert stack_lock.index_sources(packages, PYPI) == [PYPI, PYTORCH, "https://flashinfer.ai/whl/cu130"]


def test_a_mirror_must_be_two_urls():
    assert stack_lock.parse_mirrors([PYPI + "=file:///srv/pypi/simple"]) == {PYPI: "file:///srv/pypi/simple"}
    with pytest.raises(stack_lock.LockError, match="--mirror pypi is not ORIG=NEW"):
        stack_lock.parse_mirrors(["pypi"])
    with pytest.raises(stack_lock.LockError, match="--mirror pypi=http://127.0.0.1/simple is not ORIG=NEW"):
        stack_lock.parse_mirrors(["pypi=http://127.0.0.1/simple"])


def test_an_index_that_does_not_answer_is_refused_naming_it_and_its_mirror():
    mirrors = {PYTORCH: "http://127.0.0.1:1/pytorch"}
    stack_lock.probe_indexes([PYPI, PYTORCH], mirrors, lambda url: True)
    with pytest.raises(stack_lock.LockError, match="the index %s does not answer at its mirror "
                                                   "http://127.0.0.1:1/pytorch" % PYTORCH):
        stack_lock.probe_indexes([PYPI, PYTORCH], mirrors, lambda url: url != "http://127.0.0.1:1/pytorch")
    with pytest.raises(stack_lock.LockError, match="the index %s does not answer: check the URL or pass --mirror" % PYPI):
        stack_lock.probe_indexes([PYPI], {}, lambda url: False)


def test_a_file_index_answers_when_its_folder_exists(tmp_path):
    assert stack_lock.answers(tmp_path.as_uri())
    assert not stack_lock.answers((tmp_path / "nothing").as_uri())


PAGE = """<html><body>
<a href="../../files/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256={digest}">torch</a>
<a href="https://elsewhere.example/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl">torch</a>
</body></html>"""


def test_a_page_lists_each_file_with_its_sha256():
    files = stack_lock.page_files(PAGE.format(digest=sha("b")), "http://127.0.0.1/pytorch/simple/torch/")
    assert files == {"torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl": sha("b"),
                     "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl": None}


def test_the_index_of_a_wheel_is_the_one_whose_page_lists_it_and_a_top_level_must_come_from_its_own(tmp_path):
    pages = {"http://127.0.0.1/pytorch/torch/": PAGE.format(digest=sha("b")).encode(),
             "http://127.0.0.1/pytorch/numpy/": b'<a href="numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl">n</a>'}
    fetched = []

    def fetch(url, limit):
        fetched.append(url)
        return pages.get(url)

    served = stack_lock.Indexes([PYPI, PYTORCH], {PYTORCH: "http://127.0.0.1/pytorch", PYPI: "http://127.0.0.1/pypi"},
                                {"torch": PYTORCH, "sglang": PYPI}, fetch)
    wheel = "http://127.0.0.1/files/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert served.index_of("torch", wheel, sha("b")) == PYTORCH
    with pytest.raises(stack_lock.LockError, match="pip took torch-2.9.1.cu130-cp312-cp312-manylinux_2_28_x86_64.whl "
                                                   "from another index than %s" % PYTORCH):
        served.index_of("torch", wheel, sha("c"))
    assert served.index_of("numpy", "http://x/numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl", sha("d")) == PYTORCH
    with pytest.raises(stack_lock.LockError, match="none of the indexes .* lists six-1.17.0-py3-none-any.whl"):
        served.index_of("six", "http://x/six-1.17.0-py3-none-any.whl", sha("e"))
    # Each page once, the main index's first for what the profile does not pin.
    assert fetched == ["http://127.0.0.1/pytorch/torch/", "http://127.0.0.1/pypi/numpy/",
                       "http://127.0.0.1/pytorch/numpy/", "http://127.0.0.1/pypi/six/", "http://127.0.0.1/pytorch/six/"]


def test_with_one_index_every_wheel_is_its_and_no_page_is_read():
    served = stack_lock.Indexes([PYPI], {}, {"torch": PYPI}, fetch=None)
    assert served.index_of("torch", FILES + "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", sha("a")) == PYPI
    assert served.index_of("numpy", FILES + "numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl", sha("a")) == PYPI


def options(**more):
    return dict({"mirrors": {}, "sources": ["--index-url", PYPI],
                 "platforms": {"x86_64": ["manylinux_2_35_x86_64", "linux_x86_64"]}}, **more)


def test_pip_resolves_for_the_environments_python_platforms_and_markers_with_constraints_in_a_file(tmp_path):
    argv = stack_lock.pip_argv("python", "cp311-x86_64", tmp_path, options(constraints={"numpy": "2.2.6"}), ["torch==2.11.0"])
    assert argv[:4] == ["python", "-c", stack_lock.PIP_IN_ENVIRONMENT, json.dumps(stack_lock.marker_environment("cp311-x86_64"))]
    assert argv[4:9] == ["install", "--dry-run", "--ignore-installed", "--quiet", "--report"]
    text = " ".join(argv[5:])
    assert "--only-binary=:all:" in argv
    assert "--platform manylinux_2_35_x86_64 --platform linux_x86_64 --python-version 3.11 --implementation cp " \
           "--index-url %s --constraint %s torch==2.11.0" % (PYPI, tmp_path / "constraints.txt") in text
    assert (tmp_path / "constraints.txt").read_text() == "numpy==2.2.6\n"
    assert "--constraint" not in stack_lock.pip_argv("python", "cp311-x86_64", tmp_path, options(), ["torch"])


def test_pip_runs_without_this_machines_sources_and_keeps_how_to_reach_an_index():
    env = stack_lock.pip_environment({"PIP_FIND_LINKS": "/opt/wheels", "PIP_EXTRA_INDEX_URL": "file:///opt/pypi",
                                      "PIP_CONSTRAINT": "/etc/c.txt", "PIP_CERT": "/etc/ca.crt", "HOME": "/root"})
    assert env == {"PIP_CERT": "/etc/ca.crt", "HOME": "/root", "PIP_CONFIG_FILE": stack_lock.os.devnull}


def pip_in(env, requirement):
    argv = [sys.executable, "-c", stack_lock.PIP_IN_ENVIRONMENT, json.dumps(stack_lock.marker_environment(env)),
            "install", "--dry-run", "--quiet", "--no-index", "--report", "-", requirement]
    return subprocess.run(argv, env=stack_lock.pip_environment(stack_lock.os.environ), capture_output=True, text=True,
                          timeout=120, check=False)


def test_pip_evaluates_markers_for_the_target_environment_not_for_the_python_that_runs_it():
    """No index: a requirement whose marker holds cannot be found, one whose marker fails is left out."""
    other = "aarch64" if stack_lock.os.uname().machine == "x86_64" else "x86_64"
    wanted = "no-such-distribution-anywhere; platform_machine == '%s' and python_version == '3.10'" % other
    left_out = pip_in("cp310-%s" % ("x86_64" if other == "aarch64" else "aarch64"), wanted)
    assert left_out.returncode == 0, left_out.stderr
    assert json.loads(left_out.stdout)["install"] == []
    found = pip_in("cp310-" + other, wanted)
    assert found.returncode != 0 and "no-such-distribution-anywhere" in found.stderr
    assert json.loads(pip_in("cp310-" + other, "pip; python_version == '2.7'").stdout)["environment"] == \
        stack_lock.marker_environment("cp310-" + other)


def test_sglang_is_resolved_alone_from_its_index_and_the_profile_pins_win_over_its_own(monkeypatch):
    calls = []
    sglang = item("sglang", "0.5.9", FILES + "sglang-0.5.9-py3-none-any.whl", sha("a"),
                  ["flashinfer_python==0.6.3", "sgl-kernel==0.3.21", "requests", "numpy; python_version < '3.11'",
                   "pytest; extra == 'test'"])
    stack = [item("requests", "2.32.5", FILES + "requests-2.32.5-py3-none-any.whl", sha("b"))]

    def run_pip(python, env, given, requirements, what):
        calls.append((given["sources"], given.get("constraints"), requirements))
        return report(env, [sglang] if len(calls) == 1 else stack)

    monkeypatch.setattr(stack_lock, "run_pip", run_pip)
    packages = stack_lock.top_level(pinned("cu130"), {})
    merged = stack_lock.resolve_environment("python", "cp312-x86_64", options(constraints={"numpy": "2.2.6"}), packages)
    assert merged["install"] == [sglang] + stack
    assert calls[0] == (["--index-url", PYPI, "--no-deps"], None, ["sglang==0.5.9"])
    assert calls[1] == (["--index-url", PYPI], {"numpy": "2.2.6"}, [
        "torch==2.9.1+cu130", "sgl-kernel @ " + KERNEL_URL, "flashinfer-python==0.6.4", "flashinfer-cubin==0.6.4",
        "flashinfer-jit-cache==0.6.4+cu130", "requests", "numpy; python_version < '3.11'"])


def test_environments_that_differ_are_resolved_again_with_the_oldest_version_for_all(monkeypatch):
    rounds = []

    def resolve_environment(python, env, given, packages):
        rounds.append((env, dict(given["constraints"])))
        version = given["constraints"].get("numpy") or ("2.9.0" if env == "cp310-x86_64" else "2.10.0")
        return report(env, [item("numpy", version, FILES + "numpy-%s-%s.whl" % (version, env), sha("a"))])

    monkeypatch.setattr(stack_lock, "resolve_environment", resolve_environment)
    lock = stack_lock.resolve_all("python", ["cp310-x86_64", "cp312-x86_64"], options(), [], convert, lambda text: None)
    assert lock["distributions"]["numpy"]["version"] == "2.9.0"
    assert rounds == [("cp310-x86_64", {}), ("cp312-x86_64", {}),
                      ("cp310-x86_64", {"numpy": "2.9.0"}), ("cp312-x86_64", {"numpy": "2.9.0"})]


def test_a_split_that_a_constraint_cannot_mend_is_refused(monkeypatch):
    def resolve_environment(python, env, given, packages):
        version = "2.2.6" if env == "cp310-x86_64" else "2.3.5"
        return report(env, [item("numpy", version, FILES + "numpy-%s-%s.whl" % (version, env), sha("a"))])

    monkeypatch.setattr(stack_lock, "resolve_environment", resolve_environment)
    with pytest.raises(stack_lock.LockError, match="no one version of each distribution suits every environment"):
        stack_lock.resolve_all("python", ["cp310-x86_64", "cp312-x86_64"], options(), [], convert, lambda text: None)


def test_every_environment_is_tried_and_those_that_fail_are_named_with_the_ones_that_resolved(monkeypatch):
    def resolve_environment(python, env, given, packages):
        if env.startswith("cp313"):
            raise stack_lock.LockError("%s: pip could not resolve X:\nERROR: No matching distribution found for "
                                       "outlines_core==0.1.26" % env)
        return report(env, [])

    monkeypatch.setattr(stack_lock, "resolve_environment", resolve_environment)
    envs = ["cp312-x86_64", "cp313-x86_64", "cp312-aarch64", "cp313-aarch64"]
    with pytest.raises(stack_lock.LockError) as raised:
        stack_lock.resolve_all("python", envs, options(), [], convert, lambda text: None)
    assert str(raised.value).splitlines() == [
        "cp313-x86_64: pip could not resolve X:", "ERROR: No matching distribution found for outlines_core==0.1.26",
        "cp313-aarch64: pip could not resolve X:", "ERROR: No matching distribution found for outlines_core==0.1.26",
        "A lock of the others alone: --environments cp312-x86_64,cp312-aarch64"]
    with pytest.raises(stack_lock.LockError, match="Every environment failed."):
        stack_lock.resolve_all("python", envs[1::2], options(), [], convert, lambda text: None)


def test_a_failed_resolution_keeps_pips_message_named_with_the_environment(monkeypatch, tmp_path):
    def run(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "ERROR: No matching distribution found for torch==9.9\n")

    monkeypatch.setattr(stack_lock.subprocess, "run", run)
    with pytest.raises(stack_lock.LockError, match="cp312-x86_64: pip could not resolve torch==9.9:\n"
                                                   "ERROR: No matching distribution found for torch==9.9"):
        stack_lock.run_pip("python", "cp312-x86_64", options(), ["torch==9.9"], "torch==9.9")


def test_a_profile_without_a_lock_name_needs_an_output(tmp_path, monkeypatch):
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"stack_profiles_custom": {
        "sglang-0.5.17-cu130": {"python": {"lock": None}}}}))
    monkeypatch.setattr(stack_lock, "resolve_all", None)
    with pytest.raises(SystemExit, match=r"stack_profiles.sglang-0.5.17-cu130.python.lock is null and no --output "
                                         r"was given"):
        stack_lock.main(["sglang-0.5.17-cu130", "--profiles", str(tmp_path / "inventory.yml")])


def locked_0_5_17(torch_version="2.11.0"):
    """What resolve_all gives for sglang-0.5.17-cu130 on one environment (its top-level packages only)."""
    env = "cp312-x86_64"
    items = [item("torch", torch_version, FILES + "torch-%s-cp312-cp312-manylinux_2_28_x86_64.whl" % torch_version, sha("a")),
             item("sglang-kernel", "0.4.5", FILES + "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl", sha("b")),
             item("flashinfer-python", "0.6.15.post1", FILES + "flashinfer_python-0.6.15.post1-py3-none-any.whl", sha("c")),
             item("sglang", "0.5.17", FILES + "sglang-0.5.17-cp312-cp312-manylinux_2_34_x86_64.whl", sha("d"))]
    return {env: report(env, items)}


def test_the_lock_is_written_where_the_profile_names_it_and_printed_against_the_last_one(tmp_path, monkeypatch, capsys,
                                                                                         profiles_file):
    monkeypatch.setattr(stack_lock, "LOCKS", tmp_path)
    monkeypatch.setattr(stack_lock, "probe_indexes", lambda indexes, mirrors: None)
    monkeypatch.setattr(stack_lock, "resolve_all", lambda python, envs, given, packages, convert_reports, log: convert_reports(locked_0_5_17()))
    (tmp_path / "sglang-0.5.17-cu130.json").write_text(json.dumps(lock_of({"torch": "2.10.0"})))
    stack_lock.main(["sglang-0.5.17-cu130", "--environments", "cp312-x86_64", "--against", "sglang-0.5.17-cu130",
                     "--profiles", profiles_file])
    written = (tmp_path / "sglang-0.5.17-cu130.json").read_text()
    # Readable by all, as git checks it out, not private as a temporary file is made.
    assert (tmp_path / "sglang-0.5.17-cu130.json").stat().st_mode & 0o777 == 0o644
    assert written == stack_lock.dumps(json.loads(written))
    lock = json.loads(written)
    assert lock["requirements"] == ["torch==2.11.0", "sglang-kernel==0.4.5", "flashinfer-python==0.6.15.post1",
                                    "sglang==0.5.17"]
    assert capsys.readouterr().out.splitlines() == [
        "added   flashinfer-python 0.6.15.post1", "added   sglang 0.5.17", "added   sglang-kernel 0.4.5",
        "up      torch 2.10.0 -> 2.11.0", "4 changed (1 up, 0 down, 3 added, 0 removed), 0 unchanged"]


def test_a_lock_the_role_would_refuse_is_not_written(tmp_path, monkeypatch, profiles_file):
    monkeypatch.setattr(stack_lock, "probe_indexes", lambda indexes, mirrors: None)
    monkeypatch.setattr(stack_lock, "resolve_all",
                        lambda python, envs, given, packages, convert_reports, log: convert_reports(locked_0_5_17("2.10.0")))
    with pytest.raises(SystemExit, match="the lock of sglang-0.5.17-cu130 would not install:\n- it has torch 2.10.0, "
                                         "the profile pins 2.11.0"):
        stack_lock.main(["sglang-0.5.17-cu130", "--output", str(tmp_path / "lock.json"), "--profiles", profiles_file])
    assert not (tmp_path / "lock.json").exists()


def test_profiles_that_cannot_be_read_are_refused_naming_the_file(tmp_path):
    (tmp_path / "vars.yml").write_text("other: 1\n")
    with pytest.raises(SystemExit, match="--profiles .*vars.yml has neither stack_profiles nor stack_profiles_custom"):
        stack_lock.main(["cu130", "--profiles", str(tmp_path / "vars.yml")])
    with pytest.raises(SystemExit, match="cannot read the profiles of --profiles .*missing.yml"):
        stack_lock.main(["cu130", "--profiles", str(tmp_path / "missing.yml")])


def test_a_profile_is_found_by_its_alias_and_an_unknown_one_is_refused(profiles_file):
    assert stack_lock.profile_named("sglang-0.5.9-cu130", profiles_file)["name"] == "cu130"
    with pytest.raises(stack_lock.LockError, match="stack_profile=nope is not a known profile"):
        stack_lock.profile_named("nope", profiles_file)
