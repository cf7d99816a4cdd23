# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The GPUs a server's ranks take on a node, against the GPUs it sees there: the one place that decides whether a
parallel size fits a host, for the sglang_server module before it starts anything and for preflight_check, which
refuses a host earlier in a run.

SGLang gives each rank a GPU of its own by index; a rank past the last GPU the process sees fails in CUDA ("invalid
device ordinal") after the server has spent its start-up on imports, so the sizes are compared here first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
# A GPU as CUDA_VISIBLE_DEVICES names it: its index (a few digits: a host holds a few hundred GPUs at most), or its
# UUID or a beginning of it that only it has (GPU-8932f937).
INDEX = re.compile(r"[0-9]{1,4}")
UUID_PREFIX = "GPU-"
# A MIG device (MIG-<UUID>, or MIG-GPU-<UUID>/<instance>/<instance>): a list of GPUs does not hold MIG instances.
MIG_PREFIX = "MIG-"


def gpus_needed(tensor_parallel_size, nnodes=1, pipeline_parallel_size=1):
    """The GPUs one node's ranks take: SGLang spreads tensor x pipeline parallel ranks evenly over the nodes, a GPU
    each."""
    return (tensor_parallel_size * pipeline_parallel_size + nnodes - 1) // nnodes


def _named_gpu(gpus, entry):
    """What a CUDA_VISIBLE_DEVICES entry names among the host's GPUs: its index or the whole UUID; None when it names
    none, or more than one."""
    if INDEX.fullmatch(entry):
        return entry if int(entry) < len(gpus) else None
    if not entry.upper().startswith(UUID_PREFIX):
        return None
    matches = [gpu["uuid"] for gpu in gpus if (gpu.get("uuid") or "").upper().startswith(entry.upper())]
    return matches[0] if len(matches) == 1 else None


def _read(gpus, visible_devices):
    """(the GPUs that CUDA_VISIBLE_DEVICES=visible_devices names, in its order and once each; the entry at which CUDA
    stops reading it, None when it reads it whole); None when it names a MIG device."""
    seen = []
    for entry in (word.strip() for word in visible_devices.split(",")):
        if entry.upper().startswith(MIG_PREFIX):
            return None
        named = _named_gpu(gpus, entry)
        if named is None:
            return seen, entry
        if named not in seen:
            seen.append(named)
    return seen, None


def visible_gpus(gpus, visible_devices):
    """The GPUs a process sees on a host whose GPUs are gpus (the gpu facts' list: index, uuid), under
    CUDA_VISIBLE_DEVICES=visible_devices (None: unset, all of them), each named by its index or UUID, in CUDA's
    order; None when that cannot be told (a MIG device).

    As CUDA reads it: a comma-separated list of GPU indices and UUIDs or their unique beginnings, read up to the
    first entry that names no GPU of the host (0,2,-1,1 shows GPUs 0 and 2); empty shows none."""
    if visible_devices is None:
        return [str(index) for index in range(len(gpus))]
    read = _read(gpus, visible_devices)
    return None if read is None else read[0]


def fits(needed, visible):
    """Whether needed GPUs are among visible (visible_gpus()); a count that cannot be told fits, SGLang judging it."""
    return visible is None or needed <= len(visible)


def _server_visible_devices(params, inherited):
    """(CUDA_VISIBLE_DEVICES of the server's environment or None when unset, where it is set): secret_env wins over
    env, as in the environment the module gives the server; a server the module starts itself inherits the
    module's own environment under both."""
    for option in ("secret_env", "env"):
        if VISIBLE_DEVICES in (params.get(option) or {}):
            return params[option][VISIBLE_DEVICES], "%s (sglang_server_%s in the role)" % (option, option)
    if params.get("manager") == "module" and VISIBLE_DEVICES in inherited:
        return inherited[VISIBLE_DEVICES], "the module's own environment, which the server inherits (manager=module)"
    return None, None


def tensor_parallel_problems(params, gpus, inherited):
    """[why the server's ranks cannot each have a GPU on this host], naming tensor_parallel_size, the GPUs the server
    would see and CUDA_VISIBLE_DEVICES; [] when they can, or when that cannot be told (gpus None, nvidia-smi missing
    or failing; a MIG device in CUDA_VISIBLE_DEVICES), SGLang judging it then. A host where nvidia-smi finds no GPU at
    all is preflight's to refuse (preflight_expected_gpu_count) and SGLang's to report: the count is about ranks.

    params: the sglang_server module's options (tensor_parallel_size, nnodes, env, secret_env, manager); gpus: the
    host's GPUs as the gpu facts list them; inherited: the module's own environment."""
    tensor_parallel_size, nnodes = params["tensor_parallel_size"], params["nnodes"]
    if not gpus or tensor_parallel_size < 1 or nnodes < 1:
        return []
    value, where = _server_visible_devices(params, inherited)
    visible = visible_gpus(gpus, value)
    needed = gpus_needed(tensor_parallel_size, nnodes)
    if fits(needed, visible):
        return []
    shown = "GPU(s) %s" % ", ".join(visible) if visible else "none"
    if value is None:
        seen = "%s of the host's %d, as nvidia-smi lists them; %s is unset" % (shown, len(gpus), VISIBLE_DEVICES)
    else:
        seen = "%s of the host's %d, as %s=%r in %s leaves visible" % (shown, len(gpus), VISIBLE_DEVICES, value, where)
        unread = _read(gpus, value)[1]
        if unread:
            seen += "; CUDA reads it up to %r, which names no GPU of this host" % unread
    fixes = []
    if visible:
        fixes.append("lower tensor_parallel_size (sglang_server_tensor_parallel_size in the role) to %d or less"
                     % (len(visible) * nnodes))
    if len(visible) < len(gpus):
        fixes.append("name more of the host's GPUs (indices or UUIDs) in %s, or leave it unset for all of them"
                     % VISIBLE_DEVICES)
    if not fixes:
        fixes.append("run the server on a host with more GPUs")
    over = " over nnodes=%d" % nnodes if nnodes > 1 else ""
    return ["tensor_parallel_size=%d%s needs %d GPU(s) on this node, but the server would see %d (%s): %s" % (
        tensor_parallel_size, over, needed, len(visible), seen, ", or ".join(fixes))]
