# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The model's files read into the page cache before a restart, while the old server still serves.

For a large model, reading the weights is most of a restart: a public SGLang measurement of a 122B FP8 model on
8 B200s took 695 s from a cold start, 531 s of it loading weights, and 88 s with the page cache and the kernel caches
warm. The reads can be done before the stop, while the old server serves: what a restart then loads comes from
memory. This reads what SGLang will load (scan), decides how much the host's memory allows (plan), and reads it
(warm), reporting how much of it was in the page cache before and after.

What SGLang reads of a model directory (its DefaultModelLoader with the default load format): the directory
itself, never a directory below it (a Llama repository's original/ holds a second copy of the weights that SGLang
never opens); its ``*.safetensors`` files, else its ``*.bin`` files, else its ``*.pt`` files, the first of those
patterns that names any; of the safetensors ones only those that ``model.safetensors.index.json`` names when there
is one (a repository may ship the shards and a consolidated file of the same weights), of the others all but the
training files (optimizer.pt, ...). Before the weights it reads the configuration and the tokenizer: the small
files beside them. Names starting with a dot are not read (glob does not match them).

The load order is name order: SGLang sorts the weight files by name before it loads them (SGLANG_SORT_WEIGHT_FILES,
on by default in its later releases; its multi-threaded safetensors loader sorts them in others), and sharded
checkpoints number their shards in their names. Where a release does not sort, it loads in the order the directory
lists them. Read-ahead warms a prefix of that order and stops at the first file that does not fit its bound: the
loader reads the warm files first, before its own reads of the cold ones push pages out of the cache.

The bound is a share of MemAvailable, read once before any read: MemAvailable counts clean page cache as
available, so the pages read here hardly lower it, and a figure read during the reads would keep allowing more.
A file already resident costs nothing, and one fully resident is not read again. During the reads MemAvailable is
read again at each file and every GiB: when another process's growth takes it below what read-ahead promised to
leave, it stops.

Whether a page is in the page cache comes from mincore(2) on a mapping of the file that is never touched (no page
is read through it), called through ctypes from the C library: Python's standard library has no other way to ask.
The kernel tells the page cache's state only to root (CAP_FOWNER), the file's owner and those who may write it;
to others a file looks uncached, and is read. Where ctypes or mincore is not there, the residency is unknown
(null) and every file is read and counted at its size.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import json
import mmap
import os
import stat
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    mode_kind,
    open_regular,
    open_resolved,
    read_bounded,
    read_regular,
    walk,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.sizes import GB, size_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int, result_line

# Large reads into one reused buffer: no copy of the data is kept, and the system calls are few.
BLOCK = 8 << 20
# How far ahead of the read the kernel is asked for the pages (POSIX_FADV_WILLNEED). Not the whole file at once:
# the call submits the reads of its whole range before it returns, which on slow storage would hold it past the
# deadline.
ADVISE_AHEAD = 128 << 20
# MemAvailable is read again each time this much more was read.
MEMORY_CHECK_BYTES = 1 << 30
# mincore(2) looks at this much of a file per mapping: its answer, a byte a page, stays 256 KiB.
MINCORE_WINDOW = 1 << 30
# The most entries a model directory may hold: a model has hundreds of files, a directory of millions is hostile.
MAX_ENTRIES = 100000
INDEX_LIMIT = 64 << 20
MEMINFO_LIMIT = 1 << 16
SAFETENSORS_INDEX = "model.safetensors.index.json"
# SGLang's default load format tries these in turn; the first that names any file is the model's format.
WEIGHT_FORMATS = (".safetensors", ".bin", ".pt")
# A directory that holds only GGUF files: SGLang's GGUF loader reads the file given as the model path.
GGUF = ".gguf"
# What SGLang leaves out of *.bin and *.pt weights (transformers' training files).
NOT_FOR_INFERENCE = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")
# The configuration, tokenizer, chat template and remote code that SGLang, transformers and the tokenizers read
# before the weights: config.json, generation_config.json, tokenizer.json, tokenizer.model, tiktoken.model, *.tiktoken,
# vocab.json, merges.txt, chat_template.jinja, modeling_*.py, the index files.
CONFIG_SUFFIXES = (".json", ".jinja", ".model", ".tiktoken", ".txt", ".py", ".vocab")
# A Hugging Face cache's repository folder: models--<org>--<name>/{blobs,refs,snapshots}.
HF_REPOSITORY_PREFIX = "models--"
HF_SNAPSHOTS = "snapshots"
# mincore's byte per page: its low bit says resident, the others are reserved.
LOW_BIT = bytes(bytearray(value & 1 for value in range(256)))


def files_text(count):
    return "%d file%s" % (count, "" if count == 1 else "s")


def shown(name):
    """A file name as a result shows it: valid UTF-8, without control characters."""
    return result_line(os.fsencode(name).decode("utf-8", "replace"))


def parse_mem_available(text):
    """The bytes /proc/meminfo's text gives as MemAvailable, None when it gives none."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == "MemAvailable:" and fields[2] == "kB":
            kilobytes = bounded_int(fields[1])
            return None if kilobytes is None else kilobytes * 1024
    return None


def read_mem_available():
    """The host's MemAvailable in bytes, from /proc/meminfo (a bounded read); None when it gives none."""
    found = read_regular("/proc/meminfo", MEMINFO_LIMIT, cut=True)
    return None if found is None else parse_mem_available(found["data"].decode("ascii", "replace"))


def tree_of(real):
    """(the tree the links of the directory real may lead into, real's path relative to it): a Hugging Face cache
    snapshot's repository folder and ``snapshots/<revision>``, else real itself and ''."""
    parent, revision = os.path.split(real)
    repository, snapshots = os.path.split(parent)
    if snapshots == HF_SNAPSHOTS and os.path.basename(repository).startswith(HF_REPOSITORY_PREFIX) and revision:
        return repository, HF_SNAPSHOTS + "/" + revision
    return real, ""


def tree_relative(target, below, root):
    """The path a link's text names relative to the tree root, for a link in the directory below (relative to
    root), taken literally: None when it leads out of the tree. The path is then walked from the tree's
    descriptor without following a link, so what is opened lies inside the tree whatever the text says."""
    if target.startswith("/"):
        prefix = root.rstrip("/") + "/"
        path = os.path.normpath(target)
        if not path.startswith(prefix) or path.startswith("//"):
            return None
        relative = path[len(prefix):]
    else:
        relative = os.path.normpath(os.path.join(below, target))
    if relative in ("", ".", "..") or relative.startswith("../") or relative.startswith("/"):
        return None
    return relative


def weight_selection(names, indexed=None):
    """(format, weights, config, passed over) of a model directory's names as SGLang's loader chooses: the suffix
    of its weights (None when it has none), the weight files it loads, the configuration files, and [(name,
    why)] for the weight files it does not load. indexed: the names model.safetensors.index.json gives, None
    without one."""
    visible = sorted(name for name in names if not name.startswith("."))
    found = [suffix for suffix in WEIGHT_FORMATS + (GGUF,) if any(name.endswith(suffix) for name in visible)]
    chosen = found[0] if found else None
    weights, config, passed = [], [], []
    for name in visible:
        suffix = next((suffix for suffix in WEIGHT_FORMATS + (GGUF,) if name.endswith(suffix)), None)
        if suffix is None:
            if name.endswith(CONFIG_SUFFIXES):
                config.append(name)
        elif suffix != chosen:
            passed.append((name, "SGLang loads the model's *%s files, not this one" % chosen))
        elif chosen == ".safetensors" and indexed is not None and name not in indexed:
            passed.append((name, "%s does not name it, and SGLang loads only the files it names" % SAFETENSORS_INDEX))
        elif chosen != ".safetensors" and name.endswith(NOT_FOR_INFERENCE):
            passed.append((name, "a training file, which SGLang does not load"))
        else:
            weights.append(name)
    return chosen, weights, config, passed


def indexed_names(data):
    """The file names the weight_map of a safetensors index (its bytes) gives; None when it is not one."""
    try:
        weight_map = json.loads(data.decode("utf-8")).get("weight_map")
    except (ValueError, AttributeError):
        return None
    if not isinstance(weight_map, dict):
        return None
    return set(value for value in weight_map.values() if isinstance(value, str))


class ModelTree(object):
    """The model directory open (fd, path) and the tree its links may lead into, open too (root_fd, root), with
    the directory's path relative to it (below: '' when the tree is the directory itself)."""

    def __init__(self, fd, path, root_fd, root, below):
        self.fd, self.path, self.root_fd, self.root, self.below = fd, path, root_fd, root, below

    def close(self):
        os.close(self.fd)
        os.close(self.root_fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def open_model(path):
    """The ModelTree of the directory path (an absolute path; links on the way to it resolved once).

    A Hugging Face cache keeps each file once, in its repository folder's blobs/, and a snapshot's names are
    relative links to them (snapshots/<rev>/x.safetensors -> ../../blobs/<sha256>). So the tree a link may lead
    into is that repository folder (models--<org>--<name>) for a snapshot, else the model directory itself: a link
    is followed only to a regular file inside that tree, its text read literally and walked from the tree's
    descriptor without following any other link. Anything else a link leads to is refused: root reads as root,
    and whoever can write the model directory could point a link at a FIFO (the read blocks), a device (it never
    ends) or any file root may read (pulled into the cache, out of the model's budget)."""
    if not path.startswith("/"):
        raise InvalidOption("path=%s is not an absolute path: give the model directory's absolute path (SGLang's "
                            "--model-path)" % path)
    if not os.path.isdir(path):
        raise InvalidOption("path=%s is %s: point path at the model directory (SGLang's --model-path); a hub id is "
                            "not read ahead" % (path, "missing" if not os.path.lexists(path) else "not a directory"))
    descriptor, real = open_resolved(path, "path")
    root, below = tree_of(real)
    if not below:
        try:
            return ModelTree(descriptor, real, os.dup(descriptor), real, "")
        except BaseException:
            os.close(descriptor)
            raise
    os.close(descriptor)
    root_fd, root = open_resolved(root, "path")
    try:
        model_fd, _levels = walk(root_fd, below, "path")
    except (FileRefused, FileNotFoundError) as exc:
        os.close(root_fd)
        raise InvalidOption("path=%s changed while it was looked at (%s): run again" % (path, exc))
    return ModelTree(model_fd, real, root_fd, root, below)


def list_names(directory_fd, path, limit=MAX_ENTRIES):
    """The names in the directory (never below it), at most limit of them: FileRefused past that."""
    names = []
    with os.scandir(directory_fd) as listing:
        for entry in listing:
            if len(names) >= limit:
                raise FileRefused("path=%s holds more than %d entries, more than a model directory does: remove "
                                  "what does not belong there" % (path, limit))
            names.append(entry.name)
    return names


def locate(tree, name):
    """(directory relative to the tree, file name, the link's text or None) of the regular file that name in the
    model directory stands for, and its lstat: name itself, or what its link leads to inside the tree. Nothing is
    opened to tell. FileRefused for anything else, naming it; FileNotFoundError when it is gone."""
    info = os.lstat(name, dir_fd=tree.fd)
    if stat.S_ISREG(info.st_mode):
        return tree.below, name, None, info
    if not stat.S_ISLNK(info.st_mode):
        raise FileRefused("%s is a %s, not a regular file: only regular files are read ahead" % (
            shown(name), mode_kind(info.st_mode)))
    target = os.readlink(name, dir_fd=tree.fd)
    relative = tree_relative(target, tree.below, tree.root)
    if relative is None:
        raise FileRefused("%s is a link to %s, outside %s: root follows a link only to a file inside the model's "
                          "tree (the model directory, or the Hugging Face cache folder of its snapshot); copy the "
                          "file in, or point path at a directory that holds it" % (
                              shown(name), shown(target), shown(tree.root)))
    directory, _slash, base = relative.rpartition("/")
    try:
        directory_fd, _levels = walk(tree.root_fd, directory, "path")
    except FileRefused:
        raise FileRefused("%s is a link to %s, and a link lies on the way there: root follows one link, from the "
                          "model directory into its tree" % (shown(name), shown(target)))
    try:
        info = os.lstat(base, dir_fd=directory_fd)
    finally:
        os.close(directory_fd)
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused("%s is a link to %s, a %s, not a regular file: only regular files are read ahead%s" % (
            shown(name), shown(target), mode_kind(info.st_mode),
            " (root follows one link, from the model directory into its tree)" if stat.S_ISLNK(info.st_mode)
            else ""))
    return directory, base, target, info


def open_located(tree, directory, base):
    """(descriptor, fstat) of the regular file base in the tree's directory, opened as the audited layer opens a
    file: no link followed on the way or at the end, not blocking, a regular file by fstat."""
    directory_fd, _levels = walk(tree.root_fd, directory, "path")
    try:
        return open_regular(base, directory_fd)
    finally:
        os.close(directory_fd)


class _Mincore(object):
    """mmap(2), mincore(2) and munmap(2) of the C library, through ctypes."""

    def __init__(self):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap, self.mincore, self.munmap = libc.mmap, libc.mincore, libc.munmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        self.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.failed = ctypes.c_void_p(-1).value
        self.vector = ctypes.create_string_buffer(MINCORE_WINDOW // mmap.PAGESIZE)


_MINCORE = []


def _mincore():
    """The _Mincore of this process, None where ctypes or the C library's mincore cannot be had."""
    if not _MINCORE:
        try:
            _MINCORE.append(_Mincore())
        except (ImportError, OSError, AttributeError):
            _MINCORE.append(None)
    return _MINCORE[0]


def resident_bytes(descriptor, size, deadline, clock=time.monotonic):
    """How many bytes of the open file (of size bytes) are in the page cache, from mincore on a mapping that is
    never touched; None when that cannot be told (no mincore, a mapping refused) or the deadline passed."""
    probe = _mincore()
    if probe is None:
        return None
    resident, offset = 0, 0
    while offset < size:
        if clock() >= deadline:
            return None
        length = min(MINCORE_WINDOW, size - offset)
        address = probe.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, offset)
        if address is None or address == probe.failed:
            return None
        try:
            if probe.mincore(address, length, probe.vector) != 0:
                return None
        finally:
            probe.munmap(address, length)
        pages = (length + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        resident += probe.vector.raw[:pages].translate(LOW_BIT).count(b"\x01") * mmap.PAGESIZE
        offset += length
    return min(resident, size)


def _read_index(tree, names):
    """The names model.safetensors.index.json gives, or None without one (or one that cannot be read: SGLang
    itself then fails, and every safetensors file is read)."""
    if SAFETENSORS_INDEX not in names:
        return None
    try:
        directory, base, _target, _info = locate(tree, SAFETENSORS_INDEX)
        descriptor, _info = open_located(tree, directory, base)
    except (OSError, InvalidOption):
        return None
    try:
        return indexed_names(read_bounded(descriptor, INDEX_LIMIT, SAFETENSORS_INDEX))
    except (OSError, InvalidOption):
        return None
    finally:
        os.close(descriptor)


def scan(tree, deadline, clock=time.monotonic, measure=resident_bytes):
    """What SGLang will read of the model directory, in its order: {"format", "files", "passed_over"}. Each file is
    {"name", "target" (a link's text, or None), "kind" (weights or config), "size", "resident_before" (bytes in
    the page cache, None when unknown), "where" (its directory in the tree, its name), "identity" (device,
    inode)}; each one passed over {"name", "size" (None when not known), "reason"}. Nothing is read: each file is
    opened, looked at (fstat) and its residency asked, and only a regular file inside the tree is opened."""
    names = list_names(tree.fd, tree.path)
    chosen, weights, config, passed = weight_selection(names, _read_index(tree, names))
    passed_over = [{"name": shown(name), "size": None, "reason": why} for name, why in passed]
    files, seen = [], {}
    for kind, name in [("config", name) for name in config] + [("weights", name) for name in weights]:
        if clock() >= deadline:
            passed_over.append({"name": shown(name), "size": None,
                                "reason": "the deadline passed before it was looked at"})
            continue
        try:
            directory, base, target, _info = locate(tree, name)
            descriptor, info = open_located(tree, directory, base)
        except InvalidOption as exc:
            passed_over.append({"name": shown(name), "size": None, "reason": str(exc)})
            continue
        except OSError as exc:
            reason = ("it is gone, or a link that leads nowhere" if exc.errno in (errno.ENOENT, errno.ENOTDIR)
                      else "it cannot be opened: %s" % (exc.strerror or exc))
            passed_over.append({"name": shown(name), "size": None, "reason": reason})
            continue
        try:
            identity = (info.st_dev, info.st_ino)
            if identity in seen:
                passed_over.append({"name": shown(name), "size": info.st_size,
                                    "reason": "the same file as %s, read once" % seen[identity]})
                continue
            seen[identity] = shown(name)
            files.append({"name": shown(name), "target": None if target is None else shown(target), "kind": kind,
                          "size": info.st_size, "resident_before": measure(descriptor, info.st_size, deadline, clock),
                          "where": (directory, base), "identity": identity})
        finally:
            os.close(descriptor)
    return {"format": chosen, "files": files, "passed_over": passed_over}


def cost(item):
    """The bytes reading the file brings into the page cache: those not resident (all of them when unknown)."""
    return item["size"] - (item["resident_before"] or 0)


def plan(files, mem_available, share, max_bytes=None):
    """Which of files (scan's, in load order) to read: {"files", "left_out", "bound", "bound_by"}. The bound is
    share of mem_available, or max_bytes when smaller, in bytes brought into the page cache (cost). The files
    are taken in order until the first that does not fit; it and every later one that costs anything are left
    out, with the reason. A file that costs nothing (resident) is always kept: it is warm already."""
    bound, bound_by = int(mem_available * share), "share"
    if max_bytes is not None and max_bytes < bound:
        bound, bound_by = max_bytes, "max_bytes"
    taken, first_out, kept, left_out = 0, None, [], []
    for item in files:
        needed = cost(item)
        if needed and (first_out is not None or taken + needed > bound):
            if first_out is None:
                first_out = item["name"]
                limit = ("max_bytes=%d" % max_bytes if bound_by == "max_bytes" else
                         "share=%s of MemAvailable's %s" % (share, size_text(mem_available)))
                reason = ("over the bound: it would bring %s into the page cache, and the files before it in "
                          "SGLang's load order take %s of the %s read-ahead may take (%s)"
                          % (size_text(needed), size_text(taken), size_text(bound), limit))
            else:
                reason = "SGLang loads it after %s, which did not fit: read-ahead warms the start of the load order" \
                         % first_out
            left_out.append({"name": item["name"], "size": item["size"], "resident_before": item["resident_before"],
                             "reason": reason})
            continue
        taken += needed
        kept.append(item)
    return {"files": kept, "left_out": left_out, "bound": bound, "bound_by": bound_by, "cost": taken}


def read_file(descriptor, size, buffer, deadline, clock, memory_low):
    """(bytes read, why it stopped early or None) of a sequential read of the open file's first size bytes into
    buffer, its pages asked for ADVISE_AHEAD ahead. The deadline is checked before every block, memory_low() at
    the start and after every MEMORY_CHECK_BYTES."""
    view = memoryview(buffer)
    done, advised, checked = 0, 0, -MEMORY_CHECK_BYTES
    while done < size:
        if clock() >= deadline:
            return done, "deadline"
        if done - checked >= MEMORY_CHECK_BYTES:
            if memory_low():
                return done, "memory"
            checked = done
        horizon = min(size, done + ADVISE_AHEAD)
        if advised < horizon:
            os.posix_fadvise(descriptor, advised, horizon - advised, os.POSIX_FADV_WILLNEED)
            advised = horizon
        got = os.readv(descriptor, [view[:min(len(buffer), size - done)]])
        if not got:
            break
        done += got
    return done, None


def warm(tree, files, deadline, floor, clock=time.monotonic, mem_available=read_mem_available,
         measure=resident_bytes):
    """Read each of plan's files into the page cache, in order, until the deadline passes or MemAvailable falls
    below floor; then ask each file's residency again (mincore costs milliseconds a GiB, so this is not held to
    the deadline: the figures after a cut are the point). Each file gains "status" (read; resident: in the cache
    already, not read; cut: read in part when the reads stopped; not reached; failed, with a "reason"), "read"
    (bytes), "seconds" and "resident_after". Returns (why the reads stopped early: deadline, memory or None, the
    MemAvailable that stopped them or None)."""
    buffer = bytearray(BLOCK)
    stopped = None
    low = []

    def memory_low():
        available = mem_available()
        if available is not None and available < floor:
            low.append(available)
            return True
        return False

    for item in files:
        item.update(read=0, seconds=0.0, resident_after=None)
        if stopped is not None:
            item["status"] = "not reached"
            continue
        if not cost(item):
            item["status"] = "resident"
            continue
        started = clock()
        try:
            descriptor, info = open_located(tree, *item["where"])
        except (OSError, InvalidOption) as exc:
            item.update(status="failed", reason="it could not be opened again: %s" % (getattr(exc, "strerror", None)
                                                                                      or exc))
            continue
        try:
            if (info.st_dev, info.st_ino) != item["identity"]:
                item.update(status="failed", reason="it was replaced since it was looked at")
                continue
            try:
                item["read"], stopped = read_file(descriptor, min(item["size"], info.st_size), buffer, deadline,
                                                  clock, memory_low)
            except OSError as exc:
                item.update(status="failed", reason="reading it failed: %s" % (exc.strerror or exc))
                continue
        finally:
            os.close(descriptor)
            item["seconds"] = round(clock() - started, 3)
        item["status"] = "read" if stopped is None else "cut" if item["read"] else "not reached"
    for item in files:
        try:
            descriptor, info = open_located(tree, *item["where"])
        except (OSError, InvalidOption):
            continue
        try:
            if (info.st_dev, info.st_ino) == item["identity"]:
                item["resident_after"] = measure(descriptor, info.st_size, float("inf"), clock)
        finally:
            os.close(descriptor)
    return stopped, (low[0] if low else None)


def _total(values):
    """The sum of values, None when any is None (unknown)."""
    values = list(values)
    return None if any(value is None for value in values) else sum(values)


def summary(result):
    """One line: what was (or would be) read, how fast, how much was warm before and after."""
    if result["check_mode"]:
        line = "Would read %s, %s not in the page cache yet" % (
            files_text(sum(1 for item in result["files"] if cost(item))), size_text(result["cost_bytes"]))
    elif not result["read_bytes"]:
        line = "Read nothing into the page cache"
    else:
        line = "Read %s of %s into the page cache in %.1f s (%.2f GB/s)" % (
            size_text(result["read_bytes"]), files_text(sum(1 for item in result["files"] if item["read"])),
            result["read_seconds"], result["gbps"])
    if result["warm_before_bytes"] is None:
        line += "; how much was warm is unknown (no mincore)"
    else:
        line += "; of the %s SGLang loads, %s were warm before" % (
            size_text(result["total_bytes"]), size_text(result["warm_before_bytes"]))
        if result["warm_after_bytes"] is not None:
            line += ", %s after" % size_text(result["warm_after_bytes"])
    if result["left_out"]:
        line += "; %s left out at the bound of %s (%s)" % (
            files_text(len(result["left_out"])), size_text(result["bound_bytes"]), result["bound_by"])
    if result["stopped"] == "deadline":
        line += "; stopped at the deadline of %s s" % result["timeout"]
    elif result["stopped"] == "memory":
        line += "; stopped when MemAvailable fell to %s" % size_text(result["mem_available_low"])
    if result["format"] is None:
        line += "; the directory holds no weights SGLang loads"
    return line


def read_ahead(path, share=0.5, max_bytes=None, timeout=600, check=False, clock=time.monotonic,
               mem_available=read_mem_available, measure=resident_bytes):
    """Read the files SGLang loads from the model directory path into the page cache (scan, plan, warm), within
    share of MemAvailable (and max_bytes), until timeout seconds from the start; with check, plan only and read
    nothing. Plain data, as the model_readahead module's RETURN says."""
    started = clock()
    deadline = started + timeout
    before = mem_available()
    if before is None:
        raise InvalidOption("path=%s: /proc/meminfo gives no MemAvailable, which bounds read-ahead (Linux 3.14 and "
                            "later give it)" % path)
    with open_model(path) as tree:
        scanned = scan(tree, deadline, clock, measure)
        planned = plan(scanned["files"], before, share, max_bytes)
        files = planned["files"]
        stopped, low = None, None
        if check:
            for item in files:
                item.update(status="planned", read=0, seconds=0.0, resident_after=None)
        else:
            stopped, low = warm(tree, files, deadline, before - int(before * share), clock, mem_available, measure)
        path, root = tree.path, tree.root
    for item in files:
        del item["where"], item["identity"]
    left_out = planned["left_out"]
    read = sum(item["read"] for item in files)
    read_seconds = sum(item["seconds"] for item in files)
    result = {
        "path": path, "tree": root, "format": scanned["format"], "check_mode": check,
        "files": files, "left_out": left_out, "passed_over": scanned["passed_over"],
        "total_bytes": sum(item["size"] for item in files + left_out),
        "planned_bytes": sum(item["size"] for item in files), "cost_bytes": planned["cost"],
        "read_bytes": read, "read_seconds": round(read_seconds, 3), "seconds": round(clock() - started, 3),
        "gbps": round(read / GB / read_seconds, 2) if read_seconds > 0 else 0.0,
        "share": share, "max_bytes": max_bytes, "bound_bytes": planned["bound"], "bound_by": planned["bound_by"],
        "mem_available_before": before, "mem_available_after": mem_available(), "mem_available_low": low,
        "timeout": timeout, "stopped": stopped, "deadline_cut": stopped == "deadline",
        "warm_before_bytes": _total(item["resident_before"] for item in files + left_out),
        "warm_after_bytes": None if check else _total(
            [item["resident_after"] for item in files] + [item["resident_before"] for item in left_out]),
    }
    result["resident_measured"] = result["warm_before_bytes"] is not None
    result["summary"] = summary(result)
    return result
