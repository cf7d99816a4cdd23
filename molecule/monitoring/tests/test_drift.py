"""Each thing the monitoring role keeps, changed behind its back alone on the converged node: the next run of the
role changes it back, and after the last the role changes nothing. The list is what the role's tasks keep, as a run
of the role reports it (tests/integration/role_drift.py): a task the role gains is changed here too."""
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import DRIFTS, KEPT, UNCHANGED, kept, role_alone  # noqa: E402

testinfra_hosts = ["docker://monitoring"]
ROLE = "blackwell.gpu_node.monitoring"


@pytest.fixture(name="run_role", scope="module")
def fixture_run_role(tmp_path_factory):
    return role_alone(tmp_path_factory.mktemp("drift"), ROLE, "gpu_nodes")


def changed(ran):
    return sorted(name for name, result in ran.items() if result.get("changed"))


def test_each_thing_the_role_keeps_changed_alone_is_changed_back(run_role, host):
    ran = run_role()
    assert changed(ran) == []
    things = kept(ROLE, ran)
    assert sorted(set(thing["kind"] for thing in things)) == sorted(set(DRIFTS) | set(UNCHANGED)), things
    for thing in things:
        if thing["kind"] in UNCHANGED:
            continue
        DRIFTS[thing["kind"]](host, thing)
        assert not KEPT[thing["kind"]](host, thing), thing
        ran = run_role()
        assert ran[thing["task"]].get("changed"), (thing["task"], changed(ran))
        assert KEPT[thing["kind"]](host, thing), thing
    assert changed(run_role()) == []
    assert host.service("dcgm-exporter.service").is_running
