"""restart_reasons: what makes sglang_server restart a server it runs, decided from its state and this run's options
alone."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.status import restart_reasons

UNIT = "[Service]\nExecStart=/home/sglang/ml-env/bin/python -m sglang.launch_server\n"
SECRETS = "HF_TOKEN=hf_s3cret\n"
SGLANG = {"user": "sglang", "group": "sglang"}


def recorded(**changes):
    state = dict(argv=["/home/sglang/ml-env/bin/python", "-m", "sglang.launch_server", "--api-key", "s3cret"],
                 env_digest="e1", manager="module", identity=SGLANG, log_path="/var/log/sglang/server.log")
    state.update(changes)
    return state


def wanted(**changes):
    options = dict(argv=list(recorded()["argv"]), env_digest="e1", manager="module", identity=SGLANG,
                   log_path="/var/log/sglang/server.log", unit_dir="/etc/systemd/system", unit_text=None, secret_env_text=None)
    options.update(changes)
    return options


def as_unit(**changes):
    return recorded(**dict(dict(manager="systemd", unit="sglang-sglang.service", unit_dir="/etc/systemd/system"),
                           **changes))


def unread():
    raise AssertionError("the unit file was read")


ENABLED = {"enabled": True}


def test_the_same_server_has_no_reason():
    assert restart_reasons(recorded(), wanted()) == []
    assert restart_reasons(as_unit(), wanted(manager="systemd", unit_text=UNIT, secret_env_text=SECRETS), ENABLED, lambda: UNIT, lambda: SECRETS) == []


@pytest.mark.parametrize("state, options, reason", [
    (recorded(), wanted(argv=["/usr/bin/python3", "-m", "sglang.launch_server"]), "its command line differs"),
    # Another entrypoint (the stack profile's changed) with the same flags: another command line.
    (recorded(), wanted(argv=["/home/sglang/ml-env/bin/python", "/home/sglang/ml-env/bin/sglang", "serve", "--api-key",
                              "s3cret"]), "its command line differs"),
    (recorded(), wanted(env_digest="e2"), "its environment differs"),
    (recorded(), wanted(identity={"user": "other", "group": "sglang"}), "it runs as sglang:sglang, not other:sglang"),
    # Recorded before the module had a user: root's, told apart by the missing identity alone.
    (dict((k, v) for k, v in recorded().items() if k != "identity"), wanted(),
     "it runs as root:root, not sglang:sglang"),
    (recorded(log_path="/var/log/sglang/old.log"), wanted(),
     "it logs to /var/log/sglang/old.log, not log_path=/var/log/sglang/server.log"),
    (recorded(), wanted(manager="systemd", unit_text=UNIT, secret_env_text=SECRETS), "it runs under manager=module, not systemd"),
])
def test_each_difference_is_a_reason_of_its_own(state, options, reason):
    assert restart_reasons(state, options) == [reason]


def test_secrets_on_the_command_line_are_never_shown():
    reasons = restart_reasons(recorded(), wanted(argv=["python", "--api-key", "other"]))
    assert reasons == ["its command line differs"] and "s3cret" not in repr(reasons)


def test_a_state_without_a_log_path_is_not_restarted_for_it():
    state = dict((key, value) for key, value in recorded().items() if key != "log_path")
    assert restart_reasons(state, wanted()) == []


def test_a_unit_in_another_directory_restarts_without_its_file_being_read():
    assert restart_reasons(as_unit(unit_dir="/run/systemd/system"), wanted(manager="systemd", unit_text=UNIT, secret_env_text=SECRETS),
                           ENABLED, unread, unread) == [
        "its unit is in /run/systemd/system, not systemd_unit_dir=/etc/systemd/system"]


def test_a_state_without_a_unit_directory_is_taken_as_in_the_one_asked_for():
    state = as_unit()
    del state["unit_dir"]
    assert restart_reasons(state, wanted(manager="systemd", unit_text=UNIT, secret_env_text=SECRETS), ENABLED, lambda: UNIT, lambda: SECRETS) == []


def test_a_disabled_unit_or_another_unit_file_restarts():
    options = wanted(manager="systemd", unit_text=UNIT, secret_env_text=SECRETS)
    assert restart_reasons(as_unit(), options, {"enabled": False}, unread, unread) == [
        "its unit sglang-sglang.service is disabled"]
    assert restart_reasons(as_unit(), options, ENABLED, lambda: UNIT + "# edited\n", lambda: SECRETS) == [
        "its unit file sglang-sglang.service is not the one these options write"]
    assert restart_reasons(as_unit(), options, ENABLED, lambda: None, lambda: SECRETS) == [
        "its unit file sglang-sglang.service is not the one these options write"]


def test_a_secret_file_edited_by_hand_or_gone_restarts_and_is_never_shown():
    options = wanted(manager="systemd", unit_text=UNIT, secret_env_text=SECRETS)
    for installed in ("HF_TOKEN=hf_other\n", None):
        reasons = restart_reasons(as_unit(), options, ENABLED, lambda: UNIT, lambda: installed)
        assert reasons == ["its secret environment file is not the one these options write"]
        assert "s3cret" not in repr(reasons) and "other" not in repr(reasons)


def test_every_difference_is_named_at_once():
    reasons = restart_reasons(recorded(log_path="/old.log", env_digest="e0"), wanted(argv=["python"]))
    assert reasons == ["its command line differs", "its environment differs",
                       "it logs to /old.log, not log_path=/var/log/sglang/server.log"]
