"""Run every molecule scenario (or the ones named), as `molecule test -s NAME` each, in lanes side by side.

Most of a scenario's time is spent waiting on apt, pip and the servers it starts, so that one scenario at a time
leaves a core idle; lanes fill it. Each lane takes the longest scenario still waiting whenever it is free, so that
the lanes end together. The containers share the host's network, which is why no two scenarios bind the same port
(tests/unit/test_run_scenarios.py holds them to it).

--core VERSION=VENV adds a job for another ansible-core the collection supports, named CORE_SCENARIO@VERSION:
the unit tests on that core's Python, a syntax check of every playbook and the default scenario's converge and
idempotence on a fresh instance (destroyed after, whatever failed), with the virtualenv's ansible-core first on
PATH. It never runs beside the default scenario itself, whose container and ports it shares.
--core VERSION=VENV@IMAGE runs each of those steps in a container of IMAGE (a core that needs a newer Python than
this machine's, with the virtualenv made there): on the host's network, with the checkout and the toolchain's
collections at their own paths, the host's Docker Engine and its client, and molecule from the virtualenv.

--widen-when PATH opens one more lane once PATH exists: `make test` runs other steps beside the scenarios, and
when they are done, a core they no longer use is free.

A job's output goes to .build/molecule/NAME.log. When all are done, the logs are printed (those of failed jobs
last), then a line per job: passed or failed, and its seconds. A job that runs past --timeout is killed with every
process it started, and its instances destroyed.
"""
import argparse
import os
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from process_tree import kill_tree  # noqa: E402

# Seconds each job took in `make test` on CI's 2 cores, two lanes beside the other steps: only the order the lanes
# take them in depends on these. A scenario missing here counts as DEFAULT_SECONDS.
SECONDS = {
    "benchmark": 133,
    "cuda": 400,
    "cuda_errors": 101,
    "default": 129,
    "diagnose": 87,
    "driver": 158,
    "fabric": 99,
    "ml_stack": 153,
    "ml_stack_errors": 279,
    "monitoring": 180,
    "preflight": 80,
    "runtime_env": 45,
    "runtime_env_errors": 49,
    "sglang_failure": 33,
    "sglang_multinode": 50,
    "sglang_systemd": 92,
    "upgrade": 615,
    "upgrade_fleet": 520,
}
DEFAULT_SECONDS = 300
# What a job of another core takes beside its scenario's converge and idempotence: the unit tests and the syntax
# check, less the scenario's verify and side effect it does not run.
CORE_SECONDS = -10
# The scenario another core converges: the whole site on one fresh node, then idempotence. Its verify and side
# effect (validate) prove the collection, not the core, and run in the scenario's own job. The last action, destroy,
# also runs when an earlier step fails.
CORE_SCENARIO = "default"
CORE_ACTIONS = ("destroy", "converge", "idempotence", "destroy")
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def scenarios(root):
    """The scenarios under root/molecule, as `molecule test --all` finds them: each directory with a molecule.yml."""
    return sorted(path.parent.name for path in (root / "molecule").glob("*/molecule.yml"))


def scenario_of(job):
    """The molecule scenario a job runs: its name, or what precedes @ in another core's job."""
    return job.split("@", 1)[0]


def longest_first(names, seconds=None):
    """names in the order the lanes take them: the longest first, ties by name."""
    seconds = SECONDS if seconds is None else seconds

    def expected(name):
        return seconds.get(scenario_of(name), DEFAULT_SECONDS) + (CORE_SECONDS if "@" in name else 0)

    return sorted(names, key=lambda name: (-expected(name), name))


def core_steps(version, venv, checkout=CHECKOUT, environ=None, image=None):
    """(title, argv, environment) of each step of another core's job: its virtualenv's bin first on PATH, and the
    toolchain's collections (community.docker, which molecule's docker driver uses) on its collections path. With
    an image, each argv runs in a container of it (core_container), which gets that environment."""
    environ = os.environ if environ is None else environ
    venv = Path(venv)
    collections = [str(checkout / ".build" / "collections"), sysconfig.get_path("purelib")]
    # A container has a PATH of its own: the host's names programs that are not there.
    path = CONTAINER_PATH if image else environ.get("PATH", "")
    env = dict(environ, PATH="%s:%s" % (venv / "bin", path), ANSIBLE_COLLECTIONS_PATH=":".join(collections))
    molecule = str(venv / "bin" / "molecule") if image else str(Path(sys.executable).parent / "molecule")
    playbooks = sorted(str(path.relative_to(checkout)) for path in (checkout / "playbooks").glob("*.yml"))
    steps = [
        ("unit tests on ansible-core %s" % version,
         [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"]),
        ("syntax check of every playbook on ansible-core %s" % version,
         [str(venv / "bin" / "ansible-playbook"), "--syntax-check", "-i", "inventory/demo"] + playbooks),
    ] + [("%s of scenario %s on ansible-core %s" % (action, CORE_SCENARIO, version),
          [molecule, action, "-s", CORE_SCENARIO]) for action in CORE_ACTIONS]
    if image is None:
        return [(title, argv, env) for title, argv in steps]
    prefix = core_container(version, image, checkout, collections[1:], env)
    return [(title + " in " + image, prefix + argv, None) for title, argv in steps]


def core_container_name(version):
    return "blackwell-core-" + version


def core_home(checkout, version):
    """The HOME of a core's containers, in the checkout: each step runs in a container of its own, and molecule keeps
    what it created and converged there between them, apart from the host's."""
    return Path(checkout) / ".build" / ("home-core-" + version)


def core_container(version, image, checkout, mounts, env):
    """The `docker run` that runs a command of a core's job in a container of image. Only the variables a step
    needs go in: the core's PATH and collections path, the images and fixtures the scenarios name (BLACKWELL_*),
    each fixture mounted at its own path, as the playbooks read them on the controller too, and a HOME of the core's
    own (core_home)."""
    names = sorted(name for name in env if name.startswith("BLACKWELL_")
                   or name in ("PATH", "ANSIBLE_COLLECTIONS_PATH", "PY_COLORS", "ANSIBLE_FORCE_COLOR"))
    fixtures = [env[name] for name in names if name.startswith("BLACKWELL_") and os.path.isabs(env[name])
                and os.path.exists(env[name])]
    argv = ["docker", "run", "--rm", "--name", core_container_name(version), "--network", "host",
            "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", "/usr/bin/docker:/usr/bin/docker:ro",
            "-v", "%s:%s" % (checkout, checkout), "-w", str(checkout), "-e", "HOME=%s" % core_home(checkout, version)]
    for mount in list(mounts) + fixtures:
        argv += ["-v", "%s:%s:ro" % (mount, mount)]
    for name in names:
        argv += ["-e", "%s=%s" % (name, env[name])]
    return argv + [image]


class Lanes:
    """The jobs still waiting, and what each that ran gave: (name, exit status or None on timeout, seconds).

    cores: {version: "virtualenv" or "virtualenv@image"} of the other cores whose jobs are among the names."""

    def __init__(self, names, logs, timeout, cores=None):
        self.waiting = list(names)
        self.running = set()
        self.results = []
        self.logs, self.timeout, self.cores = logs, timeout, cores or {}
        self.changed = threading.Condition()

    def next(self):
        """The first waiting job whose scenario is not running now; None when none is left. Waits while every
        waiting job's scenario runs."""
        with self.changed:
            while True:
                busy = set(scenario_of(name) for name in self.running)
                ready = [name for name in self.waiting if scenario_of(name) not in busy]
                if ready:
                    self.waiting.remove(ready[0])
                    self.running.add(ready[0])
                    return ready[0]
                if not self.waiting:
                    return None
                self.changed.wait()

    def done(self, name, status, seconds):
        with self.changed:
            self.running.discard(name)
            self.results.append((name, status, seconds))
            self.changed.notify_all()

    def say(self, text):
        with self.changed:
            print("==> " + text, flush=True)

    def run(self, lane):
        while True:
            name = self.next()
            if name is None:
                return
            self.say("%s: started in lane %d" % (name, lane))
            started = time.monotonic()
            status = self.job(name)
            seconds = round(time.monotonic() - started)
            self.done(name, status, seconds)
            self.say("%s: %s in %d s" % (name, verdict(status), seconds))

    def run_once(self, lane, path, sleep=time.sleep):
        """run(lane) from when path exists; nothing if every job has started by then."""
        while not os.path.exists(path):
            with self.changed:
                if not self.waiting:
                    return
            sleep(2)
        self.run(lane)

    def steps(self, name):
        if "@" in name:
            version = name.split("@", 1)[1]
            venv, _at, image = self.cores[version].partition("@")
            return core_steps(version, venv, image=image or None)
        return [("scenario " + name, ["molecule", "test", "-s", name], None)]

    def job(self, name):
        """The job's steps in turn, its output in its log, until one fails: its exit status, None when it ran past
        the timeout (then its scenario's instances are destroyed)."""
        deadline = time.monotonic() + self.timeout
        with open(self.logs / (name + ".log"), "w") as log:
            for title, argv, env in self.steps(name):
                log.write("==> %s\n" % title)
                log.flush()
                status = self.step(argv, env, log, deadline)
                if status is None:
                    log.write("\n==> killed after %d s, with every process it started\n" % self.timeout)
                    log.flush()
                    if "@" in name:
                        # A container outlives the docker client that started it.
                        self.step(["docker", "rm", "-f", core_container_name(name.split("@", 1)[1])], None, log,
                                  time.monotonic() + 60)
                    self.step(["molecule", "destroy", "-s", scenario_of(name)], env, log, time.monotonic() + 300)
                    return None
                if status != 0:
                    if "@" in name:
                        _title, cleanup, cleanup_env = self.steps(name)[-1]
                        self.step(cleanup, cleanup_env, log, time.monotonic() + 300)
                    return status
            return 0

    @staticmethod
    def step(argv, env, log, deadline):
        """argv's exit status, None when it ran past the deadline (then it is killed with every process it started)."""
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True, cwd=str(CHECKOUT))
        try:
            return process.wait(timeout=max(0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_tree(process.pid)
            process.wait()
            return None


def verdict(status):
    if status is None:
        return "KILLED (timeout)"
    return "passed" if status == 0 else "FAILED (exit status %d)" % status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("names", nargs="*", help="scenarios to run (default: all)")
    parser.add_argument("--lanes", type=int, default=int(os.environ.get("MOLECULE_LANES", "2")),
                        help="scenarios run at once (MOLECULE_LANES, default 2)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds one job may take (default 3600)")
    parser.add_argument("--widen-when", metavar="PATH",
                        help="open one more lane once PATH exists (when what ran beside the scenarios is done)")
    parser.add_argument("--core", action="append", default=[], metavar="VERSION=VENV[@IMAGE]",
                        help="also run the ansible-core VERSION installed in virtualenv VENV, in a container of IMAGE "
                        "where given (repeatable)")
    args = parser.parse_args(argv)
    known = scenarios(CHECKOUT)
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        parser.error("no such scenario: %s (known: %s)" % (", ".join(unknown), ", ".join(known)))
    cores = dict(core.split("=", 1) for core in args.core if "=" in core)
    missing = sorted(venv for venv, _at, _image in (core.partition("@") for core in cores.values())
                     if not (Path(venv) / "bin" / "ansible-playbook").exists())
    if len(cores) != len(args.core) or missing:
        parser.error("--core takes VERSION=VENV[@IMAGE], a virtualenv with ansible-core installed (%s)"
                     % ", ".join(missing or args.core))
    logs = CHECKOUT / ".build" / "molecule"
    logs.mkdir(parents=True, exist_ok=True)
    jobs = (args.names or known) + ["%s@%s" % (CORE_SCENARIO, version) for version in sorted(cores)]
    lanes = Lanes(longest_first(jobs), logs, args.timeout, cores)
    threads = [threading.Thread(target=lanes.run, args=(lane,)) for lane in range(1, max(1, args.lanes) + 1)]
    if args.widen_when:
        threads.append(threading.Thread(target=lanes.run_once, args=(len(threads) + 1, args.widen_when)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Failed scenarios last, so that the end of the output shows them.
    for name, status, _seconds in sorted(lanes.results, key=lambda result: result[1] != 0):
        print("==> %s (%s): %s" % (name, verdict(status), logs / (name + ".log")), flush=True)
        sys.stdout.write((logs / (name + ".log")).read_text(errors="replace"))
    print("==> molecule, %d lane(s)%s:" % (args.lanes, ", one more once %s existed" % args.widen_when
                                           if args.widen_when else ""))
    for name, status, seconds in sorted(lanes.results):
        print("    %-22s %-28s %5d s" % (name, verdict(status), seconds))
    return 0 if all(status == 0 for _name, status, _seconds in lanes.results) else 1


if __name__ == "__main__":
    sys.exit(main())
