"""Each thing the monitoring role keeps, changed behind its back alone on the converged node: the next run of the
role changes it back, and after the last the role changes nothing. The list is what the role's tasks keep, as a run
of the role reports it (tests/integration/role_drift.py): a task the role gains is changed here too."""
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import DRIFTS, UNCHANGED, changed, changes_of, drift_each, kept, role_alone  # noqa: E402

testinfra_hosts = ["docker://monitoring"]
ROLE = "blackwell.gpu_node.monitoring"


@pytest.fixture(name="run_role", scope="module")
def fixture_run_role(tmp_path_factory):
    return role_alone(tmp_path_factory.mktemp("drift"), ROLE, "gpu_nodes")


def test_each_thing_the_role_keeps_changed_alone_is_changed_back(run_role, host):
    ran = run_role()
    assert changed(ran) == []
    things = kept(ROLE, ran)
    assert sorted(set(thing["kind"] for thing in things)) == sorted(set(DRIFTS) | set(UNCHANGED)), things
    drift_each(run_role, changes_of(host, things))
    assert host.service("dcgm-exporter.service").is_running
