"""The service_user_problems filter: the service_user core as the role calls it."""

from ansible_collections.blackwell.gpu_node.plugins.filter.service_user import FilterModule

service_user_problems = FilterModule().filters()["service_user_problems"]


def test_the_filter_names_each_bad_setting():
    assert sorted(FilterModule().filters()) == ["service_user_problems"]
    assert service_user_problems({"name": "sglang", "group": "sglang", "home": "/var/lib/sglang", "groups": []}) == []
    assert service_user_problems({"name": "sglang", "group": "sglang", "home": "relative", "groups": "video"}) == [
        "service_user_groups='video' must be a list of group names, like [video, render]",
        "service_user_home='relative' is not an absolute path below /"]
