import calendar
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import accounts as common_accounts
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import detached as common_detached
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import errors as common_errors
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import files as common_files
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import processes as common_processes
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import secrets as common_secrets
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import systemd as common_systemd
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import instance as sglang_instance
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import log as sglang_log
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import options as sglang_options
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import processes as sglang_processes
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import runs_from as sglang_runs_from
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import service_files as sglang_service_files
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import masked_argv

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
        systemd_unit_dir="/etc/systemd/system", entrypoint="launch_server",
    )
    params.update(changes)
    return params


SERVICE = dict(stop_timeout=30, restart_sec=10, start_limit_interval=600, start_limit_burst=5, user="sglang",
               group="sglang")

REFERENCE_OPTIONS = options(tensor_parallel_size=8, trust_remote_code=True, cuda_graph_max_bs=128,
                            disable_custom_all_reduce=True)


def test_reference_inputs_give_the_reference_command():
    argv = sglang_options.build_argv(REFERENCE_OPTIONS)
    assert argv[:3] == ["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server"]
    assert vars(parse_args(argv[3:])) == vars(parse_args(REFERENCE[3:]))


def test_full_flag_names_are_emitted():
    argv = sglang_options.build_argv(REFERENCE_OPTIONS)
    assert "--tensor-parallel-size" in argv and "--tp" not in argv
    assert argv == [
        "/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/shared/kimi-k2.5-int4",
        "--tensor-parallel-size", "8", "--host", "127.0.0.1", "--port", "30000", "--trust-remote-code",
        "--cuda-graph-max-bs", "128", "--disable-custom-all-reduce",
    ]


@pytest.mark.parametrize("entrypoint, start", [
    ("launch_server", ["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server"]),
    # SGLang's console script, run by the virtualenv's interpreter: no `python -m` runs `sglang serve`.
    ("serve", ["/home/sglang/ml-env/bin/python", "/home/sglang/ml-env/bin/sglang", "serve"]),
])
def test_each_entrypoint_starts_the_same_flags_its_own_way(entrypoint, start):
    argv = sglang_options.build_argv(dict(REFERENCE_OPTIONS, entrypoint=entrypoint))
    assert argv[:3] == start
    assert argv[3:] == sglang_options.build_argv(REFERENCE_OPTIONS)[3:]
    assert vars(parse_args(argv[3:])) == vars(parse_args(REFERENCE[3:]))


def standin_venv(root):
    """A virtualenv as pip leaves the stand-in's wheel: bin/python (this interpreter) and the console script
    bin/sglang as pip writes it, but for its first line, which names an interpreter that is not there (a script
    written by another pip, or a virtualenv moved since). Returns bin/python."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    (root / "bin" / "sglang").write_text(
        "#!/nonexistent/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom sglang.cli.main import main\n"
        "if __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(main())\n")
    (root / "bin" / "sglang").chmod(0o755)
    return str(root / "bin" / "python")


def test_serve_needs_sglangs_console_script_beside_the_interpreter(tmp_path):
    params = dict(valid(tmp_path), python=standin_venv(tmp_path / "venv"), entrypoint="serve")
    assert sglang_options.check_options(params) == []
    (tmp_path / "venv" / "bin" / "sglang").unlink()
    assert sglang_options.check_options(params) == [
        "entrypoint=serve, but %s/venv/bin/sglang is missing: the SGLang release beside python=%s/venv/bin/python has "
        "no `sglang serve`; install the release of the stack profile there (role blackwell.gpu_node.ml_stack), or set "
        "entrypoint=launch_server (sglang_server_entrypoint in the role)" % (tmp_path, tmp_path)]
    assert sglang_options.check_options(dict(params, entrypoint="launch_server")) == []
    # A missing interpreter is the one problem: the script beside it is not looked for.
    assert sglang_options.check_options(dict(params, python="/nonexistent/bin/python")) == [
        "python=/nonexistent/bin/python is missing, not executable or not an absolute path: point it at the "
        "virtualenv's bin/python"]


@pytest.mark.parametrize("entrypoint", ["launch_server", "serve"])
def test_the_stand_in_started_by_either_entrypoint_serves_and_is_recognised_by_its_command_line(tmp_path, entrypoint):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = sglang_options.build_argv(options(python=standin_venv(tmp_path / "venv"), port=port, entrypoint=entrypoint))
    log = tmp_path / "s.log"
    environment = {"PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_STEP": "0.01"}
    process, _offset, _start = common_detached.launch(argv, environment, str(log))
    try:
        deadline = time.monotonic() + 20
        while "The server is fired up and ready to roll!" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        # The process's own command line is the recorded argv, word for word: the server is known as ours.
        assert common_processes.process_argv(process.pid) == argv
        assert sglang_instance.Instance(str(tmp_path / "state"), "sglang").running(recorded(process.pid, argv))
    finally:
        os.killpg(process.pid, 9)
        process.wait()


@pytest.mark.parametrize("entrypoint, prog", [("launch_server", "launch_server.py"), ("serve", "sglang")])
def test_the_stand_in_refuses_an_unknown_flag_in_sglang_0_5_9s_words_under_either_entrypoint(
        tmp_path, entrypoint, prog):
    argv = sglang_options.build_argv(options(python=standin_venv(tmp_path / "venv"), entrypoint=entrypoint,
                                             extra_args=["--reasoning_parser", "kimi_k2"]))
    refused = subprocess.run(argv, env=dict(os.environ, PYTHONPATH=str(STANDIN)), capture_output=True, text=True,
                             timeout=60, check=False)
    line = refused.stderr.splitlines()[-1]
    assert (refused.returncode, line) == (2, "%s: error: unrecognized arguments: --reasoning_parser kimi_k2" % prog)
    assert sglang_log.diagnose(line)["id"] == "invalid_argument"


def test_multi_node_speculative_attention_extra():
    argv = sglang_options.build_argv(options(
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
    assert "--nnodes" not in sglang_options.build_argv(options(dist_init_addr="10.0.0.1:5000"))


def test_api_key_is_masked_by_the_shared_module_only():
    argv = sglang_options.build_argv(options(api_key="s3cr3t"))
    assert argv[-2:] == ["--api-key", "s3cr3t"]
    assert masked_argv(argv)[-2:] == ["--api-key", "********"]
    # One list of secret flags and one masking function, in _common/secrets.py: no copy here.
    for core in (sglang_options, sglang_service_files, sglang_instance):
        assert not any(hasattr(core, name) for name in ("masked", "MASK_TEXT")) and common_secrets.SECRET_FLAGS is not None
        assert "SECRET_FLAGS = " not in Path(core.__file__).read_text()


def test_env_digest_ignores_order_and_sees_values():
    assert sglang_options.env_digest({"A": "1", "B": "2"}) == sglang_options.env_digest({"B": "2", "A": "1"})
    assert sglang_options.env_digest({"A": "1"}) != sglang_options.env_digest({"A": "2"})


def valid(tmp_path):
    (tmp_path / "model").mkdir()
    return options(python=sys.executable, model_path=str(tmp_path / "model"), log_path=str(tmp_path / "s.log"))


def test_valid_options_have_no_problem(tmp_path):
    assert sglang_options.check_options(valid(tmp_path)) == []


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
    problems = sglang_options.check_options(params)
    assert len(problems) == 1 and problems[0].startswith(problem)


def test_log_path_under_a_file_is_named(tmp_path):
    params = valid(tmp_path)
    (tmp_path / "file").write_text("")
    params["log_path"] = str(tmp_path / "file" / "dir" / "s.log")
    assert sglang_options.check_options(params) == ["log_path=%s: %s is not a writable directory" % (
        params["log_path"], tmp_path / "file")]


def test_missing_log_directory_is_no_problem_as_it_is_created(tmp_path):
    params = valid(tmp_path)
    params["log_path"] = str(tmp_path / "new" / "dir" / "s.log")
    assert sglang_options.check_options(params) == []


def test_a_log_directory_another_user_can_write_is_named_before_anything_starts(tmp_path):
    params = valid(tmp_path)
    (tmp_path / "theirs").mkdir()
    os.chown(str(tmp_path / "theirs"), 65534, 65534)
    params["log_path"] = str(tmp_path / "theirs" / "new" / "s.log")
    assert sglang_options.check_options(params) == ["log_path=%s: %s it belongs to nobody, not to root, so another "
                                                    "user could replace what root keeps in it. Make it root's and "
                                                    "writable by root alone (chown root: %s; chmod go-w %s)" % (
                                                        tmp_path / "theirs", tmp_path / "theirs", tmp_path / "theirs",
                                                        tmp_path / "theirs")]


def test_hub_id_is_not_looked_for_on_disk(tmp_path):
    params = valid(tmp_path)
    params.update(model_path="moonshotai/Kimi-K2.5", model_is_hub_id=True)
    assert sglang_options.check_options(params) == []


def recorded(pid, argv, **changes):
    state = {"pid": pid, "start_time": common_processes.process_start_time(pid), "argv": argv, "env_digest": "", "log_path": "/l",
             "offset": 0, "boot_id": common_processes.boot_id()}
    state.update(changes)
    return state


def sleeping():
    """A `sleep 30` child, returned once it runs sleep: until its exec, /proc shows the forked Python's command
    line, and a test that compares command lines would fail now and then on a busy machine."""
    started = subprocess.Popen(["sleep", "30"])
    deadline = time.monotonic() + 10
    while common_processes.process_argv(started.pid) != ["sleep", "30"] and time.monotonic() < deadline:
        time.sleep(0.01)
    return started


def test_instance_recognises_its_process_by_start_time(tmp_path):
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    child = sleeping()
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
    instance = sglang_instance.Instance(str(tmp_path), "sglang")
    child = sleeping()
    try:
        with pytest.raises(sglang_instance.BadState, match="pid %d runs as uid %d, not as uid 4242" % (child.pid, os.getuid())):
            instance.running(recorded(child.pid, ["sleep", "30"]), uid=4242)
        with pytest.raises(sglang_instance.BadState, match="runs 'sleep 30', not the recorded server's command line"):
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
    state["start_time"] = common_processes.process_start_time(os.getpid(), proc_root=str(tmp_path))
    assert sglang_instance.Instance(str(tmp_path), "sglang").running(state, proc_root=str(tmp_path))


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
    with pytest.raises(sglang_instance.BadState) as raised:
        sglang_instance.Instance(str(tmp_path), "sglang").load()
    message = str(raised.value)
    assert message.startswith("The state file %s cannot be trusted: %s" % (tmp_path / "sglang.json", problem))
    assert "Nothing was signalled" in message and "remove %s" % (tmp_path / "sglang.json") in message


def test_a_state_file_that_is_a_link_is_not_read(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sglang.json").symlink_to(target)
    with pytest.raises(sglang_instance.BadState, match="it is not what sglang_server writes there: sglang.json is a "
                                                       "symbolic link"):
        sglang_instance.Instance(str(tmp_path / "state"), "sglang").load()


def test_saving_never_writes_through_a_link(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    target = tmp_path / "target"
    target.write_text("untouched")
    for name in ("sglang.json.tmp", "sglang.pid.tmp", "sglang.json", "sglang.pid"):
        (state_dir / name).symlink_to(target)
    child_state = recorded(os.getpid(), ["x"])
    sglang_instance.Instance(str(state_dir), "sglang").save(child_state)
    assert target.read_text() == "untouched"
    assert not (state_dir / "sglang.json").is_symlink() and not (state_dir / "sglang.pid").is_symlink()
    assert sorted(name for name in os.listdir(str(state_dir)) if not (state_dir / name).is_symlink()) == [
        "sglang.json", "sglang.pid"]


def test_a_state_dir_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "real")
    with pytest.raises(common_errors.InvalidOption, match="state_dir=%s: %s is a symbolic link, not a directory" % (
            tmp_path / "state", tmp_path / "state")):
        sglang_instance.Instance(str(tmp_path / "state"), "sglang").save(recorded(os.getpid(), ["x"]))
    assert os.listdir(str(tmp_path / "real")) == []
    params = options(state_dir=str(tmp_path / "state"))
    assert sglang_options.name_problems(params) == ["state_dir=%s is a symbolic link: point state_dir at a directory (root "
                                                    "writes there, and never through a link)" % (tmp_path / "state")]


@pytest.mark.parametrize("name", ["kimi/k2", "../x", "..", "a..b", ".hidden", "", "x\n", "a@b", "50%", "a b",
                                  "x" * 65])
def test_bad_names_are_refused(name):
    problems = sglang_options.name_problems(options(name=name))
    assert problems and any(problem.startswith("name=%r must be" % name) for problem in problems)


@pytest.mark.parametrize("name", ["sglang", "kimi-k2.5_int4", "K2", "x" * 64])
def test_good_names_pass(name):
    assert sglang_options.name_problems(options(name=name)) == []


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
    (dict(user="sglang\n"), "user"),
    (dict(group="sglang\n"), "group"),
    (dict(log_group="adm\n"), "log_group"),
    (dict(logrotate_dir="/etc/logrotate.d\n"), "logrotate_dir"),
])
def test_control_characters_are_refused_naming_the_option(change, variable):
    problems = sglang_options.text_problems(options(**change))
    assert len(problems) == 1 and problems[0].startswith(variable + ": the value holds the control character")


def test_control_characters_in_name_and_state_dir_are_refused():
    problems = sglang_options.name_problems(options(name="a\nb", state_dir="/var/lib/x\n"))
    assert [problem.split(":")[0] for problem in problems[:2]] == ["name", "state_dir"]


def test_environment_numbers_become_text_and_booleans_are_refused():
    assert sglang_options.normalized_environment({"SGLANG_STANDIN_STEP": 0.05, "NCCL_DEBUG": 1, "A": "x"}, "env") == (
        {"SGLANG_STANDIN_STEP": "0.05", "NCCL_DEBUG": "1", "A": "x"}, [])
    values, problems = sglang_options.normalized_environment({"FLAG": True, "NONE": None, "1X": "v", "A-B": "v"}, "env")
    assert values == {}
    assert problems == [
        "env: '1X' is not an environment variable name (letters, digits and _, not starting with a digit)",
        "env: 'A-B' is not an environment variable name (letters, digits and _, not starting with a digit)",
        "env.FLAG=True is not text or a number: quote the value the server should see, for example '1' or 'true'",
        "env.NONE=None is not text or a number: quote the value the server should see, for example '1' or 'true'",
    ]


def test_secret_flags_must_be_long_options():
    assert sglang_options.secret_flag_problems(["--hf-token", "--x"]) == []
    assert sglang_options.secret_flag_problems(["token", "--a b", "--x\n"]) == [
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
    assert sglang_options.log_path_problem(path) == ("log_path=%s is a %s: only a regular file (or a path that does not exist "
                                                     "yet) is accepted as the server's log" % (path, kind))
    params = valid(odd_paths)
    params["log_path"] = path
    assert sglang_options.log_path_problem(path) in sglang_options.check_options(params)
    assert sglang_options.log_path_problem("/dev/null").startswith("log_path=/dev/null is a device")
    assert sglang_options.log_path_problem(str(odd_paths / "new.log")) is None


@pytest.mark.parametrize("function", ["open_log", "settle_log_access"])
@pytest.mark.parametrize("name", ["fifo", "dir", "link"])
def test_open_log_never_blocks_nor_follows_a_link(odd_paths, name, function):
    outcome = []
    (odd_paths / "target").chmod(0o644)

    def open_it():
        try:
            getattr(common_detached, function)(str(odd_paths / name))
        except common_errors.InvalidOption as exc:
            outcome.append(str(exc))
    opener = threading.Thread(target=open_it, daemon=True)
    opener.start()
    opener.join(5)
    if opener.is_alive():  # unblock the thread: a reader on the FIFO lets the open return
        os.close(os.open(str(odd_paths / "fifo"), os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("%s blocked on %s" % (function, name))
    assert outcome and outcome[0].startswith("log_path=%s is a " % (odd_paths / name))
    assert (odd_paths / "target").read_text() == "untouched"
    assert stat.S_IMODE((odd_paths / "target").stat().st_mode) == 0o644


def test_log_is_created_0640_and_an_existing_mode_is_kept(tmp_path):
    old_umask = os.umask(0)
    try:
        descriptor = common_detached.open_log(str(tmp_path / "logs" / "new.log"))
        os.close(descriptor)
        existing = tmp_path / "old.log"
        existing.write_text("x")
        existing.chmod(0o600)
        assert common_detached.log_offset(str(existing)) == 1
        world_readable = tmp_path / "earlier-version.log"
        world_readable.write_text("")
        world_readable.chmod(0o664)
        os.close(common_detached.open_log(str(world_readable)))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "logs" / "new.log").stat().st_mode) == 0o640
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    assert stat.S_IMODE(world_readable.stat().st_mode) == 0o660


def test_open_log_leaves_a_blocking_descriptor(tmp_path):
    import fcntl
    descriptor = common_detached.open_log(str(tmp_path / "s.log"))
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
        ticks = common_processes.process_start_time(child.pid)
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
    assert common_processes.process_start_time(pid, proc_root=str(tmp_path)) == 8150432
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    state = {"pid": pid, "start_time": 8150432, "argv": ["sleep", "30"], "env_digest": "", "log_path": "/l",
             "offset": 0, "boot_id": "this-boot", "uid": os.getuid()}
    assert instance.running(state, proc_root=str(tmp_path), boot="this-boot")
    (tmp_path / str(pid) / "stat").write_text(fake_stat(pid, 9260001))
    assert not instance.running(state, proc_root=str(tmp_path), boot="this-boot")


def test_group_members_and_terminate(tmp_path):
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    deadline = time.monotonic() + 5
    while len(common_processes.group_members(leader.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = common_processes.group_members(leader.pid)
    assert len(members) == 3 and leader.pid in members
    assert common_detached.terminate(members, grace=5, signal_group=leader.pid) == []
    leader.wait()
    assert common_processes.group_members(leader.pid) == []


def test_terminate_escalates_to_sigkill():
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE)
    stubborn.stdout.readline()
    assert common_detached.terminate([stubborn.pid], grace=0.5) == [stubborn.pid]
    assert stubborn.wait(5) == -9


def test_device_holders_finds_who_has_the_device_open(tmp_path):
    device = tmp_path / "nvidia0"
    device.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print(1, flush=True); "
                               "time.sleep(60)", str(device)], stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()
        assert sglang_processes.device_holders([str(tmp_path / "nvidia*")]) == {holder.pid: [str(device)]}
        assert sglang_processes.device_holders([str(tmp_path / "nvidia*")], exclude=(holder.pid,)) == {}
    finally:
        holder.kill()
        holder.wait()


def test_wait_gpu_release():
    answers = [{10, 11}, {11}, set()]
    clock = [0.0]
    assert sglang_processes.wait_gpu_release([10], timeout=5, query=lambda: answers.pop(0), sleep=lambda s: None,
                                             clock=lambda: clock[0]) is True
    assert sglang_processes.wait_gpu_release([10], timeout=5, query=lambda: None) is None
    stuck = [{10}] * 3
    times = iter([0, 1, 6])
    assert sglang_processes.wait_gpu_release([10], timeout=5, query=lambda: stuck.pop(0), sleep=lambda s: None,
                                             clock=lambda: next(times)) is False


def test_gpu_memory_pids_without_nvidia_smi():
    def missing(*args, **kwargs):
        raise OSError(2, "No such file or directory: nvidia-smi")
    assert sglang_processes.gpu_memory_pids(run=missing) is None


def test_gpu_memory_pids_parses_the_query():
    completed = subprocess.CompletedProcess([], 0, stdout="1234\n5678\n", stderr="")
    assert sglang_processes.gpu_memory_pids(run=lambda *a, **k: completed) == {1234, 5678}


def test_bind_state():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert sglang_options.bind_state("127.0.0.1", port) == "in_use"
    assert sglang_options.bind_state("127.0.0.1", port) == "free"


def test_the_port_is_ours_only_while_our_running_server_listens_there():
    recorded = dict(argv=["python", "-m", "sglang.launch_server", "--port", "30000"])
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        recorded["argv"][-1] = str(port)
        assert sglang_options.port_state(recorded, True, "127.0.0.1", port) == "ours"
        # Our server gone (the pid another process's since), or listening elsewhere: whoever holds the port isn't us.
        assert sglang_options.port_state(recorded, False, "127.0.0.1", port) == "in_use"
        assert sglang_options.port_state(dict(argv=["python", "--port", "1"]), True, "127.0.0.1", port) == "in_use"
        assert sglang_options.port_state(None, False, "127.0.0.1", port) == "in_use"
    assert sglang_options.port_state(recorded, False, "127.0.0.1", port) == "free"


class FakeSystemctl(object):
    def __init__(self, show_output, rc=0):
        self.show_output, self.rc, self.commands = show_output, rc, []

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name

    def run_command(self, argv):
        self.commands.append(argv)
        return self.rc, self.show_output, "Failed to connect to bus"


def test_a_server_under_systemd_is_its_unit_with_the_unit_s_main_pid(tmp_path):
    instance = sglang_instance.Instance(str(tmp_path), "sglang")
    (tmp_path / "sglang.json").write_text(json.dumps(dict(
        pid=10, start_time=1, argv=["python"], env_digest="x", log_path="/var/log/sglang/sglang.log", offset=0,
        manager="systemd", unit="sglang-sglang.service")))
    systemctl = FakeSystemctl("MainPID=4242\nActiveState=active\nSubState=running\n")
    recorded, ours, unit = sglang_instance.observe_recorded(systemctl, instance)
    assert (recorded["pid"], ours, unit["running"]) == (4242, True, True)
    assert systemctl.commands[0][:2] == ["/usr/bin/systemctl", "show"] and systemctl.commands[0][-1] == "sglang-sglang.service"
    with pytest.raises(sglang_instance.SystemdFailed, match="Failed to connect to bus"):
        sglang_instance.observe_recorded(FakeSystemctl("", rc=1), instance)


def test_no_recorded_server_is_none_of_ours(tmp_path):
    assert sglang_instance.observe_recorded(FakeSystemctl(""), sglang_instance.Instance(str(tmp_path / "none"), "sglang")) == (
        None, False, None)


def test_a_host_that_does_not_resolve_or_is_not_here_is_named():
    with pytest.raises(common_errors.InvalidOption, match=r"^host=no-such-host.invalid cannot be resolved \("):
        sglang_options.bind_state("no-such-host.invalid", 30000)
    with pytest.raises(common_errors.InvalidOption, match=r"^host=192.0.2.1 port=30000 cannot be bound on this host"):
        sglang_options.bind_state("192.0.2.1", 30000)  # TEST-NET-1, an address of no host here


def test_systemd_unit_runs_the_same_command_and_keeps_secrets_out_of_it():
    argv = ["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/shared/kimi k2",
            "--api-key", "s3cr$t", "--served-model-name", "50%"]
    text, secrets = sglang_service_files.systemd_unit("sglang", argv, {"SGLANG_STANDIN_STEP": "0.05", "NOTE": "a b"},
                                                      "/var/log/sglang/sglang.log", "/var/lib/blackwell-gpu-node/sglang.secret.env",
                                                      SERVICE)
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_start == ('ExecStart=/home/sglang/ml-env/bin/python -m sglang.launch_server --model-path '
                          '"/shared/kimi k2" --api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_6} --served-model-name "50%%"')
    assert "s3cr" not in text
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_6": "s3cr$t"}
    assert 'Environment="NOTE=a b"' in text and "Environment=SGLANG_STANDIN_STEP=0.05" in text
    assert "StandardOutput=append:/var/log/sglang/sglang.log" in text and "TimeoutStopSec=30" in text
    # Required: a missing file stops the start rather than starting with --api-key "".
    assert "EnvironmentFile=/var/lib/blackwell-gpu-node/sglang.secret.env" in text
    assert common_systemd.environment_file(dict(secrets, TOKEN='a"b')) == 'BLACKWELL_GPU_NODE_SECRET_ARG_6="s3cr\\$t"\nTOKEN="a\\"b"\n'


def test_secret_flags_in_both_spellings_never_reach_the_unit():
    argv = ["/venv/bin/python", "-m", "sglang.launch_server", "--api-key=k1", "--admin-api-key", "k2",
            "--hf-token=k3", "--served-model-name", "m"]
    text, secrets = sglang_service_files.systemd_unit("sglang", argv, {}, "/var/log/s.log", "/state/sglang.secret.env", SERVICE,
                                                      common_secrets.SECRET_FLAGS + ("--hf-token",))
    assert "k1" not in text and "k2" not in text and "k3" not in text
    assert ("--api-key=${BLACKWELL_GPU_NODE_SECRET_ARG_3} --admin-api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_5} "
            "--hf-token=${BLACKWELL_GPU_NODE_SECRET_ARG_6} --served-model-name m") in text
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_3": "k1", "BLACKWELL_GPU_NODE_SECRET_ARG_5": "k2",
                       "BLACKWELL_GPU_NODE_SECRET_ARG_6": "k3"}


def test_environment_keeps_dollars_and_paths_escape_specifiers():
    text, _secrets = sglang_service_files.systemd_unit("sglang", ["/p", "$x"], {"NOTE": "costs $5 at 50%"}, "/var/log/50%/s.log",
                                                       "/state/%h/sglang.secret.env", SERVICE, secret_env=["TOKEN"])
    # Environment= expands no variables, so `$` stays single there; ExecStart= does, so it is doubled.
    assert 'Environment="NOTE=costs $5 at 50%%"' in text and 'ExecStart=/p "$$x"' in text
    assert "StandardOutput=append:/var/log/50%%/s.log" in text and "EnvironmentFile=/state/%%h/sglang.secret.env" in text


def test_environment_file_escapes_what_systemd_unescapes_in_double_quotes():
    # systemd.exec, EnvironmentFile=: in double quotes a backslash keeps any of \\ " ` $.
    assert common_systemd.environment_file({"K": 'a\\b"c`d$e f'}) == 'K="a\\\\b\\"c\\`d\\$e f"\n'


def test_plain_words_are_matched_whole():
    # match() with ^...$ took a word ending in a newline for plain and wrote it unquoted.
    assert common_systemd.systemd_quote("--tp\n") == '"--tp\n"'


@pytest.mark.parametrize("word,quoted", [("--tp", "--tp"), ("/a/b.c", "/a/b.c"), ("a b", '"a b"'), ("$HOME", '"$$HOME"'),
                                         ('say "hi"', '"say \\"hi\\""'), ("back\\slash", '"back\\\\slash"')])
def test_systemd_quote(word, quoted):
    assert common_systemd.systemd_quote(word) == quoted


def test_forget_removes_the_secret_environment_file_too(tmp_path):
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    instance.write_secret_env(common_systemd.environment_file({"HF_TOKEN": "t"}))
    assert stat.S_IMODE((tmp_path / "state" / "sglang.secret.env").stat().st_mode) == 0o600
    assert instance.forget() == ["sglang.secret.env"]
    assert os.listdir(str(tmp_path / "state")) == []


# --- the service user, systemd as the identity, bounded crash loops, the log's rotation (issue 13) ---

def test_auto_picks_systemd_only_where_it_is_pid_1(tmp_path):
    assert common_detached.resolve_manager("auto", "the server", str(tmp_path))[0] == "systemd"
    manager, why = common_detached.resolve_manager("auto", "the server", str(tmp_path / "absent"))
    assert manager == "module" and "systemd is not PID 1" in why
    assert common_detached.resolve_manager("module", "the server", str(tmp_path)) == ("module", "manager=module was asked for")


def test_a_missing_user_is_named_with_the_role_that_creates_it():
    account, _log_gid, problems = sglang_options.service_account("no-such-user-here")
    assert account is None
    assert problems == ["user=no-such-user-here does not exist on this host (sglang_server_user in the role): create "
                        "it first, with the role blackwell.gpu_node.service_user, or name an existing user"]
    assert "group=g is given without user" in sglang_options.service_account(None, "g")[2][0]
    assert "log_group=no-such-group-here does not exist" in sglang_options.service_account(None, None, "no-such-group-here")[2][0]


def test_the_account_has_the_users_home_group_and_supplementary_groups():
    account, log_gid, problems = sglang_options.service_account("nobody", None, "root")
    assert problems == [] and log_gid == 0
    assert account["uid"] == 65534 and account["user"] == "nobody" and account["home"] == "/nonexistent"
    assert account["gid"] not in account["groups"]
    assert sglang_options.service_account(None) == (None, None, [])


def test_home_is_the_users_unless_env_says_otherwise():
    account = {"user": "sglang", "home": "/var/lib/sglang"}
    assert common_detached.process_environment({"HOME": "/root"}, {}, account)["HOME"] == "/var/lib/sglang"
    assert common_detached.process_environment({"HOME": "/root"}, {"HOME": "/srv/cache"}, account)["HOME"] == "/srv/cache"
    assert common_detached.process_environment({"HOME": "/root"}, {}, None)["HOME"] == "/root"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_launch_drops_to_the_user_with_umask_027_and_keeps_the_log_roots(tmp_path):
    tmp_path.chmod(0o755)
    log = tmp_path / "server.log"
    account = {"user": "nobody", "uid": 65534, "gid": 65534, "groups": [], "home": "/nonexistent"}
    script = 'echo "$(id -u) $(id -G) $(umask) $HOME $(pwd)"'
    process, offset, _start = common_detached.launch(["/bin/sh", "-c", script], {}, str(log), account, log_gid=0)
    process.wait()
    assert offset == 0
    assert log.read_text().split() == ["65534", "65534", "0027", "/nonexistent", "/"]
    info = log.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o640)


def test_log_group_is_set_on_the_open_file_never_through_a_link(tmp_path):
    gid = 1  # daemon: any group but the one the file would get
    descriptor = common_detached.open_log(str(tmp_path / "s.log"), gid)
    os.close(descriptor)
    assert (tmp_path / "s.log").stat().st_gid == gid
    (tmp_path / "target").write_text("")
    os.symlink(str(tmp_path / "target"), str(tmp_path / "link.log"))
    with pytest.raises(common_errors.InvalidOption, match="is a symbolic link"):
        common_detached.open_log(str(tmp_path / "link.log"), gid)


def test_a_log_left_to_a_running_server_gets_its_mode_and_group_back_and_check_mode_only_tells(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("a prompt")
    log.chmod(0o644)
    gid = 1  # daemon: any group but the one the file has
    assert common_detached.settle_log_access(str(log), gid, check=True) is True
    assert (stat.S_IMODE(log.stat().st_mode), log.stat().st_gid) == (0o644, 0)
    assert common_detached.settle_log_access(str(log), gid) is True
    assert (stat.S_IMODE(log.stat().st_mode), log.stat().st_gid) == (0o640, gid)
    assert log.read_text() == "a prompt"
    assert common_detached.settle_log_access(str(log), gid) is False
    assert common_detached.settle_log_access(str(log), gid, check=True) is False
    # Either one alone is a change; a mode that gives others nothing is kept, and without log_gid so is the group.
    log.chmod(0o600)
    os.chown(str(log), -1, 0)
    assert common_detached.settle_log_access(str(log), gid) is True
    assert (stat.S_IMODE(log.stat().st_mode), log.stat().st_gid) == (0o600, gid)
    log.chmod(0o604)
    assert common_detached.settle_log_access(str(log)) is True
    assert (stat.S_IMODE(log.stat().st_mode), log.stat().st_gid) == (0o600, gid)


def test_a_missing_log_is_left_missing_when_it_is_settled(tmp_path):
    assert common_detached.settle_log_access(str(tmp_path / "logs" / "s.log"), 1) is False
    assert common_detached.settle_log_access(str(tmp_path / "s.log"), 1) is False
    assert os.listdir(str(tmp_path)) == []


def test_the_state_files_get_their_mode_and_owner_back_and_check_mode_only_tells(tmp_path):
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    assert instance.settle_files() == []
    state = launch_state(1234, 0)
    instance.save(state)
    instance.record_launch(state)
    instance.write_secret_env(common_systemd.environment_file({"HF_TOKEN": "t"}))
    assert instance.settle_files() == []
    names = ["sglang.pid", "sglang.json", "sglang.secret.env", "sglang.launches.json"]
    for name in names:
        os.chmod(str(tmp_path / "state" / name), 0o644)
    os.chown(str(tmp_path / "state" / "sglang.json"), 65534, 65534)
    (tmp_path / "state" / "other.json").write_text("{}")
    (tmp_path / "state" / "other.json").chmod(0o644)
    assert instance.settle_files(check=True) == names
    assert stat.S_IMODE(os.stat(str(tmp_path / "state" / "sglang.pid")).st_mode) == 0o644
    assert instance.settle_files() == names
    for name in names:
        info = os.stat(str(tmp_path / "state" / name))
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o600, 0), name
    assert instance.settle_files() == []
    # What is not this instance's, and what a write replaces (a link), are left alone.
    assert stat.S_IMODE((tmp_path / "state" / "other.json").stat().st_mode) == 0o644
    (tmp_path / "target").write_text("")
    (tmp_path / "target").chmod(0o644)
    os.unlink(instance.pid_path)
    os.symlink(str(tmp_path / "target"), instance.pid_path)
    assert instance.settle_files() == []
    assert stat.S_IMODE((tmp_path / "target").stat().st_mode) == 0o644


def test_a_state_of_the_previous_version_is_still_recognised(tmp_path):
    # ce123ef wrote argv, env_digest, log_path, manager, offset, pid, start_time, started_at: no boot id, no uid.
    child = sleeping()
    try:
        legacy = {"pid": child.pid, "start_time": common_processes.process_start_time(child.pid), "argv": ["sleep", "30"],
                  "env_digest": "", "log_path": "/l", "offset": 0, "manager": "module", "started_at": 1.0}
        assert sglang_instance.Instance(str(tmp_path), "sglang").running(legacy)
        with pytest.raises(sglang_instance.BadState, match="not as uid 4242"):
            sglang_instance.Instance(str(tmp_path), "sglang").running(dict(legacy, uid=4242))
    finally:
        child.kill()
        child.wait()


def unit_lines(**changes):
    text, _secrets = sglang_service_files.systemd_unit("sglang", ["/venv/bin/python"], {}, "/var/log/s.log", "/state/s.env",
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


def test_the_unit_starts_after_fabric_manager_and_the_persistence_daemon_without_requiring_them():
    lines = unit_lines()
    unit = lines[lines.index("[Unit]"):lines.index("[Service]")]
    assert "After=network-online.target nvidia-persistenced.service nvidia-fabricmanager.service" in unit
    assert not [line for line in unit if line.startswith(("Requires=", "Wants=")) and "nvidia" in line]


def test_unit_status_reads_one_systemctl_show():
    status = common_systemd.unit_status("MainPID=4242\nActiveState=active\nSubState=running\nNRestarts=3\n"
                                        "UnitFileState=enabled\nLoadState=loaded\nExecMainStartTimestampMonotonic=12345\n")
    assert status == {"pid": 4242, "active_state": "active", "sub_state": "running", "restarts": 3, "enabled": True,
                      "loaded": True, "started_monotonic": 12345, "running": True}
    restarting = common_systemd.unit_status("MainPID=0\nActiveState=activating\nSubState=auto-restart\nNRestarts=1\n"
                                            "UnitFileState=enabled\n")
    assert restarting["running"] is False and restarting["restarts"] == 1
    failed = common_systemd.unit_status("MainPID=0\nActiveState=failed\nUnitFileState=disabled\nLoadState=not-found\n")
    assert failed["running"] is False and failed["enabled"] is False and failed["loaded"] is False


@pytest.mark.parametrize("path", ["/var/log/a b.log", '/var/log/"q".log', "/var/log/*.log", "/var/log/a?.log",
                                  "/var/log/[x].log", "/var/log/{x}.log", "/var/log/a\\b.log"])
def test_a_log_path_that_logrotate_would_misread_is_named(path):
    assert sglang_service_files.logrotate_problem(path).startswith("log_path=%s holds " % path)


def test_logrotate_copies_and_truncates_the_quoted_log():
    assert sglang_service_files.logrotate_problem("/var/log/sglang/sglang-1.log") is None
    text = sglang_service_files.logrotate_config("/var/log/sglang/sglang.log", 4)
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
    owner, problems, complete = common_files.foreign_writable(str(venv))
    assert owner == os.getuid() and complete
    assert problems == ["%s is writable by its group or others (mode 0775)" % (venv / "lib"),
                        "%s is writable by its group or others (mode 0666)" % (venv / "lib" / "planted.pth")]
    assert common_files.foreign_writable(str(venv), limit=1)[1:] == (problems[:1], False)


def test_missing_groups_name_their_option_and_role_variable():
    assert sglang_options.service_account("nobody", "no-such-group-here")[2] == [
        "group=no-such-group-here does not exist on this host (sglang_server_group in the role): create it, or "
        "leave it unset for the user's own group"]
    assert sglang_options.service_account(None, None, "no-such-group-here")[2] == [
        "log_group=no-such-group-here does not exist on this host (sglang_server_log_group in the role): create "
        "the group, or leave it unset"]
    account, _log_gid, problems = sglang_options.service_account("nobody", "root")
    assert problems == [] and (account["gid"], account["group"]) == (0, "root")


def launch_state(pid, offset):
    return dict(pid=pid, start_time=1000 + pid, offset=offset, log_path="/var/log/sglang.log", started_at=1.5,
                boot_id="b", argv=["python"], env_digest="d")


def test_the_launch_history_keeps_the_last_launches_newest_first_and_survives_forget(tmp_path):
    """diagnose classifies an earlier launch's log from its offset: the next start must not overwrite it,
    nor a stop or the cleanup of a dead server remove it."""
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    for number in range(sglang_instance.LAUNCH_HISTORY + 2):
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
    assert sglang_instance.Instance(str(tmp_path), "sglang").launches() == []


# The tests below were written against the mutants that survived `make mutation` (tests/mutation/scores.txt).

def test_the_whole_unit_file():
    # Every line, so that a directive that changes (or a blank line that disappears between sections) is seen.
    text, secrets = sglang_service_files.systemd_unit("sglang", ["/v/bin/python", "-m", "sglang.launch_server", "--api-key=k"],
                                                      {"B": "2", "A": "1"}, "/var/log/sglang/sglang.log",
                                                      "/var/lib/b/sglang.secret.env", SERVICE)
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_3": "k"}
    assert text == "\n".join([
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        "[Unit]",
        "Description=SGLang server sglang (blackwell.gpu_node)",
        "After=network-online.target nvidia-persistenced.service nvidia-fabricmanager.service",
        "Wants=network-online.target",
        "StartLimitIntervalSec=600",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=/v/bin/python -m sglang.launch_server --api-key=${BLACKWELL_GPU_NODE_SECRET_ARG_3}",
        "Environment=A=1",
        "Environment=B=2",
        "User=sglang",
        "Group=sglang",
        "UMask=0027",
        "EnvironmentFile=/var/lib/b/sglang.secret.env",
        "StandardOutput=append:/var/log/sglang/sglang.log",
        "StandardError=append:/var/log/sglang/sglang.log",
        "Restart=on-failure",
        "RestartSec=10",
        "KillMode=control-group",
        "TimeoutStopSec=30",
        "NoNewPrivileges=yes",
        "ProtectSystem=full",
        "PrivateTmp=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectControlGroups=yes",
        "RestrictSUIDSGID=yes",
        "LockPersonality=yes",
        "RestrictRealtime=yes",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]) + "\n"


def test_a_secret_with_an_equals_sign_after_the_flag_moves_whole():
    text, secrets = sglang_service_files.systemd_unit("sglang", ["/v/bin/python", "--api-key", "a=b"], {}, "/l", "/s", SERVICE)
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_2": "a=b"}
    assert "ExecStart=/v/bin/python --api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_2}\n" in text and "a=" not in text


def test_the_whole_logrotate_file():
    assert sglang_service_files.logrotate_config("/var/log/sglang/sglang.log", 4) == "\n".join([
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        '"/var/log/sglang/sglang.log" {',
        "    weekly",
        "    maxsize 200M",
        "    rotate 4",
        "    compress",
        "    delaycompress",
        "    missingok",
        "    notifempty",
        "    copytruncate",
        "}",
    ]) + "\n"


def test_unit_status_reads_every_property_that_is_asked_for():
    # The module asks systemctl for UNIT_PROPERTIES: each one must be one that unit_status reads.
    values = {"MainPID": "4242", "ActiveState": "reloading", "SubState": "reload", "NRestarts": "2",
              "UnitFileState": "enabled", "LoadState": "loaded", "ExecMainStartTimestampMonotonic": "77"}
    status = common_systemd.unit_status("".join("%s=%s\n" % (name, values[name]) for name in common_systemd.UNIT_PROPERTIES))
    assert status == {"pid": 4242, "active_state": "reloading", "sub_state": "reload", "restarts": 2,
                      "enabled": True, "loaded": True, "started_monotonic": 77, "running": True}


def test_unit_status_of_nothing_said():
    assert common_systemd.unit_status("") == {"pid": 0, "active_state": "unknown", "sub_state": "unknown", "restarts": 0,
                                              "enabled": False, "loaded": False, "started_monotonic": 0, "running": False}
    # systemd's own PID 1 is no server's main pid only in theory; pid 1 counts as one, pid 0 does not.
    assert common_systemd.unit_status("MainPID=1\nActiveState=active\n")["running"] is True
    assert common_systemd.unit_status("MainPID=0\nActiveState=active\n")["running"] is False
    assert common_systemd.unit_status("MainPID=5\nActiveState=inactive\n")["running"] is False


def test_the_api_key_is_added_to_the_whole_command():
    assert sglang_options.build_argv(options(api_key="s3cr3t", extra_args=["--x"])) == [
        "/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/shared/kimi-k2.5-int4",
        "--tensor-parallel-size", "1", "--host", "127.0.0.1", "--port", "30000", "--api-key", "s3cr3t", "--x"]


@pytest.mark.parametrize("port,ok", [(0, False), (1, True), (65535, True), (65536, False)])
def test_the_port_range_edges(tmp_path, port, ok):
    assert (sglang_options.check_options(dict(valid(tmp_path), port=port)) == []) is ok


@pytest.mark.parametrize("change,problem", [
    (dict(nnodes=0), "nnodes=0 must be a positive integer"),
    (dict(nnodes=2, node_rank=0, dist_init_addr="10.0.0.1:"),
     "dist_init_addr='10.0.0.1:' must be HOST:PORT of the rank-0 node when nnodes > 1"),
    (dict(nnodes=2, node_rank=0, dist_init_addr=None),
     "dist_init_addr='' must be HOST:PORT of the rank-0 node when nnodes > 1"),
])
def test_multi_node_problems_in_full(tmp_path, change, problem):
    assert sglang_options.check_options(dict(valid(tmp_path), **change)) == [problem]


def test_speculative_problems_come_with_the_others(tmp_path):
    speculative = {"algorithm": "NGRAM", "draft_model_path": "x"}
    problems = sglang_options.check_options(dict(valid(tmp_path), port=0, speculative=speculative))
    assert problems[0] == "port=0 is out of range (1-65535)"
    assert problems[1].startswith("speculative.algorithm=NGRAM is not one")


def test_python_and_model_problems_in_full(tmp_path):
    problems = sglang_options.check_options(dict(valid(tmp_path), python="bin/python", model_path=str(tmp_path / "none")))
    assert problems == [
        "python=bin/python is missing, not executable or not an absolute path: point it at the virtualenv's "
        "bin/python",
        "model_path=%s is not a directory on the host; set model_is_hub_id: true for a Hugging Face id"
        % (tmp_path / "none")]


def test_manager_auto_says_why(tmp_path):
    assert common_detached.resolve_manager("auto", "the server", str(tmp_path)) == (
        "systemd", "manager=auto: systemd is PID 1 here (%s exists)" % tmp_path)
    assert common_detached.resolve_manager("auto", "the server", str(tmp_path / "no")) == (
        "module", "manager=auto: systemd is not PID 1 here (no %s), so the module runs the server" % (tmp_path / "no"))
    assert common_detached.resolve_manager.__defaults__ == ("/run/systemd/system",)


GOOD_STATE = {"pid": 2, "start_time": 5, "argv": ["x"], "env_digest": "", "log_path": "/l", "offset": 0}


@pytest.mark.parametrize("change,problem", [
    ({}, None),  # pid 2 may be a server's: only 1 and below are not
    ({"argv": []}, "argv is not a command line"),
    ({"argv": ["x", 5]}, "argv is not a command line"),
    ({"offset": "0"}, "offset is missing or not of the right type"),
])
def test_state_problems_in_full(change, problem):
    assert common_detached.state_problem(dict(GOOD_STATE, **change), "server") == problem


@pytest.mark.parametrize("entry,problem", [
    ({"pid": 5, "start_time": 1, "offset": 0, "log_path": "/l"}, None),  # offset 0: the log was empty
    ({"pid": 5, "start_time": 1, "offset": -1, "log_path": "/l"}, "offset is negative"),
    ({"pid": 5, "start_time": 1, "offset": 0}, "log_path is missing or not of the right type"),
    ([5], "not an object"),
])
def test_launch_problems_in_full(entry, problem):
    assert sglang_instance.launch_problem(entry) == problem


def fake_proc(tmp_path, processes):
    """A /proc of {pid: (stat after the comm, status text, cmdline bytes)}, with the non-pid entries a real one has."""
    root = tmp_path / "proc"
    for name in ("self", "sys", "1x"):
        (root / name).mkdir(parents=True)
    for pid, (stat_tail, status, cmdline) in processes.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text("%d (a) b) %s\n" % (pid, stat_tail))
        (root / str(pid) / "status").write_text(status)
        (root / str(pid) / "cmdline").write_bytes(cmdline)
    return str(root)


def stat_tail(state, pgrp, session, start_time):
    # state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority nice
    # num_threads itrealvalue starttime ...
    return " ".join([state, "1", str(pgrp), str(session)] + ["0"] * 15 + [str(start_time), "0", "0"])


def test_proc_fields_are_read_from_the_right_places(tmp_path):
    root = fake_proc(tmp_path, {
        10: (stat_tail("S", 10, 20, 555), "Name:\tpython\nUid:\t1000\t1001\t1002\t1003\n", b"python\0-m\0\xff\0"),
        11: (stat_tail("X", 10, 20, 556), "Uid:\t0\t0\t0\t0\n", b""),
        12: (stat_tail("Z", 10, 20, 557), "Uid:\t0\t0\t0\t0\n", b""),
        13: (stat_tail("R", 20, 10, 558), "Uid:\t0\t0\t0\t0\n", b""),
    })
    assert common_processes.process_start_time(10, root) == 555
    assert common_processes.process_start_time(11, root) is None and common_processes.process_start_time(12, root) is None
    assert common_processes.process_uid(10, root) == 1000  # the real uid, not the effective one after it
    assert common_processes.process_uid(99, root) is None
    assert common_processes.process_argv(10, root) == ["python", "-m", "\udcff"]  # bytes kept, not replaced
    assert common_processes.process_argv(99, root) is None
    # the process group (field 5), not the session (field 6); zombies and dead processes are no members
    assert common_processes.group_members(10, root) == [10]
    assert common_processes.group_members(20, root) == [13]


def test_group_members_skip_a_process_that_is_gone(tmp_path):
    root = fake_proc(tmp_path, dict((pid, (stat_tail("S", 7, 7, pid), "", b"")) for pid in range(20, 40)))
    os.unlink(os.path.join(root, "25", "stat"))  # gone between listing /proc and reading its stat
    assert common_processes.group_members(7, root) == [pid for pid in range(20, 40) if pid != 25]


def test_device_holders_skip_processes_and_descriptors_that_are_gone(tmp_path):
    device = tmp_path / "nvidia0"
    device.write_text("")
    root = tmp_path / "proc"
    for pid in range(20, 40):
        fd = root / str(pid) / "fd"
        fd.mkdir(parents=True)
        # Each holder also has descriptors that cannot be read (not links), one before and one after the link
        # by name and by age, numbered differently in each process (a hashed directory lists the same names in
        # the same order everywhere), so that in some process one of them is listed before the link.
        (fd / str(3 * pid)).mkdir()
        os.symlink(str(device), str(fd / str(3 * pid + 1)))
        (fd / str(3 * pid + 2)).mkdir()
    shutil.rmtree(str(root / "25" / "fd"))  # a process that exited
    holders = sglang_processes.device_holders([str(device)], proc_root=str(root))
    assert sorted(holders) == [pid for pid in range(20, 40) if pid != 25]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to other users")
def test_foreign_writable_allows_root_and_the_owner_only(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    os.chown(str(venv), 1000, 1000)
    for name, uid in (("root.py", 0), ("owner.py", 1000), ("daemon.py", 1)):
        (venv / name).write_text("")
        (venv / name).chmod(0o644)
        os.chown(str(venv / name), uid, 0)
    owner, problems, complete = common_files.foreign_writable(str(venv))
    assert (owner, complete) == (1000, True)
    assert problems == ["%s is owned by uid 1 (%s)" % (venv / "daemon.py", common_accounts.user_name(1))]


def test_foreign_writable_stops_at_max_entries(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    for name in ("a", "b", "c"):
        (venv / name).write_text("")
        (venv / name).chmod(0o644)
    # the root and its three entries are four
    assert common_files.foreign_writable(str(venv), max_entries=4)[2] is False
    assert common_files.foreign_writable(str(venv), max_entries=5)[2] is True
    assert common_files.foreign_writable.__defaults__ == (20, 500000)


def test_a_state_dir_that_is_a_file_is_refused_naming_it(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(common_errors.InvalidOption) as raised:
        common_files.open_directory(str(tmp_path / "f"), "state_dir")
    assert str(raised.value) == ("state_dir=%s is a file: point state_dir at a directory (root never writes through "
                                 "a link)" % (tmp_path / "f"))


def test_a_link_planted_at_the_temporary_name_is_never_written_through(tmp_path, monkeypatch):
    target = tmp_path / "target"
    target.write_text("kept")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    monkeypatch.setattr(common_files.os, "urandom", lambda size: b"\0" * size)
    os.symlink(str(target), str(state_dir / ".x.json.0000000000000000.tmp"))
    directory = common_files.open_directory(str(state_dir), "state_dir")
    try:
        with pytest.raises(OSError):
            common_files.write_atomically(directory, "x.json", "{}", 0o600)
    finally:
        os.close(directory)
    assert target.read_text() == "kept" and not (state_dir / "x.json").exists()


def test_read_text_reads_a_regular_file_only_and_never_blocks(tmp_path):
    (tmp_path / "big").write_bytes(b"a" * (1 << 20) + b"b\xff")
    (tmp_path / "bad").write_bytes(b"ok\xff")
    os.symlink(str(tmp_path / "bad"), str(tmp_path / "link"))
    os.mkfifo(str(tmp_path / "fifo"))
    directory = common_files.open_directory(str(tmp_path), "state_dir")
    try:
        assert common_files.read_text(directory, "big") == "a" * (1 << 20)  # a MiB at most
        assert common_files.read_text(directory, "bad") == "ok\ufffd"
        assert common_files.read_text(directory, "link") is None
        assert common_files.read_text(directory, "fifo") is None  # would block without O_NONBLOCK
        assert common_files.read_text(directory, "none") is None
    finally:
        os.close(directory)


def test_a_state_file_that_is_a_fifo_is_named_without_blocking(tmp_path):
    os.mkfifo(str(tmp_path / "sglang.json"))
    with pytest.raises(sglang_instance.BadState) as raised:
        sglang_instance.Instance(str(tmp_path), "sglang").load()
    assert "sglang.json is a FIFO, not a regular file" in str(raised.value)


def test_a_state_file_past_a_mib_is_not_read_whole(tmp_path):
    state = dict(GOOD_STATE, argv=["x" * (1 << 20)])
    (tmp_path / "sglang.json").write_text(json.dumps(state))
    with pytest.raises(sglang_instance.BadState) as raised:
        sglang_instance.Instance(str(tmp_path), "sglang").load()
    assert "sglang.json is larger than the 1048576 bytes it may hold here" in str(raised.value)


def test_the_state_files_names_and_modes(tmp_path):
    instance = sglang_instance.Instance(str(tmp_path / "state"), "web")
    assert (instance.pid_path, instance.state_path, instance.secret_env_path, instance.launches_path) == tuple(
        str(tmp_path / "state" / name) for name in ("web.pid", "web.json", "web.secret.env", "web.launches.json"))
    assert instance.load() is None and not (tmp_path / "state").exists()  # reading creates nothing
    old = os.umask(0)
    try:
        instance.save(dict(GOOD_STATE, pid=1234))
        instance.record_launch(dict(pid=1234, start_time=5, offset=0, log_path="/l", started_at=1.0, boot_id="b"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(str(tmp_path / "state")).st_mode) == 0o750
    for name in ("web.pid", "web.json", "web.launches.json"):
        assert stat.S_IMODE(os.stat(str(tmp_path / "state" / name)).st_mode) == 0o600
    assert (tmp_path / "state" / "web.pid").read_text() == "1234\n"
    # Indented and sorted, so that a person reading them finds the fields in one place.
    assert (tmp_path / "state" / "web.json").read_text() == json.dumps(dict(GOOD_STATE, pid=1234), indent=2,
                                                                       sort_keys=True)
    assert (tmp_path / "state" / "web.launches.json").read_text() == json.dumps(
        [dict(pid=1234, start_time=5, offset=0, log_path="/l", started_at=1.0, boot_id="b")], indent=2,
        sort_keys=True)


def test_a_new_log_and_its_directory_get_their_modes_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        os.close(common_detached.open_log(str(tmp_path / "logs" / "s.log")))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(str(tmp_path / "logs")).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(str(tmp_path / "logs" / "s.log")).st_mode) == 0o640


def test_a_log_that_is_not_a_file_is_refused_with_the_paths_problem(tmp_path):
    os.mkfifo(str(tmp_path / "fifo.log"))
    with pytest.raises(common_errors.InvalidOption) as raised:
        common_detached.open_log(str(tmp_path / "fifo.log"), process="the server")
    assert str(raised.value) == sglang_options.log_path_problem(str(tmp_path / "fifo.log"))


def test_a_group_without_its_user_is_a_problem_not_a_crash():
    account, _gid, problems = sglang_options.service_account("no-such-user-here", group="root")
    assert account is None
    assert problems[0].startswith("user=no-such-user-here does not exist on this host")
    assert sglang_options.service_account(None, group="root")[2] == [
        "group=root is given without user: name the user the server runs as"]
    assert sglang_options.service_account("root")[0]["group"] == "root"


@pytest.mark.parametrize("make,kind", [
    (lambda path: path.write_text(""), "file"), (lambda path: path.mkdir(), "directory"),
    (lambda path: os.symlink("/", str(path)), "symbolic link"), (lambda path: os.mkfifo(str(path)), "FIFO"),
])
def test_path_kinds(tmp_path, make, kind):
    make(tmp_path / "p")
    assert common_files.path_kind(str(tmp_path / "p")) == kind


def test_a_socket_is_a_socket(tmp_path):
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(tmp_path / "s"))
        assert common_files.path_kind(str(tmp_path / "s")) == "socket"
    finally:
        listener.close()


def test_gpu_memory_pids_asks_nvidia_smi_exactly_this():
    calls = []

    def run(argv, **kwargs):
        calls.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, 0, stdout="1234\n", stderr="")
    assert sglang_processes.gpu_memory_pids(run=run) == {1234}
    assert calls == [(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                      dict(capture_output=True, text=True, timeout=30, check=False))]


def fake_time():
    """(sleep, clock, sleeps): a clock that a sleep moves on by one second, whatever it is asked for."""
    now, sleeps = [0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += 1
    return sleep, lambda: now[0], sleeps


def test_wait_gpu_release_polls_every_half_second_up_to_the_timeout():
    sleep, clock, sleeps = fake_time()
    assert sglang_processes.wait_gpu_release([10], timeout=2, query=lambda: {10}, sleep=sleep, clock=clock) is False
    assert sleeps == [0.5, 0.5]


def test_wait_gone_polls_every_tenth_of_a_second_up_to_the_timeout():
    sleep, clock, sleeps = fake_time()
    assert common_detached.wait_gone([os.getpid()], 3, sleep=sleep, clock=clock) == [os.getpid()]
    assert sleeps == [0.1, 0.1, 0.1]


def gone_pid():
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_terminating_what_is_gone_already_is_no_error():
    pid = gone_pid()
    assert common_detached.terminate([pid], 0.2) == []
    assert common_detached.terminate([pid], 0.2, signal_group=pid) == []


def open_descriptors(pid):
    """What the descriptors of pid point to. One closed between the listing and its reading (sleep's loader opens
    and closes its libraries just after exec) was not inherited: an inherited pipe stays open."""
    targets = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            targets.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except FileNotFoundError:
            continue
    return targets


def test_launch_detaches_closes_descriptors_and_reports_the_start_time(tmp_path):
    inherited_read, inherited_write = os.pipe()
    os.set_inheritable(inherited_write, True)
    started = time.monotonic()
    try:
        process, offset, start_time = common_detached.launch(["sleep", "30"], {}, str(tmp_path / "s.log"))
    finally:
        os.close(inherited_read)
        os.close(inherited_write)
    try:
        assert time.monotonic() - started < 4  # it returns as soon as the start time is known
        assert offset == 0 and start_time is not None and start_time == common_processes.process_start_time(process.pid)
        assert os.getsid(process.pid) == process.pid  # its own session: a stop signals its group only
        # Until the child has run exec, it still holds subprocess's own pipe, which exec closes.
        deadline = time.monotonic() + 10
        while not Path("/proc/%d/cmdline" % process.pid).read_bytes().startswith(b"sleep\0"):
            assert time.monotonic() < deadline, "the child never ran sleep"
            time.sleep(0.01)
        assert not [target for target in open_descriptors(process.pid) if target.startswith("pipe:")]
    finally:
        process.kill()
        process.wait()


def test_launch_of_a_command_that_exits_at_once_returns_at_once(tmp_path, monkeypatch):
    # Its start time is never read (it is gone by then): launch stops waiting once it has exited.
    monkeypatch.setattr(common_detached, "process_start_time", lambda pid, proc_root="/proc": time.sleep(0.05))
    started = time.monotonic()
    process, _offset, start_time = common_detached.launch(["false"], {}, str(tmp_path / "s.log"))
    assert time.monotonic() - started < 4
    assert start_time is None and process.returncode == 1


def test_every_environment_variable_is_checked_not_only_the_last():
    problems = sglang_options.text_problems(options(env={"A": "1\n", "B": "2"}, secret_env={"C": "3\n", "D": "4"}))
    assert [problem.split(":")[0] for problem in problems] == ["env.A", "secret_env.C"]


def test_an_existing_state_dir_is_fine_and_a_bad_name_is_said_in_full(tmp_path):
    assert sglang_options.name_problems(options(state_dir=str(tmp_path))) == []
    assert sglang_options.name_problems(options(name="a b")) == [
        "name='a b' must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, without "
        "'..': it names files in state_dir and the unit sglang-<name>.service"]


def test_boot_id_is_this_boots():
    with open("/proc/sys/kernel/random/boot_id") as handle:
        assert common_processes.boot_id() == handle.read().strip()


def bad_state_text(state_dir, problem):
    return ("The state file %s/sglang.json cannot be trusted: %s. Nothing was signalled or changed. Check that no "
            "server of this instance runs, then remove %s/sglang.json and %s/sglang.pid."
            % (state_dir, problem, state_dir, state_dir))


def test_state_files_that_are_no_regular_files_are_named_in_full(tmp_path):
    os.mkfifo(str(tmp_path / "sglang.json"))
    with pytest.raises(sglang_instance.BadState) as raised:
        sglang_instance.Instance(str(tmp_path), "sglang").load()
    assert str(raised.value) == bad_state_text(tmp_path, "it is not what sglang_server writes there: sglang.json is a "
                                                         "FIFO, not a regular file: only regular files are read here "
                                                         "(a FIFO blocks, a device never ends)")
    os.unlink(str(tmp_path / "sglang.json"))
    os.symlink(str(tmp_path / "elsewhere"), str(tmp_path / "sglang.json"))
    with pytest.raises(sglang_instance.BadState) as raised:
        sglang_instance.Instance(str(tmp_path), "sglang").load()
    assert str(raised.value).startswith(bad_state_text(tmp_path, "it is not what sglang_server writes there: "
                                                                 "sglang.json is a symbolic link").split(". Nothing")[0])


def test_a_process_that_is_not_ours_is_named_in_full(tmp_path):
    long_argv = [b"python"] + [b"x" * 30] * 10
    root = fake_proc(tmp_path, {10: (stat_tail("S", 10, 10, 555), "Uid:\t1000\t0\t0\t0\n",
                                     b"\0".join(long_argv) + b"\0")})
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    state = dict(GOOD_STATE, pid=10, start_time=555, argv=["python"])
    with pytest.raises(sglang_instance.BadState) as raised:
        instance.running(state, proc_root=root, uid=0)
    assert str(raised.value) == bad_state_text(tmp_path / "state",
                                               "pid 10 runs as uid 1000, not as uid 0 that launched the server")
    with pytest.raises(sglang_instance.BadState) as raised:
        instance.running(state, proc_root=root, uid=1000)
    shown = " ".join(word.decode() for word in long_argv)[:200]
    assert str(raised.value) == bad_state_text(
        tmp_path / "state", "pid 10 runs %r, not the recorded server's command line" % shown)


def test_the_launch_file_holds_the_last_five_and_is_made_with_its_directory(tmp_path):
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    for pid in range(100, 107):
        instance.record_launch(dict(pid=pid, start_time=1, offset=0, log_path="/l", started_at=1.0, boot_id="b"))
    written = json.loads(Path(instance.launches_path).read_text())
    assert [entry["pid"] for entry in written] == [106, 105, 104, 103, 102]


def test_process_uid_reads_the_real_proc_by_default():
    assert common_processes.process_uid(os.getpid()) == os.getuid()


def test_a_dangling_link_as_state_dir_is_refused_even_when_it_would_be_created(tmp_path):
    os.symlink(str(tmp_path / "nowhere"), str(tmp_path / "state"))
    with pytest.raises(common_errors.InvalidOption) as raised:
        common_files.open_directory(str(tmp_path / "state"), "state_dir", 0o750)
    assert str(raised.value).startswith("state_dir=%s is a symbolic link: point state_dir at a directory"
                                        % (tmp_path / "state"))


def test_a_log_that_cannot_be_opened_says_why(tmp_path, monkeypatch):
    log = str(tmp_path / "s.log")
    real_open = os.open

    def refusing(path, *args, **kwargs):
        if path == "s.log":
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(common_detached.os, "open", refusing)
    with pytest.raises(common_errors.InvalidOption) as raised:
        common_detached.open_log(log)
    assert str(raised.value) == "log_path=%s cannot be opened: [Errno 13] Permission denied: 's.log'" % log


def test_a_log_in_a_directory_another_user_can_write_is_refused_before_anything_opens_it(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(str(logs), 65534, 65534)
    with pytest.raises(common_errors.InvalidOption) as raised:
        common_detached.open_log(str(logs / "s.log"))
    assert str(raised.value).startswith("log_path=%s: %s it belongs to nobody, not to root" % (logs, logs))
    assert os.listdir(str(logs)) == []
    os.chown(str(logs), 0, 0)
    os.chmod(str(logs), 0o777)
    with pytest.raises(common_errors.InvalidOption, match="its group or others can write it"):
        common_detached.open_log(str(logs / "s.log"))


def test_a_log_swapped_for_a_device_after_the_check_is_still_refused(monkeypatch):
    monkeypatch.setattr(common_detached, "log_path_problem", lambda path, process: None)  # as if it was a file when checked
    with pytest.raises(common_errors.InvalidOption) as raised:
        common_detached.open_log("/dev/null")
    assert str(raised.value) == "log_path=/dev/null is not a regular file"


def test_the_logrotate_problem_in_full():
    assert sglang_service_files.logrotate_problem("/var/log/a b.log") == (
        "log_path=/var/log/a b.log holds ' ', which logrotate reads as a pattern, a quote or a separator: choose a "
        "log path without whitespace, quotes, backslashes, *, ?, [, ], { or }, or turn logrotate off")


def test_a_host_that_does_not_resolve_is_named_with_the_fix():
    with pytest.raises(common_errors.InvalidOption) as raised:
        sglang_options.bind_state("no-such-host.invalid", 30000)
    assert str(raised.value).endswith("): give an address of this host or a name that resolves to one")


def test_launch_waits_five_seconds_at_most_for_the_start_time(tmp_path, monkeypatch):
    now, asked = [0], []
    monkeypatch.setattr(common_detached.time, "monotonic", lambda: now[0])

    def unreadable(pid, proc_root="/proc"):
        asked.append(now[0])
        now[0] += 1
    monkeypatch.setattr(common_detached, "process_start_time", unreadable)
    process, _offset, start_time = common_detached.launch(["sleep", "30"], {}, str(tmp_path / "s.log"))
    try:
        assert start_time is None and asked == [0, 1, 2, 3, 4]
    finally:
        process.kill()
        process.wait()


def test_terminate_waits_ten_seconds_for_what_sigkill_hit(monkeypatch):
    waits = []

    def wait_gone(pids, timeout):
        waits.append(timeout)
        return list(pids)
    monkeypatch.setattr(common_detached, "wait_gone", wait_gone)
    pid = gone_pid()
    assert common_detached.terminate([pid], 3) == [pid]
    assert waits == [3, 10]


def test_an_existing_log_file_is_no_problem(tmp_path):
    (tmp_path / "s.log").write_text("earlier run\n")
    assert sglang_options.log_path_problem(str(tmp_path / "s.log")) is None


def test_enable_metrics_adds_the_flag_sglang_knows_and_only_when_asked():
    assert "--enable-metrics" not in sglang_options.build_argv(options())
    argv = sglang_options.build_argv(options(enable_metrics=True))
    assert argv.count("--enable-metrics") == 1
    assert parse_args(argv[3:]).enable_metrics is True


def test_a_virtualenv_without_its_interpreter_is_named_by_venv_path(tmp_path):
    venv = str(tmp_path / "ml-env")
    problems = sglang_options.check_options(dict(valid(tmp_path), venv_path=venv, python=venv + "/bin/python"))
    assert problems == [
        "venv_path=%s has no executable bin/python or is not an absolute path: install the stack there first "
        "(role blackwell.gpu_node.ml_stack), or point venv_path at the virtualenv with the stack" % venv]


def stack_venv(root):
    """A virtualenv's lib/ with the stack's entries, an unrelated package, a link and an entry too deep."""
    site = root / "lib" / "python3.12" / "site-packages"
    for name in ("torch-2.9.1+cu130.dist-info", "sglang-0.5.9.dist-info", "sgl_kernel-0.3.21.dist-info",
                 "flashinfer_python-0.6.3.dist-info", "flashinfer_jit_cache-0.6.3+cu130.dist-info",
                 "numpy-2.3.5.dist-info", "torch/vendored/sglang-0.1.dist-info"):
        (site / name).mkdir(parents=True)
    (site / "_blackwell_gpu_node_env.py").write_text("ENV = {}\n")
    elsewhere = root / "elsewhere"
    (elsewhere / "torch-0.1.dist-info").mkdir(parents=True)
    (root / "lib" / "linked").symlink_to(elsewhere)
    (root / "lib" / "torch-1.0.dist-info").symlink_to(elsewhere / "torch-0.1.dist-info")
    return site


def test_runs_from_lists_the_stack_and_the_environment_three_levels_under_lib(tmp_path):
    site = stack_venv(tmp_path)
    env_sha1 = hashlib.sha1(b"ENV = {}\n").hexdigest()
    assert sglang_runs_from.runs_from(str(tmp_path)) == sorted(
        [[str(site / name), ""] for name in (
            "torch-2.9.1+cu130.dist-info", "sglang-0.5.9.dist-info", "sgl_kernel-0.3.21.dist-info",
            "flashinfer_python-0.6.3.dist-info", "flashinfer_jit_cache-0.6.3+cu130.dist-info")]
        # A link is listed by its name, without a checksum, and not followed.
        + [[str(site / "_blackwell_gpu_node_env.py"), env_sha1], [str(tmp_path / "lib" / "torch-1.0.dist-info"), ""]])


def test_the_digest_is_the_one_the_role_computed_with_ansible_filters(tmp_path):
    from ansible.plugins.filter.core import get_hash, to_json
    stack_venv(tmp_path)
    found = sglang_runs_from.runs_from(str(tmp_path) + "/")
    # The role's expression before the module: sorted paths zipped with checksums, to_json, hash('sha256').
    paths = [path for path, _checksum in found]
    checksums = [checksum for _path, checksum in found]
    assert sglang_runs_from.runs_from_digest(str(tmp_path)) == get_hash(to_json(list(zip(paths, checksums))), "sha256")


@pytest.mark.parametrize("change", [
    lambda site: (site / "torch-2.9.1+cu130.dist-info").rename(site / "torch-2.9.2+cu130.dist-info"),
    lambda site: (site / "_blackwell_gpu_node_env.py").write_text("ENV = {'NCCL_DEBUG': 'INFO'}\n"),
    lambda site: (site / "flashinfer_jit_cache-0.6.3+cu130.dist-info").rmdir(),
])
def test_a_change_of_the_stack_or_environment_changes_the_digest(tmp_path, change):
    site = stack_venv(tmp_path)
    before = sglang_runs_from.runs_from_digest(str(tmp_path))
    change(site)
    assert sglang_runs_from.runs_from_digest(str(tmp_path)) != before


def test_other_packages_leave_the_digest_alone(tmp_path):
    site = stack_venv(tmp_path)
    before = sglang_runs_from.runs_from_digest(str(tmp_path))
    (site / "numpy-2.3.5.dist-info").rename(site / "numpy-2.4.0.dist-info")
    (site / "torch" / "vendored" / "sglang-0.2.dist-info").mkdir()
    assert sglang_runs_from.runs_from_digest(str(tmp_path)) == before


def test_a_lib_too_large_to_walk_is_named(tmp_path):
    stack_venv(tmp_path)
    with pytest.raises(common_errors.InvalidOption, match=r"^venv_path=%s holds more than 5 entries under lib/" % tmp_path):
        sglang_runs_from.runs_from(str(tmp_path), max_entries=5)


def test_an_environment_module_swapped_for_a_fifo_or_grown_past_the_bound_is_refused_not_read(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    module = site / "_blackwell_gpu_node_env.py"
    module.write_text("ENVIRONMENT = {}\n")
    real_sha1 = sglang_runs_from.sha1_regular

    def swapped_after_the_listing(path, limit):
        os.unlink(path)
        os.mkfifo(path)
        return real_sha1(path, limit)
    monkeypatch.setattr(sglang_runs_from, "sha1_regular", swapped_after_the_listing)
    with pytest.raises(common_errors.InvalidOption) as raised:
        sglang_runs_from.runs_from(str(tmp_path))
    assert "%s cannot be fingerprinted" % module in str(raised.value)
    monkeypatch.setattr(sglang_runs_from, "sha1_regular", real_sha1)
    module.unlink()
    with open(str(module), "wb") as sparse:
        sparse.truncate(8 << 30)
    with pytest.raises(common_errors.InvalidOption):
        sglang_runs_from.runs_from(str(tmp_path))


def test_a_unit_without_secrets_needs_no_environment_file_and_one_with_secret_env_requires_it():
    text, secrets = sglang_service_files.systemd_unit("sglang", ["/v/bin/python"], {}, "/l", "/s/sglang.secret.env",
                                                      SERVICE)
    assert secrets == {} and "EnvironmentFile" not in text
    text, _secrets = sglang_service_files.systemd_unit("sglang", ["/v/bin/python"], {}, "/l", "/s/sglang.secret.env",
                                                       SERVICE, secret_env=["HF_TOKEN"])
    assert "\nEnvironmentFile=/s/sglang.secret.env\n" in text


def test_a_state_dir_another_user_can_write_is_never_trusted(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "sglang.json").write_text(json.dumps(GOOD_STATE))
    os.chown(str(state_dir), 65534, 65534)
    with pytest.raises(common_errors.InvalidOption, match="state_dir=%s: %s it belongs to nobody, not to root" % (
            state_dir, state_dir)):
        sglang_instance.Instance(str(state_dir), "sglang").load()
    os.chown(str(state_dir), 0, 0)
    os.chmod(str(state_dir), 0o777)
    with pytest.raises(common_errors.InvalidOption, match="its group or others can write it"):
        sglang_instance.Instance(str(state_dir), "sglang").load()
