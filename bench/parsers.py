"""What the parsers of text from outside cost on a hostile input of 1 MiB, beside the patterns they replaced.

    make bench-parsers        (or .venv/bin/python bench/parsers.py)

Each row is one parser the collection runs on what it does not control (a command's output, a sysfs file, a
server's answer), fed the line built to make the pattern it replaced backtrack. The replaced pattern is timed on
that line at two sizes small enough to finish, and its time at 1 MiB extrapolated from their ratio; the parser of
today is timed on the whole 1 MiB (best of three). The -q flood row gives peak memory instead of a pattern:
the old parser joined a label per field until a MemoryError.
"""

import math
import re
import sys
import time
import tracemalloc
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import secrets  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_health, nvidia_smi  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnoses import DIAGNOSES  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import is_cuda_home_path  # noqa: E402

MIB = 1 << 20
NVSHMEM_INIT = re.compile(next(entry["pattern"] for entry in DIAGNOSES if entry["id"] == "nvshmem_init"))


def best(function, text, runs=3):
    took = []
    for _run in range(runs):
        started = time.perf_counter()
        function(text)
        took.append(time.perf_counter() - started)
    return min(took)


def sized(build, size):
    """build(n) grown until it is at least size characters, cut to size."""
    count = 1
    while len(build(count)) < size:
        count *= 2
    return build(count)[:size]


# (what, the replaced pattern and its method, the attack line of n characters, today's parser, the sizes the old
# pattern is timed at)
ROWS = (
    ("dcgmi diag row", (r"\|\s*(?P<test>[^|]*?)\s*\|\s*(?P<result>Pass|Fail|Warn|Skip)\b(?P<detail>[^|]*)\|", "match"),
     lambda n: "|" + " " * n + "x", gpu_health.parse_dcgm_diag, (250, 500)),
    ("nvidia-smi nvlink -e counter", (r"\s*Link (?P<link>\d+): (?P<name>[^:]*[Ee]rrors?[^:]*): (?P<value>\d+)\s*$",
                                      "match"),
     lambda n: "\tLink 0: " + "Errors " * (n // 7) + ": x", gpu_health.parse_nvlink_errors, (16384, 32768)),
    ("nvidia-smi unit of a value", (r"\s*\[[^\]]*\]$", "search"), lambda n: "\t" * n + "[x",
     nvidia_smi.parse_query, (8192, 16384)),
    ("nvidia-smi MiB of a value", (r"\s*MiB$", "sub"), lambda n: "\t" * n + "Mi", nvidia_smi.parse_query,
     (8192, 16384)),
    ("snapshot's CUDA home", (r"(?:/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*/[A-Za-z0-9._+-]*[Cc][Uu][Dd][Aa][A-Za-z0-9._+-]*",
                              "fullmatch"),
     lambda n: "/00/" + "aCUDA-" * (n // 6) + "\x00", is_cuda_home_path, (8192, 16384)),
    ("catalogue's NVSHMEM init line", (r"nvshmemi?_\w*init\w* failed", "search"),
     lambda n: "nvshmemi_" + "0init0" * (n // 6) + " faile", NVSHMEM_INIT.search, (8192, 16384)),
    ("CUDA repository's base URL", (r"/+$", "sub"), lambda n: "/" * n + "x", lambda text: text.rstrip("/"),
     (8192, 16384)),
)


def old_time(pattern, method, text):
    compiled = re.compile(pattern)
    return best(lambda line: compiled.sub("", line) if method == "sub" else getattr(compiled, method)(line), text, 2)


def seconds(value):
    if value >= 3600:
        return "%.1f h" % (value / 3600)
    if value >= 60:
        return "%.1f min" % (value / 60)
    return "%.4f s" % value


def field_flood():
    """nvidia-smi -q of one GPU: 8 sections of 4,000 characters each, then 200,000 short fields."""
    head = "GPU 00000000:01:00.0\n"
    sections = "".join("%s%s\n" % ("    " * (depth + 1), "S" * 4000) for depth in range(8))
    return head + sections + "".join("%sField %d : %d\n" % ("    " * 9, index, index) for index in range(200000))


def main():
    print("%-32s %-13s %s" % ("parser", "today, 1 MiB", "the pattern it replaced, on the same line"))
    for what, (pattern, method), build, parser, (small, large) in ROWS:
        before = [old_time(pattern, method, build(size)) for size in (small, large)]
        exponent = math.log(max(before[1], 1e-7) / max(before[0], 1e-7)) / math.log(float(large) / small)
        at_mib = before[1] * (MIB / float(large)) ** exponent
        old = "%s at %d, %s at %d: ~n^%.1f, ~%s at 1 MiB" % (
            seconds(before[0]), small, seconds(before[1]), large, exponent, seconds(at_mib))
        print("%-32s %-13s %s" % (what, seconds(best(parser, sized(build, MIB))), old))
    flood = field_flood()
    took = best(gpu_health.parse_details, flood)
    tracemalloc.start()
    gpu_health.parse_details(flood)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    said = "6.6 MB; peak %.1f MiB (a label joined a field: MemoryError past 2 GiB)" % (peak / float(MIB))
    print("%-32s %-13s %s" % ("nvidia-smi -q field flood", seconds(took), said))
    key = "sk-bench/1234+Zq~"
    echoed = ("\\u0073\\u006b" + key[2:]) * (MIB // len(key))
    print("%-32s %-13s %s" % ("a key echoed JSON-escaped", seconds(best(lambda text: secrets.masked_text(text, [key]),
                                                                        echoed)),
                              "masked in every spelling (literal only before: the escaped key shown)"))


if __name__ == "__main__":
    main()
