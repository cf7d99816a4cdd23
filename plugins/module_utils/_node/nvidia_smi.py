# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Parse what nvidia-smi and the driver say about a host's GPUs: the core of gpu_facts (and of preflight_check,
which gathers the same facts).

Pure functions over text, so that recorded outputs of real hosts test them; gather_host() reads the host for them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os
import re

PROC_VERSION = "/proc/driver/nvidia/version"
# The NVSwitch driver's PCI binding: one entry per switch it holds (besides bind, unbind, module...).
NVSWITCH_DRIVER = "/sys/bus/pci/drivers/nvidia-nvswitch"

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
        # The header's cells that name a GPU; its leading empty cell (or none, when pasted without it) names none.
        gpus = [name for name in (cell.strip() for cell in header) if re.fullmatch(r"GPU\d+", name)]
        for row in rows:
            cells = CELL_SEPARATOR.split(row)
            name = cells[0].strip()
            if not re.fullmatch(r"GPU\d+", name):
                continue
            # zip stops at the last GPU column: the CPU and NUMA affinity columns after it are not links.
            links = [cell.strip() for cell in cells[1:]]
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


# NVLink generation by compute capability, for GPUs that have NVLink: V100 2, A100 (and the NVLink-bridged 8.6
# boards) 3, H100/H200 4, B200/B300 5. NVIDIA's Fabric Manager user guide (release 2.3, "NVSwitch core software
# stack"): systems with fourth generation NVSwitches (HGX B200/B100, NVLink 5) need the NVLink Subnet Manager
# (nvlsm) beside Fabric Manager; earlier generations (HGX H100/H200, NVLink 4, and older) need Fabric Manager only.
NVLINK_GENERATIONS = {"7.0": 2, "8.0": 3, "8.6": 3, "9.0": 4, "10.0": 5, "10.3": 5}
# Every NVLink GPU so far has at most 18 links (V100 6, A100 12, H100, H200 and B200 18): a GPU that shows more
# NVLinks to its peers than that reaches them through NVSwitches (NV18 to each of 7 peers on an HGX board), while
# directly wired GPUs share their links (4-GPU HGX H100: NV6 to each of 3 peers).
MAX_NVLINKS_PER_GPU = 18
# Fabric states of a GPU that takes part in an NVSwitch fabric (NVML's nvmlGpuFabricState); GPUs without one say
# N/A or Not Supported.
FABRIC_STATES = ("Not Started", "In Progress", "Completed")
# The order in which a fabric settles: the least settled GPU speaks for the host.
FABRIC_PROGRESS = dict((state, rank) for rank, state in enumerate(FABRIC_STATES))
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def parse_fabric(query_text):
    """[{state, status}] for each GPU, from the "Fabric" sections of `nvidia-smi -q` (Hopper and later drivers;
    none from older ones). Not-supported values become null."""
    fabrics, current = [], None
    for line in query_text.splitlines():
        name, colon, value = line.partition(":")
        if not colon and line.strip() == "Fabric":
            current = dict(state=None, status=None)
            fabrics.append(current)
        elif current is not None and name.strip() in ("State", "Status") and current[name.strip().lower()] is None:
            current[name.strip().lower()] = _value(value)
        elif current is not None and name.strip() == "ClusterUUID":
            current = None
    return fabrics


def fabric_summary(fabrics):
    """{state, status} of the least settled GPU that takes part in a fabric, else of the first GPU; None without
    any Fabric section."""
    if not fabrics:
        return None
    joined = [fabric for fabric in fabrics if fabric["state"] in FABRIC_PROGRESS]
    if not joined:
        return dict(fabrics[0])
    return dict(min(joined, key=lambda fabric: (FABRIC_PROGRESS[fabric["state"]], fabric["status"] == "Success")))


def switched_topology(nvlink_pairs):
    """Whether some GPU shows more NVLinks to its peers than a GPU has: its peers are behind NVSwitches."""
    links = {}
    for gpu, peer, count in nvlink_pairs:
        links[gpu] = links.get(gpu, 0) + count
        links[peer] = links.get(peer, 0) + count
    return any(total > MAX_NVLINKS_PER_GPU for total in links.values())


def nvswitch_facts(state, gpus, nvlink_pairs, fabric, nvswitch_devices):
    """{nvswitch, nvswitch_devices, nvlink_generation}.

    nvswitch: true when the GPUs are on an NVSwitch fabric (the nvidia-nvswitch driver holds switches here, a GPU
    registered with a fabric, or the topology shows switched NVLinks), false when the driver answered and none of
    that is so, null when the driver did not answer. nvswitch_devices: the PCI addresses of the NVSwitches bound to
    this host's nvidia-nvswitch driver (none in a virtual machine whose GPUs' fabric the hypervisor manages).
    """
    devices = sorted(device for device in (nvswitch_devices or []) if PCI_ADDRESS.fullmatch(device))
    if state != "ok":
        return dict(nvswitch=None, nvswitch_devices=devices, nvlink_generation=None)
    nvswitch = bool(devices or (fabric and fabric["state"] in FABRIC_PROGRESS) or switched_topology(nvlink_pairs))
    generation = None
    if nvswitch or nvlink_pairs:
        generation = next((NVLINK_GENERATIONS.get(gpu.get("compute_capability")) for gpu in gpus), None)
    return dict(nvswitch=nvswitch, nvswitch_devices=devices, nvlink_generation=generation)


QUERY_ARGV = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
TOPOLOGY_ARGV = ("topo", "-m")
MODINFO_ARGV = ("-F", "version", "nvidia")
DETAILS_ARGV = ("-q",)


def gather(nvidia_smi, modinfo, run, proc_version, nvswitch_devices=None):
    """The gpu facts of a host.

    nvidia_smi, modinfo: paths of the commands, None where missing; run(argv) -> (rc, stdout, stderr);
    proc_version: the text of /proc/driver/nvidia/version, None when absent; nvswitch_devices: the entries of
    /sys/bus/pci/drivers/nvidia-nvswitch (the switches that driver holds), None when it is absent.
    """
    facts = dict(state="no_nvidia_smi", message="", count=0, gpus=[], driver_version=None, cuda_driver_version=None,
                 kernel_module=kernel_module_flavour(proc_version),
                 kernel_module_version=kernel_module_version(proc_version),
                 kernel_module_installed_version=None, interconnect="none", nvlink_pairs=[], topology={},
                 fabric=None)
    facts.update(nvswitch_facts(None, [], [], None, nvswitch_devices))
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
    rc, details, _err = run([nvidia_smi] + list(DETAILS_ARGV))
    facts["fabric"] = fabric_summary(parse_fabric(details if rc == 0 else ""))
    facts.update(nvswitch_facts(facts["state"], facts["gpus"], facts["nvlink_pairs"], facts["fabric"],
                                nvswitch_devices))
    return facts


def read_proc_version(path=PROC_VERSION):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def list_nvswitch_driver(path=NVSWITCH_DRIVER):
    try:
        return os.listdir(path)
    except (IOError, OSError):
        return None


def gather_host(module, run=None):
    """gather() on this host, with the module's commands, run by run(argv) -> (rc, stdout, stderr) when given."""
    return gather(module.get_bin_path("nvidia-smi"), module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"]),
                  run or module.run_command, read_proc_version(), list_nvswitch_driver())
