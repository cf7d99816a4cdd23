"""_sglang/readahead.py: the files SGLang loads, read into the page cache in its load order, up to a share of the
host's free memory, within a deadline, and never anything a link leads out of the model's tree to, nor a FIFO, a
socket, a device or a directory."""
import os
import socket
import stat

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import FileRefused
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import readahead

GB = 1000 ** 3


def cold(descriptor, size, deadline, clock):
    """A measure that finds nothing of any file in the page cache."""
    return 0


def write(path, size, fill=b"w"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(fill * size)
    return path


def model(directory, sizes=None):
    """A model directory: a config, a tokenizer and three shards of the given sizes, written in reverse order."""
    sizes = sizes or [3000, 3000, 3000]
    for number in reversed(range(len(sizes))):
        write(directory / ("model-%05d-of-%05d.safetensors" % (number + 1, len(sizes))), sizes[number])
    write(directory / "tokenizer.json", 10)
    write(directory / "config.json", 10)
    return directory


@pytest.fixture
def opened(monkeypatch):
    """Every path os.open was given, relative ones as given (the readers open a file by its name in a directory)."""
    calls = []
    real = os.open

    def recording(path, flags, *args, **kwargs):
        calls.append((os.fsdecode(path), flags))
        return real(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", recording)
    return calls


def names(items):
    return [item["name"] for item in items]


# What SGLang loads, and in which order.

def test_sglang_loads_the_indexed_safetensors_else_bin_else_pt_and_never_training_files():
    listing = ["config.json", "tokenizer.json", "README.md", ".gitattributes", "model-00002-of-00002.safetensors",
               "model-00001-of-00002.safetensors", "consolidated.safetensors", "pytorch_model.bin", "original"]
    indexed = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    chosen, weights, config, passed = readahead.weight_selection(listing, indexed)
    assert chosen == ".safetensors"
    assert weights == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert config == ["config.json", "tokenizer.json"]
    assert dict(passed) == {
        "consolidated.safetensors": "model.safetensors.index.json does not name it, and SGLang loads only the files "
                                    "it names",
        "pytorch_model.bin": "SGLang loads the model's *.safetensors files, not this one"}
    assert readahead.weight_selection(listing, None)[1] == [
        "consolidated.safetensors", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    chosen, weights, _config, passed = readahead.weight_selection(
        ["pytorch_model.bin", "training_args.bin", "optimizer.pt", "config.json"])
    assert (chosen, weights) == (".bin", ["pytorch_model.bin"])
    assert dict(passed) == {"training_args.bin": "a training file, which SGLang does not load",
                            "optimizer.pt": "SGLang loads the model's *.bin files, not this one"}
    assert readahead.weight_selection(["model.pt", "scheduler.pt"])[:2] == (".pt", ["model.pt"])
    assert readahead.weight_selection(["m-q4.gguf"])[:2] == (".gguf", ["m-q4.gguf"])
    assert readahead.weight_selection(["config.json"])[:2] == (None, [])


def test_the_config_comes_first_then_the_weights_in_name_order_whatever_the_directory_order(tmp_path):
    model(tmp_path / "m", [100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100])
    (tmp_path / "m" / "original").mkdir()
    write(tmp_path / "m" / "original" / "consolidated.00.pth", 100)
    write(tmp_path / "m" / "below" / "x.safetensors", 100)
    result = readahead.read_ahead(str(tmp_path / "m"), measure=cold)
    assert names(result["files"]) == ["config.json", "tokenizer.json"] + [
        "model-%05d-of-00011.safetensors" % number for number in range(1, 12)]
    assert [item["kind"] for item in result["files"]] == ["config"] * 2 + ["weights"] * 11
    # SGLang never reads below the model directory: neither is read nor named.
    assert result["passed_over"] == [] and result["total_bytes"] == 20 + 1100


def test_the_index_names_the_shards_that_are_read(tmp_path):
    model(tmp_path, [100, 100])
    write(tmp_path / "consolidated.safetensors", 200)
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", '
        '"b": "model-00002-of-00002.safetensors"}}')
    result = readahead.read_ahead(str(tmp_path), measure=cold)
    assert names(result["files"]) == ["config.json", "model.safetensors.index.json", "tokenizer.json",
                                      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert names(result["passed_over"]) == ["consolidated.safetensors"]


# The bound.

def test_the_plan_stops_at_its_share_of_free_memory_and_keeps_what_is_warm_already():
    files = [{"name": name, "size": 100, "resident_before": resident}
             for name, resident in (("a", 0), ("b", 40), ("c", 0), ("d", 100), ("e", 0))]
    planned = readahead.plan(files, 400, 0.5)
    # a costs 100 and b 60 of the 200 allowed; c would make 260: it and e are left out, d is warm and kept.
    assert names(planned["files"]) == ["a", "b", "d"]
    assert (planned["bound"], planned["bound_by"], planned["cost"]) == (200, "share", 160)
    assert names(planned["left_out"]) == ["c", "e"]
    assert planned["left_out"][0]["reason"] == (
        "over the bound: it would bring 100 bytes into the page cache, and the files before it in SGLang's load "
        "order take 160 bytes of the 200 bytes read-ahead may take (share=0.5 of MemAvailable's 400 bytes)")
    assert planned["left_out"][1]["reason"] == (
        "SGLang loads it after c, which did not fit: read-ahead warms the start of the load order")
    unknown = [{"name": "a", "size": 100, "resident_before": None}, {"name": "b", "size": 100, "resident_before": None}]
    assert names(readahead.plan(unknown, 300, 0.5)["files"]) == ["a"]


def test_max_bytes_bounds_the_plan_when_it_is_below_the_share():
    files = [{"name": name, "size": 100, "resident_before": 0} for name in "abc"]
    planned = readahead.plan(files, 10 * GB, 0.5, max_bytes=250)
    assert names(planned["files"]) == ["a", "b"] and planned["bound_by"] == "max_bytes"
    assert "(max_bytes=250)" in planned["left_out"][0]["reason"]
    assert names(readahead.plan(files, 400, 0.5, max_bytes=1000)["files"]) == ["a", "b"]


def test_a_run_reads_only_its_share_of_memavailable(tmp_path, monkeypatch):
    model(tmp_path, [3000, 3000, 3000])
    readv = []
    real = os.readv
    monkeypatch.setattr(os, "readv", lambda descriptor, buffers: readv.append(1) or real(descriptor, buffers))
    result = readahead.read_ahead(str(tmp_path), share=0.5, mem_available=lambda: 12100, measure=cold)
    assert [(item["name"], item["status"], item["read"]) for item in result["files"]] == [
        ("config.json", "read", 10), ("tokenizer.json", "read", 10), ("model-00001-of-00003.safetensors", "read", 3000),
        ("model-00002-of-00003.safetensors", "read", 3000)]
    assert names(result["left_out"]) == ["model-00003-of-00003.safetensors"]
    assert result["read_bytes"] == 6020 == result["cost_bytes"] and len(readv) == 4
    assert (result["bound_bytes"], result["bound_by"], result["mem_available_before"]) == (6050, "share", 12100)
    assert "1 file left out at the bound of 6050 bytes (share)" in result["summary"]


def test_the_reads_stop_when_memavailable_falls_below_what_the_share_leaves(tmp_path):
    model(tmp_path)
    figures = iter([10 * GB, 10 * GB, 10 * GB, 4 * GB])
    result = readahead.read_ahead(str(tmp_path), mem_available=lambda: next(figures, 4 * GB), measure=cold)
    # Before any read, at the config, at the tokenizer; at the first shard it is below the 5 GB left to the host.
    assert [item["status"] for item in result["files"]] == ["read", "read", "not reached", "not reached",
                                                            "not reached"]
    assert (result["stopped"], result["mem_available_low"], result["deadline_cut"]) == ("memory", 4 * GB, False)
    assert result["summary"].endswith("; stopped when MemAvailable fell to 4.00 GB")


# The deadline.

def test_every_read_loop_checks_the_deadline_so_a_run_always_ends(tmp_path, monkeypatch):
    model(tmp_path, [64 << 10, 64 << 10])
    monkeypatch.setattr(readahead, "BLOCK", 4096)
    ticks = []

    def clock():
        ticks.append(1)
        return float(len(ticks))
    readv = []
    real = os.readv
    monkeypatch.setattr(os, "readv", lambda descriptor, buffers: readv.append(1) or real(descriptor, buffers))
    result = readahead.read_ahead(str(tmp_path), timeout=20, clock=clock, mem_available=lambda: 10 * GB,
                                  measure=cold)
    statuses = [(item["name"], item["status"]) for item in result["files"]]
    assert statuses[:2] == [("config.json", "read"), ("tokenizer.json", "read")]
    assert statuses[2:] == [("model-00001-of-00002.safetensors", "cut"),
                            ("model-00002-of-00002.safetensors", "not reached")]
    assert 0 < result["files"][2]["read"] < 64 << 10 and len(readv) < 16
    assert result["stopped"] == "deadline" and result["deadline_cut"]
    assert result["summary"].endswith("; stopped at the deadline of 20 s")


def test_files_not_looked_at_before_the_deadline_are_passed_over(tmp_path):
    model(tmp_path)
    ticks = []

    def clock():
        ticks.append(1)
        return float(len(ticks))
    result = readahead.read_ahead(str(tmp_path), timeout=2, clock=clock, mem_available=lambda: 10 * GB,
                                  measure=cold)
    # The clock reads 1 at the start and 2 at the config: the deadline, 3, comes at the tokenizer.
    assert [(item["name"], item["status"]) for item in result["files"]] == [("config.json", "not reached")]
    assert [(item["name"], item["reason"]) for item in result["passed_over"]] == [
        (name, "the deadline passed before it was looked at") for name in [
            "tokenizer.json", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors"]]
    assert result["read_bytes"] == 0 and result["stopped"] == "deadline"


# Links, FIFOs, sockets, devices and directories.

def test_what_is_not_a_regular_file_in_the_tree_is_passed_over_and_never_opened(tmp_path, opened):
    root = model(tmp_path / "m")
    write(tmp_path / "secret.json", 10)
    (root / "inside").mkdir()
    write(root / "inside" / "real.safetensors", 10)
    os.symlink(str(tmp_path / "secret.json"), str(root / "absolute.json"))
    os.symlink("../secret.json", str(root / "relative.json"))
    os.symlink("/dev/zero", str(root / "zero.safetensors"))
    os.symlink("inside", str(root / "directory.safetensors"))
    os.symlink("chain.json", str(root / "linked.json"))
    os.symlink("inside/real.safetensors", str(root / "chain.json"))
    os.mkfifo(str(root / "fifo.safetensors"))
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(root / "socket.json"))
    try:
        result = readahead.read_ahead(str(root), measure=cold)
    finally:
        listening.close()
    reasons = dict((item["name"], item["reason"]) for item in result["passed_over"])
    outside = "outside %s: root follows a link only to a file inside the model's tree" % root
    assert reasons["absolute.json"].startswith("absolute.json is a link to %s, %s" % (tmp_path / "secret.json", outside))
    assert reasons["relative.json"].startswith("relative.json is a link to ../secret.json, " + outside)
    assert reasons["zero.safetensors"].startswith("zero.safetensors is a link to /dev/zero, " + outside)
    assert reasons["directory.safetensors"] == (
        "directory.safetensors is a link to inside, a directory, not a regular file: only regular files are read ahead")
    assert reasons["linked.json"].startswith("linked.json is a link to chain.json, a symbolic link, not a regular file")
    assert reasons["fifo.safetensors"] == ("fifo.safetensors is a FIFO, not a regular file: only regular files are "
                                           "read ahead")
    assert reasons["socket.json"] == "socket.json is a socket, not a regular file: only regular files are read ahead"
    # A link to a regular file inside the tree is read, under its own name.
    assert ("chain.json", "inside/real.safetensors") in [(item["name"], item["target"]) for item in result["files"]]
    never = {"absolute.json", "relative.json", "zero.safetensors", "directory.safetensors", "linked.json",
             "fifo.safetensors", "socket.json", "secret.json", "/dev/zero", str(tmp_path / "secret.json")}
    assert [path for path, _flags in opened if path in never or os.path.basename(path) in never] == []
    # The directory a link leads to is entered only as a directory, to reach the file below it.
    assert set(flags & os.O_DIRECTORY for path, flags in opened if path == "inside") == {os.O_DIRECTORY}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes a device node")
def test_a_device_is_passed_over_and_never_opened(tmp_path, opened):
    root = model(tmp_path)
    os.mknod(str(root / "device.safetensors"), stat.S_IFCHR | 0o600, os.makedev(1, 5))
    result = readahead.read_ahead(str(root), measure=cold)
    assert {"name": "device.safetensors", "size": None, "reason": "device.safetensors is a device, not a regular "
            "file: only regular files are read ahead"} in result["passed_over"]
    assert [path for path, _flags in opened if path.endswith("device.safetensors")] == []


def hf_cache(tmp_path):
    """A Hugging Face cache repository folder: blobs, and a snapshot of relative links to them."""
    repository = tmp_path / "hub" / "models--org--name"
    write(repository / "blobs" / ("a" * 64), 300)
    write(repository / "blobs" / ("b" * 64), 200)
    write(repository / "blobs" / ("c" * 40), 10)
    write(repository / "blobs" / ("d" * 64), 20)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("0" * 40)
    snapshot = repository / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    os.symlink("../../blobs/" + "a" * 64, str(snapshot / "model-00001-of-00002.safetensors"))
    os.symlink("../../blobs/" + "b" * 64, str(snapshot / "model-00002-of-00002.safetensors"))
    os.symlink("../../blobs/" + "c" * 40, str(snapshot / "config.json"))
    return repository, snapshot


def test_a_hugging_face_snapshot_reads_its_blobs_and_nothing_outside_the_repository(tmp_path, opened):
    repository, snapshot = hf_cache(tmp_path)
    write(tmp_path / "hub" / "other.json", 10)
    os.symlink("../../../other.json", str(snapshot / "escape.json"))
    os.symlink("../../blobs/" + "c" * 40, str(snapshot / "generation_config.json"))
    os.symlink(str(repository / "blobs" / ("d" * 64)), str(snapshot / "tokenizer.json"))
    os.symlink(str(snapshot), str(tmp_path / "kimi"))
    result = readahead.read_ahead(str(tmp_path / "kimi"), measure=cold)
    assert (result["path"], result["tree"]) == (str(snapshot), str(repository))
    assert [(item["name"], item["target"], item["size"], item["read"]) for item in result["files"]] == [
        ("config.json", "../../blobs/" + "c" * 40, 10, 10),
        ("tokenizer.json", str(repository / "blobs" / ("d" * 64)), 20, 20),
        ("model-00001-of-00002.safetensors", "../../blobs/" + "a" * 64, 300, 300),
        ("model-00002-of-00002.safetensors", "../../blobs/" + "b" * 64, 200, 200)]
    reasons = dict((item["name"], item["reason"]) for item in result["passed_over"])
    assert reasons["escape.json"].startswith("escape.json is a link to ../../../other.json, outside %s" % repository)
    assert reasons["generation_config.json"] == "the same file as config.json, read once"
    assert [path for path, _flags in opened if "other.json" in path] == []


def test_a_link_is_resolved_in_the_tree_literally():
    root, below = "/hub/models--o--n", "snapshots/rev"
    assert readahead.tree_relative("../../blobs/x", below, root) == "blobs/x"
    assert readahead.tree_relative("/hub/models--o--n/blobs/x", below, root) == "blobs/x"
    assert readahead.tree_relative("x/../../y", below, root) == "snapshots/y"
    for leaving in ("../../../x", "/hub/models--o--n-2/blobs/x", "/etc/shadow", "../..", "//hub/models--o--n/x"):
        assert readahead.tree_relative(leaving, below, root) is None, leaving
    assert readahead.tree_relative("../m/x", "", "/models/m") is None
    assert readahead.tree_of("/hub/models--o--n/snapshots/rev") == ("/hub/models--o--n", "snapshots/rev")
    assert readahead.tree_of("/data/snapshots/rev") == ("/data/snapshots/rev", "")
    assert readahead.tree_of("/models/m") == ("/models/m", "")


def test_a_model_path_is_an_absolute_directory(tmp_path):
    write(tmp_path / "file", 1)
    for path, why in (("models/m", "is not an absolute path"), (str(tmp_path / "missing"), "is missing"),
                      (str(tmp_path / "file"), "is not a directory")):
        with pytest.raises(InvalidOption) as refused:
            readahead.read_ahead(path)
        assert str(refused.value).startswith("path=%s %s" % (path, why))


def test_the_listing_is_bounded(tmp_path):
    for number in range(4):
        write(tmp_path / ("%d.json" % number), 1)
    descriptor = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert len(readahead.list_names(descriptor, str(tmp_path), 4)) == 4
        with pytest.raises(FileRefused, match="holds more than 3 entries"):
            readahead.list_names(descriptor, str(tmp_path), 3)
    finally:
        os.close(descriptor)


def test_names_with_control_characters_are_shown_without_them(tmp_path, control_text):
    model(tmp_path)
    write(tmp_path / "tok\x1b[31menizer\n.json", 10)
    result = readahead.read_ahead(str(tmp_path), measure=cold)
    assert "tokenizer .json" in names(result["files"]) and control_text(result) == []


# Residency, check mode, the figures.

def evicted(path):
    """Whether the page cache let go of the file, as mincore tells (a filesystem that keeps files in memory does
    not let go; without mincore there is no telling)."""
    descriptor = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        return readahead.resident_bytes(descriptor, os.fstat(descriptor).st_size, float("inf")) == 0
    finally:
        os.close(descriptor)


def test_the_page_cache_is_measured_before_and_after_and_a_warm_file_is_not_read_again(tmp_path, monkeypatch):
    model(tmp_path, [1 << 20, 1 << 20])
    shard = tmp_path / "model-00002-of-00002.safetensors"
    if not evicted(shard):
        pytest.skip("no mincore here, or a filesystem that keeps its files in memory")
    read = []
    real = os.readv
    monkeypatch.setattr(os, "readv", lambda descriptor, buffers: read.append(descriptor) or real(descriptor, buffers))
    result = readahead.read_ahead(str(tmp_path))
    by_name = dict((item["name"], item) for item in result["files"])
    assert by_name["model-00001-of-00002.safetensors"]["status"] == "resident"
    assert by_name["model-00001-of-00002.safetensors"]["read"] == 0
    cold_shard = by_name["model-00002-of-00002.safetensors"]
    assert (cold_shard["status"], cold_shard["resident_before"], cold_shard["read"], cold_shard["resident_after"]) == (
        "read", 0, 1 << 20, 1 << 20)
    assert len(read) == 1 and result["resident_measured"]
    assert (result["warm_before_bytes"], result["warm_after_bytes"]) == ((1 << 20) + 20, (2 << 20) + 20)
    again = readahead.read_ahead(str(tmp_path))
    assert again["summary"] == ("Read nothing into the page cache; of the 2.1 MB SGLang loads, 2.1 MB were warm "
                                "before, 2.1 MB after")


def test_check_mode_plans_and_reads_nothing(tmp_path, monkeypatch):
    model(tmp_path)

    def refuse(*args):
        raise AssertionError("read in check mode")
    monkeypatch.setattr(os, "readv", refuse)
    monkeypatch.setattr(os, "posix_fadvise", refuse)
    result = readahead.read_ahead(str(tmp_path), check=True, measure=cold)
    assert [item["status"] for item in result["files"]] == ["planned"] * 5
    assert (result["read_bytes"], result["cost_bytes"], result["warm_after_bytes"]) == (0, 9020, None)
    assert result["summary"].startswith("Would read 5 files, 9020 bytes not in the page cache yet")


def test_the_figures_add_up_and_say_what_was_warm(tmp_path):
    model(tmp_path)
    result = readahead.read_ahead(str(tmp_path), measure=cold, mem_available=lambda: 10 * GB)
    assert (result["total_bytes"], result["planned_bytes"], result["read_bytes"]) == (9020, 9020, 9020)
    assert result["warm_before_bytes"] == 0 and result["stopped"] is None and result["left_out"] == []
    assert result["format"] == ".safetensors" and result["files"][0]["seconds"] >= 0
    assert result["summary"].startswith("Read 9020 bytes of 5 files into the page cache in ")
    unknown = readahead.read_ahead(str(tmp_path), measure=lambda *args: None, mem_available=lambda: 10 * GB)
    assert (unknown["warm_before_bytes"], unknown["resident_measured"]) == (None, False)
    assert "how much was warm is unknown (no mincore)" in unknown["summary"]


def test_memavailable_comes_from_proc_meminfo():
    text = "MemTotal:       24683520 kB\nMemFree:        14351360 kB\nMemAvailable:   23816192 kB\n"
    assert readahead.parse_mem_available(text) == 23816192 * 1024
    assert readahead.parse_mem_available("MemFree: 1 kB\n") is None
    assert readahead.parse_mem_available("MemAvailable: 1%s kB\n" % ("0" * 30)) is None
    assert readahead.read_mem_available() > 0


def test_no_memavailable_is_refused(tmp_path):
    with pytest.raises(InvalidOption, match="gives no MemAvailable"):
        readahead.read_ahead(str(model(tmp_path)), mem_available=lambda: None)
