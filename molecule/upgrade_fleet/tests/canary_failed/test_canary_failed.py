"""After the canary failed: every node serves on cu128, and the two others were not touched at all."""
import json

import pytest
import testinfra

testinfra_hosts = ["docker://fleet-1", "docker://fleet-2", "docker://fleet-3"]
PORTS = {"fleet-1": 28321, "fleet-2": 28322, "fleet-3": 28323}


def test_every_node_serves_on_cu128(host):
    assert host.check_output("readlink /opt/ml-env").startswith("ml-env.cu128-")
    assert host.check_output("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:%d/health')"
                             ".status)\"" % PORTS[host.backend.name]) == "200"
    state = json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)
    log = host.file(state["log_path"]).content[state["offset"]:].decode()
    assert "stand-in: torch 2.9.1+cu128," in log


# Tests of one host take it by name instead of skipping on the other hosts: a renamed container then fails them
# (docker exec finds no such container) instead of turning them into skips everywhere.
@pytest.mark.parametrize("fleet", ["fleet-2", "fleet-3"])
def test_the_nodes_after_the_canary_were_not_switched_nor_restarted(fleet):
    host = testinfra.get_host("docker://" + fleet)
    # Their server was started before the upgrade's snapshot was recorded, and never since.
    server = host.file("/var/lib/blackwell-gpu-node/sglang.json").mtime
    assert server < host.file("/var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json").mtime
    assert host.file("/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf").contains("cuda-12.8")
    assert host.check_output("ls -d /opt/ml-env.cu130-*")
