"""NVIDIA's catalogue as data (plugins/module_utils/_node/xid_catalogue.py): whole, consistent with itself and with
the counts others published of the same release, and the rules the catalogue words in prose as NVIDIA words them."""
import collections

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_health
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import xid_catalogue as catalogue


def test_every_xid_of_the_release_is_there_with_a_bucket_nvidia_names():
    assert sorted(catalogue.XIDS) == list(range(1, 173))
    buckets = collections.Counter(bucket for _mnemonic, _description, bucket in catalogue.XIDS.values())
    # NVIDIA/NVSentinel issue 1888 counted the same spreadsheet's immediate buckets: RESTART_APP 48, WORKFLOW_XID_45
    # and WORKFLOW_XID_48 one Xid each.
    assert (buckets["RESTART_APP"], buckets["WORKFLOW_XID_45"], buckets["WORKFLOW_XID_48"]) == (48, 1, 1)
    assert set(buckets) - set(catalogue.BUCKETS) == {None, "XID_154"}
    assert [number for number, (_m, _d, bucket) in catalogue.XIDS.items() if bucket is None] == list(range(162, 173))


@pytest.mark.parametrize("number, mnemonic, bucket", [
    (13, "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "RESTART_APP"),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE"),
    (74, "NVLINK_ERROR", "WORKFLOW_NVLINK_ERR"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU"),
    (145, "NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "XID_154"),
])
def test_the_xids_an_operator_meets_most_are_the_catalogues(number, mnemonic, bucket):
    assert (catalogue.XIDS[number][0], catalogue.XIDS[number][2]) == (mnemonic, bucket)


def test_the_ratings_cover_every_bucket_and_action_and_use_known_severities_and_actions():
    assert set(catalogue.BUCKET_RATINGS) == set(catalogue.BUCKETS) == set(catalogue.BUCKET_TEXT)
    ratings = list(catalogue.BUCKET_RATINGS.values()) + [catalogue.UNKNOWN_XID[:2]] + [
        entry[2:] for entry in catalogue.RECOVERY_ACTIONS.values()] + [catalogue.UNKNOWN_RECOVERY_ACTION[2:]]
    assert set(severity for severity, _action in ratings) <= set(gpu_health.SEVERITIES)
    assert set(action for _severity, action in ratings) <= set(gpu_health.ACTIONS)
    assert set(catalogue.ACTION_BUCKETS) == set(gpu_health.ACTIONS)
    assert set(catalogue.ACTION_BUCKETS.values()) <= set(catalogue.BUCKETS)
    assert set(bucket for _severity, bucket in catalogue.DCGM_SEVERITIES.values()) <= set(catalogue.BUCKETS)
    assert set(catalogue.DCGM_ORDER) == set(catalogue.DCGM_SEVERITIES)


def test_the_nvlink5_decode_has_each_row_of_the_sheet():
    rows = catalogue.NVLINK5_DECODE
    assert len(rows) == 95 and set(row[0] for row in rows) == set(range(144, 151))
    assert set(row[5] for row in rows) == {"IGNORE", "RESET_GPU", "XID_154_EVAL"}
    # The pattern "------000000----------0000100001" of SAW_MVB before R575: bits 20 to 25 and 0 to 9.
    assert rows[0][:4] == (144, ("SAW_MVB",), (0x03F003FF, 0x21), (0x03F0007F, 0x1))


def test_every_dcgm_message_format_parses_into_literals_and_placeholders():
    assert len(catalogue.DCGM_ERRORS) == 118
    for name, severity, parts, longest in gpu_health.DCGM_FORMATS:
        assert severity in catalogue.DCGM_SEVERITIES, name
        assert longest and all(kind in "udifxes" for kind, _literal in parts if kind), (name, parts)
    assert gpu_health._dcgm_format("Couldn't allocate at least %.1f%% of GPU memory on GPU %u") == [
        ("", "Couldn'tallocateatleast"), ("f", ""), ("", "%ofGPUmemoryonGPU"), ("u", "")]
