import fnmatch
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.driver import parse_installed, parse_madison
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.fabric import (
    INSTALLED_PATTERNS,
    SERVICE,
    needed,
    plan,
    query_names,
    setting_of,
    version_problems,
)

# Bare-metal HGX H200: the nvidia-nvswitch driver holds four switches, the fabric is not up before Fabric Manager.
HGX_H200 = dict(state="ok", driver_version="580.95.05", kernel_module_version="580.95.05", nvswitch=True,
                nvswitch_devices=["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"],
                nvlink_generation=4, fabric=dict(state="Not Started", status=None))
# HGX B200: fourth generation switches, which the nvidia-nvswitch driver does not hold.
HGX_B200 = dict(HGX_H200, nvswitch_devices=[], nvlink_generation=5)
# The 2x H200 lent host: a virtual machine whose GPUs' fabric is up, managed by the hypervisor.
VM_H200 = dict(HGX_H200, nvswitch_devices=[], fabric=dict(state="Completed", status="Success"))
SINGLE_H200 = dict(state="ok", driver_version="580.95.05", kernel_module_version="580.95.05", nvswitch=False,
                   nvswitch_devices=[], nvlink_generation=None, fabric=dict(state=None, status=None))

MADISON_580 = """\
nvidia-fabricmanager | 580.95.05-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
nvidia-fabricmanager | 580.82.07-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
libnvidia-nscq | 580.95.05-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
libnvidia-nscq | 580.82.07-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
nvlsm | 2025.06.5-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
"""
MADISON_570 = """\
nvidia-fabricmanager-570 | 570.195.03-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
libnvidia-nscq-570 | 570.195.03-1 | https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages
"""


def fabric_plan(gpu, installed="", madison=MADISON_580, setting="auto"):
    return plan(setting, gpu, parse_installed(installed), parse_madison(madison))


def test_bare_metal_hgx_h200_gets_fabric_manager_at_the_driver_version_without_nvlsm():
    result = fabric_plan(HGX_H200)
    assert result["problems"] == [] and result["wanted"]
    assert result["install"] == ["nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1"]
    assert result["service"] == SERVICE and result["change"]


def test_hgx_b200_also_gets_the_nvlink_subnet_manager():
    result = fabric_plan(HGX_B200)
    assert result["install"] == ["nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1", "nvlsm"]
    assert "not up" in result["reason"]


def test_branch_570_takes_the_branch_named_packages():
    gpu = dict(HGX_H200, driver_version="570.195.03", kernel_module_version="570.195.03")
    assert fabric_plan(gpu, madison=MADISON_570)["install"] == [
        "nvidia-fabricmanager-570=570.195.03-1", "libnvidia-nscq-570=570.195.03-1"]
    assert query_names(570) == ["nvidia-fabricmanager", "nvidia-fabricmanager-570", "libnvidia-nscq",
                                "libnvidia-nscq-570", "nvlsm"]


def test_installed_at_the_driver_version_changes_nothing():
    installed = "nvidia-fabricmanager\t580.95.05-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"
    result = fabric_plan(HGX_H200, installed)
    assert (result["install"], result["change"], result["service"]) == ([], False, SERVICE)


def test_an_older_fabric_manager_moves_to_the_driver_version():
    installed = "nvidia-fabricmanager\t580.82.07-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"
    result = fabric_plan(HGX_H200, installed)
    assert result["install"] == ["nvidia-fabricmanager=580.95.05-1"]
    assert result["versions"]["nvidia-fabricmanager"] == ["580.82.07-1", "580.95.05-1"]


def test_a_repository_without_the_exact_version_is_refused_naming_the_variables():
    result = fabric_plan(dict(HGX_H200, driver_version="580.105.08", kernel_module_version="580.105.08"))
    assert result["install"] == [] and not result["change"]
    assert len(result["problems"]) == 2
    assert "no nvidia-fabricmanager or nvidia-fabricmanager-580 at the loaded driver's version 580.105.08" in \
        result["problems"][0]
    assert "nvidia-fabricmanager 580.95.05-1 580.82.07-1" in result["problems"][0]
    assert "cuda_repo_base_url" in result["problems"][0] and "cuda_fabric_manager: false" in result["problems"][0]


def test_nvlink_5_without_nvlsm_in_the_repository_is_refused():
    result = fabric_plan(HGX_B200, madison=MADISON_580.replace("nvlsm |", "other |"))
    assert result["problems"] == ["NVLink 5 switches need NVIDIA's NVLink subnet manager, but the CUDA repository "
                                  "has no nvlsm: check cuda_repo_base_url, or set cuda_fabric_manager: false."]


@pytest.mark.parametrize("gpu,setting,wanted", [
    (SINGLE_H200, "auto", False), (VM_H200, "auto", False), (HGX_H200, "false", False), (SINGLE_H200, "true", True),
    (HGX_H200, True, True), (HGX_H200, False, False), (dict(SINGLE_H200, nvswitch=None), "auto", False)])
def test_who_needs_fabric_manager(gpu, setting, wanted):
    assert needed(setting_of(setting), gpu, {})[0] is wanted


def test_a_virtual_machine_keeps_a_fabric_manager_it_has_at_the_driver_version():
    assert needed("auto", VM_H200, {"nvidia-fabricmanager": "580.82.07-1"}) == (True, "Fabric Manager is installed")
    assert "managed outside" in needed("auto", VM_H200, {})[1]


def test_a_wrong_setting_and_no_loaded_driver_are_refused():
    assert fabric_plan(HGX_H200, setting="maybe")["problems"] == [
        "cuda_fabric_manager=maybe is not one of auto, true, false: fix cuda_fabric_manager."]
    problems = fabric_plan(dict(HGX_H200, state="no_driver", driver_version=None, kernel_module_version=None))[
        "problems"]
    assert "none is loaded (gpu_facts state no_driver)" in problems[0] and "cuda_fabric_manager: false" in problems[0]


def test_version_problems_name_the_package_the_driver_and_the_variable():
    installed = {"nvidia-fabricmanager": "580.82.07-1", "libnvidia-nscq": "580.95.05-1", "nvlsm": "2025.06.5-1"}
    problems = version_problems(HGX_H200, installed)
    assert len(problems) == 1
    assert problems[0].startswith("nvidia-fabricmanager 580.82.07-1 is installed but the loaded NVIDIA driver is "
                                  "580.95.05")
    assert "cuda_fabric_manager" in problems[0]
    assert version_problems(HGX_H200, {"nvidia-fabricmanager-570": "570.195.03-1"})[0].startswith(
        "nvidia-fabricmanager-570 570.195.03-1")
    assert version_problems(dict(HGX_H200, kernel_module_version=None, driver_version=None), installed) == []
    assert version_problems(HGX_H200, {"nvidia-fabricmanager": "580.95.05-1"}) == []


def test_dpkg_is_asked_for_the_fabric_packages_of_every_branch():
    """Seen in molecule fabric: with driver 580 loaded, asking dpkg only for branch 580's names missed an installed
    nvidia-fabricmanager-570, so the role left it there. The patterns cover both branches' names, and both roles
    ask dpkg with them."""
    for branch in (570, 580, 590):
        for name in query_names(branch):
            assert any(fnmatch.fnmatchcase(name, pattern) for pattern in INSTALLED_PATTERNS), name
    roles = Path(__file__).resolve().parents[4] / "roles"
    assert "__cuda_fabric_names.installed" in (roles / "cuda" / "tasks" / "fabric.yml").read_text()
    assert "list(INSTALLED_PATTERNS)" in (roles.parent / "plugins" / "modules" / "preflight_check.py").read_text()


@pytest.mark.parametrize("value, setting", [
    (True, "true"), (False, "false"), ("yes", "true"), ("no", "false"), (" Auto ", "auto"), ("TRUE", "true"),
    ("false", "false"), ("maybe", None), ("", None)])
def test_the_setting_from_yaml_booleans_and_words(value, setting):
    assert setting_of(value) == setting


@pytest.mark.parametrize("setting, gpu, installed, answer", [
    ("false", HGX_H200, {}, (False, "cuda_fabric_manager is false")),
    ("true", SINGLE_H200, {}, (True, "cuda_fabric_manager is true")),
    ("auto", SINGLE_H200, {}, (False, "gpu_facts sees no NVSwitch (nvswitch: false)")),
    ("auto", dict(SINGLE_H200, nvswitch=None), {}, (False, "gpu_facts sees no NVSwitch (nvswitch: none)")),
    ("auto", dict(HGX_H200, fabric=dict(state="Completed", status="Success")), {},
     (True, "the nvidia-nvswitch driver holds 4 NVSwitch(es)")),
    ("auto", HGX_B200, {}, (True, "the GPUs' NVSwitch fabric is not up (state Not Started)")),
    ("auto", VM_H200, {}, (False, "the GPUs' NVSwitch fabric is up (Success) with no switch on this host: it is "
                                  "managed outside it, as for a virtual machine's GPUs")),
])
def test_the_whole_reason(setting, gpu, installed, answer):
    assert needed(setting, gpu, installed) == answer


def test_a_wrong_setting_or_false_plans_nothing_at_all():
    assert fabric_plan(HGX_H200, setting="maybe") == dict(
        install=[], service=None, change=False, versions={}, wanted=False, reason="",
        problems=["cuda_fabric_manager=maybe is not one of auto, true, false: fix cuda_fabric_manager."])
    assert fabric_plan(HGX_H200, setting=False) == dict(
        install=[], service=None, change=False, versions={}, wanted=False, reason="cuda_fabric_manager is false",
        problems=[])


def test_the_whole_plan_of_an_hgx_b200():
    assert fabric_plan(HGX_B200) == dict(
        install=["nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1", "nvlsm"],
        service="nvidia-fabricmanager.service", change=True, wanted=True,
        reason="the GPUs' NVSwitch fabric is not up (state Not Started)", problems=[],
        versions={"nvidia-fabricmanager": [None, "580.95.05-1"], "libnvidia-nscq": [None, "580.95.05-1"],
                  "nvlsm": [None, "2025.06.5-1"]})


def test_the_loaded_kernel_module_decides_the_version_else_the_driver_version():
    after_an_upgrade_without_reboot = dict(HGX_H200, driver_version="580.82.07")
    assert fabric_plan(after_an_upgrade_without_reboot)["install"] == [
        "nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1"]
    assert fabric_plan(dict(HGX_H200, kernel_module_version=None))["install"] == [
        "nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1"]
    installed = {"nvidia-fabricmanager": "580.82.07-1"}
    assert version_problems(after_an_upgrade_without_reboot, installed)[0].startswith(
        "nvidia-fabricmanager 580.82.07-1 is installed but the loaded NVIDIA driver is 580.95.05:")
    assert version_problems(dict(HGX_H200, kernel_module_version=None), installed)[0].startswith(
        "nvidia-fabricmanager 580.82.07-1 is installed but the loaded NVIDIA driver is 580.95.05:")


def test_the_whole_no_driver_message():
    assert fabric_plan(dict(HGX_H200, state="no_driver", driver_version=None, kernel_module_version=None))[
        "problems"] == [
        "Fabric Manager must match the loaded NVIDIA driver, but none is loaded (gpu_facts state no_driver): install "
        "the driver (cuda_driver_install: true) and reboot, or set cuda_fabric_manager: false."]


def test_a_package_at_the_driver_version_is_kept_and_the_next_one_still_planned():
    result = fabric_plan(HGX_H200, "nvidia-fabricmanager\t580.95.05-1\tii\n")
    assert result["install"] == ["libnvidia-nscq=580.95.05-1"]
    assert result["versions"] == {"nvidia-fabricmanager": ["580.95.05-1", "580.95.05-1"],
                                  "libnvidia-nscq": [None, "580.95.05-1"]}


def test_a_branch_named_package_moving_to_the_current_name_keeps_its_old_version():
    installed = "nvidia-fabricmanager-580\t580.82.07-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"
    assert fabric_plan(HGX_H200, installed)["versions"]["nvidia-fabricmanager"] == ["580.82.07-1", "580.95.05-1"]


def test_the_whole_message_when_the_repository_lacks_the_version_or_the_package():
    newer = dict(HGX_H200, driver_version="580.105.08", kernel_module_version="580.105.08")
    assert fabric_plan(newer)["problems"] == [
        "The CUDA repository has no nvidia-fabricmanager or nvidia-fabricmanager-580 at the loaded driver's version "
        "580.105.08 (it has nvidia-fabricmanager 580.95.05-1 580.82.07-1): check cuda_repo_base_url, or set "
        "cuda_fabric_manager: false.",
        "The CUDA repository has no libnvidia-nscq or libnvidia-nscq-580 at the loaded driver's version 580.105.08 "
        "(it has libnvidia-nscq 580.95.05-1 580.82.07-1): check cuda_repo_base_url, or set cuda_fabric_manager: "
        "false."]
    two_names = MADISON_580.replace("580.95.05", "580.90.01") + MADISON_580.replace(
        "nvidia-fabricmanager |", "nvidia-fabricmanager-580 |").replace("580.95.05", "580.90.02")
    assert fabric_plan(HGX_H200, madison=two_names)["problems"][0] == (
        "The CUDA repository has no nvidia-fabricmanager or nvidia-fabricmanager-580 at the loaded driver's version "
        "580.95.05 (it has nvidia-fabricmanager 580.90.01-1 580.82.07-1, nvidia-fabricmanager-580 580.90.02-1 "
        "580.82.07-1): check cuda_repo_base_url, or set cuda_fabric_manager: false.")
    assert fabric_plan(HGX_H200, madison="")["problems"][0] == (
        "The CUDA repository has no nvidia-fabricmanager or nvidia-fabricmanager-580 at the loaded driver's version "
        "580.95.05 (it has none of them): check cuda_repo_base_url, or set cuda_fabric_manager: false.")


def test_nothing_is_installed_when_one_package_is_missing():
    result = fabric_plan(HGX_B200, madison=MADISON_580.replace("nvlsm |", "other |"))
    assert (result["install"], result["change"], result["service"]) == ([], False, None)


def test_the_whole_version_problem():
    assert version_problems(HGX_H200, {"libnvidia-nscq-570": "570.195.03-1"}) == [
        "libnvidia-nscq-570 570.195.03-1 is installed but the loaded NVIDIA driver is 580.95.05: Fabric Manager needs "
        "its packages at the driver's exact version (it refuses to start otherwise, and CUDA then fails with error 802 "
        "on NVSwitch systems). Run role blackwell.gpu_node.cuda (cuda_fabric_manager: auto or true puts them at the "
        "driver's version), or remove libnvidia-nscq-570 where the host has no NVSwitch (cuda_fabric_manager: false)."]
