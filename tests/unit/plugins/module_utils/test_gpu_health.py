"""Tell a sick GPU from a healthy one: the gpu_health core on real outputs (tests/data/gpu_health, the H200's in
tests/data/h200, the kernel lines of tests/data/kernel_log), false alarms included."""
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_health as core

DATA = Path(__file__).resolve().parents[3] / "data"
H200_BUS_ID = "00000000:00:06.0"


def text(name):
    return (DATA / name).read_text()


def findings(health):
    return [(finding["id"], finding["severity"]) for gpu in health["gpus"] for finding in gpu["findings"]] + [
        (finding["id"], finding["severity"]) for finding in health["findings"]]


def assess(details, **more):
    return core.assess("ok", "", details, **more)


@pytest.mark.parametrize("name, gpus, info", [
    ("h200/nvidia-smi-q.txt", 2, []),
    # The lent H200 of 2026-12-06 had replayed one PCIe packet: worth showing, not a fault.
    ("h200/gpu_health_q.txt", 1, [("pcie_replays", "info")]),
    # An idle A10 at PCIe Gen 1 of 4, all 16 lanes: the link slows down to save power.
    ("gpu_health/q-a10-idle-gen1-of-4.txt", 1, []),
    # A V100 on driver 580 with the older "Single Bit"/"Double Bit" ECC counters, all zero.
    ("gpu_health/q-ecc-v100-driver-580-single-double-bit.txt", 1, []),
])
def test_healthy_real_outputs_come_out_healthy_without_a_false_alarm(name, gpus, info):
    health = assess(text(name))
    assert (health["verdict"], len(health["gpus"]), findings(health)) == ("healthy", gpus, info)


def test_the_h200s_facts_are_read():
    gpu = assess(text("h200/nvidia-smi-q.txt"))["gpus"][0]
    assert dict((key, gpu[key]) for key in (
        "index", "bus_id", "name", "persistence_mode", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
        "pcie_width_max", "temperature_c", "power_draw_w", "power_limit_w", "fabric_state", "fabric_status")) == dict(
        index=0, bus_id=H200_BUS_ID, name="NVIDIA H200", persistence_mode="Enabled", pcie_gen_current=5,
        pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16, temperature_c=37, power_draw_w=80.10,
        power_limit_w=700, fabric_state="Completed", fabric_status="Success")


def test_hw_power_brake_slowdown_degrades_the_node_with_its_evidence_and_action():
    health = assess(text("gpu_health/q-a10-hw-power-brake-slowdown.txt"))
    assert health["verdict"] == "degraded"
    assert [(finding["id"], finding["evidence"], finding["action"]) for finding in health["gpus"][0]["findings"]] == [
        ("hw_slowdown", "Clocks Event Reasons > HW Slowdown: Active", "check_cooling_and_power"),
        ("hw_power_brake_slowdown", "Clocks Event Reasons > HW Power Brake Slowdown: Active",
         "check_cooling_and_power")]


def test_pending_row_remapping_asks_for_a_gpu_reset():
    # gpud's report shows the section alone; it is put under a GPU of nvidia-smi -q here.
    health = assess("GPU 00000000:0A:00.0\n" + text("gpu_health/q-remapped-rows-pending-excerpt.txt"))
    finding = health["gpus"][0]["findings"][0]
    assert (health["verdict"], finding["id"], finding["evidence"], finding["action"]) == (
        "degraded", "row_remap_pending", "Remapped Rows > Pending: Yes", "reset_gpu")


def h200_with(old, new):
    details = text("h200/gpu_health_q.txt")
    assert old in details
    return details.replace(old, new)


# Faults no public report showed as a whole `nvidia-smi -q`: the H200's real output with one field as NVIDIA's
# documentation says it reads when the fault is there.
@pytest.mark.parametrize("old, new, expected", [
    ("Remapping Failure Occurred                     : No", "Remapping Failure Occurred                     : Yes",
     ("row_remap_failure", "unhealthy", "drain_and_open_case")),
    ("Pending Page Blacklist                         : N/A", "Pending Page Blacklist                         : Yes",
     ("retired_pages_pending", "degraded", "reset_gpu")),
    ("            DRAM Uncorrectable                         : 0\n        Aggregate",
     "            DRAM Uncorrectable                         : 2\n        Aggregate",
     ("ecc_uncorrectable", "unhealthy", "reset_gpu")),
    ("            DRAM Correctable                           : 0\n            DRAM Uncorrectable"
     "                         : 0\n            SRAM Threshold",
     "            DRAM Correctable                           : 0\n            DRAM Uncorrectable"
     "                         : 3\n            SRAM Threshold",
     ("ecc_uncorrectable_aggregate", "info", "none")),
    ("SRAM Threshold Exceeded                    : No", "SRAM Threshold Exceeded                    : Yes",
     ("sram_threshold_exceeded", "unhealthy", "drain_and_open_case")),
    ("Channel Repair Pending                         : No", "Channel Repair Pending                         : Yes",
     ("memory_repair_pending", "degraded", "reset_gpu")),
    ("Unrepairable Memory                            : No", "Unrepairable Memory                            : Yes",
     ("unrepairable_memory", "unhealthy", "drain_and_open_case")),
    ("GPU Recovery Action                                : None", "GPU Recovery Action                     : Reset",
     ("gpu_reset_required", "unhealthy", "reset_gpu")),
    ("GPU Recovery Action                                : None", "GPU Recovery Action                    : Reboot",
     ("node_reboot_required", "unhealthy", "reboot")),
    ("Current                                : 16x", "Current                                : 8x",
     ("pcie_width_degraded", "degraded", "check_pcie_link")),
    ("HW Thermal Slowdown                        : Not Active", "HW Thermal Slowdown                        : Active",
     ("hw_thermal_slowdown", "degraded", "check_cooling_and_power")),
    ("SW Thermal Slowdown                            : Not Active",
     "SW Thermal Slowdown                            : Active",
     ("sw_thermal_slowdown", "degraded", "check_cooling_and_power")),
    ("SW Power Cap                                   : Not Active",
     "SW Power Cap                                   : Active", ("sw_power_cap", "info", "none")),
    ("GPU T.Limit Temp                               : 51 C", "GPU T.Limit Temp                               : -1 C",
     ("temperature_above_max_operating", "degraded", "check_cooling_and_power")),
    ("Current Power Limit                            : 700.00 W",
     "Current Power Limit                            : 500.00 W", ("power_limit_below_default", "info", "none")),
    ("Persistence Mode                                   : Enabled",
     "Persistence Mode                                   : Disabled",
     ("persistence_mode_disabled", "info", "enable_persistence")),
])
def test_each_fault_gives_its_finding(old, new, expected):
    found = [(finding["id"], finding["severity"], finding["action"])
             for finding in assess(h200_with(old, new))["gpus"][0]["findings"] if finding["id"] != "pcie_replays"]
    assert found == [expected]


# The 2-GPU H200 host, whose GPUs joined their NVSwitch fabric: its first GPU as a fabric's faults show it.
@pytest.mark.parametrize("old, new, expected", [
    ("State                                          : Completed",
     "State                                          : Not Started", ("fabric_not_ready", "unhealthy")),
    ("Status                                         : Success",
     "Status                                         : Insufficient Resources", ("fabric_error", "unhealthy")),
])
def test_a_fabric_not_joined_is_unhealthy(old, new, expected):
    health = assess(text("h200/nvidia-smi-q.txt").replace(old, new, 1))
    assert [[(finding["id"], finding["severity"]) for finding in gpu["findings"]] for gpu in health["gpus"]] == [
        [expected], []]


def test_a_busy_gpu_below_its_pcie_generation_is_told_but_an_idle_one_is_not():
    busy = h200_with("Idle                                           : Active",
                     "Idle                                           : Not Active")
    slow = "Current                                : 3"
    assert findings(assess(busy.replace("Current                                : 5", slow))) == [
        ("pcie_gen_below_max", "info"), ("pcie_replays", "info")]
    idle = h200_with("Current                                : 5", slow)
    assert findings(assess(idle)) == [("pcie_replays", "info")]


def test_an_older_drivers_temperatures_are_compared_themselves():
    hot = text("gpu_health/q-a10-idle-gen1-of-4.txt").replace(
        "GPU Current Temp                  : 33 C", "GPU Current Temp                  : 92 C")
    assert findings(assess(hot)) == [("temperature_above_max_operating", "degraded")]


def test_a_gb200s_unhealthy_fabric_is_degraded():
    details = "GPU 00000000:01:00.0\n" + text("nvidia_smi/q-fabric-gb200-completed-unhealthy.txt")
    assert findings(assess(details)) == [("fabric_unhealthy", "degraded")]


def test_nvlink_errors_go_to_the_gpu_of_their_uuid_and_summary_lines_are_no_counters():
    errors = core.parse_nvlink_errors(text("gpu_health/nvlink-e-v100-replay-crc-errors.txt"))
    assert errors == {
        "GPU-5261e3df-82f6-67b4-9953-4e63527e0e9d": ["GPU 0 Link 3: Replay Errors: 2353"],
        "GPU-d9eeee97-c180-66de-23e0-d995387934dc": ["GPU 2 Link 0: Replay Errors: 148",
                                                     "GPU 2 Link 0: CRC Errors: 65535"]}
    details = h200_with("GPU-2dc4fe22-818c-fccb-029b-e0ea6bc3098c", "GPU-d9eeee97-c180-66de-23e0-d995387934dc")
    health = assess(details, nvlink=text("gpu_health/nvlink-e-v100-replay-crc-errors.txt"))
    assert health["verdict"] == "degraded"
    assert [finding["evidence"] for finding in health["gpus"][0]["findings"] if finding["id"] == "nvlink_errors"] == [
        "GPU 2 Link 0: Replay Errors: 148; GPU 2 Link 0: CRC Errors: 65535"]


def test_the_h200s_empty_nvlink_output_has_no_errors():
    assert core.parse_nvlink_errors(text("h200/gpu_health_nvlink.txt")) == {}


def kernel(name):
    return text("kernel_log/" + name).splitlines()


@pytest.mark.parametrize("name, xid, severity, action", [
    ("xid-79-fallen-off-the-bus-journal.txt", 79, "unhealthy", "reboot"),
    ("xid-63-row-remapper.txt", 63, "degraded", "reset_gpu"),
    ("xid-94-contained-ecc.txt", 94, "degraded", "restart_app"),
    ("xid-119-gsp-timeout.txt", 119, "unhealthy", "reset_gpu"),
    ("xid-13-unknown-process-dmesg-ctime.txt", 13, "info", "restart_app"),
    ("xid-31-before-pci-prefix-syslog.txt", 31, "info", "restart_app"),
])
def test_xids_since_boot_count_as_the_catalogue_says(name, xid, severity, action):
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=kernel(name))
    finding = health["findings"][0]
    assert (finding["id"], finding["severity"], finding["action"]) == ("xid_%d" % xid, severity, action)
    assert health["verdict"] == core.VERDICT_OF[severity]


def test_an_xid_of_a_listed_gpu_is_that_gpus_and_repeats_are_counted():
    line = "NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus."
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=[line, line])
    finding = [finding for finding in health["gpus"][0]["findings"] if finding["id"] == "xid_79"][0]
    assert (finding["gpu"], finding["count"], finding["evidence"], health["findings"]) == (H200_BUS_ID, 2, line, [])


def test_the_h200s_boot_time_nvrm_lines_are_no_errors():
    # An FBHUB interrupt cleared at boot and the persistence mode deprecation notice, as the lent H200 logs them.
    lines = text("h200/gpu_health_kernel.txt").splitlines()
    assert any("FBHUB" in line for line in lines) and any("Persistence mode is deprecated" in line for line in lines)
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=lines)
    assert (health["verdict"], health["xid_count"], health["findings"]) == ("healthy", 0, [])


def test_an_unknown_xid_is_told_with_the_catalogue_to_look_it_up():
    line = "NVRM: Xid (PCI:0000:00:06): 149, some new fault"
    finding = assess(text("h200/gpu_health_q.txt"), kernel_lines=[line])["gpus"][0]["findings"][-1]
    assert (finding["id"], finding["severity"], finding["action"]) == ("xid_149", "info", "look_up_xid")


def test_a_node_whose_driver_is_broken_is_unknown_unless_the_kernel_log_shows_it_unhealthy():
    message = text("nvidia_smi/error-no-driver.txt").strip()
    unknown = core.assess("no_driver", message, "")
    assert (unknown["verdict"], unknown["gpus"]) == ("unknown", [])
    assert message in unknown["reason"]
    fallen = core.assess("no_driver", message, "", kernel_lines=kernel("xid-79-fallen-off-the-bus-journal.txt"))
    assert fallen["verdict"] == "unhealthy"


def test_severity_overrides_change_the_verdict():
    details = h200_with("Current                                : 16x", "Current                                : 8x")
    assert assess(details, severity_overrides={"pcie_width_degraded": "info"})["verdict"] == "healthy"
    assert assess(details, kernel_lines=kernel("xid-13-unknown-process-dmesg-ctime.txt"),
                  severity_overrides={"xid_13": "unhealthy"})["verdict"] == "unhealthy"


@pytest.mark.parametrize("overrides, words", [
    ({"pcie_lanes": "info"}, ["severity_overrides", "'pcie_lanes'", "pcie_width_degraded", "xid_<number>"]),
    ({"pcie_width_degraded": "fatal"}, ["severity_overrides", "'fatal'", "unhealthy, degraded, info"]),
])
def test_an_unknown_override_is_refused_naming_the_option_and_the_known_ones(overrides, words):
    with pytest.raises(InvalidOption) as raised:
        core.check_options(overrides, 1, False)
    assert all(word in str(raised.value) for word in words), str(raised.value)


def test_only_dcgm_level_1_runs_unless_long_levels_are_allowed():
    with pytest.raises(InvalidOption, match="dcgm_diag_allow_long"):
        core.check_options({}, 3, False)
    core.check_options({}, 3, True)


def test_a_failed_dcgm_test_is_unhealthy_with_its_warning_and_passes_are_not_findings():
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r2-pcie-fail.txt"))
    assert [(result["test"], result["result"]) for result in results if result["result"] != "Pass"] == [
        ("PCIe", "Fail"), ("GPU Memory", "Skip")]
    health = assess(text("h200/gpu_health_q.txt"), dcgm_results=results)
    finding = health["findings"][0]
    assert (health["verdict"], finding["id"], finding["action"]) == ("unhealthy", "dcgm_diag_failed",
                                                                     "read_dcgm_diag")
    assert finding["evidence"].startswith("PCIe: Fail All; GPU 0 Error using CUDA API cudaDeviceGetByPCI BusId")
    passed = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-deployment-pass-a10g.txt"))
    assert len(passed) == 9 and assess(text("h200/gpu_health_q.txt"), dcgm_results=passed)["findings"] == []


OPTIONS = dict(severity_overrides={}, kernel_log=True, dcgm_diag=False, dcgm_diag_level=1)


def test_gather_runs_the_commands_as_argv_and_reads_the_kernel_log_through_its_core(recorder):
    run, calls = recorder({("-q",): (0, text("h200/gpu_health_q.txt"), ""),
                           ("nvlink", "-e"): (0, "", "")})
    health = core.gather("/usr/bin/nvidia-smi", None, run,
                         lambda: (text("h200/gpu_health_kernel.txt").splitlines(), "dmesg", None), OPTIONS)
    assert calls == [["/usr/bin/nvidia-smi", "-q"], ["/usr/bin/nvidia-smi", "nvlink", "-e"]]
    assert (health["verdict"], health["kernel_log"], health["dcgm_diag"]) == (
        "healthy", dict(read=True, source="dmesg", problem=None), None)


def test_gather_says_why_without_nvidia_smi_or_dcgmi():
    health = core.gather(None, None, None, lambda: (None, None, "kernel log not readable"),
                         dict(OPTIONS, dcgm_diag=True))
    assert (health["verdict"], health["state"]) == ("unknown", "no_nvidia_smi")
    assert health["kernel_log"]["problem"] == "kernel log not readable"
    assert "dcgmi is not installed" in health["dcgm_diag"]["problem"]


def test_gather_runs_dcgmi_at_the_level_asked(recorder):
    run, calls = recorder({("-q",): (0, text("h200/gpu_health_q.txt"), ""), ("nvlink", "-e"): (0, "", ""),
                           ("diag", "-r", "1"): (226, text("gpu_health/dcgmi-diag-r2-pcie-fail.txt"), "")})
    health = core.gather("/usr/bin/nvidia-smi", "/usr/bin/dcgmi", run, None,
                         dict(OPTIONS, kernel_log=False, dcgm_diag=True))
    assert calls[-1] == ["/usr/bin/dcgmi", "diag", "-r", "1"]
    assert (health["verdict"], health["dcgm_diag"]["rc"], health["kernel_log"]["read"]) == ("unhealthy", 226, False)


def test_an_older_gpus_volatile_double_bit_total_is_an_uncorrectable_error():
    clean = text("gpu_health/q-ecc-v100-driver-580-single-double-bit.txt")
    double_bit = "            Double Bit            \n"
    volatile_total = "                CBU                       : 0\n                Total                     : 0\n"
    start = clean.index(double_bit)
    at = clean.index(volatile_total, start)
    broken = clean[:at] + volatile_total.replace("Total                     : 0", "Total                     : 1") + \
        clean[at + len(volatile_total):]
    health = assess(broken)
    assert findings(health) == [("ecc_uncorrectable", "unhealthy")]
    assert health["gpus"][0]["findings"][0]["evidence"] == "ECC Errors > Volatile > Double Bit > Total: 1"


def two_h200s_with_the_second_ones(old, new):
    """The 2-GPU H200 host's nvidia-smi -q with one field of its second GPU as old's fault shows it."""
    first, second = text("h200/nvidia-smi-q.txt").split("GPU 00000000:00:07.0", 1)
    assert old in second
    return first + "GPU 00000000:00:07.0" + second.replace(old, new, 1)


REMAP_FAILED = ("Remapping Failure Occurred                     : No",
                "Remapping Failure Occurred                     : Yes")


def test_a_healthy_nodes_summary_is_its_verdict_and_reason():
    assert assess(text("h200/nvidia-smi-q.txt"))["summary"] == "healthy: 2 GPU(s), no unhealthy or degraded finding"


def test_the_summary_names_each_unhealthy_then_each_degraded_finding_with_its_gpu_evidence_and_action():
    details = two_h200s_with_the_second_ones(*REMAP_FAILED).replace(
        "Current                                : 16x", "Current                                : 8x", 1)
    health = assess(details)
    assert health["summary"] == (
        "unhealthy: 1 unhealthy and 1 degraded finding(s): "
        "GPU 1 (00000000:00:07.0) row_remap_failure (Remapped Rows > Remapping Failure Occurred: Yes) "
        "-> drain_and_open_case; "
        "GPU 0 (00000000:00:06.0) pcie_width_degraded (PCI > GPU Link Info > Link Width > Current: 8x; "
        "PCI > GPU Link Info > Link Width > Max: 16x) -> check_pcie_link")


def test_a_finding_is_described_whole_for_a_refusal():
    health = assess(two_h200s_with_the_second_ones(*REMAP_FAILED))
    (finding,) = core.findings_of(health, "unhealthy")
    assert core.describe(finding, health["gpus"]) == (
        "GPU 1 (00000000:00:07.0) is unhealthy: row_remap_failure, Row remapping failed: a bank has no spare row left "
        "(NVIDIA's RMA criterion). Evidence: Remapped Rows > Remapping Failure Occurred: Yes. Action "
        "drain_and_open_case: Drain the node and open a case with NVIDIA or the system's vendor (RMA).")
    assert core.findings_of(health, "degraded") == []


def test_an_xid_of_a_gpu_nvidia_smi_no_longer_lists_and_a_dcgm_result_are_said_to_be_whose_they_are():
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r2-pcie-fail.txt"))
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=kernel("xid-79-fallen-off-the-bus-journal.txt"),
                    dcgm_results=results)
    said = [core.where(finding, health["gpus"]) for finding in core.findings_of(health, "unhealthy")]
    fallen = health["findings"][0]["gpu"]
    assert said == ["the GPU at %s, which nvidia-smi does not list" % fallen, "the node"]
    assert "the GPU at %s, which nvidia-smi does not list xid_79 (" % fallen in health["summary"]


def test_an_unknown_nodes_summary_says_why():
    health = core.assess("no_nvidia_smi", "nvidia-smi is not installed", "")
    assert health["summary"] == (
        "unknown: nvidia-smi could not report on the GPUs (no_nvidia_smi): nvidia-smi is not installed")


def test_an_unknown_override_is_named_as_the_caller_names_the_setting():
    with pytest.raises(InvalidOption) as raised:
        core.check_options({"pcie_lanes": "info"}, 1, False, option="preflight_gpu_health_severity_overrides")
    assert str(raised.value).startswith("preflight_gpu_health_severity_overrides: 'pcie_lanes' is no finding id")
