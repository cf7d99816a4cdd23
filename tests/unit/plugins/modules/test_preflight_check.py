"""plugins/modules/preflight_check.py: its options as the preflight role passes them, on every supported core.

Before ansible-core 2.19 a template returns a string ("8", "True") and an expression's null the empty string;
2.19 keeps the native types. The module's suboptions have to give the core the same typed settings either way.
"""
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common import owner
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import nvidia_smi
from ansible_collections.blackwell.gpu_node.plugins.modules import preflight_check
from ansible_collections.blackwell.gpu_node.plugins.modules.preflight_check import ARGUMENT_SPEC

# The role's settings as a core before 2.19 templates them: every scalar a string, nulls kept by a bare variable.
TEMPLATED = dict(
    gpus_required="True", expected_gpu_family="blackwell", expected_compute_capability="12.0",
    expected_gpu_count="8", tensor_parallel_size="8", pipeline_parallel_size="1", nnodes="2", node_rank="0",
    dist_init_addr="10.0.0.1:5000", model_path="/models/llama", model_is_hub_id="False", venv_path="/opt/ml-env",
    venv_python="/usr/bin/python3.12", venv_min_free_gib="30", service_user_name="sglang",
    service_user_create="True", driver_install="False", driver_reboot="False", fabric_manager="auto",
    host="127.0.0.1", port="30000", gpu_health_severity_overrides={"pcie_width_degraded": "info"},
    library_paths={"runtime_env_extra_env": "", "sglang_server_env": "/opt/site/lib"}, venv_owner="sglang",
    torch_from="/opt/torch/.venv",
)
NATIVE = dict(
    gpus_required=True, expected_gpu_family="blackwell", expected_compute_capability="12.0",
    expected_gpu_count=8, tensor_parallel_size=8, pipeline_parallel_size=1, nnodes=2, node_rank=0,
    dist_init_addr="10.0.0.1:5000", model_path="/models/llama", model_is_hub_id=False, venv_path="/opt/ml-env",
    venv_python="/usr/bin/python3.12", venv_min_free_gib=30, service_user_name="sglang",
    service_user_create=True, driver_install=False, driver_reboot=False, fabric_manager="auto",
    host="127.0.0.1", port=30000, gpu_health_severity_overrides={"pcie_width_degraded": "info"},
    library_paths={"runtime_env_extra_env": "", "sglang_server_env": "/opt/site/lib"}, venv_owner="sglang",
    torch_from="/opt/torch/.venv",
)


def validated(settings, peers=()):
    result = ArgumentSpecValidator(ARGUMENT_SPEC).validate(dict(
        settings=settings, profile={}, host="gpu-1", peers=list(peers), venv_probe="print(1)"))
    return result


def test_settings_templated_as_strings_reach_the_core_typed_as_native_ones():
    result = validated(TEMPLATED)
    assert result.error_messages == []
    settings = result.validated_parameters["settings"]
    assert settings == NATIVE
    assert all(type(settings[name]) is type(NATIVE[name]) for name in NATIVE)


def test_unset_settings_stay_null_where_the_core_reads_null_as_any():
    result = validated(dict(TEMPLATED, expected_gpu_count=None, port=None, expected_gpu_family=None))
    assert result.error_messages == []
    settings = result.validated_parameters["settings"]
    assert (settings["expected_gpu_count"], settings["port"], settings["expected_gpu_family"]) == (None, None, None)


def test_peers_templated_as_strings_are_typed_too():
    result = validated(NATIVE, peers=[dict(host="gpu-2", nnodes="2", node_rank="1", dist_init_addr="10.0.0.1:5000")])
    assert result.error_messages == []
    assert result.validated_parameters["peers"] == [
        dict(host="gpu-2", nnodes=2, node_rank=1, dist_init_addr="10.0.0.1:5000")]


def test_a_setting_that_is_no_number_is_refused_by_its_name():
    result = validated(dict(TEMPLATED, tensor_parallel_size="eight"))
    assert any("tensor_parallel_size" in message for message in result.error_messages), result.error_messages


def test_no_severity_overrides_are_none_and_a_templated_dict_is_read_as_one():
    result = validated(dict(TEMPLATED, gpu_health_severity_overrides=None))
    assert result.validated_parameters["settings"]["gpu_health_severity_overrides"] is None
    unset = dict(TEMPLATED)
    del unset["gpu_health_severity_overrides"]
    assert validated(unset).validated_parameters["settings"]["gpu_health_severity_overrides"] == {}
    # Before ansible-core 2.19 a dict may reach the module as its JSON text.
    as_text = validated(dict(TEMPLATED, gpu_health_severity_overrides='{"xid_13": "degraded"}'))
    assert as_text.validated_parameters["settings"]["gpu_health_severity_overrides"] == {"xid_13": "degraded"}


def test_gpu_facts_and_the_health_share_one_nvidia_smi_q_each_command_bounded(monkeypatch):
    calls = []

    def run_bounded(argv, timeout):
        calls.append((argv, timeout))
        if argv[0] == "/missing":
            raise OSError(2, "No such file or directory")
        return 0, "out of %s" % argv[1:], ""
    monkeypatch.setattr(owner, "run_bounded", run_bounded)
    run = preflight_check.gpu_command_runner()
    assert run(["/usr/bin/nvidia-smi", "-q"]) == run(("/usr/bin/nvidia-smi", "-q")) == (0, "out of ['-q']", "")
    assert run(["/missing", "-q"]) == (127, "", "/missing: No such file or directory")
    assert calls == [(["/usr/bin/nvidia-smi", "-q"], nvidia_smi.COMMAND_TIMEOUT)] + [
        (["/missing", "-q"], nvidia_smi.COMMAND_TIMEOUT)]


def libcuda(directory, release):
    directory.mkdir(parents=True)
    (directory / ("libcuda.so." + release)).write_text("")
    (directory / "libcuda.so.1").symlink_to("libcuda.so." + release)
    return str(directory)


def test_the_loader_path_lists_each_directory_with_a_libcuda_and_who_puts_it_there(tmp_path):
    drivers = libcuda(tmp_path / "lib" / "x86_64-linux-gnu", "580.159.04")
    # An older driver's file left behind is not what libcuda.so.1 names: the loader never takes it.
    (tmp_path / "lib" / "x86_64-linux-gnu" / "libcuda.so.570.133.20").write_text("")
    compat = libcuda(tmp_path / "cuda-13.0" / "compat", "580.95.05")
    (tmp_path / "plain").mkdir()
    etc = tmp_path / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True)
    (etc / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (etc / "ld.so.conf.d" / "x86_64-linux-gnu.conf").write_text("# Multiarch support\n%s\n%s\n" % (
        str(tmp_path / "plain"), drivers))
    # Debian's alternatives link some of these files; a file that is no .conf is not read by ldconfig either.
    (tmp_path / "compat.conf").write_text(compat + "\n")
    (etc / "ld.so.conf.d" / "00-compat.conf").symlink_to(tmp_path / "compat.conf")
    (etc / "ld.so.conf.d" / "compat.conf.disabled").write_text(compat + "\n")
    (etc / "ld.so.conf.d" / "broken.conf").mkdir()
    found = preflight_check.loader_libcuda(
        {"sglang_server_env": "relative/lib:%s:%s" % (str(tmp_path / "missing"), compat), "runtime_env_extra_env": None},
        str(etc / "ld.so.conf"))
    assert found == [
        dict(directory=compat, libcuda="580.95.05", variable="sglang_server_env", file=None),
        dict(directory=compat, libcuda="580.95.05", variable=None, file=str(etc / "ld.so.conf.d" / "00-compat.conf")),
        dict(directory=drivers, libcuda="580.159.04", variable=None,
             file=str(etc / "ld.so.conf.d" / "x86_64-linux-gnu.conf"))]


def test_a_libcuda_that_names_no_release_is_no_release(tmp_path):
    (tmp_path / "libcuda.so.1").write_text("")
    assert preflight_check.libcuda_release(str(tmp_path)) is None
    (tmp_path / "dangling").mkdir()
    (tmp_path / "dangling" / "libcuda.so.1").symlink_to("libcuda.so.580.95.05")
    assert preflight_check.libcuda_release(str(tmp_path / "dangling")) is None


def test_a_linker_file_is_read_no_further_than_its_bound_and_without_a_linker_configuration_nothing_is_listed(tmp_path):
    directory = libcuda(tmp_path / "compat", "580.95.05")
    conf = tmp_path / "ld.so.conf"
    conf.write_bytes(b"\xff\n" + directory.encode() + b"\n" + b"#" * preflight_check.LD_SO_CONF_LIMIT + b"\n/beyond\n")
    assert preflight_check.conf_directories(str(conf)) == [(directory, str(conf))]
    assert preflight_check.loader_libcuda({}, str(tmp_path / "absent.conf")) == []
