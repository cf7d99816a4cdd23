"""The PCIe fabric between a node's GPUs (pcie_fabric, through gpu_health): ACS on the bridges between GPUs, the
IOMMU and nvidia-smi's P2P matrix. The sysfs trees are fake, built in tmp_path, but their bridges' configuration
space is a real one's (tests/data/gpu_health/lspci-vvxxx-n1sdp-plx8749-acs-excerpt.txt); the ACSCtl lines and the
P2P matrices are real outputs of public reports (tests/data/gpu_health/SOURCES.md), the H200's of tests/data/h200."""
import os
import re
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_health
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import pcie_fabric as core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import LINE_CHARACTERS, MAX_GPUS
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.preflight import (
    GPU_HEALTH_SETTING,
    gpu_health_lines,
)

DATA = Path(__file__).resolve().parents[3] / "data"
N1SDP = (DATA / "gpu_health" / "lspci-vvxxx-n1sdp-plx8749-acs-excerpt.txt").read_text()
ROOT_PORT, UPSTREAM, DOWNSTREAM_A, DOWNSTREAM_B = "0000:00:00.0", "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"
GPU_A, GPU_B = "0000:03:00.0", "0000:04:00.0"
# What nvidia-smi -q names the same GPUs.
BUS_IDS = ("00000000:03:00.0", "00000000:04:00.0")
REDIRECTING = "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
# The extended capabilities lspci names in the N1SDP excerpt, by their PCIe capability id.
EXTENDED_IDS = {"Advanced Error Reporting": 0x01, "Virtual Channel": 0x02, "Device Serial Number": 0x03,
                "Power Budgeting": 0x04, "Vendor Specific Information": 0x0B, "Access Control Services": 0x0D,
                "Transaction Processing Hints": 0x17, "Latency Tolerance Reporting": 0x18, "L1 PM Substates": 0x1E}
CAPABILITY = re.compile(r"^\tCapabilities: \[(?P<offset>[0-9a-f]+) v(?P<version>\d)\] (?P<name>.*)$")


def lspci_bridges(text):
    """{bdf: {conventional: its 256 bytes, extended: [(offset, version, id)], acs: (ACSCap line, ACSCtl line)}}."""
    bridges = {}
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        bridge = dict(conventional=bytearray(), extended=[], acs=[])
        for line in lines[1:]:
            capability = CAPABILITY.match(line)
            if capability:
                name = capability.group("name")
                number = int(name[1:], 16) if name.startswith("#") else next(
                    ident for prefix, ident in EXTENDED_IDS.items() if name.startswith(prefix))
                bridge["extended"].append((int(capability.group("offset"), 16), int(capability.group("version")),
                                           number))
            elif re.match(r"^[0-9a-f]0: ", line):
                bridge["conventional"].extend(int(cell, 16) for cell in line[4:].split())
            elif line.strip().startswith(("ACSCap:", "ACSCtl:")):
                bridge["acs"].append(line)
        assert len(bridge["conventional"]) == 256
        bridges[lines[0].split()[0]] = bridge
    return bridges


BRIDGES = lspci_bridges(N1SDP)


def put(config, offset, value, size):
    config[offset:offset + size] = value.to_bytes(size, "little")


def config_space(bdf, acs_control=None, size=core.CONFIG_SPACE_BYTES, add_acs=False):
    """The bridge's configuration space as the kernel gives root: the real 256 bytes, then its extended capability
    list at the offsets lspci printed. acs_control replaces the ACS Control register lspci printed; add_acs gives a
    bridge without one an ACS capability (for the fake root ports of a layout without a switch)."""
    bridge = BRIDGES[bdf]
    config = bytearray(core.CONFIG_SPACE_BYTES)
    config[:256] = bridge["conventional"]
    extended = list(bridge["extended"])
    if add_acs:
        extended.append((0x2a0, 1, core.ACS_CAPABILITY))
    for number, (offset, version, ident) in enumerate(extended):
        following = extended[number + 1][0] if number + 1 < len(extended) else 0
        put(config, offset, ident | version << 16 | following << 20, 4)
        if ident == core.ACS_CAPABILITY:
            printed = core.parse_acsctl(bridge["acs"][1]) if bridge["acs"] else 0
            put(config, offset + 4, 0x7F, 2)
            put(config, offset + 6, printed if acs_control is None else acs_control, 2)
    return bytes(config[:size])


class Tree(object):
    """A fake sysfs and /proc: /sys/devices/pciDDDD:BB/<bdf>/..., /sys/bus/pci/devices/<bdf> links to them, each
    GPU's driver and iommu_group links, /sys/kernel/iommu_groups/<n>/type, /proc/cmdline."""

    def __init__(self, root, cmdline=""):
        self.sys, self.proc = root / "sys", root / "proc"
        for directory in (self.sys / "bus" / "pci" / "devices", self.proc):
            directory.mkdir(parents=True)
        (self.proc / "cmdline").write_text(cmdline + "\n")

    def link(self, link, target):
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(str(target), str(link.parent)), str(link))

    def device(self, path, config=b"", vendor=0x10B5, device_class=0x060400, driver=None, group=None,
               group_type=None):
        """A PCI function at the end of path (its bridges from the root port down, then itself)."""
        directory = self.sys.joinpath("devices", "pci%s" % path[0][:7], *path)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "vendor").write_text("0x%04x\n" % vendor)
        (directory / "class").write_text("0x%06x\n" % device_class)
        (directory / "config").write_bytes(config)
        self.link(self.sys / "bus" / "pci" / "devices" / path[-1], directory)
        if driver:
            (self.sys / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
            self.link(directory / "driver", self.sys / "bus" / "pci" / "drivers" / driver)
        if group is not None:
            groups = self.sys / "kernel" / "iommu_groups" / str(group)
            groups.mkdir(parents=True, exist_ok=True)
            if group_type:
                (groups / "type").write_text(group_type + "\n")
            self.link(directory / "iommu_group", groups)

    def gpu(self, path, driver="nvidia", group=None, group_type=None):
        self.device(path, config=b"\xde\x10" + bytes(62), vendor=0x10DE, device_class=0x030000, driver=driver,
                    group=group, group_type=group_type)

    def read(self):
        return core.read_fabric(str(self.sys), str(self.proc))


def switch_box(tmp_path, downstream_acs=None, root_acs=None, iommu="DMA-FQ", cmdline="intel_iommu=on", gpus=2,
               size=core.CONFIG_SPACE_BYTES, second_driver="nvidia"):
    """The N1SDP's path, root port -> PLX upstream port -> two downstream ports, with a GPU under each downstream
    port. iommu: the GPUs' IOMMU group type, None for no IOMMU at all."""
    tree = Tree(tmp_path, cmdline)
    tree.device([ROOT_PORT], config_space(ROOT_PORT, root_acs, size, add_acs=root_acs is not None))
    tree.device([ROOT_PORT, UPSTREAM], config_space(UPSTREAM, size=size))
    for number, (port, gpu) in enumerate(((DOWNSTREAM_A, GPU_A), (DOWNSTREAM_B, GPU_B))[:gpus]):
        tree.device([ROOT_PORT, UPSTREAM, port], config_space(port, downstream_acs, size))
        tree.gpu([ROOT_PORT, UPSTREAM, port, gpu], driver=second_driver if number else "nvidia",
                 group=12 + number if iommu is not None else None, group_type=iommu)
    return tree


def weigh(tree, topology=None, p2p=None, bus_ids=BUS_IDS):
    fabric = tree.read()
    fabric.update(topology=topology or {}, p2p=p2p or {}, commands=[])
    return core.weigh(fabric, bus_ids)


def ids(weighed):
    return [finding for finding, _evidence in weighed["findings"]]


# --- the registers, as lspci prints them ---------------------------------------------------------------------

def test_real_acsctl_lines_read_back_as_lspci_prints_them():
    broken, working = (DATA / "gpu_health" / "lspci-acsctl-nccl-304.txt").read_text().splitlines()
    lines = [broken, working] + [line for bridge in BRIDGES.values() for line in bridge["acs"] if "ACSCtl" in line]
    for line in lines:
        assert core.acs_flags(core.parse_acsctl(line)) == line.split(":", 1)[1].split("\t")[-1].strip()
    assert (core.parse_acsctl(broken), core.parse_acsctl(working)) == (0x1D, 0)
    assert core.parse_acsctl("ACSCap:\tSrcValid+ TransBlk+") is None


def test_the_root_ports_of_nccl_issue_2079_redirect_peer_requests():
    # "ACSCtl: 0x001d = SrcValid+, ReqRedir+, CmpltRedir+, UpstreamFwd+" on the AMD GPP bridges above both GPUs.
    assert core.acs_flags(0x001D) == REDIRECTING
    assert 0x001D & core.ACS_REDIRECT and not 0x0001 & core.ACS_REDIRECT  # Source Validation alone redirects none


def test_the_n1sdp_bridges_say_what_they_are_and_their_acs_at_its_real_offset():
    roles = dict((bdf, core.port_type(config_space(bdf))) for bdf in BRIDGES)
    assert roles == {ROOT_PORT: "root port", UPSTREAM: "switch upstream port",
                     DOWNSTREAM_A: "switch downstream port", DOWNSTREAM_B: "switch downstream port"}
    acs = core.acs_of(config_space(DOWNSTREAM_A))
    assert (acs["state"], acs["offset"], acs["control"], acs["flags"], acs["redirect"]) == (
        "enabled", 0xF24, 0x1D, REDIRECTING, True)
    assert [core.acs_of(config_space(bdf))["state"] for bdf in (ROOT_PORT, UPSTREAM)] == ["none", "none"]
    assert core.acs_of(config_space(DOWNSTREAM_A, acs_control=0))["state"] == "disabled"


@pytest.mark.parametrize("size, words", [
    (64, "reads 64 bytes: the kernel gives more than 64 to root only"),
    (0, "reads 0 bytes"),
    (256, "extended configuration space (past 256 bytes) cannot be read on this host"),
    (0xF26, "runs past the 3878 bytes read"),
])
def test_a_configuration_space_cut_short_leaves_acs_unknown_never_off(size, words):
    acs = core.acs_of(config_space(DOWNSTREAM_A)[:size])
    assert (acs["state"], acs["redirect"], acs["control"]) == ("unknown", None, None)
    assert words in acs["problem"]


def test_an_extended_list_that_loops_ends_unknown():
    config = bytearray(config_space(UPSTREAM))
    put(config, 0x100, 0x0003 | 1 << 16 | 0x100 << 20, 4)
    acs = core.acs_of(bytes(config))
    assert (acs["state"], acs["problem"]) == ("unknown", "its extended capability list loops back to 0x100")


def test_the_kernel_command_lines_iommu_arguments():
    arguments = core.parse_cmdline("BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on iommu=pt pcie_aspm=off")
    assert (arguments, core.cmdline_mode(arguments)) == (["intel_iommu=on", "iommu=pt"], "passthrough")
    assert core.cmdline_mode(core.parse_cmdline("amd_iommu=off")) == "off"
    assert core.cmdline_mode(core.parse_cmdline("intel_iommu=on")) is None


# --- the fabric between GPUs ------------------------------------------------------------------------------------

def test_acs_redirect_between_gpus_while_the_iommu_translates_is_named_with_its_bridges(tmp_path):
    weighed = weigh(switch_box(tmp_path))
    assert ids(weighed) == ["pcie_acs_redirect", "iommu_translating"]
    evidence = dict(weighed["findings"])["pcie_acs_redirect"]
    assert evidence == (
        "0000:02:08.0 (switch downstream port, above GPU 0 (0000:03:00.0)) ACSCtl: %s; "
        "0000:02:10.0 (switch downstream port, above GPU 1 (0000:04:00.0)) ACSCtl: %s; "
        "IOMMU groups: GPU 0 (0000:03:00.0) group 12 (DMA-FQ), GPU 1 (0000:04:00.0) group 13 (DMA-FQ); "
        "kernel command line: intel_iommu=on" % (REDIRECTING, REDIRECTING))
    assert weighed["mode"] == "translating" and weighed["problems"] == []


def test_the_paths_are_read_from_sysfs_up_to_the_root_port(tmp_path):
    fabric = switch_box(tmp_path).read()
    assert [(gpu["bdf"], gpu["driver"], gpu["path"], gpu["iommu_group"], gpu["iommu_type"])
            for gpu in fabric["gpus"]] == [
        (GPU_A, "nvidia", [ROOT_PORT, UPSTREAM, DOWNSTREAM_A], "12", "DMA-FQ"),
        (GPU_B, "nvidia", [ROOT_PORT, UPSTREAM, DOWNSTREAM_B], "13", "DMA-FQ")]
    assert sorted(fabric["bridges"]) == [ROOT_PORT, UPSTREAM, DOWNSTREAM_A, DOWNSTREAM_B]
    assert fabric["iommu"] == dict(groups=2, cmdline=["intel_iommu=on"])


def test_acs_above_both_gpus_is_not_between_them(tmp_path):
    # The root port and the switch's upstream port carry no traffic from one GPU to the other: it turns in the switch.
    weighed = weigh(switch_box(tmp_path, downstream_acs=0, root_acs=0x1D))
    assert ids(weighed) == ["iommu_translating"]


def test_acs_on_the_root_ports_of_gpus_without_a_switch_is_between_them(tmp_path):
    # NVIDIA/nccl issue 2079: two GPUs straight below root ports of their own, ACS 0x001d on both.
    tree = Tree(tmp_path, "amd_iommu=on")
    for root_port, gpu, group in (("0000:40:01.1", "0000:41:00.0", 30), ("0000:60:01.1", "0000:61:00.0", 40)):
        tree.device([root_port], config_space(ROOT_PORT, 0x1D, add_acs=True))
        tree.gpu([root_port, gpu], group=group, group_type="DMA")
    weighed = weigh(tree, bus_ids=["00000000:41:00.0", "00000000:61:00.0"])
    assert ids(weighed) == ["pcie_acs_redirect", "iommu_translating"]
    evidence = dict(weighed["findings"])["pcie_acs_redirect"]
    assert evidence.startswith("0000:40:01.1 (root port, above GPU 0 (0000:41:00.0)) ACSCtl: " + REDIRECTING)
    assert "0000:60:01.1 (root port, above GPU 1 (0000:61:00.0))" in evidence and "amd_iommu=on" in evidence


def test_acs_off_without_an_iommu_is_a_healthy_fabric(tmp_path):
    weighed = weigh(switch_box(tmp_path, downstream_acs=0, iommu=None, cmdline=""))
    assert (weighed["findings"], weighed["problems"], weighed["mode"]) == ([], [], "off")


def test_acs_off_with_the_iommu_translating_is_the_iommu_alone(tmp_path):
    assert ids(weigh(switch_box(tmp_path, downstream_acs=0))) == ["iommu_translating"]


@pytest.mark.parametrize("iommu, cmdline, mode", [
    ("identity", "intel_iommu=on iommu=pt", "passthrough"),
    (None, "", "off"),
])
def test_acs_on_with_the_iommu_in_passthrough_or_off_is_told_but_healthy(tmp_path, iommu, cmdline, mode):
    weighed = weigh(switch_box(tmp_path, iommu=iommu, cmdline=cmdline))
    assert (ids(weighed), weighed["mode"]) == (["pcie_acs_redirect_passthrough"], mode)
    assert "the IOMMU is %s" % mode in dict(weighed["findings"])["pcie_acs_redirect_passthrough"]
    assert gpu_health.FINDINGS["pcie_acs_redirect_passthrough"][0] == "info"


def test_a_single_gpu_has_no_fabric_to_weigh(tmp_path):
    weighed = weigh(switch_box(tmp_path, gpus=1), bus_ids=BUS_IDS[:1])
    assert (weighed["findings"], weighed["problems"], weighed["mode"]) == ([], [], "translating")


def test_a_gpu_not_bound_to_the_nvidia_driver_does_not_serve(tmp_path):
    # A GPU given to a virtual machine (vfio-pci) needs the IOMMU; it is no peer of the one that serves.
    assert weigh(switch_box(tmp_path, second_driver="vfio-pci"), bus_ids=BUS_IDS[:1])["findings"] == []


@pytest.mark.parametrize("iommu", [None, "DMA-FQ"])
def test_acs_that_cannot_be_read_without_root_is_unknown_and_no_finding(tmp_path, iommu):
    weighed = weigh(switch_box(tmp_path, size=64, iommu=iommu, cmdline=""))
    assert ids(weighed) == (["iommu_translating"] if iommu else [])
    assert weighed["problems"] == [
        "ACS of 2 bridge(s) between the GPUs is unknown (0000:02:08.0, 0000:02:10.0): its configuration space reads "
        "64 bytes: the kernel gives more than 64 to root only"]


def test_acs_redirect_with_an_iommu_of_unknown_mode_is_said_not_found(tmp_path):
    # IOMMU groups without a type (kernels before 5.11) and no IOMMU argument: the mode is not known.
    weighed = weigh(switch_box(tmp_path, iommu="", cmdline=""))
    assert (weighed["findings"], weighed["mode"]) == ([], "unknown")
    (problem,) = weighed["problems"]
    assert problem.startswith("ACS redirects peer traffic on 0000:02:08.0, 0000:02:10.0, but what the IOMMU does")


def test_gpus_linked_by_nvlink_take_no_pcie_bridge(tmp_path):
    # The lent 2x H200's nvidia-smi topo -m: NV18 between its two GPUs.
    host = (DATA / "h200" / "host.txt").read_text()
    topology = host.split("$ sh -c nvidia-smi topo -m\n")[1].split("\n[exit ")[0]
    fabric = dict(switch_box(tmp_path).read(), p2p={}, commands=[])
    fabric["topology"] = core.observe(lambda: dict(fabric), lambda argv: (
        0, topology if argv[1:] == ["topo", "-m"] else "", ""), "/usr/bin/nvidia-smi", 2)["topology"]
    assert fabric["topology"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    assert ids(core.weigh(fabric, BUS_IDS)) == ["iommu_translating"]


def test_sysfs_that_cannot_be_read_is_a_problem_and_no_finding(tmp_path):
    fabric = dict(core.read_fabric(str(tmp_path / "nothing"), str(tmp_path / "nothing")), p2p={}, commands=[])
    weighed = core.weigh(fabric, BUS_IDS)
    assert weighed["findings"] == [] and weighed["problems"][0].startswith(
        "%s could not be read: " % (tmp_path / "nothing" / "bus" / "pci" / "devices"))


# --- nvidia-smi's P2P matrix ------------------------------------------------------------------------------------

def test_two_geforce_gpus_refuse_peer_to_peer_both_ways():
    matrix = core.parse_p2p((DATA / "gpu_health" / "p2p-rtx5090-2gpu-gns.txt").read_text())
    assert matrix == {"GPU0": {"GPU1": "GNS"}, "GPU1": {"GPU0": "GNS"}}
    weighed = core.weigh(dict(gpus=[], bridges={}, iommu=dict(groups=0, cmdline=[]), p2p=dict(read=matrix),
                              topology={"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}}), BUS_IDS)
    assert weighed["findings"] == [("p2p_not_supported", "nvidia-smi topo -p2p: read GPU0-GPU1 over PHB GNS (GPU not "
                                                         "supported); read GPU1-GPU0 over PHB GNS (GPU not supported)")]


@pytest.mark.parametrize("name, gpus", [("p2p-p-5gpu-ok.txt", 5), ("p2p-p-8gpu-pcie-ok-nccl-doc.txt", 8)])
def test_gpus_that_do_peer_to_peer_have_no_finding(name, gpus):
    matrix = core.parse_p2p((DATA / "gpu_health" / name).read_text())
    assert len(matrix) == gpus and {code for row in matrix.values() for code in row.values()} == {"OK"}
    assert all(len(row) == gpus - 1 for row in matrix.values())
    fabric = dict(gpus=[], bridges={}, iommu=dict(groups=0, cmdline=[]), p2p=dict(read=matrix, write=matrix))
    assert core.weigh(fabric, BUS_IDS)["findings"] == []


def test_the_5_gpu_boxs_links_are_read_for_the_evidence():
    topology = core.parse_topology((DATA / "gpu_health" / "topo-5gpu-node-phb.txt").read_text())["matrix"]
    assert (topology["GPU3"]["GPU4"], topology["GPU0"]["GPU1"]) == ("PHB", "NODE")


def test_an_unknown_status_is_no_finding():
    fabric = dict(gpus=[], bridges={}, iommu=dict(groups=0, cmdline=[]),
                  p2p=dict(read=core.parse_p2p(" \tGPU0\tGPU1\n GPU0\tX\tU\n GPU1\tU\tX\n")))
    assert core.weigh(fabric, BUS_IDS)["findings"] == []


# --- through gpu_health: severities, the verdict, gather and preflight's refusal --------------------------------

def two_gpus_of_the_box():
    """The H200's real nvidia-smi -q of two GPUs, their addresses those of the box's GPUs."""
    details = (DATA / "h200" / "nvidia-smi-q.txt").read_text()
    assert details.count("GPU 00000000:00:06.0") == 1 and details.count("GPU 00000000:00:07.0") == 1
    return details.replace("GPU 00000000:00:06.0", "GPU " + BUS_IDS[0]).replace(
        "GPU 00000000:00:07.0", "GPU " + BUS_IDS[1])


def observed(tree):
    return dict(tree.read(), p2p={}, topology={}, commands=[])


def test_a_bad_fabric_makes_the_node_unhealthy_with_the_fix(tmp_path):
    health = gpu_health.assess("ok", "", two_gpus_of_the_box(), fabric=observed(switch_box(tmp_path)))
    assert health["verdict"] == "unhealthy"
    assert [(finding["id"], finding["severity"], finding["action"], finding["gpu"])
            for finding in health["findings"]] == [
        ("pcie_acs_redirect", "unhealthy", "disable_acs_or_iommu_pt", None),
        ("iommu_translating", "degraded", "iommu_passthrough", None)]
    assert health["summary"].startswith("unhealthy: 1 unhealthy and 1 degraded finding(s): the node pcie_acs_redirect "
                                        "(0000:02:08.0 (switch downstream port, above GPU 0 (0000:03:00.0)) ACSCtl: ")
    fabric = health["pcie_fabric"]
    assert fabric["iommu"] == dict(groups=2, cmdline=["intel_iommu=on"], mode="translating")
    assert [(bridge["bdf"], bridge["port"], bridge["acs"], bridge["redirect"]) for bridge in fabric["bridges"]] == [
        (ROOT_PORT, "root port", "none", False), (UPSTREAM, "switch upstream port", "none", False),
        (DOWNSTREAM_A, "switch downstream port", "enabled", True),
        (DOWNSTREAM_B, "switch downstream port", "enabled", True)]


def test_preflight_refuses_the_bad_fabric_naming_the_setting_and_the_fix(tmp_path):
    health = gpu_health.assess("ok", "", two_gpus_of_the_box(), fabric=observed(switch_box(tmp_path)))
    lines = gpu_health_lines(health)
    (problem,) = lines["problems"]
    assert problem.startswith("the node is unhealthy: pcie_acs_redirect, ACS on a PCIe bridge between GPUs redirects")
    for words in ("setpci -s <bridge> ECAP_ACS+0x6.w=0000", "iommu=pt", "NCCL_P2P_DISABLE=1",
                  "set %s: {pcie_acs_redirect: degraded}" % GPU_HEALTH_SETTING):
        assert words in problem
    assert [line.split(":")[0] for line in lines["warnings"]] == ["the node is degraded"]


def test_the_inventory_accepts_the_fabric_through_the_overrides(tmp_path):
    overrides = {"pcie_acs_redirect": "degraded", "iommu_translating": "info"}
    gpu_health.check_options(overrides, 1, False)
    health = gpu_health.assess("ok", "", two_gpus_of_the_box(), fabric=observed(switch_box(tmp_path)),
                               severity_overrides=overrides)
    assert health["verdict"] == "degraded" and gpu_health_lines(health)["problems"] == []


def test_acs_unknown_without_root_is_a_preflight_note_not_a_problem(tmp_path):
    health = gpu_health.assess("ok", "", two_gpus_of_the_box(),
                               fabric=observed(switch_box(tmp_path, size=64, iommu=None, cmdline="")))
    lines = gpu_health_lines(health)
    assert (health["verdict"], lines["problems"]) == ("healthy", [])
    assert lines["notes"] == [
        "The PCIe fabric between the GPUs was not read whole: ACS of 2 bridge(s) between the GPUs is unknown "
        "(0000:02:08.0, 0000:02:10.0): its configuration space reads 64 bytes: the kernel gives more than 64 to root "
        "only."]
    assert [bridge["acs"] for bridge in health["pcie_fabric"]["bridges"]] == ["unknown"] * 4


OPTIONS = dict(severity_overrides={}, kernel_log=False, dcgm_diag=False, dcgm_diag_level=1, pcie_fabric=True)


def test_gather_reads_the_p2p_matrix_where_nvidia_smi_lists_two_gpus(tmp_path, recorder):
    gns = (DATA / "gpu_health" / "p2p-rtx5090-2gpu-gns.txt").read_text()
    run, calls = recorder({("-q",): (0, two_gpus_of_the_box(), ""), ("nvlink", "-e"): (0, "", ""),
                           ("nvlink", "-s"): (0, "", ""),
                           ("topo", "-p2p", "r"): (0, gns, ""), ("topo", "-p2p", "w"): (0, gns, ""),
                           ("topo", "-m"): (0, "", "")})
    tree = switch_box(tmp_path, downstream_acs=0, iommu=None, cmdline="")
    health = gpu_health.gather("/usr/bin/nvidia-smi", None, run, None, OPTIONS, tree.read)
    assert [call[1:] for call in calls[3:]] == [["topo", "-p2p", "r"], ["topo", "-p2p", "w"], ["topo", "-m"]]
    assert [(finding["id"], finding["severity"]) for finding in health["findings"]] == [
        ("p2p_not_supported", "degraded")]
    assert health["pcie_fabric"]["p2p"]["write"] == {"GPU0": {"GPU1": "GNS"}, "GPU1": {"GPU0": "GNS"}}


def test_a_p2p_command_that_fails_is_a_problem_not_a_finding(tmp_path, recorder):
    run, _calls = recorder({("-q",): (0, two_gpus_of_the_box(), ""), ("nvlink", "-e"): (0, "", ""),
                           ("nvlink", "-s"): (0, "", ""),
                            ("topo", "-p2p", "r"): (2, "", "Invalid combination of input arguments."),
                            ("topo", "-p2p", "w"): (2, "", "Invalid combination of input arguments."),
                            ("topo", "-m"): (2, "", "")})
    tree = switch_box(tmp_path, downstream_acs=0, iommu=None, cmdline="")
    health = gpu_health.gather("/usr/bin/nvidia-smi", None, run, None, OPTIONS, tree.read)
    assert (health["verdict"], health["findings"]) == ("healthy", [])
    assert health["pcie_fabric"]["problems"][0] == (
        "nvidia-smi topo -p2p r printed no matrix (exit status 2): Invalid combination of input arguments.")


def test_the_real_single_h200_has_no_fabric_finding_and_runs_no_topology_command(tmp_path, recorder):
    # tests/data/h200: one H200, no sysfs tree recorded; read here from none at all.
    run, calls = recorder({("-q",): (0, (DATA / "h200" / "gpu_health_q.txt").read_text(), ""),
                           ("nvlink", "-e"): (0, "", ""), ("nvlink", "-s"): (0, "", "")})
    health = gpu_health.gather("/usr/bin/nvidia-smi", None, run, None, OPTIONS,
                               lambda: core.read_fabric(str(tmp_path / "sys"), str(tmp_path / "proc")))
    assert [call[1:] for call in calls] == [["-q"], ["nvlink", "-e"], ["nvlink", "-s"]]
    assert (health["verdict"], health["counts"]) == ("healthy", dict(unhealthy=0, degraded=0, info=1))
    assert health["findings"] == [] and health["pcie_fabric"]["gpus"] == []


def test_the_real_2x_h200_linked_by_nvlink_has_no_fabric_finding(tmp_path, recorder):
    host = (DATA / "h200" / "host.txt").read_text()
    topology = host.split("$ sh -c nvidia-smi topo -m\n")[1].split("\n[exit ")[0]
    run, _calls = recorder({("-q",): (0, (DATA / "h200" / "nvidia-smi-q.txt").read_text(), ""),
                            ("nvlink", "-e"): (0, "", ""), ("nvlink", "-s"): (0, "", ""),
                            ("topo", "-p2p", "r"): (0, "", ""),
                            ("topo", "-p2p", "w"): (0, "", ""), ("topo", "-m"): (0, topology, "")})
    health = gpu_health.gather("/usr/bin/nvidia-smi", None, run, None, OPTIONS,
                               lambda: core.read_fabric(str(tmp_path / "sys"), str(tmp_path / "proc")))
    assert (health["verdict"], health["findings"]) == ("healthy", [])
    assert health["pcie_fabric"]["links"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}


def test_the_fabric_is_not_read_when_turned_off(tmp_path, recorder):
    run, calls = recorder({("-q",): (0, two_gpus_of_the_box(), ""), ("nvlink", "-e"): (0, "", ""),
                           ("nvlink", "-s"): (0, "", "")})

    def read():
        raise AssertionError("read")
    health = gpu_health.gather("/usr/bin/nvidia-smi", None, run, None, dict(OPTIONS, pcie_fabric=False), read)
    assert (health["pcie_fabric"], len(calls)) == (None, 3)


def test_every_fabric_finding_is_data_with_an_action():
    for finding in ("pcie_acs_redirect", "pcie_acs_redirect_passthrough", "iommu_translating", "p2p_not_supported"):
        severity, action, _summary = gpu_health.FINDINGS[finding]
        assert severity in gpu_health.SEVERITIES and action in gpu_health.ACTIONS
    assert [gpu_health.FINDINGS[finding][0] for finding in (
        "pcie_acs_redirect", "pcie_acs_redirect_passthrough", "iommu_translating", "p2p_not_supported")] == [
        "unhealthy", "info", "degraded", "degraded"]


# --- text from outside: bounded, cleaned, never a traceback -----------------------------------------------------

DIGITS = "9" * 5000  # int() refuses more than 4,300 digits from Python 3.11 on
# Terminal sequences (CSI, OSC) and other control characters, in ASCII as a sysfs attribute holds them.
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x00\x08\x7f"
MIB = 1 << 20
# A parser of a bounded text takes far less than this on any machine, under make test's load and in the oldest
# Python's container too; the backtracking it replaced took minutes.
BOUND_S = 5.0
GNS = (DATA / "gpu_health" / "p2p-rtx5090-2gpu-gns.txt").read_text()


def observed_with(tree, outputs):
    """observe() of the tree, nvidia-smi answering each argv (without its name) from outputs; and its time."""
    started = time.monotonic()
    fabric = core.observe(tree.read, lambda argv: outputs[tuple(argv[1:])], "/usr/bin/nvidia-smi", 2)
    return fabric, time.monotonic() - started


def weighed_summary(fabric):
    weighed = core.weigh(fabric, BUS_IDS)
    return weighed, core.summary(fabric, weighed["mode"], weighed["problems"])


def test_a_gpu_named_with_5000_digits_makes_no_p2p_matrix_and_no_traceback(tmp_path, control_text):
    p2p = " \tGPU0\tGPU1\tGPU%s\t\n GPU0\tX\tGNS\tGNS\t\n GPU1\tGNS\tX\tGNS\t\n GPU%s\tGNS\tGNS\tX\t\n" % (
        DIGITS, DIGITS)
    topology = "\tGPU0\tGPU1\tGPU%s\nGPU0\t X \tPHB\tNV%s\nGPU1\tPHB\t X \tPHB\nGPU%s\tNV%s\tPHB\t X \n" % (
        (DIGITS,) * 4)
    fabric, _took = observed_with(switch_box(tmp_path, downstream_acs=0, iommu=None, cmdline=""), {
        ("topo", "-p2p", "r"): (0, p2p, ""), ("topo", "-p2p", "w"): (0, p2p, ""), ("topo", "-m"): (0, topology, "")})
    assert (fabric["p2p"], fabric["topology"]) == ({"read": {}, "write": {}},
                                                   {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}})
    weighed, summary = weighed_summary(fabric)
    assert weighed["findings"] == [] and control_text(summary) == []
    said = weighed["problems"][0]
    assert said.startswith("nvidia-smi topo -p2p r printed no matrix (exit status 0): GPU0\tGPU1\tGPU999")
    assert said.endswith("bytes cut]") and len(said.encode()) < 300


def test_a_p2p_matrix_of_5000_digit_names_alone_has_no_peer_to_weigh():
    matrix = core.parse_p2p(" \tGPU%s\tGPU0\n GPU%s\tX\tGNS\n GPU0\tGNS\tX\n" % (DIGITS, DIGITS))
    assert matrix == {}
    assert core.parse_p2p(GNS.replace("GPU1", "GPU" + DIGITS)) == core.parse_p2p(GNS.replace("GPU1", "GPU12345")) == {}


def test_terminal_sequences_and_control_characters_from_sysfs_and_nvidia_smi_reach_no_result(tmp_path, control_text):
    tree = switch_box(tmp_path, iommu="DMA-FQ" + ESCAPES[:20], cmdline="ro intel_iommu=on%s quiet iommu=pt%s" % (
        ESCAPES, ESCAPES))
    # A file's name holds any byte but the slash and NUL.
    tree.gpu([ROOT_PORT, UPSTREAM, DOWNSTREAM_B, "0000:04:00.1"], driver="vfio-pci" + ESCAPES.replace("\x00", ""),
             group=14, group_type="identity" + ESCAPES[:20])
    gns = GNS.replace("GNS", "GNS" + ESCAPES).replace("GPU1", "GPU1" + ESCAPES)
    fabric, _took = observed_with(tree, {
        ("topo", "-p2p", "r"): (0, gns, ""), ("topo", "-p2p", "w"): (1, "", "Failed" + ESCAPES + "\n" + ESCAPES),
        ("topo", "-m"): (0, "\tGPU0\tGPU1\nGPU0\t X \tPHB" + ESCAPES + "\nGPU1\tPHB" + ESCAPES + "\t X \n", "")})
    weighed, summary = weighed_summary(fabric)
    assert control_text(weighed) == [] and control_text(summary) == []
    assert [(gpu["driver"], gpu["iommu_type"]) for gpu in summary["gpus"]] == [
        ("nvidia", "DMA-FQ"), ("nvidia", "DMA-FQ"), ("vfio-pci", "identity")]
    assert summary["iommu"] == dict(groups=3, cmdline=["intel_iommu=on", "iommu=pt"], mode="translating")
    assert ids(weighed) == ["pcie_acs_redirect", "iommu_translating", "p2p_not_supported"]
    assert summary["p2p"]["read"] == {"GPU0": {"GPU1": "GNS"}, "GPU1": {"GPU0": "GNS"}}
    assert "nvidia-smi topo -p2p w printed no matrix (exit status 1): Failed" in summary["problems"]


@pytest.mark.parametrize("line", [
    "\t\tACSCtl:\t" + "SrcValid+ " * (MIB // 10), "\t\tACSCtl:\t" + "ReqRedir+" * (MIB // 9),
    "\t\tACSCtl:" + " " * MIB + "SrcValid+!", "ACSCtl:\tSrcValid+ " * (MIB // 18) + "!",
], ids=["a hundred thousand flags", "flags without a space", "spaces", "ACSCtl again and again"])
def test_a_1_mib_acsctl_line_is_none_of_lspcis_in_bounded_time(line):
    started = time.monotonic()
    assert core.parse_acsctl(line) is None
    assert time.monotonic() - started < BOUND_S


def test_a_1_mib_line_of_nvidia_smi_is_left_out_and_said_in_the_fabrics_problems(tmp_path):
    long_line = "GPU1\t" + "NV18\t" * ((MIB - 1024) // 5)
    fabric, took = observed_with(switch_box(tmp_path, downstream_acs=0, iommu=None, cmdline=""), {
        ("topo", "-p2p", "r"): (0, GNS + long_line, ""), ("topo", "-p2p", "w"): (0, GNS, ""),
        ("topo", "-m"): (0, "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n" + long_line, "")})
    assert took < BOUND_S
    weighed, summary = weighed_summary(fabric)
    assert summary["p2p"]["read"] == {"GPU0": {"GPU1": "GNS"}, "GPU1": {"GPU0": "GNS"}}
    assert summary["links"] == {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}}
    assert summary["problems"] == [
        "nvidia-smi topo -p2p r printed 1 line(s) of more than %d characters: left out" % LINE_CHARACTERS,
        "nvidia-smi topo -m printed 1 line(s) of more than %d characters: left out" % LINE_CHARACTERS]
    assert ids(weighed) == ["p2p_not_supported"]


def test_a_p2p_table_of_100000_columns_is_bounded_and_said(tmp_path, control_text):
    names = ["GPU%d" % number for number in range(100000)]
    table = " \t" + "\t".join(names) + "\n" + "".join(
        " %s\t" % name + "\t".join("X" if peer == name else "OK" for peer in names[:20]) + "\n" for name in names[:20])
    fabric, took = observed_with(switch_box(tmp_path, downstream_acs=0, iommu=None, cmdline=""), {
        ("topo", "-p2p", "r"): (0, table, ""), ("topo", "-p2p", "w"): (0, table, ""), ("topo", "-m"): (0, "", "")})
    assert took < BOUND_S and fabric["p2p"] == {"read": {}, "write": {}}
    problems = weighed_summary(fabric)[1]["problems"]
    assert problems[1] == ("nvidia-smi topo -p2p r printed 1 line(s) of more than %d characters: left out"
                           % LINE_CHARACTERS)
    assert problems[0].startswith("nvidia-smi topo -p2p r printed no matrix (exit status 0): GPU0\tGPU1\tGPU2")
    assert len(problems) == 4 and control_text(problems) == []


def test_a_p2p_table_of_more_gpus_than_a_node_has_is_read_for_the_first_of_them():
    names = ["GPU%d" % number for number in range(MAX_GPUS + 44)]
    table = " \t" + "\t".join(names) + "\n" + "".join(
        " %s\t" % name + "\t".join("X" if peer == name else "CNS" for peer in names) + "\n" for name in names)
    problems = []
    started = time.monotonic()
    matrix = core.parse_p2p(table, problems)
    fabric = dict(gpus=[], bridges={}, iommu=dict(groups=0, cmdline=[]), p2p=dict(read=matrix, write=matrix))
    (finding, evidence), = core.weigh(fabric, BUS_IDS)["findings"]
    assert time.monotonic() - started < BOUND_S
    assert sorted(matrix) == sorted(names[:MAX_GPUS]) and all(len(row) == MAX_GPUS - 1 for row in matrix.values())
    assert problems == ["lists more than %d GPUs: the first %d were read" % (MAX_GPUS, MAX_GPUS)]
    assert finding == "p2p_not_supported" and evidence.count("CNS (chipset not supported)") == 2 * MAX_GPUS * (
        MAX_GPUS - 1)
