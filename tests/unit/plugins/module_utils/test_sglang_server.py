import calendar
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils import _sglang_server as core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._secrets import masked_argv

STANDIN = Path(__file__).resolve().parents[3] / "fixtures" / "sglang_standin"
sys.path.insert(0, str(STANDIN))
from sglang.launch_server import parse_args  # noqa: E402  (the stand-in's parser has SGLang 0.5.9's flags)

REFERENCE = ("python -m sglang.launch_server --model-path /shared/kimi-k2.5-int4 --tp 8 --trust-remote-code "
             "--cuda-graph-max-bs 128 --disable-custom-all-reduce").split()


def options(**changes):
    params = dict(
        python="/home/sglang/ml-env/bin/python", model_path="/shared/kimi-k2.5-int4", model_is_hub_id=False,
        tensor_parallel_size=1, host="127.0.0.1", port=30000, trust_remote_code=False, cuda_graph_max_bs=None,
        disable_custom_all_reduce=False, attention_backend=None, nnodes=1, node_rank=0, dist_init_addr=None,
        speculative=None, api_key=None, extra_args=[], log_path="/tmp/server.log", name="sglang",
        state_dir="/var/lib/blackwell-gpu-node", secret_flags=[], env={}, secret_env={},
        systemd_unit_dir="/etc/systemd/system",
    )
    params.update(changes)
    return params


SERVICE = dict(stop_timeout=30, restart_sec=10, start_limit_interval=600, start_limit_burst=5, user="sglang",
               group="sglang")

REFERENCE_OPTIONS = options(tensor_parallel_size=8, trust_remote_code=True, cuda_graph_max_bs=128,
                            disable_custom_all_reduce=True)


def test_reference_inputs_give_the_reference_command():
    argv = core.build_argv(REFERENCE_OPTIONS)
    assert argv[:3] == ["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server"]
    assert vars(parse_args(argv[3:])) == vars(parse_args(REFERENCE[3:]))


def test_full_flag_names_are_emitted():
    argv = core.build_argv(REFERENCE_OPTIONS)
    assert "--tensor-parallel-size" in argv and "--tp" not in argv
    assert argv == [
        "/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/shared/kimi-k2.5-int4",
        "--tensor-parallel-size", "8", "--host", "127.0.0.1", "--port", "30000", "--trust-remote-code",
        "--cuda-graph-max-bs", "128", "--disable-custom-all-reduce",
    ]


def test_multi_node_speculative_attention_extra():
    argv = core.build_argv(options(
        nnodes=2, node_rank=1, dist_init_addr="10.0.0.1:5000", attention_backend="flashinfer",
        speculative={"algorithm": "EAGLE3", "draft_model_path": "/m/draft", "num_steps": 3, "eagle_topk": 1,
                     "num_draft_tokens": 4},
        extra_args=["--mem-fraction-static", "0.85"]))
    parsed = parse_args(argv[3:])
    assert (parsed.nnodes, parsed.node_rank, parsed.dist_init_addr) == (2, 1, "10.0.0.1:5000")
    assert parsed.attention_backend == "flashinfer"
    assert (parsed.speculative_algorithm, parsed.speculative_draft_model_path) == ("EAGLE3", "/m/draft")
    assert (parsed.speculative_num_steps, parsed.speculative_eagle_topk, parsed.speculative_num_draft_tokens) == (
        3, 1, 4)
    assert parsed.mem_fraction_static == 0.85


def test_single_node_passes_no_multi_node_flags():
    assert "--nnodes" not in core.build_argv(options(dist_init_addr="10.0.0.1:5000"))


def test_api_key_is_masked_by_the_shared_module_only():
    argv = core.build_argv(options(api_key="s3cr3t"))
    assert argv[-2:] == ["--api-key", "s3cr3t"]
    assert masked_argv(argv)[-2:] == ["--api-key", "********"]
    # One list of secret flags and one masking function, in _secrets: no copy here.
    assert not any(hasattr(core, name) for name in ("masked", "MASK_TEXT")) and core.SECRET_FLAGS is not None
    assert "SECRET_FLAGS = " not in Path(core.__file__).read_text()


def test_env_digest_ignores_order_and_sees_values():
    assert core.env_digest({"A": "1", "B": "2"}) == core.env_digest({"B": "2", "A": "1"})
    assert core.env_digest({"A": "1"}) != core.env_digest({"A": "2"})


def valid(tmp_path):
    (tmp_path / "model").mkdir()
    return options(python=sys.executable, model_path=str(tmp_path / "model"), log_path=str(tmp_path / "s.log"))


def test_valid_options_have_no_problem(tmp_path):
    assert core.check_options(valid(tmp_path)) == []


@pytest.mark.parametrize("change,problem", [
    (dict(python="/nonexistent/python"), "python=/nonexistent/python is missing, not executable"),
    (dict(python="python3"), "python=python3 is missing, not executable or not an absolute path"),
    (dict(model_path="/nonexistent/model"), "model_path=/nonexistent/model is not a directory on the host"),
    (dict(tensor_parallel_size=0), "tensor_parallel_size=0 must be a positive integer"),
    (dict(port=70000), "port=70000 is out of range (1-65535)"),
    (dict(nnodes=2, node_rank=2, dist_init_addr="h:1"), "node_rank=2 must be at least 0 and less than nnodes=2"),
    (dict(nnodes=2, node_rank=1, dist_init_addr="10.0.0.1"), "dist_init_addr='10.0.0.1' must be HOST:PORT"),
    (dict(speculative={"algorithm": "EAGLE3", "draft_model_path": None}), "speculative.draft_model_path is required"),
    (dict(speculative={"algorithm": "EAGLE3", "draft_model_path": "/nonexistent/draft"}),
     "speculative.draft_model_path=/nonexistent/draft has no config.json"),
    (dict(model_is_hub_id=True, speculative={"algorithm": "EAGLE3", "draft_model_path": "org/draft", "eagle_topk": 4}),
     "speculative.eagle_topk set without speculative.num_steps"),
])
def test_each_bad_option_is_named(tmp_path, change, problem):
    params = valid(tmp_path)
    params.update(change)
    problems = core.check_options(params)
    assert len(problems) == 1 and problems[0].startswith(problem)


def test_log_path_under_a_file_is_named(tmp_path):
    params = valid(tmp_path)
    (tmp_path / "file").write_text("")
    params["log_path"] = str(tmp_path / "file" / "dir" / "s.log")
    assert core.check_options(params) == ["log_path=%s: %s is not a writable directory" % (
        params["log_path"], tmp_path / "file")]


def test_missing_log_directory_is_no_problem_as_it_is_created(tmp_path):
    params = valid(tmp_path)
    params["log_path"] = str(tmp_path / "new" / "dir" / "s.log")
    assert core.check_options(params) == []


def test_hub_id_is_not_looked_for_on_disk(tmp_path):
    params = valid(tmp_path)
    params.update(model_path="moonshotai/Kimi-K2.5", model_is_hub_id=True)
    assert core.check_options(params) == []


def recorded(pid, argv, **changes):
    state = {"pid": pid, "start_time": core.process_start_time(pid), "argv": argv, "env_digest": "", "log_path": "/l",
             "offset": 0, "boot_id": core.boot_id()}
    state.update(changes)
    return state


def test_instance_recognises_its_process_by_start_time(tmp_path):
    instance = core.Instance(str(tmp_path / "state"), "sglang")
    child = subprocess.Popen(["sleep", "30"])
    try:
        state = recorded(child.pid, ["sleep", "30"])
        instance.save(state)
        assert (tmp_path / "state" / "sglang.pid").read_text() == "%d\n" % child.pid
        assert oct((tmp_path / "state" / "sglang.json").stat().st_mode & 0o777) == "0o600"
        assert oct((tmp_path / "state").stat().st_mode & 0o777) == "0o750"
        assert instance.running(instance.load())
        reused = dict(state, start_time=state["start_time"] - 1)  # same pid, another process
        assert not instance.running(reused)
        rebooted = dict(state, boot_id="another-boot")  # same pid and start time after a reboot
        assert not instance.running(rebooted)
    finally:
        child.kill()
        child.wait()
    assert not instance.running(instance.load())
    assert instance.forget() == ["sglang.pid", "sglang.json"]
    assert instance.load() is None
    assert sorted(os.listdir(str(tmp_path / "state"))) == []


def test_a_process_of_another_user_or_command_is_never_taken_for_ours(tmp_path):
    instance = core.Instance(str(tmp_path), "sglang")
    child = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(core.BadState, match="pid %d runs as uid %d, not as uid 4242" % (child.pid, os.getuid())):
            instance.running(recorded(child.pid, ["sleep", "30"]), uid=4242)
        with pytest.raises(core.BadState, match="runs 'sleep 30', not the recorded server's command line"):
            instance.running(recorded(child.pid, ["python", "-m", "sglang.launch_server"]))
    finally:
        child.kill()
        child.wait()


def test_a_retitled_sglang_process_is_still_ours(tmp_path):
    # A /proc of one process whose stat and status are this process's and whose command line is a title.
    own = tmp_path / str(os.getpid())
    own.mkdir()
    for name in ("stat", "status"):
        (own / name).write_text(Path("/proc/self/%s" % name).read_text())
    (own / "cmdline").write_bytes(b"sglang::main\0")
    state = recorded(os.getpid(), ["python", "-m", "sglang.launch_server"])
    state["start_time"] = core.process_start_time(os.getpid(), proc_root=str(tmp_path))
    assert core.Instance(str(tmp_path), "sglang").running(state, proc_root=str(tmp_path))


@pytest.mark.parametrize("content,problem", [
    ("{not json", "it is not JSON"),
    ("[]", "it holds no JSON object"),
    ('{"pid": 1, "start_time": 5, "argv": ["x"], "env_digest": "", "log_path": "/l", "offset": 0}',
     "pid 1 is not a server's"),
    ('{"pid": 0, "start_time": 5, "argv": ["x"], "env_digest": "", "log_path": "/l", "offset": 0}',
     "pid 0 is not a server's"),
    ('{"pid": "12", "start_time": 5, "argv": ["x"], "env_digest": "", "log_path": "/l", "offset": 0}',
     "pid is missing or not of the right type"),
])
def test_a_state_file_that_cannot_be_trusted_is_named(tmp_path, content, problem):
    (tmp_path / "sglang.json").write_text(content)
    with pytest.raises(core.BadState) as raised:
        core.Instance(str(tmp_path), "sglang").load()
    message = str(raised.value)
    assert message.startswith("The state file %s cannot be trusted: %s" % (tmp_path / "sglang.json", problem))
    assert "Nothing was signalled" in message and "remove %s" % (tmp_path / "sglang.json") in message


def test_a_state_file_that_is_a_link_is_not_read(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sglang.json").symlink_to(target)
    with pytest.raises(core.BadState, match="it cannot be opened as a file"):
        core.Instance(str(tmp_path / "state"), "sglang").load()


def test_saving_never_writes_through_a_link(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    target = tmp_path / "target"
    target.write_text("untouched")
    for name in ("sglang.json.tmp", "sglang.pid.tmp", "sglang.json", "sglang.pid"):
        (state_dir / name).symlink_to(target)
    child_state = recorded(os.getpid(), ["x"])
    core.Instance(str(state_dir), "sglang").save(child_state)
    assert target.read_text() == "untouched"
    assert not (state_dir / "sglang.json").is_symlink() and not (state_dir / "sglang.pid").is_symlink()
    assert sorted(name for name in os.listdir(str(state_dir)) if not (state_dir / name).is_symlink()) == [
        "sglang.json", "sglang.pid"]


def test_a_state_dir_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "real")
    with pytest.raises(core.InvalidOption, match="state_dir=%s is a symbolic link" % (tmp_path / "state")):
        core.Instance(str(tmp_path / "state"), "sglang").save(recorded(os.getpid(), ["x"]))
    assert os.listdir(str(tmp_path / "real")) == []
    params = options(state_dir=str(tmp_path / "state"))
    assert core.name_problems(params) == ["state_dir=%s is a symbolic link: point state_dir at a directory (root "
                                          "writes there, and never through a link)" % (tmp_path / "state")]


@pytest.mark.parametrize("name", ["kimi/k2", "../x", "..", "a..b", ".hidden", "", "x\n", "a@b", "50%", "a b",
                                  "x" * 65])
def test_bad_names_are_refused(name):
    problems = core.name_problems(options(name=name))
    assert problems and any(problem.startswith("name=%r must be" % name) for problem in problems)


@pytest.mark.parametrize("name", ["sglang", "kimi-k2.5_int4", "K2", "x" * 64])
def test_good_names_pass(name):
    assert core.name_problems(options(name=name)) == []


@pytest.mark.parametrize("change,variable", [
    (dict(extra_args=["--log-level", "info\nExecStartPre=/bin/touch /tmp/pwned"]), "extra_args[1]"),
    (dict(env={"NCCL_DEBUG": "INFO\rX"}), "env.NCCL_DEBUG"),
    (dict(env={"A\nB": "1"}), "env (a name)"),
    (dict(secret_env={"HF_TOKEN": "t\x00"}), "secret_env.HF_TOKEN"),
    (dict(api_key="k\n"), "api_key"),
    (dict(log_path="/var/log/s\n.log"), "log_path"),
    (dict(model_path="/m\n"), "model_path"),
    (dict(python="/p\x1b"), "python"),
    (dict(host="127.0.0.1\n"), "host"),
    (dict(dist_init_addr="h:1\n"), "dist_init_addr"),
    (dict(attention_backend="fa3\u2028"), "attention_backend"),
    (dict(speculative={"algorithm": "EAGLE3\n", "draft_model_path": "/d"}), "speculative.algorithm"),
    (dict(speculative={"algorithm": "EAGLE3", "draft_model_path": "/d\n"}), "speculative.draft_model_path"),
    (dict(systemd_unit_dir="/etc/systemd/system\n"), "systemd_unit_dir"),
    (dict(secret_flags=["--token\n"]), "secret_flags[0]"),
])
def test_control_characters_are_refused_naming_the_option(change, variable):
    problems = core.text_problems(options(**change))
    assert len(problems) == 1 and problems[0].startswith(variable + ": the value holds the control character")


def test_control_characters_in_name_and_state_dir_are_refused():
    problems = core.name_problems(options(name="a\nb", state_dir="/var/lib/x\n"))
    assert [problem.split(":")[0] for problem in problems[:2]] == ["name", "state_dir"]


def test_environment_numbers_become_text_and_booleans_are_refused():
    assert core.normalized_environment({"SGLANG_STANDIN_STEP": 0.05, "NCCL_DEBUG": 1, "A": "x"}, "env") == (
        {"SGLANG_STANDIN_STEP": "0.05", "NCCL_DEBUG": "1", "A": "x"}, [])
    values, problems = core.normalized_environment({"FLAG": True, "NONE": None, "1X": "v", "A-B": "v"}, "env")
    assert values == {}
    assert problems == [
        "env: '1X' is not an environment variable name (letters, digits and _, not starting with a digit)",
        "env: 'A-B' is not an environment variable name (letters, digits and _, not starting with a digit)",
        "env.FLAG=True is not text or a number: quote the value the server should see, for example '1' or 'true'",
        "env.NONE=None is not text or a number: quote the value the server should see, for example '1' or 'true'",
    ]


def test_secret_flags_must_be_long_options():
    assert core.secret_flag_problems(["--hf-token", "--x"]) == []
    assert core.secret_flag_problems(["token", "--a b", "--x\n"]) == [
        "secret_flags: %r is not a long option such as --admin-api-key" % flag for flag in ("token", "--a b", "--x\n")]


@pytest.fixture
def odd_paths(tmp_path):
    os.mkfifo(str(tmp_path / "fifo"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "target").write_text("untouched")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    return tmp_path


@pytest.mark.parametrize("name,kind", [("fifo", "FIFO"), ("dir", "directory"), ("link", "symbolic link")])
def test_only_a_regular_file_is_a_log(odd_paths, name, kind):
    path = str(odd_paths / name)
    assert core.log_path_problem(path) == ("log_path=%s is a %s: only a regular file (or a path that does not exist "
                                           "yet) is accepted as the server's log" % (path, kind))
    params = valid(odd_paths)
    params["log_path"] = path
    assert core.log_path_problem(path) in core.check_options(params)
    assert core.log_path_problem("/dev/null").startswith("log_path=/dev/null is a device")
    assert core.log_path_problem(str(odd_paths / "new.log")) is None


@pytest.mark.parametrize("name", ["fifo", "dir", "link"])
def test_open_log_never_blocks_nor_follows_a_link(odd_paths, name):
    outcome = []

    def open_it():
        try:
            core.open_log(str(odd_paths / name))
        except core.InvalidOption as exc:
            outcome.append(str(exc))
    opener = threading.Thread(target=open_it, daemon=True)
    opener.start()
    opener.join(5)
    if opener.is_alive():  # unblock the thread: a reader on the FIFO lets the open return
        os.close(os.open(str(odd_paths / "fifo"), os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("open_log blocked on %s" % name)
    assert outcome and outcome[0].startswith("log_path=%s is a " % (odd_paths / name))
    assert (odd_paths / "target").read_text() == "untouched"


def test_log_is_created_0640_and_an_existing_mode_is_kept(tmp_path):
    old_umask = os.umask(0)
    try:
        descriptor = core.open_log(str(tmp_path / "logs" / "new.log"))
        os.close(descriptor)
        existing = tmp_path / "old.log"
        existing.write_text("x")
        existing.chmod(0o600)
        assert core.log_offset(str(existing)) == 1
        world_readable = tmp_path / "earlier-version.log"
        world_readable.write_text("")
        world_readable.chmod(0o664)
        os.close(core.open_log(str(world_readable)))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "logs" / "new.log").stat().st_mode) == 0o640
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    assert stat.S_IMODE(world_readable.stat().st_mode) == 0o660


def test_open_log_leaves_a_blocking_descriptor(tmp_path):
    import fcntl
    descriptor = core.open_log(str(tmp_path / "s.log"))
    try:
        assert not fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_NONBLOCK
    finally:
        os.close(descriptor)


def test_process_start_time_is_field_22_of_stat():
    # A comm with spaces and parentheses, and a start time computed independently by ps from the boot time.
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; open('/proc/self/comm', 'w').write('a) b (c'); "
                              "sys.stdout.write('1\\n'); sys.stdout.flush(); time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        assert Path("/proc/%d/comm" % child.pid).read_text().strip() == "a) b (c"
        lstart = subprocess.run(["ps", "-o", "lstart=", "-p", str(child.pid)], capture_output=True, text=True,
                                check=True, env=dict(os.environ, TZ="UTC", LC_ALL="C")).stdout.strip()
        started = calendar.timegm(time.strptime(lstart, "%a %b %d %H:%M:%S %Y"))
        boot = [int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")][0]
        ticks = core.process_start_time(child.pid)
        assert abs(boot + ticks / os.sysconf("SC_CLK_TCK") - started) <= 1.0
    finally:
        child.kill()
        child.wait()


def fake_stat(pid, start_time, comm="python3"):
    """A /proc/<pid>/stat line as the kernel writes it: itrealvalue (field 21) is always 0, starttime is field 22."""
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194560", "100", "0", "0", "0", "5", "2", "0", "0", "20",
              "0", "1", "0", str(start_time), "12345678", "2048"] + ["0"] * 30
    return "%d (%s) %s\n" % (pid, comm, " ".join(fields))


def test_a_reused_pid_with_another_start_time_is_not_our_server(tmp_path):
    # The start time is read from the kernel's own line, not invented by the test: a process that gets the server's
    # pid later has another field 22, and must not be taken for the server (stop would signal it).
    pid = 4321
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "status").write_text("Name:\tpython3\nUid:\t%d\t%d\t%d\t%d\n" % ((os.getuid(),) * 4))
    (tmp_path / str(pid) / "cmdline").write_bytes(b"sleep\x0030\x00")
    (tmp_path / str(pid) / "stat").write_text(fake_stat(pid, 8150432, comm="a) b (c"))
    assert core.process_start_time(pid, proc_root=str(tmp_path)) == 8150432
    instance = core.Instance(str(tmp_path / "state"), "sglang")
    state = {"pid": pid, "start_time": 8150432, "argv": ["sleep", "30"], "env_digest": "", "log_path": "/l",
             "offset": 0, "boot_id": "this-boot", "uid": os.getuid()}
    assert instance.running(state, proc_root=str(tmp_path), boot="this-boot")
    (tmp_path / str(pid) / "stat").write_text(fake_stat(pid, 9260001))
    assert not instance.running(state, proc_root=str(tmp_path), boot="this-boot")


def test_group_members_and_terminate(tmp_path):
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    deadline = time.monotonic() + 5
    while len(core.group_members(leader.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = core.group_members(leader.pid)
    assert len(members) == 3 and leader.pid in members
    assert core.terminate(members, grace=5, signal_group=leader.pid) == []
    leader.wait()
    assert core.group_members(leader.pid) == []


def test_terminate_escalates_to_sigkill():
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE)
    stubborn.stdout.readline()
    assert core.terminate([stubborn.pid], grace=0.5) == [stubborn.pid]
    assert stubborn.wait(5) == -9


def test_device_holders_finds_who_has_the_device_open(tmp_path):
    device = tmp_path / "nvidia0"
    device.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print(1, flush=True); "
                               "time.sleep(60)", str(device)], stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()
        assert core.device_holders([str(tmp_path / "nvidia*")]) == {holder.pid: [str(device)]}
        assert core.device_holders([str(tmp_path / "nvidia*")], exclude=(holder.pid,)) == {}
    finally:
        holder.kill()
        holder.wait()


def test_wait_gpu_release():
    answers = [{10, 11}, {11}, set()]
    clock = [0.0]
    assert core.wait_gpu_release([10], timeout=5, query=lambda: answers.pop(0), sleep=lambda s: None,
                                 clock=lambda: clock[0]) is True
    assert core.wait_gpu_release([10], timeout=5, query=lambda: None) is None
    stuck = [{10}] * 3
    times = iter([0, 1, 6])
    assert core.wait_gpu_release([10], timeout=5, query=lambda: stuck.pop(0), sleep=lambda s: None,
                                 clock=lambda: next(times)) is False


def test_gpu_memory_pids_without_nvidia_smi():
    def missing(*args, **kwargs):
        raise OSError(2, "No such file or directory: nvidia-smi")
    assert core.gpu_memory_pids(run=missing) is None


def test_gpu_memory_pids_parses_the_query():
    completed = subprocess.CompletedProcess([], 0, stdout="1234\n5678\n", stderr="")
    assert core.gpu_memory_pids(run=lambda *a, **k: completed) == {1234, 5678}


def test_bind_state():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert core.bind_state("127.0.0.1", port) == "in_use"
    assert core.bind_state("127.0.0.1", port) == "free"


def test_a_host_that_does_not_resolve_or_is_not_here_is_named():
    with pytest.raises(core.InvalidOption, match=r"^host=no-such-host.invalid cannot be resolved \("):
        core.bind_state("no-such-host.invalid", 30000)
    with pytest.raises(core.InvalidOption, match=r"^host=192.0.2.1 port=30000 cannot be bound on this host"):
        core.bind_state("192.0.2.1", 30000)  # TEST-NET-1, an address of no host here


def test_systemd_unit_runs_the_same_command_and_keeps_secrets_out_of_it():
    argv = ["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/shared/kimi k2",
            "--api-key", "s3cr$t", "--served-model-name", "50%"]
    text, secrets = core.systemd_unit("sglang", argv, {"SGLANG_STANDIN_STEP": "0.05", "NOTE": "a b"},
                                      "/var/log/sglang/sglang.log", "/var/lib/blackwell-gpu-node/sglang.secret.env",
                                      SERVICE)
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_start == ('ExecStart=/home/sglang/ml-env/bin/python -m sglang.launch_server --model-path '
                          '"/shared/kimi k2" --api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_6} --served-model-name "50%%"')
    assert "s3cr" not in text
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_6": "s3cr$t"}
    assert 'Environment="NOTE=a b"' in text and "Environment=SGLANG_STANDIN_STEP=0.05" in text
    assert "StandardOutput=append:/var/log/sglang/sglang.log" in text and "TimeoutStopSec=30" in text
    assert "EnvironmentFile=-/var/lib/blackwell-gpu-node/sglang.secret.env" in text
    assert core.environment_file(dict(secrets, TOKEN='a"b')) == 'BLACKWELL_GPU_NODE_SECRET_ARG_6="s3cr\\$t"\nTOKEN="a\\"b"\n'


def test_secret_flags_in_both_spellings_never_reach_the_unit():
    argv = ["/venv/bin/python", "-m", "sglang.launch_server", "--api-key=k1", "--admin-api-key", "k2",
            "--hf-token=k3", "--served-model-name", "m"]
    text, secrets = core.systemd_unit("sglang", argv, {}, "/var/log/s.log", "/state/sglang.secret.env", SERVICE,
                                      core.SECRET_FLAGS + ("--hf-token",))
    assert "k1" not in text and "k2" not in text and "k3" not in text
    assert ("--api-key=${BLACKWELL_GPU_NODE_SECRET_ARG_3} --admin-api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_5} "
            "--hf-token=${BLACKWELL_GPU_NODE_SECRET_ARG_6} --served-model-name m") in text
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_3": "k1", "BLACKWELL_GPU_NODE_SECRET_ARG_5": "k2",
                       "BLACKWELL_GPU_NODE_SECRET_ARG_6": "k3"}


def test_environment_keeps_dollars_and_paths_escape_specifiers():
    text, _secrets = core.systemd_unit("sglang", ["/p", "$x"], {"NOTE": "costs $5 at 50%"}, "/var/log/50%/s.log",
                                       "/state/%h/sglang.secret.env", SERVICE)
    # Environment= expands no variables, so `$` stays single there; ExecStart= does, so it is doubled.
    assert 'Environment="NOTE=costs $5 at 50%%"' in text and 'ExecStart=/p "$$x"' in text
    assert "StandardOutput=append:/var/log/50%%/s.log" in text and "EnvironmentFile=-/state/%%h/sglang.secret.env" in text


def test_environment_file_escapes_what_systemd_unescapes_in_double_quotes():
    # systemd.exec, EnvironmentFile=: in double quotes a backslash keeps any of \\ " ` $.
    assert core.environment_file({"K": 'a\\b"c`d$e f'}) == 'K="a\\\\b\\"c\\`d\\$e f"\n'


def test_plain_words_are_matched_whole():
    # match() with ^...$ took a word ending in a newline for plain and wrote it unquoted.
    assert core.systemd_quote("--tp\n") == '"--tp\n"'


@pytest.mark.parametrize("word,quoted", [("--tp", "--tp"), ("/a/b.c", "/a/b.c"), ("a b", '"a b"'), ("$HOME", '"$$HOME"'),
                                         ('say "hi"', '"say \\"hi\\""'), ("back\\slash", '"back\\\\slash"')])
def test_systemd_quote(word, quoted):
    assert core.systemd_quote(word) == quoted


def test_forget_removes_the_secret_environment_file_too(tmp_path):
    instance = core.Instance(str(tmp_path / "state"), "sglang")
    instance.write_secret_env(core.environment_file({"HF_TOKEN": "t"}))
    assert stat.S_IMODE((tmp_path / "state" / "sglang.secret.env").stat().st_mode) == 0o600
    assert instance.forget() == ["sglang.secret.env"]
    assert os.listdir(str(tmp_path / "state")) == []


# --- the service user, systemd as the identity, bounded crash loops, the log's rotation (issue 13) ---

def test_auto_picks_systemd_only_where_it_is_pid_1(tmp_path):
    assert core.resolve_manager("auto", str(tmp_path))[0] == "systemd"
    manager, why = core.resolve_manager("auto", str(tmp_path / "absent"))
    assert manager == "module" and "systemd is not PID 1" in why
    assert core.resolve_manager("module", str(tmp_path)) == ("module", "manager=module was asked for")


def test_a_missing_user_is_named_with_the_role_that_creates_it():
    account, _log_gid, problems = core.service_account("no-such-user-here")
    assert account is None
    assert problems == ["user=no-such-user-here does not exist on this host (sglang_server_user in the role): create "
                        "it first, with the role blackwell.gpu_node.service_user, or name an existing user"]
    assert "group=g is given without user" in core.service_account(None, "g")[2][0]
    assert "log_group=no-such-group-here does not exist" in core.service_account(None, None, "no-such-group-here")[2][0]


def test_the_account_has_the_users_home_group_and_supplementary_groups():
    account, log_gid, problems = core.service_account("nobody", None, "root")
    assert problems == [] and log_gid == 0
    assert account["uid"] == 65534 and account["user"] == "nobody" and account["home"] == "/nonexistent"
    assert account["gid"] not in account["groups"]
    assert core.service_account(None) == (None, None, [])


def test_home_is_the_users_unless_env_says_otherwise():
    account = {"user": "sglang", "home": "/var/lib/sglang"}
    assert core.server_environment({"HOME": "/root"}, {}, account)["HOME"] == "/var/lib/sglang"
    assert core.server_environment({"HOME": "/root"}, {"HOME": "/srv/cache"}, account)["HOME"] == "/srv/cache"
    assert core.server_environment({"HOME": "/root"}, {}, None)["HOME"] == "/root"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_launch_drops_to_the_user_with_umask_027_and_keeps_the_log_roots(tmp_path):
    tmp_path.chmod(0o755)
    log = tmp_path / "server.log"
    account = {"user": "nobody", "uid": 65534, "gid": 65534, "groups": [], "home": "/nonexistent"}
    script = 'echo "$(id -u) $(id -G) $(umask) $HOME $(pwd)"'
    process, offset, _start = core.launch(["/bin/sh", "-c", script], {}, str(log), account, log_gid=0)
    process.wait()
    assert offset == 0
    assert log.read_text().split() == ["65534", "65534", "0027", "/nonexistent", "/"]
    info = log.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o640)


def test_log_group_is_set_on_the_open_file_never_through_a_link(tmp_path):
    gid = 1  # daemon: any group but the one the file would get
    descriptor = core.open_log(str(tmp_path / "s.log"), gid)
    os.close(descriptor)
    assert (tmp_path / "s.log").stat().st_gid == gid
    (tmp_path / "target").write_text("")
    os.symlink(str(tmp_path / "target"), str(tmp_path / "link.log"))
    with pytest.raises(core.InvalidOption, match="is a symbolic link"):
        core.open_log(str(tmp_path / "link.log"), gid)


def test_a_state_of_the_previous_version_is_still_recognised(tmp_path):
    # ce123ef wrote argv, env_digest, log_path, manager, offset, pid, start_time, started_at: no boot id, no uid.
    child = subprocess.Popen(["sleep", "30"])
    while core.process_argv(child.pid) != ["sleep", "30"]:
        time.sleep(0.01)
    try:
        legacy = {"pid": child.pid, "start_time": core.process_start_time(child.pid), "argv": ["sleep", "30"],
                  "env_digest": "", "log_path": "/l", "offset": 0, "manager": "module", "started_at": 1.0}
        assert core.Instance(str(tmp_path), "sglang").running(legacy)
        with pytest.raises(core.BadState, match="not as uid 4242"):
            core.Instance(str(tmp_path), "sglang").running(dict(legacy, uid=4242))
    finally:
        child.kill()
        child.wait()


def unit_lines(**changes):
    text, _secrets = core.systemd_unit("sglang", ["/venv/bin/python"], {}, "/var/log/s.log", "/state/s.env",
                                       dict(SERVICE, **changes))
    return text.splitlines()


def test_the_unit_runs_as_the_user_hardened_with_what_cuda_allows():
    lines = unit_lines()
    service = lines[lines.index("[Service]"):lines.index("[Install]")]
    for directive in ("User=sglang", "Group=sglang", "UMask=0027", "NoNewPrivileges=yes", "ProtectSystem=full",
                      "PrivateTmp=yes", "ProtectKernelTunables=yes", "ProtectKernelModules=yes",
                      "ProtectControlGroups=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes",
                      "RestrictRealtime=yes", "Restart=on-failure", "RestartSec=10"):
        assert directive in service
    # These break CUDA (device nodes, JIT) or the layouts in use; the docs say why.
    for left_out in ("PrivateDevices", "MemoryDenyWriteExecute", "ProtectHome", "DevicePolicy", "SystemCallFilter"):
        assert not [line for line in lines if line.startswith(left_out + "=")]
    assert not [line for line in unit_lines(user=None, group=None) if line.startswith(("User=", "Group="))]


def test_crash_loops_are_bounded_in_the_unit_section():
    lines = unit_lines(restart_sec=2, start_limit_interval=300, start_limit_burst=3)
    unit = lines[lines.index("[Unit]"):lines.index("[Service]")]
    assert "StartLimitIntervalSec=300" in unit and "StartLimitBurst=3" in unit and "RestartSec=2" in lines


def test_unit_status_reads_one_systemctl_show():
    status = core.unit_status("MainPID=4242\nActiveState=active\nSubState=running\nNRestarts=3\n"
                              "UnitFileState=enabled\nLoadState=loaded\nExecMainStartTimestampMonotonic=12345\n")
    assert status == {"pid": 4242, "active_state": "active", "sub_state": "running", "restarts": 3, "enabled": True,
                      "loaded": True, "started_monotonic": 12345, "running": True}
    restarting = core.unit_status("MainPID=0\nActiveState=activating\nSubState=auto-restart\nNRestarts=1\n"
                                  "UnitFileState=enabled\n")
    assert restarting["running"] is False and restarting["restarts"] == 1
    failed = core.unit_status("MainPID=0\nActiveState=failed\nUnitFileState=disabled\nLoadState=not-found\n")
    assert failed["running"] is False and failed["enabled"] is False and failed["loaded"] is False


@pytest.mark.parametrize("path", ["/var/log/a b.log", '/var/log/"q".log', "/var/log/*.log", "/var/log/a?.log",
                                  "/var/log/[x].log", "/var/log/{x}.log", "/var/log/a\\b.log"])
def test_a_log_path_that_logrotate_would_misread_is_named(path):
    assert core.logrotate_problem(path).startswith("log_path=%s holds " % path)


def test_logrotate_copies_and_truncates_the_quoted_log():
    assert core.logrotate_problem("/var/log/sglang/sglang-1.log") is None
    text = core.logrotate_config("/var/log/sglang/sglang.log", 4)
    assert text.splitlines()[1] == '"/var/log/sglang/sglang.log" {'
    assert "    copytruncate" in text and "    rotate 4" in text and "    create" not in text


def test_foreign_writable_lists_what_others_can_write_without_following_links(tmp_path):
    venv = tmp_path / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "ok.py").write_text("")
    (venv / "lib" / "ok.py").chmod(0o644)
    (venv / "lib" / "planted.pth").write_text("")
    (venv / "lib" / "planted.pth").chmod(0o666)
    (venv / "lib").chmod(0o775)
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    os.symlink(str(outside), str(venv / "link"))
    owner, problems, complete = core.foreign_writable(str(venv))
    assert owner == os.getuid() and complete
    assert problems == ["%s is writable by its group or others (mode 0775)" % (venv / "lib"),
                        "%s is writable by its group or others (mode 0666)" % (venv / "lib" / "planted.pth")]
    assert core.foreign_writable(str(venv), limit=1)[1:] == (problems[:1], False)


def test_missing_groups_name_their_option_and_role_variable():
    assert core.service_account("nobody", "no-such-group-here")[2] == [
        "group=no-such-group-here does not exist on this host (sglang_server_group in the role): create it, or "
        "leave it unset for the user's own group"]
    assert core.service_account(None, None, "no-such-group-here")[2] == [
        "log_group=no-such-group-here does not exist on this host (sglang_server_log_group in the role): create "
        "the group, or leave it unset"]
    account, _log_gid, problems = core.service_account("nobody", "root")
    assert problems == [] and (account["gid"], account["group"]) == (0, "root")


def launch_state(pid, offset):
    return dict(pid=pid, start_time=1000 + pid, offset=offset, log_path="/var/log/sglang.log", started_at=1.5,
                boot_id="b", argv=["python"], env_digest="d")


def test_the_launch_history_keeps_the_last_launches_newest_first_and_survives_forget(tmp_path):
    """diagnose classifies an earlier launch's log from its offset: the next start must not overwrite it,
    nor a stop or the cleanup of a dead server remove it."""
    instance = core.Instance(str(tmp_path / "state"), "sglang")
    for number in range(core.LAUNCH_HISTORY + 2):
        instance.save(launch_state(100 + number, 10 * number))
        instance.record_launch(launch_state(100 + number, 10 * number))
    instance.forget()
    history = instance.launches()
    assert [entry["pid"] for entry in history] == [106, 105, 104, 103, 102]
    assert history[0] == dict(pid=106, start_time=1106, offset=60, log_path="/var/log/sglang.log", started_at=1.5,
                              boot_id="b")
    assert stat.S_IMODE(os.stat(instance.launches_path).st_mode) == 0o600


@pytest.mark.parametrize("content", ["not json", "{}", '[{"pid": true}]', '[{"pid": 5, "start_time": 1, '
                                     '"offset": -1, "log_path": "/l"}]'])
def test_a_launch_history_that_is_not_one_is_left_out(tmp_path, content):
    (tmp_path / "sglang.launches.json").write_text(content)
    assert core.Instance(str(tmp_path), "sglang").launches() == []


def test_enable_metrics_adds_the_flag_sglang_knows_and_only_when_asked():
    assert "--enable-metrics" not in core.build_argv(options())
    argv = core.build_argv(options(enable_metrics=True))
    assert argv.count("--enable-metrics") == 1
    assert parse_args(argv[3:]).enable_metrics is True
