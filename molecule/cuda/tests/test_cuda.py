"""What the dynamic linker, dpkg, apt and a login shell see after the cuda role, from inside the containers."""
import re

import pytest
import testinfra

FRESH, ADOPTED = "docker://cuda-fresh", "docker://cuda-adopt"
testinfra_hosts = [FRESH, ADOPTED]
CUDA_HOME = "/usr/local/cuda-13.0"
NVRTC_VERSION = (
    "import ctypes; nvrtc = ctypes.CDLL('libnvrtc.so.13'); major, minor = ctypes.c_int(), ctypes.c_int(); "
    "nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)); print(major.value, minor.value)"
)


# Tests of one host take it by name instead of skipping on the other hosts: a renamed container then fails them
# (docker exec finds no such container) instead of turning them into skips everywhere.
@pytest.fixture(scope="module")
def fresh():
    return testinfra.get_host(FRESH)


@pytest.fixture(scope="module")
def adopted():
    return testinfra.get_host(ADOPTED)


def linker_cache(host):
    """soname -> the real paths `ldconfig -p` resolves it to."""
    listed = []
    for line in host.check_output("ldconfig -p").splitlines():
        match = re.match(r"^\s*(\S+) \([^)]*\) => (\S+)$", line)
        if match:
            listed.append(match.groups())
    real = host.check_output("realpath " + " ".join(path for _soname, path in listed)).splitlines()
    cache = {}
    for (soname, _path), resolved in zip(listed, real):
        cache.setdefault(soname, []).append(resolved)
    return cache


@pytest.mark.parametrize("soname", ["libcudart.so.13", "libnvrtc.so.13"])
def test_linker_resolves_cuda_13_into_its_home(host, soname):
    paths = linker_cache(host)[soname]
    assert paths and all(path.startswith(CUDA_HOME + "/targets/x86_64-linux/lib/") for path in paths)


def test_nvrtc_loads_and_reports_cuda_13_0(host):
    assert host.check_output("python3 -c %s" % repr(NVRTC_VERSION)) == "13 0"


def test_no_cuda_12_library_is_left_for_the_linker(host):
    assert not [path for paths in linker_cache(host).values() for path in paths if path.startswith("/usr/local/cuda-12")]


def test_usr_local_cuda_points_at_cuda_13(host):
    assert host.check_output("realpath /usr/local/cuda") == CUDA_HOME


def test_login_shells_get_cuda_home_and_its_bin(host):
    assert host.check_output("bash -lc 'echo $CUDA_HOME'") == CUDA_HOME
    assert CUDA_HOME + "/bin" in host.check_output("bash -lc 'echo $PATH'").split(":")


def test_fresh_host_has_the_pinned_toolkit_held_although_a_newer_one_is_offered(fresh):
    assert fresh.package("cuda-toolkit-13-0").version == "13.0.1-1"
    assert "13.0.2-1" in fresh.check_output("apt-cache madison cuda-toolkit-13-0")
    assert fresh.check_output("dpkg --get-selections cuda-toolkit-13-0").split() == ["cuda-toolkit-13-0", "hold"]
    upgrade = fresh.check_output("apt-get --simulate upgrade")
    assert "Inst cuda-toolkit-13-0" not in upgrade
    assert re.search(r"kept back:\n\s+cuda-toolkit-13-0\n", upgrade)


def test_fresh_host_trusts_the_repository_through_signed_by(fresh):
    listing = fresh.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.list").content_string
    assert re.match(r"^deb \[signed-by=/usr/share/keyrings/cuda-archive-keyring\.gpg\] file:///\S+/debian12/x86_64/ /\n$",
                    listing)
    keys = fresh.check_output("gpg --batch --show-keys --with-colons /usr/share/keyrings/cuda-archive-keyring.gpg")
    fingerprint = fresh.file(listing.split()[2][len("file://"):].rsplit("/debian12/", 1)[0] + "/FINGERPRINT")
    assert "fpr:::::::::%s:" % fingerprint.content_string.strip() in keys


def test_fresh_host_keeps_no_copy_of_a_list_or_key_the_role_replaced(fresh):
    # copy's backups (NAME.PID.DATE~) served a failed change's rescue alone.
    assert fresh.check_output("find /etc/apt/sources.list.d /usr/share/keyrings -name '*~'") == ""


def test_fresh_host_no_longer_trusts_the_revoked_key(fresh):
    fingerprint = fresh.file("/root/revoked.fingerprint").content_string.strip()
    assert fingerprint and fingerprint[-8:] not in fresh.check_output("apt-key list 2>/dev/null").replace(" ", "")


def test_fresh_host_keeps_the_cuda_12_entry_disabled_not_deleted(fresh):
    assert not fresh.file("/etc/ld.so.conf.d/987_cuda-12.conf").exists
    disabled = fresh.file("/etc/ld.so.conf.d/987_cuda-12.conf.disabled-by-blackwell-gpu-node")
    assert disabled.content_string == "/usr/local/cuda-12/targets/x86_64-linux/lib\n"


def test_adopted_host_got_no_repository_and_no_toolkit_package(adopted):
    assert not adopted.package("cuda-toolkit-13-0").is_installed
    assert adopted.check_output("ls /etc/apt/sources.list.d") == ""
