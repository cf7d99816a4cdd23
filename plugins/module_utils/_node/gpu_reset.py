# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Reset the GPUs asked for, and no other, with `nvidia-smi -r -i <index>`, only while no process holds them: the
core of gpu_reset.

nvidia-smi's manual: a reset "can't" be done while an application uses the device (a CUDA application, an X server,
a monitoring application); a GPU is held by every process that nvidia-smi lists on it with a compute context, and
by every process that has its device file (/dev/nvidia<minor>, the minor from the driver's
/proc/driver/nvidia/gpus/<bus id>/information) open, nvidia-persistenced, nv-hostengine (DCGM) and dcgm-exporter
included. Where the driver's file gives no minor, every GPU's device file counts. An index names the GPU it named
when the plan was made only while nvidia-smi still lists that bus id at it: a GPU that fell off the bus shifts the
indexes after it. Pure but for run(), read_information(), device_holders() and name_of(), which the module gives."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int, result_line

LIST_ARGV = ("--query-gpu=index,pci.bus_id", "--format=csv,noheader")
APPS_ARGV = ("--query-compute-apps=pid,gpu_bus_id", "--format=csv,noheader")
INFORMATION = "/proc/driver/nvidia/gpus/%s/information"
DEVICE = "/dev/nvidia%d"
EVERY_DEVICE = "/dev/nvidia[0-9]*"


def bus_key(bus_id):
    """A PCI address as the driver's /proc files write it, "0000:3b:00.0", from nvidia-smi's "00000000:3B:00.0"."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return bus_id.strip().lower()
    return "%s:%s:%s" % (parts[0][-4:].rjust(4, "0"), parts[1], parts[2])


def _rows(text, columns):
    """The rows of a `--format=csv,noheader` output that have columns cells, each cell stripped."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == columns:
            rows.append(cells)
    return rows


def listed_gpus(text):
    """{index: bus_id} of `nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader`."""
    return dict((bounded_int(index), bus_id) for index, bus_id in _rows(text, 2) if bounded_int(index) is not None)


def compute_apps(text):
    """[(pid, bus_id)] of `nvidia-smi --query-compute-apps=pid,gpu_bus_id --format=csv,noheader`."""
    return [(bounded_int(pid), bus_id) for pid, bus_id in _rows(text, 2) if bounded_int(pid) is not None]


def device_minor(information):
    """The "Device Minor" of the driver's information file of a GPU, None when it has none."""
    for line in (information or "").splitlines():
        name, _colon, value = line.partition(":")
        if name.strip() == "Device Minor":
            return bounded_int(value.strip())
    return None


def _said(out, err):
    return result_line(("%s %s" % (out.strip(), err.strip())).strip()) or "nothing printed"


def _gpu(gpu):
    return "GPU %d (%s)" % (gpu["index"], gpu["bus_id"])


def reset(gpus, nvidia_smi, run, read_information, device_holders, name_of, check):
    """The reset of gpus ([{index, bus_id}]): {changed, reset, holders, commands, problem}.

    nvidia_smi: its path, None where missing; run(argv) -> (rc, stdout, stderr), bounded; read_information(bus_key)
    -> the driver's information file of the GPU, None where there is none; device_holders(patterns) -> {pid: [device
    paths]} of the processes (but this one) that have a file matching patterns open; name_of(pid) -> its command's
    name. In check mode nothing is reset, and holders are said rather than refused: the server the playbook stops
    first still holds the GPUs then. problem: why nothing more was reset (reset lists those that were)."""
    result = dict(changed=False, reset=[], holders=[], commands=[], problem=None)
    if nvidia_smi is None:
        return dict(result, problem="nvidia-smi is not installed: no GPU can be reset")
    rc, out, err = run([nvidia_smi] + list(LIST_ARGV))
    if rc != 0:
        return dict(result, problem="nvidia-smi could not list the GPUs (exit code %d): %s" % (rc, _said(out, err)))
    listed = listed_gpus(out)
    for gpu in gpus:
        now = listed.get(gpu["index"])
        if now is None or bus_key(now) != bus_key(gpu["bus_id"]):
            return dict(result, problem="nvidia-smi lists %s at index %d, not %s: nothing was reset; read the GPUs' "
                                        "health again and plan anew" % (now or "no GPU", gpu["index"], gpu["bus_id"]))
    rc, out, err = run([nvidia_smi] + list(APPS_ARGV))
    if rc != 0:
        return dict(result, problem="nvidia-smi could not list the processes on the GPUs (exit code %d): %s; nothing "
                                    "was reset" % (rc, _said(out, err)))
    targets = dict((bus_key(gpu["bus_id"]), gpu) for gpu in gpus)
    holders = [dict(pid=pid, name=name_of(pid), holds="a compute context on %s" % _gpu(targets[bus_key(bus_id)]))
               for pid, bus_id in compute_apps(out) if bus_key(bus_id) in targets]
    minors = [device_minor(read_information(key)) for key in sorted(targets)]
    patterns = [EVERY_DEVICE] if None in minors else [DEVICE % minor for minor in minors]
    for pid, paths in sorted(device_holders(patterns).items()):
        holders.append(dict(pid=pid, name=name_of(pid), holds=" ".join(paths)))
    commands = [[nvidia_smi, "-r", "-i", str(gpu["index"])] for gpu in gpus]
    result.update(holders=holders, commands=commands)
    if check:
        return dict(result, changed=True)
    if holders:
        return dict(result, problem="%s held: %s. Nothing was reset: stop them first (nvidia-persistenced, "
                                    "nv-hostengine and dcgm-exporter hold every GPU)" % (
                                        ", ".join(_gpu(gpu) for gpu in gpus),
                                        "; ".join("pid %d (%s) has %s" % (holder["pid"], holder["name"],
                                                                          holder["holds"]) for holder in holders)))
    for gpu, command in zip(gpus, commands):
        rc, out, err = run(command)
        if rc != 0:
            return dict(result, changed=bool(result["reset"]), problem="%s failed (exit code %d): %s" % (
                " ".join(command), rc, _said(out, err)))
        result["reset"].append(dict(gpu, output=_said(out, err)))
    return dict(result, changed=True)
