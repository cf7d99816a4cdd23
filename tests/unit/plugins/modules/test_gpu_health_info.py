"""plugins/modules/gpu_health_info.py: a thin shell over the gpu_health core, read-only, whole on a host without
a GPU, and refusing an unknown severity override by its option's name."""
import json
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_health as core
from ansible_collections.blackwell.gpu_node.plugins.modules import gpu_health_info as module

DATA = Path(__file__).resolve().parents[3] / "data"


def result_of(args, capsys, monkeypatch):
    # How a module receives its arguments on every supported core, ansible-core 2.15 on Python 3.9 included.
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # ansible-core 2.19 decodes them by a named profile; older cores have none.
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def h200(monkeypatch):
    """The lent H200's recorded outputs, answered to the commands the module runs."""
    outputs = {"-q": (DATA / "h200" / "gpu_health_q.txt").read_text(), "nvlink": ""}
    calls = []

    def run_bounded(argv, timeout):
        calls.append((argv, timeout))
        return 0, outputs[argv[1]], ""
    monkeypatch.setattr(module, "run_bounded", run_bounded)
    monkeypatch.setattr(module.AnsibleModule, "get_bin_path",
                        lambda self, name, *args, **kwargs: "/usr/bin/" + name if name == "nvidia-smi" else None)
    monkeypatch.setattr(module, "read_kernel_log", lambda seconds: (
        (DATA / "h200" / "gpu_health_kernel.txt").read_text().splitlines(), "/dev/kmsg", None))
    # No sysfs tree was recorded on the H200: its one GPU, read from sysfs as a tree without it.
    monkeypatch.setattr(module, "read_fabric", lambda: dict(gpus=[], bridges={}, problem=None,
                                                            iommu=dict(groups=0, cmdline=[])))
    return calls


def test_the_h200_is_healthy_and_nothing_changed_even_in_check_mode(h200, capsys, monkeypatch):
    result = result_of({"_ansible_check_mode": True, "timeout": 30}, capsys, monkeypatch)
    assert (result["changed"], result["verdict"], result["counts"]) == (
        False, "healthy", {"unhealthy": 0, "degraded": 0, "info": 1})
    # Each command gets what is left of the module's timeout.
    assert [argv for argv, _timeout in h200] == [["/usr/bin/nvidia-smi", "-q"], ["/usr/bin/nvidia-smi", "nvlink", "-e"],
                                                 ["/usr/bin/nvidia-smi", "nvlink", "-s"]]
    assert all(25 < timeout <= 30 for _argv, timeout in h200)
    assert result["kernel_log"] == {"read": True, "source": "/dev/kmsg", "problem": None}
    assert result["summary"] == "healthy: 1 GPU(s), no unhealthy or degraded finding"
    # One GPU: no P2P matrix asked of nvidia-smi, no fabric finding.
    assert result["pcie_fabric"] == dict(gpus=[], bridges=[], iommu=dict(groups=0, cmdline=[], mode="off"), p2p={},
                                         links={}, problems=[])


def test_the_pcie_fabric_is_not_read_when_turned_off(h200, capsys, monkeypatch):
    def read_fabric():
        raise AssertionError("the fabric was read")
    monkeypatch.setattr(module, "read_fabric", read_fabric)
    result = result_of({"pcie_fabric": False}, capsys, monkeypatch)
    assert (result["verdict"], result["pcie_fabric"]) == ("healthy", None)


def test_dcgm_asked_where_it_is_missing_says_so(h200, capsys, monkeypatch):
    result = result_of({"dcgm_diag": True}, capsys, monkeypatch)
    assert (result["verdict"], result["dcgm_diag"]["problem"]) == (
        "healthy", "dcgmi is not installed (NVIDIA DCGM): no diagnostic ran")


def test_a_host_without_nvidia_smi_is_unknown_not_a_failure(monkeypatch, capsys):
    monkeypatch.setattr(module.AnsibleModule, "get_bin_path", lambda self, name, *args, **kwargs: None)
    result = result_of({"kernel_log": False}, capsys, monkeypatch)
    assert (result.get("failed"), result["verdict"], result["state"]) == (None, "unknown", "no_nvidia_smi")


def test_a_command_that_cannot_start_is_an_answer(monkeypatch, capsys):
    def run_bounded(argv, timeout):
        raise OSError(2, "No such file or directory")
    monkeypatch.setattr(module, "run_bounded", run_bounded)
    monkeypatch.setattr(module.AnsibleModule, "get_bin_path", lambda self, name, *args, **kwargs: "/usr/bin/" + name)
    result = result_of({"kernel_log": False}, capsys, monkeypatch)
    assert (result["verdict"], result["state"]) == ("unknown", "error")
    assert "No such file or directory" in result["reason"]


def test_an_unknown_override_fails_naming_the_option(capsys, monkeypatch):
    result = result_of({"severity_overrides": {"pcie_lanes": "info"}}, capsys, monkeypatch)
    assert result["failed"] and "severity_overrides" in result["msg"] and "pcie_width_degraded" in result["msg"]


def test_a_long_dcgm_level_needs_its_allowance(capsys, monkeypatch):
    result = result_of({"dcgm_diag": True, "dcgm_diag_level": 2}, capsys, monkeypatch)
    assert result["failed"] and "dcgm_diag_allow_long" in result["msg"]


def test_the_timeout_bounds_the_whole_module_each_command_getting_what_is_left(h200, capsys, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(module, "Deadline", lambda seconds: core.Deadline(seconds, clock=lambda: now[0]))
    answer = module.run_bounded

    def run_bounded(argv, timeout):
        now[0] += 100  # each command takes 100 s
        return answer(argv, timeout)
    monkeypatch.setattr(module, "run_bounded", run_bounded)
    result = result_of({"timeout": 150}, capsys, monkeypatch)
    assert h200 == [(["/usr/bin/nvidia-smi", "-q"], 150), (["/usr/bin/nvidia-smi", "nvlink", "-e"], 50)]
    assert result["cut"] == ["nvidia-smi nvlink -e: cut short: the deadline (timeout 150 s) had passed",
                             "nvidia-smi nvlink -s: not run: the deadline (timeout 150 s) had passed",
                             "the kernel log: not read: the deadline (timeout 150 s) had passed"]
    assert (result["verdict"], result["kernel_log"]["problem"]) == ("unknown", result["cut"][2])


@pytest.mark.parametrize("timeout", [0, -5])
def test_a_timeout_of_no_seconds_is_refused(capsys, monkeypatch, timeout):
    result = result_of({"timeout": timeout}, capsys, monkeypatch)
    assert result["failed"] and result["msg"].startswith("timeout=%d: " % timeout)


def test_saved_evidence_is_assessed_without_running_or_reading_anything_of_the_host(tmp_path, monkeypatch, capsys):
    def refused(*args, **kwargs):
        raise AssertionError("the host was read")
    for name in ("run_bounded", "read_kernel_log", "read_fabric"):
        monkeypatch.setattr(module, name, refused)
    (tmp_path / "nvidia-smi-q.txt").write_text((DATA / "h200" / "gpu_health_q.txt").read_text())
    (tmp_path / "nvlink-s.txt").write_text((DATA / "gpu_health" / "nvlink-s-v100-two-inactive.txt").read_text())
    (tmp_path / "journalctl-k.txt").write_text(
        (DATA / "gpu_health" / "kernel-journal-polish-month-xid38-xid109.txt").read_text())
    result = result_of({"evidence_path": str(tmp_path), "_ansible_check_mode": True}, capsys, monkeypatch)
    assert (result["changed"], result["verdict"], result["evidence"]["missing"]) == (
        False, "unhealthy", ["nvidia-smi nvlink -e", "dcgmi diag"])
    assert [(finding["id"], finding["bucket"]) for finding in result["findings"]] == [
        ("nvlink_inactive", "WORKFLOW_NVLINK_ERR"), ("xid_38", "IGNORE"), ("xid_109", "RESET_GPU")]
    assert (result["kernel_log"]["source"], result["dcgm_diag"], result["pcie_fabric"]) == (
        "journalctl-k.txt", None, None)


def test_evidence_that_is_not_there_fails_naming_the_option(tmp_path, capsys, monkeypatch):
    result = result_of({"evidence_path": str(tmp_path / "none")}, capsys, monkeypatch)
    assert result["failed"] and result["msg"] == "evidence_path=%s does not exist: give a directory of saved " \
        "outputs or an nvidia-bug-report.log(.gz)" % (tmp_path / "none")
