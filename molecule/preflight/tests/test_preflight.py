"""Preflight only looks: the containers hold nothing it could have created, and what prepare put there is as it was."""
import hashlib
from pathlib import Path

import pytest
import testinfra

ROOT = Path(__file__).resolve().parents[3]
PLAIN, STANDIN = "docker://preflight-plain", "docker://preflight-h200-standin"
testinfra_hosts = [PLAIN, STANDIN]


# Tests of one host take it by name instead of skipping on the other hosts: a renamed container then fails them
# (docker exec finds no such container) instead of turning them into skips everywhere.
@pytest.fixture(scope="module")
def plain():
    return testinfra.get_host(PLAIN)


@pytest.fixture(scope="module")
def standin():
    return testinfra.get_host(STANDIN)


@pytest.mark.parametrize("path", ["/var/lib/blackwell-gpu-node", "/opt/new-ml-env", "/srv/models/missing"])
def test_nothing_was_created(host, path):
    assert not host.file(path).exists


def test_the_foreign_listener_was_left_alone(plain):
    # Host networking: the socket is seen from both containers; the process runs in the plain one only.
    assert plain.socket("tcp://127.0.0.1:28123").is_listening
    # [.]: the pattern does not match grep's own command line.
    assert plain.run("grep -l 'http[.]server' /proc/[0-9]*/cmdline").stdout.strip()


def test_the_stand_ins_nvidia_smi_and_its_recording_were_left_as_they_were(standin):
    smi = standin.file("/usr/local/bin/nvidia-smi")
    assert (smi.user, smi.mode) == ("root", 0o755)
    assert smi.content_string == '#!/bin/sh\nexec python3 /opt/standin/fixtures/fake_nvidia_smi/fake_nvidia_smi.py "$@"\n'
    for name in ("host.txt", "nvidia-smi-q.txt"):
        recording = standin.file("/opt/standin/data/h200/" + name)
        assert recording.sha256sum == hashlib.sha256((ROOT / "tests" / "data" / "h200" / name).read_bytes()).hexdigest()


def test_the_model_directory_was_left_as_it_was(host):
    assert host.file("/srv/models/tiny").is_directory
    assert host.file("/srv/models/tiny/config.json").content_string == '{"architectures": ["LlamaForCausalLM"]}'
