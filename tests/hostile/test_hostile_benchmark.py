"""benchmark with client=bench_serving, whose sglang.bench_serving is the service user's code: it runs as the
virtualenv's owner (the uid probe), never as root, and root reads back only a regular file the owner wrote, never
a link (to a file of root's the owner cannot read) or a FIFO planted at the result's name."""
import json
import os

import pytest

MODULE = "benchmark"
RECORD = {"completed": 16, "num_prompts": 16, "duration": 2.0, "total_output_tokens": 8192,
          "output_throughput": 4096.0, "request_throughput": 8.0, "median_ttft_ms": 10.0, "p99_ttft_ms": 20.0,
          "median_itl_ms": 1.0, "p99_itl_ms": 2.0}
# Root's own record, which only a module that follows the owner's link would read: 7 completed, not 16.
ROOTS = dict(RECORD, completed=7, num_prompts=7)
STUB = """import json, os, sys
output = sys.argv[sys.argv.index("--output-file") + 1]
with open(os.path.join(os.path.dirname(__file__), "hostile-mode")) as handle:
    mode, target = handle.read().split("\\n")[:2]
if mode == "write":
    with open(output, "a") as handle:
        handle.write(target + "\\n")
elif mode == "link":
    os.symlink(target, output)
elif mode == "fifo":
    os.mkfifo(output)
"""


def setting(case, mode, target):
    venv = case.make_venv()
    sglang = venv.site / "sglang"
    sglang.mkdir()
    (sglang / "__init__.py").write_text("")
    (sglang / "bench_serving.py").write_text(STUB)
    (sglang / "hostile-mode").write_text("%s\n%s\n" % (mode, target))
    for path in (sglang, sglang / "__init__.py", sglang / "bench_serving.py", sglang / "hostile-mode"):
        case.chown(path)
    args = dict(url="http://127.0.0.1:9", client="bench_serving", model_path="/models/test", workload="decode-heavy")
    if case.collection.has_option(MODULE, "venv_path"):
        args["venv_path"] = str(venv.stable)
    else:  # the baseline took the interpreter
        args["python"] = str(venv.stable / "bin" / "python")
    return venv, args


def test_the_client_runs_as_the_virtualenvs_owner(hostile):
    case = hostile(MODULE, "bench_serving runs as the owner (uid probe)")
    _venv, args = setting(case, "write", json.dumps(RECORD))
    run = case.module(MODULE, args)
    completed = ((run.result or {}).get("metrics") or {}).get("completed")
    case.check(run, "ok", problems=case.ran_as_owner(run, required=True) + ([] if completed == 16 else [
        "metrics.completed is %r, not the client's 16" % completed]))
    case.finish()


@pytest.mark.parametrize("mode", ["link", "fifo"])
def test_a_result_planted_as_a_link_or_a_fifo_is_not_read(hostile, mode):
    case = hostile(MODULE, "result file planted as a %s" % ("link to a root-only file" if mode == "link" else "FIFO"))
    roots = case.root_dir("secrets", 0o700) / "result.jsonl"
    roots.write_text(json.dumps(ROOTS) + "\n")
    os.chmod(str(roots), 0o600)
    _venv, args = setting(case, mode, str(roots))
    run = case.module(MODULE, args)
    completed = ((run.result or {}).get("metrics") or {}).get("completed")
    problems = case.ran_as_owner(run, required=True)
    if completed == 7:
        problems.append("root followed the owner's link and read its own 0600 file")
    case.check(run, "refused", needle="result", problems=problems)
    case.finish()
