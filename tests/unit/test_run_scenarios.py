"""tests/run_scenarios.py: the order its lanes take the scenarios in, and the ports that let them run side by side."""
import sys
import threading
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(CHECKOUT / "tests"))
from run_scenarios import CORE_SECONDS, Lanes, core_steps, longest_first, scenarios  # noqa: E402


def test_the_longest_scenario_goes_first_and_an_unknown_one_counts_as_the_default():
    seconds = {"short": 10, "long": 900}
    assert longest_first(["short", "unmeasured", "long"], seconds) == ["long", "unmeasured", "short"]
    assert longest_first(["b", "a"], {}) == ["a", "b"]


def test_an_older_core_job_counts_as_its_scenario_plus_what_the_core_adds_or_leaves_out():
    seconds = {"default": 100, "between": 100 + CORE_SECONDS // 2}
    expected = ["default@2.16", "between", "default"]
    assert longest_first(["default", "between", "default@2.16"], seconds) == (
        expected if CORE_SECONDS > 0 else expected[::-1])


def test_a_job_never_starts_beside_another_of_the_same_scenario(tmp_path):
    lanes = Lanes(["default", "default@2.16", "cuda"], tmp_path, 60)
    assert lanes.next() == "default"
    assert lanes.next() == "cuda"
    taken = []
    waiting = threading.Thread(target=lambda: taken.append(lanes.next()))
    waiting.start()
    waiting.join(0.5)
    assert taken == [] and waiting.is_alive()
    lanes.done("cuda", 0, 1)
    waiting.join(0.5)
    assert taken == [] and waiting.is_alive()
    lanes.done("default", 0, 1)
    waiting.join(5)
    assert taken == ["default@2.16"]
    assert lanes.next() is None


def test_an_older_core_runs_units_a_syntax_check_and_the_default_scenario_with_its_own_ansible(tmp_path):
    (tmp_path / "playbooks").mkdir()
    for name in ("site.yml", "upgrade.yml"):
        (tmp_path / "playbooks" / name).write_text("---\n")
    steps = core_steps("2.16", "/venvs/core-2.16", checkout=tmp_path, environ={"PATH": "/usr/bin"})
    (_units, units, env), (_syntax, syntax, _syntax_env) = steps[:2]
    assert env["PATH"] == "/venvs/core-2.16/bin:/usr/bin"
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(":")[0] == str(tmp_path / ".build" / "collections")
    assert units[:3] == ["/venvs/core-2.16/bin/python", "-m", "pytest"] and units[-1] == "tests/unit"
    assert syntax[:2] == ["/venvs/core-2.16/bin/ansible-playbook", "--syntax-check"]
    assert syntax[-2:] == ["playbooks/site.yml", "playbooks/upgrade.yml"]
    # molecule is the toolchain's, which the virtualenv first on PATH does not have. A fresh instance converged and
    # converged again, then destroyed: verify and side effect belong to the scenario's own job.
    assert all(Path(argv[0]).parent == Path(sys.executable).parent for _title, argv, _env in steps[2:])
    assert [argv[1:] for _title, argv, _env in steps[2:]] == [
        [action, "-s", "default"] for action in ("destroy", "converge", "idempotence", "destroy")]


def test_a_core_in_a_container_runs_the_same_steps_there_with_its_own_molecule(tmp_path):
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text("---\n")
    fixture = tmp_path / "cuda-repo"
    fixture.mkdir()
    environ = {"PATH": "/host/bin", "HOME": "/root", "BLACKWELL_IMAGE_DEBIAN12": "img:1", "SECRET": "x",
               "BLACKWELL_CUDA_REPO": str(fixture)}
    steps = core_steps("2.21", "/venvs/core-2.21", checkout=tmp_path, environ=environ, image="debian13:1")
    on_host = core_steps("2.21", "/venvs/core-2.21", checkout=tmp_path, environ=environ)
    assert [title for title, _argv, _env in steps] == [title + " in debian13:1" for title, _argv, _env in on_host]
    for (_title, argv, env), (_host_title, host_argv, _host_env) in zip(steps, on_host):
        assert env is None
        image = argv.index("debian13:1")
        assert argv[:2] == ["docker", "run"] and argv[image + 1:][1:] == host_argv[1:]
        options = argv[2:image]
        assert options[options.index("--name") + 1] == "blackwell-core-2.21"
        assert options[options.index("--network") + 1] == "host"
        assert "%s:%s" % (tmp_path, tmp_path) in options and options[options.index("-w") + 1] == str(tmp_path)
        # The playbooks read the fixtures on the controller too, wherever they were built.
        assert "%s:%s:ro" % (fixture, fixture) in options
        variables = dict(options[i + 1].split("=", 1) for i, option in enumerate(options) if option == "-e")
        # The container's own PATH behind the core's, never the host's; nothing it does not need.
        assert variables["PATH"] == "/venvs/core-2.21/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        assert variables["BLACKWELL_IMAGE_DEBIAN12"] == "img:1" and "SECRET" not in variables
        # Not the host's HOME: one in the checkout, the same for every step, where molecule keeps its state between
        # the steps' containers (idempotence refuses an instance it does not know converged).
        assert variables["HOME"] == str(tmp_path / ".build" / "home-core-2.21")
        assert variables["ANSIBLE_COLLECTIONS_PATH"].split(":")[0] == str(tmp_path / ".build" / "collections")
    # molecule is the core's own: the toolchain's runs on a Python the container does not have.
    assert steps[3][1][-3:] == ["converge", "-s", "default"] and steps[3][1][-4] == "/venvs/core-2.21/bin/molecule"


def test_a_core_job_that_runs_past_its_timeout_has_its_container_removed(tmp_path, monkeypatch):
    lanes = Lanes(["default@2.21"], tmp_path, 1, {"2.21": "/venvs/core-2.21@debian13:1"})
    ran = []

    def step(argv, env, log, deadline):
        ran.append(argv)
        return None if len(ran) == 1 else 0

    monkeypatch.setattr(Lanes, "step", staticmethod(step))
    assert lanes.job("default@2.21") is None
    assert ran[0][:2] == ["docker", "run"]
    assert ran[1:] == [["docker", "rm", "-f", "blackwell-core-2.21"], ["molecule", "destroy", "-s", "default"]]


def test_a_core_job_whose_converge_fails_still_has_its_instance_destroyed(tmp_path, monkeypatch):
    lanes = Lanes(["default@2.16"], tmp_path, 60, {"2.16": "/venvs/core-2.16"})
    ran = []

    def step(argv, env, log, deadline):
        ran.append(argv[1:])
        return 2 if argv[1:2] == ["converge"] else 0

    monkeypatch.setattr(Lanes, "step", staticmethod(step))
    assert lanes.job("default@2.16") == 2
    assert ran[-3:] == [["destroy", "-s", "default"], ["converge", "-s", "default"], ["destroy", "-s", "default"]]


def test_a_widened_lane_takes_jobs_only_once_its_path_exists(tmp_path, monkeypatch):
    lanes = Lanes(["a", "b"], tmp_path, 60)
    ran, waits = [], []
    monkeypatch.setattr(Lanes, "job", lambda self, name: ran.append(name) or 0)
    gate = tmp_path / "beside.done"

    def sleep(seconds):
        waits.append(seconds)
        if len(waits) == 3:
            gate.touch()

    lanes.run_once(3, str(gate), sleep=sleep)
    assert waits == [2, 2, 2] and ran == ["a", "b"]
    # With every job started, it never waits for a path that does not come.
    lanes = Lanes([], tmp_path, 60)
    lanes.run_once(3, str(tmp_path / "never"), sleep=waits.append)
    assert len(waits) == 3


def test_every_scenario_directory_is_found():
    found = scenarios(CHECKOUT)
    assert "default" in found and "upgrade" in found
    assert all((CHECKOUT / "molecule" / name / "molecule.yml").is_file() for name in found)


def ports(value):
    """The numbers given to every key ending in 'port', at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).endswith("port") and isinstance(item, int) and not isinstance(item, bool):
                yield item
            else:
                yield from ports(item)
    elif isinstance(value, list):
        for item in value:
            yield from ports(item)


def scenario_ports():
    """{port: the scenarios whose files give it}."""
    owners = {}
    for name in scenarios(CHECKOUT):
        for path in sorted((CHECKOUT / "molecule" / name).rglob("*.yml")):
            for port in set(ports(yaml.safe_load(path.read_text()))):
                owners.setdefault(port, set()).add(name)
    assert len(owners) > 10
    return owners


def test_no_two_scenarios_bind_the_same_port_on_the_host_network_they_share():
    shared = dict((port, sorted(names)) for port, names in scenario_ports().items() if len(names) > 1)
    assert shared == {}, shared


def test_no_scenario_binds_a_port_the_kernel_may_give_an_outgoing_connection():
    """Linux takes the source port of an outgoing connection from 32768-60999 (ip_local_port_range): a scenario's
    server on such a port finds it taken, now and then, and its role rightly refuses to start."""
    ephemeral = dict((port, sorted(names)) for port, names in scenario_ports().items() if 32768 <= port <= 60999)
    assert ephemeral == {}, ephemeral
