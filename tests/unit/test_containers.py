"""molecule/resources/containers.py: the scenarios' containers, started and removed with the docker client."""
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("containers", CHECKOUT / "molecule" / "resources" / "containers.py")
containers = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(containers)

SYSTEMD_NODE = {
    "name": "node",
    "image": "blackwell-gpu-node/debian12-systemd-node:abc",
    "pre_build_image": True,
    "network_mode": "host",
    "groups": ["gpu_nodes"],
    "command": "/lib/systemd/systemd",
    "capabilities": ["SYS_ADMIN"],
    "tmpfs": ["/run", "/run/lock"],
    "volumes": ["/repo:/repo:ro", "/sys/fs/cgroup:/sys/fs/cgroup:ro"],
    "restart_policy": "always",
    "memory": "256m",
    "memory_swap": "256m",
    "devices": ["/dev/kmsg"],
}


class FakeDocker:
    """Stands in for the docker client: the containers that exist, and every argv it was given."""

    def __init__(self, existing=(), failing=None):
        self.existing = set(existing)
        self.failing = failing
        self.calls = []

    def __call__(self, argv, **kwargs):
        assert kwargs["timeout"] == containers.DOCKER_TIMEOUT
        self.calls.append(argv)
        if argv[1:3] == ["container", "inspect"]:
            return subprocess.CompletedProcess(argv, 0 if argv[-1] in self.existing else 1, "", "")
        if argv[1] == self.failing:
            return subprocess.CompletedProcess(argv, 1, "", "Error response from daemon: boom\n")
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_every_setting_of_a_platform_becomes_its_docker_run_option():
    assert containers.run_argv(SYSTEMD_NODE) == [
        "docker", "run", "--detach", "--name", "node", "--hostname", "node", "--label", "owner=molecule",
        "--log-driver", "json-file",
        "--cap-add", "SYS_ADMIN",
        "--device", "/dev/kmsg",
        "--memory", "256m",
        "--memory-swap", "256m",
        "--network", "host",
        "--restart", "always",
        "--tmpfs", "/run", "--tmpfs", "/run/lock",
        "--volume", "/repo:/repo:ro", "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
        "blackwell-gpu-node/debian12-systemd-node:abc", "/lib/systemd/systemd",
    ]


def test_a_platform_without_a_command_idles_as_the_driver_s_containers_do():
    argv = containers.run_argv({"name": "n", "image": "i", "pre_build_image": True})
    assert argv[-4:] == ["i", "bash", "-c", "while true; do sleep 10000; done"]


def test_a_setting_it_does_not_understand_is_refused_by_name_before_any_container_starts():
    docker = FakeDocker()
    platforms = [{"name": "a", "image": "i", "pre_build_image": True},
                 {"name": "b", "image": "i", "pre_build_image": True, "privileged": True}]
    with pytest.raises(containers.PlatformError, match="platform b: privileged is not understood"):
        containers.create(platforms, docker)
    assert docker.calls == []


def test_an_image_to_build_is_refused():
    with pytest.raises(containers.PlatformError, match="platform a: set pre_build_image: true"):
        containers.create([{"name": "a", "image": "i"}], FakeDocker())


def test_a_missing_container_is_run_and_an_existing_one_started_as_it_is():
    docker = FakeDocker(existing={"old"})
    started = containers.create([{"name": "new", "image": "i", "pre_build_image": True},
                                 {"name": "old", "image": "i", "pre_build_image": True}], docker)
    assert started == ["new", "old"]
    assert [argv[:2] for argv in docker.calls if argv[1] != "container"] == [["docker", "run"], ["docker", "start"]]
    assert ["docker", "start", "old"] in docker.calls


def test_a_container_docker_will_not_start_fails_naming_the_platform_and_docker_s_reason():
    with pytest.raises(containers.PlatformError, match="platform a: docker run failed: Error response from daemon"):
        containers.create([{"name": "a", "image": "i", "pre_build_image": True}], FakeDocker(failing="run"))


def test_destroy_removes_the_containers_that_exist_with_their_volumes_and_passes_over_the_rest():
    docker = FakeDocker(existing={"there"})
    removed = containers.destroy([{"name": "there"}, {"name": "gone"}], docker)
    assert removed == ["there"]
    assert [argv for argv in docker.calls if argv[1] == "rm"] == [["docker", "rm", "--force", "--volumes", "there"]]


def test_a_container_docker_will_not_remove_fails_naming_it():
    with pytest.raises(containers.PlatformError, match="platform there: docker rm failed"):
        containers.destroy([{"name": "there"}], FakeDocker(existing={"there"}, failing="rm"))


def test_the_command_line_prints_what_it_changed_and_fails_on_a_refused_platform(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(containers.subprocess, "run", FakeDocker(existing={"there"}))
    config = tmp_path / "instance_config.yml"
    assert containers.main(["containers.py", "destroy", json.dumps([{"name": "there"}]), str(config)]) == 0
    assert json.loads(capsys.readouterr().out) == ["there"]
    assert json.loads(config.read_text()) == []
    assert containers.main(["containers.py", "create", json.dumps([{"name": "a", "image": "i"}]), str(config)]) == 1
    assert "pre_build_image" in capsys.readouterr().err
    assert containers.main(["containers.py", "remove", "[]", str(config)]) == 2


def test_a_create_tells_molecule_to_reach_each_container_by_the_node_container_connection(capsys, monkeypatch,
                                                                                          tmp_path):
    monkeypatch.setattr(containers.subprocess, "run", FakeDocker())
    config = tmp_path / "instance_config.yml"
    platforms = [{"name": "a", "image": "i", "pre_build_image": True}, dict(SYSTEMD_NODE, name="b")]
    assert containers.main(["containers.py", "create", json.dumps(platforms), str(config)]) == 0
    assert json.loads(capsys.readouterr().out) == ["a", "b"]
    assert json.loads(config.read_text()) == [
        {"instance": "a", "address": "a", "connection": "node_container"},
        {"instance": "b", "address": "b", "connection": "node_container"}]
