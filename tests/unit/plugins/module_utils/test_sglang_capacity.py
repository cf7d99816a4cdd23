"""plugins/module_utils/_sglang/capacity.py: what SGLang logged of its GPU memory, the processes that held GPU memory
at launch, the last good launch of a command line, and the judgement of a start that got ready with less."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import MASK, masked_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import capacity
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import Instance

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
LOGS = Path(__file__).resolve().parents[3] / "data" / "sglang_logs"
MEMORY = LOGS / "memory"
CLEAN = MEMORY / "built-0.5.17-h100-tp1-clean.log"
BESIDE_HOLDER = MEMORY / "built-0.5.17-h100-tp1-beside-holder.log"
# Who held the H100 in the run the built logs stand for (the figures of the holder are the test's own).
HOLDER = {"pid": 4242, "user": "alice", "command": "python3 train.py --epochs 3", "used_memory_mib": 79000,
          "gpu_uuid": "GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b"}
ARGV = ["/opt/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/srv/models/tiny"]


def memory_of(path):
    return capacity.startup_memory(path.read_text().splitlines())


@pytest.mark.parametrize("path, expected", [
    # Real logs (tests/data/sglang_logs/SOURCES.md): the scheduler's pool, the first free memory of each rank.
    (LOGS / "success-tp1-qwen25-05b-docs-notebook-ci.log", {"kv_tokens": 20480, "avail_mem_gb": 46.58}),
    # EAGLE: the draft model loads and allocates after the target, with less memory free: the target's counts.
    (LOGS / "success-tp1-eagle-llama2-7b-docs-notebook-ci.log", {"kv_tokens": 20480, "avail_mem_gb": 63.55}),
    (LOGS / "success-tp8-grok2-fp8-k8s-h100.log", {"kv_tokens": 903439, "avail_mem_gb": 77.43}),
    # Older releases log max_total_num_tokens on every rank, with one value.
    (LOGS / "success-tp8-deepseek-r1-k8s-tail.log", {"kv_tokens": 712400, "avail_mem_gb": None}),
    # No scheduler line (it failed in capture): the smallest rank's pool.
    (LOGS / "failure-keyerror-cuda-graph-capture-tp8-dcu.log", {"kv_tokens": 2659072, "avail_mem_gb": None}),
    # 0.5.17's format (dtype), built from its format strings (memory/SOURCES.md).
    (CLEAN, {"kv_tokens": 20542816, "avail_mem_gb": 78.37}),
    (BESIDE_HOLDER, {"kv_tokens": 405968, "avail_mem_gb": 1.66}),
    # A node without the scheduler's line: each rank's Full pool, not its SWA pool; the least free rank.
    (MEMORY / "built-0.5.17-rank1-of-2-tp4-sliding-window-pools.log", {"kv_tokens": 1200000, "avail_mem_gb": 121.75}),
    # A log that says nothing of its memory.
    (LOGS / "failure-cudnn-check-torch291-partial.log", {"kv_tokens": None, "avail_mem_gb": None}),
])
def test_the_memory_a_start_up_logged(path, expected):
    assert memory_of(path) == expected


def test_lines_that_are_not_sglangs_are_not_read_for_memory():
    lines = ["[2026-01-01 12:00:00] KV Cache is allocated. #tokens: 1%s, KV size: 1.00 GB" % ("0" * 30),
             "[2026-01-01 12:00:00] Mamba Cache is allocated. #tokens: 5, conv_state size: 1.00 GB",
             "[2026-01-01 12:00:00] Post-capture KV sizing: KV cache allocated. dtype: bf16, #tokens: 9, KV size: 1 GB",
             "[2026-01-01 12:00:00] user said: max_total_num_tokens=7, and KV Cache is allocated. #tokens: 8,",
             "[2026-01-01 12:00:00 TP1] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2, KV size: 1.00 GB",
             "\x1b[32m[2026-01-01 12:00:01 TP0] KV Cache is allocated. #tokens: 300, KV size: 1.00 GB\x1b[0m"]
    assert capacity.startup_memory(lines) == {"kv_tokens": 300, "avail_mem_gb": None}


def test_each_ranks_first_pool_counts_not_its_draft_models():
    # An EAGLE start-up as success-tp1-eagle-llama2-7b-docs-notebook-ci.log logs it, without the scheduler's line
    # (a node of rank 1 or more), its draft model given a pool of its own size.
    lines = ["[2025-06-17 03:52:34] KV Cache is allocated. #tokens: 20480, K size: 5.00 GB, V size: 5.00 GB",
             "[2025-06-17 03:52:35] KV Cache is allocated. #tokens: 4096, K size: 0.16 GB, V size: 0.16 GB"]
    assert capacity.startup_memory(lines)["kv_tokens"] == 20480


def test_the_memory_kept_is_bounded_whatever_the_number_of_ranks():
    memory = capacity.StartupMemory()
    for rank in range(capacity.MAX_RANKS + 50):
        memory.feed("[2026-01-01 12:00:00 TP%d] KV Cache is allocated. #tokens: %d, KV size: 1.00 GB" % (rank, rank + 1))
    assert len(memory.pool_tokens) == capacity.MAX_RANKS and memory.summary()["kv_tokens"] == 1


def last_good(tokens=20542816, **fields):
    return dict({"kv_tokens": tokens, "avail_mem_gb": 78.37, "pid": 1111, "start_time": 10, "started_at": 0,
                 "recorded_at": 1}, **fields)


def test_a_clean_start_is_not_degraded():
    found = capacity.judge(memory_of(CLEAN), [], last_good())
    assert found["degraded"] is False and found["message"] is None
    assert found["share"] == 1.0 and not found["below_last_good"] and not found["beside_holders"]


def test_a_start_beside_a_holder_names_the_holder_and_both_token_counts():
    found = capacity.judge(memory_of(BESIDE_HOLDER), [HOLDER], last_good())
    assert found["degraded"] and found["below_last_good"] and found["beside_holders"]
    assert found["share"] == 0.0198
    assert found["message"] == (
        "Degraded start of the SGLang server: its KV cache holds 405968 tokens, 2.0% of the 20542816 tokens of this "
        "command line's last good launch on this node (pid 1111, started 1970-01-01 00:00:00 UTC), below "
        "degraded_ratio=0.5; when it was launched, 1 other process held GPU memory: pid 4242 (user alice: python3 "
        "train.py --epochs 3) 79000 MiB on GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b; free GPU memory when the weights "
        "began to load: 1.66 GB (78.37 GB at the last good launch). Free the GPUs (stop what holds their memory, or "
        "give the server GPUs of its own), then restart the server.")


def test_a_first_launch_has_no_share_but_is_still_degraded_beside_a_holder():
    found = capacity.judge(memory_of(BESIDE_HOLDER), [HOLDER], None)
    assert found["degraded"] and found["beside_holders"] and not found["below_last_good"] and found["share"] is None
    assert "its KV cache holds 405968 tokens; this command line has no earlier good launch on this node" in \
        found["message"] and "pid 4242 (user alice" in found["message"]
    alone = capacity.judge(memory_of(BESIDE_HOLDER), [], None)
    assert alone["degraded"] is False and alone["message"] is None


@pytest.mark.parametrize("tokens, degraded", [(10271408, False), (10271407, True)])
def test_the_ratio_is_a_share_below_which_a_start_is_degraded(tokens, degraded):
    found = capacity.judge({"kv_tokens": tokens, "avail_mem_gb": None}, [], last_good(20542816))
    assert found["degraded"] is degraded and found["below_last_good"] is degraded


def test_the_ratio_is_settable_and_0_judges_by_the_holders_alone():
    memory = memory_of(BESIDE_HOLDER)
    assert capacity.judge(memory, [], last_good(), ratio=0.01)["degraded"] is False
    assert capacity.judge(memory, [], last_good(), ratio=0.02)["degraded"] is True
    assert capacity.judge(memory, [], last_good(), ratio=0)["degraded"] is False
    assert capacity.judge(memory, None, last_good(), ratio=0)["holders"] is None


@pytest.mark.parametrize("ratio", [None, -0.1, 1.5])
def test_a_ratio_outside_0_to_1_is_refused_naming_the_option(ratio):
    assert capacity.ratio_problem(ratio).startswith("degraded_ratio=%s: give the share" % ratio)
    assert capacity.ratio_problem(0) is None and capacity.ratio_problem(1) is None


def test_a_log_that_does_not_say_its_pool_is_judged_by_its_holders():
    found = capacity.judge({"kv_tokens": None, "avail_mem_gb": None}, [HOLDER], last_good())
    assert found["degraded"] and found["share"] is None
    assert found["message"].startswith("Degraded start of the SGLang server: SGLang's log does not say how many "
                                       "tokens its KV cache holds; when it was launched")


def test_the_holders_commands_go_through_the_mask_and_the_message_is_made_of_them():
    holder = dict(HOLDER, command="python3 serve.py --token sk-shared-1 --api-key sk-own-2")
    found = capacity.judge(memory_of(BESIDE_HOLDER), [holder], None,
                           mask=lambda text: masked_text(text, ["sk-shared-1"]))
    shown = "python3 serve.py --token %s --api-key %s" % (MASK, MASK)
    assert "sk-shared-1" not in json.dumps(found) and "sk-own-2" not in json.dumps(found)
    assert found["holders"][0]["command"] == shown and "(user alice: %s) 79000 MiB" % shown in found["message"]
    assert holder["command"].endswith("sk-own-2")  # the recorded entry itself is left as it is


def write_proc(root, pid, uid, argv):
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "status").write_text("Name:\tx\nUid:\t%d\t%d\t%d\t%d\n" % ((uid,) * 4))
    (root / str(pid) / "cmdline").write_bytes(b"".join(word.encode() + b"\0" for word in argv))


def test_holders_are_described_from_proc_with_sglangs_secret_flags_masked(tmp_path):
    write_proc(tmp_path, 4242, 0, ["python3", "-m", "sglang.launch_server", "--api-key", "sk-9", "x" * 300])
    processes = [{"pid": 4242, "name": "/usr/bin/python3", "used_memory_mib": 79000, "gpu_uuid": "GPU-1"},
                 {"pid": 77, "name": "/usr/bin/other", "used_memory_mib": None, "gpu_uuid": "GPU-2"}]
    first, gone = capacity.describe_holders(processes, str(tmp_path))
    assert first["user"] == "root" and first["used_memory_mib"] == 79000 and first["gpu_uuid"] == "GPU-1"
    assert first["command"].startswith("python3 -m sglang.launch_server --api-key %s xxx" % MASK)
    assert "sk-9" not in first["command"] and first["command"].endswith(" bytes cut]")
    # Not in this PID namespace's /proc: nvidia-smi's name, no user.
    assert gone == {"pid": 77, "user": None, "command": "/usr/bin/other", "used_memory_mib": None, "gpu_uuid": "GPU-2"}


def test_the_holders_at_launch_come_from_nvidia_smi_and_are_none_without_it(tmp_path):
    class Answer(object):
        returncode = 0
        stdout = "4242, /usr/bin/python3, 79000, GPU-1\n"

    write_proc(tmp_path, 4242, 0, ["python3", "train.py"])
    holders = capacity.holders_at_launch(lambda argv, **options: Answer(), str(tmp_path))
    assert holders == [{"pid": 4242, "user": "root", "command": "python3 train.py", "used_memory_mib": 79000,
                        "gpu_uuid": "GPU-1"}]

    def missing(argv, **options):
        raise OSError(2, "No such file or directory")
    assert capacity.holders_at_launch(missing, str(tmp_path)) is None


def test_the_recorded_holders_leave_out_what_is_not_a_holder():
    odd = ["x", {"pid": "1; rm"}, {"pid": True}, dict(HOLDER, command=["python3"]), {"command": "no pid"}]
    assert capacity.recorded_holders({"gpu_holders": [HOLDER] + odd + [dict(HOLDER, command=None)]}) == [
        HOLDER, dict(HOLDER, command=None)]
    assert capacity.recorded_holders({"gpu_holders": None}) is None
    assert capacity.recorded_holders({}) is None and capacity.recorded_holders(None) is None


def test_the_digest_tells_command_lines_apart():
    assert capacity.command_digest(ARGV) == capacity.command_digest(list(ARGV))
    assert capacity.command_digest(ARGV) != capacity.command_digest(ARGV + ["--tp", "2"])
    assert "/srv/models" not in capacity.command_digest(ARGV)


def recorded_launch(instance, pid=4242, holders=(), argv=None, offset=0):
    argv = ARGV if argv is None else argv
    state = dict(pid=pid, start_time=pid * 10, offset=offset, log_path="/l", started_at=1.0, boot_id="b",
                 argv_digest=capacity.command_digest(argv), gpu_holders=list(holders))
    instance.record_launch(state)
    return instance.launch_of(pid, offset)


def test_a_good_start_becomes_the_last_good_launch_of_its_command_line(tmp_path):
    instance = Instance(str(tmp_path), "sglang")
    launch = recorded_launch(instance)
    found = capacity.gate(instance, launch, memory_of(CLEAN), now=5.0)
    assert found["recorded_as_good"] and found["last_good"] is None and not found["degraded"]
    assert instance.capacity_records() == {capacity.command_digest(ARGV): {
        "kv_tokens": 20542816, "avail_mem_gb": 78.37, "pid": 4242, "start_time": 42420, "started_at": 1.0,
        "recorded_at": 5.0}}
    assert os.stat(str(tmp_path / "sglang.capacity.json")).st_mode & 0o777 == 0o600
    # Judged again (diagnose, validate), the launch is its own last good launch.
    again = capacity.judge_launch(instance, launch, memory_of(CLEAN))
    assert again["last_good_is_this_launch"] and again["share"] == 1.0 and not again["degraded"]


def test_a_degraded_start_is_judged_against_the_last_good_one_and_never_replaces_it(tmp_path):
    instance = Instance(str(tmp_path), "sglang")
    capacity.gate(instance, recorded_launch(instance), memory_of(CLEAN), now=5.0)
    kept = instance.capacity_records()
    degraded = capacity.gate(instance, recorded_launch(instance, pid=5151, holders=[HOLDER], offset=100),
                             memory_of(BESIDE_HOLDER), now=6.0)
    assert degraded["degraded"] and degraded["last_good"]["pid"] == 4242 and not degraded["recorded_as_good"]
    assert "405968 tokens, 2.0% of the 20542816" in degraded["message"] and "pid 4242 (user alice" in degraded["message"]
    assert instance.capacity_records() == kept
    # Another command line has a last good launch of its own.
    other = capacity.gate(instance, recorded_launch(instance, pid=6161, argv=ARGV + ["--tp", "2"], offset=200),
                          memory_of(BESIDE_HOLDER), now=7.0)
    assert other["last_good"] is None and other["recorded_as_good"] and len(instance.capacity_records()) == 2


def test_nothing_is_recorded_without_a_recorded_launch_or_a_pool_in_the_log(tmp_path):
    instance = Instance(str(tmp_path), "sglang")
    assert capacity.gate(instance, None, memory_of(CLEAN))["recorded_as_good"] is False
    launch = recorded_launch(instance)
    assert capacity.gate(instance, launch, {"kv_tokens": None, "avail_mem_gb": None})["recorded_as_good"] is False
    assert capacity.gate(instance, dict(launch, argv_digest=None), memory_of(CLEAN))["recorded_as_good"] is False
    assert not (tmp_path / "sglang.capacity.json").exists()


def test_the_records_are_bounded_and_those_not_the_modules_are_dropped():
    records = dict(("d%d" % number, last_good(recorded_at=number)) for number in range(20))
    records.update(bad={"kv_tokens": "many"}, worse=[1], undated=last_good(recorded_at="soon"))
    kept = capacity.with_good_launch(records, "new", last_good(recorded_at=100))
    assert len(kept) == capacity.GOOD_LAUNCHES and "new" in kept and "d19" in kept and "d0" not in kept
    assert sorted(kept) == sorted(["new"] + ["d%d" % number for number in range(13, 20)])
    assert capacity.reference({"x": {"kv_tokens": 0}}, "x") is None
    assert capacity.reference({"x": {"kv_tokens": True}}, "x") is None
    assert capacity.reference([], "x") is None and capacity.reference({"x": last_good()}, None) is None


def test_a_capacity_file_that_is_not_json_reads_as_none(tmp_path):
    (tmp_path / "sglang.capacity.json").write_text("{not json")
    instance = Instance(str(tmp_path), "sglang")
    assert instance.capacity_records() == {}
    (tmp_path / "sglang.capacity.json").write_text("[1, 2]")
    assert instance.capacity_records() == {}
    assert "sglang.capacity.json" in instance.kept_files() and "sglang.capacity.json" not in instance.files()


def standin_startup(tmp_path, held_mib=None):
    """The memory the SGLang stand-in logs before it is ready, nvidia-smi being tests/fixtures/fake_nvidia_smi, which
    says this test's process holds held_mib of GPU memory (none held when None)."""
    env = dict(os.environ, PYTHONPATH=str(FIXTURES / "sglang_standin"), SGLANG_STANDIN_STEP="0",
               PATH="%s:%s" % (FIXTURES / "fake_nvidia_smi", os.environ["PATH"]))
    if held_mib is not None:
        (tmp_path / "apps.csv").write_text("%d, %d\n" % (os.getpid(), held_mib))
        env["FAKE_NVIDIA_SMI_APPS"] = str(tmp_path / "apps.csv")
    memory = capacity.StartupMemory()
    process = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--port", "0",
                                "--tensor-parallel-size", "2"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:
            memory.feed(line.rstrip("\n"))
            if "The server is fired up and ready to roll!" in line:
                break
    finally:
        process.kill()
        process.wait()
    return memory.summary()


def test_the_stand_in_logs_sglangs_memory_lines_and_a_smaller_pool_beside_a_holder(tmp_path):
    alone = standin_startup(tmp_path)
    beside = standin_startup(tmp_path, held_mib=20480)
    assert alone == {"kv_tokens": 359228, "avail_mem_gb": 94.21}
    assert beside == {"kv_tokens": 53632, "avail_mem_gb": 74.21}
    assert capacity.judge(beside, [], dict(alone, pid=1))["below_last_good"] is True


def test_a_link_planted_as_the_capacity_file_is_replaced_never_written_through(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    state = tmp_path / "state"
    state.mkdir(mode=0o750)
    (state / "sglang.capacity.json").symlink_to(target)
    instance = Instance(str(state), "sglang")
    assert instance.capacity_records() == {}
    assert capacity.gate(instance, recorded_launch(instance), memory_of(CLEAN))["recorded_as_good"]
    assert target.read_text() == "keep" and not (state / "sglang.capacity.json").is_symlink()
    assert list(instance.capacity_records().values())[0]["kv_tokens"] == 20542816
