# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Whether a server that got ready started with the GPU memory it should have.

SGLang sizes its KV cache from the GPU memory that is free when it starts, and becomes ready with whatever it got:
beside another process that held all but 1.66 GB of an H100, SGLang 0.5.17 served with 405,968 KV-cache tokens
instead of the 20,542,816 it had a minute earlier, and said nothing else. So the readiness gate reads what SGLang
logged of its memory (StartupMemory), the processes that held GPU memory when the server was launched (recorded by
sglang_server, holders_at_launch) and the last good launch of the same command line on this node (kept per
command digest in <name>.capacity.json), and judges the start (judge).

The memory lines are SGLang's own (srt/mem_cache/memory_pool.py, srt/managers/scheduler.py,
srt/model_executor/model_runner.py of 0.5.9 and 0.5.17):

- ``Load weight begin. avail mem=%.2f GB``, the free memory before the weights, logged by every rank;
- ``[Full ]KV Cache is allocated. [dtype: D, ]#tokens: N, ...``, the pool each rank built (0.5.17 adds the dtype
  and labels the two pools of a sliding-window model ``Full`` and ``SWA``);
- ``max_total_num_tokens=N, ...``, the pool the scheduler runs with, logged by rank 0 (every rank, before 0.5).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import hashlib
import json
import re
import subprocess
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import user_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import process_argv, process_uid
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import masked_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.diagnosis import gpu_processes
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import parse_line

# Each is matched at the start of a line's message (after SGLang's `[time ranks] ` prefix), its numbers of a bounded
# count of digits: a line that says more is no line of SGLang's.
MAX_TOTAL_TOKENS = re.compile(r"max_total_num_tokens=([0-9]{1,15}),")
KV_POOL = re.compile(r"(?:Full )?KV Cache is allocated\. (?:dtype: [^,]{0,64}, )?#tokens: ([0-9]{1,15}),")
WEIGHT_LOAD = re.compile(r"Load weight begin\. avail mem=([0-9]{1,7}\.[0-9]{2}) GB")
# Cheap tests before a line is parsed at all: nearly every line of a log is none of these.
MEMORY_WORDS = ("max_total_num_tokens=", "KV Cache is allocated.", "Load weight begin.")
# The ranks one start-up has at most: 8 GPUs a node times 64 nodes, with room to spare.
MAX_RANKS = 1024

# How many GPU holders a launch records, and what its result shows of each one's command line.
MAX_HOLDERS = 32
COMMAND_BYTES = 200
# How many command lines <name>.capacity.json keeps the last good launch of, the most recently recorded.
GOOD_LAUNCHES = 8
# "Far below" the last good launch: a pool of less than this share of its tokens, unless set otherwise.
DEGRADED_RATIO = 0.5
DEGRADED_START = ("warn", "fail")


class StartupMemory(object):
    """What a start-up's log says of its GPU memory, fed one line at a time: bounded whatever the log holds."""

    def __init__(self):
        self.max_total_tokens = None
        # Each rank's first pool and first free memory: an EAGLE draft model loads and allocates after its target.
        self.pool_tokens = {}
        self.free_gb = {}

    def feed(self, line):
        if not any(word in line for word in MEMORY_WORDS):
            return
        ranks, message, _prefixed = parse_line(line)
        found = MAX_TOTAL_TOKENS.match(message)
        if found:
            self.max_total_tokens = int(found.group(1))
            return
        found = KV_POOL.match(message)
        if found and len(self.pool_tokens) < MAX_RANKS:
            self.pool_tokens.setdefault(ranks, int(found.group(1)))
        found = WEIGHT_LOAD.match(message)
        if found and len(self.free_gb) < MAX_RANKS:
            self.free_gb.setdefault(ranks, float(found.group(1)))

    def summary(self):
        """{kv_tokens, avail_mem_gb}: the pool the scheduler runs with (else the smallest rank's), and the least free
        memory a rank had when it began to load the weights (GB as SGLang logs them); None where the log says none."""
        tokens = self.max_total_tokens
        if tokens is None and self.pool_tokens:
            tokens = min(self.pool_tokens.values())
        return {"kv_tokens": tokens, "avail_mem_gb": min(self.free_gb.values()) if self.free_gb else None}


def startup_memory(lines):
    """StartupMemory's summary of lines."""
    memory = StartupMemory()
    for line in lines:
        memory.feed(line)
    return memory.summary()


def command_digest(argv):
    """The digest that tells launches of one command line apart; the command line itself (secrets included) is not
    kept with it."""
    return hashlib.sha256(json.dumps(list(argv)).encode("utf-8")).hexdigest()


def describe_holders(processes, proc_root="/proc"):
    """The processes nvidia-smi listed with GPU memory (diagnosis.gpu_processes), as a launch records them: pid, the
    user it runs as and its command line (SGLang's secret flags masked, cut to COMMAND_BYTES; nvidia-smi's process
    name where /proc does not show it, as for a process of another PID namespace), its MiB and GPU. The first
    MAX_HOLDERS."""
    holders = []
    for process in processes[:MAX_HOLDERS]:
        uid = process_uid(process["pid"], proc_root)
        argv = process_argv(process["pid"], proc_root)
        holders.append({
            "pid": process["pid"],
            "user": None if uid is None else user_name(uid) or str(uid),
            "command": result_line(" ".join(masked_argv(argv)), COMMAND_BYTES) if argv else process["name"],
            "used_memory_mib": process["used_memory_mib"],
            "gpu_uuid": process["gpu_uuid"],
        })
    return holders


def holders_at_launch(run=subprocess.run, proc_root="/proc"):
    """describe_holders() of what holds GPU memory now, just before a launch; None where nvidia-smi cannot say."""
    processes, _problem = gpu_processes(run)
    return None if processes is None else describe_holders(processes, proc_root)


def recorded_holders(launch):
    """The holders a launch's entry recorded, None when it recorded none (nvidia-smi was missing, or an entry of a
    release that did not record them); an entry that is not a holder's is left out."""
    holders = launch.get("gpu_holders") if isinstance(launch, dict) else None
    if not isinstance(holders, list):
        return None
    return [holder for holder in holders[:MAX_HOLDERS] if isinstance(holder, dict)
            and _number(holder.get("pid"), int) and isinstance(holder.get("command") or "", str)]


def _number(value, kinds=(int, float)):
    return isinstance(value, kinds) and not isinstance(value, bool)


def _record_problem(record):
    """What makes a record of <name>.capacity.json one that the readiness gate did not write, or None."""
    if not isinstance(record, dict):
        return "not an object"
    if not _number(record.get("kv_tokens"), int) or record["kv_tokens"] <= 0:
        return "kv_tokens is not a positive number"
    if not _number(record.get("recorded_at")):
        return "recorded_at is not a time"
    return None


def reference(records, digest):
    """The last good launch of the command of digest in records (<name>.capacity.json's content), None when there
    is none or it is not one the module writes."""
    record = records.get(digest) if isinstance(records, dict) and digest else None
    return record if _record_problem(record) is None else None


def good_launch(memory, launch, now=None):
    """The record of a launch that started as it should: its KV tokens and free memory, the process it was and when
    it started and was judged."""
    launch = launch or {}
    return {"kv_tokens": memory["kv_tokens"], "avail_mem_gb": memory["avail_mem_gb"], "pid": launch.get("pid"),
            "start_time": launch.get("start_time"), "started_at": launch.get("started_at"),
            "recorded_at": time.time() if now is None else now}


def with_good_launch(records, digest, record):
    """records with record as the last good launch of digest, keeping the GOOD_LAUNCHES most recently recorded;
    records that are not the module's are dropped."""
    kept = dict((key, value) for key, value in (records if isinstance(records, dict) else {}).items()
                if _record_problem(value) is None and key != digest)
    newest = sorted(kept.items(), key=lambda item: item[1]["recorded_at"], reverse=True)
    return dict([(digest, record)] + newest[:GOOD_LAUNCHES - 1])


def ratio_problem(ratio, option="degraded_ratio"):
    """Why ratio is no share of the last good launch's KV tokens, or None."""
    if ratio is None or not 0 <= ratio <= 1:
        return ("%s=%s: give the share of the last good launch's KV-cache tokens below which a start is degraded, "
                "from 0 (never by the share) to 1, such as %s" % (option, ratio, DEGRADED_RATIO))
    return None


def _unmasked(text):
    return text


def judge(memory, holders, last_good, ratio=DEGRADED_RATIO, launch=None, mask=_unmasked):
    """Whether a start is degraded, and why.

    memory: StartupMemory's summary of its log. holders: the processes that held GPU memory when it was launched
    (recorded_holders), None when not known. last_good: reference() for its command, None when there is none.
    launch: its entry in the launch history, to tell the last good launch that is this one. mask: what the
    holders' command lines are shown through (the server's secrets: a holder can be another server started with
    the same key).

    A start is degraded when its KV cache holds fewer than ratio times the tokens of the last good launch, or when
    it was launched beside a process that held GPU memory (whatever its pool: the first launch has nothing to
    compare with). The message names both figures and every holder, and says what to do."""
    tokens = memory.get("kv_tokens")
    if holders:
        holders = [dict(holder, command=mask(holder.get("command") or "")) for holder in holders]
    share = None
    if tokens is not None and last_good is not None:
        share = float(tokens) / last_good["kv_tokens"]
    itself = bool(last_good and launch and last_good.get("pid") == launch.get("pid")
                  and last_good.get("start_time") == launch.get("start_time"))
    below = share is not None and share < ratio
    found = {
        "kv_tokens": tokens,
        "avail_mem_gb": memory.get("avail_mem_gb"),
        "last_good": last_good,
        "last_good_is_this_launch": itself,
        "share": None if share is None else round(share, 4),
        "degraded_ratio": ratio,
        "holders": holders,
        "below_last_good": below,
        "beside_holders": bool(holders),
    }
    found["degraded"] = below or found["beside_holders"]
    # Built of the masked commands, numbers and the host's names: masked again, a flag's mask would take the text after it.
    found["message"] = _message(found) if found["degraded"] else None
    return found


def _when(seconds):
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return "at a time not recorded"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def _holder(holder):
    memory = holder.get("used_memory_mib")
    return "pid %s (user %s: %s) %s MiB%s" % (
        holder["pid"], holder.get("user") or "unknown", holder.get("command") or "command unknown",
        memory if memory is not None else "?", " on %s" % holder["gpu_uuid"] if holder.get("gpu_uuid") else "")


def _message(found):
    tokens, last_good = found["kv_tokens"], found["last_good"]
    if tokens is None:
        pool = "SGLang's log does not say how many tokens its KV cache holds"
    elif last_good is None:
        pool = "its KV cache holds %d tokens; this command line has no earlier good launch on this node to compare " \
            "with" % tokens
    else:
        pool = "its KV cache holds %d tokens, %.1f%% of the %d tokens of this command line's last good launch on " \
            "this node (pid %s, started %s)%s" % (
                tokens, 100 * found["share"], last_good["kv_tokens"], last_good.get("pid"),
                _when(last_good.get("started_at")),
                ", below degraded_ratio=%s" % found["degraded_ratio"] if found["below_last_good"] else "")
    parts = ["Degraded start of the SGLang server: " + pool]
    if found["beside_holders"]:
        holders = found["holders"]
        parts.append("when it was launched, %d other process%s held GPU memory: %s" % (
            len(holders), "" if len(holders) == 1 else "es", "; ".join(_holder(holder) for holder in holders)))
    if found["avail_mem_gb"] is not None:
        before = last_good.get("avail_mem_gb") if last_good else None
        parts.append("free GPU memory when the weights began to load: %.2f GB%s" % (
            found["avail_mem_gb"], " (%.2f GB at the last good launch)" % before if _number(before) else ""))
    return result_line("; ".join(parts) + ". Free the GPUs (stop what holds their memory, or give the server GPUs "
                       "of its own), then restart the server.")


def judge_launch(instance, launch, memory, ratio=DEGRADED_RATIO, mask=_unmasked):
    """judge() of a launch (its entry in instance's launch history, None when it is not there) whose log said
    memory, against the last good launch of its command line that instance (an instance.Instance) keeps."""
    digest = (launch or {}).get("argv_digest")
    return judge(memory, recorded_holders(launch), reference(instance.capacity_records(), digest), ratio, launch,
                 mask)


def gate(instance, launch, memory, ratio=DEGRADED_RATIO, mask=_unmasked, now=None):
    """judge_launch() of a launch that just got ready; a start that is not degraded, whose pool the log says and
    whose command line the launch recorded, becomes that command line's last good launch (recorded_as_good)."""
    found = judge_launch(instance, launch, memory, ratio, mask)
    digest = (launch or {}).get("argv_digest")
    found["recorded_as_good"] = bool(digest) and not found["degraded"] and memory["kv_tokens"] is not None
    if found["recorded_as_good"]:
        instance.write_capacity_records(with_good_launch(instance.capacity_records(), digest,
                                                         good_launch(memory, launch, now)))
    return found
