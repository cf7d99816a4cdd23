"""The cuda role on a converged host: one check, nothing else; each of its inputs changed alone, and each change on
the host, runs its tasks and changes exactly what differs; an input of another role changes nothing.

Runs the role against cuda-fresh (after converge, idempotence and verify's other tests) with the docker
connection, as converge does, and leaves it as converge left it."""
import json
import os
import sys
from pathlib import Path

import pytest
import testinfra

CHECKOUT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from process_tree import run_bounded  # noqa: E402

HOST = "cuda-fresh"
PLAY = """
- hosts: all
  gather_facts: false
  roles:
    - role: blackwell.gpu_node.cuda
"""
CHECK = "Gather the host's facts and check whether CUDA is already installed and registered as configured"
SAID = "Say that CUDA is already installed and registered as configured"
HOLD = "Ensure apt upgrade leaves the toolkit at that version"
TOOLKIT = "Ensure the toolkit is installed at exactly that version"
LIST = "Ensure apt trusts the key for NVIDIA's repository only, and lists the repository signed by it"
LINKER = "Ensure the dynamic linker reads CUDA's lib64 and no directory of another CUDA major version"
PROFILE = "Ensure login shells get CUDA_HOME and CUDA's bin on PATH"
LINK = "Ensure /usr/local/cuda links to this installation, through the cuda alternative where there is one"
CHANGERS = (HOLD, TOOLKIT, LIST, LINK, LINKER, PROFILE)


@pytest.fixture(name="run_role", scope="module")
def fixture_run_role(tmp_path_factory):
    repo = os.environ["BLACKWELL_CUDA_REPO"]
    playbook = tmp_path_factory.mktemp("converged") / "play.yml"
    playbook.write_text(PLAY)
    settings = dict(cuda_repo_base_url="file://" + repo, cuda_repo_key_fingerprint=Path(repo, "FINGERPRINT").read_text().strip(),
                    cuda_driver_install=True)
    environ = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")

    def run_role(**changes):
        """The role's tasks that ran (name -> result) with these variables changed."""
        completed = run_bounded(
            [str(Path(sys.executable).with_name("ansible-playbook")), "-c", "node_container", "-i",
             HOST + ",", "-e", "ansible_python_interpreter=/usr/bin/python3", "-e",
             json.dumps(dict(settings, **changes)), str(playbook)],
            timeout=600, env=environ)
        assert completed.returncode == 0, completed.stdout[-4000:]
        report = json.loads(completed.stdout)
        # A task that ran for no host (an include whose condition was false) lists none.
        return dict((task["task"]["name"].split(" : ")[-1], task["hosts"][HOST])
                    for task in report["plays"][0]["tasks"] if not task["hosts"].get(HOST, {"skipped": True}).get("skipped"))

    return run_role


@pytest.fixture(name="fresh", scope="module")
def fixture_fresh():
    return testinfra.get_host("docker://" + HOST)


def converged(tasks):
    assert tasks[CHECK]["reasons"] == [], tasks[CHECK]["reasons"]
    assert tasks[SAID]["msg"].startswith("CUDA 13.0 in /usr/local/cuda-13.0 is cuda-toolkit-13-0=13.0.1-1; ")
    assert not any(task.get("changed") for task in tasks.values())
    return not [name for name in tasks if name in CHANGERS]


def changed_after_acting(tasks):
    """Which of the role's tasks changed something, once the check said why and every task ran."""
    assert tasks[CHECK]["reasons"] and SAID not in tasks
    assert all(name in tasks for name in CHANGERS), sorted(tasks)
    return sorted(name for name in CHANGERS if tasks[name].get("changed"))


def test_a_converged_host_costs_the_check_alone(run_role):
    tasks = run_role()
    assert converged(tasks)
    # The check, what it says, the report; cuda-fresh asks for the driver, whose tasks (an include) only say, in a
    # container, that they leave it alone.
    # Besides: the stack role's checks of the core and the profile, the arguments' validation, and the GPU facts that
    # the preflight role reads first in site.
    ran = [name for name in tasks if not name.startswith("Validating arguments against arg spec")
           and name not in ("Refuse an ansible-core older than the collection supports",
                            "Ensure the chosen stack profile is known and complete",
                            "Remember that the chosen stack profile has no lock",
                            "Read the GPU driver, unless preflight already did")]
    assert sorted(ran) == sorted([CHECK, SAID, "Publish what the role did", "Install the NVIDIA driver",
                                  "Leave the driver to the host that runs this container"])


def test_inputs_of_other_roles_and_of_the_driver_in_a_container_leave_it_converged(run_role):
    assert converged(run_role(sglang_server_port=31000, runtime_env_nccl_profile="none", cuda_driver_reboot=True))


def test_each_input_alone_makes_it_act(run_role):
    assert changed_after_acting(run_role(cuda_hold=False)) == sorted([HOLD])
    assert changed_after_acting(run_role()) == sorted([HOLD])
    # apt changes a held package's selection when it moves it to another version: held again at once.
    assert changed_after_acting(run_role(cuda_toolkit_version="13.0.2-1")) == sorted([TOOLKIT, HOLD])
    assert changed_after_acting(run_role()) == sorted([TOOLKIT, HOLD])
    assert converged(run_role())


def test_each_change_on_the_host_makes_it_act_and_repair(run_role, fresh):
    # All at once, in one run: the check names each change, and each task repairs exactly its own.
    fresh.check_output("echo 'export CUDA_HOME=/elsewhere' >> /etc/profile.d/blackwell-gpu-node-cuda.sh")
    fresh.check_output("chmod 0600 /etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf")
    fresh.check_output("rm /etc/apt/sources.list.d/cuda-debian12-x86_64.list")
    fresh.check_output("echo /usr/local/cuda-12.8/lib64 > /etc/ld.so.conf.d/cuda-12-by-hand.conf")
    fresh.check_output("apt-mark unhold cuda-toolkit-13-0")
    # The cuda alternative still names CUDA 13.0: --query reads its own link, not /usr/local/cuda.
    fresh.check_output("ln -sfn /usr/local/cuda-12.8 /usr/local/cuda")
    tasks = run_role()
    reasons = tasks[CHECK]["reasons"]
    named = ["/etc/profile.d/blackwell-gpu-node-cuda.sh differs", "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf "
             "is owned by uid 0 with mode 0600", "cuda-debian12-x86_64.list is missing", "cuda-12-by-hand.conf lists",
             "cuda-toolkit-13-0's selection is install",
             "/usr/local/cuda links to /usr/local/cuda-12.8, not to /etc/alternatives/cuda",
             # The toolkit's own linker file names /usr/local/cuda: CUDA 12 through that link, until it is repaired.
             "000_cuda.conf lists /usr/local/cuda/targets/x86_64-linux/lib (CUDA 12)",
             # apt's lists, read before the role writes the list again, no longer hold the repository's packages.
             "cuda-toolkit-13-0=13.0.1-1 is not in the repository's lists"]
    assert len(reasons) == len(named) and all(any(name in reason for reason in reasons)
                                              for name in named), reasons
    assert changed_after_acting(tasks) == sorted([PROFILE, LINK, LINKER, LIST, HOLD])
    assert fresh.check_output("readlink /usr/local/cuda") == "/etc/alternatives/cuda"
    assert converged(run_role())


# One change behind the role's back for each kind of thing it keeps, made as an administrator would make it.
DRIFTS = dict(
    # Removing the toolkit would leave a CUDA to adopt: its selection changes instead.
    package=lambda host, thing: host.check_output(
        "apt-mark %s %s", "unhold" if thing["selection"] == "hold" else "hold", thing["name"])
    if "selection" in thing else host.check_output("dpkg --remove --force-depends %s", thing["name"]),
    directory=lambda host, thing: host.check_output("chmod 0700 %s", thing["path"]),
    file=lambda host, thing: host.check_output("printf '# edited by hand\\n' >> %s", thing["path"]),
    alternative=lambda host, thing: host.check_output("update-alternatives --remove %s %s", thing["name"],
                                                      thing["value"]),
    link=lambda host, thing: host.check_output("ln -sfn /tmp %s", thing["path"]),
)


def names(reason, thing):
    if thing["kind"] == "alternative":
        return reason.startswith("the %s alternative " % thing["name"])
    return reason.startswith(thing.get("path", thing.get("name")) + " ") or reason.startswith(
        thing.get("path", thing.get("name")) + "'s ")


def test_each_thing_the_role_declares_changed_alone_is_noticed_and_repaired(run_role, fresh):
    # The list is the role's own declaration, as its check returns it: a thing the role starts to keep is changed
    # here too, with no change to this test.
    declared = run_role()[CHECK]["managed"]
    assert {thing["kind"] for thing in declared} == set(DRIFTS) and len(declared) >= 10, declared
    repaired = None
    for thing in declared:
        DRIFTS[thing["kind"]](fresh, thing)
        tasks = run_role()
        reasons = tasks[CHECK]["reasons"]
        assert any(names(reason, thing) for reason in reasons), (thing, reasons)
        # The run before repaired its own change: this run's check no longer names it.
        assert repaired is None or not any(names(reason, repaired) for reason in reasons), (repaired, reasons)
        assert any(task.get("changed") for task in tasks.values()), thing
        repaired = thing
    assert converged(run_role())
    # copy's backups (NAME.PID.DATE~) of the list and key it replaced served a failed change's rescue alone.
    assert fresh.check_output("find /etc/apt/sources.list.d /usr/share/keyrings -name '*~'") == ""
