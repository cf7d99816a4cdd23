"""The scenarios' containers, started and removed with the docker client: the create and destroy playbooks every
scenario uses (molecule/resources/create.yml, destroy.yml, named in .config/molecule/config.yml) call it with the
scenario's platforms as JSON.

    containers.py create PLATFORMS_JSON INSTANCE_CONFIG
    containers.py destroy PLATFORMS_JSON INSTANCE_CONFIG

Molecule's docker driver runs both as background jobs that it polls every five seconds, and imports Docker's Python
API for each: most of the 20 s that a scenario spent creating and destroying its node. Here each container is one
`docker run` or `docker rm`. Only the platform settings the scenarios use are understood; any other is refused by
name, before a container starts, rather than ignored. An image is never built: the fixtures build and name every
image (pre_build_image: true). A container that exists is started as it is, as the driver leaves it.

INSTANCE_CONFIG is the file where molecule's default driver reads how Ansible reaches each instance: after a create
it names each container and the node_container connection (molecule/resources/plugins/connection); after a destroy
it lists none.
"""
import json
import shlex
import subprocess
import sys

# The driver's default: a container that stays up doing nothing, for Ansible to exec into.
IDLE_COMMAND = 'bash -c "while true; do sleep 10000; done"'
# The driver's label, which `docker ps --filter label=owner=molecule` finds.
LABEL = "owner=molecule"
# The connection plugin of the scenarios' nodes.
CONNECTION = "node_container"
# Seconds a docker command may take: an image is never pulled or built here.
DOCKER_TIMEOUT = 120

# Platform setting -> the docker run option that takes each of its values. Settings Ansible alone reads (the
# inventory groups) map to None.
OPTIONS = {
    "capabilities": "--cap-add",
    "devices": "--device",
    "groups": None,
    "memory": "--memory",
    "memory_swap": "--memory-swap",
    "network_mode": "--network",
    "restart_policy": "--restart",
    "tmpfs": "--tmpfs",
    "volumes": "--volume",
}
HANDLED = {"name", "image", "pre_build_image", "command"}


class PlatformError(Exception):
    """A platform this script cannot start as written."""


def problems(platform):
    """What about one platform cannot be honoured, as sentences naming the setting."""
    name = platform.get("name", "(unnamed)")
    found = []
    if not platform.get("name") or not platform.get("image"):
        found.append("platform %s: name and image are required" % name)
    if platform.get("pre_build_image") is not True:
        found.append("platform %s: set pre_build_image: true; images are built by tests/fixtures, never here" % name)
    for key in sorted(set(platform) - HANDLED - set(OPTIONS)):
        found.append("platform %s: %s is not understood by molecule/resources/containers.py; add it there" % (
            name, key))
    return found


def run_argv(platform):
    """docker run's argv for one platform."""
    argv = ["docker", "run", "--detach", "--name", platform["name"], "--hostname", platform["name"],
            "--label", LABEL, "--log-driver", "json-file"]
    for key, option in sorted(OPTIONS.items()):
        if option is None or key not in platform:
            continue
        values = platform[key] if isinstance(platform[key], list) else [platform[key]]
        for value in values:
            argv += [option, str(value)]
    return argv + [platform["image"]] + shlex.split(platform.get("command") or IDLE_COMMAND)


def docker(argv, runner=None):
    return (runner or subprocess.run)(argv, capture_output=True, text=True, timeout=DOCKER_TIMEOUT, check=False)


def exists(name, runner=None):
    return docker(["docker", "container", "inspect", "--format", "{{.Id}}", name], runner).returncode == 0


def create(platforms, runner=None):
    """Start each platform's container (an existing one as it is); the names of those started."""
    found = [problem for platform in platforms for problem in problems(platform)]
    if found:
        raise PlatformError("; ".join(found))
    started = []
    for platform in platforms:
        argv = (["docker", "start", platform["name"]] if exists(platform["name"], runner)
                else run_argv(platform))
        result = docker(argv, runner)
        if result.returncode != 0:
            command = " ".join(argv[:2])
            raise PlatformError("platform %s: %s failed: %s" % (platform["name"], command, result.stderr.strip()))
        started.append(platform["name"])
    return started


def destroy(platforms, runner=None):
    """Remove each platform's container with its anonymous volumes; the names of those that existed."""
    removed = []
    for platform in platforms:
        if not exists(platform["name"], runner):
            continue
        result = docker(["docker", "rm", "--force", "--volumes", platform["name"]], runner)
        if result.returncode != 0:
            raise PlatformError("platform %s: docker rm failed: %s" % (platform["name"], result.stderr.strip()))
        removed.append(platform["name"])
    return removed


def instance_config(platforms):
    """Molecule's instance config for these platforms' containers: how Ansible reaches each."""
    return [{"instance": platform["name"], "address": platform["name"], "connection": CONNECTION}
            for platform in platforms]


def main(argv):
    if len(argv) != 4 or argv[1] not in ("create", "destroy"):
        sys.stderr.write("usage: containers.py create|destroy PLATFORMS_JSON INSTANCE_CONFIG\n")
        return 2
    platforms = json.loads(argv[2])
    try:
        if argv[1] == "create":
            names, instances = create(platforms), instance_config(platforms)
        else:
            names, instances = destroy(platforms), []
    except PlatformError as error:
        sys.stderr.write("%s\n" % error)
        return 1
    # JSON is YAML, which molecule reads.
    with open(argv[3], "w", encoding="utf-8") as config:
        json.dump(instances, config, indent=2)
    print(json.dumps(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
