"""gpu_health_info with an nvidia-smi and a dcgmi that print what no driver prints: DCGM rows and NVLink counter and
state lines built to make a backtracking pattern run for hours, a flood of fields below long sections, 10,000 GPUs,
numbers of 4,400 digits, terminal sequences and control characters in every value, a command that hangs. The
stand-ins are root's (a replaced or broken tool, not the user's code), planted first on the module's PATH, where
get_bin_path finds them. The module returns within the suite's bounds and its own timeout, says what it cut, and no
text of its result shows a control character (the harness checks every run's result for that). And saved evidence in
a directory the user fills: links, a FIFO, a sparse file, a gzip bomb."""
import zlib
from pathlib import Path

import hostile_harness

MODULE = "gpu_health_info"
# The PATH the harness runs each module with; the stand-ins' directory goes before it.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RECORDED = Path(__file__).resolve().parents[1] / "data" / "h200" / "nvidia-smi-q.txt"
# The kernel log and the PCIe fabric are this machine's: left out, so that the verdict rests on the stand-ins.
ARGS = dict(kernel_log=False, pcie_fabric=False, dcgm_diag=True)
# nvidia-smi and dcgmi as MODE has them answer, argv picking the answer as the real ones' options do.
STAND_IN = r'''#!@PYTHON@
import re
import sys
import time

MODE = "@MODE@"
MIB = 1 << 20
HUGE = "9" * 4400
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\x00\x08\x7f\u2028"
UUID = "GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b"
NVLINK_GPU = "GPU 0: NVIDIA H200 (UUID: %s)\n" % UUID
DCGM = "| Deployment | Pass |\n| Memory | Fail - All |\n| Warning | GPU 0 failed |\n"


def details():
    recorded = open("@RECORDED@").read()
    if MODE == "fields":
        sections = "".join("  " * depth + "S" * 4000 + "\n" for depth in range(8))
        return "GPU 00000000:00:06.0\n" + sections + "".join("  " * 8 + "F%06d : 1\n" % n for n in range(200000))
    if MODE == "gpus":
        return "".join("GPU 00000000:%02X:%02X.0\n    Product Name : NVIDIA H200\n    GPU UUID : GPU-%08x\n"
                       % (n // 256 % 256, n % 32, n) for n in range(10000))
    if MODE == "escapes":
        # The first GPU's UUID only: the second's is matched to nvidia-smi nvlink -e's.
        escaped = re.sub(r"(GPU UUID +: [^\n]*)", r"\1" + ESCAPES, recorded, count=1)
        return re.sub(r"(Product Name|Persistence Mode|State|Status)( +: [^\n]*)", r"\1\2" + ESCAPES, escaped)
    if MODE == "digits":
        return re.sub(r": (-?)\d+", r": \g<1>" + HUGE, recorded)
    if MODE == "hang":
        time.sleep(2)
    return recorded


def nvlink():
    if MODE == "hang":
        time.sleep(600)
    if MODE == "nvlink":
        # Lines of 1 MiB, then lines of 4 KiB (the old pattern took 25 ms for each).
        return (NVLINK_GPU + ("\t Link 0: " + "Errors " * (MIB // 7) + ": x\n") * 3
                + ("\t Link 0: " + "Errors " * 580 + ": x\n") * 256 + "\t Link 3: Replay Errors: 7\n")
    if MODE == "gpus":
        return "".join("GPU %d: H200 (UUID: GPU-%08x)\n\t Link 0: Replay Errors: 1\n" % (n, n) for n in range(10000))
    if MODE == "escapes":
        return "GPU 1: NVIDIA H200 (UUID: GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014)\n\t Link 0: Replay%s Errors: 3\n" \
            % ESCAPES
    if MODE == "digits":
        return ("GPU %s: H200 (UUID: GPU-1)\n\t Link 0: Replay Errors: 1\n" % HUGE + NVLINK_GPU
                + "\t Link %s: Replay Errors: 1\n\t Link 1: CRC Errors: %s\n" % (HUGE, HUGE))
    return ""


def nvlink_status():
    if MODE == "hang":
        time.sleep(600)
    if MODE == "nvlink":
        # Lines of 1 MiB of link numbers and of inactive states never closed, then one inactive link.
        return (NVLINK_GPU + ("\t Link " + "1" * MIB + ": x\n") + ("\t Link 0: " + "<inactive " * (MIB // 10) + "\n")
                + ("\t Link 0: " + "9" * 4000 + " GB/s\n") * 256 + "\t Link 3: <inactive>\n")
    if MODE == "gpus":
        return "".join("GPU %d: H200 (UUID: GPU-%08x)\n\t Link 0: <inactive>\n" % (n, n) for n in range(10000))
    if MODE == "escapes":
        return "GPU 1: NVIDIA H200 (UUID: GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014)\n\t Link 5: <inactive>%s\n" \
            "\t Link 6%s: <inactive>\n" % (ESCAPES, ESCAPES)
    return ""


def dcgmi():
    if MODE == "rows":
        # Each row a cell of 4,000 spaces not closed by a pipe (the old pattern took 70 s for one), then more.
        return ("|" + " " * 4000 + "x" + " " * 1000 + "\n") * 50 + ("| " + "a " * (MIB // 8) + "\n") * 2 + DCGM
    if MODE == "escapes":
        return "| Memory%s | Fail - All%s |\n| Warning | GPU 0%s failed |\n" % ((ESCAPES,) * 3)
    if MODE == "hang":
        time.sleep(600)
    return DCGM


args = sys.argv[1:]
if sys.argv[0].endswith("dcgmi"):
    sys.stdout.write(dcgmi())
else:
    sys.stdout.write(nvlink_status() if args[:2] == ["nvlink", "-s"] else nvlink() if args[:1] == ["nvlink"]
                     else details())
'''


def plant(case, mode):
    """The stand-ins nvidia-smi and dcgmi answering as mode, in a directory of root's; the directory."""
    directory = case.root_dir("bin")
    for name in ("nvidia-smi", "dcgmi"):
        path = directory / name
        path.write_text(STAND_IN.replace("@PYTHON@", hostile_harness.SYSTEM_PYTHON).replace("@MODE@", mode).replace(
            "@RECORDED@", str(RECORDED)))
        path.chmod(0o755)
    return directory


def health(case, monkeypatch, mode, **args):
    """gpu_health_info run by the harness with the stand-ins first on its PATH (the harness's module() sets none)."""
    run, directory = case._run, plant(case, mode)

    def with_path(argv, timeout, memory, environment):
        return run(argv, timeout, memory, dict(environment, PATH="%s:%s" % (directory, SYSTEM_PATH)))
    monkeypatch.setattr(case, "_run", with_path)
    return case.module(MODULE, dict(ARGS, **args))


def differences(result, expected):
    return ["%s is %r, not %r" % (key, str(result.get(key))[:300], value) for key, value in sorted(expected.items())
            if result.get(key) != value]


def ids(result):
    return sorted(finding["id"] for finding in (result.get("findings") or []) + [
        finding for gpu in result.get("gpus") or [] for finding in gpu.get("findings") or []])


def test_control_reads_the_recorded_h200_host(hostile, monkeypatch):
    case = hostile(MODULE, "control: the recorded 2x H200, a DCGM failure")
    run = health(case, monkeypatch, "control")
    result = run.result or {}
    case.check(run, "ok", problems=differences(result, dict(verdict="unhealthy", cut=[])) + differences(
        dict(gpus=len(result.get("gpus") or []), ids=ids(result)), dict(gpus=2, ids=["dcgm_diag_failed"])))
    case.finish()


def test_dcgm_rows_built_to_backtrack_are_read_in_linear_time(hostile, monkeypatch):
    case = hostile(MODULE, "dcgmi: 50 rows of 4,000 spaces unclosed, rows of 256 KiB")
    run = health(case, monkeypatch, "rows")
    result = run.result or {}
    results = ((result.get("dcgm_diag") or {}).get("results") or [{}])
    case.check(run, "ok", problems=differences(result, dict(
        verdict="unhealthy", cut=["dcgmi diag: 52 line(s) longer than 4096 characters, each cut to that"])) + (
        [] if results[-1].get("warning") == "GPU 0 failed" else ["the DCGM results are %r" % results[-3:]]))
    case.finish()


def test_nvlink_counter_and_state_lines_of_a_mebibyte_are_read_in_linear_time(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi nvlink -e and -s: lines of 1 MiB, 256 of 4 KiB")
    run = health(case, monkeypatch, "nvlink")
    result = run.result or {}
    cut = ["nvidia-smi nvlink -e: 3 line(s) longer than 4096 characters, each cut to that",
           "nvidia-smi nvlink -s: 2 line(s) longer than 4096 characters, each cut to that"]
    problems = differences(result, dict(verdict="unhealthy", cut=cut)) + differences(
        dict(ids=ids(result)), dict(ids=["dcgm_diag_failed", "nvlink_errors", "nvlink_inactive"]))
    case.check(run, "ok", problems=problems)
    case.finish()


def test_a_flood_of_fields_below_long_sections_is_cut_and_said(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi -q: 8 sections of 4,000 characters, 200,000 fields")
    run = health(case, monkeypatch, "fields", dcgm_diag=False)
    result = run.result or {}
    case.check(run, "ok", problems=differences(result, dict(verdict="unknown", cut=[
        "nvidia-smi -q: 5.4 MiB of output, cut to its first 4.0 MiB",
        "nvidia-smi -q: more than 65536 lines, the first 65536 read",
        "nvidia-smi -q: 63479 field(s) past the first 2048 of a GPU, not read"])))
    case.finish()


def test_10000_gpus_are_bounded_to_the_first_256(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi: 10,000 GPUs")
    run = health(case, monkeypatch, "gpus", dcgm_diag=False)
    result = run.result or {}
    case.check(run, "ok", problems=differences(result, dict(verdict="unhealthy", cut=[
        "nvidia-smi -q: 10000 GPUs listed, the first 256 assessed",
        "nvidia-smi nvlink -e: 10000 GPUs listed, the first 256 read",
        "nvidia-smi nvlink -s: 10000 GPUs listed, the first 256 read"])) + differences(
        dict(gpus=len(result.get("gpus") or []), findings=len(ids(result))), dict(gpus=256, findings=512)))
    case.finish()


def test_numbers_of_4400_digits_are_no_numbers(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi: numbers of 4,400 digits")
    run = health(case, monkeypatch, "digits")
    result = run.result or {}
    gpus = result.get("gpus") or [{}]
    # Each line of such a number is longer than any line is read: what is left of it is still too long a number.
    long_lines = " line(s) longer than 4096 characters, each cut to that"
    other_cuts = [said for said in result.get("cut") or [] if not said.endswith(long_lines)]
    case.check(run, "ok", problems=differences(result, dict(verdict="unhealthy")) + differences(
        gpus[0], dict(temperature_c=None, pcie_width_max=None, uuid="GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b"))
        + differences(dict(ids=ids(result), cut=other_cuts), dict(ids=["dcgm_diag_failed"], cut=[])))
    case.finish()


def test_terminal_sequences_and_control_characters_reach_no_result(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi, dcgmi: escapes in every value")
    run = health(case, monkeypatch, "escapes")
    result = run.result or {}
    gpus = result.get("gpus") or [{}]
    case.check(run, "ok", problems=differences(gpus[0], dict(
        name="NVIDIA H200", persistence_mode="Enabled", fabric_state="Completed", fabric_status="Success",
        uuid="GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b")) + differences(
        dict(ids=ids(result)), dict(ids=["dcgm_diag_failed", "nvlink_errors"])))
    case.finish()


def test_commands_that_hang_end_at_the_modules_timeout_not_each_at_their_own(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi -q takes 2 s, nvlink -e and dcgmi hang: timeout 3 s")
    run = health(case, monkeypatch, "hang", timeout=3)
    result = run.result or {}
    case.check(run, "ok", problems=(
        [] if run.wall_s < 3 + 2 else ["took %.1f s for a timeout of 3 s" % run.wall_s]) + differences(result, dict(
            verdict="unknown", cut=["nvidia-smi nvlink -e: cut short: the deadline (timeout 3 s) had passed",
                                    "nvidia-smi nvlink -s: not run: the deadline (timeout 3 s) had passed",
                                    "dcgmi diag: not run: the deadline (timeout 3 s) had passed"])))
    case.finish()


def gzip_bomb(path, gib):
    """gib GiB of zeros, gzipped (a few MiB), written without holding them."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    with open(str(path), "wb") as out:
        for _mib in range(gib << 10):
            out.write(packer.compress(zeros))
        out.write(packer.flush())


def test_saved_evidence_of_the_users_is_read_without_following_links_and_within_bounds(hostile, monkeypatch):
    case = hostile(MODULE, "evidence_path: the user's links to /etc/shadow, a FIFO, 8 GiB sparse, a 4 GiB gzip bomb")
    saved = case.user_dir("bundle")
    case.replace(saved / "nvidia-smi-q.txt", "link", "/etc/shadow")
    case.replace(saved / "dmesg.txt", "fifo")
    case.replace(saved / "nvlink-s.txt", "sparse")
    gzip_bomb(saved / "nvidia-bug-report.log.gz", 4)
    case.chown(saved / "nvidia-bug-report.log.gz")
    run = case.module(MODULE, dict(evidence_path=str(saved)))
    result = run.result or {}
    cut = result.get("cut") or []
    case.check(run, "ok", problems=differences(result, dict(verdict="unknown", state="not_in_evidence")) + [
        "the cuts are %r" % cut for expected in (
            "nvidia-smi-q.txt: not read: ", "dmesg.txt: not read: ",
            "nvlink-s.txt: more than 4194304 characters, the first 4194304 read",
            "nvidia-bug-report.log.gz: more than 134217728 bytes of text, the first 134217728 read")
        if not any(said.startswith(expected) for said in cut)])
    case.finish()
