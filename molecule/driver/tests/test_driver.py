"""After converge (the cu130 profile's branch 580 over an installed and loaded 570, reboots not allowed): the
packages moved, the reboot is pending and reported, the running server was left alone."""
import json

testinfra_hosts = ["docker://driver"]


def test_the_driver_packages_moved_to_branch_580(host):
    assert host.package("nvidia-open").version == "580.95.05-1"
    assert host.package("nvidia-kernel-open-dkms").version == "580.95.05-1"
    assert host.package("nvidia-driver-pinning-580").is_installed
    assert not host.package("nvidia-driver-pinning-570").is_installed
    pin = host.file("/etc/apt/preferences.d/nvidia-driver-pin").content_string
    assert "Pin: version 580.*" in pin and "570" not in pin


def test_the_old_module_is_still_loaded_and_nvidia_smi_says_so(host):
    assert "Open Kernel Module for x86_64  570.195.03 " in host.file("/proc/driver/nvidia/version").content_string
    smi = host.run("nvidia-smi")
    assert smi.rc == 18 and "Driver/library version mismatch" in smi.stdout


def test_the_pending_reboot_is_reported(host):
    result = json.loads(host.file("/root/cuda_result.json").content_string)
    assert result["driver"] == "NVIDIA driver 580.95.05 is installed but kernel module 570.195.03 is loaded"
    assert result["driver_reboot_pending"] is True
    assert result["driver_versions"] == {"nvidia-open": ["570.195.03-1", "580.95.05-1"]}


def test_the_running_server_was_left_alone(host):
    before = host.file("/root/server-pid-before").content_string.strip()
    now = host.run("systemctl show --property=MainPID --value sglang-sglang.service").stdout.strip()
    assert before != "0" and now == before
    assert host.service("sglang-sglang.service").is_running
