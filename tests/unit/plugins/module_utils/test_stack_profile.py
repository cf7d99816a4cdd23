import copy
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import os_id
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import StackProfileError, resolve
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

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
    known = ("cu128, cu130, mine, sglang-0.5.17-cu130, sglang-0.5.23-cu130, sglang-0.5.9-cu128, sglang-0.5.9-cu130")
    with pytest.raises(StackProfileError, match="stack_profile=cu999 is not a known profile; known: %s\\." % re.escape(known)):
        resolve("cu999", PROFILES, {"mine": {}})


def test_custom_fields_lay_over_the_shipped_profile():
    profile = resolve("cu130", PROFILES, {"cu130": {"cuda": {"apt_version": "13.0.2-1"}}})
    assert profile["cuda"]["apt_version"] == "13.0.2-1"
    assert profile["cuda"]["series"] == "13.0"
    assert PROFILES["cu130"]["cuda"]["apt_version"] == "13.0.1-1"  # the shipped data is not modified


def test_new_profile_missing_fields_names_each_and_where_to_fix_it():
    partial = copy.deepcopy(PROFILES["cu130"])
    del partial["aliases"], partial["cuda"]["home"]
    partial["cuda"]["driver_branch_min"] = "580"
    partial["architectures"] = ["x86_64", "ppc64le"]
    with pytest.raises(StackProfileError) as error:
        resolve("site", PROFILES, {"site": partial})
    message = str(error.value)
    assert "fix stack_profiles_custom.site" in message
    assert "cuda.home is missing (it must be an absolute path of letters, digits" in message
    assert "cuda.driver_branch_min='580' is not the oldest driver branch, an integer like 580" in message
    assert "architectures=['x86_64', 'ppc64le'] is not a non-empty list among x86_64, aarch64" in message


def test_custom_profiles_must_be_mappings():
    with pytest.raises(StackProfileError, match="stack_profiles_custom must map profile names to profiles"):
        resolve("cu130", PROFILES, {"cu130": "13.0.2"})


def test_default_profile_carries_the_reference_python_stack():
    python = resolve(SHIPPED["stack_profile"], PROFILES)["python"]
    assert python["min_version"] == "3.10"
    assert python["torch"] == dict(version="2.9.1+cu130", source="https://download.pytorch.org/whl/cu130", cuda="13.0")
    assert python["sgl_kernel"] == dict(
        distribution="sgl-kernel", version="0.3.21",
        source="https://github.com/sgl-project/whl/releases/download/v0.3.21/"
               "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl")
    assert python["flashinfer_python"]["version"] == python["flashinfer_cubin"]["version"] == "0.6.4"
    assert python["flashinfer_jit_cache"] == dict(version="0.6.4+cu130", source="https://flashinfer.ai/whl/cu130")
    assert python["sglang"] == dict(version="0.5.9", source="https://pypi.org/simple", entrypoint="launch_server")


def test_cu128_profile_is_installable_from_pypi_but_its_jit_cache():
    python = resolve("cu128", PROFILES)["python"]
    assert python["torch"] == dict(version="2.9.1", source="https://pypi.org/simple", cuda="12.8")
    sources = set(python[package]["source"] for package in python if package not in ("min_version", "lock"))
    assert sources == {"https://pypi.org/simple", "https://flashinfer.ai/whl/cu128"}


def test_a_profile_may_go_without_the_flashinfer_jit_cache():
    profile = resolve("cu128", PROFILES, {"cu128": {"python": {"flashinfer_jit_cache": {"version": None}}}})
    assert profile["python"]["flashinfer_jit_cache"]["version"] is None


@pytest.mark.parametrize("field, value, expected", [
    ("min_version", 3.1, "python.min_version=3.1 is not major.minor like 3.10 (quoted in YAML)"),
    ("torch", {"version": 2.9}, "python.torch.version=2.9 is not an exact version"),
    ("torch", {"version": "2.9.*"}, "python.torch.version='2.9.*' is not an exact version"),
    ("torch", {"cuda": 13}, "python.torch.cuda=13 is not the CUDA version torch.version.cuda reports, like 13.0"),
    ("sgl_kernel", {"source": "pypi.org/simple"}, "python.sgl_kernel.source='pypi.org/simple' is not an http(s):// or file:// URL"),
    ("sglang", {"version": None}, "python.sglang.version=None is not an exact version"),
])
def test_malformed_python_stack_fields_are_named(field, value, expected):
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, {"cu130": {"python": {field: value}}})
    assert expected in str(error.value)


@pytest.mark.parametrize("field, value", [
    ("cuda.version", "13.0.1\n"), ("cuda.series", "13.0\n"), ("cuda.apt_package", "cuda-toolkit-13-0\n"),
    ("cuda.apt_version", "13.0.1-1\n"), ("python.torch.version", "2.9.1+cu130\n"), ("python.min_version", "3.10\n"),
    ("python.sglang.source", "https://pypi.org/simple\n"), ("operating_systems", ["debian12\n"]),
])
def test_a_trailing_newline_is_refused(field, value):
    overlay = value
    for key in reversed(field.split(".")):
        overlay = {key: overlay}
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, {"cu130": overlay})
    assert field in str(error.value)


@pytest.mark.parametrize("field, value", [
    ("cuda.home", "/usr/local/cuda-13.0\nexport LD_PRELOAD=/tmp/x.so"),
    ("cuda.home", "/usr/local/cuda-13.0\x85"),
    ("python.torch.source", "https://download.pytorch.org/whl/cu130\x00"),
    ("python.sglang.source", "file:///srv/wheels\x7f"),
    ("description", "CUDA 13\n[global]"),
])
def test_control_characters_are_refused_naming_the_custom_field(field, value):
    overlay = value
    for key in reversed(field.split(".")):
        overlay = {key: overlay}
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, {"cu130": overlay})
    assert control_character_problem(value, "stack_profiles_custom.cu130.%s" % field) in str(error.value)


@pytest.mark.parametrize("home", ["/usr/local/cuda 13", "/usr/local/cuda-$(id)", "/opt/cuda;reboot", "/opt/`x`"])
def test_cuda_home_is_a_plain_path_because_it_reaches_a_shell_profile(home):
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, {"cu130": {"cuda": {"home": home}}})
    assert "cuda.home=%r is not an absolute path" % home in str(error.value)


@pytest.mark.parametrize("profiles", [[PROFILES["cu130"]], ["cu130"], "cu130", None, {"cu130": None}, {1: {}}])
def test_shipped_profiles_that_are_not_a_mapping_of_mappings_are_named(profiles):
    with pytest.raises(StackProfileError, match=r"^stack_profiles must map profile names to profiles"):
        resolve("cu130", profiles)


@pytest.mark.parametrize("custom", [[{"cu130": {}}], "cu130", {130: {}}])
def test_custom_profiles_that_are_not_a_mapping_of_mappings_are_named(custom):
    with pytest.raises(StackProfileError, match=r"^stack_profiles_custom must map profile names to profiles"):
        resolve("cu130", PROFILES, custom)


PIN = "an exact version as the installed distribution reports it, like 2.9.1+cu130 (quoted in YAML if it has one dot)"
SOURCE = ("an http(s):// or file:// URL: a package index (PEP 503, like https://pypi.org/simple) or one wheel "
          "(ending in .whl)")


def test_an_empty_profile_names_every_field_with_what_it_must_be():
    expected = [
        ("description", "a non-empty string"),
        ("operating_systems", "a non-empty list of OS ids like debian12, ubuntu2404"),
        ("architectures", "a non-empty list among x86_64, aarch64"),
        ("cuda.version", "a CUDA release like 13.0.1"),
        ("cuda.series", "major.minor like 13.0"),
        ("cuda.apt_package", "a Debian package name like cuda-toolkit-13-0"),
        ("cuda.apt_version", "a Debian version like 13.0.1-1"),
        ("cuda.home", "an absolute path of letters, digits, '.', '_', '+', '-' and '/'"),
        ("cuda.driver_branch_min", "the oldest driver branch, an integer like 580"),
        ("python.min_version", "major.minor like 3.10 (quoted in YAML)"),
        ("python.torch.version", PIN), ("python.torch.source", SOURCE),
        ("python.torch.cuda", "the CUDA version torch.version.cuda reports, like 13.0"),
        ("python.sgl_kernel.version", PIN), ("python.sgl_kernel.source", SOURCE),
        ("python.flashinfer_python.version", PIN), ("python.flashinfer_python.source", SOURCE),
        ("python.flashinfer_cubin.version", PIN + ", or null for none"), ("python.flashinfer_cubin.source", SOURCE),
        ("python.flashinfer_jit_cache.version", PIN + ", or null for none"),
        ("python.flashinfer_jit_cache.source", SOURCE),
        ("python.sglang.version", PIN), ("python.sglang.source", SOURCE),
    ]
    with pytest.raises(StackProfileError) as error:
        resolve("empty", PROFILES, {"empty": {}})
    assert str(error.value) == "Stack profile empty is incomplete; fix stack_profiles_custom.empty:\n" + "\n".join(
        "- %s is missing (it must be %s)" % pair for pair in expected)


def test_unknown_name_message_says_how_to_fix_it():
    with pytest.raises(StackProfileError) as error:
        resolve("cu999", PROFILES)
    assert str(error.value) == ("stack_profile=cu999 is not a known profile; known: cu128, cu130, sglang-0.5.17-cu130, "
                                "sglang-0.5.23-cu130, sglang-0.5.9-cu128, sglang-0.5.9-cu130. Set stack_profile to "
                                "one of them, or define it under stack_profiles_custom.")


def test_a_broken_shipped_profile_names_stack_profiles_as_the_place_to_fix():
    broken = copy.deepcopy(PROFILES["cu130"])
    broken["description"] = "CUDA 13\x1b"
    broken["cuda"]["series"] = "13"
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", {"cu130": broken})
    assert str(error.value) == (
        "Stack profile cu130 is incomplete; fix stack_profiles.cu130:\n- %s\n- cuda.series='13' is not major.minor "
        "like 13.0" % control_character_problem("CUDA 13\x1b", "stack_profiles.cu130.description"))


@pytest.mark.parametrize("field, value", [
    ("description", ""), ("description", 13), ("operating_systems", []), ("operating_systems", ["Debian12"]),
    ("architectures", []), ("cuda.driver_branch_min", 0),
])
def test_empty_and_malformed_values_are_refused(field, value):
    overlay = value
    for key in reversed(field.split(".")):
        overlay = {key: overlay}
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, {"cu130": overlay})
    assert "\n- %s=%r is not " % (field, value) in str(error.value)


def test_driver_branch_one_is_the_smallest_accepted():
    assert resolve("cu130", PROFILES, {"cu130": {"cuda": {"driver_branch_min": 1}}})["cuda"]["driver_branch_min"] == 1


@pytest.mark.parametrize("distribution, version, expected", [
    (None, None, ""), ("Ubuntu", None, "ubuntu"), ("Debian", None, "debian"), (None, "12.4", "12"),
])
def test_os_id_of_missing_facts_adds_nothing(distribution, version, expected):
    assert os_id(distribution, version) == expected


@pytest.mark.parametrize("alias, name", [("sglang-0.5.9-cu130", "cu130"), ("sglang-0.5.9-cu128", "cu128"),
                                         ("cu130", "cu130")])
def test_a_profile_answers_to_its_aliases_under_its_own_name(alias, name):
    assert resolve(alias, PROFILES) == resolve(name, PROFILES)
    assert resolve(alias, PROFILES)["name"] == name


def test_a_custom_alias_reaches_the_custom_profile():
    assert resolve("prod", PROFILES, {"site": dict(PROFILES["cu130"], aliases=["prod"])})["name"] == "site"


@pytest.mark.parametrize("custom, claimed", [
    ({"site": dict(PROFILES["cu130"], aliases=["cu128"])}, "cu128 names cu128 and site"),
    ({"a": dict(PROFILES["cu130"], aliases=["x"]), "b": dict(PROFILES["cu130"], aliases=["x"])}, "x names a and b"),
])
def test_an_alias_that_two_names_claim_is_refused(custom, claimed):
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, custom)
    assert str(error.value) == ("Stack profile names are ambiguous: %s. Rename the alias under "
                                "stack_profiles_custom.<profile>.aliases so that each name means one profile." % claimed)


def test_a_profile_from_inventory_without_the_newer_fields_keeps_their_meaning():
    older = copy.deepcopy(PROFILES["cu130"])
    for key in ("aliases", "gateway"):
        del older[key]
    del older["python"]["lock"], older["python"]["sgl_kernel"]["distribution"], older["python"]["sglang"]["entrypoint"]
    profile = resolve("older", PROFILES, {"older": older})
    assert profile["aliases"] == []
    assert profile["python"]["sgl_kernel"]["distribution"] == "sgl-kernel"
    assert profile["python"]["sglang"]["entrypoint"] == "launch_server"
    assert profile["python"]["lock"] is None
    assert profile["gateway"] == {"package": "sglang-router", "version": "0.3.2"}


@pytest.mark.parametrize("name, sglang, kernel, torch, python, gateway", [
    ("sglang-0.5.17-cu130", "0.5.17", ("sglang-kernel", "0.4.5"), "2.11.0", "3.10", "smg"),
    ("sglang-0.5.23-cu130", "0.5.23", ("sglang-kernel", "0.4.10"), "2.14.1", "3.11", "smg"),
])
def test_the_newer_releases_are_locked_pypi_profiles_served_by_sglang_serve(name, sglang, kernel, torch, python, gateway):
    profile = resolve(name, PROFILES)
    assert (profile["python"]["sglang"]["version"], profile["python"]["sglang"]["entrypoint"]) == (sglang, "serve")
    assert (profile["python"]["sgl_kernel"]["distribution"], profile["python"]["sgl_kernel"]["version"]) == kernel
    assert (profile["python"]["torch"]["version"], profile["python"]["torch"]["cuda"]) == (torch, "13.0")
    assert profile["python"]["min_version"] == python
    assert profile["python"]["lock"] == name + ".json"
    assert profile["gateway"]["package"] == gateway
    assert profile["python"]["flashinfer_cubin"]["version"] is None
    assert {profile["python"][package]["source"] for package in ("torch", "sgl_kernel", "flashinfer_python", "sglang")} \
        == {"https://pypi.org/simple"}


@pytest.mark.parametrize("overlay, expected", [
    ({"python": {"sgl_kernel": {"distribution": "sgl_kernel"}}},
     "python.sgl_kernel.distribution='sgl_kernel' is not the kernel's distribution name, one of sgl-kernel, sglang-kernel"),
    ({"python": {"sglang": {"entrypoint": "sglang serve"}}},
     "python.sglang.entrypoint='sglang serve' is not how the release starts its server, one of launch_server, serve"),
    ({"python": {"lock": "../etc/lock.json"}}, "python.lock='../etc/lock.json' is not null (no lock"),
    ({"python": {"lock": "lock.txt"}}, "python.lock='lock.txt' is not null (no lock"),
    ({"gateway": {"package": "sgl-router"}}, "gateway.package='sgl-router' is not one of sglang-router, smg"),
    ({"gateway": {"version": "1.13.*"}}, "gateway.version='1.13.*' is not an exact version"),
    ({"aliases": ["cu 130"]}, "aliases=['cu 130'] is not a list of other names of the profile"),
])
def test_the_release_fields_are_checked(overlay, expected):
    with pytest.raises(StackProfileError) as error:
        resolve("cu130", PROFILES, {"cu130": overlay})
    assert expected in str(error.value)
