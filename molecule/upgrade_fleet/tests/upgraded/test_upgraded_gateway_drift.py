"""Each thing the gateway role keeps on the converged gateway host, changed behind its back alone: the next run of
the role alone reports the task that keeps it changed and sets it back; after the last the role changes nothing and
the gateway routes to every node, healthy. What is changed comes from what a run reports, so a thing the role starts
to keep is changed here too: what its tasks keep through Ansible's own modules (tests/integration/role_drift.py),
every file gateway_service keeps (its managed result), the workers file gateway_workers keeps, and the keys file,
whose task's no_log hides its path (taken from the gateway's --secrets) and its content (compared by digest only).

Molecule's verify gives pytest the directory's test files sorted by name: this one runs after test_upgraded.py,
and leaves the gateway as converged for node_killed.yml."""
import json
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import (  # noqa: E402
    NOT_KEEPING,
    changed,
    changes_of,
    drift_each,
    kept,
    managed_changes,
    role_alone,
)

testinfra_hosts = ["docker://fleet-gateway"]
ROLE = "blackwell.gpu_node.gateway"
SERVICE = "blackwell.gpu_node.gateway_service"
WORKERS = "blackwell.gpu_node.gateway_workers"
# The collection's modules the role runs: what the first two keep is changed from their results below; the info
# module only reads. A module of the collection the role gains is refused by kept() until it is listed here.
OWN_MODULES = (SERVICE, WORKERS, "blackwell.gpu_node.gateway_service_info")
# Run on the gateway host as root: the gateway's workers and their health, asked with the admin key of the keys
# file (never shown), until every one is healthy or 30 s have passed.
WORKERS_HEALTH = """
import json, sys, time, urllib.request
secrets, url = sys.argv[1:]
key = json.load(open(secrets))["admin_key"]
request = urllib.request.Request(url + "/workers", headers={"Authorization": "Bearer " + key})
for _attempt in range(30):
    workers = json.load(urllib.request.urlopen(request, timeout=10))["workers"]
    listed = sorted((worker["url"], worker["is_healthy"]) for worker in workers)
    if listed and all(healthy for _url, healthy in listed):
        break
    time.sleep(1)
print(json.dumps(listed))
"""


def task_of(ran, module):
    return next(name for name, result in ran.items() if result.get("action") == module)


def keys_task(ran):
    """The one task of the role whose no_log hides what it keeps: the keys file's copy."""
    hidden = [name for name, result in ran.items()
              if name.startswith(ROLE + " : ") and "censored" in result and result["action"] not in NOT_KEEPING]
    assert len(hidden) == 1 and ran[hidden[0]]["action"] == "ansible.builtin.copy", hidden
    return hidden[0]


def flag(argv, name):
    return argv[argv.index(name) + 1]


def sha1(host, path):
    return host.check_output("sha1sum %s", path).split()[0]


def kept_by_ansible(host, ran):
    """(task, change, whether it is set back) for each thing the role's tasks keep through Ansible's own modules."""
    hidden = keys_task(ran)
    return changes_of(host, kept(ROLE, dict((name, result) for name, result in ran.items()
                                            if name != hidden and result["action"] not in OWN_MODULES)))


def as_converged(host, path):
    found = host.file(path)
    return found.user, found.group, found.mode, sha1(host, path)


def test_each_thing_the_gateway_role_keeps_changed_alone_is_set_back(tmp_path, host):
    run_role = role_alone(tmp_path, ROLE, "gateway")
    ran = run_role()
    assert changed(ran) == []
    service_task, workers_task = task_of(ran, SERVICE), task_of(ran, WORKERS)
    service = ran[service_task]
    # Under systemd the module keeps the unit, and writes its text.
    assert service["manager"] == "systemd" and [thing["text"] for thing in service["managed"]] == [True], service
    changes = kept_by_ansible(host, ran) + managed_changes(host, service_task, service["managed"])
    # gateway_workers writes the workers file again when its workers, owner, group or mode differ.
    workers_file = ran[workers_task]["workers_file"]
    converged = as_converged(host, workers_file)
    changes.append((workers_task, lambda: host.check_output("chmod o+rw %s", workers_file),
                    lambda: as_converged(host, workers_file) == converged))
    secrets = flag(service["argv"], "--secrets")
    keys = as_converged(host, secrets)
    assert keys[0] == "root" and keys[1] != "root" and keys[2] == 0o640, keys
    changes.append((keys_task(ran), lambda: host.check_output("chmod o+rw %s && printf '# edited by hand\\n' >> %s",
                                                              secrets, secrets),
                    lambda: as_converged(host, secrets) == keys))
    ran = drift_each(run_role, changes)
    gateway_url = "http://%s:%s" % (flag(service["argv"], "--host"), flag(service["argv"], "--port"))
    listed = json.loads(host.check_output("python3 -c %s %s %s", WORKERS_HEALTH, secrets, gateway_url))
    fleet = ran[workers_task]["invocation"]["module_args"]["workers"]
    assert listed == sorted([worker["url"], True] for worker in fleet), listed
