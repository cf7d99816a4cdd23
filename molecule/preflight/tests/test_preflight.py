"""Preflight only looks: the containers hold nothing it could have created."""
import pytest

testinfra_hosts = ["docker://preflight-plain", "docker://preflight-h200-standin"]


@pytest.mark.parametrize("path", ["/var/lib/blackwell-gpu-node", "/opt/new-ml-env", "/srv/models/missing"])
def test_nothing_was_created(host, path):
    assert not host.file(path).exists


def test_the_foreign_listener_was_left_alone(host):
    if host.backend.name == "preflight-plain":
        assert host.socket("tcp://127.0.0.1:38123").is_listening
