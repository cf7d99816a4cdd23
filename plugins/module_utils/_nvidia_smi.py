# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse what nvidia-smi and the driver say about a host's GPUs: the core of gpu_facts.

Pure functions over text, so that recorded outputs of real hosts test them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

QUERY_FIELDS = (
    "index", "name", "uuid", "compute_cap", "memory.total", "pcie.link.gen.current", "pcie.link.gen.max",
    "pcie.link.width.current", "pcie.link.width.max", "persistence_mode", "driver_version",
)
# nvidia-smi's field names, as the keys of the facts.
FACT_NAMES = dict(zip(QUERY_FIELDS, (
    "index", "name", "uuid", "compute_capability", "memory_total_mib", "pcie_gen_current", "pcie_gen_max",
    "pcie_width_current", "pcie_width_max", "persistence_mode", "driver_version",
)))
INTEGER_FACTS = ("index", "memory_total_mib", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
                 "pcie_width_max")

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
UNIT = re.compile(r"\s*\[[^\]]*\]$")
NVLINK = re.compile(r"^NV(\d+)$")
# nvidia-smi separates the matrix's cells with tabs; copies pasted elsewhere often have spaces.
CELL_SEPARATOR = re.compile(r"\t| {2,}")

# The driver's own words for the states a host can be in, most specific first.
STATES = (
    ("driver_mismatch", re.compile(r"Driver/library version mismatch")),
    ("no_driver", re.compile(r"couldn't communicate with the NVIDIA driver|NVIDIA driver is not loaded"
                             r"|Failed to initialize NVML")),
    ("no_gpu", re.compile(r"No devices were found")),
)


def state_of(returncode, output):
    """ok, driver_mismatch, no_driver, no_gpu or error, from one nvidia-smi run."""
    for state, pattern in STATES:
        if pattern.search(output):
            return state
    return "ok" if returncode == 0 else "error"


def _value(text):
    text = text.strip()
    if text in ("[N/A]", "N/A", "[Not Supported]", ""):
        return None
    return re.sub(r"\s*MiB$", "", text)


def parse_query(text):
    """GPUs from `--query-gpu=... --format=csv`: with a header (any fields, units stripped), or
    `noheader,nounits` output of QUERY_FIELDS."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = [UNIT.sub("", field.strip()) for field in lines[0].split(",")] if lines else []
    if set(header) & set(QUERY_FIELDS):
        lines = lines[1:]
    else:
        header = list(QUERY_FIELDS)
    gpus = []
    for line in lines:
        values = [_value(cell) for cell in line.split(",")]
        if len(values) != len(header):
            continue
        gpu = dict((FACT_NAMES.get(field, field), value) for field, value in zip(header, values))
        for name in INTEGER_FACTS:
            if gpu.get(name) is not None and gpu[name].isdigit():
                gpu[name] = int(gpu[name])
        gpus.append(gpu)
    return gpus


def parse_cuda_version(table):
    """The CUDA version the driver supports, from nvidia-smi's table header: "CUDA Version:", or
    "CUDA UMD Version:" from the 610 branch on (the user-mode driver's CUDA version)."""
    match = re.search(r"CUDA (?:UMD )?Version:\s*([\d.]+)", table)
    return match.group(1) if match else None


def parse_driver_version(table):
    """The driver's version from nvidia-smi's table header: "Driver Version:", or "KMD Version:"
    (the kernel-mode driver) from the 610 branch on."""
    match = re.search(r"(?:Driver|KMD) Version:\s*([\d.]+)", table)
    return match.group(1) if match else None


def parse_topology(text):
    """{"matrix": {GPUi: {GPUj: link}}, "nvlink_pairs": [[i, j, links]], "interconnect": nvlink|pcie|single|none}."""
    rows = [ANSI_ESCAPE.sub("", line) for line in text.splitlines()]
    header = next((CELL_SEPARATOR.split(row) for row in rows if row.strip().startswith("GPU0")), None)
    matrix = {}
    if header is not None:
        columns = [cell.strip() for cell in header]
        start = 1 if columns[0] == "" else 0
        gpus = [name for name in columns[start:] if re.match(r"^GPU\d+$", name)]
        for row in rows:
            cells = CELL_SEPARATOR.split(row)
            name = cells[0].strip()
            if not re.match(r"^GPU\d+$", name):
                continue
            links = [cell.strip() for cell in cells[1:1 + len(gpus)]]
            matrix[name] = dict((peer, link) for peer, link in zip(gpus, links) if peer != name)
    pairs = []
    for name in sorted(matrix, key=lambda gpu: int(gpu[3:])):
        for peer, link in sorted(matrix[name].items(), key=lambda item: int(item[0][3:])):
            match = NVLINK.match(link)
            if match and int(name[3:]) < int(peer[3:]):
                pairs.append([int(name[3:]), int(peer[3:]), int(match.group(1))])
    if not matrix:
        interconnect = "none"
    elif len(matrix) == 1:
        interconnect = "single"
    else:
        interconnect = "nvlink" if pairs else "pcie"
    return {"matrix": matrix, "nvlink_pairs": pairs, "interconnect": interconnect}


def kernel_module_flavour(proc_version):
    """open or proprietary, from /proc/driver/nvidia/version; None when the module is not loaded."""
    if not proc_version:
        return None
    return "open" if "Open Kernel Module" in proc_version else "proprietary"


def kernel_module_version(proc_version):
    """The loaded kernel module's version, from /proc/driver/nvidia/version; None when not loaded."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)\s", proc_version or "")
    return match.group(1) if match else None


QUERY_ARGV = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
TOPOLOGY_ARGV = ("topo", "-m")
MODINFO_ARGV = ("-F", "version", "nvidia")


def gather(nvidia_smi, modinfo, run, proc_version):
    """The gpu facts of a host.

    nvidia_smi, modinfo: paths of the commands, None where missing; run(argv) -> (rc, stdout, stderr);
    proc_version: the text of /proc/driver/nvidia/version, None when absent.
    """
    facts = dict(state="no_nvidia_smi", message="", count=0, gpus=[], driver_version=None, cuda_driver_version=None,
                 kernel_module=kernel_module_flavour(proc_version),
                 kernel_module_version=kernel_module_version(proc_version),
                 kernel_module_installed_version=None, interconnect="none", nvlink_pairs=[], topology={})
    if modinfo is not None:
        rc, out, _err = run([modinfo] + list(MODINFO_ARGV))
        if rc == 0 and out.strip():
            facts["kernel_module_installed_version"] = out.strip()
    if nvidia_smi is None:
        facts["message"] = "nvidia-smi is not installed (no NVIDIA driver user space on this host)"
        return facts
    rc, out, err = run([nvidia_smi] + list(QUERY_ARGV))
    facts["state"] = state_of(rc, out + err)
    if facts["state"] != "ok":
        facts["message"] = (out + err).strip()
        return facts
    facts["gpus"] = parse_query(out)
    facts["count"] = len(facts["gpus"])
    if facts["gpus"]:
        facts["driver_version"] = facts["gpus"][0]["driver_version"]
    _rc, table, _err = run([nvidia_smi])
    facts["cuda_driver_version"] = parse_cuda_version(table)
    # The query's driver_version field is deprecated from the 610 branch on; the header still says it.
    facts["driver_version"] = facts["driver_version"] or parse_driver_version(table)
    rc, topo, _err = run([nvidia_smi] + list(TOPOLOGY_ARGV))
    topology = parse_topology(topo if rc == 0 else "")
    facts.update(interconnect=topology["interconnect"], nvlink_pairs=topology["nvlink_pairs"],
                 topology=topology["matrix"])
    return facts
