"""molecule/resources/plugins/connection/node_container.py: the scenarios' connection to their node containers."""
import ast
import importlib.util
import io
import resource
import subprocess
import types
from pathlib import Path

import pytest
import yaml
from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.playbook.play_context import PlayContext

CHECKOUT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location(
    "node_container", CHECKOUT / "molecule" / "resources" / "plugins" / "connection" / "node_container.py")
node_container = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(node_container)
# What ansible's plugin loader does with a connection plugin's DOCUMENTATION, so that set_options and get_option
# answer from the plugin's own option definitions.
C.config.initialize_plugin_configuration_definitions(
    "connection", "node_container", yaml.safe_load(node_container.DOCUMENTATION)["options"])

CONTAINER_ID = "3f5e0c1b9a7d64e2c8b1f0a9d3e7c5b2a1f4e6d8c0b9a7f3e2d1c5b4a6f8e0d2"
PID = 4242
INFINITY = resource.RLIM_INFINITY

# A cgroup v1 host with the unified hierarchy beside it (systemd's hybrid layout): this machine's mountinfo.
HYBRID_MOUNTINFO = """\
22 1 0:27 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs ro,size=4096k,nr_inodes=1024,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
# /proc/PID/cgroup of a systemd node container's init on that host (docker's cgroupfs driver), as read there: systemd
# moved itself into init.scope where it could. rdma has no mount on that host.
HYBRID_PROC_CGROUP = """\
10:rdma:/
9:name=systemd:/docker/{id}/init.scope
8:pids:/docker/{id}/init.scope
7:blkio:/docker/{id}
6:freezer:/docker/{id}
5:devices:/docker/{id}/init.scope
4:memory:/docker/{id}/init.scope
3:cpuset:/docker/{id}
2:cpuacct:/docker/{id}
1:cpu:/docker/{id}
0::/docker/{id}/init.scope
""".format(id=CONTAINER_ID)
# A cgroup v2 host (systemd's unified layout, docker's systemd cgroup driver), mounts with optional fields.
V2_MOUNTINFO = """\
24 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
"""
V2_PROC_CGROUP = "0::/system.slice/docker-%s.scope\n" % CONTAINER_ID
# /proc/PID/status of a container with docker's default capabilities.
DEFAULT_STATUS = """\
Name:\tsleep
Umask:\t0022
State:\tS (sleeping)
CapInh:\t0000000000000000
CapPrm:\t00000000a80425fb
CapEff:\t00000000a80425fb
CapBnd:\t00000000a80425fb
CapAmb:\t0000000000000000
NoNewPrivs:\t0
"""
PRIVILEGED_STATUS = DEFAULT_STATUS.replace("00000000a80425fb", "000001ffffffffff")
# Docker's default capabilities: chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap,
# net_bind_service, net_raw, sys_chroot, mknod, audit_write, setfcap.
DEFAULT_CAPABILITIES = [0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31]
DEFAULT_BOUNDING_SET = "--bounding-set=-all," + ",".join("+cap_%d" % capability for capability in DEFAULT_CAPABILITIES)
# This machine's /proc/self/limits.
PROC_LIMITS = """\
Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max file size             unlimited            unlimited            bytes
Max data size             unlimited            unlimited            bytes
Max stack size            8388608              unlimited            bytes
Max core file size        0                    unlimited            bytes
Max resident set          unlimited            unlimited            bytes
Max processes             96369                96369                processes
Max open files            20000                20000                files
Max locked memory         8388608              8388608              bytes
Max address space         unlimited            unlimited            bytes
Max file locks            unlimited            unlimited            locks
Max pending signals       96369                96369                signals
Max msgqueue size         819200               819200               bytes
Max nice priority         0                    0
Max realtime priority     0                    0
Max realtime timeout      unlimited            unlimited            us
"""
PROC_LIMITS_PARSED = [
    (resource.RLIMIT_CPU, INFINITY, INFINITY),
    (resource.RLIMIT_FSIZE, INFINITY, INFINITY),
    (resource.RLIMIT_DATA, INFINITY, INFINITY),
    (resource.RLIMIT_STACK, 8388608, INFINITY),
    (resource.RLIMIT_CORE, 0, INFINITY),
    (resource.RLIMIT_RSS, INFINITY, INFINITY),
    (resource.RLIMIT_NPROC, 96369, 96369),
    (resource.RLIMIT_NOFILE, 20000, 20000),
    (resource.RLIMIT_MEMLOCK, 8388608, 8388608),
    (resource.RLIMIT_AS, INFINITY, INFINITY),
    (resource.RLIMIT_SIGPENDING, 96369, 96369),
    (resource.RLIMIT_MSGQUEUE, 819200, 819200),
    (resource.RLIMIT_NICE, 0, 0),
    (resource.RLIMIT_RTPRIO, 0, 0),
    (resource.RLIMIT_RTTIME, INFINITY, INFINITY),
]
# The PATH that runc gives a process when the image sets none.
RUNC_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NSENTER = ["/usr/bin/nsenter", "--target", str(PID), "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup",
           "--root", "--wd", "--"]


def proc_files(status=DEFAULT_STATUS, proc_cgroup=HYBRID_PROC_CGROUP, mountinfo=HYBRID_MOUNTINFO):
    """The files that the plugin reads about the container's process PID, by path."""
    return {
        "/proc/%d/limits" % PID: PROC_LIMITS,
        "/proc/%d/cgroup" % PID: proc_cgroup,
        "/proc/%d/status" % PID: status,
        "/proc/self/mountinfo": mountinfo,
        "/proc/sys/kernel/cap_last_cap": "40\n",
    }


def fake_read(monkeypatch, files):
    """Make the plugin read files (path -> text) in place of the real ones; a path not there does not exist."""
    def read(path):
        if path not in files:
            raise FileNotFoundError(path)
        return files[path]
    monkeypatch.setattr(node_container, "read", read)


class FakePopen:
    """Stands in for subprocess.Popen: notes each command (argv, its input, Popen's arguments) and answers with
    returncode, stdout and stderr."""

    def __init__(self, returncode=0, stdout=b"", stderr=b""):
        self.answer = (returncode, stdout, stderr)
        self.calls = []

    def __call__(self, argv, **kwargs):
        assert all(isinstance(arg, bytes) for arg in argv)
        call = dict(kwargs, argv=[arg.decode() for arg in argv])
        self.calls.append(call)
        returncode, stdout, stderr = self.answer

        def communicate(in_data=None):
            call["input"] = in_data
            return stdout, stderr
        return types.SimpleNamespace(returncode=returncode, communicate=communicate)


@pytest.fixture
def popen(monkeypatch):
    """popen(returncode, stdout, stderr) -> the FakePopen that the plugin's commands now run through."""
    def make(returncode=0, stdout=b"", stderr=b""):
        fake = FakePopen(returncode, stdout, stderr)
        monkeypatch.setattr(node_container.subprocess, "Popen", fake)
        return fake
    return make


def connection(pid=None, extra_env=None, environment=None):
    """A connected Connection to the container "node", built the way ansible builds it: nsenter mode with pid,
    docker exec mode without."""
    plugin = node_container.Connection(PlayContext(), io.StringIO())
    plugin._load_name = "node_container"
    var_options = {"inventory_hostname": "node"}
    if extra_env is not None:
        var_options["ansible_docker_extra_env"] = extra_env
    plugin.set_options(var_options=var_options)
    plugin._container = plugin.get_option("container")
    plugin._pid = pid
    plugin._nsenter = "/usr/bin/nsenter" if pid else None
    plugin._container_id = CONTAINER_ID
    plugin._environment = environment
    plugin._connected = True
    return plugin


def test_command_environment_gives_path_hostname_and_home_by_default():
    assert node_container.command_environment({"Hostname": "node"}, {}) == {
        "PATH": RUNC_PATH, "HOSTNAME": "node", "HOME": "/root"}


def test_command_environment_takes_the_containers_env_over_the_defaults():
    config = {"Hostname": "node", "Env": ["PATH=/opt/venv/bin:/usr/bin", "HOSTNAME=other", "HOME=/home/ci",
                                          "OPTS=a=b"]}
    assert node_container.command_environment(config, None) == {
        "PATH": "/opt/venv/bin:/usr/bin", "HOSTNAME": "other", "HOME": "/home/ci", "OPTS": "a=b"}


def test_command_environment_sets_extra_env_last_as_strings():
    config = {"Hostname": "node", "Env": ["PATH=/usr/bin", "LANG=C"]}
    assert node_container.command_environment(config, {"LANG": "C.UTF-8", "HOME": "/srv", "WORKERS": 2}) == {
        "PATH": "/usr/bin", "HOSTNAME": "node", "HOME": "/srv", "LANG": "C.UTF-8", "WORKERS": "2"}


def test_cgroup_directories_of_a_container_on_a_hybrid_cgroup_v1_host():
    container = "/docker/" + CONTAINER_ID
    assert node_container.cgroup_directories(HYBRID_PROC_CGROUP, HYBRID_MOUNTINFO) == sorted(
        ["/sys/fs/cgroup/%s%s" % (hierarchy, container)
         for hierarchy in ["cpu", "cpuacct", "cpuset", "freezer", "blkio"]]
        + ["/sys/fs/cgroup/%s%s/init.scope" % (hierarchy, container)
           for hierarchy in ["memory", "devices", "pids", "systemd", "unified"]])


def test_cgroup_directories_of_a_combined_hierarchy():
    mountinfo = ("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct\n"
                 "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory\n")
    proc_cgroup = "4:memory:/docker/%s\n2:cpu,cpuacct:/docker/%s\n" % (CONTAINER_ID, CONTAINER_ID)
    assert node_container.cgroup_directories(proc_cgroup, mountinfo) == [
        "/sys/fs/cgroup/cpu,cpuacct/docker/" + CONTAINER_ID, "/sys/fs/cgroup/memory/docker/" + CONTAINER_ID]


def test_cgroup_directories_of_a_container_on_a_cgroup_v2_host():
    assert node_container.cgroup_directories(V2_PROC_CGROUP, V2_MOUNTINFO) == [
        "/sys/fs/cgroup/system.slice/docker-%s.scope" % CONTAINER_ID]


def test_cgroup_directories_ignore_mounts_of_a_cgroup_below_the_root():
    # A container's own view of its cgroups, mounted on the host (a bind mount or another namespace's): paths under
    # it are not the paths that /proc/PID/cgroup names.
    mountinfo = ("900 31 0:32 /docker/other /mnt/memory rw,relatime - cgroup cgroup rw,memory\n"
                 "901 31 0:26 /system.slice /mnt/unified rw,relatime - cgroup2 cgroup2 rw\n"
                 + HYBRID_MOUNTINFO)
    assert node_container.cgroup_directories("4:memory:/docker/x\n0::/docker/x\n", mountinfo) == [
        "/sys/fs/cgroup/memory/docker/x", "/sys/fs/cgroup/unified/docker/x"]
    assert node_container.cgroup_directories("4:memory:/docker/x\n", mountinfo.splitlines()[0]) == []


def test_capabilities_kept_of_dockers_default_bounding_set():
    assert node_container.capabilities_kept(DEFAULT_STATUS, 40) == DEFAULT_CAPABILITIES


def test_capabilities_kept_of_a_container_given_sys_admin():
    status = DEFAULT_STATUS.replace("CapBnd:\t00000000a80425fb", "CapBnd:\t00000000a82425fb")
    assert node_container.capabilities_kept(status, 40) == sorted(DEFAULT_CAPABILITIES + [21])


def test_capabilities_kept_of_a_privileged_container_is_none():
    assert node_container.capabilities_kept(PRIVILEGED_STATUS, 40) is None


def test_capabilities_kept_needs_a_bounding_set():
    with pytest.raises(ValueError, match="CapBnd"):
        node_container.capabilities_kept(DEFAULT_STATUS.replace("CapBnd:\t00000000a80425fb\n", ""), 40)


def test_resource_limits_of_proc_limits():
    assert node_container.resource_limits(PROC_LIMITS) == PROC_LIMITS_PARSED


def test_enterable_needs_root(monkeypatch):
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 1000)
    fake_read(monkeypatch, proc_files())
    assert node_container.Connection._enterable(PID, CONTAINER_ID) is None


def test_enterable_needs_the_containers_process(monkeypatch):
    # A controller in its own PID namespace sees another process, or none, at the container's host pid.
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 0)
    fake_read(monkeypatch, proc_files(proc_cgroup="0::/user.slice/user-1000.slice/session-3.scope\n"))
    assert node_container.Connection._enterable(PID, CONTAINER_ID) is None
    fake_read(monkeypatch, {})
    assert node_container.Connection._enterable(PID, CONTAINER_ID) is None
    assert node_container.Connection._enterable(0, CONTAINER_ID) is None


def test_enterable_needs_the_containers_cgroups_in_this_cgroup_namespace(monkeypatch):
    # A controller in a cgroup namespace of its own reads the container's cgroups as /../...: it cannot join them.
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 0)
    fake_read(monkeypatch, proc_files(proc_cgroup="0::/../docker/%s\n" % CONTAINER_ID))
    assert node_container.Connection._enterable(PID, CONTAINER_ID) is None


@pytest.mark.parametrize("proc_cgroup", [HYBRID_PROC_CGROUP, V2_PROC_CGROUP])
def test_enterable_gives_the_pid_of_the_containers_process(monkeypatch, proc_cgroup):
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 0)
    fake_read(monkeypatch, proc_files(proc_cgroup=proc_cgroup))
    assert node_container.Connection._enterable(PID, CONTAINER_ID) == PID


def test_connection_options_default_to_the_inventory_hostname():
    plugin = connection()
    assert plugin.get_option("container") == "node"
    assert plugin.get_option("extra_env") == {}
    assert plugin.get_option("docker_socket") == "/var/run/docker.sock"


def test_connect_enters_a_running_container_where_it_can_else_runs_docker_exec(monkeypatch):
    details = {"Id": CONTAINER_ID, "State": {"Running": True, "Pid": PID},
               "Config": {"Hostname": "node", "Env": ["LANG=C"]}}
    monkeypatch.setattr(node_container, "inspect", lambda socket_path, container: details)
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 0)
    fake_read(monkeypatch, proc_files())
    monkeypatch.setattr(node_container.shutil, "which", {"nsenter": "/usr/bin/nsenter"}.get)
    plugin = connection(extra_env={"A": "1"})
    plugin._connected = False
    plugin._connect()
    assert (plugin._container, plugin._pid, plugin._nsenter, plugin._connected) == (
        "node", PID, "/usr/bin/nsenter", True)
    assert plugin._environment == {"PATH": RUNC_PATH, "HOSTNAME": "node", "HOME": "/root",
                                   "LANG": "C", "A": "1"}
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 1000)
    plugin._connected = False
    plugin._connect()
    assert plugin._pid is None
    details["State"]["Running"] = False
    plugin._connected = False
    with pytest.raises(AnsibleConnectionFailure, match="container node is not running"):
        plugin._connect()


def test_connect_needs_nsenter_where_it_can_enter(monkeypatch):
    details = {"Id": CONTAINER_ID, "State": {"Running": True, "Pid": PID}, "Config": {}}
    monkeypatch.setattr(node_container, "inspect", lambda socket_path, container: details)
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node_container.shutil, "which", lambda name: None)
    fake_read(monkeypatch, proc_files())
    plugin = connection()
    plugin._connected = False
    with pytest.raises(AnsibleConnectionFailure, match="needs nsenter"):
        plugin._connect()


def test_docker_exec_mode_runs_docker_exec_with_extra_env(popen):
    fake = popen(0, b"out", b"err")
    plugin = connection(extra_env={"B": 2, "A": "x y"})
    assert plugin.exec_command("echo hi", in_data=b"input") == (0, b"out", b"err")
    [call] = fake.calls
    assert call["argv"] == ["docker", "--host", "unix:///var/run/docker.sock", "exec", "--interactive",
                            "--env", "A=x y", "--env", "B=2", "node", "/bin/sh", "-c", "echo hi"]
    assert (call["env"], call["preexec_fn"], call["cwd"], call["input"]) == (None, None, "/", b"input")
    assert call["stdin"] == call["stdout"] == call["stderr"] == subprocess.PIPE


def test_nsenter_mode_enters_the_namespaces_and_drops_capabilities(monkeypatch, popen):
    fake_read(monkeypatch, proc_files())
    fake = popen(3, b"out", b"err")
    environment = {"PATH": "/usr/bin", "HOME": "/root"}
    plugin = connection(pid=PID, extra_env={"A": "1"}, environment=environment)
    assert plugin.exec_command("echo hi", in_data=b"input") == (3, b"out", b"err")
    [call] = fake.calls
    assert call["argv"] == NSENTER + ["setpriv", "--inh-caps=-all", DEFAULT_BOUNDING_SET, "--",
                                      "/bin/sh", "-c", "echo hi"]
    assert (call["env"], call["cwd"], call["input"]) == (environment, "/", b"input")
    assert callable(call["preexec_fn"])


def test_nsenter_mode_keeps_every_capability_of_a_privileged_container(monkeypatch, popen):
    fake_read(monkeypatch, proc_files(status=PRIVILEGED_STATUS))
    fake = popen()
    connection(pid=PID, environment={}).exec_command("true")
    assert fake.calls[0]["argv"] == NSENTER + ["/bin/sh", "-c", "true"]


def test_nsenter_mode_joins_the_containers_cgroups_and_limits_before_it_runs(monkeypatch, popen, tmp_path):
    cgroup_root = tmp_path / "sys" / "fs" / "cgroup"
    mountinfo = HYBRID_MOUNTINFO.replace("/sys/fs/cgroup", str(cgroup_root))
    directories = node_container.cgroup_directories(HYBRID_PROC_CGROUP, mountinfo)
    for directory in directories:
        Path(directory).mkdir(parents=True)
    fake_read(monkeypatch, proc_files(mountinfo=mountinfo))
    limits = []
    monkeypatch.setattr(node_container.resource, "setrlimit", lambda limit, values: limits.append((limit, *values)))
    fake = popen()
    connection(pid=PID, environment={}).exec_command("true")
    fake.calls[0]["preexec_fn"]()
    assert len(directories) == 10
    assert {directory: (Path(directory) / "cgroup.procs").read_text() for directory in directories} == dict.fromkeys(
        directories, "0")
    assert limits == PROC_LIMITS_PARSED


@pytest.mark.parametrize("files", [{}, proc_files(proc_cgroup="0::/docker/%s\n" % ("f" * 64))])
def test_a_command_fails_the_connection_once_the_containers_process_is_gone(monkeypatch, popen, files):
    # After a reboot of a systemd node the container runs another process: the reboot action resets the
    # connection on a connection failure, and waits on.
    fake_read(monkeypatch, files)
    fake = popen()
    with pytest.raises(AnsibleConnectionFailure, match="container node: its process %d is gone" % PID):
        connection(pid=PID, environment={}).exec_command("true")
    assert not fake.calls


def test_a_reset_connection_finds_the_container_again_before_its_next_command(monkeypatch, popen):
    inspected = []

    def inspect(socket_path, container):
        inspected.append(container)
        return {"Id": CONTAINER_ID, "State": {"Running": True, "Pid": PID}, "Config": {}}
    monkeypatch.setattr(node_container, "inspect", inspect)
    monkeypatch.setattr(node_container.os, "geteuid", lambda: 1000)
    fake = popen()
    plugin = connection()
    plugin.reset()
    plugin.exec_command("true")
    assert inspected == ["node"] and len(fake.calls) == 1


def test_put_file_writes_through_dd(popen, tmp_path):
    source = tmp_path / "module.py"
    source.write_bytes(b"print('hi')\n")
    fake = popen()
    connection().put_file(str(source), "/root/.ansible/tmp/a b/module.py")
    [call] = fake.calls
    assert call["argv"][-4:] == ["dd", "of=/root/.ansible/tmp/a b/module.py", "bs=65536", "status=none"]
    assert call["input"] == b"print('hi')\n"


def test_put_file_fails_naming_the_path(popen, tmp_path):
    source = tmp_path / "module.py"
    source.write_bytes(b"")
    popen(1, b"", b"dd: failed to open: No such file or directory\n")
    with pytest.raises(AnsibleError, match="/missing/module.py: dd: failed to open: No such file"):
        connection().put_file(str(source), "/missing/module.py")


def test_fetch_file_reads_through_dd(popen, tmp_path):
    fake = popen(0, b"ID=debian\n")
    connection(pid=None).fetch_file("/etc/os-release", str(tmp_path / "os-release"))
    assert fake.calls[0]["argv"][-4:] == ["dd", "if=/etc/os-release", "bs=65536", "status=none"]
    assert (tmp_path / "os-release").read_bytes() == b"ID=debian\n"


def test_fetch_file_fails_naming_the_path(popen, tmp_path):
    popen(1, b"", b"dd: failed to open: Permission denied\n")
    with pytest.raises(AnsibleError, match="failed to fetch /etc/shadow: dd: failed to open: Permission denied"):
        connection().fetch_file("/etc/shadow", str(tmp_path / "shadow"))
    assert not (tmp_path / "shadow").exists()


def test_every_scenario_test_that_takes_a_host_names_its_containers_for_testinfra():
    # testinfra reaches a host of the scenario's inventory through Ansible modules when it does not know its
    # connection (node_container): slow, and what it reads differs (a file's last newline is lost).
    missing = []
    for path in sorted((CHECKOUT / "molecule").glob("*/tests/**/test_*.py")):
        tree = ast.parse(path.read_text())
        takes_host = any(isinstance(node, ast.FunctionDef) and "host" in [arg.arg for arg in node.args.args]
                         for node in tree.body)
        names = {target.id for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}
        if takes_host and "testinfra_hosts" not in names:
            missing.append(str(path.relative_to(CHECKOUT)))
    assert not missing, "set testinfra_hosts = [\"docker://NAME\", ...] in " + ", ".join(missing)
