"""gpu_facts with an nvidia-smi that prints what no driver prints: a GPU and numbers of 5,000 digits, terminal
sequences and control characters in every value, a line of a megabyte, a table of 100,000 columns, megabytes of
output. The stand-in is root's (a replaced or broken nvidia-smi, not the user's code), planted first on the
module's PATH, where get_bin_path finds it. The module returns its facts within the suite's bounds, its GPUs and
links bounded, and no fact shows a control character (the harness checks every run's result for that)."""
from pathlib import Path

import hostile_harness

MODULE = "gpu_facts"
# The PATH the harness runs each module with; the stand-ins' directory goes before it.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "fake_nvidia_smi"
# nvidia-smi and modinfo as no driver prints them, argv picking the answer as nvidia-smi's options do.
STAND_IN = r'''#!@PYTHON@
import sys

MODE = "@MODE@"
DIGITS = "9" * 5000
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\x00\x08\x7f\u2028"
MIB = 1 << 20
NAMED = "0, NVIDIA H200%s, GPU-1%s, 9.0, 143771, 5, 5, 16, 16, Enabled%s, 580.95.05%s\n" % ((ESCAPES,) * 4)
TABLE = "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05%s   CUDA Version: 13.0%s |\n" % (ESCAPES, ESCAPES)
FABRIC = "    Fabric\n        State : Completed%s\n        Status : Success%s\n        ClusterUUID : 0\n"


def digits(key):
    """Five thousand digits and terminal sequences wherever nvidia-smi prints a value."""
    if key == "--query-gpu":
        return NAMED + "%s, NVIDIA H200, GPU-2, 9.0, %s, 5, 5, 16, 16, Enabled, 580.95.05\n" % (DIGITS, DIGITS)
    if key == "topo":
        return ("\x1b[4m\tGPU0\tGPU1\tGPU%s\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18%s\tNV%s\t0-15\n"
                "GPU1\tNV18\t X \tSYS\t0-15\nGPU%s\tNV%s\tSYS\t X \t0-15\n" % (DIGITS, ESCAPES, DIGITS, DIGITS, DIGITS))
    if key == "-q":
        return (FABRIC % (ESCAPES, ESCAPES)) * 2
    return "580.95.05%s\n" % ESCAPES if key == "modinfo" else TABLE


def sizes(key):
    """Past every bound: a table of 100,000 columns, lines of 1 MiB, 4 and 6 MiB of output."""
    if key == "--query-gpu":
        return NAMED + "0, NVIDIA H200, GPU-2, 9.0, 1" + " " * MIB + "43771, 5, 5, 16, 16, Enabled, 5\n"
    if key == "topo":
        return ("\t" + "\t".join("GPU%d" % n for n in range(100000)) + "\nGPU0\t X \t" + "NV18\t" * (MIB // 5)
                + "\n" + "  X    = Self\n" * (4 * MIB // 14))
    if key == "-q":
        return (FABRIC % ("", "")) * (6 * MIB // 80)
    return "5" * MIB if key == "modinfo" else TABLE


args = sys.argv[1:]
key = "modinfo" if sys.argv[0].endswith("modinfo") else (args[0].split("=")[0] if args else "table")
sys.stdout.write({"digits": digits, "sizes": sizes}[MODE](key))
'''


def plant(case, mode):
    """The stand-ins nvidia-smi and modinfo answering as mode (digits or sizes), in a directory of root's; the
    directory."""
    directory = case.root_dir("bin")
    for name in ("nvidia-smi", "modinfo"):
        path = directory / name
        path.write_text(STAND_IN.replace("@PYTHON@", hostile_harness.SYSTEM_PYTHON).replace("@MODE@", mode))
        path.chmod(0o755)
    return directory


def gather(case, monkeypatch, directory, extra=None):
    """gpu_facts run by the harness, with directory first on its PATH (the harness's module() sets none) and the
    extra environment."""
    run = case._run
    extra = extra or {}

    def with_path(argv, timeout, memory, environment):
        return run(argv, timeout, memory, dict(environment, PATH="%s:%s" % (directory, SYSTEM_PATH), **extra))
    monkeypatch.setattr(case, "_run", with_path)
    return case.module(MODULE, {})


def facts_of(run):
    return ((run.result or {}).get("ansible_facts") or {}).get("gpu") or {}


def differences(found, expected):
    return ["%s is %r, not %r" % (key, str(found.get(key))[:120], value) for key, value in sorted(expected.items())
            if found.get(key) != value]


def test_control_reads_the_recorded_h200_host(hostile, monkeypatch):
    case = hostile(MODULE, "control: the recorded 2x H200's nvidia-smi")
    run = gather(case, monkeypatch, RECORDED, dict(FAKE_NVIDIA_SMI="h200"))
    gpu = facts_of(run)
    case.check(run, "ok", problems=differences(gpu, dict(state="ok", count=2, interconnect="nvlink",
                                                         nvlink_pairs=[[0, 1, 18]])))
    case.finish()


def test_numbers_of_5000_digits_and_escapes_in_every_value_are_bounded_and_cleaned(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi: 5,000-digit GPU and numbers, escapes")
    run = gather(case, monkeypatch, plant(case, "digits"))
    gpu = facts_of(run)
    problems = differences(gpu, dict(
        state="ok", count=2, interconnect="nvlink", nvlink_pairs=[[0, 1, 18]], driver_version="580.95.05",
        cuda_driver_version="13.0", kernel_module_installed_version="580.95.05",
        topology={"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}},
        fabric={"state": "Completed", "status": "Success"}))
    gpus = gpu.get("gpus") or [{}, {}]
    if gpus[0].get("name") != "NVIDIA H200":
        problems.append("the first GPU's name is %r" % gpus[0].get("name"))
    for field in ("index", "memory_total_mib"):
        value = gpus[-1].get(field)
        if not isinstance(value, str) or len(value.encode()) > 300:
            problems.append("the second GPU's %s of 5,000 digits is %r" % (field, str(value)[:120]))
    case.check(run, "ok", problems=problems)
    case.finish()


def test_a_table_of_100000_columns_lines_of_a_mebibyte_and_megabytes_of_output_are_bounded(hostile, monkeypatch):
    case = hostile(MODULE, "nvidia-smi: 100,000 columns, 1 MiB lines, 6 MiB output")
    run = gather(case, monkeypatch, plant(case, "sizes"))
    gpu = facts_of(run)
    problems = differences(gpu, dict(state="ok", count=1, interconnect="none", topology={}, nvlink_pairs=[],
                                     fabric={"state": "Completed", "status": "Success"}))
    shown = [len(str(value).encode()) for value in [gpu.get("kernel_module_installed_version")] + [
        value for found in gpu.get("gpus") or [] for value in found.values()]]
    if max(shown or [0]) > 300:
        problems.append("a fact of %d bytes" % max(shown))
    case.check(run, "ok", problems=problems)
    case.finish()
