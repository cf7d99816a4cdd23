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
                             "print(u.urlopen('http://127.0.0.1:38220/health').status)\"") == "200"


def test_unit_runs_the_virtualenv_and_keeps_the_api_key_in_a_root_only_file(host):
    unit = host.file("/etc/systemd/system/" + UNIT).content_string
    assert "ExecStart=/opt/ml-env/bin/python -m sglang.launch_server --model-path /srv/models/tiny" in unit
    assert "not-in-the-unit" not in unit and "--api-key ${BLACKWELL_GPU_NODE_SECRET_ARG_" in unit
    secrets = host.file("/var/lib/blackwell-gpu-node/sglang.secret.env")
    assert secrets.mode == 0o600 and "not-in-the-unit" in secrets.content_string


def test_output_goes_to_the_log(host):
    assert "The server is fired up and ready to roll!" in host.file("/var/log/sglang/sglang.log").content_string
