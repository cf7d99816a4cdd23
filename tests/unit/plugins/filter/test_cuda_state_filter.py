"""The cuda_state filter: what registers a CUDA installation besides its files, as the cuda role's check declares it
and its register tasks keep it."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.filter.cuda_state import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.state import registration_links

HOME = "/usr/local/cuda-13.0"


def test_the_filter_is_the_core():
    assert FilterModule().filters() == {"cuda_registration_links": registration_links}


@pytest.mark.parametrize("alternative, expected", [
    (True, [dict(kind="alternative", part="registration", name="cuda", value=HOME),
            dict(kind="link", part="registration", path="/usr/local/cuda", target="/etc/alternatives/cuda")]),
    (False, [dict(kind="link", part="registration", path="/usr/local/cuda", target=HOME)]),
], ids=["cuda alternative", "no alternative"])
def test_usr_local_cuda_goes_through_the_alternative_where_there_is_one(alternative, expected):
    assert FilterModule().filters()["cuda_registration_links"](HOME, alternative) == expected
