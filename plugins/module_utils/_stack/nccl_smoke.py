# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""An NCCL all-reduce across a node's GPUs, from a virtualenv's interpreter, and what its figures say.

``all_reduce_worker`` is one rank: torch.distributed all-reduce over each message size, rank 0 printing one JSON
line per size after a header (torch's and NCCL's versions, the NCCL_* variables the rank saw). ``launch`` starts one
rank per GPU from the virtualenv as its owner (``owner_argv``: an empty environment but for the rank's
RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT, so every NCCL setting comes from the runtime_env hook the
virtualenv imports), all under one deadline, each rank's output in an unlinked file of root's, bounded; past the
deadline, or as soon as one rank fails, every rank's process group is killed. ``smoke`` reads rank 0's lines
(whatever the owner's code printed: bounded, checked, anything else ignored), computes the figures as nccl-tests
reports them (algbw = bytes / time, busbw = algbw * 2(n-1)/n:
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md) and compares busbw at the largest size with
the floor of the node's topology (the runtime_env role's ``nccl_floors.yml``), topologies classified as
runtime_env's ``auto`` profile choice classifies them (``gpu_links``).

bench/nccl_profiles.py runs the same worker and figures.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import contextlib
import inspect
import json
import os
import signal
import socket
import subprocess
import tempfile
import textwrap
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import (
    OUTPUT_LIMIT,
    child_limits,
    owner_argv,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import gpu_links

KIB, MIB, GIB = 1024, 1024 ** 2, 1024 ** 3
# SGLang's decode all-reduce: one hidden state per running request in bf16, e.g. 7168 x 2 bytes x 32 requests
# = 448 KiB at TP 8 for a DeepSeek-sized model; 128 KiB to 2 MiB covers the common batch sizes.
DECODE_SIZES = (128 * KIB, 512 * KIB, 2 * MIB)
# Large enough for PCIe rings to reach their plateau (32 MiB already does on 8 RTX PRO 6000), small enough to fit
# beside a server that holds most of the GPU's memory.
BANDWIDTH_SIZE = 256 * MIB
DEFAULT_SIZES = DECODE_SIZES + (BANDWIDTH_SIZE,)
# Rank 0's own lines carry this mark; NCCL's log, Python's warnings and anything else the rank prints do not.
MARK = "nccl-smoke: "
# The worker's longest line is its header, a few KiB even with every NCCL variable set.
LINE_LIMIT = 64 * KIB
# What a failure shows of a rank's standard error: its end, where Python and NCCL put the error.
TAIL_BYTES = 4 * KIB
OPTION = "venv_path"
FLOOR_LINKS = ("nvswitch", "nvlink", "pcie")
POLL_SECONDS = 0.05


def all_reduce_worker(argv):
    """One rank, run by the virtualenv's interpreter (worker_program): argv is [mark, sizes joined by commas]."""
    import torch
    import torch.distributed as dist

    mark, sizes = argv[0], [int(size) for size in argv[1].split(",")]
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    if rank == 0:
        seen = dict((name, value) for name, value in os.environ.items() if name.startswith("NCCL_"))
        # The worker runs in the virtualenv's interpreter, not in a module: its standard output is how it reports.
        # pylint: disable-next=ansible-bad-function
        print(mark + json.dumps({"environment": seen, "torch": torch.__version__, "nccl": ".".join(
            str(part) for part in torch.cuda.nccl.version())}), flush=True)
    for size in sizes:
        tensor = torch.ones(size // 4, dtype=torch.float32, device="cuda")
        dist.all_reduce(tensor)
        # Every rank contributed ones: each element is the number of ranks, or the node corrupts data.
        correct = bool((tensor == world).all().item())
        for _warmup in range(4):
            dist.all_reduce(tensor)
        iterations = max(5, min(200, (4 << 30) // size))
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _iteration in range(iterations):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / iterations
        if rank == 0:
            # pylint: disable-next=ansible-bad-function
            print(mark + json.dumps({"size": size, "seconds": seconds, "correct": correct}), flush=True)
    dist.destroy_process_group()


def worker_program(function=all_reduce_worker):
    """The source that `python -c` runs: the modules the worker uses, function, then a call of it with the command
    line's arguments."""
    return "import json\nimport os\nimport sys\nimport time\n\n%s\n%s(sys.argv[1:])\n" % (
        textwrap.dedent(inspect.getsource(function)), function.__name__)


def figure(size, seconds, world):
    """nccl-tests' figures of one all-reduce of size bytes that took seconds on world ranks."""
    algbw = size / seconds / 1e9
    return {"size": size, "us": seconds * 1e6, "algbw": algbw, "busbw": algbw * 2 * (world - 1) / world}


def human(size):
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _read_head(handle, limit):
    handle.seek(0)
    return handle.read(limit).decode("utf-8", "replace")


def _read_tail(handle, limit):
    handle.seek(0, os.SEEK_END)
    handle.seek(max(0, handle.tell() - limit))
    return handle.read(limit).decode("utf-8", "replace")


def _stop(processes):
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass  # it ended between the poll and the kill
        process.wait()


def launch(python, world, sizes, owner_uid, timeout, program=None, rank_environment=None, clock=time.monotonic):
    """Start world ranks of program (worker_program() unless given) with python as owner_uid (owner_argv) and wait,
    timeout seconds in all. rank_environment(rank), when given, adds variables to a rank's (the bench's NCCL log).

    Returns {"ranks": [{"rank", "rc", "stdout" (rank 0's, OUTPUT_LIMIT bytes at most; others ""), "stderr" (its
    last TAIL_BYTES)}], "hung": [ranks still running at the deadline], "stopped": [ranks killed because another
    failed], "seconds"}. rc is None for a rank that was killed."""
    program = worker_program() if program is None else program
    port = free_port()
    argument = ",".join(str(size) for size in sizes)
    started = clock()
    deadline = started + timeout
    processes, outputs, hung, stopped = [], [], [], []
    with contextlib.ExitStack() as files:
        try:
            for rank in range(world):
                environment = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
                environment.update(rank_environment(rank) if rank_environment else {})
                stdout = files.enter_context(tempfile.TemporaryFile())
                stderr = files.enter_context(tempfile.TemporaryFile())
                outputs.append((stdout, stderr))
                # run_bounded runs one command; the ranks share one deadline and must all go when one fails.
                # pylint: disable-next=ansible-bad-function
                processes.append(subprocess.Popen(
                    owner_argv(owner_uid, [python, "-c", program, MARK, argument], OPTION, environment),
                    stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True, close_fds=True,
                    preexec_fn=child_limits(None)))
            while True:
                codes = [process.poll() for process in processes]
                running = [rank for rank, code in enumerate(codes) if code is None]
                if not running:
                    break
                if any(code not in (None, 0) for code in codes):
                    # The others wait in NCCL for a peer that is gone: they would only run into the deadline.
                    stopped = running
                    break
                if clock() >= deadline:
                    hung = running
                    break
                time.sleep(POLL_SECONDS)
        finally:
            _stop(processes)
        ranks = []
        for rank, (process, (stdout, stderr)) in enumerate(zip(processes, outputs)):
            ranks.append({"rank": rank, "rc": None if rank in hung or rank in stopped else process.returncode,
                          "stdout": _read_head(stdout, OUTPUT_LIMIT) if rank == 0 else "",
                          "stderr": _read_tail(stderr, TAIL_BYTES)})
    return {"ranks": ranks, "hung": hung, "stopped": stopped, "seconds": clock() - started}


def _last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return result_line(lines[-1], 400) if lines else "(nothing on its standard error)"


def launch_problem(launched, timeout):
    """What went wrong with the ranks themselves, or None: ranks that hung, a rank that failed."""
    ranks = launched["ranks"]
    if launched["hung"]:
        return "rank%s %s did not finish within %d s and %s killed (rank %d's standard error ends: %s)" % (
            "s" if len(launched["hung"]) > 1 else "", ", ".join(str(rank) for rank in launched["hung"]), timeout,
            "were" if len(launched["hung"]) > 1 else "was", launched["hung"][0],
            _last_line(ranks[launched["hung"][0]]["stderr"]))
    failed = [rank for rank in ranks if rank["rc"] not in (None, 0)]
    if failed:
        return "rank %d exited with status %d: %s%s" % (
            failed[0]["rank"], failed[0]["rc"], _last_line(failed[0]["stderr"]),
            "; ranks %s were stopped" % ", ".join(str(rank) for rank in launched["stopped"])
            if launched["stopped"] else "")
    return None


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text_mapping(value):
    return isinstance(value, dict) and all(isinstance(key, str) and isinstance(item, str)
                                           for key, item in value.items())


def parse_rank_output(text, sizes):
    """(header, timings, ignored) of rank 0's standard output: the header {"environment", "torch", "nccl"} or None,
    {size: (seconds, correct)} for the sizes asked, and how many marked lines were not the worker's (too long, not
    JSON, of other types, of a size not asked). Unmarked lines (NCCL's log, warnings) are not counted."""
    header, timings, ignored = None, {}, 0
    for line in text.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            record = json.loads(line[len(MARK):]) if len(line) <= LINE_LIMIT else None
        except ValueError:
            record = None
        if (isinstance(record, dict) and set(record) == {"environment", "torch", "nccl"}
                and _text_mapping(record["environment"]) and isinstance(record["torch"], str)
                and isinstance(record["nccl"], str)):
            header = record
        elif (isinstance(record, dict) and set(record) == {"size", "seconds", "correct"}
              and record["size"] in sizes and _number(record["seconds"]) and record["seconds"] > 0
              and isinstance(record["correct"], bool)):
            timings[record["size"]] = (float(record["seconds"]), record["correct"])
        else:
            ignored += 1
    return header, timings, ignored


def _positive(value, kind):
    """value as kind (int or float) when it is a positive number or the text of one (templates before
    ansible-core 2.19 give text), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 and (kind is float or str(number) == str(value).strip()) else None


def check_floors(floors, option="floors"):
    """The floors as a list of {"links", "family", "gpus", "busbw_gbps", "source", ...}, numbers converted.
    InvalidOption with every problem, each naming option and the entry."""
    problems, checked = [], []
    if not isinstance(floors, list):
        raise InvalidOption("%s: must be a list of floors, not %s" % (option, type(floors).__name__))
    for index, entry in enumerate(floors):
        where = "%s[%d]" % (option, index)
        if not isinstance(entry, dict):
            problems.append("%s: must be a mapping with links, family, gpus, busbw_gbps and source" % where)
            continue
        gpus, busbw = _positive(entry.get("gpus"), int), _positive(entry.get("busbw_gbps"), float)
        if entry.get("links") not in FLOOR_LINKS:
            problems.append("%s.links: %r is not one of %s" % (where, entry.get("links"), ", ".join(FLOOR_LINKS)))
        if not isinstance(entry.get("family"), str) or not entry.get("family"):
            problems.append("%s.family: must name a GPU family (blackwell, hopper, ...)" % where)
        if gpus is None or gpus < 2:
            problems.append("%s.gpus: %r is not a number of GPUs of 2 or more" % (where, entry.get("gpus")))
        if busbw is None:
            problems.append("%s.busbw_gbps: %r is not a positive number" % (where, entry.get("busbw_gbps")))
        if not isinstance(entry.get("source"), str) or not entry.get("source").strip():
            problems.append("%s.source: must say where the published figure comes from" % where)
        checked.append(dict(entry, gpus=gpus, busbw_gbps=busbw))
    if problems:
        raise InvalidOption("; ".join(problems))
    return checked


def floor_for(links, world, families, floors):
    """(floor, None) for the first of floors (check_floors) that matches the topology, or (None, why none
    applies)."""
    if world == 1:
        return None, "1 GPU: no floor applies (no inter-GPU link)"
    family = families[0] if len(families) == 1 else "/".join(families)
    for entry in floors:
        if (entry["links"], entry["family"], entry["gpus"]) == (links, family, world):
            return entry, None
    return None, "no floor for %d %s GPUs on %s among the floors: the figures alone" % (world, family, links)


def _rounded(item):
    return dict(item, us=round(item["us"], 1), algbw=round(item["algbw"], 2), busbw=round(item["busbw"], 2))


def _figures_text(figures, world):
    """Each size's time, and its bus bandwidth where there is a link to carry it."""
    return ", ".join("%s %.1f us%s" % (human(item["size"]), item["us"],
                                       " busbw %.2f GB/s" % item["busbw"] if world > 1 else "")
                     for item in figures)


def smoke(gpu, world, sizes, launched, timeout, floors, expected_environment=None):
    """The verdict of one launch: {"passed", "summary", "figures", "busbw_gbps", "floor", "topology", "nccl",
    "torch", "environment", "problems"}. gpu is gpu_facts' ansible_facts.gpu, floors check_floors' list,
    expected_environment the NCCL_* variables the runtime_env role renders (None: not compared)."""
    links, count, families = gpu_links(gpu)
    result = {"topology": {"links": links, "gpus": count, "families": families}, "world_size": world,
              "figures": [], "busbw_gbps": None, "floor": None, "nccl": None, "torch": None, "environment": None,
              "problems": [], "seconds": round(launched["seconds"], 1)}
    problem = launch_problem(launched, timeout)
    header, timings, ignored = parse_rank_output(launched["ranks"][0]["stdout"], sizes)
    if header is not None:
        result.update(nccl=header["nccl"], torch=header["torch"], environment=dict(
            (name, result_line(value, 400)) for name, value in sorted(header["environment"].items())))
    result["figures"] = [_rounded(dict(figure(size, timings[size][0], world), correct=timings[size][1]))
                         for size in sizes if size in timings]
    problems = [problem] if problem else []
    if problem is None:
        missing = [human(size) for size in sizes if size not in timings]
        if header is None or missing:
            problems.append("rank 0 reported %s%s (%d other marked line%s ignored)" % (
                "no header" if header is None else "",
                ("%sno figures for %s" % (" and " if header is None else "", ", ".join(missing))) if missing else "",
                ignored, "" if ignored == 1 else "s"))
    wrong = [human(item["size"]) for item in result["figures"] if not item["correct"]]
    if wrong:
        problems.append("the all-reduce summed wrong at %s: the GPUs or their links corrupt data" % ", ".join(wrong))
    if expected_environment is not None and header is not None:
        differ = ["%s=%s (the role renders %s)" % (name, header["environment"].get(name, "unset"), value)
                  for name, value in sorted(expected_environment.items())
                  if header["environment"].get(name) != str(value)]
        if differ:
            problems.append("the ranks did not see the rendered NCCL environment: %s" % "; ".join(differ))
    floor, no_floor = floor_for(links, world, families, floors)
    bandwidth = dict((item["size"], item["busbw"]) for item in result["figures"]).get(max(sizes))
    result["busbw_gbps"] = bandwidth if world > 1 else None
    verdict = no_floor
    if floor is not None:
        result["floor"] = floor
        if bandwidth is not None:
            below = bandwidth < floor["busbw_gbps"]
            verdict = "busbw %.2f GB/s at %s %s the floor of %g GB/s for %d %s GPUs on %s (%s)" % (
                bandwidth, human(max(sizes)), "is below" if below else "meets", floor["busbw_gbps"], world,
                floor["family"], links, result_line(floor["source"], 300))
            if below:
                problems.append(verdict)
    result["problems"] = problems
    result["passed"] = not problems
    described = "%d %s GPU%s (%s)" % (world, "/".join(families), "" if world == 1 else "s", links)
    if problems:
        result["summary"] = "NCCL all-reduce on %s failed: %s. Figures: %s; NCCL %s" % (
            described, "; ".join(problems), _figures_text(result["figures"], world) or "none",
            result["nccl"] or "unknown")
    else:
        result["summary"] = "NCCL all-reduce on %s passed: %s. Figures: %s; NCCL %s" % (
            described, verdict, _figures_text(result["figures"], world), result["nccl"])
    return result
