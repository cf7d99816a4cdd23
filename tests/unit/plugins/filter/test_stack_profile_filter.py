import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.stack_profile import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import os_id

stack_profile = FilterModule().filters()["stack_profile"]


@pytest.mark.parametrize("profiles, custom, variable", [
    ([{"cu130": {}}], {}, "stack_profiles"),
    ({"cu130": {}}, [{"cu130": {}}], "stack_profiles_custom"),
])
def test_a_list_instead_of_a_mapping_is_a_filter_error_naming_the_variable(profiles, custom, variable):
    with pytest.raises(AnsibleFilterError, match=r"^%s must map profile names to profiles" % variable):
        stack_profile("cu130", profiles, custom)


def test_the_filters_are_registered():
    assert FilterModule().filters() == {"stack_profile": stack_profile, "os_id": os_id}
