# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Parse what nvidia-smi and the driver say about a host's GPUs: the core of gpu_facts (and of preflight_check,
which gathers the same facts).

Pure functions over text, so that recorded outputs of real hosts test them; gather_host() reads the host for them.
What nvidia-smi prints is text the collection does not control: each parser reads a bounded part of it, with string
operations or patterns whose time is linear in the text, converts only numbers of a bounded count of digits, and
cleans what it puts in the facts of terminal sequences and control characters.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os
import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import run_answered
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import (
    RESULT_LINE_BYTES,
    printable_text,
    result_line,
)

PROC_VERSION = "/proc/driver/nvidia/version"
# nvidia-smi on a GPU that stopped answering can hang for minutes: a command of gpu_facts ends by then, its
# output read as far as it came.
COMMAND_TIMEOUT = 120
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

# The GPUs read of a list or a table: the largest boards hold 16, a node a few hundred at the very most.
MAX_GPUS = 256
# How much of a command's output is read. nvidia-smi prints a line or a row per GPU (and per NIC) of a few hundred
# characters at most, and for -q some 250 lines and 14,000 characters per GPU; past these bounds the text is no
# output of nvidia-smi's, and reading it whole would let a broken or replaced command spend the module's time and
# memory. A longer line is left out whole.
OUTPUT_CHARACTERS = 1 << 20
OUTPUT_LINES = 2048
DETAILS_CHARACTERS = 4 << 20
DETAILS_LINES = 1 << 16
LINE_CHARACTERS = 16384
# What the facts show of one value nvidia-smi printed (a name, a UUID, a state), and of a table's cell (a link is
# a few characters: "NODE", "NV18").
VALUE_BYTES = 256
CELL_BYTES = 64
# A GPU of nvidia-smi's tables is "GPU" and its index, and a link of bonded NVLinks "NV" and their count (18 at
# most so far). Their digits are bounded: int() of a long run of digits is slow, and refused past 4,300 digits
# from Python 3.11 on.
GPU_NAME = re.compile(r"GPU[0-9]{1,4}")
NVLINK = re.compile(r"NV([0-9]{1,3})")
# An integer fact (an index, MiB of memory, a PCIe generation or width); one of more digits stays text.
INTEGER = re.compile(r"[0-9]{1,12}")
# The versions of the table's header: digits and dots, 32 at most (none may follow: a longer one is no version).
CUDA_VERSION = re.compile(r"CUDA (?:UMD )?Version:\s*([0-9][0-9.]{0,31})(?![0-9.])")
DRIVER_VERSION = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][0-9.]{0,31})(?![0-9.])")
NO_VALUE = ("[N/A]", "N/A", "[Not Supported]", "")

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


def one_line(text, limit=RESULT_LINE_BYTES):
    """What a command printed as a result shows it: one line without terminal sequences and control characters, cut
    to limit bytes (result_line), without the spaces around it."""
    return result_line(text.strip(), limit).strip()


def _value(text):
    """A value as the facts show it: one_line, cut to VALUE_BYTES, None for nvidia-smi's spellings of no value, a
    unit of MiB left out."""
    text = one_line(text, VALUE_BYTES)
    if text in NO_VALUE:
        return None
    return text[:-3].rstrip() if text.endswith("MiB") else text


def _field(field):
    """A CSV header's field without its unit, as a fact's name shows it: "memory.total [MiB]" is memory.total."""
    field = field.strip()
    if field.endswith("]"):
        opening = field.find("[", field.rfind("]", 0, len(field) - 1) + 1)
        if opening >= 0:
            field = field[:opening].rstrip()
    return result_line(field, VALUE_BYTES)


def parse_query(text):
    """GPUs from `--query-gpu=... --format=csv`: with a header (any fields, units stripped), or
    `noheader,nounits` output of QUERY_FIELDS; the first MAX_GPUS of them."""
    lines = [line for line in bounded_lines(text, OUTPUT_CHARACTERS, OUTPUT_LINES, []) if line.strip()]
    header = [_field(field) for field in lines[0].split(",")] if lines else []
    if set(header) & set(QUERY_FIELDS):
        lines = lines[1:]
    else:
        header = list(QUERY_FIELDS)
    gpus = []
    for line in lines:
        cells = line.split(",", len(header))
        if len(cells) != len(header):
            continue
        gpu = dict((FACT_NAMES.get(field, field), _value(cell)) for field, cell in zip(header, cells))
        for name in INTEGER_FACTS:
            if gpu.get(name) is not None and INTEGER.fullmatch(gpu[name]):
                gpu[name] = int(gpu[name])
        gpus.append(gpu)
        if len(gpus) == MAX_GPUS:
            break
    return gpus


def parse_cuda_version(table):
    """The CUDA version the driver supports, from nvidia-smi's table header: "CUDA Version:", or
    "CUDA UMD Version:" from the 610 branch on (the user-mode driver's CUDA version)."""
    match = CUDA_VERSION.search(table[:OUTPUT_CHARACTERS])
    return match.group(1) if match else None


def parse_driver_version(table):
    """The driver's version from nvidia-smi's table header: "Driver Version:", or "KMD Version:"
    (the kernel-mode driver) from the 610 branch on."""
    match = DRIVER_VERSION.search(table[:OUTPUT_CHARACTERS])
    return match.group(1) if match else None


def gpu_index(name):
    """The index of a GPU named as nvidia-smi's tables name it ("GPU3": 3); None for any other cell (a NIC, an
    affinity, "GPU" with more digits than a node has GPUs)."""
    return int(name[3:]) if GPU_NAME.fullmatch(name) else None


def _note(problems, line):
    if line not in problems:
        problems.append(line)


def bounded_lines(text, characters, count, problems):
    """The lines of a command's output: of its first characters, the first count lines, each line of more than
    LINE_CHARACTERS left out (an empty line in its place). problems (a list) gets a line for each bound the text
    passed, as the end of a sentence that names the command."""
    text = text or ""
    if len(text) > characters:
        _note(problems, "printed %d characters: the first %d were read" % (len(text), characters))
        text = text[:characters]
    lines = text.split("\n", count)
    if len(lines) > count:
        lines.pop()
        _note(problems, "printed more than %d lines: the first %d were read" % (count, count))
    long_lines = sum(1 for line in lines if len(line) > LINE_CHARACTERS)
    if long_lines:
        _note(problems, "printed %d line(s) of more than %d characters: left out" % (long_lines, LINE_CHARACTERS))
        lines = [line if len(line) <= LINE_CHARACTERS else "" for line in lines]
    return lines


def table_rows(text, problems):
    """The lines of a table nvidia-smi printed (topo -m, topo -p2p), as bounded_lines reads them, each as its cells:
    split at whitespace, terminal sequences and control characters removed, each cut to CELL_BYTES."""
    return [[cell if len(cell) <= CELL_BYTES else result_line(cell, CELL_BYTES)
             for cell in printable_text(line).split()]
            for line in bounded_lines(text, OUTPUT_CHARACTERS, OUTPUT_LINES, problems)]


TOO_MANY_GPUS = "lists more than %d GPUs: the first %d were read" % (MAX_GPUS, MAX_GPUS)


def first_gpus(names, problems):
    """The first MAX_GPUS of a table's GPU columns; problems gets a line where there are more."""
    if len(names) > MAX_GPUS:
        _note(problems, TOO_MANY_GPUS)
    return names[:MAX_GPUS]


def room_for(matrix, name, problems):
    """Whether a table's row of the GPU name has its place in matrix: MAX_GPUS rows at most."""
    if name in matrix or len(matrix) < MAX_GPUS:
        return True
    _note(problems, TOO_MANY_GPUS)
    return False


def parse_topology(text, problems=None):
    """{"matrix": {GPUi: {GPUj: link}}, "nvlink_pairs": [[i, j, links]], "interconnect": nvlink|pcie|single|none}.
    problems, a list where given, gets what of the text was not read (table_rows, MAX_GPUS)."""
    problems = [] if problems is None else problems
    rows = table_rows(text, problems)
    header = next((number for number, cells in enumerate(rows) if cells and cells[0].startswith("GPU0")), None)
    matrix = {}
    if header is not None:
        # The header's cells that name a GPU, in their order; the NIC and affinity columns follow them.
        gpus = first_gpus([cell for cell in rows[header] if gpu_index(cell) is not None], problems)
        for number, cells in enumerate(rows):
            if number == header or not cells or gpu_index(cells[0]) is None:
                continue
            name = cells[0]
            if room_for(matrix, name, problems):
                # zip stops at the last GPU column: the CPU and NUMA affinity columns after it are not links.
                matrix[name] = dict((peer, link) for peer, link in zip(gpus, cells[1:]) if peer != name)
    pairs = []
    for name, links in matrix.items():
        for peer, link in links.items():
            match = NVLINK.fullmatch(link)
            if match and gpu_index(name) < gpu_index(peer):
                pairs.append([gpu_index(name), gpu_index(peer), int(match.group(1))])
    pairs.sort()
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
    none from older ones), the first MAX_GPUS of them. Not-supported values become null."""
    fabrics, current = [], None
    for line in bounded_lines(query_text, DETAILS_CHARACTERS, DETAILS_LINES, []):
        name, colon, value = line.partition(":")
        if not colon and line.strip() == "Fabric":
            if len(fabrics) == MAX_GPUS:
                break
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
            facts["kernel_module_installed_version"] = one_line(out, VALUE_BYTES)
    if nvidia_smi is None:
        facts["message"] = "nvidia-smi is not installed (no NVIDIA driver user space on this host)"
        return facts
    rc, out, err = run([nvidia_smi] + list(QUERY_ARGV))
    facts["state"] = state_of(rc, out + err)
    if facts["state"] != "ok":
        facts["message"] = one_line(out + err)
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


def gpu_list(nvidia_smi, run):
    """The host's GPUs as gather() lists them (index, uuid, ...), from its query alone: [] where nvidia-smi finds
    none, None where it is not installed (nvidia_smi None) or cannot list them (no driver, a mismatch, an error)."""
    if nvidia_smi is None:
        return None
    rc, out, err = run([nvidia_smi] + list(QUERY_ARGV))
    state = state_of(rc, out + err)
    if state == "no_gpu":
        return []
    return parse_query(out) if state == "ok" else None


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


def run_command(argv):
    """A command of gather_host's, bounded in time and in the output read back (run_command's are not)."""
    return run_answered(argv, COMMAND_TIMEOUT)


def gather_host(module, run=run_command):
    """gather() on this host, with the module's commands, run by run(argv) -> (rc, stdout, stderr)."""
    return gather(module.get_bin_path("nvidia-smi"), module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"]),
                  run, read_proc_version(), list_nvswitch_driver())
