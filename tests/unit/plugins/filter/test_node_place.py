import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.node_place import FilterModule, node_place


def test_single_node_has_no_address():
    assert node_place("gpu01", None, "10.0.0.1", 5757) == dict(nnodes=1, node_rank=0, dist_init_addr=None)


@pytest.mark.parametrize("host,rank", [("gpu01", 0), ("gpu02", 1), ("gpu03", 2)])
def test_rank_is_the_position_in_the_group(host, rank):
    place = node_place(host, ["gpu01", "gpu02", "gpu03"], "10.0.0.1", 5757)
    assert place == dict(nnodes=3, node_rank=rank, dist_init_addr="10.0.0.1:5757")


def test_a_host_outside_the_group_is_refused():
    with pytest.raises(AnsibleFilterError, match="gpu09 is not one of the server's nodes"):
        node_place("gpu09", ["gpu01", "gpu02"], "10.0.0.1", 5757)


def test_two_nodes_are_a_multi_node_server():
    assert node_place("gpu02", ["gpu01", "gpu02"], "10.0.0.1", "5757") == dict(
        nnodes=2, node_rank=1, dist_init_addr="10.0.0.1:5757")


def test_the_whole_message_of_a_host_outside_the_group_and_the_registration():
    with pytest.raises(AnsibleFilterError) as raised:
        node_place("gpu09", ["gpu01", "gpu02"], "10.0.0.1", 5757)
    assert str(raised.value) == "gpu09 is not one of the server's nodes (gpu01, gpu02)"
    assert FilterModule().filters() == {"node_place": node_place}
