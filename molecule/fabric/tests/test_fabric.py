"""After converge (driver 580.95.05 loaded, nvidia-smi answering as an 8x H100 HGX): Fabric Manager at the driver's
version, enabled and running, started before the server; no NVLink subnet manager on NVLink 4."""

testinfra_hosts = ["docker://fabric"]


def test_fabric_manager_is_at_the_driver_version(host):
    assert host.package("nvidia-fabricmanager").version == "580.95.05-1"
    assert host.package("libnvidia-nscq").version == "580.95.05-1"
    assert not host.package("nvlsm").is_installed


def test_fabric_manager_is_enabled_and_running(host):
    service = host.service("nvidia-fabricmanager.service")
    assert service.is_enabled and service.is_running


def test_the_fabric_is_up(host):
    details = host.run("nvidia-smi -q")
    assert details.rc == 0 and details.stdout.count("State                             : Completed") == 8


def test_fabric_manager_started_before_the_server(host):
    def started(unit):
        return int(host.run("systemctl show --property=ActiveEnterTimestampMonotonic --value %s" % unit).stdout)
    assert 0 < started("nvidia-fabricmanager.service") < started("sglang-sglang.service")
