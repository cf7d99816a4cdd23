"""Each thing the service_user role keeps on the converged node (the home it made, the supplementary groups of the
user), changed behind its back alone: the next run of the role changes it back, and after the last the role changes
nothing. The list is what the role's tasks keep, as a run of the role reports it (tests/integration/role_drift.py):
a task the role gains is changed here too."""
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import changed, changes_of, drift_each, kept, role_alone  # noqa: E402

testinfra_hosts = ["docker://site-node"]
ROLE = "blackwell.gpu_node.service_user"


def test_each_thing_the_role_keeps_changed_alone_is_changed_back(tmp_path, host):
    run_role = role_alone(tmp_path, ROLE, "gpu_nodes")
    ran = run_role()
    assert changed(ran) == []
    things = kept(ROLE, ran)
    # The user exists: its home and its supplementary groups at least are what the role keeps of it.
    assert {"directory", "user"} <= set(thing["kind"] for thing in things), things
    drift_each(run_role, changes_of(host, things))
