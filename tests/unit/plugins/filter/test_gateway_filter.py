"""The gateway filters: the fleet's workers, the release the stack profile names and what the virtualenv holds beyond
its pins, each the _gateway core as the role calls it."""

from ansible_collections.blackwell.gpu_node.plugins.filter.gateway import FilterModule

FILTERS = FilterModule().filters()


def test_the_filters_are_the_roles():
    assert sorted(FILTERS) == ["gateway_fleet", "gateway_leftovers", "gateway_release"]


def test_the_release_of_a_profile_with_the_fleets_keys():
    profile = {"name": "sglang-0.5.23-cu130", "gateway": {"package": "smg", "version": "1.13.0"}}
    found = FILTERS["gateway_release"](profile)
    assert (found["requirements"], found["python"], found["problems"]) == ("requirements-smg-1.13.0.txt", "3.10", [])
    fleet = FILTERS["gateway_fleet"]([{"name": "gpu01", "worker_url": "http://10.0.0.11:30000", "api_key": "own"}],
                                     "gw")["workers"]
    assert FILTERS["gateway_release"](profile, "client", fleet)["problems"][0].startswith("host gpu01: ")


def test_the_leftovers_of_another_release():
    installed = [{"name": "smg", "version": "1.13.0"}, {"name": "sglang-router", "version": "0.3.2"},
                 {"name": "pip", "version": "23.2.1"}]
    assert FILTERS["gateway_leftovers"](installed, "smg==1.13.0 \\\n    --hash=sha256:00\n") == ["sglang-router"]
