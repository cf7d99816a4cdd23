"""The things a role keeps through Ansible's own modules, as a run of the role reports them, and one change behind
the role's back for each, made as an administrator would make it.

A role without a converged check of its own declares what it keeps in its tasks: each task's module and what it
keeps (a path, a package, a user, a unit) come from the arguments it ran with, as Ansible's json callback reports
them. A task the role gains is listed, changed and checked here with no change to this file; a module of a kind
not listed below, or a task whose no_log hides its arguments, fails the test that lists it, until its change is
written.
"""
import json
import os
import sys
from pathlib import Path

from process_tree import run_bounded

# What each keeping module keeps, by the arguments it ran with.
KINDS = {
    "ansible.builtin.apt": "package",
    "ansible.builtin.copy": "file",
    "ansible.builtin.file": "directory",
    "ansible.builtin.group": "group",
    "ansible.builtin.systemd_service": "service",
    "ansible.builtin.template": "file",
    "ansible.builtin.user": "user",
}
# Modules that read, decide or wait: nothing of theirs to change.
NOT_KEEPING = ("ansible.builtin.assert", "ansible.builtin.command", "ansible.builtin.debug", "ansible.builtin.fail",
               "ansible.builtin.get_url", "ansible.builtin.meta", "ansible.builtin.set_fact", "ansible.builtin.stat",
               "ansible.builtin.uri", "ansible.builtin.validate_argument_spec")


PLAY = """
- hosts: %s
  gather_facts: false
  roles:
    - role: %s
"""


def role_alone(directory, role, hosts):
    """A call that runs the role alone on hosts of the scenario's inventory, as molecule's verify step gives it,
    and returns what run_playbook does."""
    playbook = Path(directory) / "play.yml"
    playbook.write_text(PLAY % (hosts, role))
    return lambda: run_playbook(playbook, os.environ["MOLECULE_INVENTORY_FILE"], os.environ)


def run_playbook(playbook, inventory, environ, timeout=600):
    """{task name, with its role's: this host's result} of every task that ran, for a playbook of one host, its
    whole process tree ended on timeout."""
    completed = run_bounded([str(Path(sys.executable).with_name("ansible-playbook")), "-i", inventory, str(playbook)],
                            timeout=timeout,
                            env=dict(environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1"))
    assert completed.returncode == 0, completed.stdout[-4000:]
    report = json.loads(completed.stdout)
    ran = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                if not result.get("skipped"):
                    ran[task["task"]["name"]] = result
    return ran


def kept(role, ran):
    """What the tasks of the role (its full name) that ran keep, each once, in the order they ran: kind, the task
    and its arguments."""
    things = []
    for name, result in ran.items():
        module = result.get("action")
        if not name.startswith(role + " : ") or module in NOT_KEEPING:
            continue
        assert module in KINDS, "%s (%s): no change is written for what this module keeps" % (name, module)
        for item in result.get("results", [result]):
            if item.get("skipped"):
                continue
            assert "invocation" in item, "%s: no_log hides what it keeps; its change needs a test of its own" % name
            args = item["invocation"]["module_args"]
            if KINDS[module] == "directory" and args.get("state") != "directory":
                raise AssertionError("%s: a file task of state %s has no change written" % (name, args.get("state")))
            things.append(dict(kind=KINDS[module], task=name, args=args, checksum=item.get("checksum")))
    return things


def _package(args):
    name = args["name"][0] if isinstance(args["name"], list) else args["name"]
    return name.split("=", 1)


def _drift_package(host, thing):
    host.check_output("dpkg --remove --force-depends %s", _package(thing["args"])[0])


def _package_kept(host, thing):
    package, version = _package(thing["args"])
    return host.package(package).is_installed and host.package(package).version == version


def _drift_file(host, thing):
    # As an editor saves it: a new file in its place (an executable that runs cannot be written to).
    path = thing["args"]["dest"]
    host.check_output("cp -p %s %s.edited && printf '# edited by hand\\n' >> %s.edited && mv %s.edited %s",
                      path, path, path, path, path)


def _sha1(host, path):
    return host.check_output("sha1sum %s", path).split()[0]


def _service_kept(host, thing):
    service = host.service(thing["args"]["name"])
    return service.is_enabled is bool(thing["args"]["enabled"]) and service.is_running is (
        thing["args"]["state"] in ("started", "restarted"))


def _user_keeps(thing):
    """The user's login shell and supplementary groups, where the task keeps them."""
    args = thing["args"]
    keeps = dict(shell=args.get("shell"), groups=list(args.get("groups") or []))
    assert keeps["shell"] or keeps["groups"], "%s: no change is written for what it keeps of the user" % thing["task"]
    return keeps


def _drift_user(host, thing):
    keeps = _user_keeps(thing)
    if keeps["shell"]:
        host.check_output("usermod --shell /bin/sh %s", thing["args"]["name"])
    for group in keeps["groups"]:
        host.check_output("gpasswd --delete %s %s", thing["args"]["name"], group)


def _user_kept(host, thing):
    keeps, user = _user_keeps(thing), host.user(thing["args"]["name"])
    return keeps["shell"] in (None, user.shell) and set(keeps["groups"]) <= set(user.groups)


# One change behind the role's back for each kind of thing, and whether the thing is as the role left it.
DRIFTS = dict(
    package=_drift_package,
    file=_drift_file,
    directory=lambda host, thing: host.check_output("chmod 0777 %s", thing["args"]["path"]),
    service=lambda host, thing: host.check_output("systemctl disable --now %s", thing["args"]["name"]),
    user=_drift_user,
)
KEPT = dict(
    package=_package_kept,
    file=lambda host, thing: _sha1(host, thing["args"]["dest"]) == thing["checksum"],
    directory=lambda host, thing: "%04o" % host.file(thing["args"]["path"]).mode == thing["args"]["mode"],
    service=_service_kept,
    user=_user_kept,
)
# A group is kept as the primary group of its user: it cannot be removed while the user is there, and the user's
# change covers both tasks.
UNCHANGED = ("group",)


def changed(ran):
    """The names of the tasks of a run that changed something."""
    return sorted(name for name, result in ran.items() if result.get("changed"))


def changes_of(host, things):
    """(task, change, whether the thing is as the role left it) for each thing of kept() that has a change."""
    return [(thing["task"], lambda thing=thing: DRIFTS[thing["kind"]](host, thing),
             lambda thing=thing: KEPT[thing["kind"]](host, thing))
            for thing in things if thing["kind"] not in UNCHANGED]


def managed_changes(host, task, files):
    """The changes of each file a module of the collection keeps, as its managed result lists them (path, the
    mode it leaves or None for a log that keeps its own less any permission for others, and whether it writes the
    text back): opened to others, and where it writes the text, edited."""
    def mode_is_kept(thing):
        mode = host.file(thing["path"]).mode
        return mode & 0o007 == 0 if thing["mode"] is None else "%04o" % mode == thing["mode"]

    changes = []
    for thing in files:
        changes.append((task, lambda thing=thing: host.check_output("chmod o+rw %s", thing["path"]),
                        lambda thing=thing: mode_is_kept(thing)))
        if thing["text"]:
            digest = _sha1(host, thing["path"])
            changes.append((task, lambda thing=thing: host.check_output("printf '# edited by hand\\n' >> %s",
                                                                        thing["path"]),
                            lambda thing=thing, digest=digest: _sha1(host, thing["path"]) == digest))
    return changes


def drift_each(run_role, changes):
    """Each change alone: the thing is no longer as the role left it; the next run of the role reports the task that
    keeps it changed, and it is as the role left it again. The run after the last must change nothing."""
    for task, drift, is_kept in changes:
        drift()
        assert not is_kept(), task
        ran = run_role()
        assert ran[task].get("changed") and is_kept(), (task, changed(ran))
    ran = run_role()
    assert changed(ran) == [], changed(ran)
    return ran
