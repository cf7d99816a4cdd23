"""The preflight_report filter: a filter error, not a traceback, for facts the role did not gather."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.preflight_report import FilterModule, preflight_report


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"preflight_report": preflight_report}


def test_missing_facts_are_a_filter_error_naming_the_key():
    with pytest.raises(AnsibleFilterError) as raised:
        preflight_report({}, {}, {})
    assert str(raised.value) == "preflight_report: incomplete input (KeyError): 'distribution'"
