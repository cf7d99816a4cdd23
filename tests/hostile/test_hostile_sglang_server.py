"""sglang_server against the service user's virtualenv, log directory and state directory: the runtime
environment module that venv_path fingerprints swapped with a FIFO in a loop or made an 8 GiB sparse file, a log
directory the user can write, and a state directory the user can write (where it forges the record of a root
process of its choice). Root fingerprints bounded, opens no log where the user could redirect it, and signals
nothing the user names."""
import json
import os
import socket
import subprocess
import time

import pytest

MODULE = "sglang_server"
INFO = "sglang_server_info"
# The options of a start that the info module takes too.
INFO_OPTIONS = ("name", "state_dir", "host", "port", "secret_flags")
ENV_MODULE = "_blackwell_gpu_node_env.py"
LAUNCH_STUB = "import sys\nprint('hostile stand-in of sglang.launch_server', sys.argv[1:])\n"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def setting(case, **args):
    """(venv, the arguments of a start from the user's virtualenv, as the role gives them)."""
    venv = case.make_venv()
    sglang = venv.site / "sglang"
    sglang.mkdir()
    (sglang / "__init__.py").write_text("")
    (sglang / "launch_server.py").write_text(LAUNCH_STUB)
    (venv.site / ENV_MODULE).write_text("import os\nos.environ.setdefault('CUDA_HOME', '/usr/local/cuda-13.0')\n")
    for path in (sglang, sglang / "__init__.py", sglang / "launch_server.py", venv.site / ENV_MODULE):
        case.chown(path)
    base = dict(state="started", name="sglang", manager="module", user=case.user.name, venv_path=str(venv.stable),
                model_path=str(case.root_dir("model")), log_path=str(case.root_dir("log") / "sglang.log"),
                state_dir=str(case.private / "state"), host="127.0.0.1", port=free_port(), stop_timeout=2,
                gpu_release_timeout=1)
    base.update(args)
    return venv, base


def look(case, args):
    """The server as the info module reports it (a baseline without it: sglang_server's state=status)."""
    if case.collection.has_module(INFO):
        return case.module(INFO, dict((key, value) for key, value in args.items() if key in INFO_OPTIONS))
    return case.module(MODULE, dict(args, state="status"))


def test_control_status_and_a_start_in_check_mode(hostile):
    case = hostile(MODULE, "control: info, started (check mode)")
    _venv, args = setting(case)
    case.check(look(case, args), "ok")
    started = case.module(MODULE, args, check_mode=True)
    case.check(started, "ok", problems=[] if (started.result or {}).get("changed") else ["a start is no change"])
    case.finish()


def test_the_env_module_swapped_with_a_fifo_in_a_loop_is_fingerprinted_bounded(hostile):
    case = hostile(MODULE, "%s <-> FIFO swap loop (started, check mode)" % ENV_MODULE)
    venv, args = setting(case)
    fifo = case.replace(venv.site / "swap.fifo", "fifo")
    with case.swapping(venv.site / ENV_MODULE, fifo):
        for _attempt in range(5):
            run = case.module(MODULE, args, check_mode=True)
            case.check(run, "bounded", problems=[] if not run.failed or "venv_path" in run.msg else [
                "failed without naming venv_path: %s" % run.msg[:200]])
    case.finish()


def test_an_8_gib_env_module_is_refused_unread(hostile):
    case = hostile(MODULE, "%s sparse 8 GiB (started, check mode)" % ENV_MODULE)
    venv, args = setting(case)
    case.replace(venv.site / ENV_MODULE, "sparse")
    run = case.module(MODULE, args, check_mode=True)
    case.check(run, "refused", needle="venv_path")
    case.finish()


LOGS = {
    "log_path in a directory the user can write": None,
    "log_path in a directory the user can write, -> /etc/shadow": "/etc/shadow",
}


@pytest.mark.parametrize("check_mode", [False, True], ids=["start", "check_mode"])
@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_log_in_a_directory_the_user_can_write_is_refused(hostile, name, check_mode):
    case = hostile(MODULE, "%s (started%s)" % (name, ", check mode" if check_mode else ""))
    logs = case.user_dir("logs")
    _venv, args = setting(case, log_path=str(logs / "sglang.log"))
    if LOGS[name]:
        case.replace(logs / "sglang.log", "link", LOGS[name])
    run = case.module(MODULE, args, check_mode=check_mode)
    problems = []
    if LOGS[name] and not os.path.islink(str(logs / "sglang.log")):
        problems.append("the planted link was replaced")
    if not check_mode and (case.private / "state" / "sglang.json").exists():
        problems.append("a server was started and recorded")
    case.check(run, "refused", needle="log_path", problems=problems)
    case.finish()


def start_time(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[19])


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as handle:
        return handle.read().strip()


@pytest.fixture
def decoy():
    """A process of root's that the user would like to see killed."""
    process = subprocess.Popen(["sleep", "617"], start_new_session=True)
    time.sleep(0.05)
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def forge_state(case, decoy_process):
    """The user's state_dir with the record of root's decoy process, as sglang_server would write it."""
    state_dir = case.user_dir("state", 0o750)
    state = {"pid": decoy_process.pid, "start_time": start_time(decoy_process.pid), "argv": ["sleep", "617"],
             "env_digest": "0" * 64, "log_path": str(case.root_dir("log") / "sglang.log"), "offset": 0,
             "manager": "module", "boot_id": boot_id(), "uid": 0, "identity": {"user": None, "group": None},
             "started_at": time.time(), "secret_flags": []}
    case.replace(state_dir / "sglang.json", "file", json.dumps(state))
    case.replace(state_dir / "sglang.pid", "file", "%d\n" % decoy_process.pid)
    return state_dir


@pytest.mark.parametrize("state", ["info", "stopped"])
def test_a_state_dir_the_user_can_write_is_refused(hostile, decoy, state):
    case = hostile(MODULE, "state_dir the user can write, forged record of a root process (%s)" % state)
    _venv, args = setting(case)
    state_dir = forge_state(case, decoy)
    if state == "info":
        run = look(case, dict(args, state_dir=str(state_dir)))
    else:
        run = case.module(MODULE, dict(args, state=state, state_dir=str(state_dir)))
    problems = []
    if decoy.poll() is not None:
        problems.append("root signalled the process the user named (pid %d, exit %s)" % (decoy.pid, decoy.returncode))
    if (run.result or {}).get("running") and (run.result or {}).get("pid") == decoy.pid:
        problems.append("reports root's process %d as its running server" % decoy.pid)
    case.check(run, "refused", needle="state_dir", problems=problems)
    case.finish()
