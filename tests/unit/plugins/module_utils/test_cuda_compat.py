from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.cuda_compat import (
    TOOLKIT_DRIVER,
    compat_wanted,
    driver_numbers,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]


@pytest.mark.parametrize("driver, wanted", [
    ("580.65.06", True),     # CUDA 13.0 GA's driver: older than 13.0 Update 1 needs
    ("580.82.07", False),    # exactly what 13.0 Update 1 needs
    ("580.159.04", False),   # the recorded H200 host's
    ("590.44.01", False),
    ("570.133.20", True),
])
def test_compatibility_libraries_only_for_a_driver_older_than_the_release_needs(driver, wanted):
    assert compat_wanted(driver, "13.0.1") == {"wanted": wanted, "minimum": "580.82.07"}


@pytest.mark.parametrize("driver, wanted", [("570.86.10", True), ("570.124.06", False), ("570.195.03", False),
                                            ("580.95.05", False)])
def test_cuda_12_8_update_1_needs_570_124_06(driver, wanted):
    assert compat_wanted(driver, "12.8.1") == {"wanted": wanted, "minimum": "570.124.06"}


def test_a_two_part_minimum_compares_as_the_numbers_it_is():
    assert compat_wanted("570.26", "12.8.0")["wanted"] is False
    assert compat_wanted("570.25.99", "12.8.0")["wanted"] is True
    assert compat_wanted("570.124.06", "12.8.0")["wanted"] is False


@pytest.mark.parametrize("driver, cuda", [(None, "13.0.1"), ("unknown", "13.0.1"), ("580.95.05", "13.9.9"),
                                          ("\u0665\u0668\u0660.95.05", "13.0.1"), ("580.95.05\n", "13.0.1")])
def test_an_unknown_driver_or_release_decides_nothing(driver, cuda):
    assert compat_wanted(driver, cuda)["wanted"] is None


@pytest.mark.parametrize("version, numbers", [("580.95.05", (580, 95, 5)), ("570.26", (570, 26)), ("580", None),
                                              ("580.95.05.1.2", None), ("9" * 7 + ".1", None), (580.95, None)])
def test_driver_numbers(version, numbers):
    assert driver_numbers(version) == numbers


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_shipped_profile_has_the_driver_its_release_needs_and_it_is_of_the_profiles_branch(name):
    profile = resolve(name, PROFILES)
    minimum = TOOLKIT_DRIVER[profile["cuda"]["version"]]
    assert int(minimum.split(".")[0]) == profile["cuda"]["driver_branch_min"]
