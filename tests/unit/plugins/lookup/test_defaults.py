"""The defaults lookup: the values of plugins/module_utils/_common/defaults.py by name, for the roles and playbooks."""
import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.blackwell.gpu_node.plugins.lookup.defaults import LookupModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT, STATE_DIR


def test_each_term_gives_its_value_in_order_the_port_a_number():
    assert LookupModule().run(["state_dir", "server_port"]) == [STATE_DIR, SERVER_PORT]
    port = LookupModule().run(["server_port"])[0]
    assert isinstance(port, int) and not isinstance(port, bool)


@pytest.mark.parametrize("terms, message", [
    (["port"], r"^defaults: name one of server_port, state_dir, not 'port'$"),
    (["state_dir", "x"], r"^defaults: name one of server_port, state_dir, not 'x'$"),
    ([], r"^defaults: name one of server_port, state_dir, not none$"),
])
def test_an_unknown_name_or_none_is_refused_naming_those_it_knows(terms, message):
    with pytest.raises(AnsibleLookupError, match=message):
        LookupModule().run(terms)
