"""The offline host: no network at all, and a wheelhouse the controller downloaded once and copied over."""
import os

testinfra_hosts = ["docker://ml-stack-offline"]

WHEELHOUSE = "/var/cache/blackwell-gpu-node/wheelhouse"


def test_the_host_has_no_network_but_loopback(host):
    assert host.run("ls /sys/class/net").stdout.split() == ["lo"]


def test_the_host_installed_from_the_wheels_the_controller_copied(host):
    wheels = host.run("ls " + WHEELHOUSE).stdout.split()
    assert "torch-2.9.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl" in wheels
    assert "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl" in wheels
    assert "sglang-0.5.9-py3-none-any.whl" in wheels
    # Exactly what the install takes: flashinfer 0.6.3, which sglang pins, was never downloaded.
    assert not [wheel for wheel in wheels if "0.6.3" in wheel]


def test_the_controller_keeps_one_finished_wheelhouse(host):
    folder = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "wheelhouse")
    assert [entry.split("-")[0] for entry in os.listdir(folder)] == ["cu130"]


def test_the_host_has_no_apt_python_bindings_and_its_system_packages_were_found(host):
    assert not host.package("python3-apt").is_installed
    assert host.file("/home/sglang/ml-env/ml-stack.json").exists
