"""The diagnosis core: which bytes are a launch's log, how it is classified, and the verdict's one line."""
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import diagnosis as core
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogPathError
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import instance as sglang_instance

LOGS = Path(__file__).resolve().parents[3] / "data" / "sglang_logs"
CUDNN = (LOGS / "failure-cudnn-check-torch291-partial.log").read_bytes()
READY = (LOGS / "success-tp1-qwen25-05b-docs-notebook-ci.log").read_bytes()


def launch(offset, pid=10, log_path="/var/log/sglang.log"):
    return dict(pid=pid, start_time=100, offset=offset, log_path=log_path, started_at=1.0, boot_id="b")


def test_an_earlier_launch_ends_where_the_next_one_begins():
    history = [launch(300, 3), launch(200, 2), launch(100, 1, "/old.log")]
    assert core.launch_window(history, 0) == (history[0], None)
    assert core.launch_window(history, 1) == (history[1], 300)
    # In another log (log_path changed) the next launch's offset says nothing about this one's end.
    assert core.launch_window(history, 2) == (history[2], None)


@pytest.mark.parametrize("history, back, words", [
    ([], 0, "launch=0: no launch of this server is recorded"),
    ([launch(0)], 3, "launch=3: only 1 launch(es) are recorded; ask for 0 (the latest) to 0"),
])
def test_a_launch_that_is_not_recorded_is_named(history, back, words):
    with pytest.raises(core.NoSuchLaunch, match=words.replace("(", r"\(").replace(")", r"\)")):
        core.launch_window(history, back)


def test_the_crash_two_launches_ago_is_classified_from_its_own_bytes(tmp_path):
    """A crash, then two good launches in the same log: launch 2 is the crash, launches 1 and 0 got ready."""
    log = tmp_path / "server.log"
    log.write_bytes(CUDNN + READY + READY)
    starts = [0, len(CUDNN), len(CUDNN) + len(READY)]
    history = [launch(starts[2]), launch(starts[1]), launch(starts[0])]
    verdicts = []
    for back in (2, 1, 0):
        chosen, end = core.launch_window(history, back)
        head, tail, left_out, note = core.read_launch_log(str(log), chosen["offset"], end)
        verdicts.append(core.classify_launch(head, tail))
    crash, first, second = verdicts
    assert crash["failure"]["diagnosis"]["id"] == "cudnn_check" and crash["ready_line"] is None
    assert first["failure"] is None and first["ready_line"] and second["failure"] is None


def test_a_log_shorter_than_the_offset_was_rotated(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"x\n")
    head, tail, left_out, note = core.read_launch_log(str(log), 100)
    assert (head, tail) == ([], []) and "less than this launch's offset 100: it was rotated" in note


def test_a_long_log_is_read_as_a_bounded_head_and_tail(tmp_path):
    """A server that ran for weeks: its start and its end are read, not the gigabytes between."""
    log = tmp_path / "server.log"
    with open(log, "wb") as handle:
        handle.write(b"[2026-01-01 00:00:00] start\n" + b"request line\n" * 2000 + b"RuntimeError: the end\n")
    head, tail, left_out, note = core.read_launch_log(str(log), 0, head_bytes=1000, tail_bytes=500)
    assert head[0] == "[2026-01-01 00:00:00] start" and "RuntimeError: the end" in tail
    assert left_out == os.path.getsize(log) - 1500 and note is None
    assert core.classify_launch(head, tail)["failure"]["cause"] == "RuntimeError: the end"


def test_only_a_regular_file_is_read_as_a_log(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LogPathError, match="is a FIFO"):
        core.read_launch_log(str(tmp_path / "fifo"), 0)


def test_secrets_in_the_launch_log_are_masked():
    found = core.classify_launch(["server_args=ServerArgs(api_key='k-123')", "RuntimeError: boom k-123"],
                                 mask=lambda text: text.replace("k-123", "********"))
    assert "k-123" not in str(found)


def report(**parts):
    base = dict(state={"running": False, "pid": 10}, launch=dict(launch(0), back=0),
                log={"ready_line": None, "failure": None}, kernel={"readable": True, "oom_kills": [], "xids": []})
    base.update(parts)
    return base


OOM = {"pid": 4242, "name": "python3", "scope": "memory cgroup", "anon_rss_kb": 123, "server": True,
       "matched_by": "pid"}
XID = {"xid": 79, "device": "0000:2b:00", "meaning": "GPU has fallen off the bus", "action": "Reboot", "server": False,
       "matched_by": None}


def test_the_verdict_names_the_cause_line_the_diagnosis_and_the_fix():
    failure = {"cause": "RuntimeError: cuDNN", "diagnosis": {"id": "cudnn_check", "fix": "Set X=1."}}
    line = core.verdict(report(log={"failure": failure}))
    assert line == "not running; the latest launch failed: RuntimeError: cuDNN [cudnn_check] Fix: Set X=1."


def test_the_verdict_names_the_oom_kill_when_the_log_has_no_traceback():
    line = core.verdict(report(kernel={"readable": True, "oom_kills": [OOM], "xids": [XID]}))
    assert "was killed by the kernel's OOM killer (memory cgroup: pid 4242 python3, 123 kB resident)" in line


@pytest.mark.parametrize("matched_by, name", [("process name", "python3"), ("sglang process title", "sglang::schedul")])
def test_the_verdict_does_not_conclude_an_oom_kill_matched_by_a_name_only(matched_by, name):
    by_name = dict(OOM, pid=5151, name=name, server=False, matched_by=matched_by)
    line = core.verdict(report(kernel={"readable": True, "oom_kills": [by_name], "xids": []}))
    assert line == (
        "not running; the latest launch shows no failure and no ready line; since the latest launch the kernel's "
        "OOM killer killed a process named like the server's (memory cgroup: pid 5151 %s, 123 kB resident), "
        "matched by its %s only: it is not known whether it was the server's" % (name, matched_by))
    assert "was killed" not in line


def test_a_running_server_is_not_said_to_be_killed_when_another_users_sglang_process_was():
    other = dict(OOM, pid=5151, name="sglang::schedul", server=False, matched_by="sglang process title")
    line = core.verdict(report(state={"running": True, "pid": 7}, log={"ready_line": "ready"},
                               kernel={"readable": True, "oom_kills": [other], "xids": []}))
    assert line.startswith("running (pid 7); the latest launch got ready; since the latest launch the kernel's "
                           "OOM killer killed a process named like the server's (")
    assert line.endswith("it is not known whether it was the server's")


def test_a_server_that_got_ready_and_ended_is_not_said_to_be_unkilled_when_a_name_matched():
    other = dict(OOM, server=False, matched_by="process name")
    line = core.verdict(report(log={"ready_line": "ready"}, kernel={"readable": True, "oom_kills": [other],
                                                                    "xids": []}))
    assert line.startswith("not running; the latest launch got ready, then ended without a traceback in its log; "
                           "since the latest launch the kernel's OOM killer killed a process named like")


def test_the_verdict_is_one_line_without_escapes_and_bounded():
    failure = {"cause": "RuntimeError: \x1b[31mboom\x1b[0m\n" + "x" * (4 << 20), "diagnosis": None}
    line = core.verdict(report(log={"failure": failure}))
    assert line.startswith("not running; the latest launch failed: RuntimeError: boom ")
    assert "\x1b" not in line and "\n" not in line and len(line.encode()) < 2100


def test_the_verdict_names_an_xid_with_its_meaning_and_what_to_do():
    kernel = {"readable": True, "oom_kills": [], "xids": [XID]}
    line = core.verdict(report(launch=dict(launch(0), back=2), kernel=kernel))
    assert line == ("not running; GPU 0000:2b:00 reported Xid 79 since the launch 2 before the latest: GPU has "
                    "fallen off the bus. Reboot")


def test_the_verdict_says_when_the_kernel_log_could_not_be_read():
    line = core.verdict(report(kernel={"readable": False, "problem": "kernel log not readable: dmesg: EPERM"}))
    assert line.endswith("shows no failure and no ready line (kernel log not readable: dmesg: EPERM)")


def test_the_verdict_of_a_running_ready_server():
    line = core.verdict(report(state={"running": True, "pid": 7, "restarts": 2}, log={"ready_line": "ready"}))
    assert line == "running (pid 7, 2 restarts by systemd); the latest launch got ready"


def test_the_verdict_of_a_running_server_that_serves():
    serving = {"serving": True, "message": "/health answered 200 in 0.0 s and POST /generate returned \" Paris.\""}
    line = core.verdict(report(state={"running": True, "pid": 7}, log={"ready_line": "ready"}, serving=serving))
    assert line == "running and serving (pid 7); the latest launch got ready"


def test_the_verdict_of_a_running_server_that_does_not_serve_names_the_probe_and_the_logs_cause():
    serving = {"serving": False, "message": "/health answered 200 in 0.0 s, but POST /generate gave no answer "
                                            "within 30.0 s"}
    failure = {"cause": "[TP0] torch.AcceleratorError: CUDA error: device-side assert triggered",
               "diagnosis": {"id": "gpu_kernel_assert", "fix": "Install the kernel library."}}
    line = core.verdict(report(state={"running": True, "pid": 7}, log={"ready_line": "ready", "failure": failure},
                               serving=serving))
    assert line == ("running but not serving (pid 7): /health answered 200 in 0.0 s, but POST /generate gave no "
                    "answer within 30.0 s; the latest launch failed: [TP0] torch.AcceleratorError: CUDA error: "
                    "device-side assert triggered [gpu_kernel_assert] Fix: Install the kernel library.")


def test_the_verdict_of_a_server_whose_health_times_out_while_its_process_lives():
    serving = {"serving": False, "message": "/health gave no answer within 10.0 s"}
    line = core.verdict(report(state={"running": True, "pid": 7}, log={"ready_line": "ready"}, serving=serving))
    assert line == "running but not serving (pid 7): /health gave no answer within 10.0 s; the latest launch got ready"


def test_gpu_processes_from_nvidia_smi():
    def smi(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, "4242, python3, 81234, GPU-abc\n", "")

    assert core.gpu_processes(run=smi) == ([{"pid": 4242, "name": "python3", "used_memory_mib": 81234,
                                             "gpu_uuid": "GPU-abc"}], None)

    def hostile(argv, **kwargs):
        rows = ["\u00b2, python3, 1, GPU-a", "%s, python3, 1, GPU-b" % ("9" * 5000), "7, x\x1b[2J, %s, GPU-\x1b]0;t\x07c"
                % ("9" * 5000)]
        return subprocess.CompletedProcess(argv, 0, "\n".join(rows) + "\n", "")

    assert core.gpu_processes(run=hostile) == ([{"pid": 7, "name": "x", "used_memory_mib": None,
                                                 "gpu_uuid": "GPU-c"}], None)

    def broken(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 9, "NVIDIA-SMI has failed because it couldn't communicate", "")

    assert core.gpu_processes(run=broken) == (None, "nvidia-smi failed: NVIDIA-SMI has failed because it "
                                                    "couldn't communicate")


def test_the_whole_message_when_no_launch_is_recorded():
    with pytest.raises(core.NoSuchLaunch) as raised:
        core.launch_window([], 0)
    assert str(raised.value) == ("launch=0: no launch of this server is recorded (the history begins with the first "
                                 "start by this collection's sglang_server)")


def test_asking_for_one_launch_more_than_recorded_names_the_range():
    with pytest.raises(core.NoSuchLaunch) as raised:
        core.launch_window([launch(200), launch(100)], 2)
    assert str(raised.value) == "launch=2: only 2 launch(es) are recorded; ask for 0 (the latest) to 1"


def test_a_launch_that_wrote_nothing_ends_where_it_began():
    older = launch(100)
    assert core.launch_window([launch(100, pid=11), older], 1) == (older, 100)


def write_log(tmp_path, data):
    log = tmp_path / "server.log"
    log.write_bytes(data)
    return str(log)


def test_a_log_exactly_as_long_as_the_offset_is_not_rotated(tmp_path):
    assert core.read_launch_log(write_log(tmp_path, b"0123456789"), 10) == ([""], [], 0, None)


def test_the_whole_note_of_a_rotated_log(tmp_path):
    assert core.read_launch_log(write_log(tmp_path, b"x\n"), 100) == ([], [], 0, (
        "the log is 2 bytes now, less than this launch's offset 100: it was rotated or truncated since, so this "
        "launch's lines are in a rotated file"))


def test_a_launch_in_the_middle_of_the_log_is_read_from_its_offset_to_its_end(tmp_path):
    log = write_log(tmp_path, b"old run\nnew \xff run\nRuntimeError: new\nnext run\n")
    assert core.read_launch_log(log, 8, end=36, head_bytes=20, tail_bytes=20) == (
        ["new \ufffd run", "RuntimeError: new", ""], [], 0, None)


def test_a_log_of_exactly_head_and_tail_bytes_is_read_whole(tmp_path):
    log = write_log(tmp_path, b"a1\nb2\nc3\nd4\n")
    assert core.read_launch_log(log, 0, head_bytes=6, tail_bytes=6) == (["a1", "b2", "c3", "d4", ""], [], 0, None)


def test_the_head_and_tail_lose_their_cut_lines_only(tmp_path):
    # 33 bytes: a head of 7 bytes ends mid-line ("a1\nb2\nc"), a tail of 8 bytes begins mid-line ("9\nj0\nk1\n");
    # the 18 bytes between them are left out.
    log = write_log(tmp_path, b"a1\nb2\nc3\nd4\ne5\nf6\ng7\nh8\ni9\nj0\nk1\n")
    assert core.read_launch_log(log, 0, head_bytes=7, tail_bytes=8) == (
        ["a1", "b2"], ["j0", "k1", ""], 33 - 7 - 8, None)


def test_a_launch_log_that_is_a_link_is_refused(tmp_path):
    target = write_log(tmp_path, b"RuntimeError: boom\n")
    os.symlink(target, tmp_path / "link.log")
    with pytest.raises(LogPathError, match="is a symbolic link"):
        core.read_launch_log(str(tmp_path / "link.log"), 0)


def test_a_fifo_in_place_of_the_log_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    outcome = []

    def read():
        try:
            core.read_launch_log(str(tmp_path / "fifo"), 0)
        except LogPathError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # a blocking open waits for a writer: give it one, so the thread ends
        os.close(os.open(tmp_path / "fifo", os.O_WRONLY | os.O_NONBLOCK))
    assert len(outcome) == 1 and not reader.is_alive()


def test_the_classification_has_the_ready_line_the_failure_and_the_last_lines():
    assert core.classify_launch(["[2026-01-01 12:00:00] starting", "", "[2026-01-01 12:00:01] more"]) == {
        "ready_line": None, "failure": None,
        "last_lines": ["[2026-01-01 12:00:00] starting", "[2026-01-01 12:00:01] more"]}


def fake_nvidia_smi(monkeypatch, tmp_path, script):
    folder = tmp_path / "bin"
    folder.mkdir()
    if script is not None:
        expected = "--query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits"
        (folder / "nvidia-smi").write_text('#!/bin/sh\n[ "$*" = "%s" ] || exit 3\n%s' % (expected, script))
        (folder / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


def test_gpu_processes_runs_nvidia_smi_with_its_query_and_reads_text(monkeypatch, tmp_path):
    fake_nvidia_smi(monkeypatch, tmp_path, "printf 'pid, process_name, used_memory, gpu_uuid\\n12\\n"
                                           "4242, python3 \\377, [N/A], GPU-abc\\n'\n")
    assert core.gpu_processes() == ([{"pid": 4242, "name": "python3 \ufffd", "used_memory_mib": None,
                                      "gpu_uuid": "GPU-abc"}], None)


@pytest.mark.parametrize("script, problem", [
    (None, "nvidia-smi cannot be run: No such file or directory"),
    ("printf '%0400d' 0; exit 9\n", "nvidia-smi failed: " + "0" * 300),
    ("echo 'Failed to initialize NVML: Driver/library version mismatch' >&2; exit 18\n",
     "nvidia-smi failed: Failed to initialize NVML: Driver/library version mismatch"),
])
def test_the_whole_problem_when_nvidia_smi_cannot_say(monkeypatch, tmp_path, script, problem):
    fake_nvidia_smi(monkeypatch, tmp_path, script)
    assert core.gpu_processes() == (None, problem)


@pytest.mark.parametrize("parts, line", [
    (dict(launch=None), "no launch recorded: nothing to diagnose"),
    (dict(launch=None, problem="the state file is unreadable"), "no launch recorded: the state file is unreadable"),
    (dict(launch=launch(0), log={"failure": {"cause": "RuntimeError: boom", "diagnosis": None}}),
     "not running; the latest launch failed: RuntimeError: boom"),
    (dict(state={"running": True, "pid": 7, "restarts": 0}, log={"ready_line": "ready"}),
     "running (pid 7); the latest launch got ready"),
    (dict(kernel={"readable": True, "oom_kills": [dict(OOM, anon_rss_kb=None)], "xids": []}),
     "not running; the latest launch was killed by the kernel's OOM killer (memory cgroup: pid 4242 python3): give "
     "the host (or its container or cgroup) more memory, or stop what else uses it"),
    (dict(kernel={"readable": True, "oom_kills": [], "xids": [dict(XID, xid=45, meaning="Preemptive cleanup")]}),
     "not running; the latest launch shows no failure and no ready line"),
    (dict(kernel={"readable": True, "oom_kills": [], "xids": [dict(XID, xid=109, meaning=None)]}),
     "not running; the latest launch shows no failure and no ready line"),
    (dict(log={"ready_line": "ready"}),
     "not running; the latest launch got ready, then ended without a traceback in its log or a kill in the "
     "kernel's"),
    # kernel_log=false: the kernel's log was not asked, so nothing is said of it.
    (dict(kernel=None), "not running; the latest launch shows no failure and no ready line"),
])
def test_the_whole_verdict(parts, line):
    assert core.verdict(report(**parts)) == line


def test_a_log_longer_than_5_mib_is_read_as_its_first_4_mib_and_last_mib(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes((b"x" * 99 + b"\n") * 60000)  # 6,000,000 bytes
    head, tail, left_out, note = core.read_launch_log(str(log), 0)
    # 4 MiB hold 41943 whole lines; the last MiB begins mid-line, then 10485 whole lines and the end.
    assert (len(head), len(tail), tail[-1], left_out, note) == (41943, 10486, "", 6000000 - (5 << 20), None)


def test_the_classification_keeps_the_last_40_lines():
    lines = ["line %d" % number for number in range(45)]
    assert core.classify_launch(lines)["last_lines"] == lines[5:]


def test_a_traceback_cut_off_at_the_end_of_a_finished_launch_is_its_failure():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>']
    failure = core.classify_launch(lines)["failure"]
    assert dict(failure, diagnosis=failure["diagnosis"]["id"]) == {
        "cause": "Python traceback (traceback cut off before its exception line)", "ranks": "",
        "traceback": "\n".join(lines), "diagnosis": "not_in_catalogue"}


def test_a_huge_line_and_terminal_escapes_are_cut_and_removed_in_every_text_of_the_report(tmp_path):
    # One line of 4 MiB: the whole launch fits in the 5 MiB read, so the line is read whole.
    lines = ["\x1b[31m[2026-01-01 12:00:00] Load weight begin\x1b[0m\x08\x08",
             "\x1b]0;title\x07\x1b[1mThe server is fired up and ready to roll!\x1b[0m",
             "Traceback (most recent call last):", '  File "a.py", line 1, in <module>\x1b[2J',
             "RuntimeError: \x1b[31mboom\x1b[0m " + "y" * ((4 << 20) - 100)]
    log = write_log(tmp_path, "\n".join(lines).encode() + b"\n")
    head, tail, _left_out, _note = core.read_launch_log(log, 0)
    found = core.classify_launch(head, tail)
    texts = [found["ready_line"], found["failure"]["cause"]] + found["last_lines"]
    texts += found["failure"]["traceback"].split("\n")
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text and len(text.encode()) <= 2048 + len(" [... 4194304 bytes cut]")
    assert found["ready_line"] == "The server is fired up and ready to roll!"
    assert found["last_lines"][0] == "[2026-01-01 12:00:00] Load weight begin"
    assert found["failure"]["cause"].startswith("RuntimeError: boom yyy") and found["failure"]["cause"].endswith(
        " bytes cut]")
    assert len(str(found)) < 5 * 2100


SECRET_ENV_VALUE = "hf_s3cr3t-T0ken"
API_KEY = "sk-diag-7c1"
ADMIN_KEY = "adm-9q"


def recorded_server(tmp_path):
    """What sglang_server records of a launch with an API key, a secret flag in extra_args and a secret_env."""
    instance = sglang_instance.Instance(str(tmp_path / "state"), "sglang")
    argv = ["/v/bin/python", "-m", "sglang.launch_server", "--api-key", API_KEY, "--admin-api-key=" + ADMIN_KEY,
            "--hf-token", "hf-flag-value"]
    state = dict(pid=4242, start_time=100, offset=0, log_path=str(tmp_path / "server.log"), started_at=1.0,
                 boot_id="b", argv=argv, env_digest="d", secret_flags=["--hf-token"])
    instance.save(state)
    instance.record_launch(state, [SECRET_ENV_VALUE])
    return instance, state


LEAKY_LOG = [
    "[2026-01-01 12:00:00] server_args=ServerArgs(model_path='/m', api_key='%s', admin_api_key='%s')" % (
        API_KEY, ADMIN_KEY),
    "[2026-01-01 12:00:01] hub login with token %s" % SECRET_ENV_VALUE,
    "[2026-01-01 12:00:02] relaunch: python -m sglang.launch_server --api-key=sk-other-4 --hf-token=hf-other-5",
    "[2026-01-01 12:00:03] the key is %s and the flag's value hf-flag-value" % API_KEY,
    "Traceback (most recent call last):",
    "RuntimeError: login with %s refused" % SECRET_ENV_VALUE,
]
SECRETS = (SECRET_ENV_VALUE, API_KEY, ADMIN_KEY, "sk-other-4", "hf-other-5", "hf-flag-value")


def test_the_launch_history_alone_masks_the_launchs_secrets_after_the_state_file_is_gone(tmp_path):
    instance, _state = recorded_server(tmp_path)
    instance.forget()
    assert instance.load() is None
    (launch_entry,) = instance.launches()
    found = core.classify_launch(LEAKY_LOG, mask=core.launch_mask(launch_entry))
    shown = str(found)
    assert [secret for secret in SECRETS if secret in shown] == []
    assert found["failure"]["cause"] == "RuntimeError: login with ******** refused"
    assert "--api-key=******** --hf-token=********" in shown


def test_the_masks_are_stored_in_the_root_only_history_and_not_shown():
    entry = dict(launch(0), secret_flags=["--hf-token"], secret_values=["v"])
    assert sglang_instance.shown_launch(entry) == launch(0)


def test_a_launch_recorded_before_its_secrets_were_is_masked_with_sglangs_flags_and_the_state(tmp_path):
    old_entry = launch(0)
    found = core.classify_launch(LEAKY_LOG[:3], mask=core.launch_mask(old_entry))
    assert API_KEY not in str(found) and ADMIN_KEY not in str(found) and "sk-other-4" not in str(found)
    _instance, state = recorded_server(tmp_path)
    found = core.classify_launch(LEAKY_LOG, mask=core.launch_mask(old_entry, state))
    assert [secret for secret in SECRETS if secret in str(found)] == [SECRET_ENV_VALUE]


@pytest.mark.parametrize("masks", [dict(secret_values="k-1"), dict(secret_values=[1]), dict(secret_flags=[None])])
def test_a_launch_whose_masks_are_not_lists_of_strings_is_left_out(tmp_path, masks):
    """Such an entry could not mask its log: it is not shown at all."""
    (tmp_path / "sglang.launches.json").write_text(json.dumps([dict(launch(0), **masks), launch(0, pid=11)]))
    assert [entry["pid"] for entry in sglang_instance.Instance(str(tmp_path), "sglang").launches()] == [11]
