"""The server runs as a systemd unit with the module's command, its secrets kept out of the unit."""
import json

testinfra_hosts = ["docker://sglang-systemd"]
UNIT = "sglang-sglang.service"


def test_unit_is_active_enabled_and_its_main_pid_is_the_recorded_one(host):
    service = host.service(UNIT)
    assert service.is_running and service.is_enabled
    main_pid = host.check_output("systemctl show --property=MainPID --value " + UNIT)
    assert json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)["pid"] == int(main_pid)


def test_server_answers_health(host):
    assert host.check_output("python3 -c \"import urllib.request as u; "
                             "print(u.urlopen('http://127.0.0.1:28220/health').status)\"") == "200"


TRICKY = 'tiny $HOME "q" \\b `x` 50% %h'


def test_unit_runs_the_virtualenv_and_keeps_the_api_key_in_a_root_only_file(host):
    unit = host.file("/etc/systemd/system/" + UNIT).content_string
    assert "ExecStart=/opt/ml-env/bin/python -m sglang.launch_server --model-path /srv/models/tiny" in unit
    assert "not-in-the-unit" not in unit and "--api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_" in unit
    secrets = host.file("/var/lib/blackwell-gpu-node/sglang.secret.env")
    assert secrets.mode == 0o600 and "not-in-the-unit" in secrets.content_string
    assert host.file("/etc/systemd/system/" + UNIT).mode == 0o644


def test_unit_has_only_the_directives_the_module_writes(host):
    unit = host.file("/etc/systemd/system/" + UNIT).content_string
    keys = [line.split("=", 1)[0] for line in unit.splitlines() if line and not line.startswith(("#", "["))]
    assert set(keys) <= {"Description", "After", "Wants", "Type", "ExecStart", "Environment", "EnvironmentFile",
                         "StandardOutput", "StandardError", "Restart", "RestartSec", "KillMode", "TimeoutStopSec",
                         "WantedBy", "StartLimitIntervalSec", "StartLimitBurst", "User", "Group", "UMask",
                         "NoNewPrivileges", "ProtectSystem", "PrivateTmp", "ProtectKernelTunables",
                         "ProtectKernelModules", "ProtectControlGroups", "RestrictSUIDSGID", "LockPersonality",
                         "RestrictRealtime"}
    assert keys.count("ExecStart") == 1


def test_the_server_gets_exactly_the_command_line_and_environment_given(host):
    # Quoting for ExecStart=, Environment= and the EnvironmentFile: $, quotes, backslash, backquote, % and
    # spaces arrive as they were given.
    main_pid = int(host.check_output("systemctl show --property=MainPID --value " + UNIT))
    argv = host.check_output("tr '\\0' '\\n' < /proc/%d/cmdline" % main_pid).split("\n")
    assert argv[argv.index("--served-model-name") + 1] == TRICKY
    assert argv[argv.index("--api-key") + 1] == 'not-in-the-unit $HOME "q" \\b `x` 50%'
    environ = host.check_output("tr '\\0' '\\n' < /proc/%d/environ" % main_pid).split("\n")
    assert "SGLANG_NOTE=a $HOME \"q\" \\b `x` 50% %h" in environ and "SGLANG_STANDIN_STEP=0.02" in environ


def test_the_log_is_not_world_readable(host):
    assert host.file("/var/log/sglang/sglang.log").mode == 0o640


def test_output_goes_to_the_log(host):
    assert "The server is fired up and ready to roll!" in host.file("/var/log/sglang/sglang.log").content_string


def main_pid(host):
    return int(host.check_output("systemctl show --property=MainPID --value " + UNIT))


def test_the_server_runs_as_the_service_user_not_root(host):
    sglang = host.user("sglang")
    status = host.file("/proc/%d/status" % main_pid(host)).content_string
    uids = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")][0]
    assert uids == [str(sglang.uid)] * 4 and sglang.uid != 0
    unit = host.file("/etc/systemd/system/" + UNIT).content_string
    assert "User=sglang" in unit and "Group=sglang" in unit and "UMask=0027" in unit
    assert "StartLimitBurst=5" in unit and "RestartSec=2" in unit


def test_the_root_server_of_the_previous_version_was_migrated(host):
    legacy = int(host.file("/root/legacy-server.pid").content_string)
    assert not host.file("/proc/%d" % legacy).exists
    state = json.loads(host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)
    assert state["manager"] == "systemd" and state["identity"] == {"user": "sglang", "group": "sglang"}
    assert sorted(host.file("/var/lib/blackwell-gpu-node").listdir()) == ["sglang.capacity.json", "sglang.json",
                                                                          "sglang.launches.json", "sglang.pid",
                                                                          "sglang.secret.env"]


def test_the_log_stays_roots_and_is_rotated(host):
    log = host.file("/var/log/sglang/sglang.log")
    assert log.user == "root" and log.mode == 0o640
    rotation = host.file("/etc/logrotate.d/sglang-sglang").content_string
    assert '"/var/log/sglang/sglang.log" {' in rotation and "copytruncate" in rotation
