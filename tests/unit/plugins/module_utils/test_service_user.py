import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.service_user import problems

GOOD = {"name": "sglang", "group": "sglang", "home": "/var/lib/sglang", "groups": ["video", "render"]}


def test_the_defaults_are_accepted():
    assert problems(GOOD) == []


@pytest.mark.parametrize("name", ["_svc", "sglang-01", "a" * 32, "machine$"])
def test_names_useradd_accepts(name):
    assert problems(dict(GOOD, name=name, group=name)) == []


@pytest.mark.parametrize("name", ["sglang\n", "Sglang", "-sglang", "1sglang", "sg lang", "a" * 33, "", None, 1000,
                                  "sglang$x", "root:x", "\u0161glang"])
def test_names_useradd_refuses_are_named_with_their_variable(name):
    for variable in ("name", "group"):
        found = problems(dict(GOOD, **{variable: name}))
        assert len(found) == 1 and found[0].startswith("service_user_%s=%r is not a user or group name" % (variable, name))


def test_each_supplementary_group_is_checked_by_its_position():
    assert problems(dict(GOOD, groups=["video", "render\n"]))[0].startswith("service_user_groups[1]='render\\n'")
    assert problems(dict(GOOD, groups="video")) == [
        "service_user_groups='video' must be a list of group names, like [video, render]"]


@pytest.mark.parametrize("home", ["var/lib/sglang", "/", "//", "", None])
def test_home_must_be_absolute_below_root(home):
    assert problems(dict(GOOD, home=home)) == ["service_user_home=%r is not an absolute path below /" % (home,)]


def test_home_with_a_control_character_is_named():
    found = problems(dict(GOOD, home="/var/lib/sglang\n"))
    assert len(found) == 1 and found[0].startswith("service_user_home: the value holds the control character U+000A")


def test_the_whole_message_of_a_bad_name():
    assert problems(dict(GOOD, name="Sglang")) == [
        "service_user_name='Sglang' is not a user or group name useradd accepts: a lower-case letter or '_', then up "
        "to 31 lower-case letters, digits, '_' or '-'"]


@pytest.mark.parametrize("home", ["/X", "/srv/XX/"])
def test_a_home_of_any_letters_below_the_root_is_accepted(home):
    assert problems(dict(GOOD, home=home)) == []
