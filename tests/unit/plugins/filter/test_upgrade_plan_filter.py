"""The upgrade_plan and upgrade_transition filters: the cores, and a filter error for input the playbook never
gives or an event the node cannot be in."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.upgrade_plan import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import plan, transition

upgrade_plan = FilterModule().filters()["upgrade_plan"]
upgrade_transition = FilterModule().filters()["upgrade_transition"]
CU128 = {"venv": "ml-env.cu128-1a2b3c4d", "profile": "cu128"}
CU130 = {"venv": "ml-env.cu130-5e6f7a8b", "profile": "cu130"}


def test_the_filter_is_the_core():
    assert FilterModule().filters() == {"upgrade_plan": upgrade_plan, "upgrade_transition": upgrade_transition}
    gates = ["ready", "generate", "benchmark"]
    assert upgrade_plan(CU128, CU130, None, True, gates) == plan(CU128, CU130, None, True, gates)
    prepared = plan(CU128, CU130, None, True)
    evidence = {"gates": ["ready", "generate"]}
    assert upgrade_transition(prepared, "passed", evidence) == transition(prepared, "passed", evidence)[0]


def test_input_of_the_wrong_shape_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="upgrade_plan: incomplete input, KeyError: 'venv'"):
        upgrade_plan({}, CU130, None, True, ["ready"])
    with pytest.raises(AnsibleFilterError, match="upgrade_plan: incomplete input, ValueError: no such gate w, a"):
        upgrade_plan(CU128, CU130, None, True, "wa")


def test_an_event_the_node_cannot_be_in_is_a_filter_error_naming_it():
    with pytest.raises(AnsibleFilterError, match="upgrade_transition: ValueError: a node whose upgrade is not planned "
                                                 "cannot be rolled back"):
        upgrade_transition(None, "rolled_back", {})


def test_a_step_is_the_cores_and_one_out_of_order_is_a_filter_error_naming_it():
    stopped = upgrade_transition(plan(CU128, CU130, None, True), "step", {"name": "stop", "at": 1000.0})
    assert stopped == transition(plan(CU128, CU130, None, True), "step", {"name": "stop", "at": 1000.0})[0]
    assert stopped["timeline"] == [{"step": "stop", "at": 1000.0}]
    with pytest.raises(AnsibleFilterError, match="upgrade_transition: ValueError: a node past the stop step cannot "
                                                 "take the drain step"):
        upgrade_transition(stopped, "step", {"name": "drain", "at": 1001.0})
    with pytest.raises(AnsibleFilterError, match="upgrade_transition: KeyError: 'at'"):
        upgrade_transition(stopped, "step", {"name": "start"})
