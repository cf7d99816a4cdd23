"""What preflight_check reads on the host itself, as the role's separate stat, slurp, getent and free-space tasks
read it before, and the refusal message the role's assert printed."""
import os
import pwd

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.preflight import (
    model_state,
    observe,
    refusal,
    reboot_required_state,
    venv_python_state,
)

FACTS = dict(distribution="Debian", distribution_version="12.9", architecture="x86_64", python={})
GPU = dict(state="no_nvidia_smi", gpus=[])
LOADER = dict(directory="/usr/lib/x86_64-linux-gnu", libcuda="580.95.05", variable=None,
              file="/etc/ld.so.conf.d/x86_64-linux-gnu.conf")


def settings(**changes):
    return dict(dict(model_path=None, model_is_hub_id=False, venv_path=None, service_user_create=True,
                     service_user_name="sglang"), **changes)


def test_no_announced_reboot(tmp_path):
    assert reboot_required_state(str(tmp_path / "reboot-required")) == (False, [])


def test_an_announced_reboot_names_its_packages(tmp_path):
    (tmp_path / "reboot-required").write_text("*** System restart required ***\n")
    (tmp_path / "reboot-required.pkgs").write_text("nvidia-kernel-open-dkms\nlinux-image-6.1\n")
    assert reboot_required_state(str(tmp_path / "reboot-required")) == (
        True, ["nvidia-kernel-open-dkms", "linux-image-6.1"])


def test_an_announced_reboot_without_its_package_list(tmp_path):
    (tmp_path / "reboot-required").write_text("")
    assert reboot_required_state(str(tmp_path / "reboot-required")) == (True, [])


def test_a_model_directory_with_its_config(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert model_state(settings(model_path=str(tmp_path))) == dict(exists=True, is_dir=True, config_json=True)


def test_a_model_directory_without_config(tmp_path):
    assert model_state(settings(model_path=str(tmp_path))) == dict(exists=True, is_dir=True, config_json=False)


def test_a_model_path_that_is_a_file_does_not_exist_as_a_directory(tmp_path):
    (tmp_path / "model").write_text("")
    assert model_state(settings(model_path=str(tmp_path / "model")))["is_dir"] is False


def test_a_link_to_the_model_directory_is_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "config.json").write_text("{}")
    (tmp_path / "model").symlink_to("real")
    assert model_state(settings(model_path=str(tmp_path / "model"))) == dict(exists=True, is_dir=True,
                                                                             config_json=True)


def test_a_missing_model_directory(tmp_path):
    assert model_state(settings(model_path=str(tmp_path / "missing"))) == dict(exists=False, is_dir=False,
                                                                               config_json=False)


def test_a_hub_id_or_no_model_is_not_looked_for_on_disk(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    nothing = dict(exists=False, is_dir=False, config_json=False)
    assert model_state(settings(model_path=str(tmp_path), model_is_hub_id=True)) == nothing
    assert model_state(settings()) == nothing


def test_the_interpreter_report_is_its_json():
    printed = '{"version": "3.11.2", "venv_error": null}\n'
    assert venv_python_state(0, printed, "") == dict(version="3.11.2", venv_error=None)


def test_an_interpreter_that_fails_gives_its_error_output_or_exit_status():
    assert venv_python_state(1, "", "  SyntaxError: invalid syntax\n") == dict(error="SyntaxError: invalid syntax")
    assert venv_python_state(127, "", "") == dict(error="exit status 127")


def test_an_interpreter_that_prints_no_json_is_an_error_not_a_traceback():
    assert venv_python_state(0, "Python 2.7\n", "") == dict(error="it printed no JSON: Python 2.7")


def test_observe_gathers_every_input_of_evaluate(tmp_path):
    (tmp_path / "model").mkdir()
    peers = [dict(host="gpu01", nnodes=1, node_rank=0, dist_init_addr=None)]
    observed = observe(settings(model_path=str(tmp_path / "model"), venv_path=str(tmp_path / "ml-env")), FACTS, GPU,
                       {"version": "3.11.2"}, "nvidia-fabricmanager-580\t580.95.05-1\tii \n", "free", "gpu01",
                       peers, reboot_required_path=str(tmp_path / "reboot-required"), gpu_health={"verdict": "healthy"},
                       loader=[LOADER], lock={"format": 1}, tree={"site_packages": "/opt/torch"})
    disk = observed.pop("disk")
    assert disk["directory"] == str(tmp_path) and disk["siblings"] == [] and disk["free_bytes"] > 0
    assert observed == dict(
        host="gpu01", distribution="Debian", distribution_version="12.9", architecture="x86_64", gpu=GPU,
        reboot_required=False, reboot_required_packages=[],
        model=dict(exists=True, is_dir=True, config_json=False), port_state="free", venv_python={"version": "3.11.2"},
        service_user_exists=False, fabric_packages="nvidia-fabricmanager-580\t580.95.05-1\tii \n", peers=peers,
        gpu_health={"verdict": "healthy"}, loader=[LOADER], lock={"format": 1},
        adopted_tree={"site_packages": "/opt/torch"})


def test_observe_measures_no_disk_without_a_virtualenv_path(tmp_path):
    observed = observe(settings(), FACTS, GPU, {}, "", None, "gpu01", [],
                       reboot_required_path=str(tmp_path / "reboot-required"))
    assert observed["disk"] == {} and observed["port_state"] is None and observed["venv_python"] == {}
    assert observed["loader"] is None


def test_the_service_user_is_looked_up_only_when_the_collection_is_not_to_create_it(tmp_path):
    me = pwd.getpwuid(os.getuid()).pw_name
    path = str(tmp_path / "reboot-required")
    assert observe(settings(service_user_name=me, service_user_create=False), FACTS, GPU, {}, "", None, "h", [],
                   reboot_required_path=path)["service_user_exists"] is True
    assert observe(settings(service_user_name="nobody-here-at-all", service_user_create=False), FACTS, GPU, {}, "",
                   None, "h", [], reboot_required_path=path)["service_user_exists"] is False
    assert observe(settings(service_user_name=me), FACTS, GPU, {}, "", None, "h", [],
                   reboot_required_path=path)["service_user_exists"] is False


def test_the_refusal_counts_and_numbers_every_problem():
    assert refusal("gpu01", dict(problems=["A: fix a.", "B: fix b."])) == (
        "Preflight refused gpu01; nothing was changed on it. 2 problem(s): (1) A: fix a. (2) B: fix b. ")
