"""plugins/modules/sglang_server.py: what a launch records for the readiness gate to judge its start by - the digest
of its command line and the processes that held GPU memory just before it (capacity.holders_at_launch)."""
import os
import signal

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import capacity
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import Instance
from ansible_collections.blackwell.gpu_node.plugins.modules import sglang_server

HOLDER = {"pid": 4242, "user": "alice", "command": "python3 train.py", "used_memory_mib": 79000, "gpu_uuid": "GPU-0"}


class FakeModule(object):
    def __init__(self, params):
        self.params, self.check_mode = params, False

    def fail_json(self, **result):
        raise AssertionError(result)


def test_a_launch_records_its_command_digest_and_the_gpu_holders_before_it(tmp_path, monkeypatch):
    seen = []

    def holders_at_launch():
        seen.append(os.path.exists(str(tmp_path / "state" / "sglang.pid")))
        return [HOLDER]
    monkeypatch.setattr(sglang_server, "holders_at_launch", holders_at_launch)
    params = dict(manager="module", env={}, secret_env={}, log_path=str(tmp_path / "logs" / "s.log"), secret_flags=[],
                  state_dir=str(tmp_path / "state"), stop_timeout=5)
    instance = Instance(params["state_dir"], "sglang")
    argv = ["/bin/sleep", "30"]
    result = {"actions": []}
    sglang_server.start(FakeModule(params), instance, argv, None, None, None, result)
    try:
        assert seen == [False]  # asked before the server was started
        assert result["gpu_holders"] == [HOLDER] and result["actions"] == ["started"]
        (launch,) = instance.launches()
        assert launch["argv_digest"] == capacity.command_digest(argv) and launch["gpu_holders"] == [HOLDER]
        assert instance.launch_of(result["pid"], result["offset"]) == launch
        assert instance.load()["gpu_holders"] == [HOLDER]
    finally:
        os.killpg(result["pid"], signal.SIGKILL)
        os.waitpid(result["pid"], 0)
