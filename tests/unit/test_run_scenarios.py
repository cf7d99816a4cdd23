"""tests/run_scenarios.py: the order its lanes take the scenarios in, and the ports that let them run side by side."""
import sys
from pathlib import Path

import yaml

CHECKOUT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(CHECKOUT / "tests"))
from run_scenarios import longest_first, scenarios  # noqa: E402


def test_the_longest_scenario_goes_first_and_an_unknown_one_counts_as_the_default():
    seconds = {"short": 10, "long": 900}
    assert longest_first(["short", "unmeasured", "long"], seconds) == ["long", "unmeasured", "short"]
    assert longest_first(["b", "a"], {}) == ["a", "b"]


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
