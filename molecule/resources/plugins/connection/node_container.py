# Test fixture of the blackwell.gpu_node collection's scenarios, never shipped or used on a managed host.
"""Ansible's connection to a scenario's node container, without a docker exec per command where it can."""
from __future__ import annotations

DOCUMENTATION = r"""
name: node_container
short_description: Run commands in a scenario's node container, entering its namespaces
description:
  - The scenarios under molecule/ run thousands of tasks on containers that share two cores. C(docker exec) costs
    each command a docker client, a call to dockerd and a runc exec, about a third of a pipelined task's CPU.
  - Where the controller runs as root in the host's PID namespace, each command runs through C(nsenter) in the
    container's mount, UTS, IPC, network, PID and cgroup namespaces, joined to the container's cgroups (its memory
    limit applies), with its capability bounding set, its resource limits and the environment docker exec gives.
    Docker's seccomp profile is not applied.
  - Elsewhere (a controller that itself runs in a container, or as another user) each command is a C(docker exec),
    as community.docker.docker runs it.
  - Supports pipelining. Commands run as root, the user of the node images.
options:
  container:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
  extra_env:
    description: Variables to set in each command's environment besides the container's, as docker exec's --env.
    type: dict
    default: {}
    vars:
      - name: ansible_docker_extra_env
  docker_socket:
    description: Docker's API socket, read once per connection for the container's process and settings.
    default: /var/run/docker.sock
    env:
      - name: BLACKWELL_NODE_DOCKER_SOCKET
"""

import http.client
import json
import os
import resource
import shutil
import socket
import subprocess
import urllib.parse

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

NAMESPACES = ["--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup"]
# What runc gives a process when the image sets no PATH.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Seconds to wait for dockerd's answer about one container.
INSPECT_TIMEOUT = 30
# Kernel name of each resource limit in /proc/PID/limits -> its resource constant.
LIMITS = {
    "Max cpu time": resource.RLIMIT_CPU,
    "Max file size": resource.RLIMIT_FSIZE,
    "Max data size": resource.RLIMIT_DATA,
    "Max stack size": resource.RLIMIT_STACK,
    "Max core file size": resource.RLIMIT_CORE,
    "Max processes": resource.RLIMIT_NPROC,
    "Max open files": resource.RLIMIT_NOFILE,
    "Max locked memory": resource.RLIMIT_MEMLOCK,
    "Max address space": resource.RLIMIT_AS,
    "Max resident set": resource.RLIMIT_RSS,
    "Max pending signals": resource.RLIMIT_SIGPENDING,
    "Max msgqueue size": resource.RLIMIT_MSGQUEUE,
    "Max nice priority": resource.RLIMIT_NICE,
    "Max realtime priority": resource.RLIMIT_RTPRIO,
    "Max realtime timeout": resource.RLIMIT_RTTIME,
}


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP to dockerd over its Unix socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def inspect(socket_path, container):
    """dockerd's description of a container (GET /containers/NAME/json)."""
    connection = UnixHTTPConnection(socket_path, INSPECT_TIMEOUT)
    try:
        connection.request("GET", "/containers/%s/json" % urllib.parse.quote(container, safe=""))
        response = connection.getresponse()
        body = response.read(4 * 1024 * 1024)
    finally:
        connection.close()
    if response.status != 200:
        raise AnsibleConnectionFailure("container %s: dockerd answered %d: %s" % (
            container, response.status, body[:200].decode("utf-8", "replace")))
    return json.loads(body)


def command_environment(config, extra_env):
    """The environment docker exec gives a root command: PATH and HOSTNAME, the container's, then --env's."""
    environ = {"PATH": DEFAULT_PATH, "HOSTNAME": config.get("Hostname") or ""}
    for entry in config.get("Env") or []:
        name, value = entry.split("=", 1) if "=" in entry else (entry, "")
        environ[name] = value
    environ.setdefault("HOME", "/root")
    environ.update({str(name): str(value) for name, value in (extra_env or {}).items()})
    return environ


def cgroup_directories(proc_cgroup, mountinfo):
    """The directories of the cgroups a process is in (/proc/PID/cgroup), under this host's cgroup mounts."""
    mounts = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        separator = fields.index("-")
        fstype, options = fields[separator + 1], fields[separator + 3].split(",")
        root, mount_point = fields[3], fields[4]
        if root != "/":
            continue
        if fstype == "cgroup2":
            mounts.setdefault("", mount_point)
        elif fstype == "cgroup":
            for option in options:
                mounts.setdefault(option, mount_point)
    directories = []
    for line in proc_cgroup.splitlines():
        controllers, path = line.split(":", 2)[1:]
        mount_point = mounts.get(controllers.split(",")[0] if controllers else "")
        if mount_point is not None:
            directories.append(mount_point + path)
    return sorted(set(directories))


def capabilities_kept(proc_status, last_capability):
    """The capabilities in a process's bounding set (/proc/PID/status CapBnd); None when it has every one the kernel
    knows (a privileged container)."""
    for line in proc_status.splitlines():
        if line.startswith("CapBnd:"):
            bounding = int(line.split()[1], 16)
            kept = [capability for capability in range(last_capability + 1) if bounding >> capability & 1]
            return None if len(kept) == last_capability + 1 else kept
    raise ValueError("no CapBnd line")


def resource_limits(proc_limits):
    """(resource, soft, hard) of each limit of a process, from /proc/PID/limits."""
    limits = []
    for line in proc_limits.splitlines()[1:]:
        for title, limit in LIMITS.items():
            if line.startswith(title + " "):
                soft, hard = line[len(title):].split()[:2]
                limits.append((limit, resource.RLIM_INFINITY if soft == "unlimited" else int(soft),
                               resource.RLIM_INFINITY if hard == "unlimited" else int(hard)))
    return limits


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


class Connection(ConnectionBase):
    """Commands in a scenario's node container: nsenter where the controller can, docker exec elsewhere."""

    transport = "node_container"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._container = None
        self._pid = None
        self._environment = None
        self._nsenter = None
        self._container_id = None

    def _connect(self):
        if self._connected:
            return self
        if self._play_context.remote_user not in (None, "root"):
            raise AnsibleConnectionFailure("node_container runs commands as root only, not %s"
                                           % self._play_context.remote_user)
        self._container = self.get_option("container")
        details = inspect(self.get_option("docker_socket"), self._container)
        if not details["State"].get("Running"):
            raise AnsibleConnectionFailure("container %s is not running" % self._container)
        self._environment = command_environment(details["Config"], self.get_option("extra_env"))
        self._container_id = details["Id"]
        self._pid = self._enterable(details["State"]["Pid"], details["Id"])
        # Found with the controller's PATH: commands get the container's.
        self._nsenter = shutil.which("nsenter") if self._pid else None
        if self._pid and not self._nsenter:
            raise AnsibleConnectionFailure("node_container needs nsenter (util-linux) on the controller's PATH")
        display.vvv("ESTABLISH NODE_CONTAINER CONNECTION (%s)" % ("nsenter, pid %d" % self._pid if self._pid
                                                                  else "docker exec"), host=self._container)
        self._connected = True
        return self

    @staticmethod
    def _enterable(pid, container_id):
        """pid where this process, root in the host's PID namespace, can enter it; None elsewhere."""
        if os.geteuid() != 0 or not pid:
            return None
        try:
            cgroups = read("/proc/%d/cgroup" % pid)
        except OSError:
            return None
        # A path outside this process's cgroup namespace reads /../...: its cgroups could not be joined.
        return pid if container_id in cgroups and "/../" not in cgroups else None

    def _entering(self):
        """(preexec_fn, argv prefix) of a command entered by nsenter: it joins the container's cgroups and takes its
        resource limits before nsenter runs; setpriv, in the container, drops what is not in the container's
        capability bounding set once nsenter has entered its namespaces, which needs those capabilities."""
        try:
            cgroups = read("/proc/%d/cgroup" % self._pid)
            limits = resource_limits(read("/proc/%d/limits" % self._pid))
            status = read("/proc/%d/status" % self._pid)
        except OSError:
            cgroups = ""
        # A container that restarted (a reboot of a systemd node) has another process: the caller (the reboot
        # action's wait among them) resets the connection, which finds it.
        if self._container_id not in cgroups:
            raise AnsibleConnectionFailure("container %s: its process %d is gone" % (self._container, self._pid))
        directories = cgroup_directories(cgroups, read("/proc/self/mountinfo"))
        kept = capabilities_kept(status, int(read("/proc/sys/kernel/cap_last_cap")))

        def enter():
            for directory in directories:
                with open(os.path.join(directory, "cgroup.procs"), "w", encoding="ascii") as procs:
                    procs.write("0")
            for limit, soft, hard in limits:
                resource.setrlimit(limit, (soft, hard))
        prefix = [] if kept is None else ["setpriv", "--inh-caps=-all", "--bounding-set=" + ",".join(
            ["-all"] + ["+cap_%d" % capability for capability in kept]), "--"]
        return enter, prefix

    def _run(self, argv, in_data=None):
        if self._pid:
            preexec, prefix = self._entering()
            full = [self._nsenter, "--target", str(self._pid)] + NAMESPACES + ["--root", "--wd", "--"] + prefix + argv
            environment = self._environment
        else:
            full = ["docker", "--host", "unix://" + self.get_option("docker_socket"), "exec", "--interactive"]
            for name, value in sorted(self.get_option("extra_env").items()):
                full += ["--env", "%s=%s" % (name, value)]
            full += [self._container] + argv
            preexec, environment = None, None
        display.vvv("EXEC %s" % full, host=self._container)
        process = subprocess.Popen([to_bytes(arg, errors="surrogate_or_strict") for arg in full],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=environment, preexec_fn=preexec, cwd="/")
        stdout, stderr = process.communicate(in_data)
        return process.returncode, stdout, stderr

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return self._run(["/bin/sh", "-c", cmd], in_data)

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self._container)
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as source:
            data = source.read()
        returncode, dummy, stderr = self._run(["dd", "of=" + out_path, "bs=65536", "status=none"], data)
        if returncode != 0:
            raise AnsibleError("failed to transfer %s to %s: %s" % (
                in_path, out_path, stderr.decode("utf-8", "replace")))

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self._container)
        returncode, stdout, stderr = self._run(["dd", "if=" + in_path, "bs=65536", "status=none"])
        if returncode != 0:
            raise AnsibleError("failed to fetch %s: %s" % (in_path, stderr.decode("utf-8", "replace")))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as target:
            target.write(stdout)

    def reset(self):
        self.close()

    def close(self):
        self._connected = False
