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


def test_an_older_core_job_counts_as_its_scenario_plus_the_units_and_syntax_check():
    seconds = {"default": 100, "between": 100 + CORE_SECONDS // 2}
    assert longest_first(["default", "between", "default@2.16"], seconds) == ["default@2.16", "between", "default"]


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
    (_units, units, env), (_syntax, syntax, _syntax_env), (_scenario, scenario, _scenario_env) = steps
    assert env["PATH"] == "/venvs/core-2.16/bin:/usr/bin"
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(":")[0] == str(tmp_path / ".build" / "collections")
    assert units[:3] == ["/venvs/core-2.16/bin/python", "-m", "pytest"] and units[-1] == "tests/unit"
    assert syntax[:2] == ["/venvs/core-2.16/bin/ansible-playbook", "--syntax-check"]
    assert syntax[-2:] == ["playbooks/site.yml", "playbooks/upgrade.yml"]
    # molecule is the toolchain's, which the virtualenv first on PATH does not have.
    assert Path(scenario[0]).parent == Path(sys.executable).parent and scenario[1:] == ["test", "-s", "default"]


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


def test_no_two_scenarios_bind_the_same_port_on_the_host_network_they_share():
    owners = {}
    for name in scenarios(CHECKOUT):
        for path in sorted((CHECKOUT / "molecule" / name).rglob("*.yml")):
            for port in set(ports(yaml.safe_load(path.read_text()))):
                owners.setdefault(port, set()).add(name)
    assert len(owners) > 10
    shared = dict((port, sorted(names)) for port, names in owners.items() if len(names) > 1)
    assert shared == {}, shared
