"""The upgrade_plan filter: the plan core, and a filter error for input the playbook never gives."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.upgrade_plan import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import plan

upgrade_plan = FilterModule().filters()["upgrade_plan"]
CU128 = {"venv": "ml-env.cu128-1a2b3c4d", "profile": "cu128"}
CU130 = {"venv": "ml-env.cu130-5e6f7a8b", "profile": "cu130"}


def test_the_filter_is_the_core():
    assert FilterModule().filters() == {"upgrade_plan": upgrade_plan}
    assert upgrade_plan(CU128, CU130, None, True) == plan(CU128, CU130, None, True)


def test_input_of_the_wrong_shape_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="upgrade_plan: incomplete input, KeyError: 'venv'"):
        upgrade_plan({}, CU130, None, True)
