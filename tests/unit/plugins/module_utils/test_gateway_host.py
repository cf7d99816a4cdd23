"""_gateway/host.py: what runs the gateway on a host, and the files it keeps as a start leaves them."""
import os
import stat

from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import service
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway.host import (
    ENVIRONMENT,
    OPTIONS,
    Gateway,
    checked_settings,
    process_restart_reasons,
)

UNIT_TEXT = "[Service]\nExecStart=/opt/blackwell-gpu-node/gateway/bin/python -I launch.py\n"
STATE = dict(pid=1234, start_time=5, argv=["python"], env_digest="d", log_path="/l", offset=0)


class FakeModule(object):
    """The module as Gateway asks it: its options, systemctl (answering `show` with a running unit whose main
    pid is this process) and the commands run."""

    def __init__(self, tmp_path, systemctl=None):
        self.params = dict(systemd_unit_dir=str(tmp_path / "units"), state_dir=str(tmp_path / "state"),
                           log_path=str(tmp_path / "logs" / "gateway.log"))
        self.systemctl, self.commands = systemctl, []

    def get_bin_path(self, name, required=False):
        return self.systemctl

    def run_command(self, argv):
        self.commands.append(argv[1:])
        return 0, "MainPID=%d\nActiveState=active\nSubState=running\n" % os.getpid(), ""


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_the_unit_of_a_running_gateway_gets_its_mode_back_and_check_mode_only_tells(tmp_path):
    (tmp_path / "units").mkdir()
    unit = tmp_path / "units" / service.UNIT
    unit.write_text(UNIT_TEXT)
    os.chmod(str(unit), 0o666)
    gateway = Gateway(FakeModule(tmp_path))
    action = ["set the mode and owner of the unit %s" % service.UNIT]
    assert gateway.settle_running("systemd", UNIT_TEXT, check=True) == action and mode(unit) == 0o666
    assert gateway.settle_running("systemd", UNIT_TEXT) == action and mode(unit) == 0o644
    assert unit.read_text() == UNIT_TEXT
    assert gateway.settle_running("systemd", UNIT_TEXT) == []


def test_the_log_and_state_files_of_a_gateway_the_module_runs_get_their_modes_back(tmp_path):
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "gateway.log"
    log.write_text("")
    os.chmod(str(log), 0o644)
    gateway = Gateway(FakeModule(tmp_path))
    gateway.process.save(STATE)
    os.chmod(gateway.process.pid_path, 0o644)
    actions = ["set the mode of the log", "set the mode and owner of the state files sglang-gateway.pid"]
    assert gateway.settle_running("module", None, check=True) == actions
    assert (mode(log), mode(gateway.process.pid_path)) == (0o644, 0o644)
    assert gateway.settle_running("module", None) == actions
    assert (mode(log), mode(gateway.process.pid_path)) == (0o640, 0o600)
    assert gateway.settle_running("module", None) == []


def test_what_the_module_keeps_is_each_file_it_sets_back_with_the_mode_it_leaves(tmp_path):
    gateway = Gateway(FakeModule(tmp_path))
    state = str(tmp_path / "state")
    assert gateway.managed("systemd") == [
        dict(path=str(tmp_path / "units" / service.UNIT), mode="0644", text=True)]
    # The module's own manager: the log, and the state files once a start has written them.
    assert gateway.managed("module") == [dict(path=str(tmp_path / "logs" / "gateway.log"), mode=None, text=False)]
    gateway.process.save(STATE)
    assert gateway.managed("module") == [
        dict(path=str(tmp_path / "logs" / "gateway.log"), mode=None, text=False),
        dict(path=state + "/sglang-gateway.pid", mode="0600", text=False),
        dict(path=state + "/sglang-gateway.json", mode="0600", text=False)]
    # Each mode listed is the one settle_running sets back.
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "gateway.log").write_text("")
    for found in gateway.managed("module"):
        os.chmod(found["path"], 0o666)
    gateway.settle_running("module", None)
    assert [(mode(found["path"]) & 0o007 == 0) if found["mode"] is None else "%04o" % mode(found["path"])
            for found in gateway.managed("module")] == [True, "0600", "0600"]
    (tmp_path / "units").mkdir()
    (tmp_path / "units" / service.UNIT).write_text(UNIT_TEXT)
    os.chmod(str(tmp_path / "units" / service.UNIT), 0o666)
    gateway.settle_running("systemd", UNIT_TEXT)
    assert ["%04o" % mode(found["path"]) for found in gateway.managed("systemd")] == ["0644"]


def test_a_unit_whose_mode_drifted_is_written_again_when_it_starts(tmp_path):
    (tmp_path / "units").mkdir()
    unit = tmp_path / "units" / service.UNIT
    unit.write_text(UNIT_TEXT)
    os.chmod(str(unit), 0o666)
    module = FakeModule(tmp_path, systemctl="/usr/bin/systemctl")
    assert Gateway(module).run_unit(UNIT_TEXT, restart=False) == os.getpid()
    assert mode(unit) == 0o644 and unit.read_text() == UNIT_TEXT
    assert module.commands[0] == ["daemon-reload"] and ["restart", service.UNIT] in module.commands
    module.commands[:] = []
    Gateway(module).run_unit(UNIT_TEXT, restart=False)
    assert ["daemon-reload"] not in module.commands and ["start", service.UNIT] in module.commands


def test_a_gateway_the_module_runs_restarts_for_its_command_line_log_or_user_only():
    argv = ["/opt/gateway/bin/python", "-I", "launcher.py", "--admin-key-file", "/etc/keys"]
    recorded = {"argv": argv, "env_digest": service.environment_digest(ENVIRONMENT), "log_path": "/var/log/g.log",
                "uid": 0}
    root = {"user": "root", "uid": 0}
    assert process_restart_reasons(recorded, list(argv), root, "/var/log/g.log") == []
    assert process_restart_reasons(recorded, argv + ["--policy", "random"], root, "/var/log/g.log") == [
        "its command line differs"]
    assert process_restart_reasons(recorded, argv, root, "/var/log/new.log") == [
        "it logs to /var/log/g.log, not log_path=/var/log/new.log"]
    assert process_restart_reasons(recorded, argv, {"user": "gateway", "uid": 998}, "/var/log/g.log") == [
        "it runs as uid 0, not user=gateway"]
    assert process_restart_reasons(dict(recorded, env_digest="other"), argv, root, "/var/log/g.log") == [
        "its environment differs"]


def test_the_settings_carry_the_package_whose_policies_and_module_they_take():
    params = dict((key, spec.get("default")) for key, spec in OPTIONS.items())
    assert (OPTIONS["package"]["default"], OPTIONS["package"]["choices"]) == ("sglang-router", ["sglang-router", "smg"])
    params.update(admin_key="adm", package="smg", policy="least_load")
    settings, problems = checked_settings(params)
    assert problems == [] and settings["package"] == "smg"
    argv = service.launcher_argv(settings, "/py", "/launch.py", "/s.json", "/w.json")
    assert argv[argv.index("--gateway-module") + 1] == "smg.launch_router"
    problems = checked_settings(dict(params, package="sglang-router"))[1]
    assert len(problems) == 1 and problems[0].startswith("gateway_policy='least_load' is not a policy the role runs "
                                                         "sglang-router with")
