"""After the fleet's upgrade: every node serves on cu130 and keeps cu128 for the next rollback."""
import json

testinfra_hosts = ["docker://fleet-1", "docker://fleet-2", "docker://fleet-3"]
PORTS = {"fleet-1": 28321, "fleet-2": 28322, "fleet-3": 28323}


def test_every_node_serves_on_cu130(host):
    assert host.check_output("readlink /opt/ml-env").startswith("ml-env.cu130-")
    assert host.check_output("realpath /usr/local/cuda") == "/usr/local/cuda-13.0"
    state = json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)
    cmdline = host.file("/proc/%d/cmdline" % state["pid"]).content.split(b"\0")[:-1]
    assert [word.decode() for word in cmdline] == state["argv"]
    log = host.file(state["log_path"]).content[state["offset"]:].decode()
    assert "stand-in: torch 2.9.1+cu130," in log
    assert host.check_output("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:%d/health')"
                             ".status)\"" % PORTS[host.backend.name]) == "200"
    assert len(host.check_output("ls -d /opt/ml-env.cu128-*").split()) == 1
