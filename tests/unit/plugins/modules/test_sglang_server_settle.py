"""plugins/modules/sglang_server.py: what a run that leaves the server running sets back to what its start left
(settle_running, settle_logrotate), the unit file's mode and owner included, which no test without systemd
reaches."""
import json
import os
import stat

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import Instance
from ansible_collections.blackwell.gpu_node.plugins.modules import sglang_server

UNIT_TEXT = "[Service]\nExecStart=/opt/ml-env/bin/python -m sglang.launch_server\n"
STATE = dict(pid=1234, start_time=5, argv=["python"], env_digest="d", log_path="/l", offset=0)


class FakeModule(object):
    def __init__(self, params, check_mode):
        self.params, self.check_mode = params, check_mode


def mode_and_owner(path):
    info = os.stat(str(path))
    return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


def test_the_log_unit_and_state_files_of_a_running_server_are_set_back_and_check_mode_only_tells(tmp_path):
    units, logs = tmp_path / "units", tmp_path / "logs"
    units.mkdir()
    logs.mkdir()
    unit, log = units / "sglang-web.service", logs / "s.log"
    unit.write_text(UNIT_TEXT)
    os.chmod(str(unit), 0o666)
    log.write_text("a prompt")
    os.chmod(str(log), 0o644)
    instance = Instance(str(tmp_path / "state"), "web")
    instance.save(STATE)
    os.chmod(instance.state_path, 0o644)
    # The recorded unit directory, not the option's, holds the unit that runs.
    recorded = dict(STATE, unit="sglang-web.service", unit_dir=str(units))
    module = FakeModule(dict(log_path=str(log), systemd_unit_dir=str(tmp_path / "elsewhere")), check_mode=True)
    actions = ["set the mode and group of the log", "set the mode and owner of the unit file sglang-web.service",
               "set the mode and owner of the state files web.json"]
    assert sglang_server.settle_running(module, instance, recorded, UNIT_TEXT, 1) == actions
    assert [mode_and_owner(path) for path in (log, unit, instance.state_path)] == [
        (0o644, 0, 0), (0o666, 0, 0), (0o644, 0, 0)]

    module.check_mode = False
    assert sglang_server.settle_running(module, instance, recorded, UNIT_TEXT, 1) == actions
    assert [mode_and_owner(path) for path in (log, unit, instance.state_path)] == [
        (0o640, 0, 1), (0o644, 0, 0), (0o600, 0, 0)]
    assert unit.read_text() == UNIT_TEXT and log.read_text() == "a prompt"
    assert json.loads(open(instance.state_path).read()) == STATE
    assert sglang_server.settle_running(module, instance, recorded, UNIT_TEXT, 1) == []
    assert not os.path.exists(str(tmp_path / "elsewhere"))


def test_a_server_the_module_runs_has_no_unit_to_settle(tmp_path):
    (tmp_path / "logs").mkdir()
    instance = Instance(str(tmp_path / "state"), "web")
    module = FakeModule(dict(log_path=str(tmp_path / "logs" / "s.log"), systemd_unit_dir=str(tmp_path)), False)
    assert sglang_server.settle_running(module, instance, dict(STATE), None, None) == []
    assert os.listdir(str(tmp_path / "logs")) == [] and not os.path.exists(str(tmp_path / "state"))


def test_a_logrotate_file_is_rewritten_when_its_mode_drifted_and_check_mode_only_tells(tmp_path):
    rotation = tmp_path / "logrotate.d"
    rotation.mkdir()
    text = "# rotation\n"
    (rotation / "sglang-web").write_text(text)
    os.chmod(str(rotation / "sglang-web"), 0o666)
    module = FakeModule(dict(name="web", logrotate_dir=str(rotation)), check_mode=True)
    assert sglang_server.settle_logrotate(module, text) is True
    assert mode_and_owner(rotation / "sglang-web")[0] == 0o666
    module.check_mode = False
    assert sglang_server.settle_logrotate(module, text) is True
    assert mode_and_owner(rotation / "sglang-web")[0] == 0o644 and (rotation / "sglang-web").read_text() == text
    assert sglang_server.settle_logrotate(module, text) is False


def test_what_the_module_keeps_is_each_file_it_sets_back_with_the_mode_it_leaves(tmp_path):
    instance = Instance(str(tmp_path / "state"), "web")
    instance.save(STATE)
    params = dict(name="web", log_path="/var/log/sglang/web.log", manager="systemd", systemd_unit_dir="/units",
                  state_dir=str(tmp_path / "state"), logrotate=True, logrotate_dir="/rotate")
    state = str(tmp_path / "state")
    assert sglang_server.managed(params, instance) == [
        dict(path="/var/log/sglang/web.log", mode=None, text=False),
        dict(path="/units/sglang-web.service", mode="0644", text=True),
        dict(path=state + "/web.pid", mode="0600", text=False),
        dict(path=state + "/web.json", mode="0600", text=False),
        dict(path="/rotate/sglang-web", mode="0644", text=True)]
    # The module's own manager has no unit; the secret environment and launches files are listed once written.
    instance.write_secret_env("TOKEN=x\n")
    listed = sglang_server.managed(dict(params, manager="module", logrotate=False), instance)
    assert [found["path"] for found in listed] == [
        "/var/log/sglang/web.log", state + "/web.pid", state + "/web.json", state + "/web.secret.env"]
    # Its text is compared: systemd starts the server from it.
    assert [found["text"] for found in listed] == [False, False, False, True]
    assert instance.secret_env_text() == "TOKEN=x\n"
