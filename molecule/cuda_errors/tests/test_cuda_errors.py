"""The refused cases left apt and the linker as they were."""
testinfra_hosts = ["docker://cuda-errors"]

LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"


def test_the_administrators_list_is_put_back_and_no_key_is_left(host):
    # repository-without-packages wrote the role's list over it, and a keyring, before apt refused the mirror.
    assert host.check_output("ls /etc/apt/sources.list.d") == "cuda-debian12-x86_64.list"
    assert host.file(LIST).content == host.file("/root/cuda-debian12-x86_64.list.before").content
    assert not host.file("/usr/share/keyrings/cuda-archive-keyring.gpg").exists


def test_no_copy_of_a_list_or_key_is_left(host):
    # copy's backups (NAME.PID.DATE~) served the rescue alone.
    assert host.check_output("find /etc/apt/sources.list.d /usr/share/keyrings -name '*~'") == ""


def test_apt_still_works(host):
    assert host.run("apt-get update").rc == 0


def test_nothing_was_installed_or_registered(host):
    assert not host.file("/usr/local/cuda-13.0").exists
    assert not host.file("/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf").exists
