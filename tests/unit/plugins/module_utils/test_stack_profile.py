import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack_profile import StackProfileError, resolve

SHIPPED = yaml.safe_load((Path(__file__).resolve().parents[4] / "roles" / "stack" / "defaults" / "main.yml").read_text())
PROFILES = SHIPPED["stack_profiles"]


def test_default_profile_is_the_reference_story():
    profile = resolve(SHIPPED["stack_profile"], PROFILES)
    assert profile["name"] == "cu130"
    assert profile["cuda"] == dict(version="13.0.1", series="13.0", apt_package="cuda-toolkit-13-0",
                                   apt_version="13.0.1-1", home="/usr/local/cuda-13.0", driver_branch_min=580)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_shipped_profile_is_complete(name):
    assert resolve(name, PROFILES)["name"] == name


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(StackProfileError, match=r"stack_profile=cu999 is not a known profile; known: cu128, cu130, mine"):
        resolve("cu999", PROFILES, {"mine": {}})


def test_custom_fields_lay_over_the_shipped_profile():
    profile = resolve("cu130", PROFILES, {"cu130": {"cuda": {"apt_version": "13.0.2-1"}}})
    assert profile["cuda"]["apt_version"] == "13.0.2-1"
    assert profile["cuda"]["series"] == "13.0"
    assert PROFILES["cu130"]["cuda"]["apt_version"] == "13.0.1-1"  # the shipped data is not modified


def test_new_profile_missing_fields_names_each_and_where_to_fix_it():
    partial = copy.deepcopy(PROFILES["cu130"])
    del partial["cuda"]["home"]
    partial["cuda"]["driver_branch_min"] = "580"
    partial["architectures"] = ["x86_64", "ppc64le"]
    with pytest.raises(StackProfileError) as error:
        resolve("site", PROFILES, {"site": partial})
    message = str(error.value)
    assert "fix stack_profiles_custom.site" in message
    assert "cuda.home is missing (it must be an absolute path)" in message
    assert "cuda.driver_branch_min='580' is not the oldest driver branch, an integer like 580" in message
    assert "architectures=['x86_64', 'ppc64le'] is not a non-empty list among x86_64, aarch64" in message


def test_custom_profiles_must_be_mappings():
    with pytest.raises(StackProfileError, match="stack_profiles_custom must map profile names to profiles"):
        resolve("cu130", PROFILES, {"cu130": "13.0.2"})
