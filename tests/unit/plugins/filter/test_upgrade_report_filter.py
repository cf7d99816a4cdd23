"""The upgrade_report filter: the report core, and a filter error for input the playbook never gives."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.upgrade_report import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade_report import report

upgrade_report = FilterModule().filters()["upgrade_report"]


def test_the_filter_is_the_core():
    noted = {"gpu-1": {"from": "cu128", "to": "cu130", "outcome": "upgraded", "seconds_to_ready": 80}}
    assert FilterModule().filters() == {"upgrade_report": upgrade_report}
    assert upgrade_report(["gpu-1", "gpu-2"], noted, "cu130") == report(["gpu-1", "gpu-2"], noted, "cu130")


@pytest.mark.parametrize("noted,message", [
    ({"gpu-1": "upgraded"}, "upgrade_report: incomplete input, AttributeError: 'str' object has no attribute 'get'"),
    ({"gpu-1": {"outcome": "upgraded", "seconds_to_ready": "soon"}},
     "upgrade_report: incomplete input, ValueError: could not convert string to float: 'soon'"),
])
def test_a_note_of_the_wrong_shape_is_a_filter_error(noted, message):
    with pytest.raises(AnsibleFilterError) as raised:
        upgrade_report(["gpu-1"], noted, "cu130")
    assert str(raised.value) == message
