# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Tell a sick GPU from a healthy one before it serves: the core of gpu_health_info.

Pure functions over what `nvidia-smi -q`, `nvidia-smi nvlink -e`, the kernel log (through kernel_log, the one
reader of it), `dcgmi diag` and the PCIe fabric between the GPUs (through pcie_fabric: ACS on the bridges, the
IOMMU, nvidia-smi's P2P matrix) print, so that recorded outputs of real hosts test them; gather() runs the commands
through the run callable it is given.

Which finding counts as what is data (FINDINGS, XID_FINDINGS): each finding id has a severity (unhealthy, degraded
or info) that severity_overrides may change, and the action NVIDIA documents for it. Sources:
- Xids: NVIDIA's Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
- ECC, row remapping, recovery actions: "NVIDIA GPU Memory Error Management",
  https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html (row-remapping.html,
  error-recovery-and-response-flags.html, user-visible-statistics.html)
- retired pages: "Dynamic Page Retirement", https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html
- clock event (throttle) reasons: NVML's nvmlClocksEventReasons,
  https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksThrottleReasons.html
- PCIe: `nvidia-smi --help-query-gpu`: "pcie.link.gen.current ... may be reduced when the GPU is not in use".
- the PCIe fabric between GPUs (ACS redirection with the IOMMU translating, the IOMMU, peer-to-peer not
  supported): NCCL's troubleshooting, "PCI Access Control Services (ACS)",
  https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs,
  NVIDIA/nccl issue 2079, and the CUDA programming guide's "Host IOMMU Hardware, PCI Access Control Services, and
  VMs"; pcie_fabric's docstring says what each finding rests on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re
import time

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import (
    NUMBER_DIGITS,
    RESULT_LINE_BYTES,
    bounded_int,
    result_line,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.kernel_log import (
    MAX_KMSG_RECORDS,
    XID_MEANINGS,
    kernel_events,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import (
    DETAILS_CHARACTERS,
    DETAILS_LINES,
    MAX_GPUS,
    state_of,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import pcie_fabric

SEVERITIES = ("unhealthy", "degraded", "info")
# The node's verdict is its worst finding's severity; info findings leave it healthy.
VERDICT_OF = {"unhealthy": "unhealthy", "degraded": "degraded", "info": "healthy"}

ACTIONS = {
    "none": "Nothing to do.",
    "restart_app": "Restart the server; the GPU itself is fine.",
    "reset_gpu": "Drain the GPU, reset it (nvidia-smi -r -i <gpu>, no process on it) or reboot the node, then check "
                 "again.",
    "reboot": "Drain the node and reboot it, then check again.",
    "drain_and_open_case": "Drain the node and open a case with NVIDIA or the system's vendor (RMA).",
    "check_cooling_and_power": "Check the node's cooling and power supply; drain it and open a case if it persists.",
    "check_pcie_link": "Drain the node and check the GPU's seating, riser and slot; open a case if it persists.",
    "check_nvlink": "Reset the GPUs (or reboot) and watch the counters (nvidia-smi nvlink -e); drain the node and open "
                    "a case if they keep rising.",
    "check_fabric_manager": "Check that nvidia-fabricmanager runs at the driver's version and read its log; reset the "
                            "GPUs or reboot once it does.",
    "enable_persistence": "Run nvidia-persistenced, so that the driver stays initialised between processes.",
    "look_up_xid": "Look the Xid up in NVIDIA's Xid catalogue.",
    "read_dcgm_diag": "Read the diagnostic's message; rerun it after the fix, and open a case if it still fails.",
    "disable_acs_or_iommu_pt": "Disable ACS on the bridges named: in the BIOS (its ACS, or IO virtualization / "
                               "VT-d / AMD-Vi, setting), or at each boot with setpci -s <bridge> ECAP_ACS+0x6.w=0000; "
                               "or put the IOMMU in passthrough (iommu=pt on the kernel command line) and reboot. "
                               "Until then NCCL_P2P_DISABLE=1 (runtime_env_nccl_overrides) with "
                               "sglang_server_disable_custom_all_reduce: true keeps the server from hanging, at a "
                               "cost: NCCL passes the GPUs' traffic through host memory instead of peer-to-peer.",
    "disable_acs": "For direct peer-to-peer between GPUs under one switch, disable ACS on the bridges named: in the "
                   "BIOS, or at each boot with setpci -s <bridge> ECAP_ACS+0x6.w=0000.",
    "iommu_passthrough": "Put the IOMMU in passthrough: iommu=pt on the kernel command line (beside intel_iommu=on "
                         "or amd_iommu=on where the IOMMU is needed), then reboot; or turn IO virtualization (VT-d, "
                         "AMD-Vi) off in the BIOS where no virtual machine or SR-IOV device needs it.",
    "check_p2p": "The driver does no peer-to-peer between these GPUs (GeForce boards say GNS, a virtual machine's "
                 "chipset CNS): NCCL goes through host memory. Set sglang_server_disable_custom_all_reduce: true, "
                 "and accept it (severity_overrides) or move the GPUs where the driver supports peer-to-peer.",
}

# id: (severity, action, what it means)
FINDINGS = {
    "ecc_uncorrectable": ("unhealthy", "reset_gpu",
                          "Uncorrectable (double-bit) ECC errors in GPU memory since the driver loaded"),
    "ecc_uncorrectable_aggregate": ("info", "none",
                                    "Uncorrectable ECC errors in the GPU's lifetime, none since the driver loaded"),
    "ecc_correctable": ("info", "none", "Correctable (single-bit) ECC errors since the driver loaded"),
    "sram_threshold_exceeded": ("unhealthy", "drain_and_open_case",
                                "The SRAM error count passed NVIDIA's RMA threshold"),
    "unrepairable_memory": ("unhealthy", "drain_and_open_case", "The GPU reports memory it cannot repair"),
    "memory_repair_pending": ("degraded", "reset_gpu", "A memory channel or TPC repair waits for a GPU reset"),
    "retired_pages_pending": ("degraded", "reset_gpu",
                              "Retired pages wait for the driver to reload before they are set aside"),
    "row_remap_pending": ("degraded", "reset_gpu", "A memory row is marked for remapping at the next GPU reset"),
    "row_remap_failure": ("unhealthy", "drain_and_open_case",
                          "Row remapping failed: a bank has no spare row left (NVIDIA's RMA criterion)"),
    "gpu_reset_required": ("unhealthy", "reset_gpu", "The driver says the GPU needs a reset to recover"),
    "drain_and_reset_required": ("unhealthy", "reset_gpu", "The driver says: drain the GPU and reset it"),
    "drain_p2p_required": ("unhealthy", "reset_gpu",
                           "The driver says peer-to-peer traffic must be drained before it can recover"),
    "node_reboot_required": ("unhealthy", "reboot", "The driver says the node needs a reboot to recover"),
    "hw_slowdown": ("degraded", "check_cooling_and_power",
                    "Hardware slowdown: clocks cut by half or more (heat, power brake or power draw)"),
    "hw_thermal_slowdown": ("degraded", "check_cooling_and_power", "Hardware thermal slowdown: the GPU is too hot"),
    "hw_power_brake_slowdown": ("degraded", "check_cooling_and_power",
                                "Hardware power brake: the system's power supply asserted the brake"),
    "sw_thermal_slowdown": ("degraded", "check_cooling_and_power",
                            "Software thermal slowdown: the GPU is above its maximum operating temperature"),
    "sw_power_cap": ("info", "none", "Clocks held below the requested ones by the power limit (normal under load)"),
    "temperature_above_max_operating": ("degraded", "check_cooling_and_power",
                                        "The GPU is above its maximum operating temperature"),
    "power_limit_below_default": ("info", "none", "The power limit is set below the GPU's default"),
    "pcie_width_degraded": ("degraded", "check_pcie_link", "The PCIe link runs with fewer lanes than it can"),
    "pcie_gen_below_max": ("info", "none",
                           "A busy GPU's PCIe link runs below its maximum generation (an idle one may, to save "
                           "power)"),
    "pcie_replays": ("info", "none", "The PCIe link replayed packets since the GPU was reset"),
    "fabric_not_ready": ("unhealthy", "check_fabric_manager",
                         "The GPU has not joined its NVSwitch fabric: CUDA fails (error 802) until it does"),
    "fabric_error": ("unhealthy", "check_fabric_manager", "The GPU's NVSwitch fabric registration failed"),
    "fabric_unhealthy": ("degraded", "check_fabric_manager", "The GPU's fabric reports itself unhealthy"),
    "persistence_mode_disabled": ("info", "enable_persistence", "Persistence mode is off"),
    "nvlink_errors": ("degraded", "check_nvlink", "NVLink error counters are not zero: a link retried or failed"),
    "dcgm_diag_failed": ("unhealthy", "read_dcgm_diag", "A DCGM diagnostic test failed"),
    "dcgm_diag_warning": ("degraded", "read_dcgm_diag", "A DCGM diagnostic test warned"),
    "pcie_acs_redirect": ("unhealthy", "disable_acs_or_iommu_pt",
                          "ACS on a PCIe bridge between GPUs redirects their peer-to-peer traffic to the root "
                          "complex while the IOMMU translates it: NCCL hangs or crawls with more than one GPU per "
                          "server"),
    "pcie_acs_redirect_passthrough": ("info", "disable_acs",
                                      "ACS on a PCIe bridge between GPUs sends their peer-to-peer traffic through "
                                      "the root complex; the IOMMU does not translate it, so it works, slower than "
                                      "across the switch"),
    "iommu_translating": ("degraded", "iommu_passthrough",
                          "The IOMMU translates the GPUs' DMA: NVIDIA does not support peer-to-peer copies between "
                          "PCIe GPUs with the IOMMU on, on bare metal"),
    "p2p_not_supported": ("degraded", "check_p2p",
                          "The driver does no peer-to-peer between some GPUs: NCCL passes their traffic through host "
                          "memory, slower"),
}

# Xid number: (severity, action), after the catalogue's resolution buckets: 13, 31, 43 and 45 are the
# application's own faults (or their clean-up) on a sound GPU.
XID_FINDINGS = {
    13: ("info", "restart_app"),
    31: ("info", "restart_app"),
    43: ("info", "restart_app"),
    45: ("info", "none"),
    48: ("unhealthy", "reset_gpu"),
    63: ("degraded", "reset_gpu"),
    64: ("unhealthy", "drain_and_open_case"),
    74: ("unhealthy", "check_nvlink"),
    79: ("unhealthy", "reboot"),
    92: ("degraded", "reset_gpu"),
    94: ("degraded", "restart_app"),
    95: ("unhealthy", "reset_gpu"),
    119: ("unhealthy", "reset_gpu"),
    120: ("unhealthy", "reset_gpu"),
}
UNKNOWN_XID = ("info", "look_up_xid")
XID_ID = re.compile(r"xid_(\d+)$")

GPU_HEADER = re.compile(r"GPU (?P<bus_id>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
# Older drivers' names of today's sections and fields.
RENAMED = {"clocks throttle reasons": "clocks event reasons", "power readings": "gpu power readings",
           "pending page retirement": "pending page blacklist", "enforced power limit": "current power limit"}
CLOCK_EVENTS = (("hw slowdown", "hw_slowdown"), ("hw thermal slowdown", "hw_thermal_slowdown"),
                ("hw power brake slowdown", "hw_power_brake_slowdown"),
                ("sw thermal slowdown", "sw_thermal_slowdown"), ("sw power cap", "sw_power_cap"))
# What "GPU Recovery Action" (drivers 570 and later) and the older "GPU Reset Status" fields ask for.
RECOVERY_ACTIONS = (("reboot", "node_reboot_required"), ("drain and reset", "drain_and_reset_required"),
                    ("p2p", "drain_p2p_required"), ("reset", "gpu_reset_required"))
DCGM_RESULTS = ("Pass", "Fail", "Warn", "Skip")
NUMBER = re.compile(r"-?(\d+)(?:\.(\d+))?")
HEX_DIGITS = "0123456789abcdefABCDEF"

# What is read of the commands' output, at most: no output (a broken driver's, or that of a program of the name found
# first on the PATH) may make the module run on for minutes or return megabytes. The result's cut says each cut.
# Sizes are in characters, a byte each of these commands' ASCII output.
# nvidia-smi -q is read within gpu_facts' bounds (DETAILS_CHARACTERS, DETAILS_LINES), which preflight reads the same
# output with.
# nvidia-smi nvlink -e prints a few counters for each of up to 18 links (NVLink5) a GPU, some 40 characters each.
NVLINK_CHARS = 4 << 20
NVLINK_LINES = 100000
# dcgmi diag prints a table of a few KB, some 30 rows at level 4.
DCGM_CHARS = 1 << 20
DCGM_LINES = 10000
DCGM_ROWS = 64
# The kernel log: as many lines as /dev/kmsg is read for.
KERNEL_LINES = MAX_KMSG_RECORDS
# A line of any of them: a process's path in nvidia-smi -q may be as long as PATH_MAX; other lines are under 200.
LINE_CHARS = 4096
# The H200's nvidia-smi -q has some 250 fields a GPU, in sections 3 deep.
GPU_FIELDS = 2048
SECTION_DEPTH = 8
# Non-zero NVLink counters shown a GPU: 18 links (NVLink5) with 3 counters each (replay, recovery, CRC).
NVLINK_COUNTERS = 64
# Findings returned, the worst first (a few for each of MAX_GPUS at most); the counts and the verdict weigh them all.
MAX_FINDINGS = 1024
# What a GPU's name, UUID or state shows: each is under 100 characters.
FACT_BYTES = 256
# Lines parsed between two looks at the deadline.
DEADLINE_EVERY = 256

DETAILS_ARGV = ("-q",)
NVLINK_ARGV = ("nvlink", "-e")
# dcgmi's levels: 1 takes seconds and is meant as a readiness check; 2 and above load the GPUs for minutes.
QUICK_DCGM_LEVEL = 1
DCGM_LEVELS = (1, 2, 3, 4)


def check_options(severity_overrides, dcgm_diag_level, dcgm_diag_allow_long, option="severity_overrides"):
    """InvalidOption naming the option (the overrides' name as the caller's user knows it) for an unknown finding id
    or severity, or a long DCGM level not allowed."""
    for finding, severity in (severity_overrides or {}).items():
        if finding not in FINDINGS and not XID_ID.match(finding):
            raise InvalidOption("%s: %r is no finding id; known ids: %s, and xid_<number> for any Xid"
                                % (option, finding, ", ".join(sorted(FINDINGS))))
        if severity not in SEVERITIES:
            raise InvalidOption("%s: %s: %r is no severity; use one of %s"
                                % (option, finding, severity, ", ".join(SEVERITIES)))
    if dcgm_diag_level not in DCGM_LEVELS:
        raise InvalidOption("dcgm_diag_level=%r: dcgmi knows levels %s" % (dcgm_diag_level, DCGM_LEVELS))
    if dcgm_diag_level > QUICK_DCGM_LEVEL and not dcgm_diag_allow_long:
        raise InvalidOption("dcgm_diag_level=%d loads the GPUs for minutes (level 1 is the readiness check): set "
                            "dcgm_diag_allow_long=true to run it on a drained node" % dcgm_diag_level)


class Deadline(object):
    """The module's timeout as a point in time, taken at its start: what a command may still take, and whether
    parsing must stop. Without seconds, none."""

    def __init__(self, seconds=None, clock=time.monotonic):
        self.seconds, self.clock = seconds, clock
        self.end = None if seconds is None else clock() + seconds

    def left(self):
        """Seconds left, 0 once passed; None without a deadline."""
        return None if self.end is None else max(0.0, self.end - self.clock())

    def passed(self):
        return self.end is not None and self.clock() >= self.end


class Reading(object):
    """What one assessment read of the commands' outputs: each cut to its bound, parsing stopped at the deadline.
    cut says each cut; partial, those after which a GPU or a finding may have gone unread, so that the verdict
    cannot be healthy."""

    def __init__(self, deadline=None):
        self.deadline = deadline or Deadline()
        self.cut, self.partial = [], []

    def note(self, said, partial=True):
        """said, as the result's cut shows it."""
        said = result_line(said)
        self.cut.append(said)
        if partial:
            self.partial.append(said)
        return said

    def stop(self, source, what):
        return self.note("%s: %s: the deadline (timeout %s s) had passed" % (source, what, self.deadline.seconds))

    def text(self, text, source, limit):
        """text cut to limit characters."""
        if len(text) <= limit:
            return text
        self.note("%s: %s of output, cut to its first %s" % (source, _size(len(text)), _size(limit)))
        return text[:limit]

    def lines(self, lines, source, limit):
        """lines, each cut to LINE_CHARS, the first limit of them, until the deadline passes."""
        count = long_lines = 0
        for line in lines:
            if count == limit:
                self.note("%s: more than %d lines, the first %d read" % (source, limit, limit))
                break
            if count % DEADLINE_EVERY == 0 and self.deadline.passed():
                self.stop(source, "parsing stopped after %d lines" % count)
                break
            if len(line) > LINE_CHARS:
                long_lines += 1
                line = line[:LINE_CHARS]
            count += 1
            yield line
        if long_lines:
            self.note("%s: %d line(s) longer than %d characters, each cut to that" % (source, long_lines, LINE_CHARS),
                      partial=False)


def _size(chars):
    return "%.1f MiB" % (chars / float(1 << 20))


def _text_lines(text):
    """text's lines one at a time (splitlines() would make them all at once), a long one as its first LINE_CHARS + 1
    characters: enough for Reading.lines() to see that it is too long, without a copy of all of it."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:min(end, start + LINE_CHARS + 1)]
        start = end + 1


def parse_details(text, reading=None):
    """[{bus_id, fields: {lower-case path: value}, labels: {lower-case path: (sections as printed, name)}}], one per
    GPU of `nvidia-smi -q`, the first MAX_GPUS. A path is the tuple of the sections above a field and its name; N/A
    values are left out. reading (a Reading) bounds what is read and says what was cut."""
    source = "nvidia-smi -q"
    reading = reading or Reading()
    gpus, current, listed, deep, dropped = [], None, 0, 0, 0
    # The open sections, innermost last: (indent, keys, labels), keys and labels being the tuples of the names
    # (lower-case, and as printed) from the outermost down to it, shared by the fields below it. Keys of None:
    # a section nested too deep, whose lines are not read.
    sections = []
    for raw in reading.lines(_text_lines(reading.text(text, source, DETAILS_CHARACTERS)), source, DETAILS_LINES):
        line = raw.rstrip()
        header = GPU_HEADER.match(line)
        if header:
            listed += 1
            current = dict(bus_id=header.group("bus_id"), fields={}, labels={}) if listed <= MAX_GPUS else None
            gpus.extend([current] if current else [])
            sections = []
            continue
        if current is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while sections and sections[-1][0] >= indent:
            sections.pop()
        keys, labels = sections[-1][1:] if sections else ((), ())
        name, colon, value = line.strip().partition(":")
        if keys is None or (not colon and len(keys) == SECTION_DEPTH):
            deep += 1
            if keys is not None:
                sections.append((indent, None, None))
            continue
        label = name.strip()
        key = RENAMED.get(label.lower(), label.lower())
        if not colon:
            sections.append((indent, keys + (key,), labels + (label,)))
            continue
        value = value.strip()
        if value in ("N/A", "[N/A]", "Not Supported", "[Not Supported]", ""):
            continue
        path = keys + (key,)
        if path not in current["fields"] and len(current["fields"]) == GPU_FIELDS:
            dropped += 1
            continue
        current["fields"][path] = value
        current["labels"][path] = (labels, label)
    if listed > MAX_GPUS:
        reading.note("%s: %d GPUs listed, the first %d assessed" % (source, listed, MAX_GPUS))
    if deep:
        reading.note("%s: %d line(s) in sections nested more than %d deep, not read" % (source, deep, SECTION_DEPTH))
    if dropped:
        reading.note("%s: %d field(s) past the first %d of a GPU, not read" % (source, dropped, GPU_FIELDS))
    return gpus


def _number(value):
    """The first number in value, None when there is none or it has more than NUMBER_DIGITS digits."""
    found = NUMBER.search(value or "")
    if found is None or any(len(part or "") > NUMBER_DIGITS for part in found.groups()):
        return None
    return float(found.group())


class _Gpu(object):
    """One GPU of `nvidia-smi -q`, and the findings about it."""

    def __init__(self, parsed, index, severities):
        self.fields, self.labels, self.severities = parsed["fields"], parsed["labels"], severities
        self.findings = []
        self.facts = dict(index=index, bus_id=parsed["bus_id"], uuid=self.fact("gpu uuid"),
                          name=self.fact("product name"), persistence_mode=self.fact("persistence mode"))

    def value(self, *path):
        return self.fields.get(path)

    def fact(self, *path):
        """The value as a result shows it: cleaned and cut."""
        value = self.value(*path)
        return None if value is None else result_line(value, FACT_BYTES)

    def evidence(self, *path):
        sections, label = self.labels[path]
        return result_line("%s: %s" % (" > ".join(sections + (label,)), self.fields[path]))

    def number(self, *path):
        return _number(self.value(*path))

    def add(self, finding, evidence):
        self.findings.append(make_finding(finding, evidence, self.severities, self.facts["bus_id"]))

    def flag(self, finding, *path):
        """The finding when the field at path says Yes (or Active)."""
        if (self.value(*path) or "").lower() in ("yes", "active"):
            self.add(finding, self.evidence(*path))


def make_finding(finding, evidence, severities, gpu=None):
    """{id, severity, summary, evidence, action, advice, gpu}."""
    xid = XID_ID.match(finding)
    if xid:
        default, action = XID_FINDINGS.get(int(xid.group(1)), UNKNOWN_XID)
        summary = XID_MEANINGS.get(int(xid.group(1)), ("NVIDIA Xid %s" % xid.group(1),))[0]
    else:
        default, action, summary = FINDINGS[finding]
    return dict(id=finding, severity=severities.get(finding, default), summary=summary,
                evidence=result_line(evidence), action=action, advice=ACTIONS[action], gpu=gpu)


def _ecc(gpu):
    volatile_uncorrectable, aggregate_uncorrectable, correctable = [], [], []
    for path in sorted(gpu.fields):
        if path[0] != "ecc errors" or len(path) < 3 or path[1] not in ("volatile", "aggregate"):
            continue
        count = gpu.number(*path)
        if not count:
            continue
        # Hopper and later name each counter ("DRAM Uncorrectable"); older GPUs total "Single Bit" and "Double Bit".
        uncorrectable = "uncorrectable" in path[-1] or ("double bit" in path and path[-1] == "total")
        single_total = "single bit" in path and path[-1] == "total"
        if uncorrectable:
            (volatile_uncorrectable if path[1] == "volatile" else aggregate_uncorrectable).append(path)
        elif path[1] == "volatile" and (single_total or path[-1].endswith(" correctable")):
            correctable.append(path)
    for finding, paths in (("ecc_uncorrectable", volatile_uncorrectable), ("ecc_correctable", correctable)):
        if paths:
            gpu.add(finding, "; ".join(gpu.evidence(*path) for path in paths))
    if aggregate_uncorrectable and not volatile_uncorrectable:
        gpu.add("ecc_uncorrectable_aggregate", "; ".join(gpu.evidence(*path) for path in aggregate_uncorrectable))
    gpu.flag("sram_threshold_exceeded", "ecc errors", "aggregate", "sram threshold exceeded")
    gpu.flag("unrepairable_memory", "ecc errors", "unrepairable memory")
    gpu.flag("memory_repair_pending", "ecc errors", "channel repair pending")
    gpu.flag("memory_repair_pending", "ecc errors", "tpc repair pending")


def _memory(gpu):
    gpu.flag("retired_pages_pending", "retired pages", "pending page blacklist")
    gpu.flag("row_remap_pending", "remapped rows", "pending")
    gpu.flag("row_remap_failure", "remapped rows", "remapping failure occurred")


def _recovery(gpu):
    action = (gpu.value("gpu recovery action") or "none").lower()
    if action != "none":
        finding = next((name for word, name in RECOVERY_ACTIONS if word in action), "gpu_reset_required")
        gpu.add(finding, gpu.evidence("gpu recovery action"))
    gpu.flag("gpu_reset_required", "gpu reset status", "reset required")
    gpu.flag("drain_and_reset_required", "gpu reset status", "drain and reset recommended")


def _clocks(gpu):
    for reason, finding in CLOCK_EVENTS:
        gpu.flag(finding, "clocks event reasons", reason)


def _pcie(gpu):
    link = ("pci", "gpu link info")
    gen_current = gpu.number(*link + ("pcie generation", "current"))
    gen_max = gpu.number(*link + ("pcie generation", "max"))
    width_current = gpu.number(*link + ("link width", "current"))
    width_max = gpu.number(*link + ("link width", "max"))
    gpu.facts.update(pcie_gen_current=gen_current, pcie_gen_max=gen_max, pcie_width_current=width_current,
                     pcie_width_max=width_max)
    if width_current and width_max and width_current < width_max:
        widths = (gpu.evidence(*link + ("link width", "current")), gpu.evidence(*link + ("link width", "max")))
        gpu.add("pcie_width_degraded", "%s; %s" % widths)
    idle = (gpu.value("clocks event reasons", "idle") or "").lower() == "active"
    if gen_current and gen_max and gen_current < gen_max and not idle:
        generations = (gpu.evidence(*link + ("pcie generation", "current")),
                       gpu.evidence(*link + ("pcie generation", "max")))
        gpu.add("pcie_gen_below_max", "%s; %s" % generations)
    if gpu.number("pci", "replays since reset"):
        gpu.add("pcie_replays", gpu.evidence("pci", "replays since reset"))


def _thermal_and_power(gpu):
    temperature = gpu.number("temperature", "gpu current temp")
    gpu.facts.update(temperature_c=temperature, power_draw_w=gpu.number("gpu power readings", "average power draw")
                     or gpu.number("gpu power readings", "power draw"),
                     power_limit_w=gpu.number("gpu power readings", "current power limit"))
    # Hopper and later print the margin to the limit ("T.Limit"), which reaches 0 at the maximum operating
    # temperature; older GPUs print the temperatures themselves.
    margin, margin_limit = gpu.number("temperature", "gpu t.limit temp"), gpu.number(
        "temperature", "gpu max operating t.limit temp")
    maximum = gpu.number("temperature", "gpu max operating temp")
    if margin is not None and margin_limit is not None and margin <= margin_limit:
        gpu.add("temperature_above_max_operating", "%s; %s" % (gpu.evidence("temperature", "gpu t.limit temp"),
                                                               gpu.evidence("temperature",
                                                                            "gpu max operating t.limit temp")))
    elif margin is None and temperature is not None and maximum is not None and temperature >= maximum:
        gpu.add("temperature_above_max_operating", "%s; %s" % (
            gpu.evidence("temperature", "gpu current temp"), gpu.evidence("temperature", "gpu max operating temp")))
    limit, default = gpu.facts["power_limit_w"], gpu.number("gpu power readings", "default power limit")
    if limit is not None and default is not None and limit < default:
        limits = (gpu.evidence("gpu power readings", "current power limit"),
                  gpu.evidence("gpu power readings", "default power limit"))
        gpu.add("power_limit_below_default", "%s; %s" % limits)


def _fabric(gpu):
    state, status = gpu.value("fabric", "state"), gpu.value("fabric", "status")
    gpu.facts.update(fabric_state=gpu.fact("fabric", "state"), fabric_status=gpu.fact("fabric", "status"))
    if state in ("Not Started", "In Progress"):
        gpu.add("fabric_not_ready", gpu.evidence("fabric", "state"))
    elif state == "Completed" and status not in (None, "Success"):
        gpu.add("fabric_error", "%s; %s" % (gpu.evidence("fabric", "state"), gpu.evidence("fabric", "status")))
    if (gpu.value("fabric", "health", "summary") or "").lower() == "unhealthy":
        gpu.add("fabric_unhealthy", gpu.evidence("fabric", "health", "summary"))
    if (gpu.value("persistence mode") or "").lower() == "disabled":
        gpu.add("persistence_mode_disabled", gpu.evidence("persistence mode"))


CHECKS = (_ecc, _memory, _recovery, _clocks, _pcie, _thermal_and_power, _fabric)


def _nvlink_gpu(line):
    """(index, UUID) of a GPU's line of `nvidia-smi nvlink -e` ("GPU 0: NVIDIA H100 (UUID: GPU-5261e3df-...)"), else
    None."""
    if not line.startswith("GPU "):
        return None
    index, colon, rest = line[4:].partition(": ")
    start = rest.rfind("(UUID: GPU-")
    if not colon or bounded_int(index) is None or start < 0:
        return None
    uuid, closed, _rest = rest[start + len("(UUID: "):].partition(")")
    return (index, uuid) if closed and uuid[4:] and not uuid[4:].strip(HEX_DIGITS + "-") else None


def _nvlink_counter(line):
    """(link, name, value) of a counter's line ("Link 3: Replay Errors: 2353"), else None."""
    line = line.strip()
    if not line.startswith("Link "):
        return None
    link, colon, rest = line[len("Link "):].partition(": ")
    name, named, value = rest.partition(": ")
    if not (colon and named and bounded_int(link) is not None and bounded_int(value) is not None) or ":" in name:
        return None
    return (link, name, value) if "Error" in name or "error" in name else None


def parse_nvlink_errors(text, reading=None):
    """{GPU UUID: ["GPU i Link n: Name Errors: count", ...]} of the non-zero counters of `nvidia-smi nvlink -e`, the
    first NVLINK_COUNTERS of each of the first MAX_GPUS GPUs; lines that sum several links up ("Links 1-5: ...") are
    not counters. reading (a Reading) bounds what is read and says what was cut."""
    source = "nvidia-smi nvlink -e"
    reading = reading or Reading()
    found, uuid, index, seen, more = {}, None, None, set(), 0
    for line in reading.lines(_text_lines(reading.text(text, source, NVLINK_CHARS)), source, NVLINK_LINES):
        gpu = _nvlink_gpu(line)
        if gpu:
            index, uuid = gpu
            seen.add(uuid)
            uuid = uuid if len(seen) <= MAX_GPUS else None
            continue
        counter = _nvlink_counter(line)
        if uuid and counter and int(counter[2]):
            counters = found.setdefault(uuid, [])
            if len(counters) == NVLINK_COUNTERS:
                more += 1
                continue
            counters.append("GPU %s Link %s: %s: %s" % ((index,) + counter))
    if len(seen) > MAX_GPUS:
        reading.note("%s: %d GPUs listed, the first %d read" % (source, len(seen), MAX_GPUS))
    if more:
        reading.note("%s: %d non-zero counter(s) past the first %d of a GPU, not shown"
                     % (source, more, NVLINK_COUNTERS), partial=False)
    return found


def _dcgm_row(line):
    """(test, result, detail) of a result's row of `dcgmi diag`'s table ("| PCIe | Fail - All |"), else None."""
    cells = line.split("|", 3)
    if len(cells) < 4 or cells[0]:
        return None
    result = cells[2].lstrip()
    word, after = result[:4], result[4:5]
    if word not in DCGM_RESULTS or after.isalnum() or after == "_":
        return None
    return cells[1].strip(), word, result[4:]


def parse_dcgm_diag(text, reading=None):
    """[{test, result, detail}] of `dcgmi diag`'s table, the first DCGM_ROWS rows; a Warning row's wrapped lines are
    joined into it. reading (a Reading) bounds what is read and says what was cut."""
    source = "dcgmi diag"
    reading = reading or Reading()
    # last: the row a Warning row's lines belong to, None after a row past DCGM_ROWS.
    results, more, last = [], 0, None
    for line in reading.lines(_text_lines(reading.text(text, source, DCGM_CHARS)), source, DCGM_LINES):
        line = line.strip()
        row = _dcgm_row(line)
        if row and len(results) == DCGM_ROWS:
            more, last = more + 1, None
            continue
        if row:
            last = dict(test=row[0], result=row[1], detail=row[2].strip(" -"))
            results.append(last)
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|", 2)]
        if len(cells) == 2 and cells[0] == "Warning" and last is not None:
            last["warning"] = cells[1]
        elif len(cells) == 2 and not cells[0] and cells[1] and last is not None and "warning" in last:
            # Past what a result shows, more of it would only be cut again.
            if len(last["warning"]) <= RESULT_LINE_BYTES:
                last["warning"] += " " + cells[1]
    if more:
        reading.note("%s: %d rows, the first %d read" % (source, len(results) + more, DCGM_ROWS))
    for result in results:
        result.update((key, result_line(result[key])) for key in ("test", "detail", "warning") if key in result)
    return results


def _dcgm_findings(results, severities):
    findings = []
    for result in results:
        finding = {"Fail": "dcgm_diag_failed", "Warn": "dcgm_diag_warning"}.get(result["result"])
        if finding:
            evidence = "%s: %s %s" % (result["test"], result["result"], result["detail"])
            if result.get("warning"):
                evidence = "%s; %s" % (evidence.strip(), result["warning"])
            findings.append(make_finding(finding, evidence.strip(), severities))
    return findings


def _pci_key(bus_id):
    """domain:bus:device of a PCI address as nvidia-smi (8-digit domain) or the kernel's Xid lines (4) write it."""
    parts = bus_id.lower().split(":")
    return "%s:%s:%s" % (parts[0][-4:], parts[1], parts[2].split(".")[0]) if len(parts) == 3 else bus_id.lower()


def _xid_findings(xids, severities):
    """One finding for each Xid number on each device, the first line its evidence."""
    seen, findings = {}, []
    for event in xids:
        key = (_pci_key(event["device"]), event["xid"])
        if key in seen:
            seen[key]["count"] += 1
            continue
        finding = make_finding("xid_%d" % event["xid"], event["line"], severities, _pci_key(event["device"]))
        finding["count"] = 1
        seen[key] = finding
        findings.append(finding)
    return findings


def verdict_of(findings):
    """unhealthy, degraded or healthy: the worst of the findings' severities."""
    severities = set(finding["severity"] for finding in findings)
    return next((VERDICT_OF[severity] for severity in SEVERITIES if severity in severities), "healthy")


def assess(state, message, details, nvlink="", kernel_lines=None, dcgm_results=None, severity_overrides=None,
           fabric=None, reading=None):
    """The node's health from what the commands printed.

    state, message: nvidia_smi.state_of() of `nvidia-smi -q` and what it said; details: its output; nvlink: the
    output of `nvidia-smi nvlink -e`; kernel_lines: the kernel log's lines since boot, None when it was not read;
    dcgm_results: parse_dcgm_diag() of `dcgmi diag`'s output, None when it did not run; fabric: pcie_fabric.observe()
    of the PCIe fabric between the GPUs, None when it was not read; reading: the Reading that bounds the parsing and
    says what was cut (a fresh one, without a deadline, when not given)."""
    reading = reading or Reading()
    return _assess(state, message, parse_details(details, reading) if state == "ok" else [], nvlink, kernel_lines,
                   dcgm_results, severity_overrides, fabric, reading)


def _worst(findings, limit):
    """The ids (id()) of the limit worst findings."""
    rank = dict((severity, index) for index, severity in enumerate(SEVERITIES))
    order = sorted(range(len(findings)), key=lambda index: (rank[findings[index]["severity"]], index))
    return set(id(findings[index]) for index in order[:limit])


def _assess(state, message, parsed, nvlink, kernel_lines, dcgm_results, severity_overrides, fabric, reading):
    """assess() of parse_details()'s GPUs."""
    severities = dict(severity_overrides or {})
    gpus = []
    for index, each in enumerate(parsed):
        gpu = _Gpu(each, index, severities)
        for check in CHECKS:
            check(gpu)
        gpus.append(gpu)
    nvlink_errors = parse_nvlink_errors(nvlink or "", reading)
    for gpu in gpus:
        if gpu.value("gpu uuid") in nvlink_errors:
            gpu.add("nvlink_errors", "; ".join(nvlink_errors[gpu.value("gpu uuid")]))
    node_findings = []
    events = kernel_events(reading.lines(kernel_lines or [], "the kernel log", KERNEL_LINES))
    by_device = dict((_pci_key(gpu.facts["bus_id"]), gpu) for gpu in gpus)
    for finding in _xid_findings(events["xids"], severities):
        owner = by_device.get(finding["gpu"])
        if owner is None:
            node_findings.append(finding)  # a GPU that fell off the bus is no longer in nvidia-smi's list
        else:
            finding["gpu"] = owner.facts["bus_id"]
            owner.findings.append(finding)
    node_findings.extend(_dcgm_findings(dcgm_results or [], severities))
    fabric_summary = None
    if fabric is not None:
        weighed = pcie_fabric.weigh(fabric, [gpu.facts["bus_id"] for gpu in gpus])
        node_findings.extend(make_finding(finding, evidence, severities) for finding, evidence in weighed["findings"])
        fabric_summary = pcie_fabric.summary(fabric, weighed["mode"], weighed["problems"])
    every = node_findings + [finding for gpu in gpus for finding in gpu.findings]
    verdict = verdict_of(every)
    counts = dict((severity, sum(1 for finding in every if finding["severity"] == severity)) for severity in SEVERITIES)
    if len(every) > MAX_FINDINGS:
        kept = _worst(every, MAX_FINDINGS)
        node_findings = [finding for finding in node_findings if id(finding) in kept]
        for gpu in gpus:
            gpu.findings = [finding for finding in gpu.findings if id(finding) in kept]
        reading.note("findings: %d, the %d worst returned" % (len(every), MAX_FINDINGS), partial=False)
    if state != "ok" and verdict != "unhealthy":
        verdict, reason = "unknown", "nvidia-smi could not report on the GPUs (%s): %s" % (state, message)
    elif reading.partial and verdict != "unhealthy":
        verdict, reason = "unknown", "not all of the commands' output was read: %s" % "; ".join(reading.partial)
    elif verdict == "healthy":
        reason = "%d GPU(s), no unhealthy or degraded finding" % len(gpus)
    else:
        reason = "%d unhealthy and %d degraded finding(s)" % (counts["unhealthy"], counts["degraded"])
    health = dict(verdict=verdict, reason=result_line(reason), state=state, counts=counts,
                  gpus=[dict(gpu.facts, findings=gpu.findings) for gpu in gpus], findings=node_findings,
                  xid_count=events["xid_count"], pcie_fabric=fabric_summary, cut=reading.cut)
    health["summary"] = summary(health)
    return health


def findings_of(health, severity):
    """The node's findings of that severity: those of no GPU of the list first (the PCIe fabric's among them), then
    each GPU's in its order."""
    every = list(health["findings"]) + [finding for gpu in health["gpus"] for finding in gpu["findings"]]
    return [finding for finding in every if finding["severity"] == severity]


def where(finding, gpus):
    """Whose finding it is, as an operator finds it: "GPU 1 (00000000:00:07.0)" for a GPU nvidia-smi lists, the PCI
    address of one it no longer lists (an Xid of a GPU fallen off the bus), "the node" for a DCGM result or the PCIe
    fabric between the GPUs."""
    for gpu in gpus:
        if finding.get("gpu") and finding["gpu"] == gpu["bus_id"]:
            return "GPU %d (%s)" % (gpu["index"], gpu["bus_id"])
    if finding.get("gpu"):
        return "the GPU at %s, which nvidia-smi does not list" % finding["gpu"]
    return "the node"


def describe(finding, gpus):
    """One finding in full: whose, its id and severity, what it means, its evidence and NVIDIA's action."""
    return result_line("%s is %s: %s, %s. Evidence: %s. Action %s: %s" % (
        where(finding, gpus), finding["severity"], finding["id"], finding["summary"], finding["evidence"],
        finding["action"], finding["advice"]))


def brief(finding, gpus):
    """One finding in a few words: whose, its id, its evidence and the action's token."""
    return "%s %s (%s) -> %s" % (where(finding, gpus), finding["id"], finding["evidence"], finding["action"])


def summary(health):
    """The node's verdict in one line, with each unhealthy, then each degraded finding in brief."""
    worst = findings_of(health, "unhealthy") + findings_of(health, "degraded")
    said = "%s: %s" % (health["verdict"], health["reason"])
    if worst:
        said += ": " + "; ".join(brief(finding, health["gpus"]) for finding in worst)
    return result_line(said)


def _said(out, err):
    """What a command printed, as one line of a result: the start of its output and of its errors."""
    return result_line(("%s %s" % (out[:LINE_CHARS].strip(), err[:LINE_CHARS].strip())).strip())


def gather(nvidia_smi, dcgmi, run, read_kernel_log, options, read_fabric=pcie_fabric.read_fabric, deadline=None):
    """The node's health, from this host's commands.

    nvidia_smi, dcgmi: paths of the commands, None where missing; run(argv) -> (rc, stdout, stderr), bounded;
    read_kernel_log() -> (lines, source, problem); options: severity_overrides, kernel_log, dcgm_diag,
    dcgm_diag_level, pcie_fabric (read the PCIe fabric between the GPUs, through read_fabric() and, where nvidia-smi
    lists more than one GPU, its P2P matrix; off when not given); deadline: the module's Deadline, past which
    nothing more is run or read and parsing stops (run and read_kernel_log are to take no longer than it leaves)."""
    reading = Reading(deadline)

    def late(source, what="not run"):
        """Why source is not run (or read) once the deadline has passed, noted; else None."""
        return reading.stop(source, what) if reading.deadline.passed() else None

    def command(argv):
        """run(argv), or past the deadline (-1, "", why); one that ran into it was killed there, its output cut."""
        source = " ".join([argv[0].rsplit("/", 1)[-1]] + list(argv[1:]))
        why = late(source)
        if why:
            return -1, "", why
        answer = run(argv)
        late(source, "cut short")
        return answer

    if nvidia_smi is None:
        state, message, details, nvlink = "no_nvidia_smi", "nvidia-smi is not installed", "", ""
    else:
        rc, details, err = command([nvidia_smi] + list(DETAILS_ARGV))
        details = reading.text(details, "nvidia-smi -q", DETAILS_CHARACTERS)
        state, message = state_of(rc, details + err[:LINE_CHARS]), _said(details, err) if rc else ""
    parsed = parse_details(details, reading) if state == "ok" else []
    nvlink = command([nvidia_smi] + list(NVLINK_ARGV))[1] if state == "ok" else ""
    kernel = dict(read=options["kernel_log"], source=None, problem=None)
    lines = None
    if options["kernel_log"]:
        kernel["problem"] = late("the kernel log", "not read")
        if kernel["problem"] is None:
            lines, kernel["source"], kernel["problem"] = read_kernel_log()
            late("the kernel log", "cut short")
    dcgm = None
    if options["dcgm_diag"]:
        dcgm = dict(level=options["dcgm_diag_level"], rc=None, problem=None, results=[])
        if dcgmi is None:
            dcgm["problem"] = "dcgmi is not installed (NVIDIA DCGM): no diagnostic ran"
        else:
            dcgm["problem"] = late("dcgmi diag")
        if dcgm["problem"] is None:
            dcgm["rc"], out, err = command([dcgmi, "diag", "-r", str(options["dcgm_diag_level"])])
            dcgm["results"] = parse_dcgm_diag(out, reading)
            if not dcgm["results"]:
                dcgm["problem"] = _said(out, err) or "dcgmi diag printed no result"
    fabric = None
    if options.get("pcie_fabric"):
        fabric = pcie_fabric.observe(read_fabric, command, nvidia_smi if state == "ok" else None, len(parsed))
    health = _assess(state, message, parsed, nvlink, lines, dcgm and dcgm["results"], options["severity_overrides"],
                     fabric, reading)
    health.update(kernel_log=kernel, dcgm_diag=dcgm)
    return health
