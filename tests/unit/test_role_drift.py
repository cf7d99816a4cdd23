"""tests/integration/role_drift.py: what a role keeps, read from a run's report, and the tasks it cannot read."""
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import DRIFTS, KEPT, KINDS, UNCHANGED, drift_each, kept, managed_changes  # noqa: E402

ROLE = "blackwell.gpu_node.monitoring"


def result(action, **args):
    return dict(action=action, changed=False, invocation=dict(module_args=args), checksum="c0ffee")


def test_each_keeping_task_of_the_role_is_one_thing_of_its_kind_and_other_tasks_are_not():
    ran = {
        "blackwell.gpu_node.stack : Ensure the chosen stack profile is known": result("ansible.builtin.assert"),
        ROLE + " : Ensure the directory exists": result("ansible.builtin.file", path="/etc/x", state="directory",
                                                        mode="0755"),
        ROLE + " : Wait for the metrics": result("ansible.builtin.uri", url="http://127.0.0.1:1/metrics"),
        ROLE + " : Ensure the unit": result("ansible.builtin.template", dest="/etc/systemd/system/x.service"),
        "blackwell.gpu_node.cuda : Ensure the list": result("ansible.builtin.copy", dest="/etc/apt/x.list"),
        ROLE + " : Ensure both users": dict(action="ansible.builtin.user", changed=False, results=[
            dict(invocation=dict(module_args=dict(name="a", shell="/usr/sbin/nologin"))),
            dict(skipped=True),
            dict(invocation=dict(module_args=dict(name="b", shell="/usr/sbin/nologin")))]),
    }
    things = kept(ROLE, ran)
    assert [(thing["kind"], thing["task"].split(" : ")[1]) for thing in things] == [
        ("directory", "Ensure the directory exists"), ("file", "Ensure the unit"),
        ("user", "Ensure both users"), ("user", "Ensure both users")]
    assert things[1]["checksum"] == "c0ffee" and things[3]["args"]["name"] == "b"


@pytest.mark.parametrize("task, refused", [
    (result("ansible.builtin.lineinfile", path="/etc/x", line="y"), "no change is written"),
    (result("ansible.builtin.file", path="/etc/x", state="link", src="/y"), "of state link"),
    (dict(action="ansible.builtin.copy", changed=False, censored="hidden"), "no_log hides"),
])
def test_a_task_whose_change_is_not_written_fails_the_test_that_lists_it(task, refused):
    with pytest.raises(AssertionError, match=refused):
        kept(ROLE, {ROLE + " : Ensure it": task})


def test_every_kind_has_its_change_and_its_check_or_says_why_it_has_none():
    assert set(KINDS.values()) == set(DRIFTS) | set(UNCHANGED) and set(DRIFTS) == set(KEPT)


class FakeHost:
    """What testinfra's host gives the drift: the commands it ran, and a user with a shell and groups."""

    def __init__(self, shell, groups):
        self.commands, self.account = [], type("User", (), dict(shell=shell, groups=groups))

    def check_output(self, command, *args):
        self.commands.append(command % args)

    def user(self, name):
        return self.account


def user_thing(**args):
    return dict(kind="user", task=ROLE + " : Ensure the user", args=dict(name="sglang", **args))


def test_a_user_loses_exactly_what_its_task_keeps_and_is_kept_only_with_all_of_it():
    groups_only = user_thing(groups=["video", "render"], append=True, shell=None)
    host = FakeHost("/bin/bash", ["sglang", "video"])
    DRIFTS["user"](host, groups_only)
    assert host.commands == ["gpasswd --delete sglang video", "gpasswd --delete sglang render"]
    assert not KEPT["user"](host, groups_only)
    host.account.groups.append("render")
    assert KEPT["user"](host, groups_only)
    login = user_thing(shell="/usr/sbin/nologin")
    DRIFTS["user"](host, login)
    assert host.commands[-1] == "usermod --shell /bin/sh sglang" and not KEPT["user"](host, login)


def test_a_user_task_that_keeps_neither_a_shell_nor_groups_has_no_change_written():
    with pytest.raises(AssertionError, match="no change is written"):
        DRIFTS["user"](FakeHost("/bin/sh", []), user_thing(groups=[], append=True))


def test_each_change_must_undo_its_thing_and_the_next_run_must_report_and_redo_it():
    state = {"kept": True}
    runs = iter([{"t": dict(changed=True)}, {"t": dict(changed=False)}])

    def run_role():
        state["kept"] = True
        return next(runs)

    change = ("t", lambda: state.update(kept=False), lambda: state["kept"])
    assert drift_each(run_role, [change]) == {"t": dict(changed=False)}
    # A run that repairs it without saying so, or a change that changes nothing, fails.
    for runs_then, undone in ((iter([{"t": dict(changed=False)}]), False), (iter([]), True)):
        runs = runs_then
        with pytest.raises(AssertionError):
            drift_each(run_role, [("t", lambda undone=undone: state.update(kept=undone), lambda: state["kept"])])


def test_a_managed_file_is_opened_to_others_and_edited_where_its_text_is_written():
    host = FakeHost("/bin/sh", [])
    host.check_output = lambda command, *args: host.commands.append(command % args) or "da39a3 %s" % args[0]
    changes = managed_changes(host, "t", [dict(path="/log", mode=None, text=False),
                                          dict(path="/unit", mode="0644", text=True)])
    for _task, drift, _kept in changes:
        drift()
    assert [command for command in host.commands if not command.startswith("sha1sum")] == [
        "chmod o+rw /log", "chmod o+rw /unit", "printf '# edited by hand\\n' >> /unit"]
    assert [task for task, _drift, _kept in changes] == ["t", "t", "t"]
