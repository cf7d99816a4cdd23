"""Tell a sick GPU from a healthy one: the gpu_health core on real outputs (tests/data/gpu_health, the H200's in
tests/data/h200, the kernel lines of tests/data/kernel_log), false alarms included."""
import json
import re
import time
import tracemalloc
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


@pytest.mark.parametrize("name, xid, severity, action, bucket, verdict", [
    ("xid-79-fallen-off-the-bus-journal.txt", 79, "unhealthy", "reboot", "RESTART_BM", "unhealthy"),
    # The catalogue: a row marked for remapping is IGNORE (the pending remap in nvidia-smi -q is the finding).
    ("xid-63-row-remapper.txt", 63, "info", "none", "IGNORE", "healthy"),
    ("xid-94-contained-ecc.txt", 94, "info", "restart_app", "RESTART_APP", "healthy"),
    ("xid-119-gsp-timeout.txt", 119, "unhealthy", "reset_gpu", "RESET_GPU", "unhealthy"),
    # Three Xid 13 (the application's), then an Xid 109, a context switch timeout: RESET_GPU.
    ("xid-13-unknown-process-dmesg-ctime.txt", 13, "info", "restart_app", "RESTART_APP", "unhealthy"),
    ("xid-31-before-pci-prefix-syslog.txt", 31, "info", "restart_app", "RESTART_APP", "healthy"),
])
def test_xids_since_boot_count_as_the_catalogue_says(name, xid, severity, action, bucket, verdict):
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=kernel(name))
    finding = health["findings"][0]
    assert (finding["id"], finding["severity"], finding["action"], finding["bucket"]) == (
        "xid_%d" % xid, severity, action, bucket)
    assert health["verdict"] == verdict


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


@pytest.mark.parametrize("xid", [999, 167])
def test_an_xid_the_catalogue_gives_no_bucket_is_looked_up_neither_healthy_nor_unhealthy(xid):
    # 999: no Xid of the catalogue; 167 (PCIE_FATAL_TIMEOUT): listed, its bucket left empty in this release.
    line = "NVRM: Xid (PCI:0000:00:06): %d, some new fault" % xid
    finding = assess(text("h200/gpu_health_q.txt"), kernel_lines=[line])["gpus"][0]["findings"][-1]
    assert (finding["id"], finding["severity"], finding["action"], finding["bucket"]) == (
        "xid_%d" % xid, "degraded", "look_up_xid", "CONTACT_SUPPORT")


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


def test_a_failed_dcgm_test_is_rated_as_dcgm_rates_its_message_and_passes_are_not_findings():
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r2-pcie-fail.txt"))
    assert [(result["test"], result["result"]) for result in results if result["result"] != "Pass"] == [
        ("PCIe", "Fail"), ("GPU Memory", "Skip")]
    health = assess(text("h200/gpu_health_q.txt"), dcgm_results=results)
    finding = health["findings"][0]
    # DCGM_FR_CUDA_API, "Error using CUDA API %s": DCGM_ERROR_MONITOR (the CUDA driver did not match the display
    # driver, the message goes on).
    assert (health["verdict"], finding["id"], finding["severity"], finding["action"], finding["bucket"]) == (
        "degraded", "dcgm_diag_failed", "degraded", "read_dcgm_diag", "IGNORE")
    assert finding["summary"].endswith("DCGM rates it DCGM_FR_CUDA_API (MONITOR)")
    # The message's wrapped pieces joined as DCGM cut them, mid-word.
    assert finding["evidence"].startswith(
        "PCIe: Fail All; GPU 0 Error using CUDA API cudaDeviceGetByPCIBusId Check DCGM and system logs for errors. "
        "Reset GPU. Restart DCGM. Rerun diagnostics. 'system has unsupported display driver / cuda driver "
        "combination' for GPU 0, bus ID = 00000000:1B:00.0")
    assert finding["gpus"] == [H200_BUS_ID]
    passed = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-deployment-pass-a10g.txt"))
    assert len(passed) == 9 and assess(text("h200/gpu_health_q.txt"), dcgm_results=passed)["findings"] == []


OPTIONS = dict(severity_overrides={}, kernel_log=True, dcgm_diag=False, dcgm_diag_level=1)


def test_gather_runs_the_commands_as_argv_and_reads_the_kernel_log_through_its_core(recorder):
    run, calls = recorder({("-q",): (0, text("h200/gpu_health_q.txt"), ""),
                           ("nvlink", "-e"): (0, "", ""), ("nvlink", "-s"): (0, "", "")})
    health = core.gather("/usr/bin/nvidia-smi", None, run,
                         lambda: (text("h200/gpu_health_kernel.txt").splitlines(), "dmesg", None), OPTIONS)
    assert calls == [["/usr/bin/nvidia-smi", "-q"], ["/usr/bin/nvidia-smi", "nvlink", "-e"],
                     ["/usr/bin/nvidia-smi", "nvlink", "-s"]]
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
                           ("nvlink", "-s"): (0, "", ""),
                           ("diag", "-r", "1"): (226, text("gpu_health/dcgmi-diag-r2-pcie-fail.txt"), "")})
    health = core.gather("/usr/bin/nvidia-smi", "/usr/bin/dcgmi", run, None,
                         dict(OPTIONS, kernel_log=False, dcgm_diag=True))
    assert calls[-1] == ["/usr/bin/dcgmi", "diag", "-r", "1"]
    assert (health["verdict"], health["dcgm_diag"]["rc"], health["kernel_log"]["read"]) == ("degraded", 226, False)


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
    said = [core.where(finding, health["gpus"]) for finding in core.findings_of(health, "unhealthy")
            + core.findings_of(health, "degraded")]
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


# Broken or hostile outputs (a program of the name first on the PATH prints what it likes): each parser runs in linear
# time on lines built to make a backtracking pattern run for hours, the result is bounded and clean, and it says what
# was cut.
MIB = 1 << 20
QUICK_S = 5
RESULT_CONTROL = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
NVLINK_GPU_LINE = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5261e3df-82f6-67b4-9953-4e63527e0e9d)"


def quickly(function, *args, **kwargs):
    start = time.monotonic()
    result = function(*args, **kwargs)
    took = time.monotonic() - start
    assert took < QUICK_S, "took %.1f s" % took
    return result


def one_mib(prefix, unit, suffix=""):
    """A line of nearly 1 MiB (its output stays under the bound of 1 MiB of dcgmi diag): prefix, unit repeated,
    suffix."""
    return prefix + unit * ((MIB - 1024 - len(prefix) - len(suffix)) // len(unit)) + suffix


def texts(value):
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in texts(key) + texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in texts(item)]
    return [value] if isinstance(value, str) else []


def bounded(health, size=MIB):
    """health, once checked to be smaller than size as JSON and to hold no control character in any text."""
    assert len(json.dumps(health)) < size
    assert [text for text in texts(health) if RESULT_CONTROL.search(text)] == []
    return health


@pytest.mark.parametrize("row", [
    # One cell of spaces not closed, within the first 4 KiB that are read of a line: the old pattern's three
    # quantifiers over the spaces backtracked cubically (2,000 characters took 8 s, 5,000 took 140 s).
    one_mib("|" + " " * 4000 + "x", " "),
    one_mib("| ", "a ", "|"),
    one_mib("|", " |"),
    one_mib("| test |", " ", "Pass"),
    one_mib("| test | Pass", " -"),
])
def test_a_1_mib_dcgm_row_is_read_in_linear_time_and_cut(row):
    reading = core.Reading()
    results = quickly(core.parse_dcgm_diag, row + "\n| PCIe | Fail - All |\n", reading)
    assert results[-1] == dict(test="PCIe", result="Fail", detail="All")
    assert all(len(value) < 2100 for result in results for value in result.values())
    assert reading.cut == ["dcgmi diag: 1 line(s) longer than 4096 characters, each cut to that"]


def test_a_flood_of_dcgm_rows_and_of_a_warnings_lines_is_bounded_and_said():
    reading = core.Reading()
    flood = "| Memory | Fail - All |\n| Warning | first |\n" + "|  | more |\n" * 9000 + "| PCIe | Warn |\n" * 9000
    results = quickly(core.parse_dcgm_diag, flood, reading)
    assert len(results) == core.DCGM_ROWS and len(results[0]["warning"]) < 2100
    # 10,000 lines: the Fail row, its warning of 9,001 lines, then 998 Warn rows.
    assert reading.cut == ["dcgmi diag: more than 10000 lines, the first 10000 read",
                           "dcgmi diag: 999 rows, the first 64 read"]
    health = bounded(assess(text("h200/gpu_health_q.txt"), dcgm_results=results))
    assert (health["verdict"], health["counts"]["degraded"]) == ("unhealthy", 63)


def test_a_warning_of_a_row_past_the_64th_is_no_other_rows():
    rows = core.parse_dcgm_diag("| PCIe | Fail |\n| Warning | its own |\n" * 70)
    assert [row["warning"] for row in rows] == ["its own"] * 64
    rows = core.parse_dcgm_diag("| PCIe | Warn |\n" * 64 + "| PCIe | Fail |\n| Warning | not the 64th's |\n")
    assert "warning" not in rows[-1]


@pytest.mark.parametrize("line", [
    # Many "Errors" without a colon, then no number: the old pattern tried each as the name's, quadratically
    # (64 KiB took 6 s, 128 KiB 30 s).
    one_mib("\t Link 0: ", "Errors ", ": x"),
    one_mib("\t Link 0: ", "Errors: "),
    one_mib("\t Link 0: Replay Errors: ", "9"),
    one_mib("GPU 1: ", "(UUID: GPU-"),
    one_mib("GPU 1: (UUID: GPU-", "a"),
])
def test_a_1_mib_nvlink_line_is_read_in_linear_time_and_cut(line):
    reading = core.Reading()
    found = quickly(core.parse_nvlink_errors, "\n".join([NVLINK_GPU_LINE, line, "\t Link 3: Replay Errors: 7"]),
                    reading)
    assert found == {"GPU-5261e3df-82f6-67b4-9953-4e63527e0e9d": ["GPU 0 Link 3: Replay Errors: 7"]}
    assert reading.cut == ["nvidia-smi nvlink -e: 1 line(s) longer than 4096 characters, each cut to that"]


def test_1_mib_of_nvlink_lines_built_to_backtrack_is_read_in_linear_time():
    # Each line just short of the 4 KiB read of a line: the old pattern took each "Errors" for the name's
    # (4 KiB lines: 25 ms each).
    lines = ["\t Link 0: " + "Errors " * 580 + ": x"] * 256
    reading = core.Reading()
    found = quickly(core.parse_nvlink_errors, "\n".join([NVLINK_GPU_LINE] + lines + ["\t Link 3: CRC Errors: 7"]),
                    reading)
    assert (found, reading.cut) == ({"GPU-5261e3df-82f6-67b4-9953-4e63527e0e9d": ["GPU 0 Link 3: CRC Errors: 7"]}, [])


def test_numbers_of_more_than_20_digits_are_no_numbers_and_raise_nothing():
    huge = "9" * 4400  # int() refuses more than 4300 digits
    found = core.parse_nvlink_errors("\n".join([
        NVLINK_GPU_LINE, "\t Link %s: Replay Errors: 5" % huge, "\t Link 1: Replay Errors: %s" % huge,
        "\t Link 2: CRC Errors: 18446744073709551615", "GPU %s: NVIDIA H100 (UUID: GPU-d9eeee97)" % huge,
        "\t Link 3: CRC Errors: 1"]))
    assert found == {"GPU-5261e3df-82f6-67b4-9953-4e63527e0e9d": [
        "GPU 0 Link 2: CRC Errors: 18446744073709551615", "GPU 0 Link 3: CRC Errors: 1"]}
    details = h200_with("Replays Since Reset                            : 1",
                        "Replays Since Reset                            : " + huge).replace(
        "GPU Current Temp                               : 36 C", "GPU Current Temp : %s.%s C" % (huge, huge))
    health = assess(details, kernel_lines=["NVRM: Xid (PCI:0000:00:06): %s, pid=%s, name=x, y" % (huge, huge)])
    assert (health["verdict"], findings(health), health["xid_count"]) == ("healthy", [], 0)
    assert (health["gpus"][0]["temperature_c"], health["gpus"][0]["pcie_gen_max"]) == (None, 5)


def field_flood():
    """8 sections of 4,000-character names, nested, then 200,000 short fields below them: 6 MB, on which building
    each field's printed label took 3 GB."""
    sections = "".join("  " * depth + "S" * 4000 + "%d\n" % depth for depth in range(8))
    return "GPU 00000000:00:06.0\n" + sections + "".join("  " * 8 + "Field %06d : 1\n" % n for n in range(200000))


FLOOD_CUT = ["nvidia-smi -q: 6.3 MiB of output, cut to its first 4.0 MiB",
             "nvidia-smi -q: more than 65536 lines, the first 65536 read",
             "nvidia-smi -q: 63479 field(s) past the first 2048 of a GPU, not read"]


def test_a_flood_of_fields_below_long_sections_is_read_in_linear_time_and_cut():
    health = bounded(quickly(assess, field_flood()))
    assert (health["verdict"], len(health["gpus"]), health["cut"]) == ("unknown", 1, FLOOD_CUT)
    assert health["reason"] == "not all of the commands' output was read: " + "; ".join(FLOOD_CUT)


def test_a_flood_of_fields_below_long_sections_is_read_in_bounded_memory():
    flood = field_flood()
    tracemalloc.start()
    try:
        assess(flood)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB, "peak %.0f MiB" % (peak / MIB)


def test_sections_nested_too_deep_are_not_read():
    nested = "".join("    " * (depth + 1) + "Section %d\n" % depth for depth in range(12))
    reading = core.Reading()
    (gpu,) = core.parse_details("GPU 00000000:00:06.0\n" + nested + "    " * 13 + "Pending : Yes\n"
                                "    Persistence Mode : Enabled\n", reading)
    assert gpu["fields"] == {("persistence mode",): "Enabled"}
    assert reading.cut == ["nvidia-smi -q: 5 line(s) in sections nested more than 8 deep, not read"]


def many_gpus(count):
    return "".join("GPU 00000000:%02X:%02X.0\n    Product Name : NVIDIA H200\n    GPU UUID : GPU-%08x\n"
                   "    Persistence Mode : Disabled\n" % (n // 256 % 256, n % 32, n) for n in range(count))


def test_10000_gpus_are_bounded_to_the_first_256_and_said():
    nvlink = "".join("GPU %d: NVIDIA H200 (UUID: GPU-%08x)\n\t Link 0: Replay Errors: 1\n" % (n, n)
                     for n in range(10000))
    health = bounded(quickly(assess, many_gpus(10000), nvlink=nvlink))
    # Persistence mode off on every GPU is one finding, the node's.
    assert (len(health["gpus"]), health["verdict"], health["counts"]) == (
        256, "unknown", {"unhealthy": 0, "degraded": 256, "info": 1})
    assert health["cut"] == ["nvidia-smi -q: 10000 GPUs listed, the first 256 assessed",
                             "nvidia-smi nvlink -e: 10000 GPUs listed, the first 256 read"]


def test_past_max_findings_the_worst_are_returned_and_all_counted(monkeypatch):
    monkeypatch.setattr(core, "MAX_FINDINGS", 2)
    details = two_h200s_with_the_second_ones(*REMAP_FAILED).replace(
        "Current                                : 16x", "Current                                : 8x", 1).replace(
        "Persistence Mode                                   : Enabled",
        "Persistence Mode                                   : Disabled")
    health = assess(details)
    # Persistence mode off on both GPUs is one finding, the node's.
    assert (health["verdict"], health["counts"], findings(health)) == (
        "unhealthy", {"unhealthy": 1, "degraded": 1, "info": 1},
        [("pcie_width_degraded", "degraded"), ("row_remap_failure", "unhealthy")])
    assert health["cut"] == ["findings: 3, the 2 worst returned"]


def test_terminal_escapes_and_control_characters_from_outside_reach_no_result():
    escaped = {"NVIDIA H200": "NVIDIA \x1b[31mH200\x1b[0m", "GPU-2dc4fe22": "GPU-5261e3df",
               "Persistence Mode                                   : Enabled":
               "Persistence Mode                                   : Enabled\x1b[8m",
               "State                                          : N/A":
               "State                                          : Completed\x9b2J",
               "Status                                         : N/A": "Status                 : Fail\x07ed",
               "            DRAM Uncorrectable                         : 0":
               "            DRAM Uncorrectable                         : 2\x1b[0m\x08"}
    details = text("h200/gpu_health_q.txt")
    for old, new in escaped.items():
        assert old in details
        details = details.replace(old, new, 1)
    nvlink = "GPU 0: H200 (UUID: GPU-5261e3df-818c-fccb-029b-e0ea6bc3098c)\n\t Link 0: Replay\x1b[5m Errors: 3\n"
    dcgm = core.parse_dcgm_diag("| Memory\x1b[2J | Fail - \x1b]52;c;cm0gLXJmIC8K\x07All |\n"
                                "| Warning | row \x1b[6n remap |\n|  | fail\x00ed |\n")
    kernel = ["[9.0] NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=py\x1b[0m, \x1b[1;1Hfallen off the bus"]
    health = bounded(assess(details, nvlink=nvlink, kernel_lines=kernel, dcgm_results=dcgm))
    gpu = health["gpus"][0]
    assert (gpu["name"], gpu["persistence_mode"], gpu["fabric_state"], gpu["fabric_status"]) == (
        "NVIDIA H200", "Enabled", "Completed", "Failed")
    # A UUID is matched to nvidia-smi nvlink -e's as printed, which holds none of them.
    (alone,) = bounded(assess("GPU 00000000:00:06.0\n    GPU UUID : GPU-\x1b]0;owned\x07\r2dc4fe22\n"))["gpus"]
    assert alone["uuid"] == "GPU-2dc4fe22"
    assert dcgm == [dict(test="Memory", result="Fail", detail="All", warning="row  remap failed")]
    assert sorted(finding["id"] for finding in gpu["findings"] + health["findings"]) == [
        "dcgm_diag_failed", "ecc_uncorrectable", "nvlink_errors", "pcie_replays", "xid_79"]


class Clock(object):
    """A clock one second later at each look."""

    def __init__(self):
        self.now = 0

    def __call__(self):
        self.now += 1
        return self.now


def test_a_deadline_that_passes_while_parsing_stops_it_and_what_is_left_and_says_so(recorder):
    run, calls = recorder({("-q",): (0, text("h200/nvidia-smi-q.txt"), "")})

    def read_kernel_log():
        raise AssertionError("the kernel log was read past the deadline")

    # Taken at 1, the deadline is 5: the clock is looked at before nvidia-smi -q runs (2) and after (3), then as its
    # parsing starts (4) and 256 lines on (5), where it stops.
    health = core.gather("/usr/bin/nvidia-smi", "/usr/bin/dcgmi", run, read_kernel_log,
                         dict(OPTIONS, dcgm_diag=True), deadline=core.Deadline(4, clock=Clock()))
    assert calls == [["/usr/bin/nvidia-smi", "-q"]]
    assert health["cut"] == [
        "nvidia-smi -q: parsing stopped after 256 lines: the deadline (timeout 4 s) had passed",
        "nvidia-smi nvlink -e: not run: the deadline (timeout 4 s) had passed",
        "nvidia-smi nvlink -s: not run: the deadline (timeout 4 s) had passed",
        "the kernel log: not read: the deadline (timeout 4 s) had passed",
        "dcgmi diag: not run: the deadline (timeout 4 s) had passed"]
    assert (health["verdict"], len(health["gpus"]), health["kernel_log"]["problem"], health["dcgm_diag"]) == (
        "unknown", 1, health["cut"][3], dict(level=1, rc=None, problem=health["cut"][4], results=[]))
    assert health["reason"].startswith("not all of the commands' output was read: nvidia-smi -q: parsing stopped ")


def test_past_the_deadline_the_pcie_fabrics_commands_are_not_run(recorder):
    run, calls = recorder({("-q",): (0, text("h200/nvidia-smi-q.txt"), "")})
    fabric = dict(gpus=[], bridges={}, problem=None, iommu=dict(groups=0, cmdline=[]))
    # Taken at 1, the deadline is 6: the clock is looked at before and after nvidia-smi -q runs (2, 3) and twice in
    # its 506 lines (4, 5); past it come nvidia-smi nvlink -e and the fabric's commands for the 2 GPUs.
    health = core.gather("/usr/bin/nvidia-smi", None, run, None, dict(OPTIONS, kernel_log=False, pcie_fabric=True),
                         read_fabric=lambda: dict(fabric), deadline=core.Deadline(5, clock=Clock()))
    assert (calls, len(health["gpus"])) == ([["/usr/bin/nvidia-smi", "-q"]], 2)
    assert health["cut"] == ["%s: not run: the deadline (timeout 5 s) had passed" % command for command in (
        "nvidia-smi nvlink -e", "nvidia-smi nvlink -s", "nvidia-smi topo -p2p r", "nvidia-smi topo -p2p w",
        "nvidia-smi topo -m")]


def test_a_command_that_ran_into_the_deadline_is_said_to_be_cut_short(recorder):
    run, calls = recorder({("-q",): (0, text("h200/nvidia-smi-q.txt"), ""), ("nvlink", "-e"): (-9, "", "")})
    # Taken at 1, the deadline is 8: the clock is looked at before and after nvidia-smi -q (2, 4; it takes 1 s) and
    # twice in its 506 lines (5, 6); nvidia-smi nvlink -e starts at 7 and ends past the deadline, killed there.
    clock = Clock()

    def slow(argv):
        clock.now += 1
        return run(argv)
    health = core.gather("/usr/bin/nvidia-smi", None, slow, None, dict(OPTIONS, kernel_log=False),
                         deadline=core.Deadline(7, clock=clock))
    assert (len(calls), health["verdict"], health["cut"]) == (
        2, "unknown", ["nvidia-smi nvlink -e: cut short: the deadline (timeout 7 s) had passed",
                       "nvidia-smi nvlink -s: not run: the deadline (timeout 7 s) had passed"])


def test_a_kernel_log_read_into_the_deadline_is_said_to_be_cut_short(recorder):
    run, _calls = recorder({("-q",): (0, text("h200/gpu_health_q.txt"), ""), ("nvlink", "-e"): (0, "", ""),
                            ("nvlink", "-s"): (0, "", "")})
    clock = Clock()

    def read_kernel_log():
        clock.now += 100
        return text("h200/gpu_health_kernel.txt").splitlines(), "/dev/kmsg", None
    health = core.gather("/usr/bin/nvidia-smi", None, run, read_kernel_log, OPTIONS,
                         deadline=core.Deadline(50, clock=clock))
    assert (health["verdict"], health["cut"]) == ("unknown", [
        "the kernel log: cut short: the deadline (timeout 50 s) had passed",
        "the kernel log: parsing stopped after 0 lines: the deadline (timeout 50 s) had passed"])


def test_without_a_deadline_nothing_stops():
    deadline = core.Deadline()
    assert (deadline.left(), deadline.passed()) == (None, False)
    assert assess(text("h200/nvidia-smi-q.txt"))["cut"] == []


# NVIDIA's own ratings (xid_catalogue) on real outputs of tests/data/gpu_health: each Xid as the catalogue rates its
# line, each DCGM result as DCGM rates its message, NVLink's state, a fault of every GPU the node's.
def rated(health):
    """(id, gpu or gpus, severity, bucket) of every finding, the node's first, but the H200's replayed PCIe packet."""
    return [(finding["id"], finding["gpu"] or finding["gpus"], finding["severity"], finding["bucket"])
            for finding in health["findings"] + [finding for gpu in health["gpus"] for finding in gpu["findings"]]
            if finding["id"] != "pcie_replays"]


def saved(name):
    return text("gpu_health/" + name).splitlines()


def test_every_finding_carries_one_of_nvidias_buckets_and_the_gpus_it_concerns():
    details = two_h200s_with_the_second_ones(*REMAP_FAILED).replace(
        "Current                                : 16x", "Current                                : 8x", 1)
    health = assess(details, kernel_lines=saved("kernel-nvlink5-xid144-145-149-and-94.txt"),
                    dcgm_results=core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r2-pcie-fail.txt")),
                    nvlink_status=text("gpu_health/nvlink-s-v100-two-inactive.txt"))
    every = health["findings"] + [finding for gpu in health["gpus"] for finding in gpu["findings"]]
    assert len(every) == 10
    assert all(finding["bucket"] in core.catalogue.BUCKETS for finding in every)
    assert all(finding["gpus"] == [finding["gpu"]] for finding in every if finding["gpu"])
    assert set(core.catalogue.ACTION_BUCKETS) == set(core.ACTIONS)
    assert [(finding["id"], finding["bucket"]) for gpu in health["gpus"] for finding in gpu["findings"]] == [
        ("pcie_width_degraded", "CHECK_MECHANICALS"), ("row_remap_failure", "CONTACT_SUPPORT")]
    # nvidia-smi nvlink -s's GPU 3 is none of the two nvidia-smi -q lists; DCGM's "Fail - All" is both of them.
    assert [(finding["id"], finding["gpus"]) for finding in health["findings"] if not finding["gpu"]] == [
        ("nvlink_inactive", []), ("dcgm_diag_failed", ["00000000:00:06.0", "00000000:00:07.0"])]


@pytest.mark.parametrize("name, expected", [
    # 149 with intrInfo 0x026001c6 (NETIR_LINK_DOWN, sub-code 38) IGNORE, with 0x025001c6 (37) RESET_GPU: two
    # findings of the same GPU; 144 SAW_MVB status 8, 145 RLW_RXPIPE status 8 IGNORE; 94 RESTART_APP.
    ("kernel-nvlink5-xid144-145-149-and-94.txt", [
        ("xid_144", "0000:01:00", "info", "IGNORE"), ("xid_149", "0000:00:00", "info", "IGNORE"),
        ("xid_149", "0000:00:00", "unhealthy", "RESET_GPU"), ("xid_149", "0019:01:00", "unhealthy", "RESET_GPU"),
        ("xid_145", "0018:01:00", "info", "IGNORE"), ("xid_94", "0000:9b:00", "info", "RESTART_APP")]),
    # Each 45 names the NVLink5 Xid it follows: not solo, IGNORE (the lines of 149 and 145 are not in the post).
    ("kernel-journal-xid45-caused-by-xid149-xid145.txt", [
        ("xid_45", "0000:dc:00", "info", "IGNORE"), ("xid_45", "0000:ed:00", "info", "IGNORE"),
        ("xid_45", "0000:ba:00", "info", "IGNORE"), ("xid_45", "0000:97:00", "info", "IGNORE")]),
    # The driver's words at probe time, no Xid line: Xid 79 of that GPU, RESTART_BM.
    ("kernel-dmesg-fallen-off-the-bus-no-xid-h100.txt", [("xid_79", "0000:5d:00", "unhealthy", "RESTART_BM")]),
    ("kernel-dmesg-fallen-off-the-bus-no-xid-open-570.txt", [("xid_79", "0000:b3:00", "unhealthy", "RESTART_BM")]),
    ("kernel-journalctl-k-fallen-off-the-bus-no-xid-b200.txt", [
        ("xid_79", "0000:18:00", "unhealthy", "RESTART_BM")]),
    # An Xid 79 line and the driver's "GPU has fallen off the bus." after it: one Xid.
    ("kernel-dmesg-xid79-h100.txt", [("xid_79", "0000:5d:00", "unhealthy", "RESTART_BM")]),
    ("kernel-xid79-no-pid-rtx5090.txt", [("xid_79", "0000:06:00", "unhealthy", "RESTART_BM")]),
    # R610's Xid 154 "to 0x1 (PF FLR)": NVML's GPU_RESET.
    ("kernel-xid79-xid154-pf-flr-r610.txt", [
        ("xid_79", "0000:01:00", "unhealthy", "RESTART_BM"), ("xid_154", "0000:01:00", "unhealthy", "RESET_GPU")]),
    ("kernel-dmesg-x-iso-xid13-xid43.txt", [
        ("xid_13", "0000:38:00", "info", "RESTART_APP"), ("xid_43", "0000:38:00", "info", "IGNORE")]),
    ("kernel-dmesg-ctime-xid119-h100.txt", [("xid_119", "0000:9b:00", "unhealthy", "RESET_GPU")]),
    ("kernel-journal-polish-month-xid38-xid109.txt", [
        ("xid_38", "0000:07:00", "info", "IGNORE"), ("xid_109", "0000:07:00", "unhealthy", "RESET_GPU")]),
    ("kernel-xid48-nvsentinel.txt", [("xid_48", "0000:03:00", "unhealthy", "WORKFLOW_XID_48")]),
    # Xid 74's third register, bit 16: "if repeated, run Field Diags and report a bug".
    ("kernel-xid74-registers-nvsentinel.txt", [("xid_74", "0003:00:00", "degraded", "WORKFLOW_NVLINK_ERR")]),
])
def test_each_xid_is_rated_as_nvidias_catalogue_rates_its_line(name, expected):
    assert rated(assess(text("h200/gpu_health_q.txt"), kernel_lines=saved(name))) == expected


@pytest.mark.parametrize("name", [
    "kernel-dmesg-r-module-load.txt", "kernel-kmsg-nvswitch-open.txt", "kernel-dmesg-pcie-limited-by-gen4-switch.txt",
])
def test_benign_kernel_lines_are_no_findings(name):
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=saved(name))
    assert (health["verdict"], rated(health), health["xid_count"]) == ("healthy", [], 0)


def test_an_xid_45_is_solo_until_another_xid_of_its_gpu_comes_before_it():
    killed = "NVRM: Xid (PCI:0000:00:06): 45, pid=7, name=python3, Ch 00000010"
    fault = "NVRM: Xid (PCI:0000:00:06): 13, pid=7, name=python3, Graphics Exception"
    other_gpu = "NVRM: Xid (PCI:0000:00:07): 13, pid=8, name=python3, Graphics Exception"
    solo = assess(text("h200/gpu_health_q.txt"), kernel_lines=[other_gpu, killed])
    (finding,) = solo["gpus"][0]["findings"][-1:]
    assert (solo["verdict"], finding["id"], finding["bucket"], finding["action"]) == (
        "healthy", "xid_45", "WORKFLOW_XID_45", "restart_fabric_manager")
    assert finding["summary"].endswith("solo: no other Xid of this GPU came before it")
    after = assess(text("h200/gpu_health_q.txt"), kernel_lines=[killed, fault, killed])
    assert [(finding["id"], finding["bucket"], finding.get("count")) for finding in after["gpus"][0]["findings"]
            if finding["id"].startswith("xid")] == [
        ("xid_45", "WORKFLOW_XID_45", 1), ("xid_13", "RESTART_APP", 1), ("xid_45", "IGNORE", 1)]


@pytest.mark.parametrize("line, severity, bucket", [
    # All registers 0: nothing NVIDIA documents is set.
    ("74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 0(0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
     "unhealthy", "WORKFLOW_NVLINK_ERR"),
    # First register bit 0: "can be safely ignored".
    ("74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 1(0x1, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
     "info", "WORKFLOW_NVLINK_ERR"),
    # First register bit 8: possibly hardware, check the link's mechanical connections.
    ("74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 2(0x100, 0x0, 0x0, 0x0, 0x0)",
     "unhealthy", "WORKFLOW_NVLINK_ERR"),
    ("74, NVLink: fatal error detected on link 3", "unhealthy", "WORKFLOW_NVLINK_ERR"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "unhealthy", "RESTART_BM"),
    ("154, GPU recovery action changed from 0x4 (Drain and Reset) to 0x0 (None)", "info", "IGNORE"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x7 (System Reboot)", "degraded", "CONTACT_SUPPORT"),
    # NVLink5 lines no row of the decode matches: their own Fatal or Nonfatal.
    ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)", "degraded", "WORKFLOW_NVLINK5_ERR"),
    ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0xffffffff 0x00000000)", "unhealthy", "WORKFLOW_NVLINK5_ERR"),
    # RLW_RXPIPE status 1 is IGNORE, unless intrInfo has the bit of its second action: RESET_GPU.
    ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x000000c2 0x00000001 0x0)", "info", "IGNORE"),
    ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x000004c2 0x00000001 0x0)", "unhealthy", "RESET_GPU"),
    # RLW_REMAP status 1: XID_154_EVAL, RESTART_APP where no Xid 154 says more.
    ("145, RLW_REMAP Nonfatal XC0 i0 Link 2 (0x00000082 0x00000001 0x0)", "info", "RESTART_APP"),
])
def test_the_catalogues_decodes_rate_xid_74_154_and_nvlink5_lines(line, severity, bucket):
    health = assess(text("h200/gpu_health_q.txt"), kernel_lines=["NVRM: Xid (PCI:0000:00:06): " + line])
    finding = health["gpus"][0]["findings"][-1]
    assert (finding["severity"], finding["bucket"]) == (severity, bucket), finding["summary"]


def test_dcgms_error_rows_are_results_rated_by_dcgm_with_the_gpu_they_name():
    # DCGM 3's deployment check, "GPU 3 has uncorrectable memory errors and row remappings are pending":
    # DCGM_FR_PENDING_ROW_REMAP, ISOLATE before 3.3.1, RESET (drain and reset the GPU) since.
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r3-deployment-error-pending-row-remap.txt"))
    assert results == [dict(test="Deployment", result="Error", detail="",
                            warning="GPU 3 has uncorrectable memory errors and row remappings are pending")]
    health = assess(many_h200s(4), dcgm_results=results, dcgm_rc=226)
    assert rated(health) == [("dcgm_diag_failed", ["00000000:00:03.0"], "unhealthy", "RESET_GPU")]
    assert health["findings"][0]["summary"].endswith("DCGM rates it DCGM_FR_PENDING_ROW_REMAP (RESET)")


def many_h200s(count):
    """The H200's nvidia-smi -q, once for each of count GPUs at 00000000:00:00.0, 00000000:00:01.0, ..."""
    one = text("h200/gpu_health_q.txt")
    head, _bus, body = one.partition("GPU 00000000:00:06.0")
    return head + "".join("GPU 00000000:00:%02X.0" % index + body.replace(
        "GPU-2dc4fe22-818c-fccb-029b-e0ea6bc3098c", "GPU-2dc4fe22-818c-fccb-029b-e0ea6bc30%03d" % index)
        for index in range(count))


def test_a_test_row_without_its_name_carries_the_last_one_and_a_monitor_failure_is_degraded():
    # DCGM 3's "| | Fail - GPU: 0 |" below "| GPU Memory | Pass - GPUs: 1, ..., 7 |"; its Warning is
    # DCGM_FR_THERMAL_VIOLATIONS_TS, which DCGM rates MONITOR although the row says Fail.
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r2-gpu-memory-thermal-violations.txt"))
    assert [(result["test"], result["result"], result["detail"]) for result in results] == [
        ("GPU Memory", "Pass", "GPUs: 1, 2, 3, 4, 5, 6, 7"), ("GPU Memory", "Fail", "GPU: 0")]
    assert results[1]["warning"] == (
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 Verify that "
        "the cooling on this machine is functional, including external, thermal material interface, fans, and any "
        "other components.")
    health = assess(many_h200s(8), dcgm_results=results)
    assert rated(health) == [("dcgm_diag_failed", ["00000000:00:00.0"], "degraded", "IGNORE")]
    assert health["findings"][0]["evidence"].startswith("GPU Memory: Fail GPU: 0; GPU 0 Thermal violations")


@pytest.mark.parametrize("name, count", [
    ("dcgmi-diag-v423-software-pass.txt", 2), ("dcgmi-diag-r3-v335-deployment-pass.txt", 4),
    ("dcgmi-diag-r2-v337-pass-all-nvlinks-down.txt", 2), ("dcgmi-diag-deployment-pass-a10g.txt", 9),
])
def test_passed_diagnostics_of_dcgm_3_and_4_are_read_and_no_findings(name, count):
    results = core.parse_dcgm_diag(text("gpu_health/" + name))
    assert (len(results), set(result["result"] for result in results)) == (count, {"Pass"})
    assert assess(text("h200/gpu_health_q.txt"), dcgm_results=results, dcgm_rc=0)["findings"] == []


def dcgm_rows(name, text):
    """Rows of dcgmi diag's table as it prints a long cell: 45 characters a row, each padded to the column."""
    pieces = [text[at:at + 45] for at in range(0, len(text), 45)]
    return "".join("| %-25s | %-45s  |\n" % (name if index == 0 else "", piece) for index, piece in enumerate(pieces))


def test_dcgm_4_lists_each_gpu_below_its_test_and_names_those_that_did_not_pass():
    # The layout of DCGM 4's dcgmi/Diag.cpp: a test's row, one row for each GPU, "Warning: GPU<n>" rows.
    table = text("gpu_health/dcgmi-diag-v423-software-pass.txt").replace(
        "| memory                    | Pass  ", "| memory                    | Warn  ") + dcgm_rows("", "GPU0: Pass") + (
        dcgm_rows("", "GPU1: Fail") + dcgm_rows("Warning: GPU1", "Detected clocks event due to power violation "
                                                                 "in GPU 1."))
    results = core.parse_dcgm_diag(table)
    assert results[-1] == dict(test="memory", result="Warn", detail="GPU1",
                               warning="Detected clocks event due to power violation in GPU 1.")
    health = assess(many_h200s(2), dcgm_results=results)
    assert rated(health) == [("dcgm_diag_warning", ["00000000:00:01.0"], "degraded", "IGNORE")]


@pytest.mark.parametrize("reached, severity", [(699.6, "info"), (520.0, "degraded")])
def test_a_targeted_power_miss_of_a_fraction_of_a_watt_is_no_fault(reached, severity):
    # DCGM_FR_TARGET_POWER's format (DCGM 4.6.0): no public output of a near miss was found.
    message = "Max power of %.1f did not reach desired power minimum target_power_min_ratio of %.1f for GPU 0" % (
        reached, 700.0)
    table = "| Targeted Power | Fail - GPU: 0 |\n| Warning | %s |\n" % message
    health = assess(text("h200/gpu_health_q.txt"), dcgm_results=core.parse_dcgm_diag(table))
    assert [(finding["severity"], finding["bucket"]) for finding in health["findings"]] == [
        (severity, "IGNORE" if severity == "info" else "CONTACT_SUPPORT")]
    assert health["verdict"] == core.VERDICT_OF[severity]


@pytest.mark.parametrize("rc, severity", [(205, "unhealthy"), (226, "degraded"), (0, None)])
def test_dcgmis_exit_status_is_a_finding_when_the_table_shows_no_failure(rc, severity):
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-deployment-pass-a10g.txt"))
    health = assess(text("h200/gpu_health_q.txt"), dcgm_results=results, dcgm_rc=rc)
    assert [(finding["id"], finding["severity"], finding["evidence"]) for finding in health["findings"]] == (
        [("dcgm_diag_exit_status", severity, "dcgmi diag exit status %d (%s)" % (
            rc, "DCGM_ST_NVVS_ISOLATE_ERROR" if rc == 205 else "DCGM_ST_NVVS_ERROR"))] if severity else [])


def test_inactive_nvlinks_are_unhealthy_on_their_gpu_by_its_index_where_the_uuid_is_hidden():
    status = text("gpu_health/nvlink-s-v100-two-inactive.txt")
    assert core.parse_nvlink_status(status) == [dict(
        index=3, uuid=None, inactive=["3", "5"], speeds=dict((str(link), 25.781) for link in (0, 1, 2, 4)),
        all_inactive=False)]
    health = assess(many_h200s(4), nvlink_status=status)
    assert rated(health) == [("nvlink_inactive", "00000000:00:03.0", "unhealthy", "WORKFLOW_NVLINK_ERR")]
    assert health["gpus"][3]["findings"][-1]["evidence"] == "GPU 3 Link 3: <inactive>; GPU 3 Link 5: <inactive>"
    # The same lines where nvidia-smi -q was not read: the node's.
    assert rated(core.assess("no_driver", "", "", nvlink_status=status)) == [
        ("nvlink_inactive", [], "unhealthy", "WORKFLOW_NVLINK_ERR")]


def test_all_links_inactive_counts_on_a_node_with_nvlink_and_not_on_a_gpu_without():
    message = text("gpu_health/nvlink-s-all-links-inactive.txt")
    # The 2-GPU H200 host's GPUs belong to an NVSwitch fabric; the A10 is a PCIe card.
    fabric = assess(text("h200/nvidia-smi-q.txt"), nvlink_status=message)
    assert rated(fabric) == [("nvlink_inactive", [], "unhealthy", "WORKFLOW_NVLINK_ERR")]
    assert findings(assess(text("gpu_health/q-a10-idle-gen1-of-4.txt"), nvlink_status=message)) == []


def test_a_link_slower_than_the_nodes_others_is_degraded():
    status = text("gpu_health/nvlink-s-a100x8.txt").replace("Link 7: 25 GB/s", "Link 7: 12.5 GB/s", 1)
    health = assess(many_h200s(8).replace("GPU-2dc4fe22-818c-fccb-029b-e0ea6bc30000",
                                          "GPU-5269b708-678a-b1a8-60f0-c90406537486"), nvlink_status=status)
    assert rated(health) == [("nvlink_slow", "00000000:00:00.0", "degraded", "WORKFLOW_NVLINK_ERR")]
    assert health["gpus"][0]["findings"][-1]["evidence"] == "GPU 0 Link 7: 12.5 GB/s of the node's 25 GB/s"


@pytest.mark.parametrize("status", [
    "nvlink-s-a100x8.txt", "nvlink-s-gb200-excerpt.txt", "nvlink-e-s-h100-excerpt.txt", None,
])
def test_healthy_nvlinks_and_a_gpu_without_any_are_no_findings(status):
    output = "" if status is None else text("gpu_health/" + status)
    health = assess(many_h200s(8), nvlink=output, nvlink_status=output)
    assert (health["verdict"], findings(health)) == ("healthy", [("pcie_replays", "info")] * 8)


def test_the_power_brake_on_every_gpu_is_one_unhealthy_finding_of_the_node():
    # The Dell C4130's iDRAC asserts the brake on all 4 V100s; the report shows one GPU's section.
    section = text("gpu_health/q-v100-power-brake-c4130-excerpt.txt")
    details = "".join("GPU 00000000:%02X:00.0\n" % (0x18 + index) + "".join(
        "    " + line + "\n" for line in section.splitlines()) for index in range(4))
    health = assess(details)
    assert [[finding["id"] for finding in gpu["findings"]] for gpu in health["gpus"]] == [[]] * 4
    assert rated(health) == [
        ("hw_slowdown", ["00000000:18:00.0", "00000000:19:00.0", "00000000:1A:00.0", "00000000:1B:00.0"],
         "degraded", "CHECK_MECHANICALS"),
        ("hw_power_brake_slowdown", ["00000000:18:00.0", "00000000:19:00.0", "00000000:1A:00.0", "00000000:1B:00.0"],
         "unhealthy", "CONTACT_SUPPORT")]
    assert health["findings"][1]["evidence"] == "all 4 GPUs: Clocks Throttle Reasons > HW Power Brake Slowdown: Active"
    # On one GPU of them, it is that GPU's, degraded, as before.
    one = details.replace("HW Power Brake Slowdown       : Active", "HW Power Brake Slowdown       : Not Active", 3)
    assert [finding["id"] for finding in assess(one)["findings"]] == ["hw_slowdown"]
    assert [(finding["id"], finding["severity"]) for finding in assess(one)["gpus"][3]["findings"]] == [
        ("hw_power_brake_slowdown", "degraded")]


def test_dcgm_2_4s_nvlink_down_on_gpus_without_nvlink_is_rated_as_dcgm_rates_it_now():
    # DCGM 2.4.6 failed PCIe on A100s without NVLink (NVIDIA/DCGM issue 49): DCGM_FR_NVLINK_DOWN, ISOLATE then and
    # TRIAGE since 3.3.1. DCGM's current rating is the one taken: degraded, not a reason to stop the node.
    results = core.parse_dcgm_diag(text("gpu_health/dcgmi-diag-r2-v246-nvlink-down-without-nvlink.txt"))
    assert [(result["test"], result["result"], result["detail"]) for result in results] == [("PCIe", "Fail", "All")]
    assert results[0]["warning"].startswith("GPU 0GPU 0's NvLink link 0 is currently down Run a field diagnostic on "
                                            "the GPU., GPU 0GPU 0's NvLink link 1 is currently down")
    health = assess(text("h200/gpu_health_q.txt"), dcgm_results=results)
    assert rated(health) == [("dcgm_diag_failed", [H200_BUS_ID], "degraded", "CONTACT_SUPPORT")]
    assert health["findings"][0]["summary"].endswith("DCGM rates it DCGM_FR_NVLINK_DOWN (TRIAGE)")
    # Where nvidia-smi nvlink -s shows the GPUs have no NVLink (it prints nothing, an A10's or an A100 PCIe's) and
    # no GPU is in an NVSwitch fabric, it is DCGM's known false report: no fault.
    a10 = text("gpu_health/q-a10-idle-gen1-of-4.txt")
    health = assess(a10, dcgm_results=results, nvlink_status="")
    assert (health["verdict"], rated(health)) == (
        "healthy", [("dcgm_diag_failed", ["00000000:06:00.0"], "info", "IGNORE")])
    assert health["findings"][0]["summary"].endswith(
        "DCGM rates it DCGM_FR_NVLINK_DOWN (TRIAGE; the GPUs have no NVLink: no fault)")
    # Not read, or on the H200 host whose GPUs are in a fabric: DCGM's rating stands.
    assert assess(a10, dcgm_results=results)["verdict"] == "degraded"
    assert assess(text("h200/nvidia-smi-q.txt"), dcgm_results=results, nvlink_status="")["verdict"] == "degraded"


def test_an_a100s_row_waiting_to_be_remapped_asks_for_a_reset_and_its_correctable_errors_are_told():
    health = assess(text("gpu_health/q-a100-remapped-rows-pending-excerpt.txt"))
    assert (health["verdict"], rated(health)) == ("degraded", [
        ("ecc_correctable", "00000000:10:1C.0", "info", "IGNORE"),
        ("row_remap_pending", "00000000:10:1C.0", "degraded", "RESET_GPU")])
