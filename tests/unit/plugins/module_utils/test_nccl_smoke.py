"""The NCCL smoke's core: the figures, the floor of a topology, the verdict, what rank 0 printed, and the launch of
real processes of this machine's Python (as root, the owner of what they run: no runuser), the real worker against
the torch.distributed stand-in (tests/fixtures/torch_distributed_standin)."""
import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.nccl_smoke import (
    BANDWIDTH_SIZE,
    DEFAULT_SIZES,
    LINE_LIMIT,
    MARK,
    check_floors,
    figure,
    floor_for,
    launch,
    parse_rank_output,
    smoke,
    worker_program,
)

CHECKOUT = Path(__file__).resolve().parents[4]
STANDIN = CHECKOUT / "tests" / "fixtures" / "torch_distributed_standin"
FLOORS_FILE = CHECKOUT / "roles" / "runtime_env" / "vars" / "nccl_floors.yml"
SIZES = [131072, 268435456]


def gpu(count, capability="12.0", interconnect="pcie", nvswitch=False):
    return {"state": "ok", "interconnect": interconnect if count > 1 else "single", "nvswitch": nvswitch,
            "gpus": [{"index": index, "compute_capability": capability} for index in range(count)]}


def shipped_floors():
    return check_floors(yaml.safe_load(FLOORS_FILE.read_text())["runtime_env_nccl_floors"])


def rank_zero(*records, extra=""):
    header = {"environment": {"NCCL_PROTO": "LL"}, "torch": "2.9.1", "nccl": "2.28.9"}
    return "\n".join([MARK + json.dumps(header)] + [MARK + json.dumps(record) for record in records]) + extra


def launched(stdout, world=1, hung=(), stopped=(), rcs=None, stderr=""):
    rcs = rcs or [0] * world
    return {"ranks": [{"rank": rank, "rc": rcs[rank], "stdout": stdout if rank == 0 else "", "stderr": stderr}
                      for rank in range(world)], "hung": list(hung), "stopped": list(stopped), "seconds": 3.0}


def test_figures_are_nccl_tests_algbw_and_busbw():
    assert figure(256 * 2 ** 20, 0.01, 8) == {
        "size": 268435456, "us": 10000.0, "algbw": pytest.approx(26.8435456), "busbw": pytest.approx(46.976204)}
    assert figure(1000, 1e-6, 1)["busbw"] == 0


def test_the_default_sizes_are_the_decode_all_reduces_and_one_for_bandwidth():
    assert DEFAULT_SIZES == (131072, 524288, 2097152, BANDWIDTH_SIZE) and BANDWIDTH_SIZE == 256 * 2 ** 20


def test_each_shipped_floor_has_its_source_and_lies_below_its_published_figure():
    floors = shipped_floors()
    assert {(entry["links"], entry["family"], entry["gpus"]) for entry in floors} >= {
        ("pcie", "blackwell", 8), ("nvswitch", "hopper", 8), ("nvswitch", "blackwell", 8)}
    for entry in floors:
        assert entry["source"].startswith("https://")
        assert entry["busbw_gbps"] < entry["published_gbps"]


@pytest.mark.parametrize("facts, world, expected", [
    (gpu(8), 8, ("pcie", "blackwell", 8)),
    (gpu(8, "9.0", "nvlink", nvswitch=True), 8, ("nvswitch", "hopper", 8)),
    (gpu(8, "10.0", "nvlink", nvswitch=True), 8, ("nvswitch", "blackwell", 8)),
])
def test_the_floor_is_chosen_by_the_links_the_family_and_the_number_of_gpus(facts, world, expected):
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import gpu_links
    links, _count, families = gpu_links(facts)
    floor, why = floor_for(links, world, families, shipped_floors())
    assert why is None and (floor["links"], floor["family"], floor["gpus"]) == expected


def test_no_floor_for_one_gpu_nor_for_a_topology_without_a_published_figure():
    assert floor_for("single", 1, ["hopper"], shipped_floors()) == (
        None, "1 GPU: no floor applies (no inter-GPU link)")
    assert floor_for("pcie", 4, ["hopper"], shipped_floors()) == (
        None, "no floor for 4 hopper GPUs on pcie among the floors: the figures alone")


def test_floors_are_checked_with_every_problem_named():
    with pytest.raises(InvalidOption) as raised:
        check_floors([{"links": "pci", "family": "", "gpus": 1, "busbw_gbps": "fast"}, "x"], "my_floors")
    assert str(raised.value) == (
        "my_floors[0].links: 'pci' is not one of nvswitch, nvlink, pcie; my_floors[0].family: must name a GPU "
        "family (blackwell, hopper, ...); my_floors[0].gpus: 1 is not a number of GPUs of 2 or more; "
        "my_floors[0].busbw_gbps: 'fast' is not a positive number; my_floors[0].source: must say where the "
        "published figure comes from; my_floors[1]: must be a mapping with links, family, gpus, busbw_gbps and "
        "source")
    # Templates before ansible-core 2.19 give text.
    assert check_floors([{"links": "pcie", "family": "ada", "gpus": "4", "busbw_gbps": "20.5", "source": "s"}])[0][
        "gpus"] == 4


def test_rank_zeros_lines_are_read_and_anything_else_is_ignored():
    text = rank_zero({"size": 131072, "seconds": 2e-5, "correct": True},
                     {"size": 3, "seconds": 1.0, "correct": True},  # a size not asked
                     {"size": 268435456, "seconds": "fast", "correct": True},
                     {"size": 268435456, "seconds": 0.01, "correct": True, "more": 1},
                     ["a list"],
                     extra="\n%snot json\n%s%s\nNCCL INFO unmarked\n" % (MARK, MARK, "x" * LINE_LIMIT))
    header, timings, ignored = parse_rank_output(text, SIZES)
    assert header == {"environment": {"NCCL_PROTO": "LL"}, "torch": "2.9.1", "nccl": "2.28.9"}
    assert timings == {131072: (2e-5, True)}
    assert ignored == 6


def test_busbw_below_the_floor_fails_with_the_figures():
    result = smoke(gpu(8), 8, SIZES, launched(rank_zero({"size": 131072, "seconds": 3e-5, "correct": True},
                                                        {"size": 268435456, "seconds": 0.02, "correct": True}), 8),
                   60, shipped_floors())
    assert result["passed"] is False
    assert result["busbw_gbps"] == 23.49 and result["floor"]["busbw_gbps"] == 30
    assert result["summary"].startswith(
        "NCCL all-reduce on 8 blackwell GPUs (pcie) failed: busbw 23.49 GB/s at 256 MiB is below the floor of 30 GB/s "
        "for 8 blackwell GPUs on pcie (https://github.com/voipmonitor/rtx6kpro")
    assert result["summary"].endswith(
        "Figures: 128 KiB 30.0 us busbw 7.65 GB/s, 256 MiB 20000.0 us busbw 23.49 GB/s; NCCL 2.28.9")


def test_busbw_that_meets_the_floor_passes():
    result = smoke(gpu(8), 8, SIZES, launched(rank_zero({"size": 131072, "seconds": 3e-5, "correct": True},
                                                        {"size": 268435456, "seconds": 0.01, "correct": True}), 8),
                   60, shipped_floors())
    assert result["passed"] is True and result["problems"] == []
    assert "passed: busbw 46.98 GB/s at 256 MiB meets the floor of 30 GB/s" in result["summary"]


def test_one_gpu_runs_the_all_reduce_and_passes_without_a_floor():
    result = smoke(gpu(1, "9.0"), 1, SIZES, launched(rank_zero({"size": 131072, "seconds": 2e-5, "correct": True},
                                                               {"size": 268435456, "seconds": 1e-4,
                                                                "correct": True})), 60, shipped_floors())
    assert result["passed"] is True and result["floor"] is None and result["busbw_gbps"] is None
    assert result["summary"] == (
        "NCCL all-reduce on 1 hopper GPU (single) passed: 1 GPU: no floor applies (no inter-GPU link). Figures: "
        "128 KiB 20.0 us, 256 MiB 100.0 us; NCCL 2.28.9")


def test_a_wrong_sum_a_missing_size_and_an_environment_the_role_did_not_render_fail():
    result = smoke(gpu(1), 1, SIZES, launched(rank_zero({"size": 131072, "seconds": 2e-5, "correct": False})), 60,
                   [], expected_environment={"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})
    assert result["problems"] == [
        "rank 0 reported no figures for 256 MiB (0 other marked lines ignored)",
        "the all-reduce summed wrong at 128 KiB: the GPUs or their links corrupt data",
        "the ranks did not see the rendered NCCL environment: NCCL_ALGO=unset (the role renders Ring)"]


def test_a_hung_or_failed_rank_is_named():
    hung = smoke(gpu(2), 2, SIZES, launched("", 2, hung=[1], rcs=[0, None], stderr="a\nwaiting\n"), 60, [])
    assert hung["problems"] == ["rank 1 did not finish within 60 s and was killed (rank 1's standard error ends: "
                                "waiting)"]
    failed = smoke(gpu(3), 3, SIZES, launched("", 3, stopped=[0, 2], rcs=[None, 1, None],
                                              stderr="RuntimeError: NCCL error\n"), 60, [])
    assert failed["problems"] == ["rank 1 exited with status 1: RuntimeError: NCCL error; ranks 0, 2 were stopped"]
    assert failed["summary"].startswith("NCCL all-reduce on 3 blackwell GPUs (pcie) failed: rank 1 exited")


# Real processes of this machine's Python, started as the smoke starts them.

def standin_environment(scenario, tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    return lambda rank: {"PYTHONPATH": str(STANDIN), "TORCH_STANDIN_SCENARIO": str(path)}


def test_the_real_worker_runs_every_rank_with_the_rank_variables(tmp_path):
    result = launch(sys.executable, 2, SIZES, os.getuid(), 60,
                    rank_environment=standin_environment({"bytes_per_second": 1e11}, tmp_path))
    assert (result["hung"], result["stopped"], [rank["rc"] for rank in result["ranks"]]) == ([], [], [0, 0])
    verdict = smoke(gpu(2), 2, SIZES, result, 60, [])
    assert verdict["passed"] is True, verdict["summary"]
    assert [item["size"] for item in verdict["figures"]] == SIZES and verdict["nccl"] == "2.28.9"
    # 256 MiB at 1e11 B/s: 2.7 ms, algbw no more than 100 GB/s.
    assert 0 < verdict["figures"][1]["algbw"] <= 100


def hangs_after_a_line(argv):
    print("rank %s is up" % os.environ["RANK"], flush=True)
    while True:
        time.sleep(1)


def exits_at_once_on_rank_one(argv):
    if os.environ["RANK"] == "1":
        sys.stderr.write("Traceback...\nRuntimeError: rank one is sick\n")
        sys.exit(3)
    while True:
        time.sleep(1)


def still_running(marker):
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                if marker in handle.read():
                    found.append(name)
        except OSError:
            continue
    return found


def test_ranks_past_the_deadline_are_killed_and_named():
    started = time.monotonic()
    result = launch(sys.executable, 2, SIZES, os.getuid(), 2, program=worker_program(hangs_after_a_line))
    assert time.monotonic() - started < 10
    assert result["hung"] == [0, 1] and [rank["rc"] for rank in result["ranks"]] == [None, None]
    assert result["ranks"][0]["stdout"] == "rank 0 is up\n"
    assert still_running(b"hangs_after_a_line") == []


def test_one_failed_rank_stops_the_others_at_once():
    started = time.monotonic()
    result = launch(sys.executable, 3, SIZES, os.getuid(), 60, program=worker_program(exits_at_once_on_rank_one))
    assert time.monotonic() - started < 10
    assert result["stopped"] == [0, 2] and result["ranks"][1]["rc"] == 3
    assert result["ranks"][1]["stderr"].endswith("RuntimeError: rank one is sick\n")
    assert still_running(b"exits_at_once_on_rank_one") == []


def test_a_rank_that_hangs_in_the_stand_in_is_reported_by_the_verdict(tmp_path):
    result = launch(sys.executable, 2, SIZES, os.getuid(), 3,
                    rank_environment=standin_environment({"hang_rank": 1}, tmp_path))
    verdict = smoke(gpu(2), 2, SIZES, result, 3, [])
    assert verdict["passed"] is False
    assert verdict["problems"] == ["rank 1 did not finish within 3 s and was killed (rank 1's standard error ends: "
                                   "stand-in rank 1 waits for its peers for ever)"]


def test_garbage_from_rank_zero_is_ignored_and_the_figures_still_read(tmp_path):
    result = launch(sys.executable, 1, SIZES, os.getuid(), 60,
                    rank_environment=standin_environment({"garbage": True}, tmp_path))
    verdict = smoke(gpu(1), 1, SIZES, result, 60, [])
    assert verdict["passed"] is True, verdict["summary"]
    assert [item["size"] for item in verdict["figures"]] == SIZES
