# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The PCIe fabric between a node's GPUs, for PCIe-only boxes: the part of gpu_health that tells a fabric on which
NCCL hangs, crawls or falls back from one on which the GPUs reach each other directly.

It reads, without lspci (not installed on every host):
- each NVIDIA GPU's path up to its root port, from sysfs (/sys/bus/pci/devices/*, vendor 0x10de, class 0x03xxxx,
  the parent chain of the resolved device path), and for each bridge on it the ACS Control register of the ACS
  extended capability (ID 0x000D, control at +6) in /sys/bus/pci/devices/<bdf>/config. The kernel gives a reader
  without root (CAP_SYS_ADMIN) the first 64 bytes of that file only, and 256 where the platform gives no access to
  the extended space: ACS is then "unknown", never a finding;
- the IOMMU: /proc/cmdline, /sys/kernel/iommu_groups and each GPU's group and its type (DMA and DMA-FQ translate,
  identity passes DMA through);
- where nvidia-smi lists more than one GPU, `nvidia-smi topo -p2p r` and `w` (the driver's peer-to-peer status of
  each pair) and `nvidia-smi topo -m` (how each pair is linked: PIX, PXB, PHB, NODE, SYS or NV#).

Bounded reads (a configuration space is 4096 bytes at most) of files that belong to the kernel (sysfs, /proc), and of
nvidia-smi's tables (nvidia_smi.table_rows: what was not read is one of the fabric's problems); text of either
reaches a result only cleaned of terminal sequences and control characters. Pure functions over what was read, so
that recorded and fake trees test them. The findings' severities and actions are gpu_health's data (FINDINGS); what
each one rests on:
- NCCL's troubleshooting, "PCI Access Control Services (ACS)":
  https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs
  (IO virtualization, VT-d or IOMMU, "can interfere with GPU Direct by redirecting all PCI point-to-point traffic
  to the CPU root complex, causing a significant performance reduction or even a hang"; ACS on PCI switches "needs
  to be disabled", in the BIOS or with `setpci -s <bridge> ECAP_ACS+0x6.w=0000` after each boot), and its GPU
  troubleshooting page, https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/
  gpu_troubleshooting.html (`nvidia-smi topo -p2p` prints each pair's peer-to-peer status; ACS is "one common
  cause" when NCCL's peer-to-peer fails although it shows OK);
- NVIDIA/nccl issue 2079 (https://github.com/NVIDIA/nccl/issues/2079): ncclAllReduce spins forever on two PCIe
  GPUs whose root ports had ACSCtl 0x001d (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+); NCCL_P2P_DISABLE=1
  avoids the hang, clearing ACS fixes it;
- the CUDA programming guide, "Host IOMMU Hardware, PCI Access Control Services, and VMs",
  https://docs.nvidia.com/cuda/cuda-programming-guide/03-advanced/multi-gpu-systems.html, and NVIDIA's "PCIe
  Multi-GPU Systems" pages (https://docs.nvidia.com/nim/maxine/lipsync/latest/advanced-usage/multi-gpu.html):
  "on bare-metal Linux systems with PCIe topology, IOMMU-enabled peer-to-peer memory copy is not supported";
  NVIDIA recommends the IOMMU in passthrough (`iommu=pt`);
- which ACS bits redirect peer traffic: Linux's pci_bridge_has_acs_redir() (drivers/pci/p2pdma.c) counts P2P
  Request Redirect, P2P Completion Redirect and P2P Egress Control; the bits' names are lspci's;
- the P2P matrix's codes: the legend `nvidia-smi topo -p2p` prints (OK, CNS chipset not supported, GNS GPU not
  supported, TNS topology not supported, NS not supported, DR disabled by regkey, U unknown); NCCL_P2P_DISABLE
  "disables the peer to peer (P2P) transport" (NCCL's environment variables), NCCL then goes through host memory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os
import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import FileRefused, read_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import printable_text, result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import (
    first_gpus,
    gpu_index,
    one_line,
    parse_topology,
    room_for,
    table_rows,
)

SYSFS = "/sys"
PROC = "/proc"
NVIDIA_VENDOR = 0x10DE
DISPLAY_CLASS = 0x03  # the base class of a VGA (0x0300) or 3D (0x0302) controller
NVIDIA_DRIVER = "nvidia"
# The most of a sysfs attribute read: a vendor, class or group type is one short line.
ATTRIBUTE_BYTES = 64
# A vendor or class attribute: a hexadecimal number of 32 bits at most ("0x10de", "0x030200").
HEX_ATTRIBUTE = re.compile(r"(?:0[xX])?[0-9a-fA-F]{1,8}")
CMDLINE_BYTES = 4096
# A function's configuration space, at most (PCI Express); the first 256 bytes are the conventional space.
CONFIG_SPACE_BYTES = 4096
CONVENTIONAL_BYTES = 256
UNPRIVILEGED_BYTES = 64
EXTENDED_START = 0x100
STATUS, STATUS_CAP_LIST, CAP_POINTER = 0x06, 0x10, 0x34
PCIE_CAPABILITY = 0x10
ACS_CAPABILITY = 0x000D
ACS_CONTROL = 6
# The ACS Control register's bits, as lspci names them.
ACS_BITS = (("SrcValid", 0x01), ("TransBlk", 0x02), ("ReqRedir", 0x04), ("CmpltRedir", 0x08),
            ("UpstreamFwd", 0x10), ("EgressCtrl", 0x20), ("DirectTrans", 0x40))
ACS_ALL = 0x7F
# The bits that send peer-to-peer traffic up to the root complex instead of across the switch.
ACS_REDIRECT = 0x04 | 0x08 | 0x20
# PCI Express Capabilities register, bits 7:4.
PORT_TYPES = {0: "endpoint", 1: "legacy endpoint", 4: "root port", 5: "switch upstream port",
              6: "switch downstream port", 7: "PCIe-to-PCI bridge", 8: "PCI-to-PCIe bridge",
              9: "root complex integrated endpoint", 10: "root complex event collector"}
BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
# One flag of lspci's ACSCtl line ("ReqRedir+"); the register has 16 bits, so a line of more flags is none of lspci's.
ACS_FLAG = re.compile(r"\w+[+-]")
ACS_FLAGS = 16
# IOMMU group types (/sys/kernel/iommu_groups/N/type): the DMA ones translate each device's DMA addresses.
TRANSLATING = ("DMA", "DMA-FQ")
PASSTHROUGH = ("identity",)
IOMMU_ARGUMENT = re.compile(r"^(?:iommu|intel_iommu|amd_iommu|iommu\.passthrough|iommu\.strict|pcie_acs_override)=")
# nvidia-smi topo -p2p's codes: OK, and those that say the driver will not do peer-to-peer (U is unknown).
P2P_OK, P2P_UNKNOWN = "OK", "U"
P2P_REFUSED = {"CNS": "chipset not supported", "GNS": "GPU not supported", "TNS": "topology not supported",
               "NS": "not supported", "DR": "disabled by regkey"}
P2P_ARGV = (("read", ("topo", "-p2p", "r")), ("write", ("topo", "-p2p", "w")))
TOPOLOGY_ARGV = ("topo", "-m")
# What a problem shows of the output of a command that printed no matrix: its first words say why.
SAID_BYTES = 200


def _read(path, limit):
    """Up to limit bytes of a file, through the collection's one reader; None where it cannot be read."""
    try:
        found = read_regular(path, limit, cut=True)
    except (OSError, FileRefused):
        return None
    return None if found is None else found["data"]


def _attribute(path):
    """A sysfs attribute's one line, as a result may show it; None where it cannot be read."""
    data = _read(path, ATTRIBUTE_BYTES)
    return None if data is None else one_line(data.decode("ascii", "replace"))


def _number(path):
    text = _attribute(path) or ""
    return int(text, 16) if HEX_ATTRIBUTE.fullmatch(text) else None


def _link_name(path):
    """The last part of where a sysfs link points (a driver's or an IOMMU group's name), as a result may show it;
    None without one."""
    try:
        return result_line(os.path.basename(os.readlink(path)))
    except OSError:
        return None


def _word(config, offset):
    return config[offset] | config[offset + 1] << 8


def _dword(config, offset):
    return _word(config, offset) | _word(config, offset + 2) << 16


def acs_flags(control):
    """The ACS Control register as lspci prints it: "SrcValid+ TransBlk- ReqRedir+ ..."."""
    return " ".join("%s%s" % (name, "+" if control & bit else "-") for name, bit in ACS_BITS)


def parse_acsctl(line):
    """The ACS Control register's value from an `lspci -vvv` ACSCtl line; None for another line."""
    _before, found, rest = line.partition("ACSCtl:")
    flags = rest.split(None, ACS_FLAGS)
    if not found or not 0 < len(flags) <= ACS_FLAGS or not all(ACS_FLAG.fullmatch(flag) for flag in flags):
        return None
    named = dict((flag[:-1], flag[-1] == "+") for flag in flags)
    return sum(bit for name, bit in ACS_BITS if named.get(name))


def port_type(config):
    """What a function is in the fabric (root port, switch upstream or downstream port, endpoint...), from the PCI
    Express capability of its conventional configuration space; None where the bytes read do not show it."""
    config = bytearray(config or b"")
    if len(config) < 0x40 or not _word(config, STATUS) & STATUS_CAP_LIST:
        return None
    pointer, seen = config[CAP_POINTER] & 0xFC, set()
    while 0x40 <= pointer <= len(config) - 4 and pointer not in seen:
        seen.add(pointer)
        if config[pointer] == PCIE_CAPABILITY:
            kind = _word(config, pointer + 2) >> 4 & 0xF
            return PORT_TYPES.get(kind, "PCI Express type %d" % kind)
        pointer = config[pointer + 1] & 0xFC
    return None


def acs_of(config):
    """{state, control, flags, redirect, offset, problem}: the ACS capability of a function, from its configuration
    space as read (bytes). state: enabled (a control bit set), disabled (none set), none (the extended capability
    list holds no ACS), or unknown when the bytes read do not reach it, with the reason as problem."""
    config = bytearray(config or b"")
    unknown = dict(state="unknown", control=None, flags=None, redirect=None, offset=None)
    if len(config) < EXTENDED_START + 4:
        if len(config) < CONVENTIONAL_BYTES:
            why = ("its configuration space reads %d bytes: the kernel gives more than %d to root only"
                   % (len(config), UNPRIVILEGED_BYTES))
        else:
            why = "its extended configuration space (past 256 bytes) cannot be read on this host"
        return dict(unknown, problem=why)
    offset, seen = EXTENDED_START, set()
    while offset:
        if offset in seen:
            return dict(unknown, problem="its extended capability list loops back to 0x%x" % offset)
        if offset + 8 > len(config):
            return dict(unknown, problem="its extended capability list runs past the %d bytes read" % len(config))
        seen.add(offset)
        header = _dword(config, offset)
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_CAPABILITY:
            control = _word(config, offset + ACS_CONTROL) & ACS_ALL
            return dict(state="enabled" if control else "disabled", control=control, flags=acs_flags(control),
                        redirect=bool(control & ACS_REDIRECT), offset=offset, problem=None)
        offset = header >> 20 & 0xFFC
        if offset and offset < EXTENDED_START:
            break
    return dict(state="none", control=None, flags=None, redirect=False, offset=None, problem=None)


def parse_cmdline(text):
    """The kernel command line's arguments that set the IOMMU (or ACS overrides), in their order, cleaned."""
    return [argument for argument in printable_text(text or "").split() if IOMMU_ARGUMENT.match(argument)]


def cmdline_mode(arguments):
    """passthrough or off as the kernel command line asks; None when it says neither."""
    values = dict(argument.split("=", 1) for argument in arguments)
    if values.get("iommu") == "pt" or values.get("iommu.passthrough") in ("1", "y", "on"):
        return "passthrough"
    if "off" in (values.get("iommu"), values.get("intel_iommu"), values.get("amd_iommu")):
        return "off"
    return None


def parse_p2p(text, problems=None):
    """{GPUi: {GPUj: code}} of `nvidia-smi topo -p2p <capability>`: OK, CNS, GNS, TNS, NS, DR or U for each pair,
    row to column; the legend and the self cells are left out. problems, a list where given, gets what of the text
    was not read (nvidia_smi.table_rows, MAX_GPUS)."""
    problems = [] if problems is None else problems
    header, columns, matrix = None, None, {}
    for cells in table_rows(text, problems):
        if cells and header is None and all(gpu_index(cell) is not None for cell in cells):
            header, columns = cells, first_gpus(cells, problems)
        elif header and cells and gpu_index(cells[0]) is not None and len(cells) == len(header) + 1:
            if room_for(matrix, cells[0], problems):
                matrix[cells[0]] = dict((peer, code) for peer, code in zip(columns, cells[1:]) if peer != cells[0])
    return matrix


def read_fabric(sysfs=SYSFS, proc=PROC):
    """What sysfs and /proc/cmdline say of the NVIDIA GPUs' PCIe paths, the bridges on them and the IOMMU:
    {gpus: [{bdf, driver, path, iommu_group, iommu_type}], bridges: {bdf: {bdf, port, acs}}, iommu: {groups,
    cmdline}, problem}. path: the bridges from the root port down to the GPU."""
    devices = os.path.join(sysfs, "bus", "pci", "devices")
    groups = os.path.join(sysfs, "kernel", "iommu_groups")
    try:
        names = sorted(name for name in os.listdir(devices) if BDF.fullmatch(name))
    except OSError as exc:
        return dict(gpus=[], bridges={}, iommu=dict(groups=None, cmdline=[]),
                    problem="%s could not be read: %s" % (devices, exc.strerror))
    gpus = []
    for name in names:
        device = os.path.join(devices, name)
        if _number(os.path.join(device, "vendor")) != NVIDIA_VENDOR:
            continue
        if (_number(os.path.join(device, "class")) or 0) >> 16 != DISPLAY_CLASS:
            continue
        chain = [part for part in os.path.realpath(device).split(os.sep) if BDF.fullmatch(part)]
        group = _link_name(os.path.join(device, "iommu_group"))
        gpus.append(dict(bdf=name, driver=_link_name(os.path.join(device, "driver")),
                         path=chain[:-1] if chain and chain[-1] == name else chain, iommu_group=group,
                         iommu_type=group and _attribute(os.path.join(groups, group, "type"))))
    bridges = {}
    for bridge in sorted(set(bridge for gpu in gpus for bridge in gpu["path"])):
        config = _read(os.path.join(devices, bridge, "config"), CONFIG_SPACE_BYTES)
        bridges[bridge] = dict(bdf=bridge, port=port_type(config), acs=acs_of(config) if config is not None else dict(
            state="unknown", control=None, flags=None, redirect=None, offset=None,
            problem="its configuration space could not be read"))
    try:
        group_count = len(os.listdir(groups))
    except OSError:
        group_count = 0
    cmdline = _read(os.path.join(proc, "cmdline"), CMDLINE_BYTES)
    return dict(gpus=gpus, bridges=bridges, problem=None, iommu=dict(
        groups=group_count, cmdline=parse_cmdline(cmdline.decode("utf-8", "replace") if cmdline else "")))


def observe(read, run, nvidia_smi, gpu_count):
    """read() (read_fabric) and, where nvidia-smi lists more than one GPU, its P2P matrices and topology through
    run(argv) -> (rc, stdout, stderr): what findings() weighs."""
    fabric = read()
    fabric.update(p2p={}, topology={}, commands=[])
    if nvidia_smi is None or gpu_count < 2:
        return fabric
    for capability, argv in P2P_ARGV:
        rc, out, err = run([nvidia_smi] + list(argv))
        cut = []
        fabric["p2p"][capability] = parse_p2p(out, cut) if rc == 0 else {}
        if rc != 0 or not fabric["p2p"][capability]:
            fabric["commands"].append("nvidia-smi %s printed no matrix (exit status %d): %s" % (
                " ".join(argv), rc, one_line(out + err, SAID_BYTES) or "nothing"))
        fabric["commands"].extend("nvidia-smi %s %s" % (" ".join(argv), line) for line in cut)
    rc, out, _err = run([nvidia_smi] + list(TOPOLOGY_ARGV))
    cut = []
    fabric["topology"] = parse_topology(out, cut)["matrix"] if rc == 0 else {}
    fabric["commands"].extend("nvidia-smi %s %s" % (" ".join(TOPOLOGY_ARGV), line) for line in cut)
    return fabric


def _key(bus_id):
    """domain:bus:device.function as sysfs writes it, from nvidia-smi's 8-digit domain."""
    parts = (bus_id or "").lower().split(":")
    return "%s:%s:%s" % (parts[0][-4:], parts[1], parts[2]) if len(parts) == 3 else (bus_id or "").lower()


def iommu_mode(fabric, gpus):
    """translating, passthrough, off or unknown: what the IOMMU does with the serving GPUs' DMA."""
    types = [gpu["iommu_type"] for gpu in gpus]
    if any(kind in TRANSLATING for kind in types):
        return "translating"
    if types and all(kind in PASSTHROUGH for kind in types):
        return "passthrough"
    if not fabric["iommu"]["groups"] and not any(gpu["iommu_group"] for gpu in gpus):
        return "off"
    return cmdline_mode(fabric["iommu"]["cmdline"]) or "unknown"


def _between(path, other):
    """The bridges on the way between two GPUs: those below the last one both paths share."""
    shared = 0
    while shared < min(len(path), len(other)) and path[shared] == other[shared]:
        shared += 1
    return path[shared:] + other[shared:]


def _iommu_evidence(fabric, gpus, names):
    groups = ", ".join("%s group %s (%s)" % (names[gpu["bdf"]], gpu["iommu_group"], gpu["iommu_type"] or "no type")
                       for gpu in gpus if gpu["iommu_group"] is not None)
    cmdline = " ".join(fabric["iommu"]["cmdline"]) or "no IOMMU argument"
    return "IOMMU groups: %s; kernel command line: %s" % (groups or "none", cmdline)


def _acs_between(fabric, serving, index, names):
    """{bridge: the GPUs below it} of the bridges between two GPUs whose ACS redirects, {bridge: why} of those whose
    ACS is not known. A pair that nvidia-smi's topology links by NVLink takes no PCIe bridge."""
    redirecting, unknown = {}, {}
    topology = fabric.get("topology") or {}
    for number, gpu in enumerate(serving):
        for peer in serving[number + 1:]:
            pair = ["GPU%d" % index[bdf] if bdf in index else None for bdf in (gpu["bdf"], peer["bdf"])]
            if None not in pair and topology.get(pair[0], {}).get(pair[1], "").startswith("NV"):
                continue
            for bridge in _between(gpu["path"], peer["path"]):
                acs = fabric["bridges"][bridge]["acs"]
                if acs["redirect"]:
                    redirecting[bridge] = [names[other["bdf"]] for other in serving if bridge in other["path"]]
                elif acs["state"] == "unknown":
                    unknown[bridge] = acs["problem"]
    return redirecting, unknown


def _p2p_refused(fabric):
    refused = []
    topology = fabric.get("topology") or {}
    for capability in ("read", "write"):
        matrix = (fabric.get("p2p") or {}).get(capability) or {}
        for gpu in sorted(matrix, key=gpu_index):
            for peer in sorted(matrix[gpu], key=gpu_index):
                code = matrix[gpu][peer]
                if code in P2P_REFUSED:
                    link = topology.get(gpu, {}).get(peer)
                    refused.append("%s %s-%s%s %s (%s)" % (
                        capability, gpu, peer, " over %s" % link if link else "", code, P2P_REFUSED[code]))
    return refused


def weigh(fabric, bus_ids):
    """{findings: [(finding id, evidence)], problems: [what was not read, and why], mode: the IOMMU's}.

    fabric: observe()'s; bus_ids: nvidia-smi's GPUs' PCI addresses in its order. Only more than one GPU bound to the
    nvidia driver makes a fabric to weigh; nvidia-smi's P2P matrix is read only where it lists more than one."""
    found, problems = [], [fabric["problem"]] if fabric.get("problem") else []
    index = dict((_key(bus_id), number) for number, bus_id in enumerate(bus_ids))
    names = dict((gpu["bdf"], "GPU %d (%s)" % (index[gpu["bdf"]], gpu["bdf"]) if gpu["bdf"] in index else gpu["bdf"])
                 for gpu in fabric["gpus"])
    serving = [gpu for gpu in fabric["gpus"] if gpu["driver"] == NVIDIA_DRIVER]
    mode = iommu_mode(fabric, serving)
    if len(serving) > 1:
        redirecting, unknown = _acs_between(fabric, serving, index, names)
        iommu = _iommu_evidence(fabric, serving, names)
        evidence = "; ".join("%s (%s, above %s) ACSCtl: %s" % (
            bridge, fabric["bridges"][bridge]["port"] or "bridge", ", ".join(redirecting[bridge]),
            fabric["bridges"][bridge]["acs"]["flags"]) for bridge in sorted(redirecting))
        if redirecting and mode == "translating":
            found.append(("pcie_acs_redirect", "%s; %s" % (evidence, iommu)))
        elif redirecting and mode in ("passthrough", "off"):
            found.append(("pcie_acs_redirect_passthrough", "%s; the IOMMU is %s (%s)" % (evidence, mode, iommu)))
        elif redirecting:
            problems.append("ACS redirects peer traffic on %s, but what the IOMMU does with it is not known (%s)"
                            % (", ".join(sorted(redirecting)), iommu))
        if unknown:
            problems.append("ACS of %d bridge(s) between the GPUs is unknown (%s): %s" % (
                len(unknown), ", ".join(sorted(unknown)), sorted(set(unknown.values()))[0]))
        if mode == "translating":
            found.append(("iommu_translating", iommu))
    refused = _p2p_refused(fabric)
    if refused:
        found.append(("p2p_not_supported", "nvidia-smi topo -p2p: " + "; ".join(refused)))
    problems.extend(fabric.get("commands") or [])
    return dict(findings=found, problems=problems, mode=mode)


def summary(fabric, mode, problems):
    """What the module returns of the fabric: the GPUs with their paths and IOMMU groups, the bridges on those
    paths with their ACS, the IOMMU's mode and arguments, the P2P matrices and links nvidia-smi printed, and what
    was not read."""
    return dict(
        gpus=[dict(gpu) for gpu in fabric["gpus"]],
        bridges=[dict(bdf=bridge["bdf"], port=bridge["port"], acs=bridge["acs"]["state"],
                      acs_control=bridge["acs"]["flags"], redirect=bridge["acs"]["redirect"])
                 for _bdf, bridge in sorted(fabric["bridges"].items())],
        iommu=dict(fabric["iommu"], mode=mode), p2p=fabric.get("p2p") or {}, links=fabric.get("topology") or {},
        problems=list(problems))
