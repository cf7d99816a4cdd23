import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.filter.benchmark import FilterModule, benchmark_compare, benchmark_report


def record(throughput, name="decode-heavy"):
    return dict(workload=dict(name=name), stack_profile="cu130", file="b.json",
                metrics=dict(completed=16, failed=0, output_throughput=throughput, request_throughput=0.2))


def test_the_threshold_may_come_as_text_from_a_template():
    assert benchmark_compare(record(80.0), record(92.6), "5")["regression"] is True
    assert benchmark_compare(record(90.0), record(92.6), "5")["regression"] is False


def test_a_baseline_of_another_workload_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="compare runs of one workload"):
        benchmark_compare(record(80.0), record(92.6, name="decode-batch"), 5)


def test_the_report_lists_regressions_and_hosts_that_did_not_measure():
    slow = record(80.0)
    report = benchmark_report(["gpu-1", "gpu-2", "gpu-3"], {"gpu-1": slow, "gpu-2": record(92.6), "gpu-3": None},
                              {"gpu-1": benchmark_compare(slow, record(92.6), 5), "gpu-2": None})
    assert report["regressions"] == ["gpu-1: output throughput 92.6 -> 80.0 tok/s (-13.6%): a drop beyond the "
                                     "allowed 5%"]
    assert report["not_measured"] == ["gpu-3"]
    assert [line.split()[0] for line in report["table"]] == ["host", "gpu-1", "gpu-2"]


def test_the_filters_are_registered():
    assert FilterModule().filters() == {"benchmark_compare": benchmark_compare, "benchmark_report": benchmark_report}


def failed(throughput, count=1):
    run = record(throughput)
    run["metrics"].update(failed=count, errors=["no complete answer within request_timeout=600s"])
    return run


def test_a_run_with_a_failed_request_fails_the_report_naming_the_node_even_without_a_baseline():
    comparisons = {"gpu-1": benchmark_compare(failed(120.0), record(92.6), 5),
                   "gpu-2": benchmark_compare(failed(90.0, count=3), None, "5")}
    report = benchmark_report(["gpu-1", "gpu-2"], {"gpu-1": failed(120.0), "gpu-2": failed(90.0, count=3)},
                              comparisons)
    assert report["regressions"] == [
        "gpu-1: output throughput 92.6 -> 120.0 tok/s (+29.6%); 1 of 17 requests failed (no complete answer within "
        "request_timeout=600s): a run with a failed request neither passes nor becomes a baseline",
        "gpu-2: 3 of 19 requests failed (no complete answer within request_timeout=600s): a run with a failed request "
        "neither passes nor becomes a baseline"]
    assert report["table"][1].endswith("+29.6% REGRESSION") and report["table"][2].endswith("- REGRESSION")


def test_a_baseline_with_a_failed_request_is_a_filter_error_not_a_pass():
    with pytest.raises(AnsibleFilterError, match="^the baseline b.json is no baseline: 1 of 17 requests failed"):
        benchmark_compare(record(92.6), failed(80.0), 5)
