"""A node's saved outputs assessed as a live node's (plugins/module_utils/_node/gpu_evidence.py with
gpu_health.assess_evidence): a directory of captured outputs, an nvidia-bug-report.log.gz built here from real
sections (tests/data/gpu_health, tests/data/h200), read through the trust boundary and within their bounds."""
import gzip
import os
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_evidence as evidence
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_health as core

DATA = Path(__file__).resolve().parents[3] / "data"
SEPARATOR = "_" * 44
ALL = ["nvidia-smi -q", "nvidia-smi nvlink -e", "nvidia-smi nvlink -s", "dcgmi diag", "the kernel log"]


def text(name):
    return (DATA / name).read_text()


def assessed(path):
    return core.assess_evidence(evidence.read_evidence(str(path)))


def test_a_directory_of_outputs_is_assessed_and_says_what_it_holds(tmp_path):
    (tmp_path / "nvidia-smi-q.txt").write_text(text("h200/gpu_health_q.txt"))
    (tmp_path / "dmesg.txt").write_text(text("gpu_health/kernel-nvlink5-xid144-145-149-and-94.txt"))
    (tmp_path / "dcgmi-diag.txt").write_text(text("gpu_health/dcgmi-diag-deployment-pass-a10g.txt"))
    health = assessed(tmp_path)
    assert health["evidence"] == dict(path=str(tmp_path), found=[
        "nvidia-smi -q: nvidia-smi-q.txt", "dcgmi diag: dcgmi-diag.txt", "the kernel log: dmesg.txt"],
        missing=["nvidia-smi nvlink -e", "nvidia-smi nvlink -s"])
    assert (health["verdict"], health["state"], health["cut"]) == ("unhealthy", "ok", [])
    assert [(finding["id"], finding["bucket"]) for finding in core.findings_of(health, "unhealthy")] == [
        ("xid_149", "RESET_GPU"), ("xid_149", "RESET_GPU")]
    assert health["kernel_log"] == dict(read=True, source="dmesg.txt", problem=None)
    assert (health["dcgm_diag"]["rc"], len(health["dcgm_diag"]["results"])) == (None, 9)


def bug_report(*sections):
    """An nvidia-bug-report.log's text, each section after the script's separator."""
    return "".join("%s\n\n%s\n" % (SEPARATOR, section) for section in sections)


def nvidia_smi_section(details, status):
    """The bug report's nvidia-smi section: each command line, a blank line, its output (report_command)."""
    commands = (("--query", details), ("--query --unit", "No unit found.\n"), ("nvlink --errorcounters", ""),
                ("nvlink --remotelinkinfo", ""), ("nvlink --status", status))
    return "".join("/usr/bin/nvidia-smi %s\n\n%s\n" % command for command in commands)


def kernel_scan(this_boot, earlier_boot):
    return "Scanning kernel log files for NVIDIA kernel messages:\n\n  journalctl -b -0:\n%s\n\n  journalctl -b -1:\n" \
        "%s\n" % (this_boot, earlier_boot)


def write_gzip_members(path, report):
    """The report gzipped as nvidia-bug-report.sh writes it: each section its own gzip member."""
    head, _separator, sections = report.partition(SEPARATOR)
    with open(path, "wb") as out:
        out.write(gzip.compress(head.encode()))
        for section in sections.split(SEPARATOR):
            out.write(gzip.compress((SEPARATOR + section).encode()))


def test_a_bug_report_is_read_by_its_sections_and_the_boots_before_are_history(tmp_path):
    laptop = text("gpu_health/nvidia-bug-report-rtx3060-laptop-excerpt.log")
    fallen = text("gpu_health/kernel-dmesg-fallen-off-the-bus-no-xid-h100.txt")
    earlier = "Oct 27 16:48:06 node7 kernel: NVRM: Xid (PCI:0000:00:06): 48, pid=9, name=python3, DBE"
    report = laptop + bug_report(
        kernel_scan("Oct 27 20:24:50 node7 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module", earlier),
        "dmesg:\n\n" + fallen,
        nvidia_smi_section(text("h200/gpu_health_q.txt"), text("gpu_health/nvlink-s-v100-two-inactive.txt")))
    path = tmp_path / "nvidia-bug-report.log.gz"
    write_gzip_members(path, report)
    health = assessed(path)
    assert health["evidence"]["found"] == [
        "nvidia-smi -q: nvidia-bug-report.log.gz, nvidia-smi --query",
        "nvidia-smi nvlink -e: nvidia-bug-report.log.gz, nvidia-smi nvlink --errorcounters",
        "nvidia-smi nvlink -s: nvidia-bug-report.log.gz, nvidia-smi nvlink --status",
        "the kernel log: nvidia-bug-report.log.gz, dmesg"]
    assert health["evidence"]["missing"] == ["dcgmi diag"]
    # The GPU that fell off the bus in the dmesg section; the Xid 48 of the boot before is not the node's now.
    assert [(finding["id"], finding["gpu"] or finding["gpus"], finding["bucket"]) for finding in
            core.findings_of(health, "unhealthy")] == [
        ("nvlink_inactive", [], "WORKFLOW_NVLINK_ERR"), ("xid_79", "0000:5d:00", "RESTART_BM")]
    assert (health["verdict"], len(health["gpus"]), health["cut"]) == ("unhealthy", 1, [])


def test_without_a_dmesg_section_the_kernel_log_is_this_boots_journal(tmp_path):
    this_boot = "Oct 27 20:24:50 node7 kernel: NVRM: Xid (PCI:0000:00:06): 119, pid=1, name=nvidia-smi, Timeout"
    path = tmp_path / "nvidia-bug-report.log"
    path.write_text(bug_report(kernel_scan(this_boot, ""), nvidia_smi_section(text("h200/gpu_health_q.txt"), "")))
    health = assessed(path)
    assert health["kernel_log"]["source"] == "nvidia-bug-report.log, journalctl -b -0"
    assert [(finding["id"], finding["bucket"]) for finding in health["gpus"][0]["findings"]] == [
        ("pcie_replays", "IGNORE"), ("xid_119", "RESET_GPU")]


def test_the_laptops_real_bug_report_shows_no_fault_and_says_nvidia_smi_is_missing(tmp_path):
    # Its nvidia-smi section is among what was left out of the excerpt; its kernel lines are benign.
    path = tmp_path / "nvidia-bug-report.log"
    path.write_text(text("gpu_health/nvidia-bug-report-rtx3060-laptop-excerpt.log"))
    health = assessed(path)
    assert (health["verdict"], health["state"], health["counts"]) == (
        "unknown", "not_in_evidence", {"unhealthy": 0, "degraded": 0, "info": 0})
    assert health["evidence"]["missing"] == ["nvidia-smi -q", "nvidia-smi nvlink -e", "nvidia-smi nvlink -s",
                                             "dcgmi diag"]
    assert health["kernel_log"]["source"] == "nvidia-bug-report.log, dmesg"
    assert health["reason"] == "nvidia-smi could not report on the GPUs (not_in_evidence): the evidence holds no " \
        "output of nvidia-smi -q"


def test_a_directorys_files_come_first_and_its_bug_report_gives_the_rest(tmp_path):
    (tmp_path / "nvidia-smi-q.txt").write_text(text("gpu_health/q-a10-idle-gen1-of-4.txt"))
    write_gzip_members(tmp_path / "nvidia-bug-report.log.gz", bug_report(
        "dmesg:\n\n" + text("gpu_health/kernel-dmesg-r-module-load.txt"),
        nvidia_smi_section(text("h200/gpu_health_q.txt"), "")))
    health = assessed(tmp_path)
    assert health["evidence"]["found"][0] == "nvidia-smi -q: nvidia-smi-q.txt"
    assert health["evidence"]["found"][-1] == "the kernel log: nvidia-bug-report.log.gz, dmesg"
    assert (health["verdict"], [gpu["name"] for gpu in health["gpus"]]) == ("healthy", ["NVIDIA A10"])


def test_links_and_what_is_no_regular_file_are_not_read(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text(text("h200/gpu_health_q.txt"))
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "nvidia-smi-q.txt").symlink_to(target)
    os.mkfifo(str(saved / "dmesg.txt"))
    found = evidence.read_evidence(str(saved))
    assert (found["found"], found["missing"]) == ([], ALL)
    assert [said.split(":")[0] for said in found["cut"]] == ["nvidia-smi-q.txt", "dmesg.txt"]
    (tmp_path / "link").symlink_to(saved)
    for path, said in ((tmp_path / "link", "is a symbolic link"), (tmp_path / "none", "does not exist")):
        with pytest.raises(InvalidOption, match=said):
            evidence.read_evidence(str(path))


def test_a_bug_report_is_decompressed_within_its_bound_and_a_cut_one_read_as_far_as_it_goes(tmp_path, monkeypatch):
    monkeypatch.setattr(evidence, "BUG_REPORT_BYTES", 1 << 20)
    path = tmp_path / "nvidia-bug-report.log.gz"
    # 64 MiB of text compressed to 64 KiB: read to its first MiB.
    path.write_bytes(gzip.compress(b"x" * (64 << 20), compresslevel=1))
    found = evidence.read_evidence(str(path))
    assert found["cut"] == ["nvidia-bug-report.log.gz: more than 1048576 bytes of text, the first 1048576 read"]
    whole = gzip.compress(bug_report(nvidia_smi_section(text("h200/gpu_health_q.txt"), "")).encode())
    path.write_bytes(whole[:len(whole) - 64])
    found = evidence.read_evidence(str(path))
    assert found["cut"] == ["nvidia-bug-report.log.gz: read as far as it goes: Compressed file ended before the "
                            "end-of-stream marker was reached"]
    assert found["found"][0] == "nvidia-smi -q: nvidia-bug-report.log.gz, nvidia-smi --query"
    assert core.assess_evidence(found)["gpus"][0]["name"] == "NVIDIA H200"


def test_a_saved_output_past_its_bound_is_cut_and_the_verdict_cannot_be_healthy(tmp_path, monkeypatch):
    monkeypatch.setattr(evidence, "EVIDENCE_FILES", (("nvidia-smi -q", ("nvidia-smi-q.txt",), 1000),))
    (tmp_path / "nvidia-smi-q.txt").write_text(text("h200/gpu_health_q.txt"))
    health = assessed(tmp_path)
    assert health["cut"] == ["nvidia-smi-q.txt: more than 1000 characters, the first 1000 read"]
    assert health["verdict"] == "unknown"
