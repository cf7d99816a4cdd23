import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils import _sglang_server as core

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
        speculative=None, api_key=None, extra_args=[], log_path="/tmp/server.log",
    )
    params.update(changes)
    return params


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


def test_api_key_is_masked():
    argv = core.build_argv(options(api_key="s3cr3t"))
    assert argv[-2:] == ["--api-key", "s3cr3t"]
    assert core.masked(argv)[-2:] == ["--api-key", "********"]
    assert "s3cr3t" not in core.masked(argv)


def test_env_digest_ignores_order_and_sees_values():
    assert core.env_digest({"A": "1", "B": "2"}) == core.env_digest({"B": "2", "A": "1"})
    assert core.env_digest({"A": "1"}) != core.env_digest({"A": "2"})


def valid(tmp_path):
    (tmp_path / "model").mkdir()
    return options(python=sys.executable, model_path=str(tmp_path / "model"), log_path=str(tmp_path / "s.log"))


def test_valid_options_have_no_problem(tmp_path):
    assert core.check_options(valid(tmp_path)) == []


@pytest.mark.parametrize("change,problem", [
    (dict(python="/nonexistent/python"), "python=/nonexistent/python is missing or not executable"),
    (dict(model_path="/nonexistent/model"), "model_path=/nonexistent/model is not a directory on the host"),
    (dict(tensor_parallel_size=0), "tensor_parallel_size=0 must be a positive integer"),
    (dict(port=70000), "port=70000 is out of range (1-65535)"),
    (dict(nnodes=2, node_rank=2, dist_init_addr="h:1"), "node_rank=2 must be at least 0 and less than nnodes=2"),
    (dict(nnodes=2, node_rank=1, dist_init_addr="10.0.0.1"), "dist_init_addr='10.0.0.1' must be HOST:PORT"),
    (dict(log_path="/nonexistent/dir/s.log"), "log_path=/nonexistent/dir/s.log: its directory /nonexistent/dir"),
    (dict(speculative={"algorithm": "EAGLE3", "draft_model_path": None}), "speculative.draft_model_path is required"),
])
def test_each_bad_option_is_named(tmp_path, change, problem):
    params = valid(tmp_path)
    params.update(change)
    problems = core.check_options(params)
    assert len(problems) == 1 and problems[0].startswith(problem)


def test_hub_id_is_not_looked_for_on_disk(tmp_path):
    params = valid(tmp_path)
    params.update(model_path="moonshotai/Kimi-K2.5", model_is_hub_id=True)
    assert core.check_options(params) == []


def test_instance_recognises_its_process_by_start_time(tmp_path):
    instance = core.Instance(str(tmp_path / "state"), "sglang")
    child = subprocess.Popen(["sleep", "30"])
    try:
        state = {"pid": child.pid, "start_time": core.process_start_time(child.pid), "argv": ["sleep", "30"]}
        instance.save(state)
        assert (tmp_path / "state" / "sglang.pid").read_text() == "%d\n" % child.pid
        assert oct((tmp_path / "state" / "sglang.json").stat().st_mode & 0o777) == "0o600"
        assert core.Instance.running(instance.load())
        reused = dict(state, start_time=state["start_time"] - 1)  # same pid, another process
        assert not core.Instance.running(reused)
    finally:
        child.kill()
        child.wait()
    assert not core.Instance.running(instance.load())
    instance.forget()
    assert instance.load() is None


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


def test_port_is_free():
    import socket
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert core.port_is_free("127.0.0.1", port) is False
    assert core.port_is_free("127.0.0.1", port) is True


def test_systemd_unit_runs_the_same_command_and_keeps_secrets_out_of_it():
    argv = ["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/shared/kimi k2",
            "--api-key", "s3cr$t", "--served-model-name", "50%"]
    text, secrets = core.systemd_unit("sglang", argv, {"SGLANG_STANDIN_STEP": "0.05", "NOTE": "a b"},
                                      "/var/log/sglang/sglang.log", 30, "/var/lib/blackwell-gpu-node/sglang.secret.env")
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_start == ('ExecStart=/home/sglang/ml-env/bin/python -m sglang.launch_server --model-path '
                          '"/shared/kimi k2" --api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_6} --served-model-name "50%%"')
    assert "s3cr" not in text
    assert secrets == {"BLACKWELL_GPU_NODE_SECRET_ARG_6": "s3cr$t"}
    assert 'Environment="NOTE=a b"' in text and "Environment=SGLANG_STANDIN_STEP=0.05" in text
    assert "StandardOutput=append:/var/log/sglang/sglang.log" in text and "TimeoutStopSec=30" in text
    assert "EnvironmentFile=-/var/lib/blackwell-gpu-node/sglang.secret.env" in text
    assert core.environment_file(dict(secrets, TOKEN='a"b')) == 'BLACKWELL_GPU_NODE_SECRET_ARG_6="s3cr$t"\nTOKEN="a\\"b"\n'


@pytest.mark.parametrize("word,quoted", [("--tp", "--tp"), ("/a/b.c", "/a/b.c"), ("a b", '"a b"'), ("$HOME", '"$$HOME"'),
                                         ('say "hi"', '"say \\"hi\\""'), ("back\\slash", '"back\\\\slash"')])
def test_systemd_quote(word, quoted):
    assert core.systemd_quote(word) == quoted
