"""Each node runs its rank of one server: argv from the group, both serving /health, only rank 0 announcing."""
import json

import pytest
import testinfra

NODES = ["docker://sglang-node-0", "docker://sglang-node-1"]  # by rank
testinfra_hosts = NODES
READY = "The server is fired up and ready to roll!"


def rank(host):
    return NODES.index("docker://%s" % host.backend.name)


def test_argv_carries_the_nodes_place(host):
    state = json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)
    argv = state["argv"]
    assert argv[:3] == ["/opt/ml-env/bin/python", "-m", "sglang.launch_server"]
    options = dict(zip(argv[3::2], argv[4::2]))
    assert options["--nnodes"] == "2" and options["--node-rank"] == str(rank(host))
    assert options["--dist-init-addr"] == "sglang-node-0:5757"
    assert options["--tensor-parallel-size"] == "4"


def test_both_nodes_serve_health(host):
    port = 28200 + rank(host)
    assert host.check_output("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:%d/health')"
                             ".status)\"" % port) == "200"


# Tests of one host take it by name instead of skipping on the other hosts: a renamed container then fails them
# (docker exec finds no such container) instead of turning them into skips everywhere.
@pytest.mark.parametrize("node", [0, 1])
def test_only_rank_0_announces_readiness(node):
    announced = READY in testinfra.get_host(NODES[node]).file("/var/log/sglang/sglang.log").content_string
    assert announced is (node == 0)


def test_the_module_manager_runs_the_server_as_the_service_user(host):
    # No systemd in these containers: manager auto picks the module, which drops to sglang in the child.
    state = json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)
    assert state["manager"] == "module" and state["identity"] == {"user": "sglang", "group": "sglang"}
    status = host.file("/proc/%d/status" % state["pid"]).content_string
    uid = [line.split()[1] for line in status.splitlines() if line.startswith("Uid:")][0]
    assert int(uid) == host.user("sglang").uid != 0
    log = host.file("/var/log/sglang/sglang.log")
    assert log.user == "root" and log.mode == 0o640
