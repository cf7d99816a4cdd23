"""A model's load after read-ahead, beside the same load from a cold page cache.

    .venv/bin/python bench/readahead.py [--gb 0.5] [--shards 4] [--dir DIRECTORY] [--drop-caches]

Makes a model-like directory in a temporary directory (under --dir when given): a config, a tokenizer and --shards
safetensors-named shards of random bytes, --gb GB in all. Then, each time from a cold page cache:

1. without read-ahead: the load, every shard read the way SGLang's safetensors loader reads it (mapped, every page
   touched), from a cold cache - what a restart pays in its outage;
2. read-ahead (the model_readahead module's core, as the module calls it), from a cold cache - what the upgrade
   pays before the stop, while the old server still serves;
3. the same load right after it - what the restart then pays in its outage.

Cold means: the bench's own files written out (fsync) and dropped from the page cache (POSIX_FADV_DONTNEED), which
needs no privilege and leaves every other file's pages alone; with --drop-caches (root only) the whole host's
clean page cache is dropped instead (/proc/sys/vm/drop_caches), which slows whatever else runs on the host. The
page cache's share of each file is measured (mincore) before each step, so a step that did not start cold says so.
Keep --gb below the host's free memory: the point is a model that fits.
"""

import argparse
import mmap
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import readahead  # noqa: E402

GB = 1000 ** 3
CHUNK = 8 << 20
DROP_CACHES = "/proc/sys/vm/drop_caches"


def make_model(directory, total, shards):
    """A config, a tokenizer and shards of random bytes (one random chunk repeated: the page cache does not care)."""
    (directory / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}')
    (directory / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')
    chunk = os.urandom(CHUNK)
    size = total // shards
    paths = []
    for number in range(1, shards + 1):
        path = directory / ("model-%05d-of-%05d.safetensors" % (number, shards))
        with open(path, "wb") as handle:
            left = size
            while left:
                left -= handle.write(chunk[:min(left, CHUNK)])
        paths.append(path)
    return paths


def residency(paths):
    """(bytes of paths in the page cache, their size); the first None when mincore cannot tell."""
    resident, size = 0, 0
    for path in paths:
        descriptor = os.open(str(path), os.O_RDONLY)
        try:
            length = os.fstat(descriptor).st_size
            found = readahead.resident_bytes(descriptor, length, float("inf"))
        finally:
            os.close(descriptor)
        size += length
        resident = None if resident is None or found is None else resident + found
    return resident, size


def make_cold(directory, drop_caches):
    """Drop the bench's files (or, with drop_caches, every clean page of the host) from the page cache."""
    for path in sorted(path for path in directory.iterdir() if path.is_file()):
        descriptor = os.open(str(path), os.O_RDONLY)
        try:
            os.fsync(descriptor)
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)
    if drop_caches:
        os.sync()
        with open(DROP_CACHES, "w") as handle:
            handle.write("1\n")


def load(paths):
    """Seconds to read every shard as a safetensors load does: mapped, each page touched once."""
    started = time.monotonic()
    for path in paths:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as mapped:
                touched = 0
                for offset in range(0, size, mmap.PAGESIZE):
                    touched ^= mapped[offset]
    return time.monotonic() - started


def warm_text(resident, size):
    if resident is None:
        return "unknown (no mincore)"
    return "%.1f%% in the page cache" % (100.0 * resident / size)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--gb", type=float, default=0.5, help="the model's size in GB (default 0.5)")
    parser.add_argument("--shards", type=int, default=4, help="its weight files (default 4)")
    parser.add_argument("--dir", help="where the temporary model directory goes (a disk, not tmpfs)")
    parser.add_argument("--drop-caches", action="store_true",
                        help="drop the whole host's clean page cache before each step (root only)")
    options = parser.parse_args()
    if options.drop_caches and (os.geteuid() != 0 or not os.access(DROP_CACHES, os.W_OK)):
        parser.error("--drop-caches needs root, who may write %s" % DROP_CACHES)
    total = int(options.gb * GB)
    available = readahead.read_mem_available()
    if available is not None and total > available // 2:
        parser.error("--gb %.2f is more than half the host's MemAvailable (%.2f GB): the model would not stay "
                     "warm" % (options.gb, available / GB))
    directory = Path(tempfile.mkdtemp(prefix="bench-readahead-", dir=options.dir))
    try:
        paths = make_model(directory, total, options.shards)
        how = "the whole host's page cache dropped" if options.drop_caches else "the bench's files dropped"
        print("A model of %.2f GB in %d shards in %s; cold: %s" % (total / GB, options.shards, directory, how))

        make_cold(directory, options.drop_caches)
        before = residency(paths)
        cold_load = load(paths)
        make_cold(directory, options.drop_caches)
        before_readahead = residency(paths)
        result = readahead.read_ahead(str(directory))
        after_readahead = residency(paths)
        warm_load = load(paths)

        rows = [
            ("1. load, no read-ahead", before, cold_load, "in the outage"),
            ("2. read-ahead", before_readahead, result["seconds"], "before the stop, the old server serving"),
            ("3. load after read-ahead", after_readahead, warm_load, "in the outage"),
        ]
        print("%-26s %-28s %-10s %-10s %s" % ("step", "shards before it", "seconds", "GB/s", "paid"))
        for name, (resident, size), seconds, paid in rows:
            print("%-26s %-28s %-10.3f %-10.2f %s" % (name, warm_text(resident, size), seconds,
                                                      total / GB / seconds if seconds else 0.0, paid))
        print("read-ahead: %s" % result["summary"])
        print("The load's part of the outage: %.3f s without read-ahead, %.3f s after it (%.1fx faster, %.3f s "
              "saved)" % (cold_load, warm_load, cold_load / warm_load if warm_load else float("inf"),
                          cold_load - warm_load))
    finally:
        shutil.rmtree(str(directory))


if __name__ == "__main__":
    main()
