"""The gpu_health_remediation filters: the remediation core, an empty drain as none (what the playbook passes before
ansible-core 2.19 reads null), each node's note taken from the mapping the playbook passes, and a filter error for
input the playbook never gives."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.gpu_health_remediation import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import remediation as core

FILTERS = FilterModule().filters()
BUS = "00000000:3B:00.0"
HEALTH = dict(verdict="unhealthy", findings=[], gpus=[dict(index=0, bus_id=BUS, findings=[dict(
    id="xid_119", severity="unhealthy", summary="GSP timeout", bucket="RESET_GPU", evidence="NVRM: Xid 119", gpu=BUS,
    count=1)])])


def test_the_filters_are_the_core():
    assert sorted(FILTERS) == ["gpu_health_recovered", "gpu_health_remediation_plan", "gpu_health_remediation_report"]
    planned = FILTERS["gpu_health_remediation_plan"](HEALTH, False, "the model gateway on gw-1")
    assert planned == core.plan(HEALTH, False, "the model gateway on gw-1")
    assert FILTERS["gpu_health_recovered"](planned, HEALTH, HEALTH) == core.recovered(planned, HEALTH, HEALTH)
    noted = {"gpu-1": dict(plan=planned), "gpu-2": None}
    expected = core.report("plan", ["gpu-1", "gpu-2", "gpu-3"], {"gpu-1": dict(plan=planned), "gpu-2": None,
                                                                 "gpu-3": None})
    assert FILTERS["gpu_health_remediation_report"](["gpu-1", "gpu-2", "gpu-3"], "plan", noted) == expected


def test_an_empty_drain_is_no_drain():
    assert FILTERS["gpu_health_remediation_plan"](HEALTH, False, "") == core.plan(HEALTH, False, None)


def test_a_finding_of_an_unknown_bucket_is_a_filter_error_naming_it():
    health = dict(HEALTH, findings=[dict(id="dcgm_diag_failed", severity="unhealthy", summary="s", gpu=None,
                                         bucket="REPLACE_NODE")])
    with pytest.raises(AnsibleFilterError) as raised:
        FILTERS["gpu_health_remediation_plan"](health, False, "")
    assert str(raised.value).startswith("gpu_health_remediation_plan: finding dcgm_diag_failed has the resolution "
                                        "bucket 'REPLACE_NODE'; known buckets: ")


def test_input_of_the_wrong_shape_is_a_filter_error():
    with pytest.raises(AnsibleFilterError) as raised:
        FILTERS["gpu_health_recovered"](dict(action="reset_gpu"), HEALTH, dict(HEALTH, findings=[{}]))
    assert str(raised.value) == "gpu_health_recovered: incomplete input, KeyError: 'severity'"
