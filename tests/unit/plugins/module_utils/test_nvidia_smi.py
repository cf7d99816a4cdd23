import json
import re
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import (
    CELL_BYTES,
    LINE_CHARACTERS,
    MAX_GPUS,
    OUTPUT_CHARACTERS,
    OUTPUT_LINES,
    VALUE_BYTES,
    gather,
    gpu_list,
    kernel_module_flavour,
    kernel_module_version,
    nvswitch_facts,
    parse_cuda_version,
    parse_fabric,
    fabric_summary,
    QUERY_ARGV,
    QUERY_FIELDS,
    parse_driver_version,
    parse_query,
    parse_topology,
    state_of,
)

DATA = Path(__file__).resolve().parents[3] / "data"


def recorded(command):
    """What the 2x H200 host printed for a command (tests/data/h200/host.txt, see tests/device/README.md)."""
    text = (DATA / "h200" / "host.txt").read_text()
    sections = re.split(r"^\$ sh -c ", text, flags=re.M)
    for section in sections:
        if section.startswith(command + "\n"):
            return section[len(command) + 1:].split("\n[exit ")[0]
    raise KeyError(command)


def test_query_of_the_recorded_h200_host():
    gpus = parse_query(recorded(
        "nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pcie.link.gen.current,pcie.link.gen.max,"
        "pcie.link.width.current,pcie.link.width.max,persistence_mode,driver_version --format=csv"))
    assert len(gpus) == 2
    assert gpus[1] == {
        "index": 1, "name": "NVIDIA H200", "uuid": "GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014",
        "compute_capability": "9.0", "memory_total_mib": 143771, "pcie_gen_current": 5, "pcie_gen_max": 5,
        "pcie_width_current": 16, "pcie_width_max": 16, "persistence_mode": "Enabled",
        "driver_version": "580.159.04",
    }


def test_query_without_header_or_units():
    gpus = parse_query("0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-1, 12.0, 97887, 1, 5, 16, 16, "
                       "Disabled, 580.95.05\n")
    assert gpus[0]["compute_capability"] == "12.0" and gpus[0]["memory_total_mib"] == 97887
    assert (gpus[0]["pcie_gen_current"], gpus[0]["pcie_gen_max"]) == (1, 5)


def test_not_supported_values_become_null():
    gpus = parse_query("0, NVIDIA GeForce RTX 5090, GPU-2, 12.0, 32607, [N/A], [N/A], 16, 16, [N/A], 575.51\n")
    assert gpus[0]["pcie_gen_current"] is None and gpus[0]["persistence_mode"] is None


def test_cuda_version_from_the_recorded_table():
    assert parse_cuda_version(recorded("nvidia-smi")) == "13.0"


def test_topology_of_the_recorded_h200_host_with_its_ansi_header():
    topology = parse_topology(recorded("nvidia-smi topo -m"))
    assert topology == {"matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}},
                        "nvlink_pairs": [[0, 1, 18]], "interconnect": "nvlink"}


PCIE_ONLY = "\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tPIX\tSYS\t0-15\nGPU1\tPIX\t X \tSYS\t0-15\nGPU2\tSYS\tSYS\t X \t16-31\n"


def test_pcie_only_topology():
    topology = parse_topology(PCIE_ONLY)
    assert topology["interconnect"] == "pcie" and topology["nvlink_pairs"] == []
    assert topology["matrix"]["GPU2"] == {"GPU0": "SYS", "GPU1": "SYS"}


@pytest.mark.parametrize("text,expected", [("", "none"), ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-15\n", "single")])
def test_no_or_one_gpu(text, expected):
    assert parse_topology(text)["interconnect"] == expected


def test_kernel_module_flavour_from_the_recorded_host():
    assert kernel_module_flavour(recorded("cat /proc/driver/nvidia/version")) == "open"
    assert kernel_module_flavour("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22") == (
        "proprietary")
    assert kernel_module_flavour(None) is None


@pytest.mark.parametrize("rc,output,state", [
    (0, "0, NVIDIA H200, ...", "ok"),
    (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.", "no_driver"),
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95", "driver_mismatch"),
    (6, "No devices were found", "no_gpu"),
    (255, "Segmentation fault", "error"),
])
def test_states(rc, output, state):
    assert state_of(rc, output) == state


def public(name):
    """Outputs of other hosts from public reports: tests/data/nvidia_smi/SOURCES.md says where from."""
    return (DATA / "nvidia_smi" / name).read_text()


def test_eight_h100_all_linked_by_nv18_pasted_with_spaces():
    topology = parse_topology(public("topo-h100-8gpu-nvlink.txt"))
    assert topology["interconnect"] == "nvlink"
    assert len(topology["matrix"]) == 8
    assert topology["nvlink_pairs"] == [[i, j, 18] for i in range(8) for j in range(i + 1, 8)]


@pytest.mark.parametrize("name,first_link", [("topo-rtx-4090-8gpu-pcie-sys.txt", "SYS"),
                                             ("topo-pcie-8gpu-pix-pxb.txt", "PIX")])
def test_eight_gpu_pcie_only_boxes(name, first_link):
    topology = parse_topology(public(name))
    assert topology["interconnect"] == "pcie" and topology["nvlink_pairs"] == []
    assert sorted(topology["matrix"]) == ["GPU%d" % n for n in range(8)]
    assert topology["matrix"]["GPU0"]["GPU1"] == first_link
    assert all(len(peers) == 7 for peers in topology["matrix"].values())  # NIC columns are not GPUs


@pytest.mark.parametrize("name,version", [("table-b200-8gpu.txt", "12.9"), ("table-h100-8gpu.txt", "12.7"),
                                          ("table-rtx-5090.txt", "13.2"),
                                          ("table-rtx-pro-6000-blackwell-maxq-2gpu.txt", "13.2"),
                                          ("table-b200-driver-610-kmd-umd-partial.txt", "13.3"),
                                          ("table-rtx-3080-laptop-driver-610-partial.txt", "13.3")])
def test_cuda_driver_version_of_public_tables(name, version):
    assert parse_cuda_version(public(name)) == version


@pytest.mark.parametrize("name,version", [("table-b200-8gpu.txt", "575.57.08"),
                                          ("table-b200-driver-610-kmd-umd-partial.txt", "610.43.02"),
                                          ("table-rtx-3080-laptop-driver-610-partial.txt", "610.43.03")])
def test_driver_version_of_public_tables_with_either_header(name, version):
    assert parse_driver_version(public(name)) == version


def test_gather_on_a_610_driver_reads_the_kmd_and_umd_header():
    """The 610 branch's table says "KMD Version:" and "CUDA UMD Version:"; a query whose deprecated
    driver_version field comes back empty still gives the driver's version."""
    table = public("table-b200-driver-610-kmd-umd-partial.txt")
    answers = {
        "--query-gpu": (0, "0, NVIDIA B200, GPU-1, 10.0, 183359, 5, 5, 16, 16, Enabled, [N/A]\n", ""),
        "topo": (0, "", ""),
    }

    def run(argv):
        return answers.get(argv[1].split("=")[0], (0, table, "")) if len(argv) > 1 else (0, table, "")
    facts = gather("/usr/bin/nvidia-smi", None, run, None)
    assert (facts["state"], facts["count"]) == ("ok", 1)
    assert (facts["driver_version"], facts["cuda_driver_version"]) == ("610.43.02", "13.3")


def test_blackwell_compute_capability_from_a_csv_with_header():
    gpus = parse_query(public("csv-rtx-pro-6000-blackwell-maxq.txt"))
    assert gpus == [{"name": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                     "compute_capability": "12.0"}] * 2


@pytest.mark.parametrize("name,state", [("error-driver-mismatch.txt", "driver_mismatch"),
                                        ("error-driver-mismatch-570.txt", "driver_mismatch"),
                                        ("error-no-devices.txt", "no_gpu"), ("error-no-driver.txt", "no_driver")])
def test_public_failure_messages(name, state):
    assert state_of(9, public(name)) == state


@pytest.mark.parametrize("name,flavour", [("proc-version-open.txt", "open"),
                                          ("proc-version-proprietary.txt", "proprietary")])
def test_public_proc_versions(name, flavour):
    assert kernel_module_flavour(public(name)) == flavour


def replay(recording):
    """A run() that answers with what the host answered to the same command."""
    answers = dict((tuple(call["argv"]), (call["rc"], call["stdout"], call["stderr"])) for call in recording["commands"])

    def run(argv):
        return answers[tuple([argv[0].rsplit("/", 1)[-1]] + argv[1:])]
    return run


def test_the_recorded_h200_host_gives_what_the_module_returned_there():
    """tests/device/record_preflight.sh recorded every command gpu_facts ran on the 2x H200 host and what the
    module returned there through Ansible; replaying the commands must give the same facts."""
    recording = json.loads((DATA / "h200" / "gpu_facts_core.json").read_text())
    module = json.loads((DATA / "h200" / "gpu_facts_module.json").read_text())["ansible_facts"]["gpu"]
    modinfo = "/sbin/modinfo" if recording["modinfo"] else None
    run = replay(recording)

    def run_without_details(argv):
        # `nvidia-smi -q` was not recorded there: as a driver without it, which leaves the fabric unknown.
        return (2, "", "not recorded") if argv[1:] == ["-q"] else run(argv)
    facts = gather("/usr/bin/nvidia-smi", modinfo, run_without_details, recording["proc_version"])
    fabric_keys = ("fabric", "nvswitch", "nvswitch_devices", "nvlink_generation")
    assert dict((key, value) for key, value in facts.items() if key not in fabric_keys) == module
    # Two GPUs with NV18 between them could as well be wired directly: without a fabric state nothing says switch.
    assert [facts[key] for key in fabric_keys] == [None, False, [], 4]
    assert (facts["state"], facts["count"], facts["interconnect"], facts["nvlink_pairs"]) == ("ok", 2, "nvlink",
                                                                                              [[0, 1, 18]])
    assert (facts["kernel_module"], facts["kernel_module_version"]) == ("open", "580.159.04")
    assert facts["topology"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    assert [gpu["uuid"] for gpu in facts["gpus"]] == [
        "GPU-89c6188f-b1de-472e-7958-1686cf755eb6", "GPU-b0d7e414-3bdc-0d8e-0902-302fc086fdf4"]


def test_gather_without_nvidia_smi_still_reads_the_kernel_module():
    facts = gather(None, "/sbin/modinfo", lambda argv: (0, "580.95.05\n", ""),
                   "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build")
    assert facts["state"] == "no_nvidia_smi" and facts["count"] == 0
    assert (facts["kernel_module_version"], facts["kernel_module_installed_version"]) == ("580.95.05", "580.95.05")


@pytest.mark.parametrize("state,rc,said", [("no_driver", 9, "NVIDIA-SMI has failed because it couldn't communicate "
                                                            "with the NVIDIA driver."),
                                           ("driver_mismatch", 18, "Failed to initialize NVML: Driver/library version "
                                                                   "mismatch")])
def test_gather_on_a_broken_driver_stops_after_the_query(state, rc, said):
    asked = []

    def run(argv):
        asked.append(argv)
        return (1, "", "modinfo: ERROR: Module nvidia not found.\n") if argv[0].endswith("modinfo") else (rc, said, "")
    facts = gather("/usr/bin/nvidia-smi", "/sbin/modinfo", run, None)
    assert (facts["state"], facts["message"], facts["kernel_module_installed_version"]) == (state, said, None)
    assert len(asked) == 2


@pytest.mark.parametrize("text,version", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)", "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017", "384.98"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build", "580.95.05"),
    (None, None)])
def test_kernel_module_version(text, version):
    assert kernel_module_version(text) == version


def test_nvml_failing_to_start_is_no_driver():
    assert state_of(255, "Failed to initialize NVML: Unknown Error") == "no_driver"


def test_every_spelling_of_no_value_becomes_null_and_a_short_line_is_skipped():
    gpus = parse_query("0, NVIDIA GeForce RTX 5090\n"
                       "1, NVIDIA GeForce RTX 5090, GPU-2, 12.0, 32607, , N/A, [Not Supported], 16, [N/A], 575.51\n")
    assert [gpu["index"] for gpu in gpus] == [1]
    assert [gpus[0][name] for name in ("pcie_gen_current", "pcie_gen_max", "pcie_width_current",
                                       "persistence_mode")] == [None, None, None, None]


def test_a_matrix_pasted_without_its_leading_whitespace_keeps_gpu0():
    topology = parse_topology("GPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-15\nGPU1\tNV18\t X \t0-15\n")
    assert topology == {"matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}, "nvlink_pairs": [[0, 1, 18]],
                        "interconnect": "nvlink"}


def test_gather_without_nvidia_smi_asks_modinfo_for_the_version_and_says_why():
    asked = []

    def run(argv):
        asked.append(argv)
        return 0, "\n", ""
    assert gather(None, "/sbin/modinfo", run, None) == dict(
        state="no_nvidia_smi", message="nvidia-smi is not installed (no NVIDIA driver user space on this host)",
        count=0, gpus=[], driver_version=None, cuda_driver_version=None, kernel_module=None,
        kernel_module_version=None, kernel_module_installed_version=None, interconnect="none", nvlink_pairs=[],
        topology={}, fabric=None, nvswitch=None, nvswitch_devices=[], nvlink_generation=None)
    assert asked == [["/sbin/modinfo", "-F", "version", "nvidia"]]


def test_gather_takes_the_driver_version_from_the_query_where_the_table_has_none():
    def run(argv):
        if argv[1:2] == ["topo"]:
            return 0, "", ""
        if len(argv) > 1:
            return 0, "0, NVIDIA H200, GPU-1, 9.0, 143771, 5, 5, 16, 16, Enabled, 580.95.05\n", ""
        return 0, "a table without its header\n", ""
    facts = gather("/usr/bin/nvidia-smi", None, run, None)
    assert (facts["state"], facts["driver_version"], facts["cuda_driver_version"]) == ("ok", "580.95.05", None)


def recorded_host(details):
    """A run() answering as the 2x H200 host of host.txt, with `nvidia-smi -q` answered by `details`."""
    answers = {
        ("nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"): recorded(
            "nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pcie.link.gen.current,pcie.link.gen.max,"
            "pcie.link.width.current,pcie.link.width.max,persistence_mode,driver_version --format=csv"),
        ("nvidia-smi",): recorded("nvidia-smi"),
        ("nvidia-smi", "topo", "-m"): recorded("nvidia-smi topo -m"),
        ("nvidia-smi", "-q"): details,
    }
    return lambda argv: (0, answers[tuple([argv[0].rsplit("/", 1)[-1]] + argv[1:])], "")


def test_two_h200_of_an_nvswitch_board_in_a_virtual_machine():
    """The 2x H200 lent host: its GPUs registered with a fabric (Completed, Success) that the hypervisor manages:
    NVSwitch, NVLink 4, and no switch of its own."""
    details = (DATA / "h200" / "nvidia-smi-q.txt").read_text()
    nvswitch_driver = ["bind", "module", "new_id", "remove_id", "uevent", "unbind"]
    facts = gather("/usr/bin/nvidia-smi", None, recorded_host(details), None, nvswitch_driver)
    assert facts["fabric"] == {"state": "Completed", "status": "Success"}
    assert (facts["nvswitch"], facts["nvswitch_devices"], facts["nvlink_generation"]) == (True, [], 4)
    assert parse_fabric(details) == [{"state": "Completed", "status": "Success"}] * 2


def raw_section(command):
    """What the 1x H200 lent host printed for a command (tests/data/h200/gpu_services_raw.txt)."""
    text = (DATA / "h200" / "gpu_services_raw.txt").read_text()
    return text.split("$ " + command + "\n", 1)[1].split("\n[exit ")[0]


def test_one_h200_without_a_fabric():
    """The 1x H200 lent host: Fabric N/A, the nvidia-nvswitch driver holds no switch, one GPU: no NVSwitch."""
    details = raw_section("nvidia-smi -q")
    assert parse_fabric(details) == [{"state": None, "status": None}]
    nvswitch_driver = raw_section("ls /sys/bus/pci/drivers/nvidia-nvswitch 2>&1").split()
    facts = nvswitch_facts("ok", [{"compute_capability": "9.0"}], [], {"state": None, "status": None},
                           nvswitch_driver)
    assert facts == {"nvswitch": False, "nvswitch_devices": [], "nvlink_generation": None}


@pytest.mark.parametrize("name,fabric", [
    ("q-fabric-gb200-completed-unhealthy.txt", {"state": "Completed", "status": "Success"}),
    ("q-fabric-completed-insufficient-resources.txt", {"state": "Completed", "status": "Insufficient Resources"}),
])
def test_fabric_sections_of_public_hosts(name, fabric):
    assert parse_fabric(public(name)) == [fabric]
    assert nvswitch_facts("ok", [{"compute_capability": "10.0"}], [], fabric, None)["nvswitch"] is True


def test_the_least_settled_gpu_speaks_for_the_fabric():
    details = "\n".join("    Fabric\n        State : %s\n        Status : %s\n        ClusterUUID : 0" % pair for pair in (
        ("Completed", "Success"), ("Completed", "Insufficient Resources"), ("In Progress", "N/A")))
    assert fabric_summary(parse_fabric(details)) == {"state": "In Progress", "status": None}
    assert fabric_summary(parse_fabric(details.rsplit("    Fabric", 1)[0])) == {
        "state": "Completed", "status": "Insufficient Resources"}
    assert fabric_summary([]) is None


@pytest.mark.parametrize("name,switched", [("topo-h100-8gpu-nvlink.txt", True),
                                           ("topo-h100-4gpu-nv6-direct.txt", False),
                                           ("topo-rtx-4090-8gpu-pcie-sys.txt", False)])
def test_nvswitch_from_the_topology_of_public_hosts(name, switched):
    """8x H100 with NV18 to each of 7 peers (126 links) are behind switches; 4x H100 with NV6 to each of 3 peers
    (18 links) are wired directly."""
    pairs = parse_topology(public(name))["nvlink_pairs"]
    facts = nvswitch_facts("ok", [{"compute_capability": "9.0"}], pairs, None, None)
    assert facts["nvswitch"] is switched
    assert facts["nvlink_generation"] == (4 if pairs else None)


def test_nvswitches_held_by_the_driver_and_a_fabric_not_started():
    facts = nvswitch_facts("ok", [{"compute_capability": "10.0"}], [], {"state": "Not Started", "status": None},
                           ["0000:05:00.0", "bind", "0000:06:00.0", "new_id", "../../../devices/x"])
    assert facts == {"nvswitch": True, "nvswitch_devices": ["0000:05:00.0", "0000:06:00.0"], "nvlink_generation": 5}


def test_no_answer_from_the_driver_leaves_nvswitch_unknown():
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    facts = gather("/usr/bin/nvidia-smi", None, lambda argv: (9, said, ""), None, None)
    assert (facts["nvswitch"], facts["nvlink_generation"], facts["fabric"]) == (None, None, None)


@pytest.mark.parametrize("capability,generation", [
    ("7.0", 2), ("8.0", 3), ("8.6", 3), ("9.0", 4), ("10.0", 5), ("10.3", 5), ("12.0", None)])
def test_the_nvlink_generation_of_each_compute_capability(capability, generation):
    facts = nvswitch_facts("ok", [{"compute_capability": capability}], [[0, 1, 4]], None, None)
    assert facts["nvlink_generation"] == generation


@pytest.mark.parametrize("pairs,switched", [
    ([[0, 1, 18]], False),
    ([[0, 1, 18], [0, 2, 1]], True),
    ([[0, 2, 18], [1, 2, 1]], True),
    ([[0, 1, 12], [0, 2, 6]], False),
], ids=["18 links: direct", "19 links as the first GPU", "19 links as the peer", "18 links to two peers"])
def test_more_nvlinks_than_a_gpu_has_means_nvswitches(pairs, switched):
    assert nvswitch_facts("ok", [{"compute_capability": "9.0"}], pairs, None, None)["nvswitch"] is switched


def test_a_gpu_whose_fabric_has_not_started_speaks_for_the_host():
    fabrics = [{"state": "Completed", "status": "Success"}, {"state": "Not Started", "status": None}]
    assert fabric_summary(fabrics) == {"state": "Not Started", "status": None}


def test_without_a_joined_gpu_the_first_gpus_fabric_speaks():
    assert fabric_summary([{"state": None, "status": None}]) == {"state": None, "status": None}


def test_a_state_line_after_the_fabric_section_is_not_the_fabrics():
    details = ("    Fabric\n        State : N/A\n        Status : N/A\n        CliqueId : N/A\n"
               "        ClusterUUID : N/A\n    Power Smoothing\n        State : Enabled\n"
               "    Fabric\n        State : Completed\n        Status : Success\n        ClusterUUID : 0\n")
    assert parse_fabric(details) == [{"state": None, "status": None}, {"state": "Completed", "status": "Success"}]


# --- text nvidia-smi printed that is none of its own: bounded, cleaned, never a traceback ---------------------------

DIGITS = "9" * 5000  # int() refuses more than 4,300 digits from Python 3.11 on
# Terminal sequences (CSI, OSC, the C1 CSI) and other control characters, none of which a fact may show.
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\x00\x08\x7f\u2028"
MIB = 1 << 20
# A parser of a bounded text takes far less than this on any machine, under make test's load and in the oldest
# Python's container too; the backtracking it replaced took minutes.
BOUND_S = 5.0


def timed(call, *args):
    started = time.monotonic()
    result = call(*args)
    return result, time.monotonic() - started


@pytest.mark.parametrize("digits", [DIGITS, "12345"], ids=["5,000 digits", "5 digits"])
def test_a_gpu_named_with_more_digits_than_a_node_has_gpus_is_no_gpu_of_the_topology(digits):
    text = ("\tGPU0\tGPU1\tGPU%s\tCPU Affinity\nGPU0\t X \tNV18\tSYS\t0-15\nGPU1\tNV18\t X \tSYS\t0-15\n"
            "GPU%s\tSYS\tSYS\t X \t0-15\n" % (digits, digits))
    assert parse_topology(text) == {"matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}},
                                    "nvlink_pairs": [[0, 1, 18]], "interconnect": "nvlink"}


def test_a_link_of_5000_or_4_digits_is_no_nvlink_and_a_long_one_is_shown_cut():
    topology = parse_topology("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV%s\tNV1234\nGPU1\tNV%s\t X \tSYS\n"
                              "GPU2\tNV1234\tSYS\t X \n" % (DIGITS, DIGITS))
    assert (topology["nvlink_pairs"], topology["interconnect"]) == ([], "pcie")
    link = topology["matrix"]["GPU0"]["GPU1"]
    assert link == "NV%s [... %d bytes cut]" % ("9" * (CELL_BYTES - 2), 5002 - CELL_BYTES)


def test_a_number_of_5000_digits_or_of_other_digits_stays_text_cut_to_its_bound():
    # "²" is a digit to str.isdigit() and none to int().
    (gpu,) = parse_query("%s, NVIDIA H200, GPU-1, 9.0, 143771, \u00b2, 5, 16, 16, Enabled, 580.95.05\n" % DIGITS)
    assert gpu["index"] == "%s [... %d bytes cut]" % ("9" * VALUE_BYTES, 5000 - VALUE_BYTES)
    assert (gpu["memory_total_mib"], gpu["pcie_gen_current"], gpu["pcie_gen_max"]) == (143771, "\u00b2", 5)


def test_a_version_of_5000_digits_is_no_version():
    table = "| NVIDIA-SMI 580.95.05   Driver Version: 580.%s   CUDA Version: 13.%s |\n" % (DIGITS, DIGITS)
    assert (parse_cuda_version(table), parse_driver_version(table)) == (None, None)


def hostile_host(argv):
    """nvidia-smi and modinfo answering with terminal sequences and control characters in every value."""
    if argv[0].endswith("modinfo"):
        return 0, "580.95.05%s\n" % ESCAPES, ""
    answers = {
        "--query-gpu": "0, NVIDIA H200%s, GPU-1%s, 9.0, 143771, 5, 5, 16, 16, Enabled%s, 580.95.05%s\n" % (
            (ESCAPES,) * 4),
        "topo": "\x1b[4m\tGPU0\tGPU1%s\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18%s\t0-15\nGPU1\tNV18\t X%s\t0-15\n" % (
            (ESCAPES,) * 3),
        "-q": "    Fabric\n        State : Completed%s\n        Status : Success%s\n        ClusterUUID : 0\n" % (
            ESCAPES, ESCAPES),
    }
    said = "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0%s |\n" % ESCAPES
    return 0, answers.get(argv[1].split("=")[0], said) if len(argv) > 1 else said, ""


def test_terminal_sequences_and_control_characters_reach_no_fact(control_text):
    facts = gather("/usr/bin/nvidia-smi", "/sbin/modinfo", hostile_host, None)
    assert control_text(facts) == []
    assert (facts["state"], facts["gpus"][0]["name"], facts["gpus"][0]["persistence_mode"]) == (
        "ok", "NVIDIA H200", "Enabled")
    assert (facts["kernel_module_installed_version"], facts["cuda_driver_version"]) == ("580.95.05", "13.0")
    assert (facts["nvlink_pairs"], facts["fabric"]) == ([[0, 1, 18]], {"state": "Completed", "status": "Success"})


def test_what_a_broken_driver_said_is_one_clean_line():
    said = "Failed to initialize NVML: Driver/library version mismatch%s\nNVML library version: 580.95" % ESCAPES
    facts = gather("/usr/bin/nvidia-smi", None, lambda argv: (18, said, ""), None)
    assert (facts["state"], facts["message"]) == (
        "driver_mismatch", "Failed to initialize NVML: Driver/library version mismatch NVML library version: 580.95")


TOPOLOGY = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPIX\t0-15\nGPU1\tPIX\t X \t0-15\n"
PIX = {"GPU0": {"GPU1": "PIX"}, "GPU1": {"GPU0": "PIX"}}


def line_of(start, unit, end=""):
    """A line of the table that makes its output 1 MiB: start, unit repeated, end."""
    size = MIB - len(TOPOLOGY) - len(start) - len(end) - 1
    return start + (unit * (size // len(unit) + 1))[:size] + end


@pytest.mark.parametrize("line", [
    line_of("GPU1\t", "NV18\t"), line_of("GPU1\tNV", "9"), line_of("GPU1\t", " ", "x"), line_of("GPU1\t", "\t"),
    line_of("GPU1\t", "\x1b["), line_of("GPU1\t\x1b[", "1;"),
], ids=["200,000 cells", "NV and a million digits", "spaces", "tabs", "CSI starts", "a CSI without end"])
def test_a_1_mib_line_of_the_topology_is_left_out_in_bounded_time(line):
    problems = []
    topology, took = timed(parse_topology, TOPOLOGY + line + "\n", problems)
    assert len(TOPOLOGY + line + "\n") == MIB
    assert topology["matrix"] == PIX and took < BOUND_S
    assert problems == ["printed 1 line(s) of more than %d characters: left out" % LINE_CHARACTERS]


def test_a_table_of_100000_columns_is_bounded():
    header = "\t" + "\t".join("GPU%d" % number for number in range(100000))
    rows = ["GPU%d\t" % number + "\t".join("PIX" for _peer in range(100000)) for number in range(3)]
    problems = []
    topology, took = timed(parse_topology, "\n".join([header] + rows) + "\n", problems)
    assert topology == {"matrix": {}, "nvlink_pairs": [], "interconnect": "none"} and took < BOUND_S
    assert problems == ["printed %d characters: the first %d were read" % (
        len(header) + sum(len(row) + 1 for row in rows) + 1, OUTPUT_CHARACTERS),
        # the header and the first row, cut with the text
        "printed 2 line(s) of more than %d characters: left out" % LINE_CHARACTERS]


def test_a_table_of_more_gpus_than_a_node_has_is_read_for_the_first_of_them():
    count = MAX_GPUS + 44
    names = ["GPU%d" % number for number in range(count)]
    rows = ["%s\t" % name + "\t".join(" X " if peer == name else "SYS" for peer in names) for name in names]
    problems = []
    topology, took = timed(parse_topology, "\n".join(["\t" + "\t".join(names)] + rows) + "\n", problems)
    assert sorted(topology["matrix"]) == sorted(names[:MAX_GPUS]) and took < BOUND_S
    assert all(len(links) == MAX_GPUS - 1 for links in topology["matrix"].values())
    assert problems == ["lists more than %d GPUs: the first %d were read" % (MAX_GPUS, MAX_GPUS)]


def test_a_long_output_is_read_for_its_first_lines_and_characters():
    legend = "  X    = Self\n" * (2 * MIB // 14)
    problems = []
    topology, took = timed(parse_topology, TOPOLOGY + legend, problems)
    assert topology["matrix"] == PIX and took < BOUND_S
    assert problems == [
        "printed %d characters: the first %d were read" % (len(TOPOLOGY + legend), OUTPUT_CHARACTERS),
        "printed more than %d lines: the first %d were read" % (OUTPUT_LINES, OUTPUT_LINES)]


@pytest.mark.parametrize("size", [MIB // 2 - 64, LINE_CHARACTERS - 64], ids=["lines of 512 KiB", "under the line bound"])
def test_a_query_of_lines_built_to_backtrack_is_read_in_bounded_time(size):
    # A header field of brackets without end (a unit's pattern took quadratic time on it), and a name of spaces that
    # ends in no unit (so did MiB's).
    text = "index, name, memory.total [%s\n0, a%sb, 143771 MiB\n1, b, 143771 MiB\n" % ("[" * size, " " * size)
    gpus, took = timed(parse_query, text)
    assert took < BOUND_S
    if size > LINE_CHARACTERS:  # both lines are left out: the next is read with the query's fields
        assert gpus == []
    else:
        assert [gpu["index"] for gpu in gpus] == [0, 1]
        assert gpus[0]["name"] == "a%s [... %d bytes cut]" % (" " * (VALUE_BYTES - 1), size + 2 - VALUE_BYTES)


def test_the_fabric_sections_of_more_gpus_than_a_node_has_are_read_for_the_first_of_them():
    details = "    Fabric\n        State : Completed\n        Status : Success\n        ClusterUUID : 0\n" * 10000
    fabrics, took = timed(parse_fabric, details)
    assert len(fabrics) == MAX_GPUS and took < BOUND_S


def test_gpu_facts_commands_are_bounded_in_time_and_output(monkeypatch):
    """run_command (what gather_host runs by default) is run_bounded's, whose output and time are bounded, not
    Ansible's run_command, which reads all and waits for ever."""
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import owner
    from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import nvidia_smi
    calls = []
    monkeypatch.setattr(owner, "run_bounded", lambda argv, timeout: calls.append((argv, timeout)) or (0, "", ""))
    assert nvidia_smi.run_command(["/usr/bin/nvidia-smi", "-q"]) == (0, "", "")
    assert calls == [(["/usr/bin/nvidia-smi", "-q"], nvidia_smi.COMMAND_TIMEOUT)]
    assert nvidia_smi.gather_host.__defaults__ == (nvidia_smi.run_command,)


def test_the_gpu_list_is_the_querys_alone():
    asked = []
    query = recorded(
        "nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pcie.link.gen.current,pcie.link.gen.max,"
        "pcie.link.width.current,pcie.link.width.max,persistence_mode,driver_version --format=csv")

    def run(argv):
        asked.append(argv)
        return 0, query, ""
    gpus = gpu_list("/usr/bin/nvidia-smi", run)
    assert [(gpu["index"], gpu["uuid"]) for gpu in gpus] == [
        (0, "GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b"), (1, "GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014")]
    assert asked == [["/usr/bin/nvidia-smi"] + list(QUERY_ARGV)]


@pytest.mark.parametrize("nvidia_smi, answer, gpus", [
    (None, None, None),  # not installed: nothing is run
    ("/usr/bin/nvidia-smi", (6, "No devices were found\n", ""), []),
    ("/usr/bin/nvidia-smi", (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", ""),
     None),
    ("/usr/bin/nvidia-smi", (127, "", "nvidia-smi: Permission denied"), None),
])
def test_a_host_whose_gpus_nvidia_smi_cannot_list_has_none_listed(nvidia_smi, answer, gpus):
    assert gpu_list(nvidia_smi, lambda argv: answer) == gpus
