import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.sizes import size_text


@pytest.mark.parametrize("count, text", [
    (0, "0 bytes"), (999999, "999999 bytes"), (1000000, "1.0 MB"), (512 * 1000 ** 2, "512.0 MB"),
    (10 ** 9 - 1, "1000.0 MB"), (10 ** 9, "1.00 GB"), (2100000000, "2.10 GB"),
])
def test_a_size_is_given_in_decimal_units_at_the_largest_that_reads_well(count, text):
    assert size_text(count) == text
