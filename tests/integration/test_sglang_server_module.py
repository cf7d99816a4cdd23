"""sglang_server, launching the sglang stand-in for real."""
import grp
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from process_tree import run_bounded

from conftest import STANDIN, free_port, run_module


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def group_alive(pgid):
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return found


@pytest.fixture
def server(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    params = dict(
        python=sys.executable, model_path=str(model), tensor_parallel_size=2, port=free_port(),
        log_path=str(tmp_path / "server.log"), state_dir=str(tmp_path / "state"), trust_remote_code=True,
        env={"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01"}, stop_timeout=5, gpu_release_timeout=1,
        manager="module",
    )
    yield params
    run_module("sglang_server", state="stopped", state_dir=params["state_dir"], stop_timeout=5)


def test_start_survives_the_connection_and_a_second_run_changes_nothing(server):
    first = run_module("sglang_server", **server)
    assert first["changed"] is True and first["actions"] == ["started"]
    assert alive(first["pid"])  # ansible has exited: the server lives on in its own session
    assert os.getsid(first["pid"]) == first["pid"]
    assert first["argv"][:3] == [sys.executable, "-m", "sglang.launch_server"]
    ready = run_module("wait_for_server", log_path=server["log_path"], offset=first["offset"], pid=first["pid"],
                       health_url="http://127.0.0.1:%d/health" % server["port"], timeout=60)
    assert ready["ready"] is True, ready.get("msg")

    second = run_module("sglang_server", **server)
    assert second["changed"] is False and second["actions"] == []
    assert second["pid"] == first["pid"] and second["offset"] == first["offset"]


def test_enable_metrics_serves_sglang_metrics(server):
    started = run_module("sglang_server", enable_metrics=True, **server)
    assert "--enable-metrics" in started["argv"]
    ready = run_module("wait_for_server", log_path=server["log_path"], offset=started["offset"], pid=started["pid"],
                       health_url="http://127.0.0.1:%d/health" % server["port"], timeout=60)
    assert ready["ready"] is True, ready.get("msg")
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % server["port"], timeout=10) as answer:
        assert "sglang:num_running_reqs{" in answer.read().decode()


def test_changed_flag_restarts(server):
    first = run_module("sglang_server", **server)
    changed = run_module("sglang_server", cuda_graph_max_bs=64, **server)
    assert changed["changed"] is True and changed["actions"] == ["stopped", "started"]
    assert changed["killed"] and first["pid"] in changed["killed"]
    assert not alive(first["pid"]) and alive(changed["pid"])
    assert changed["diff"]["before"]["argv"] != changed["diff"]["after"]["argv"]
    assert "--cuda-graph-max-bs" in changed["argv"]


def test_changed_environment_restarts(server):
    first = run_module("sglang_server", **server)
    server["env"] = dict(server["env"], NCCL_DEBUG="INFO")
    changed = run_module("sglang_server", **server)
    assert changed["actions"] == ["stopped", "started"] and changed["pid"] != first["pid"]


def test_a_new_log_path_restarts_the_server_into_it_and_leaves_the_old_log(server, tmp_path):
    first = run_module("sglang_server", **server)
    assert run_module("wait_for_server", log_path=server["log_path"], offset=first["offset"], pid=first["pid"],
                      health_url="http://127.0.0.1:%d/health" % server["port"], timeout=60)["ready"] is True
    old_log = server["log_path"]
    server["log_path"] = str(tmp_path / "moved" / "server.log")
    predicted = run_module("sglang_server", check_mode=True, **server)
    assert predicted["changed"] is True and predicted["pid"] == first["pid"] and alive(first["pid"])
    assert predicted["restart_reasons"] == ["it logs to %s, not log_path=%s" % (old_log, server["log_path"])]
    moved = run_module("sglang_server", **server)
    assert moved["actions"] == ["stopped", "started"] and moved["restart_reasons"] == predicted["restart_reasons"]
    assert moved["log_path"] == server["log_path"] and not alive(first["pid"])
    ready = run_module("wait_for_server", log_path=server["log_path"], offset=moved["offset"], pid=moved["pid"],
                       health_url="http://127.0.0.1:%d/health" % server["port"], timeout=60)
    assert ready["ready"] is True, ready.get("msg")
    assert os.path.getsize(old_log) > 0
    again = run_module("sglang_server", **server)
    assert again["changed"] is False and again["restart_reasons"] == [] and again["pid"] == moved["pid"]


def test_server_killed_behind_its_back_is_restarted_and_reported(server):
    first = run_module("sglang_server", **server)
    os.killpg(first["pid"], signal.SIGKILL)
    again = run_module("sglang_server", **server)
    assert again["stale_pid"] == first["pid"]
    assert again["actions"] == ["cleaned stale pid file", "started"]
    assert alive(again["pid"])


def test_stop_leaves_no_process_of_its_group(server):
    first = run_module("sglang_server", **server)
    stopped = run_module("sglang_server", state="stopped", state_dir=server["state_dir"], stop_timeout=5)
    assert stopped["changed"] is True and stopped["running"] is False
    assert first["pid"] in stopped["killed"] and stopped["forced"] == []
    assert stopped["gpu_released"] is None  # no nvidia-smi here
    assert group_alive(first["pid"]) == []
    again = run_module("sglang_server", state="stopped", state_dir=server["state_dir"])
    assert again["changed"] is False


def test_foreign_gpu_holder_is_killed_only_on_request(server, tmp_path):
    device = tmp_path / "nvidia0"
    device.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print(1, flush=True);"
                               " time.sleep(120)", str(device)], stdout=subprocess.PIPE, start_new_session=True)
    holder.stdout.readline()
    try:
        common = dict(state="stopped", state_dir=server["state_dir"], gpu_devices=[str(tmp_path / "nvidia*")])
        by_default = run_module("sglang_server", **common)
        assert by_default["changed"] is False and alive(holder.pid)
        assert "killed_gpu_holders" not in by_default
        opted_in = run_module("sglang_server", kill_gpu_holders=True, **common)
        assert opted_in["changed"] is True
        assert opted_in["killed_gpu_holders"] == {str(holder.pid): [str(device)]}
        assert holder.wait(10) == -signal.SIGTERM
    finally:
        holder.kill()
        holder.wait()


def test_bad_options_fail_before_anything_starts(server):
    result = run_module("sglang_server", **dict(server, tensor_parallel_size=0, port=70000))
    assert result["failed"] is True
    assert result["msg"].startswith("Nothing was changed: ")
    assert "tensor_parallel_size=0 must be a positive integer" in result["msg"]
    assert "port=70000 is out of range" in result["msg"]
    assert not os.path.exists(server["log_path"])


def test_several_nodes_without_the_rank_zero_address_are_refused_by_name(server):
    result = run_module("sglang_server", **dict(server, nnodes=2, node_rank=0))
    assert result["failed"] is True and "Traceback" not in result.get("module_stderr", ""), result
    assert result["msg"] == ("Nothing was changed: dist_init_addr='' must be HOST:PORT of the rank-0 node when "
                             "nnodes > 1")
    assert not os.path.exists(server["log_path"])


def test_port_held_by_someone_else_is_refused(server):
    import socket
    with socket.socket() as other:
        other.bind(("127.0.0.1", server["port"]))
        other.listen()
        result = run_module("sglang_server", **server)
    assert result["msg"] == "Nothing was changed: port=%d on 127.0.0.1 is already in use by another process" % (
        server["port"])


def test_the_info_module_tells_whose_port_it_is(server):
    import socket

    def port_state():
        return run_module("sglang_server_info", state_dir=server["state_dir"],
                          port=server["port"])["port_state"]

    assert port_state() == "free"
    with socket.socket() as other:
        other.bind(("127.0.0.1", server["port"]))
        other.listen()
        assert port_state() == "in_use"
    launched = run_module("sglang_server", **server)
    ready = run_module("wait_for_server", log_path=server["log_path"], offset=launched["offset"], pid=launched["pid"],
                       health_url="http://127.0.0.1:%d/health" % server["port"], timeout=60)
    assert ready["ready"] is True, ready.get("msg")
    assert port_state() == "ours"


def test_check_mode_predicts_and_does_nothing(server):
    predicted = run_module("sglang_server", check_mode=True, **server)
    assert predicted["changed"] is True and predicted["running"] is False
    assert predicted["diff"]["after"]["running"] is True
    assert not os.path.exists(server["log_path"])
    for check_mode in (True, False):
        status = run_module("sglang_server_info", check_mode=check_mode, state_dir=server["state_dir"])
        assert status["running"] is False and status["changed"] is False and "argv" not in status, status
    refused = run_module("sglang_server", state="status", state_dir=server["state_dir"])
    assert refused.get("failed") and "value of state must be one of" in refused["msg"], refused


def test_secrets_never_reach_the_output(server):
    result = run_module("sglang_server", api_key="k3y-s3cr3t", secret_env={"HF_TOKEN": "t0k3n-value"}, **server)
    assert result["changed"] is True
    text = repr(result)
    assert "k3y-s3cr3t" not in text and "t0k3n-value" not in text
    assert "--api-key" in result["argv"]
    with open("/proc/%d/environ" % result["pid"], "rb") as handle:
        assert b"HF_TOKEN=t0k3n-value" in handle.read().split(b"\0")


def test_short_environment_values_do_not_mangle_the_result(server):
    # A value such as "0" under no_log would be masked wherever it occurs: in the offset, in 127.0.0.1.
    result = run_module("sglang_server", **dict(server, env=dict(server["env"], NCCL_NVLS_ENABLE="0")))
    assert result["offset"] == 0
    assert "127.0.0.1" in result["argv"]


def processes_running(text):
    """Pids whose command line holds text."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                if text.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def assert_nothing_started(server):
    assert not os.path.exists(server["log_path"])
    assert not os.path.exists(server["state_dir"])
    assert processes_running(server["model_path"]) == []


@pytest.mark.parametrize("name", ["kimi/k2", "../x"])
def test_a_name_that_is_no_file_name_is_refused_before_anything_starts(server, name):
    result = run_module("sglang_server", name=name, **server)
    assert result["failed"] is True and result["msg"].startswith("Nothing was changed: name=%r must be" % name)
    assert_nothing_started(server)
    assert not os.path.exists(os.path.join(os.path.dirname(server["state_dir"]), "x.json"))


@pytest.mark.parametrize("change,option", [
    (dict(extra_args=["--log-level", "info\nExecStartPre=/bin/touch /tmp/pwned"]), "extra_args[1]"),
    (dict(env={"NCCL_DEBUG": "INFO\nExecStartPre=/bin/touch /tmp/pwned"}), "env.NCCL_DEBUG"),
    (dict(host="127.0.0.1\r"), "host"),
])
def test_control_characters_are_refused_before_anything_starts(server, change, option):
    result = run_module("sglang_server", **dict(server, **change))
    assert result["failed"] is True
    assert result["msg"].startswith("Nothing was changed: %s: the value holds the control character" % option)
    assert_nothing_started(server)


def test_a_fifo_as_log_path_is_refused_within_seconds(server, tmp_path):
    os.mkfifo(str(tmp_path / "fifo.log"))
    started = time.monotonic()
    result = run_module("sglang_server", run_timeout=60, **dict(server, log_path=str(tmp_path / "fifo.log")))
    assert time.monotonic() - started < 30
    assert result["msg"] == ("Nothing was changed: log_path=%s is a FIFO: only a regular file (or a path that does "
                             "not exist yet) is accepted as the server's log" % (tmp_path / "fifo.log"))
    assert processes_running(server["model_path"]) == []


@pytest.mark.parametrize("kind", ["directory", "symbolic link"])
def test_a_log_path_that_is_no_regular_file_is_refused_and_its_target_untouched(server, tmp_path, kind):
    target = tmp_path / "target"
    target.write_text("untouched")
    log = tmp_path / "odd.log"
    if kind == "directory":
        log.mkdir()
    else:
        log.symlink_to(target)
    result = run_module("sglang_server", **dict(server, log_path=str(log)))
    assert result["msg"].startswith("Nothing was changed: log_path=%s is a %s: only a regular file" % (log, kind))
    assert target.read_text() == "untouched"
    assert processes_running(server["model_path"]) == []


def test_a_link_in_place_of_the_state_files_temporary_is_not_written_through(server, tmp_path):
    target = tmp_path / "target"
    target.write_text("untouched")
    os.makedirs(server["state_dir"])
    for name in ("sglang.json.tmp", "sglang.pid.tmp"):
        os.symlink(str(target), os.path.join(server["state_dir"], name))
    result = run_module("sglang_server", **server)
    assert result["changed"] is True and alive(result["pid"])
    assert target.read_text() == "untouched"


def test_the_log_is_created_readable_by_root_and_its_group_only(server):
    run_module("sglang_server", **server)
    assert stat.S_IMODE(os.stat(server["log_path"]).st_mode) == 0o640


def mode_and_group(path):
    info = os.stat(path)
    return stat.S_IMODE(info.st_mode), info.st_gid


def test_a_running_servers_log_and_state_files_get_their_modes_back_without_a_restart(server):
    """On a converged node the server is left running: its log (which can hold prompts) made readable by others,
    or given another group, and its state files made readable by others, are set back all the same."""
    log_group = grp.getgrgid(1).gr_name
    first = run_module("sglang_server", log_group=log_group, **server)
    assert first["changed"] is True and mode_and_group(server["log_path"]) == (0o640, 1), first
    state_file = os.path.join(server["state_dir"], "sglang.json")
    os.chmod(server["log_path"], 0o644)
    os.chown(server["log_path"], -1, 0)
    os.chmod(state_file, 0o644)
    actions = ["set the mode and group of the log", "set the mode and owner of the state files sglang.json"]
    predicted = run_module("sglang_server", check_mode=True, log_group=log_group, **server)
    assert predicted["changed"] is True and predicted["actions"] == actions, predicted
    assert mode_and_group(server["log_path"]) == (0o644, 0) and mode_and_group(state_file)[0] == 0o644
    settled = run_module("sglang_server", log_group=log_group, **server)
    assert settled["changed"] is True and settled["actions"] == actions, settled
    assert settled["pid"] == first["pid"] and alive(first["pid"])
    assert mode_and_group(server["log_path"]) == (0o640, 1) and mode_and_group(state_file)[0] == 0o600
    again = run_module("sglang_server", log_group=log_group, **server)
    assert again["changed"] is False and again["actions"] == [], again


def test_an_api_key_in_extra_args_is_masked_everywhere(server):
    result = run_module("sglang_server", secret_flags=["--hf-token"],
                        **dict(server, extra_args=["--api-key=xk3y-s3cr3t", "--served-model-name", "m"]))
    assert result["changed"] is True, result.get("msg")
    text = json.dumps(result)
    assert "xk3y-s3cr3t" not in text
    assert "--api-key=********" in result["argv"] and "--api-key=********" in result["diff"]["after"]["argv"]
    with open("/proc/%d/cmdline" % result["pid"], "rb") as handle:
        assert b"--api-key=xk3y-s3cr3t" in handle.read().split(b"\0")


def test_numbers_in_env_are_passed_as_text(server):
    result = run_module("sglang_server", **dict(server, env=dict(server["env"], SGLANG_STANDIN_STEP=0.01, NCCL_DEBUG=1)))
    assert result["changed"] is True, result.get("msg")
    with open("/proc/%d/environ" % result["pid"], "rb") as handle:
        environ = handle.read().split(b"\0")
    assert b"NCCL_DEBUG=1" in environ and b"SGLANG_STANDIN_STEP=0.01" in environ


def test_a_boolean_in_env_is_refused_naming_it(server):
    result = run_module("sglang_server", **dict(server, env=dict(server["env"], NCCL_P2P_DISABLE=True)))
    assert result["msg"].startswith("Nothing was changed: env.NCCL_P2P_DISABLE=True is not text or a number")
    assert_nothing_started(server)


def test_a_host_that_does_not_resolve_is_named_not_taken_for_a_busy_port(server):
    result = run_module("sglang_server", **dict(server, host="no-such-host.invalid"))
    assert result["msg"].startswith("Nothing was changed: host=no-such-host.invalid cannot be resolved")
    assert "in use" not in result["msg"]


def test_a_malformed_state_file_is_named_and_nothing_signalled(server):
    os.makedirs(server["state_dir"])
    state_file = os.path.join(server["state_dir"], "sglang.json")
    with open(state_file, "w") as handle:
        handle.write('{"pid": 12')
    for state in ("stopped", "started"):
        result = run_module("sglang_server", **dict(server, state=state))
        assert result["failed"] is True and "Traceback" not in result.get("module_stderr", "")
        assert result["msg"].startswith("The state file %s cannot be trusted: it is not JSON" % state_file)
        assert "remove %s" % state_file in result["msg"]
    assert processes_running(server["model_path"]) == []


def write_state(server, pid, argv):
    os.makedirs(server["state_dir"], exist_ok=True)
    with open("/proc/%d/stat" % pid) as handle:
        start_time = int(handle.read().rsplit(")", 1)[1].split()[19])
    with open(os.path.join(server["state_dir"], "sglang.json"), "w") as handle:
        json.dump({"pid": pid, "start_time": start_time, "argv": argv, "env_digest": "", "log_path": server["log_path"],
                   "offset": 0, "manager": "module"}, handle)


def test_a_state_file_naming_pid_1_is_refused(server):
    write_state(server, 1, ["/sbin/init"])
    result = run_module("sglang_server", state="stopped", state_dir=server["state_dir"])
    assert result["failed"] is True
    assert "pid 1 is not a server's" in result["msg"] and "Nothing was signalled" in result["msg"]


def test_another_users_process_named_by_the_state_file_is_never_signalled(server):
    foreign = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "120"],
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and open("/proc/%d/cmdline" % foreign.pid, "rb").read() != b"sleep\x00120\x00":
            time.sleep(0.05)
        write_state(server, foreign.pid, ["sleep", "120"])
        for state in ("stopped", "restarted"):
            result = run_module("sglang_server", **dict(server, state=state))
            assert result["failed"] is True
            assert "pid %d runs as uid 65534" % foreign.pid in result["msg"] and "Nothing was signalled" in result["msg"]
            assert alive(foreign.pid)
    finally:
        foreign.kill()
        foreign.wait()


def test_a_server_that_cannot_be_recorded_is_stopped_again(server, tmp_path):
    (tmp_path / "file").write_text("")
    result = run_module("sglang_server", **dict(server, state_dir=str(tmp_path / "file" / "state")))
    assert result["failed"] is True
    assert result["msg"].startswith("The server started (pid ")
    assert "so it was stopped again" in result["msg"]
    assert processes_running(server["model_path"]) == []


# --- the service user (issue 13) ---

@pytest.fixture
def as_nobody(server):
    """The server's options for a run as `nobody`: an interpreter, model and stand-in that nobody can read
    (pytest's tmp_path is root's only). The log and state stay root's, where the fixture puts them."""
    shared = tempfile.mkdtemp(prefix="sglang-nobody-")
    os.chmod(shared, 0o755)
    os.mkdir(os.path.join(shared, "model"))
    server.update(python="/usr/bin/python3", model_path=os.path.join(shared, "model"), user="nobody",
                  tensor_parallel_size=1, trust_remote_code=False)
    yield server


def process_uid(pid):
    with open("/proc/%d/status" % pid) as handle:
        return [int(line.split()[1]) for line in handle if line.startswith("Uid:")][0]


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_a_root_server_of_the_previous_version_is_migrated_to_the_service_user(as_nobody):
    # What ce123ef recorded for a server it launched as root: no boot id, no user, no secret flags.
    argv = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", as_nobody["model_path"],
            "--tensor-parallel-size", "1", "--host", "127.0.0.1", "--port", str(as_nobody["port"])]
    env = as_nobody["env"]
    with open(as_nobody["log_path"], "ab") as log:
        old = subprocess.Popen(argv, env=dict(os.environ, **env), stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    while not os.path.exists("/proc/%d/cmdline" % old.pid) or open("/proc/%d/cmdline" % old.pid).read() == "":
        time.sleep(0.01)
    with open("/proc/%d/stat" % old.pid) as handle:
        start_time = int(handle.read().rsplit(")", 1)[1].split()[19])
    env_digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode("utf-8")).hexdigest()  # as ce123ef's
    os.makedirs(as_nobody["state_dir"])
    with open(os.path.join(as_nobody["state_dir"], "sglang.json"), "w") as handle:
        json.dump({"argv": argv, "env_digest": env_digest, "log_path": as_nobody["log_path"], "manager": "module",
                   "started_at": time.time(), "pid": old.pid, "offset": 0, "start_time": start_time}, handle)
    with open(os.path.join(as_nobody["state_dir"], "sglang.pid"), "w") as handle:
        handle.write("%d\n" % old.pid)

    try:
        migrated = run_module("sglang_server", **as_nobody)
    finally:
        if old.poll() is None:
            os.killpg(old.pid, signal.SIGKILL)
    assert migrated["changed"] is True and migrated["actions"] == ["stopped", "started"], migrated
    assert old.wait(timeout=10) is not None and not group_alive(old.pid)
    assert process_uid(migrated["pid"]) == 65534
    with open(os.path.join(as_nobody["state_dir"], "sglang.json")) as handle:
        state = json.load(handle)
    assert state["identity"] == {"user": "nobody", "group": "nogroup"} and state["uid"] == 65534 and state["boot_id"]
    # The migrated server is the first launch of the history (the old version kept none).
    assert sorted(os.listdir(as_nobody["state_dir"])) == ["sglang.json", "sglang.launches.json", "sglang.pid"]
    ready = run_module("wait_for_server", log_path=as_nobody["log_path"], offset=migrated["offset"],
                       pid=migrated["pid"], health_url="http://127.0.0.1:%d/health" % as_nobody["port"], timeout=60)
    assert ready["ready"] is True, ready.get("msg")
    again = run_module("sglang_server", **as_nobody)
    assert again["changed"] is False and again["pid"] == migrated["pid"]
    status = run_module("sglang_server_info", state_dir=as_nobody["state_dir"], port=as_nobody["port"])
    assert status["user"] == "nobody" and status["expected_user"] == "nobody" and status["manager"] == "module"
    assert status["venv"]["path"] == "/usr" and status["venv"]["owner"] == "root"


def test_a_user_that_does_not_exist_is_named_before_anything_changes(server):
    failed = run_module("sglang_server", user="no-such-user-here", **server)
    assert failed.get("failed") and "user=no-such-user-here does not exist" in failed["msg"]
    assert "sglang_server_user" in failed["msg"] and "blackwell.gpu_node.service_user" in failed["msg"]
    assert not os.path.exists(server["state_dir"]) and not os.path.exists(server["log_path"])


def test_logrotate_file_is_written_quoted_and_removed_on_stop(server, tmp_path):
    rotation = dict(server, logrotate=True, logrotate_dir=str(tmp_path / "logrotate.d"))
    predicted = run_module("sglang_server", check_mode=True, **rotation)
    assert predicted["changed"] is True and not os.path.exists(rotation["logrotate_dir"])
    first = run_module("sglang_server", **rotation)
    assert "wrote the logrotate file" in first["actions"]
    text = (tmp_path / "logrotate.d" / "sglang-sglang").read_text()
    assert text.splitlines()[1] == '"%s" {' % server["log_path"] and "copytruncate" in text
    assert run_module("sglang_server", **rotation)["changed"] is False
    os.chmod(str(tmp_path / "logrotate.d" / "sglang-sglang"), 0o666)
    rewritten = run_module("sglang_server", **rotation)
    assert rewritten["changed"] is True and rewritten["actions"] == ["wrote the logrotate file"], rewritten
    assert stat.S_IMODE((tmp_path / "logrotate.d" / "sglang-sglang").stat().st_mode) == 0o644
    stopped = run_module("sglang_server", state="stopped", state_dir=server["state_dir"],
                         logrotate_dir=rotation["logrotate_dir"], stop_timeout=5)
    assert "removed the logrotate file" in stopped["actions"]
    assert os.listdir(rotation["logrotate_dir"]) == []


def test_a_log_path_that_logrotate_would_misread_is_refused(server, tmp_path):
    failed = run_module("sglang_server", **dict(server, log_path=str(tmp_path / "a b.log"), logrotate=True,
                                                logrotate_dir=str(tmp_path / "logrotate.d")))
    assert failed.get("failed") and "logrotate reads as a pattern" in failed["msg"]
    assert not os.path.exists(str(tmp_path / "logrotate.d")) and not os.path.exists(server["state_dir"])


# How the sglang_server role fingerprinted the virtualenv before the module did it (venv_path).
FIND_PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.find:
        paths: "{venv}/lib"
        recurse: true
        depth: 3
        file_type: any
        patterns: [torch-*.dist-info, sglang-*.dist-info, sgl_kernel-*.dist-info, flashinfer_python-*.dist-info,
                   flashinfer_jit_cache-*.dist-info, _blackwell_gpu_node_env.py]
        get_checksum: true
      register: found
    - ansible.builtin.debug:
        msg: >-
          {{{{ found.files | sort(attribute='path') | map(attribute='path')
               | zip(found.files | sort(attribute='path') | map(attribute='checksum', default=''))
               | to_json | hash('sha256') }}}}
"""


def server_environment(pid):
    with open("/proc/%d/environ" % pid, "rb") as handle:
        return dict(item.decode().split("=", 1) for item in handle.read().split(b"\0") if item)


@pytest.fixture(name="stack_server")
def fixture_stack_server(server, tmp_path):
    """The server options with venv_path: a virtualenv holding the stack's dist-info and a rendered environment."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "torch-2.9.1+cu128.dist-info").mkdir()
    (site / "sglang-0.5.9.dist-info").mkdir()
    (site / "_blackwell_gpu_node_env.py").write_text("ENV = {}\n")
    params = dict(server, venv_path=str(venv))
    del params["python"]
    return params, site


def test_venv_path_restarts_on_a_changed_stack_or_environment_only(stack_server):
    params, site = stack_server
    first = run_module("sglang_server", **params)
    assert first["argv"][0] == params["venv_path"] + "/bin/python"
    assert run_module("sglang_server", **params)["changed"] is False
    (site / "numpy-2.3.5.dist-info").mkdir()
    assert run_module("sglang_server", **params)["changed"] is False
    (site / "_blackwell_gpu_node_env.py").write_text("ENV = {'NCCL_DEBUG': 'INFO'}\n")
    edited = run_module("sglang_server", **params)
    assert edited["actions"] == ["stopped", "started"] and edited["pid"] != first["pid"]
    (site / "torch-2.9.1+cu128.dist-info").rename(site / "torch-2.9.1+cu130.dist-info")
    upgraded = run_module("sglang_server", **params)
    assert upgraded["actions"] == ["stopped", "started"] and upgraded["pid"] != edited["pid"]
    assert run_module("sglang_server", **params)["changed"] is False


def test_venv_path_keeps_the_digest_the_role_computed_with_find(stack_server, tmp_path):
    params, _site = stack_server
    started = run_module("sglang_server", **params)
    playbook = tmp_path / "find.yml"
    playbook.write_text(FIND_PLAY.format(venv=params["venv_path"]))
    completed = run_bounded(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-c", "local", "-i", "localhost,", "-e",
         "ansible_python_interpreter=" + sys.executable, str(playbook)],
        timeout=120, env=dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json"))
    role_digest = json.loads(completed.stdout)["plays"][0]["tasks"][1]["hosts"]["localhost"]["msg"]
    assert server_environment(started["pid"])["BLACKWELL_GPU_NODE_RUNS_FROM"] == role_digest


def test_a_venv_path_without_python_is_named_before_anything_starts(stack_server):
    params, _site = stack_server
    os.unlink(os.path.join(params["venv_path"], "bin", "python"))
    failed = run_module("sglang_server", **params)
    assert failed["failed"] and not failed["changed"]
    assert "venv_path=%s has no executable bin/python" % params["venv_path"] in failed["msg"]
