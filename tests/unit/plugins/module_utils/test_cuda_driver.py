import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.driver import (
    branch_of,
    debian_mirror_problems,
    module_state,
    parse_installed,
    parse_madison,
    plan,
    upstream_version,
)

# apt-cache madison on a host with NVIDIA's debian12 repository (the fixture's branches, 570 and 580).
MADISON = """\
nvidia-driver-pinning-580 |      580-5 | file:/srv/cuda/debian12/x86_64  Packages
nvidia-open | 580.95.05-1 | file:/srv/cuda/debian12/x86_64  Packages
nvidia-open | 580.82.07-1 | file:/srv/cuda/debian12/x86_64  Packages
nvidia-open | 570.195.03-1 | file:/srv/cuda/debian12/x86_64  Packages
"""
# dpkg-query --show --showformat='${Package}\t${Version}\t${db:Status-Abbrev}\n' on a host of branch 570.
ON_570 = ("nvidia-driver-pinning-570\t570-5\tii \n"
          "nvidia-open\t570.195.03-1\tii \n"
          "nvidia-driver-pinning-580\t\tun \n")
OPEN_580 = dict(state="ok", kernel_module="open", kernel_module_version="580.95.05",
                kernel_module_installed_version=None)


def test_versions_and_branches():
    assert upstream_version("580.95.05-1") == "580.95.05"
    assert upstream_version("1:580.95.05-0ubuntu1") == "580.95.05"
    assert branch_of("570.195.03-1") == 570
    assert upstream_version("580.95.05-1\n") is None and branch_of(None) is None and branch_of("latest") is None


def test_installed_packages_are_those_dpkg_says_are_installed():
    assert parse_installed(ON_570) == {"nvidia-driver-pinning-570": "570-5", "nvidia-open": "570.195.03-1"}
    assert parse_installed("nvidia-open\t580.95.05-1\thi \n") == {"nvidia-open": "580.95.05-1"}
    assert parse_installed("nvidia-open\t580.95.05-1\trc \n") == {}


def test_madison_lists_each_packages_versions():
    assert parse_madison(MADISON) == {"nvidia-driver-pinning-580": ["580-5"],
                                      "nvidia-open": ["580.95.05-1", "580.82.07-1", "570.195.03-1"]}


def test_a_branch_move_replaces_the_pin_and_takes_the_newest_driver_of_the_branch():
    moved = plan(580, ["nvidia-open"], parse_installed(ON_570), parse_madison(MADISON))
    assert moved == dict(problems=[], purge=["nvidia-driver-pinning-570"], pin=["nvidia-driver-pinning-580"],
                         install=["nvidia-open=580.95.05-1"], change=True,
                         versions={"nvidia-open": ["570.195.03-1", "580.95.05-1"]})


def test_a_fresh_host_gets_the_pin_then_the_driver():
    fresh = plan(580, ["nvidia-open"], {}, parse_madison(MADISON))
    assert fresh["pin"] == ["nvidia-driver-pinning-580"] and fresh["purge"] == []
    assert fresh["install"] == ["nvidia-open=580.95.05-1"] and fresh["change"] is True
    assert fresh["versions"] == {"nvidia-open": [None, "580.95.05-1"]}


def test_a_driver_already_on_the_branch_is_left_at_its_version():
    installed = {"nvidia-driver-pinning-580": "580-5", "nvidia-open": "580.82.07-1"}
    same = plan(580, ["nvidia-open"], installed, parse_madison(MADISON))
    assert same == dict(problems=[], purge=[], pin=[], install=[], change=False,
                        versions={"nvidia-open": ["580.82.07-1", "580.82.07-1"]})


def test_a_move_back_to_an_older_branch_is_planned_too():
    installed = {"nvidia-driver-pinning-580": "580-5", "nvidia-open": "580.95.05-1"}
    madison = MADISON + "nvidia-driver-pinning-570 | 570-5 | file:/srv/cuda/debian12/x86_64  Packages\n"
    back = plan(570, ["nvidia-open"], installed, parse_madison(madison))
    assert back["pin"] == ["nvidia-driver-pinning-570"] and back["install"] == ["nvidia-open=570.195.03-1"]
    assert back["purge"] == ["nvidia-driver-pinning-580"]


def test_a_branch_the_repository_lacks_is_refused_naming_the_variables_and_what_it_has():
    missing = plan(590, ["nvidia-open"], parse_installed(ON_570), parse_madison(MADISON))
    assert missing["change"] is False and missing["install"] == [] and missing["purge"] == [] and missing["pin"] == []
    assert missing["problems"] == [
        "The CUDA repository has no nvidia-driver-pinning-590, NVIDIA's package that locks driver branch 590 "
        "(cuda_driver_branch=590): check cuda_repo_base_url, or choose a branch it has.",
        "The CUDA repository has no nvidia-open of driver branch 590 (cuda_driver_branch=590; it has branch(es) "
        "570, 580): check cuda_repo_base_url and cuda_driver_packages, or choose a branch it has."]
    unknown = plan(580, ["nvidia-opne"], {}, parse_madison(MADISON))
    assert unknown["problems"] == [
        "The CUDA repository has no nvidia-opne of driver branch 580 (cuda_driver_branch=580; it has no version of "
        "it): check cuda_repo_base_url and cuda_driver_packages, or choose a branch it has."]


def test_versions_compare_as_numbers():
    madison = ("nvidia-driver-pinning-580 | 580-5 | x Packages\n"
               "nvidia-open | 580.9.1-1 | x Packages\nnvidia-open | 580.95.05-1 | x Packages\n"
               "nvidia-open | 580.95.05-10 | x Packages\nnvidia-open | 580.95.05-2 | x Packages\n")
    assert plan(580, ["nvidia-open"], {}, parse_madison(madison))["install"] == ["nvidia-open=580.95.05-10"]


@pytest.mark.parametrize("gpu,pending,message", [
    (OPEN_580, False, "NVIDIA driver 580.95.05 is installed and loaded (open kernel module)"),
    (dict(OPEN_580, kernel_module_version="570.195.03"), True,
     "NVIDIA driver 580.95.05 is installed but kernel module 570.195.03 is loaded"),
    (dict(OPEN_580, kernel_module_version=None, kernel_module=None), True,
     "NVIDIA driver 580.95.05 is installed but no NVIDIA kernel module is loaded"),
    (dict(OPEN_580, kernel_module="proprietary"), True,
     "NVIDIA driver 580.95.05 is loaded with the proprietary kernel module, not the open one that nvidia-open "
     "installs"),
    # DKMS built another version for the running kernel: modinfo's answer is what a reboot loads.
    (dict(OPEN_580, kernel_module_installed_version="580.105.08"), True,
     "NVIDIA driver 580.105.08 is installed but kernel module 580.95.05 is loaded"),
])
def test_the_loaded_module_must_be_the_installed_open_one(gpu, pending, message):
    state = module_state("580.95.05-1", gpu)
    assert state["pending"] is pending and state["message"] == message


@pytest.mark.parametrize("url,problem", [
    ("http://deb.debian.org/debian", None),
    ("file:///srv/debian", None),
    ("http://deb.debian.org/debian\nURIs: http://evil.example", "cuda_debian_mirror: the value holds the control"),
    ("http://a http://b", "is not one http://, https:// or file:// URL without spaces"),
    ("deb.debian.org/debian", "fix cuda_debian_mirror"),
])
def test_the_debian_mirror_must_be_one_url_for_the_sources_file(url, problem):
    problems = debian_mirror_problems(url)
    assert problems == [] if problem is None else (len(problems) == 1 and problem in problems[0])


def newest(*versions):
    madison = "".join("nvidia-open | %s | x Packages\n" % version for version in versions)
    return plan(580, ["nvidia-open"], {"nvidia-driver-pinning-580": "580-5"}, parse_madison(madison))["install"]


def test_the_newest_version_by_upstream_numbers_then_revision():
    assert newest("580.95.05-1", "580.105.08-1") == ["nvidia-open=580.105.08-1"]
    assert newest("580.105.08", "580.95.05") == ["nvidia-open=580.105.08"]
    assert newest("580.95.05-1", "580.95.05") == ["nvidia-open=580.95.05-1"]
    assert newest("580.95.05-0ubuntu10", "580.95.05-0ubuntu9") == ["nvidia-open=580.95.05-0ubuntu10"]


def test_madison_lines_without_a_package_or_version_and_repeated_versions_are_left_out():
    assert parse_madison("nvidia-open | 580.95.05-1 | a Packages\n | 580.82.07-1 | a Packages\n"
                         "nvidia-open |  | a Packages\nnvidia-open | 570.195.03-1\nnvidia-open\n"
                         "nvidia-open | 580.95.05-1 | b Packages\n") == {"nvidia-open": ["580.95.05-1"]}


def test_each_driver_package_is_planned_on_its_own():
    madison = "nvidia-driver-pinning-580 | 580-5 | x Packages\nnvidia-open | 580.95.05-1 | x Packages\n"
    installed = {"nvidia-driver-pinning-580": "580-5", "nvidia-kernel-open-dkms": "580.95.05-1"}
    assert plan(580, ["nvidia-kernel-open-dkms", "nvidia-open"], installed, parse_madison(madison)) == dict(
        problems=[], purge=[], pin=[], install=["nvidia-open=580.95.05-1"], change=True,
        versions={"nvidia-kernel-open-dkms": ["580.95.05-1", "580.95.05-1"], "nvidia-open": [None, "580.95.05-1"]})
    refused = plan(580, ["nvidia-a", "nvidia-b"], installed, parse_madison(madison))
    assert refused == dict(problems=[
        "The CUDA repository has no %s of driver branch 580 (cuda_driver_branch=580; it has no version of it): check "
        "cuda_repo_base_url and cuda_driver_packages, or choose a branch it has." % package
        for package in ("nvidia-a", "nvidia-b")], purge=[], pin=[], install=[], change=False, versions={})


def test_an_old_pin_left_beside_the_branchs_is_purged_alone():
    installed = {"nvidia-driver-pinning-580": "580-5", "nvidia-driver-pinning-570": "570-5",
                 "nvidia-open": "580.95.05-1"}
    assert plan(580, ["nvidia-open"], installed, {}) == dict(
        problems=[], purge=["nvidia-driver-pinning-570"], pin=[], install=[], change=True,
        versions={"nvidia-open": ["580.95.05-1", "580.95.05-1"]})


@pytest.mark.parametrize("gpu,installed,loaded", [
    (OPEN_580, "580.95.05", "580.95.05"),
    (dict(OPEN_580, kernel_module_version="570.195.03"), "580.95.05", "570.195.03"),
    (dict(OPEN_580, kernel_module_version=None), "580.95.05", None),
    (dict(OPEN_580, kernel_module="proprietary"), "580.95.05", "580.95.05"),
])
def test_the_module_state_names_the_installed_and_loaded_versions(gpu, installed, loaded):
    state = module_state("580.95.05-1", gpu)
    assert sorted(state) == ["installed", "loaded", "message", "pending"]
    assert (state["installed"], state["loaded"]) == (installed, loaded)


def test_the_whole_message_of_a_mirror_that_is_not_a_url():
    assert debian_mirror_problems("deb.debian.org/debian") == [
        "cuda_debian_mirror=deb.debian.org/debian is not one http://, https:// or file:// URL without spaces (a "
        "Debian mirror such as http://deb.debian.org/debian): fix cuda_debian_mirror."]
