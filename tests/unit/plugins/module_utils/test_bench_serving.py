"""sglang.bench_serving run as the virtualenv's owner, its result read back by root without trusting it.

The command itself is faked (``run``); the directory it writes into, the owners and the reads are real, so these
tests run as root (as the module does)."""
import json
import os
import stat

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import (
    CLEAN_PATH,
    owner_output_directory,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import benchmark as bench
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.bench_serving import (
    RESULT_LIMIT,
    bench_serving_metrics,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another user, as root does")

NOBODY = 65534
LINE = dict(completed=4, num_prompts=4, duration=2.0, total_output_tokens=80, output_throughput=40.0,
            request_throughput=2.0, median_ttft_ms=20.0, p99_ttft_ms=30.0, median_itl_ms=10.0, p99_itl_ms=12.0)


@pytest.fixture
def venv(tmp_path):
    """A virtualenv of nobody's (only its owners matter here: nothing runs)."""
    path = tmp_path / "ml-env"
    (path / "bin").mkdir(parents=True)
    (path / "lib").mkdir()
    (path / "bin" / "python").write_text("")
    for part in (path, path / "bin", path / "bin" / "python", path / "lib"):
        os.lchown(str(part), NOBODY, NOBODY)
    return str(path)


def measure(venv, writes):
    """bench_serving_metrics with a fake command that calls writes(output path, argv) as the client would."""
    seen = {}

    def run(argv):
        output = argv[argv.index("--output-file") + 1]
        directory = os.path.dirname(output)
        info = os.stat(directory)
        seen.update(argv=argv, directory=directory, owner=(info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)),
                    parent_mode=stat.S_IMODE(os.stat(os.path.dirname(directory)).st_mode))
        return writes(output, argv)

    try:
        return bench_serving_metrics(venv, "http://127.0.0.1:30000/", "/models/m", bench.workload("decode-heavy"),
                                     run), seen
    except (bench.BenchmarkError, InvalidOption) as exc:
        return exc, seen


def written(data, uid=NOBODY):
    def writes(output, _argv):
        with open(output, "wb") as handle:
            handle.write(data)
        os.chown(output, uid, uid)
        return 0, "", ""
    return writes


def test_the_client_runs_as_the_venvs_owner_in_an_empty_environment_and_writes_into_its_directory(venv):
    metrics, seen = measure(venv, written((json.dumps(LINE) + "\n").encode()))
    assert metrics["output_throughput"] == 40.0 and metrics["failed"] == 0
    assert seen["argv"][:7] == ["runuser", "-u", "nobody", "--", "env", "-i", CLEAN_PATH]
    assert seen["argv"][7:10] == [venv + "/bin/python", "-m", "sglang.bench_serving"]
    assert seen["argv"][-1] == os.path.join(seen["directory"], "result.jsonl")
    assert seen["owner"] == (NOBODY, NOBODY, 0o700) and seen["parent_mode"] == 0o711
    assert not os.path.exists(os.path.dirname(seen["directory"]))


def test_a_venv_root_owns_whole_runs_as_root(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    metrics, seen = measure(str(tmp_path), written((json.dumps(LINE) + "\n").encode(), uid=0))
    assert metrics["completed"] == 4 and seen["argv"][:3] == ["env", "-i", CLEAN_PATH]


def link_to_a_file_of_roots(target):
    def writes(output, _argv):
        os.symlink(target, output)
        return 0, "", ""
    return writes


def test_a_link_planted_for_the_result_is_not_followed(venv, tmp_path):
    secret = tmp_path / "root-only.jsonl"
    secret.write_text(json.dumps(LINE) + "\n")
    error, _seen = measure(venv, link_to_a_file_of_roots(str(secret)))
    assert isinstance(error, bench.BenchmarkError)
    assert str(error) == ("the result of sglang.bench_serving is not read: result.jsonl is a symbolic link: root "
                          "does not follow links in a tree another user can write (remove the link; the collection "
                          "puts a file there)")
    assert secret.read_text() == json.dumps(LINE) + "\n"


def test_a_fifo_for_the_result_is_refused_without_blocking(venv):
    def writes(output, _argv):
        os.mkfifo(output)
        os.chown(output, NOBODY, NOBODY)
        return 0, "", ""
    error, _seen = measure(venv, writes)
    assert "result.jsonl is a FIFO, not a regular file" in str(error)


def test_a_result_over_the_bound_is_refused_without_reading_it(venv):
    def writes(output, _argv):
        with open(output, "wb") as handle:
            handle.truncate(RESULT_LIMIT + 1)
        os.chown(output, NOBODY, NOBODY)
        return 0, "", ""
    error, _seen = measure(venv, writes)
    assert RESULT_LIMIT == 16 << 20
    assert "result.jsonl is larger than the 16777216 bytes it may hold here" in str(error)


def test_a_result_the_owner_did_not_write_is_refused(venv):
    error, _seen = measure(venv, written((json.dumps(LINE) + "\n").encode(), uid=0))
    assert str(error) == ("the result of sglang.bench_serving belongs to root, not to nobody who ran it: it is not "
                          "the file the client wrote")


def test_a_failed_client_says_the_end_of_its_output_without_control_characters(venv):
    error, _seen = measure(venv, lambda _output, _argv: (1, "", "x" * 5000 + "\x1b[31mModuleNotFoundError\x07\n"))
    assert str(error) == "sglang.bench_serving failed (exit 1, run as nobody): %sModuleNotFoundError" % ("x" * 1974)


def test_no_result_and_a_result_of_wrong_types_are_failures(venv):
    error, _seen = measure(venv, lambda _output, _argv: (0, "", ""))
    assert str(error) == "sglang.bench_serving ended without writing its result (--output-file)"
    error, _seen = measure(venv, written(json.dumps(dict(LINE, completed="4")).encode()))
    assert str(error) == "the result of sglang.bench_serving has a string for completed, not a count"


def test_a_missing_venv_and_an_owner_without_a_user_name_the_option(tmp_path, venv):
    error, _seen = measure(str(tmp_path / "nowhere"), written(b""))
    assert isinstance(error, InvalidOption) and str(error).startswith("venv_path=%s: " % (tmp_path / "nowhere"))
    os.lchown(venv, 54321, 54321)
    error, seen = measure(venv, written(b""))
    assert str(error).startswith("venv_path belongs to uid 54321, which has no user on this host") and seen == {}


def test_the_output_directory_and_what_the_owner_left_in_it_are_removed_links_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    with owner_output_directory(NOBODY, NOBODY, "blackwell-test-") as (path, descriptor):
        assert os.fstat(descriptor).st_ino == os.stat(path).st_ino
        os.symlink(str(outside), os.path.join(path, "link"))
        os.mkdir(os.path.join(path, "below"))
        os.symlink(str(outside / "keep"), os.path.join(path, "below", "keep"))
        parent = os.path.dirname(path)
        assert (os.stat(parent).st_uid, stat.S_IMODE(os.stat(parent).st_mode)) == (0, 0o711)
    assert not os.path.exists(parent)
    assert (outside / "keep").read_text() == "kept"
