"""gpu_facts: on this host (no nvidia-smi) and with a stand-in replaying a real H200 host."""
import os

import pytest

from conftest import CHECKOUT, run_module

FAKE = CHECKOUT / "tests" / "fixtures" / "fake_nvidia_smi"


def facts(monkeypatch, mode=None):
    if mode is not None:
        monkeypatch.setenv("PATH", "%s:%s" % (FAKE, os.environ["PATH"]))
        monkeypatch.setenv("FAKE_NVIDIA_SMI", mode)
    result = run_module("gpu_facts")
    assert result.get("failed") is not True, result
    return result["ansible_facts"]["gpu"]


def test_host_without_nvidia_smi_says_so(monkeypatch):
    gpu = facts(monkeypatch)
    assert gpu["state"] == "no_nvidia_smi" and gpu["count"] == 0 and gpu["interconnect"] == "none"


def test_recorded_h200_host(monkeypatch):
    gpu = facts(monkeypatch, "h200")
    assert gpu["state"] == "ok"
    assert gpu["count"] == 2
    assert [g["name"] for g in gpu["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert gpu["gpus"][0]["compute_capability"] == "9.0"
    assert (gpu["driver_version"], gpu["cuda_driver_version"]) == ("580.159.04", "13.0")
    assert gpu["interconnect"] == "nvlink" and gpu["nvlink_pairs"] == [[0, 1, 18]]


@pytest.mark.parametrize("mode", ["no_driver", "driver_mismatch"])
def test_broken_driver_is_a_state_not_a_crash(monkeypatch, mode):
    gpu = facts(monkeypatch, mode)
    assert gpu["state"] == mode
    assert gpu["count"] == 0 and gpu["message"]
