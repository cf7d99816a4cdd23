# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Tell a sick GPU from a healthy one before it serves: the core of gpu_health_info.

Pure functions over what `nvidia-smi -q`, `nvidia-smi nvlink -e` and `-s`, the kernel log (through kernel_log, the
one reader of it), `dcgmi diag` and the PCIe fabric between the GPUs (through pcie_fabric: ACS on the bridges, the
IOMMU, nvidia-smi's P2P matrix) print, so that recorded outputs of real hosts test them; gather() runs the commands
through the run callable it is given, assess_evidence() reads the same outputs saved (gpu_evidence reads them).

Which finding counts as what is data (FINDINGS, and xid_catalogue for the Xids and DCGM's messages): each finding id
has a severity (unhealthy, degraded or info) that severity_overrides may change, the action NVIDIA documents for it,
and NVIDIA's resolution bucket (xid_catalogue.BUCKETS): an Xid's from the catalogue, rated from its line where the
catalogue decodes it (Xid 45 solo or not, 74's registers, 144-150's sub-codes, 154's recovery action); a DCGM
result's from DCGM's own severity of its message; any other finding's from its action (xid_catalogue.ACTION_BUCKETS).
The same fault of the node's power, cooling, fabric or settings on every GPU is one finding of the node (NODE_WIDE).
Sources:
- Xids, DCGM's severities, NVML's recovery actions: xid_catalogue's docstring
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
    pci_key,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import (
    DETAILS_CHARACTERS,
    DETAILS_LINES,
    MAX_GPUS,
    state_of,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import pcie_fabric
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import xid_catalogue as catalogue

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
    "restart_fabric_manager": "Nothing if a process on this GPU was stopped or killed just then (a stop, Ctrl-C, the "
                              "OOM killer); otherwise restart nvidia-fabricmanager, as NVIDIA's Xid catalogue says "
                              "for an Xid 45 of its own.",
    "update_driver": "Update the driver and the GPU's firmware to NVIDIA's latest for it (a guest's driver must "
                     "match its host's).",
    "restart_vm": "Restart the virtual machine that owns the GPU.",
    "check_uvm": "Reset the GPU where UVM or vGPU is in use on it; otherwise nothing to do.",
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
    "nvlink_inactive": ("unhealthy", "check_nvlink",
                        "An NVLink of the GPU is inactive: NVIDIA's Health Validation calls any inactive link "
                        "critical"),
    "nvlink_slow": ("degraded", "check_nvlink", "An NVLink runs slower than the node's other links"),
    "dcgm_diag_failed": ("unhealthy", "read_dcgm_diag", "A DCGM diagnostic test failed"),
    "dcgm_diag_warning": ("degraded", "read_dcgm_diag", "A DCGM diagnostic test warned"),
    "dcgm_diag_exit_status": ("degraded", "read_dcgm_diag",
                              "dcgmi diag exited with an error while its table shows no failed test"),
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

# The same fault on every GPU is the node's, not each card's: its power (the power brake is asserted by the system's
# power supply, NVIDIA's nvidia-smi documentation says), its cooling, its NVSwitch fabric, its settings. id: None to
# rate the node's finding as each GPU's, or (severity, bucket, what it means) of its own. A brake on every GPU
# throttles the whole node by half or more and no reboot lifts it: the facility's or the vendor's to fix (NVIDIA's
# NVSentinel rates it CONTACT_SUPPORT).
NODE_WIDE = (
    ("hw_slowdown", None),
    ("hw_power_brake_slowdown", ("unhealthy", "CONTACT_SUPPORT",
                                 "Hardware power brake on every GPU of the node: the platform's power supply or its "
                                 "management controller asserts it, not a card")),
    ("hw_thermal_slowdown", None),
    ("sw_thermal_slowdown", None),
    ("sw_power_cap", None),
    ("temperature_above_max_operating", None),
    ("power_limit_below_default", None),
    ("persistence_mode_disabled", None),
    ("fabric_not_ready", None),
    ("fabric_error", None),
    ("fabric_unhealthy", None),
)


def _by_number(number):
    """(severity, action, bucket) of an Xid by its number alone, after the catalogue's bucket for it."""
    bucket = catalogue.XIDS.get(number, (None, None, None))[2]
    if bucket not in catalogue.BUCKET_RATINGS:
        return catalogue.UNKNOWN_XID
    return catalogue.BUCKET_RATINGS[bucket] + (bucket,)


# Xid number: (severity, action, bucket) where nothing but the number is known: every Xid of the catalogue.
XID_FINDINGS = dict((number, _by_number(number)) for number in catalogue.XIDS)
XID_ID = re.compile(r"xid_(\d+)$")
# The NVLink5 decode's buckets, worst first: XID_154_EVAL is RESTART_APP where no Xid 154 says more (that one is a
# finding of its own).
NVLINK5_RESOLUTIONS = (("RESET_GPU", "RESET_GPU"), ("XID_154_EVAL", "RESTART_APP"), ("IGNORE", "IGNORE"))

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
# What dcgmi diag's table calls a row that holds a message, not a result ("Warning: GPU0" in DCGM 4).
DCGM_MESSAGES = ("Warning", "Error")
DCGM_NOT_PASSED = ("Fail", "Warn", "Error")
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
NVLINK_STATUS_ARGV = ("nvlink", "-s")
# What nvidia-smi nvlink -s prints for a GPU whose links are all down, instead of a line a link.
ALL_LINKS_INACTIVE = "all links are inactive"
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


def make_finding(finding, evidence, severities, gpu=None, rating=None):
    """{id, severity, summary, evidence, action, advice, bucket, gpu, gpus}: rated by rating (severity, action,
    bucket, what it means) where the finding's own line rates it (an Xid, a DCGM message), else by FINDINGS and its
    action's bucket; the severity as severity_overrides has it, if it names the id. gpus: the GPUs it concerns (its
    gpu, the node's where it is all of theirs; none known, empty)."""
    if rating is None:
        default, action, summary = FINDINGS[finding]
        rating = (default, action, catalogue.ACTION_BUCKETS[action], summary)
    default, action, bucket, summary = rating
    return dict(id=finding, severity=severities.get(finding, default), summary=result_line(summary),
                evidence=result_line(evidence), action=action, advice=ACTIONS[action], bucket=bucket, gpu=gpu,
                gpus=[] if gpu is None else [gpu])


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


def _nvlink_status_gpu(line):
    """(index, UUID or None) of a GPU's line of `nvidia-smi nvlink -s` ("GPU 3: Tesla V100-SXM2-32GB (UUID: ...)",
    the UUID left out where a report hid it), else None."""
    gpu = _nvlink_gpu(line)
    if gpu or not line.startswith("GPU "):
        return gpu
    index, colon, _rest = line[4:].partition(": ")
    return (index, None) if colon and bounded_int(index) is not None else None


def _nvlink_link(line):
    """(link, GB/s, or None for an inactive link) of a link's line of `nvidia-smi nvlink -s` ("Link 3: 26.562 GB/s",
    "Link 5: <inactive>"), else None."""
    line = line.strip()
    if not line.startswith("Link "):
        return None
    link, colon, state = line[len("Link "):].partition(": ")
    if not colon or bounded_int(link) is None:
        return None
    if state.strip().lower() == "<inactive>":
        return link, None
    speed = _number(state) if state.endswith(" GB/s") else None
    return None if speed is None else (link, speed)


def parse_nvlink_status(text, reading=None):
    """[{index, uuid, inactive: [link], speeds: {link: GB/s}, all_inactive}] of `nvidia-smi nvlink -s`, one per GPU
    it lists (index and uuid None for the lines before the first), the first MAX_GPUS GPUs and NVLINK_COUNTERS links
    of each. all_inactive: nvidia-smi printed that all of its links are inactive. reading (a Reading) bounds what is
    read and says what was cut."""
    source = "nvidia-smi nvlink -s"
    reading = reading or Reading()
    found, current, listed, more = [], None, 0, 0
    for line in reading.lines(_text_lines(reading.text(text, source, NVLINK_CHARS)), source, NVLINK_LINES):
        gpu = _nvlink_status_gpu(line)
        if gpu:
            listed += 1
            current = dict(index=int(gpu[0]), uuid=gpu[1], inactive=[], speeds={}, all_inactive=False)
            found.extend([current] if listed <= MAX_GPUS else [])
            current = current if listed <= MAX_GPUS else None
            continue
        if current is None and listed:
            continue
        if current is None:
            current = dict(index=None, uuid=None, inactive=[], speeds={}, all_inactive=False)
            found.append(current)
        if ALL_LINKS_INACTIVE in line.lower():
            current["all_inactive"] = True
            continue
        link = _nvlink_link(line)
        if link and len(current["inactive"]) + len(current["speeds"]) == NVLINK_COUNTERS:
            more += 1
        elif link and link[1] is None:
            current["inactive"].append(link[0])
        elif link:
            current["speeds"][link[0]] = link[1]
    if listed > MAX_GPUS:
        reading.note("%s: %d GPUs listed, the first %d read" % (source, listed, MAX_GPUS))
    if more:
        reading.note("%s: %d link(s) past the first %d of a GPU, not read" % (source, more, NVLINK_COUNTERS))
    return [entry for entry in found if entry["index"] is not None or entry["all_inactive"] or entry["inactive"]
            or entry["speeds"]]


def _nvlink_status_findings(status, gpus, severities):
    """(findings of a GPU of the list, by its index in it; the node's findings) of nvidia-smi nvlink -s: each inactive
    link, and each link slower than the node's fastest. nvidia-smi's "all links are inactive" is a finding only on a
    node whose GPUs have NVLink: one that lists a link's speed, or a GPU that belongs to an NVSwitch fabric (a GPU
    without NVLink may print the same)."""
    by_uuid = dict((gpu.facts["uuid"], index) for index, gpu in enumerate(gpus) if gpu.facts["uuid"])
    fastest = max([speed for entry in status for speed in entry["speeds"].values()] or [0])
    has_nvlink = fastest > 0 or any(gpu.facts["fabric_state"] for gpu in gpus)
    owned, node = {}, []
    for entry in status:
        index = by_uuid.get(entry["uuid"], entry["index"] if entry["uuid"] is None else None)
        index = index if index is not None and index < len(gpus) else None
        name = "GPU %s" % entry["index"] if entry["index"] is not None else "nvidia-smi nvlink -s"
        inactive = ["%s Link %s: <inactive>" % (name, link) for link in entry["inactive"]]
        if entry["all_inactive"] and has_nvlink:
            inactive.append("%s: all links are inactive" % name)
        slow = ["%s Link %s: %s GB/s of the node's %s GB/s" % (name, link, _speed(speed), _speed(fastest))
                for link, speed in sorted(entry["speeds"].items(), key=lambda item: int(item[0]))
                if speed < fastest]
        gpu = None if index is None else gpus[index].facts["bus_id"]
        for finding, lines in (("nvlink_inactive", inactive), ("nvlink_slow", slow)):
            if lines:
                found = make_finding(finding, "; ".join(lines), severities, gpu)
                (node if index is None else owned.setdefault(index, [])).append(found)
    return owned, node


def _speed(gb_per_s):
    return ("%.3f" % gb_per_s).rstrip("0").rstrip(".")


def _dcgm_section(line):
    """The name of a section line of `dcgmi diag`'s table ("+-----  Hardware  ----------+---...+"), else None."""
    if line[:1] not in "+|" or not line[1:6] == "-----":
        return None
    return line[1:].split("+", 1)[0].split("|", 1)[0].strip("- ") or None


def _dcgm_result(cell):
    """(result, detail) of a result's cell ("Fail - GPU: 0", "Pass", DCGM 4's "Not Run"), else None."""
    result = cell.strip()
    if result == "Not Run":
        return "Skip", result
    word, after = result[:4], result[4:5]
    if word not in DCGM_RESULTS or after.isalnum() or after == "_":
        return None
    return word, result[4:].strip(" -")


def _dcgm_cell_text(cell):
    """(text, whole) of a cell of a message: dcgmi pads each piece of a wrapped message to the column (a space
    before, two after), so that a piece that fills it is joined to the next as it is (whole), without a space."""
    if len(cell) > 3 and cell.startswith(" ") and cell.endswith("  "):
        return cell[1:-2], True
    return cell.strip(), False


def _dcgm_message(result, text, joined):
    """result with text added to its message (DCGM's words of what failed): joined to the message's last piece
    where that filled its cell, after a space otherwise."""
    message = result.get("warning")
    if message is None:
        result["warning"] = text
    elif len(message) <= RESULT_LINE_BYTES:
        # Past what a result shows, more of it would only be cut again.
        result["warning"] = message + (text if joined else " " + text)


def parse_dcgm_diag(text, reading=None):
    """[{test, result, detail, warning}] of `dcgmi diag`'s table, the first DCGM_ROWS results.

    A result's row carries its test's name, or leaves it empty for the next group of GPUs of the same test (DCGM 3's
    "| | Fail - GPU: 0 |"): the test is the last one named. DCGM 4 lists each GPU below its test ("GPU0: Fail"):
    those not passed go into the test's detail. A "Warning" or "Error" row (DCGM 4: "Warning: GPU0") and its wrapped
    lines are the message (warning) of the result above it when that one did not pass; else (an Error row of a
    deployment check) a result of its own, of result Error (Warn for a Warning). reading (a Reading) bounds what is
    read and says what was cut."""
    source = "dcgmi diag"
    reading = reading or Reading()
    # last: the result a message belongs to, None before the first, False after a result past DCGM_ROWS; joined:
    # whether the message's last piece filled its cell, None outside a message.
    results, more, last, joined, section, test = [], 0, None, None, None, None
    for line in reading.lines(_text_lines(reading.text(text, source, DCGM_CHARS)), source, DCGM_LINES):
        line = line.strip()
        named = _dcgm_section(line)
        if named:
            section, test, last, joined = named, None, None, None
            continue
        cells = line.split("|", 3)
        if len(cells) < 3 or cells[0]:
            continue
        name, cell, closed = cells[1].strip(), cells[2], len(cells) == 4
        kind = name.split(":", 1)[0].strip()
        if not name and joined is not None and last:
            piece, whole = _dcgm_cell_text(cell)
            if piece:
                _dcgm_message(last, piece, joined)
                joined = whole
            continue
        if kind in DCGM_MESSAGES:
            if not closed or last is False:
                continue
            piece, whole = _dcgm_cell_text(cell)
            if not (last and last["result"] in DCGM_NOT_PASSED):
                if len(results) == DCGM_ROWS:
                    more, last, joined = more + 1, False, None
                    continue
                last = dict(test=test or section or source, result="Warn" if kind == "Warning" else "Error",
                            detail="")
                results.append(last)
            elif last.get("warning"):
                last["warning"] += ";"
            _dcgm_message(last, piece, False)
            joined = whole
            continue
        entity, _colon, entity_result = cell.strip().partition(": ")
        if not name and last and entity.startswith("GPU") and _dcgm_result(entity_result):
            if _dcgm_result(entity_result)[0] in DCGM_NOT_PASSED and len(last["detail"]) <= RESULT_LINE_BYTES:
                last["detail"] = "%s, %s" % (last["detail"], entity) if last["detail"] else entity
            continue
        row = _dcgm_result(cell) if closed else None
        if row is None:
            continue
        test, joined = name or test, None
        if len(results) == DCGM_ROWS:
            more, last = more + 1, False
            continue
        last = dict(test=test or source, result=row[0], detail=row[1])
        results.append(last)
    if more:
        reading.note("%s: %d rows, the first %d read" % (source, len(results) + more, DCGM_ROWS))
    for result in results:
        result.update((key, result_line(result[key]).strip()) for key in ("test", "detail", "warning")
                      if key in result)
    return results


def _dcgm_format(text):
    """The parts of a printf format of DCGM's: ("", literal without whitespace) and (conversion, "") for each
    placeholder ("u", "f", "s", ...)."""
    parts, literal, at = [], [], 0
    while at < len(text):
        if text[at] != "%":
            literal.append(text[at])
            at += 1
            continue
        end = at + 1
        while end < len(text) and text[end] in "#-+ .0123456789hlLqjzt":
            end += 1
        conversion = text[end:end + 1]
        if conversion == "%":
            literal.append("%")
        else:
            parts.append(("", "".join("".join(literal).split())))
            parts.append((conversion, ""))
            literal = []
        at = end + 1
    parts.append(("", "".join("".join(literal).split())))
    return [part for part in parts if part != ("", "")]


# Each DCGM message format: (code's name, DCGM's severity, its parts, its longest literal).
DCGM_FORMATS = tuple(
    (name, severity, parts, max([literal for _kind, literal in parts] or [""], key=len))
    for name, severity, formats in catalogue.DCGM_ERRORS for parts in [_dcgm_format(each) for each in formats])
# What each conversion may print: integers (a sign for %d), hexadecimal, floating point.
DCGM_NUMBER_CHARACTERS = dict([(conversion, frozenset("0123456789")) for conversion in "ui"]
                              + [("d", frozenset("-0123456789")), ("x", frozenset("0123456789abcdefABCDEFx")),
                                 ("f", frozenset("-0123456789.")), ("e", frozenset("-+0123456789.eE"))])
# Where a message may start in the text: DCGM prefixes each with its GPU ("GPU 0GPU 0's NvLink link 0 is ...").
DCGM_MATCH_TRIES = 8


def _dcgm_values(message, parts):
    """The values a message (without whitespace) printed in a format's placeholders, where it holds the format
    (whatever came before its first literal); else None."""
    first = next(index for index, part in enumerate(parts) if not part[0])
    start, tries = 0, 0
    while tries < DCGM_MATCH_TRIES:
        at = message.find(parts[first][1], start)
        if at < 0:
            return None
        values = _dcgm_values_at(message, at, parts[first:])
        if values is not None:
            return values
        start, tries = at + 1, tries + 1
    return None


def _dcgm_values_at(message, at, parts):
    values = []
    for index, (conversion, literal) in enumerate(parts):
        if not conversion:
            if not message.startswith(literal, at):
                return None
            at += len(literal)
            continue
        following = parts[index + 1][1] if index + 1 < len(parts) else ""
        end = message.find(following, at + (conversion != "s")) if following else len(message)
        allowed = DCGM_NUMBER_CHARACTERS.get(conversion)
        if end < 0:
            return None
        if allowed is not None and not following:
            end = at
            while end < len(message) and message[end] in allowed:
                end += 1
        value = message[at:end]
        if allowed is not None and (not value or not all(character in allowed for character in value)):
            return None
        values.append(value)
        at = end
    return values


def _dcgm_rating(message, without_nvlink=False):
    """(severity, bucket, what DCGM rates it) of a DCGM result's message by the DCGM_FR_* formats it holds, worst
    first; None where it holds none. No fault, whatever DCGM's severity: a targeted power test that missed its target
    by less than catalogue.TARGET_POWER_MISS_W, and NVLink down on a node without NVLink (without_nvlink)."""
    text = "".join((message or "").split())
    matched = []
    for name, severity, parts, longest in DCGM_FORMATS:
        if name in [each[0] for each in matched] or longest not in text:
            continue
        values = _dcgm_values(text, parts)
        if values is None:
            continue
        said = severity
        if name == catalogue.TARGET_POWER_CODE and _power_miss(values) < catalogue.TARGET_POWER_MISS_W:
            severity, said = "CONFIG", "%s; missed by less than %g W: no fault" % (said, catalogue.TARGET_POWER_MISS_W)
        elif name == catalogue.NVLINK_DOWN_CODE and without_nvlink:
            severity, said = "CONFIG", "%s; the GPUs have no NVLink: no fault" % said
        matched.append((name, severity, said))
    if not matched:
        return None
    matched.sort(key=lambda each: catalogue.DCGM_ORDER.index(each[1]))
    severity, bucket = catalogue.DCGM_SEVERITIES[matched[0][1]]
    return severity, bucket, ", ".join("%s (%s)" % (name, said) for name, _severity, said in matched)


def _power_miss(values):
    """Watts a targeted power test's "Max power of %.1f did not reach desired power minimum %s of %.1f" missed by;
    infinity where its numbers cannot be read."""
    reached, target = _number(values[0]), _number(values[2]) if len(values) > 2 else None
    return float("inf") if reached is None or target is None else target - reached


def _gpu_numbers(text):
    """The GPU ids DCGM names in text ("GPU: 0", "GPUs: 1, 2", "GPU0", "GPU 3 has ..."), in order, once each."""
    numbers, start = [], 0
    head, colon, listed = text.partition(":")
    if colon and head.strip() == "GPUs":
        return [int(each) for each in listed.replace(",", " ").split()[:MAX_GPUS] if bounded_int(each) is not None]
    while len(numbers) < MAX_GPUS:
        at = text.find("GPU", start)
        if at < 0:
            break
        digits = text[at + 3:at + 16].lstrip(": ")
        end = 0
        while end < min(len(digits), NUMBER_DIGITS) and digits[end] in "0123456789":
            end += 1
        if end and int(digits[:end]) not in numbers:
            numbers.append(int(digits[:end]))
        start = at + 3
    return numbers


def _dcgm_findings(results, gpus, rc, severities, without_nvlink=False):
    """The findings of a DCGM diagnostic: each result not passed, rated by DCGM's severity of its message where it
    holds one of DCGM's (else Fail and Error unhealthy, Warn degraded; without_nvlink: nvidia-smi showed the node
    has no NVLink), with the GPUs it names (DCGM numbers them as nvidia-smi does); and dcgmi's exit status where it
    says more than the table (DCGM exits 205 when a result is one to isolate the GPU for, 226 for any other
    error)."""
    findings = []
    for result in results:
        if result["result"] not in DCGM_NOT_PASSED:
            continue
        finding = "dcgm_diag_warning" if result["result"] == "Warn" else "dcgm_diag_failed"
        default, action, summary = FINDINGS[finding]
        evidence = ("%s: %s %s" % (result["test"], result["result"], result["detail"])).strip()
        if result.get("warning"):
            evidence = "%s; %s" % (evidence, result["warning"])
        rated = _dcgm_rating(result.get("warning"), without_nvlink)
        rating = (default, action, catalogue.ACTION_BUCKETS[action], summary)
        if rated:
            rating = (rated[0], action, rated[1], "%s; DCGM rates it %s" % (summary, rated[2]))
        found = make_finding(finding, evidence, severities, rating=rating)
        named = gpus if result["detail"] == "All" else [
            gpus[number] for number in _gpu_numbers(result["detail"]) or _gpu_numbers(result.get("warning") or "")
            if number < len(gpus)]
        found["gpus"] = [gpu["bus_id"] for gpu in named]
        findings.append(found)
    if rc is not None and rc > 0 and results and not findings:
        name, severity = catalogue.DCGM_EXIT_STATUSES.get(rc, ("an error", "degraded"))
        default, action, summary = FINDINGS["dcgm_diag_exit_status"]
        findings.append(make_finding("dcgm_diag_exit_status", "dcgmi diag exit status %d (%s)" % (rc, name),
                                     severities, rating=(severity, action, catalogue.ACTION_BUCKETS[action], summary)))
    return findings


def _registers(detail):
    """The hex values an Xid line prints in its last parentheses ("(0x0, 0x0, 0x10000, ...)", "(0x026001c6
    0x00000000 ...)"), None where they are not all hex numbers (a report that hid them)."""
    start = detail.rfind("(")
    end = detail.find(")", start)
    if start < 0 or end < 0:
        return None
    values = detail[start + 1:end].replace(",", " ").split()
    if len(values) < 2 or not all(value[:2] == "0x" and 2 < len(value) <= 18 and not value[2:].strip(HEX_DIGITS)
                                  for value in values):
        return None
    return [int(value[2:], 16) for value in values]


def _worse(one, other):
    """The worse of two severities."""
    return one if SEVERITIES.index(one) <= SEVERITIES.index(other) else other


def _rate_xid_74(detail):
    """Xid 74's rating by the register bits NVIDIA documents (catalogue.XID_74_BITS)."""
    registers = _registers(detail)
    if registers is None:
        return "unhealthy", "check_nvlink", "WORKFLOW_NVLINK_ERR", "its registers could not be read"
    documented = dict(((index, bit), level) for index, bits, level in catalogue.XID_74_BITS for bit in bits)
    worst, said = None, []
    for index in sorted(set(index for index, _bits, _level in catalogue.XID_74_BITS)):
        for bit in range(32):
            if index < len(registers) and registers[index] >> bit & 1:
                level = documented.get((index, bit), "unhealthy")
                worst = level if worst is None else _worse(worst, level)
                said.append("register %d bit %d: %s" % (index + 1, bit, level))
    if worst is None:
        return "unhealthy", "check_nvlink", "WORKFLOW_NVLINK_ERR", "no register bit NVIDIA documents is set"
    return worst, "check_nvlink", "WORKFLOW_NVLINK_ERR", "NVIDIA's decode of its registers: " + ", ".join(said)


def _has_bits(value, mask_bits):
    return value & mask_bits[0] == mask_bits[1]


def _rate_nvlink5(number, detail):
    """An Xid 144-150's rating by NVIDIA's decode of its sub-component, intrInfo and errorStatus
    (catalogue.NVLINK5_DECODE); by its own Fatal or Nonfatal where no row matches."""
    words = detail.split(None, 2)
    registers = _registers(detail) or []
    matched = []
    for xid, names, before, since, statuses, resolution, _severity, second in catalogue.NVLINK5_DECODE:
        if xid != number or len(registers) < 2 or (statuses is not None and registers[1] not in statuses):
            continue
        # A row's second action has intrInfo bits of its own (a bit its first pattern wants clear).
        if second is not None and (_has_bits(registers[0], second[0]) or _has_bits(registers[0], second[1])):
            resolution = "RESET_GPU"
        elif not (_has_bits(registers[0], before) or _has_bits(registers[0], since)):
            continue
        matched.append((bool(words) and words[0] in names, resolution))
    resolutions = [resolution for named, resolution in matched if named] or [resolution for _n, resolution in matched]
    for resolution, bucket in NVLINK5_RESOLUTIONS:
        if resolution in resolutions:
            severity, action = catalogue.BUCKET_RATINGS[bucket]
            return severity, action, bucket, "NVIDIA's NVLink5 decode of intrInfo 0x%08x, errorStatus 0x%08x: %s" % (
                registers[0], registers[1], resolution)
    fatal = words[1] if len(words) > 1 else ""
    severity = "degraded" if fatal == "Nonfatal" else "unhealthy"
    return severity, "check_nvlink", "WORKFLOW_NVLINK5_ERR", "no row of NVIDIA's NVLink5 decode matches its line; " \
        "the driver calls it %s" % (fatal or "neither Fatal nor Nonfatal")


def _rate_recovery_action(detail):
    """An Xid 154's rating by the GPU recovery action it announces ("... to 0x2 (Node Reboot Required)")."""
    at = detail.find(" to 0x")
    digits = detail[at + len(" to 0x"):at + len(" to 0x") + 8] if at >= 0 else ""
    end = 0
    while end < len(digits) and digits[end] in HEX_DIGITS:
        end += 1
    value = int(digits[:end], 16) if end else None
    name, bucket, severity, action = catalogue.RECOVERY_ACTIONS.get(value, catalogue.UNKNOWN_RECOVERY_ACTION)
    return severity, action, bucket, "the GPU's recovery action is now %s" % (
        name if value is not None else "not readable in its line")


def _rate_xid(event, earlier):
    """(severity, action, bucket, why) of an Xid as NVIDIA's catalogue rates its line; earlier: the Xids the same GPU
    logged before it."""
    number, detail = event["xid"], event["detail"]
    if number == 45:
        cause = detail.find(catalogue.XID_45_CAUSE)
        cause = bounded_int(detail[cause + len(catalogue.XID_45_CAUSE):].split(" ", 1)[0]) if cause >= 0 else None
        before = [xid for xid in earlier if xid != 45]
        if cause is not None or before:
            return "info", "none", "IGNORE", "not solo: it follows Xid %d of this GPU, whose rating applies" % (
                before[0] if cause is None else cause)
        return XID_FINDINGS[45] + ("solo: no other Xid of this GPU came before it",)
    if number == 74:
        return _rate_xid_74(detail)
    if number == 154:
        return _rate_recovery_action(detail)
    if XID_FINDINGS.get(number, catalogue.UNKNOWN_XID)[2] == "WORKFLOW_NVLINK5_ERR":
        return _rate_nvlink5(number, detail)
    return XID_FINDINGS.get(number, catalogue.UNKNOWN_XID) + (None,)


def _xid_summary(number, why):
    """What an Xid means (kernel_log's words for the common ones, the catalogue's for the others) and why it is rated
    as it is."""
    mnemonic, description, _bucket = catalogue.XIDS.get(number, (None, None, None))
    meaning = XID_MEANINGS.get(number, (None,))[0] or (
        "NVIDIA Xid %d, %s (%s)" % (number, description, mnemonic) if mnemonic else
        "NVIDIA Xid %d, which NVIDIA's Xid catalogue (%s) does not list" % (number, catalogue.XID_CATALOGUE_VERSION))
    return "%s; %s" % (meaning, why) if why else meaning


def _xid_findings(xids, severities):
    """One finding for each Xid number, GPU and rating, the first line its evidence, count the lines."""
    seen, findings, earlier = {}, [], {}
    for event in xids:
        device = pci_key(event["device"])
        severity, action, bucket, why = _rate_xid(event, earlier.setdefault(device, []))
        earlier[device].append(event["xid"])
        key = (device, event["xid"], bucket, severity)
        if key in seen:
            seen[key]["count"] += 1
            continue
        finding = make_finding("xid_%d" % event["xid"], event["line"], severities, device,
                               rating=(severity, action, bucket, _xid_summary(event["xid"], why)))
        finding["count"] = 1
        seen[key] = finding
        findings.append(finding)
    return findings


def _node_wide(gpus, severities):
    """The node's findings of NODE_WIDE that every GPU of it has (of two or more), taken off the GPUs."""
    found = []
    for finding, own in NODE_WIDE if len(gpus) > 1 else ():
        each = [next((item for item in gpu.findings if item["id"] == finding), None) for gpu in gpus]
        if None in each:
            continue
        for gpu, item in zip(gpus, each):
            gpu.findings = [other for other in gpu.findings if other is not item]
        evidences = [item["evidence"] for item in each]
        evidence = "all %d GPUs: %s" % (len(gpus), evidences[0]) if len(set(evidences)) == 1 else "; ".join(
            "GPU %d: %s" % (gpu.facts["index"], item) for gpu, item in zip(gpus, evidences))
        default, action, summary = FINDINGS[finding]
        node = make_finding(finding, evidence, severities, rating=(own[0], action, own[1], own[2]) if own else (
            default, action, catalogue.ACTION_BUCKETS[action], "%s, on every GPU of the node" % summary))
        node["gpus"] = [gpu.facts["bus_id"] for gpu in gpus]
        found.append(node)
    return found


def verdict_of(findings):
    """unhealthy, degraded or healthy: the worst of the findings' severities."""
    severities = set(finding["severity"] for finding in findings)
    return next((VERDICT_OF[severity] for severity in SEVERITIES if severity in severities), "healthy")


def assess(state, message, details, nvlink="", kernel_lines=None, dcgm_results=None, severity_overrides=None,
           fabric=None, reading=None, nvlink_status=None, dcgm_rc=None):
    """The node's health from what the commands printed.

    state, message: nvidia_smi.state_of() of `nvidia-smi -q` and what it said; details: its output; nvlink,
    nvlink_status: the output of `nvidia-smi nvlink -e` and `-s` (the latter None where it was not read);
    kernel_lines: the kernel log's lines since boot,
    None when it was not read; dcgm_results: parse_dcgm_diag() of `dcgmi diag`'s output, None when it did not run, and
    dcgm_rc its exit status (None when not known); fabric: pcie_fabric.observe() of the PCIe fabric between the GPUs,
    None when it was not read; reading: the Reading that bounds the parsing and says what was cut (a fresh one,
    without a deadline, when not given)."""
    reading = reading or Reading()
    return _assess(state, message, parse_details(details, reading) if state == "ok" else [], dict(
        nvlink=nvlink, nvlink_status=nvlink_status, kernel_lines=kernel_lines, dcgm_results=dcgm_results,
        dcgm_rc=dcgm_rc, fabric=fabric), severity_overrides, reading)


def _worst(findings, limit):
    """The ids (id()) of the limit worst findings."""
    rank = dict((severity, index) for index, severity in enumerate(SEVERITIES))
    order = sorted(range(len(findings)), key=lambda index: (rank[findings[index]["severity"]], index))
    return set(id(findings[index]) for index in order[:limit])


def _assess(state, message, parsed, outputs, severity_overrides, reading):
    """assess() of parse_details()'s GPUs and the other outputs (assess()'s arguments of the same names)."""
    severities = dict(severity_overrides or {})
    gpus = []
    for index, each in enumerate(parsed):
        gpu = _Gpu(each, index, severities)
        for check in CHECKS:
            check(gpu)
        gpus.append(gpu)
    node_findings = _node_wide(gpus, severities)
    nvlink_errors = parse_nvlink_errors(outputs["nvlink"] or "", reading)
    for gpu in gpus:
        if gpu.value("gpu uuid") in nvlink_errors:
            gpu.add("nvlink_errors", "; ".join(nvlink_errors[gpu.value("gpu uuid")]))
    status = parse_nvlink_status(outputs["nvlink_status"] or "", reading)
    owned, unlisted = _nvlink_status_findings(status, gpus, severities)
    for index, found in owned.items():
        gpus[index].findings.extend(found)
    node_findings.extend(unlisted)
    events = kernel_events(reading.lines(outputs["kernel_lines"] or [], "the kernel log", KERNEL_LINES))
    by_device = dict((pci_key(gpu.facts["bus_id"]), gpu) for gpu in gpus)
    for finding in _xid_findings(events["xids"], severities):
        owner = by_device.get(finding["gpu"])
        if owner is None:
            node_findings.append(finding)  # a GPU that fell off the bus is no longer in nvidia-smi's list
        else:
            finding["gpu"] = owner.facts["bus_id"]
            finding["gpus"] = [finding["gpu"]]
            owner.findings.append(finding)
    # nvidia-smi nvlink -s read and empty, and no GPU of an NVSwitch fabric: the node has no NVLink.
    without_nvlink = outputs["nvlink_status"] is not None and not status and not any(
        gpu.facts["fabric_state"] for gpu in gpus)
    node_findings.extend(_dcgm_findings(outputs["dcgm_results"] or [], [gpu.facts for gpu in gpus],
                                        outputs["dcgm_rc"], severities, without_nvlink))
    fabric, fabric_summary = outputs["fabric"], None
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
    nvlink_status = None
    if state == "ok":
        rc, out, _err = command([nvidia_smi] + list(NVLINK_STATUS_ARGV))
        # What a failed nvidia-smi nvlink -s printed says nothing of the links.
        nvlink_status = out if rc == 0 else None
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
    health = _assess(state, message, parsed, dict(
        nvlink=nvlink, nvlink_status=nvlink_status, kernel_lines=lines, dcgm_results=dcgm and dcgm["results"],
        dcgm_rc=dcgm and dcgm["rc"], fabric=fabric), options["severity_overrides"], reading)
    health.update(kernel_log=kernel, dcgm_diag=dcgm)
    return health


def assess_evidence(evidence, severity_overrides=None, deadline=None):
    """The node's health from its saved outputs: evidence is gpu_evidence.read_evidence()'s {path, inputs (by
    command, the kernel log's as lines), found, missing, cut}; what it found is assessed as gather() assesses a live
    host's outputs, without the PCIe fabric (a saved bundle holds no sysfs tree) or dcgmi's exit status."""
    reading = Reading(deadline)
    for said in evidence["cut"]:
        reading.note(said)
    inputs = evidence["inputs"]
    details = inputs.get("nvidia-smi -q")
    if details is None:
        state, message, parsed = "not_in_evidence", "the evidence holds no output of nvidia-smi -q", []
    else:
        details = reading.text(details, "nvidia-smi -q", DETAILS_CHARACTERS)
        state = state_of(0, details)
        message = "" if state == "ok" else _said(details, "")
        parsed = parse_details(details, reading) if state == "ok" else []
    dcgm = inputs.get("dcgmi diag")
    results = None if dcgm is None else parse_dcgm_diag(dcgm, reading)
    lines = inputs.get("the kernel log")
    health = _assess(state, message, parsed, dict(
        nvlink=inputs.get("nvidia-smi nvlink -e"), nvlink_status=inputs.get("nvidia-smi nvlink -s"),
        kernel_lines=lines, dcgm_results=results, dcgm_rc=None, fabric=None), severity_overrides, reading)
    health.update(
        kernel_log=dict(read=lines is not None, source=evidence["sources"].get("the kernel log"),
                        problem=None if lines is not None else "the evidence holds no kernel log"),
        dcgm_diag=None if results is None else dict(level=None, rc=None, results=results, problem=None if results
                                                    else "the saved dcgmi diag output holds no result"),
        evidence=dict(path=evidence["path"], found=evidence["found"], missing=evidence["missing"]))
    return health
