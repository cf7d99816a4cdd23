"""The refused cases left apt and the linker as they were."""
testinfra_hosts = ["docker://cuda-errors"]


def test_no_repository_list_or_key_is_left(host):
    assert host.check_output("ls /etc/apt/sources.list.d") == ""
    assert not host.file("/usr/share/keyrings/cuda-archive-keyring.gpg").exists


def test_apt_still_works(host):
    assert host.run("apt-get update").rc == 0


def test_nothing_was_installed_or_registered(host):
    assert not host.file("/usr/local/cuda-13.0").exists
    assert not host.file("/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf").exists
