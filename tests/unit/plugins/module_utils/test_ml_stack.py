import configparser
import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.cudnn import cudnn_check, cudnn_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    build_decision,
    PIP_OPTIONS,
    build_plan,
    classify_pip_check,
    dependencies,
    diagnose,
    error_line,
    manylinux_platforms,
    missing_system_packages,
    missing_wheels,
    pip_check_explanation,
    prune_plan,
    verdict,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
CU130 = resolve("cu130", PROFILES)
CU128 = resolve("cu128", PROFILES)
SGL_KERNEL_CU130_URL = ("https://github.com/sgl-project/whl/releases/download/v0.3.21/"
                        "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl")
SGL_KERNEL_CU130_WHEEL = "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"

SETTINGS = {
    "venv_path": "/home/sglang/ml-env",
    "venv_owner": "sglang",
    "python": "/usr/bin/python3",
    "index_url": "https://pypi.org/simple",
    "index_mirrors": {},
    "pip_environment": {},
    "offline": False,
    "wheelhouse_path": "/var/cache/blackwell-gpu-node/wheelhouse",
    "wheelhouse_controller_path": None,
}
HOST = {
    "python": {"version": "3.11.2", "implementation": "cpython", "machine": "x86_64", "glibc": "2.36", "venv_error": None},
    "owner": True,
    "venv_path": {"exists": False, "islnk": False},
    "parent_exists": True,
}


def plan_of(profile=None, host=None, **settings):
    return build_plan(dict(SETTINGS, **settings), profile or CU130, host or HOST)


def host_with(**python):
    host = copy.deepcopy(HOST)
    host["python"].update(python)
    return host


# The plan: where the virtualenv goes, and the pip runs.

def test_reference_profile_is_installed_in_two_pip_runs_sglang_alone_first():
    plan = plan_of()
    assert plan["problems"] == []
    assert plan["install"]["sglang"] == ["install"] + PIP_OPTIONS + [
        "--no-deps", "--index-url", "https://pypi.org/simple", "sglang===0.5.9"]
    assert plan["install"]["stack"] == ["install"] + PIP_OPTIONS + [
        "--index-url", "https://pypi.org/simple",
        "--extra-index-url", "https://download.pytorch.org/whl/cu130",
        "--extra-index-url", "https://flashinfer.ai/whl/cu130",
        "torch===2.9.1+cu130",
        "sgl-kernel @ " + SGL_KERNEL_CU130_URL,
        "flashinfer-python===0.6.4",
        "flashinfer-cubin===0.6.4",
        "flashinfer-jit-cache===0.6.4+cu130",
    ]


def test_every_pin_is_in_the_constraints_that_the_virtualenvs_pip_conf_names():
    plan = plan_of()
    pins = [line for line in plan["constraints"].splitlines() if not line.startswith("#")]
    assert pins == ["torch===2.9.1+cu130", "sgl-kernel===0.3.21", "flashinfer-python===0.6.4",
                    "flashinfer-cubin===0.6.4", "flashinfer-jit-cache===0.6.4+cu130", "sglang===0.5.9"]
    # Read as pip reads it: its own configparser, options from [global] or from [install] for pip install.
    pip_conf = configparser.RawConfigParser()
    pip_conf.read_string(plan["pip_conf"])
    constraints = [pip_conf.get(section, "constraint") for section in ("global", "install")
                   if pip_conf.has_option(section, "constraint")]
    assert constraints == [plan["files"]["constraints"]] == ["%s/ml-stack-constraints.txt" % plan["venv_dir"]]


def test_pip_itself_reads_the_constraints_from_the_virtualenvs_pip_conf(tmp_path):
    # pip's own option parser for `pip install`, fed only this file: a section pip does not read for install
    # ([pip], [installs]) leaves the constraints unset, and an eager install then replaces torch.
    plan = plan_of()
    (tmp_path / "pip.conf").write_text(plan["pip_conf"])
    isolated = dict(PATH="/usr/bin:/bin", HOME=str(tmp_path), XDG_CONFIG_DIRS=str(tmp_path / "none"),
                    PIP_CONFIG_FILE=str(tmp_path / "pip.conf"))
    seen = subprocess.run(
        [sys.executable, "-c", "from pip._internal.commands import create_command; "
         "print('\\n'.join(create_command('install').parse_args([])[0].constraints))"],
        env=isolated, capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    assert seen == [plan["files"]["constraints"]]


def test_pip_conf_names_a_constraints_path_with_ini_syntax_in_it_as_it_is():
    plan = plan_of(venv_path="/srv/a %(b)s; c # d/ml-env")
    pip_conf = configparser.RawConfigParser()
    pip_conf.read_string(plan["pip_conf"])
    assert pip_conf.get("global", "constraint") == plan["files"]["constraints"]
    assert plan["files"]["constraints"].startswith("/srv/a %(b)s; c # d/ml-env.cu130-")


@pytest.mark.parametrize("settings, profile_change, variable", [
    ({"venv_path": "/home/sglang/ml-env\n[global]\nconstraint = /dev/null"}, None, "ml_stack_venv_path"),
    ({"venv_path": "/home/sglang/ml-env\r"}, None, "ml_stack_venv_path"),
    ({"python": "/usr/bin/python3\u2028"}, None, "ml_stack_python"),
    ({"wheelhouse_path": "/srv/wheels\x00"}, None, "ml_stack_wheelhouse_path"),
    ({"index_url": "https://pypi.org/simple\n"}, None, "ml_stack_index_url"),
    ({"index_mirrors": {"https://pypi.org/simple": "https://mirror/simple\n"}}, None,
     "ml_stack_index_mirrors['https://pypi.org/simple']"),
    ({"pip_environment": {"PIP_DEFAULT_TIMEOUT": "60\n"}}, None, "ml_stack_pip_environment.PIP_DEFAULT_TIMEOUT"),
    ({"system_packages": ["libnuma1\n"]}, None, "ml_stack_system_packages[0]"),
    ({"wheelhouse_controller_path": "/srv/wheelhouses\n"}, None, "ml_stack_wheelhouse_controller_path"),
    ({"index_mirrors": {"https://pypi.org/simple\n": "https://mirror/simple"}}, None,
     "ml_stack_index_mirrors (the prefix 'https://pypi.org/simple\\n')"),
    # Each kind of setting adds its values to the ones before it.
    ({"index_mirrors": {"https://a/": "https://b/"}, "venv_path": "/home/sglang/ml-env\n"}, None, "ml_stack_venv_path"),
    ({"system_packages": ["libnuma1"], "pip_environment": {"PIP_NO_CACHE_DIR": "1\n"}}, None,
     "ml_stack_pip_environment.PIP_NO_CACHE_DIR"),
    ({}, ("torch", "version", "2.9.1+cu130\nsglang===0.0.1"), "stack_profiles.cu130.python.torch.version"),
    ({}, ("sglang", "source", "https://pypi.org/simple\n"), "stack_profiles.cu130.python.sglang.source"),
])
def test_a_control_character_in_a_value_that_reaches_a_file_is_refused_naming_the_variable(
        settings, profile_change, variable):
    profile = copy.deepcopy(CU130)
    if profile_change:
        key, field, value = profile_change
        profile["python"][key][field] = value
    problems = plan_of(profile, **settings)["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(variable + ": the value holds the control character"), problems


def test_a_profile_name_with_a_trailing_newline_is_refused():
    assert "cannot name a directory" in plan_of(dict(CU130, name="cu130\n"))["problems"][0]


# The system packages the stack's wheels link, as dpkg-query reports them (no python3-apt needed to ask).

DPKG_WITHOUT_APT_BINDINGS = "ii  libnuma1\nrc  libfoo1\nun  python3-apt\n"


def host_with_dpkg(output):
    return dict(HOST, dpkg=output)


def test_installed_system_packages_need_no_apt_bindings():
    plan = plan_of(host=host_with_dpkg(DPKG_WITHOUT_APT_BINDINGS), system_packages=["libnuma1", "libnuma1:amd64"])
    assert plan["problems"] == []
    assert plan["system_packages_missing"] == []


def test_missing_system_packages_are_installed_where_apt_bindings_are():
    plan = plan_of(host=host_with_dpkg("ii  libnuma1\nii  python3-apt\n"), system_packages=["libnuma1", "libfoo1"])
    assert plan["problems"] == []
    assert plan["system_packages_missing"] == ["libfoo1"]


def test_missing_system_packages_without_apt_bindings_are_refused_with_the_command_to_run():
    plan = plan_of(host=host_with_dpkg(DPKG_WITHOUT_APT_BINDINGS),
                   system_packages=["libnuma1", "libfoo1", "libunknown2"])
    assert plan["problems"] == [
        "ml_stack_system_packages: libfoo1 and libunknown2 are not installed on this host, and installing with "
        "Ansible's apt module needs python3-apt (apt's Python bindings), which this host lacks too. Have an "
        "administrator run apt-get install libfoo1 libunknown2, or install python3-apt, then run again"]


def test_one_missing_system_package_without_apt_bindings_is_named_in_the_singular():
    plan = plan_of(host=host_with_dpkg(DPKG_WITHOUT_APT_BINDINGS), system_packages=["libfoo1:amd64"])
    assert plan["problems"] == [
        "ml_stack_system_packages: libfoo1:amd64 is not installed on this host, and installing with Ansible's apt "
        "module needs python3-apt (apt's Python bindings), which this host lacks too. Have an administrator run "
        "apt-get install libfoo1:amd64, or install python3-apt, then run again"]


@pytest.mark.parametrize("output, missing", [
    ("", ["libnuma1"]),
    ("un  libnuma1\n", ["libnuma1"]),
    ("rc  libnuma1\n", ["libnuma1"]),
    ("iU  libnuma1\n", ["libnuma1"]),
    ("ii  libnuma1\n", []),
    ("hi  libnuma1\n", []),
    ("i libnuma1\n", ["libnuma1"]),
    (None, ["libnuma1"]),
    ("ii  libnuma1-dev\n", ["libnuma1"]),
])
def test_only_a_package_dpkg_reports_installed_counts(output, missing):
    assert missing_system_packages(["libnuma1"], output) == missing


@pytest.mark.parametrize("packages", [["libnuma*"], ["--admindir=/tmp"], "libnuma1", [1]])
def test_system_packages_must_be_debian_package_names(packages):
    problems = plan_of(system_packages=packages)["problems"]
    assert problems[0].startswith("ml_stack_system_packages=") and "must list Debian package names" in problems[0]


def test_virtualenv_is_named_after_profile_and_digest_beside_the_stable_path():
    plan = plan_of(venv_path="/home/sglang/ml-env/")
    assert plan["venv_path"] == "/home/sglang/ml-env"
    assert plan["venv_name"] == "ml-env.cu130-" + plan["digest"]
    assert plan["venv_dir"] == "/home/sglang/" + plan["venv_name"]
    assert len(plan["digest"]) == 8


def test_digest_changes_with_any_pin_or_the_python_and_nothing_else():
    reference = plan_of()["digest"]
    assert plan_of(index_mirrors={"https://pypi.org/simple": "https://mirror/simple"})["digest"] == reference
    newer_torch = copy.deepcopy(CU130)
    newer_torch["python"]["torch"]["version"] = "2.9.2+cu130"
    assert plan_of(newer_torch)["digest"] != reference
    assert plan_of(python="/opt/python3.11/bin/python3")["digest"] != reference
    assert plan_of(host=host_with(version="3.12.1"))["digest"] != reference


def test_profiles_get_different_virtualenvs():
    assert plan_of(CU128)["venv_dir"] != plan_of()["venv_dir"]


def test_cu128_takes_everything_but_the_jit_cache_from_pypi():
    plan = plan_of(CU128)
    assert plan["versions"] == {"torch": "2.9.1", "sgl-kernel": "0.3.21", "flashinfer-python": "0.6.4",
                                "flashinfer-cubin": "0.6.4", "flashinfer-jit-cache": "0.6.4+cu128", "sglang": "0.5.9"}
    assert plan["cuda"] == "12.8"
    assert "sgl-kernel===0.3.21" in plan["install"]["stack"]


def test_a_profile_without_jit_cache_installs_none():
    profile = copy.deepcopy(CU128)
    profile["python"]["flashinfer_jit_cache"]["version"] = None
    plan = plan_of(profile)
    assert "flashinfer-jit-cache" not in plan["versions"]
    assert "https://flashinfer.ai/whl/cu128" not in plan["install"]["stack"]


def test_longest_matching_mirror_replaces_the_prefix_and_the_origin_says_so():
    plan = plan_of(index_mirrors={
        "https://download.pytorch.org/": "http://127.0.0.1:1/all/",
        "https://download.pytorch.org/whl/cu130": "http://127.0.0.1:1/torch-cu130",
        "https://pypi.org/simple": "file:///srv/pypi/simple",
    })
    assert plan["install"]["stack"][len(PIP_OPTIONS) + 1:len(PIP_OPTIONS) + 5] == [
        "--index-url", "file:///srv/pypi/simple", "--extra-index-url", "http://127.0.0.1:1/torch-cu130"]
    torch_probe = [probe for probe in plan["sources"] if probe["project"] == "torch"][0]
    assert torch_probe == {
        "url": "http://127.0.0.1:1/torch-cu130", "project": "torch", "version": "2.9.1+cu130",
        "origin": "stack_profiles.cu130.python.torch.source=https://download.pytorch.org/whl/cu130 through ml_stack_index_mirrors",
    }


def test_sources_probe_each_pinned_version_and_each_wheel():
    probes = [(probe["url"], probe["project"], probe["version"]) for probe in plan_of()["sources"]]
    assert probes == [
        ("https://download.pytorch.org/whl/cu130", "torch", "2.9.1+cu130"),
        (SGL_KERNEL_CU130_URL, None, None),
        ("https://pypi.org/simple", "flashinfer-python", "0.6.4"),
        ("https://pypi.org/simple", "flashinfer-cubin", "0.6.4"),
        ("https://flashinfer.ai/whl/cu130", "flashinfer-jit-cache", "0.6.4+cu130"),
        ("https://pypi.org/simple", "sglang", "0.5.9"),
    ]


def test_a_main_index_no_pinned_package_names_is_probed_at_its_root():
    probes = plan_of(index_url="https://mirror.example/simple")["sources"]
    assert probes[-1] == {"url": "https://mirror.example/simple", "project": None, "version": None,
                          "origin": "ml_stack_index_url"}


def test_offline_installs_only_from_the_wheelhouse_and_probes_no_source():
    plan = plan_of(offline=True, wheelhouse_path="/srv/wheels/")
    wheelhouse = ["--no-index", "--find-links", "/srv/wheels"]
    assert plan["install"]["sglang"] == ["install"] + PIP_OPTIONS + ["--no-deps"] + wheelhouse + ["sglang===0.5.9"]
    assert plan["install"]["stack"][len(PIP_OPTIONS) + 1:len(PIP_OPTIONS) + 5] == wheelhouse + ["torch===2.9.1+cu130"]
    assert "sgl-kernel @ file:///srv/wheels/" + SGL_KERNEL_CU130_WHEEL in plan["install"]["stack"]
    assert plan["sources"] == []
    assert plan["download"] is None


def test_the_controller_downloads_for_the_hosts_python_and_glibc_from_the_online_sources():
    plan = plan_of(offline=True, wheelhouse_controller_path="/srv/wheelhouses")
    download = plan["download"]
    assert download["folder"].startswith("/srv/wheelhouses/cu130-")
    assert download["folder"].endswith("-cp311-manylinux_2_36_x86_64")
    assert download["partial"] == download["folder"] + ".partial"
    target = ["--dest", download["partial"], "--only-binary=:all:", "--python-version", "3.11",
              "--implementation", "cp", "--abi", "cp311", "--platform", "manylinux_2_36_x86_64"]
    assert download["sglang"][:len(PIP_OPTIONS) + 1 + len(target)] == ["download"] + PIP_OPTIONS + target
    assert download["sglang"][-4:] == ["--no-deps", "--index-url", "https://pypi.org/simple", "sglang===0.5.9"]
    assert "sgl-kernel @ " + SGL_KERNEL_CU130_URL in download["stack"]
    assert download["pinned"] == list(plan["versions"])
    assert download["sources"][0]["url"] == "https://download.pytorch.org/whl/cu130"


def test_manylinux_platforms_go_down_to_the_oldest_glibc_with_the_legacy_aliases():
    x86_64 = manylinux_platforms("2.36", "x86_64")
    assert x86_64[:2] == ["manylinux_2_36_x86_64", "manylinux_2_35_x86_64"]
    assert x86_64.index("manylinux2014_x86_64") == x86_64.index("manylinux_2_17_x86_64") + 1
    assert x86_64[-3:] == ["manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    aarch64 = manylinux_platforms("2.35", "aarch64")
    assert aarch64[-3:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "linux_aarch64"]


# The plan's refusals: each names the variable and the fix.

@pytest.mark.parametrize("settings, host, expected", [
    ({"venv_path": "ml-env"}, {}, "ml_stack_venv_path=ml-env is not an absolute path below /"),
    ({"venv_path": "//"}, {}, "ml_stack_venv_path=// is not an absolute path below /"),
    ({"python": "python3"}, {}, "ml_stack_python=python3 is not an absolute path below /"),
    ({"wheelhouse_controller_path": "wheels"}, {},
     "ml_stack_wheelhouse_controller_path=wheels is not an absolute path on the controller"),
    ({"index_url": "pypi.org/simple"}, {}, "ml_stack_index_url=pypi.org/simple is not an http(s):// or file:// URL"),
    ({"index_mirrors": {"https://pypi.org/simple": "mirror"}}, {},
     "ml_stack_index_mirrors[https://pypi.org/simple]='mirror' is not an http(s):// or file:// URL"),
    ({"index_mirrors": ["https://mirror"]}, {},
     "ml_stack_index_mirrors must map URL prefixes to the URLs that replace them, not ['https://mirror']"),
    ({"pip_environment": {"PIP_DEFAULT_TIMEOUT": 60}}, {},
     "ml_stack_pip_environment must map environment variable names to strings (quote numbers)"),
    ({}, {"python": {"error": "exit status 2"}},
     "ml_stack_python=/usr/bin/python3 cannot run on this host (exit status 2); install it there, or set "
     "ml_stack_python to the interpreter the virtualenv should use"),
    ({}, {"python": dict(HOST["python"], version="3.9.18")},
     "ml_stack_python=/usr/bin/python3 is Python 3.9.18, older than the 3.10 that stack profile cu130 needs "
     "(python.min_version); point ml_stack_python at a newer interpreter"),
    ({}, {"python": dict(HOST["python"], implementation="pypy")},
     "ml_stack_python=/usr/bin/python3 is pypy; the stack's wheels are built for CPython"),
    ({}, {"python": dict(HOST["python"], venv_error="No module named 'ensurepip'")},
     "ml_stack_python=/usr/bin/python3 cannot create virtualenvs (No module named 'ensurepip'); on Debian and Ubuntu "
     "install python3-venv"),
    ({}, {"owner": False}, "ml_stack_venv_owner=sglang is not a user on this host; create the service user first"),
    ({}, {"venv_path": {"exists": True, "islnk": False}},
     "ml_stack_venv_path=/home/sglang/ml-env exists and is not a link: this role keeps one virtualenv per profile "
     "beside it and points /home/sglang/ml-env at the current one. Move it away (it is left as it is) or choose "
     "another ml_stack_venv_path"),
    ({}, {"parent_exists": False},
     "ml_stack_venv_path=/home/sglang/ml-env: its directory /home/sglang does not exist; create it (the service "
     "user's home) first"),
    ({"venv_path": "/srv/venvs/X"}, {"parent_exists": False},
     "ml_stack_venv_path=/srv/venvs/X: its directory /srv/venvs does not exist; create it (the service "
     "user's home) first"),
    ({}, {"python": dict(HOST["python"], machine="aarch64")},
     "stack_profiles.cu130.python.sgl_kernel.source=" + SGL_KERNEL_CU130_URL + " is a wheel for x86_64, but this "
     "host is aarch64; set the aarch64 wheel under stack_profiles_custom.cu130.python.sgl_kernel.source"),
    ({"offline": True, "wheelhouse_controller_path": "/srv/wheels"}, {"python": dict(HOST["python"], glibc=None)},
     "ml_stack_wheelhouse_controller_path is set, but this host's Python reports no glibc: the controller can only "
     "download manylinux wheels; fill ml_stack_wheelhouse_path yourself"),
])
def test_bad_settings_or_host_are_problems_naming_the_variable(settings, host, expected):
    assert plan_of(host=dict(HOST, **host), **settings)["problems"] == [expected]


@pytest.mark.parametrize("settings, host", [
    ({"venv_path": "/srv/ML-X", "python": "/opt/X", "wheelhouse_path": "/X"}, {}),
    ({}, {"python": dict(HOST["python"], version="3.10")}),
])
def test_settings_and_hosts_at_the_edges_are_accepted(settings, host):
    assert plan_of(host=dict(HOST, **host), **settings)["problems"] == []


def test_every_problem_is_reported_at_once():
    host = dict(HOST, owner=False, parent_exists=False)
    assert len(plan_of(host=host)["problems"]) == 2


def test_a_profile_name_that_cannot_name_a_directory_is_refused():
    assert plan_of(dict(CU130, name="../cu130"))["problems"] == [
        "stack_profile='../cu130' cannot name a directory; use letters, digits, '.', '_' and '-'"]


def test_a_wheel_source_must_be_a_wheel_of_its_package():
    profile = copy.deepcopy(CU130)
    profile["python"]["sgl_kernel"]["source"] = "https://example.org/flashinfer_python-0.6.4-py3-none-any.whl"
    assert plan_of(profile)["problems"] == [
        "stack_profiles.cu130.python.sgl_kernel.source=https://example.org/flashinfer_python-0.6.4-py3-none-any.whl "
        "is a wheel of flashinfer_python, not of sgl-kernel"]


# sglang's requirements, the wheelhouse, pip check.

def test_dependencies_leave_out_the_pinned_packages_and_extras_and_keep_markers():
    requires = [
        "flashinfer_python==0.6.3", "Flashinfer.Cubin==0.6.3", "sgl-kernel==0.3.21", "torch==2.9.1",
        "uvicorn", 'torchcodec==0.8.0; sys_platform != "linux" or platform_machine != "aarch64"',
        'diffusers==0.36.0; extra == "diffusion"', 'st_attn==0.0.7; (platform_machine != "aarch64") and extra=="diffusion"',
    ]
    pinned = ["torch", "sgl-kernel", "flashinfer-python", "flashinfer-cubin", "sglang"]
    assert dependencies(requires, pinned) == [
        "uvicorn", 'torchcodec==0.8.0; sys_platform != "linux" or platform_machine != "aarch64"']


def test_missing_wheels_names_each_pinned_package_the_wheelhouse_lacks():
    packages = plan_of(offline=True)["packages"]
    present = ["torch-2.9.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl", SGL_KERNEL_CU130_WHEEL,
               "Flashinfer_Python-0.6.4-py3-none-any.whl", "flashinfer_cubin-0.6.3-py3-none-any.whl",
               "flashinfer_jit_cache-0.6.4+cu130-cp39-abi3-manylinux_2_28_x86_64.whl", "sglang-0.5.9.tar.gz"]
    assert missing_wheels(packages, present) == [
        "flashinfer-cubin 0.6.4 (a wheel for this Python and platform)",
        "sglang 0.5.9 (a wheel for this Python and platform)",
    ]


def test_pip_check_lines_of_a_pinned_package_at_its_pin_are_deliberate_others_are_not():
    versions = plan_of()["versions"]
    output = "\n".join([
        "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4.",
        "sglang 0.5.9 has requirement flashinfer_cubin==0.6.3, but you have flashinfer-cubin 0.6.4.",
        "torchaudio 2.9.1 has requirement torch==2.9.1, but you have torch 2.10.0.",
        "xgrammar 0.1.27 requires ninja, which is not installed.",
        "",
    ])
    deliberate, unexpected = classify_pip_check(output, versions)
    assert deliberate == [
        "sglang 0.5.9 has requirement flashinfer_cubin==0.6.3, but you have flashinfer-cubin 0.6.4.",
        "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4.",
    ]
    assert unexpected == ["torchaudio 2.9.1 has requirement torch==2.9.1, but you have torch 2.10.0.",
                          "xgrammar 0.1.27 requires ninja, which is not installed."]
    assert classify_pip_check("No broken requirements found.\n", versions) == ([], [])


# Diagnoses of failed imports.

@pytest.mark.parametrize("module, error, expected", [
    ("sgl_kernel", "ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory",
     "sgl_kernel wants libnvrtc.so.12: a CUDA 12 wheel on this CUDA 13.0 stack (profile cu130). Install the package "
     "from the profile's source, as this role does. PyPI's sgl-kernel is built with CUDA 12.9; the profile takes it "
     "from " + SGL_KERNEL_CU130_URL + "."),
    ("flashinfer", "OSError: libcudart.so.12.8.90: cannot open shared object file: No such file or directory",
     "flashinfer wants libcudart.so.12: a CUDA 12 wheel on this CUDA 13.0 stack"),
    ("torch", "ImportError: libcublasLt.so.13: cannot open shared object file: No such file or directory",
     "libcublasLt.so.13 is not found by the dynamic linker: torch's nvidia-* runtime wheels are missing"),
    ("sgl_kernel", "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
     "libcuda.so.1 is the NVIDIA driver's library: this host has no driver"),
    ("sgl_kernel", "ImportError: /v/sgl_kernel/common_ops.abi3.so: undefined symbol: "
                   "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib",
     "ABI mismatch: sgl_kernel was built against another torch than the installed 2.10.0+cu130 (undefined symbol "
     "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib); the profile pins torch 2.9.1+cu130"),
    ("sglang", "ModuleNotFoundError: No module named 'sglang'", "sglang is not installed in the virtualenv"),
    ("sgl_kernel", "ImportError: libnuma.so.1: cannot open shared object file: No such file or directory",
     "libnuma.so.1 is a system library that sgl_kernel links and this host lacks; install the package that provides "
     "it (list it in ml_stack_system_packages; sgl-kernel's libnuma.so.1 is Debian's and Ubuntu's libnuma1)"),
    ("flashinfer", "RuntimeError: something else", "no known cause"),
])
def test_import_errors_are_diagnosed(module, error, expected):
    assert expected in diagnose(module, error, plan_of(), "2.10.0+cu130")


# The verdict.

def installed(plan, **changes):
    state = {
        "versions": dict(plan["versions"]),
        "direct_urls": dict((name, None) for name in plan["versions"]),
    }
    state["direct_urls"]["sgl-kernel"] = "file:///srv/wheels/" + SGL_KERNEL_CU130_WHEEL
    for name, value in changes.items():
        state[name].update(value)
    return state


def verification(**modules):
    imported = {
        "torch": {"ok": True, "version": "2.9.1+cu130", "cuda": "13.0"},
        "sgl_kernel": {"ok": True}, "flashinfer": {"ok": True}, "sglang": {"ok": True},
    }
    imported.update(modules)
    return {"modules": imported, "pip_check": (
        "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4.\n")}


def test_exactly_installed_needs_every_pin_its_wheel_and_the_marker():
    plan = plan_of()
    assert verdict(plan, {"state": installed(plan), "marker": plan["marker"]})["exact"]
    assert not verdict(plan, {"state": installed(plan), "marker": dict(plan["marker"], digest="0")})["exact"]
    assert not verdict(plan, {"state": installed(plan), "marker": None})["exact"]


@pytest.mark.parametrize("changes, expected", [
    ({"versions": {"torch": "2.10.0"}}, "torch is 2.10.0, the profile pins 2.9.1+cu130"),
    # PyPI's torch 2.9.1 is a CUDA 12.8 build: the same release without the profile's local label is another build.
    ({"versions": {"torch": "2.9.1"}}, "torch is 2.9.1, the profile pins 2.9.1+cu130"),
    ({"versions": {"torch": "2.9.1+cu128"}}, "torch is 2.9.1+cu128, the profile pins 2.9.1+cu130"),
    ({"versions": {"flashinfer-cubin": None}}, "flashinfer-cubin is not installed (the profile pins 0.6.4)"),
    ({"direct_urls": {"sgl-kernel": None}},
     "sgl-kernel was installed from an index, not from the profile's wheel " + SGL_KERNEL_CU130_WHEEL),
    ({"direct_urls": {"torch": "file:///tmp/torch-2.9.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"}},
     "torch was installed from file:///tmp/torch-2.9.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl, not from the "
     "profile's index https://download.pytorch.org/whl/cu130"),
])
def test_another_version_or_build_is_not_exact_and_says_why(changes, expected):
    plan = plan_of()
    result = verdict(plan, {"state": installed(plan, **changes), "marker": plan["marker"]})
    assert not result["exact"]
    assert expected in result["problems"]


# The decision, before any index is asked.

OWNED = {"exists": True, "owner": "sglang"}


def test_an_exactly_installed_virtualenv_of_its_owner_is_left_alone():
    plan = plan_of()
    assert build_decision(plan, OWNED, dict(installed(plan), marker=plan["marker"]), "sglang") == {
        "new": False, "build": False, "chown": False, "reasons": [], "remove": []}


def test_no_virtualenv_is_built_new():
    plan = plan_of()
    assert build_decision(plan, {"exists": False, "owner": None}, {}, "sglang") == {
        "new": True, "build": True, "chown": False, "reasons": ["there is no " + plan["venv_dir"]], "remove": []}


def test_a_virtualenv_whose_interpreter_does_not_run_is_repaired_saying_what_it_wrote():
    decision = build_decision(plan_of(), OWNED, {"error": "bin/python: No such file or directory"}, "sglang")
    assert (decision["new"], decision["build"]) == (False, True)
    assert decision["reasons"] == ["its interpreter does not run: bin/python: No such file or directory"]


def test_another_version_is_repaired_naming_it_and_an_unmarked_one_says_it_is_not_complete():
    plan = plan_of()
    wrong = build_decision(plan, OWNED, dict(installed(plan, versions={"torch": "2.10.0"}), marker=plan["marker"]),
                           "sglang")
    assert wrong["build"] and wrong["reasons"] == ["torch is 2.10.0, the profile pins 2.9.1+cu130"]
    unmarked = build_decision(plan, OWNED, dict(installed(plan), marker=None), "sglang")
    assert unmarked["build"] and unmarked["reasons"] == ["it is not marked complete for this profile"]


def test_one_built_as_root_by_an_earlier_release_is_handed_to_its_owner():
    plan = plan_of()
    decision = build_decision(plan, {"exists": True, "owner": "root"}, dict(installed(plan), marker=plan["marker"]),
                              "sglang")
    assert decision == {"new": False, "build": True, "chown": True,
                        "reasons": ["it belongs to root, not to ml_stack_venv_owner=sglang"], "remove": []}
    # Without an owner setting, whoever runs the role owns it.
    assert not build_decision(plan, {"exists": True, "owner": "root"}, dict(installed(plan), marker=plan["marker"]),
                              None)["build"]


def test_verification_passes_and_explains_the_deliberate_pip_check_lines():
    plan = plan_of()
    result = verdict(plan, {"state": installed(plan), "verification": verification()})
    assert result["ok"] and result["problems"] == []
    assert result["deliberate"] == [
        "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4."]
    assert result["explanation"].splitlines()[-1] == result["deliberate"][0]
    assert all(line.startswith("#") for line in result["explanation"].splitlines()[:-1])


def test_torch_reporting_another_cuda_fails_verification():
    plan = plan_of()
    result = verdict(plan, {"state": installed(plan), "verification": verification(
        torch={"ok": True, "version": "2.9.1+cu128", "cuda": "12.8"})})
    assert result["problems"] == [
        "torch 2.9.1+cu128 reports torch.version.cuda 12.8, the profile expects 13.0 (python.torch.cuda): a torch built "
        "for another CUDA, or a profile whose python.torch.cuda does not match its torch"]


def test_a_failed_import_fails_verification_with_its_diagnosis():
    plan = plan_of()
    error = "ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory"
    result = verdict(plan, {"verification": verification(sgl_kernel={"ok": False, "error": error})})
    assert not result["ok"]
    assert result["problems"][0].startswith("import sgl_kernel failed: " + error + ". Diagnosis: sgl_kernel wants")


def test_a_missing_driver_is_a_note_only_where_gpus_are_not_required():
    plan = plan_of()
    error = "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    observed = {"verification": verification(sgl_kernel={"ok": False, "error": error})}
    assert not verdict(plan, observed)["ok"]
    relaxed = verdict(plan, observed, gpus_required=False)
    assert relaxed["ok"]
    assert relaxed["notes"] == ["import sgl_kernel needs the NVIDIA driver (libcuda.so.1), which this host lacks; "
                                "not checked further (ml_stack_gpus_required: false)"]


def test_an_unexplained_pip_check_line_fails_verification():
    plan = plan_of()
    observed = verification()
    observed["pip_check"] += "xgrammar 0.1.27 requires ninja, which is not installed.\n"
    result = verdict(plan, {"verification": observed})
    assert result["problems"] == [
        "pip check reports problems the profile does not explain: xgrammar 0.1.27 requires ninja, which is not installed."]


# SGLang's cuDNN check on torch 2.9.1: said, never refused (the runtime_env role disables it by default).

def test_the_inspection_of_a_profile_on_torch_2_9_1_asks_for_the_cudnn_wheel_of_its_cuda():
    plan = plan_of()
    assert plan["inspect"]["distributions"] == list(plan["versions"]) + ["nvidia-cudnn-cu13"]
    assert plan_of(CU128)["inspect"]["distributions"] == list(plan_of(CU128)["versions"]) + ["nvidia-cudnn-cu12"]


@pytest.mark.parametrize("cudnn, noted", [("9.13.0.50", True), (None, True), ("9.15.0.57", False)])
def test_verification_notes_a_cudnn_that_sglang_refuses_on_torch_2_9_1_without_failing(cudnn, noted):
    plan = plan_of()
    found = {"nvidia-cudnn-cu13": cudnn}
    result = verdict(plan, {"state": installed(plan, versions=found), "verification": verification()})
    assert (result["ok"], result["problems"]) == (True, [])
    assert result["notes"] == ([cudnn_problem(cudnn_check(CU130), found)] if noted else [])


@pytest.mark.parametrize("listed", ["installed", "adopted"])
def test_the_cudnn_wheel_is_read_from_every_distribution_of_a_locked_or_adopted_virtualenv(listed):
    plan = plan_of()
    state = dict(installed(plan), **{listed: {"nvidia_cudnn_cu13": "9.15.0.57"}})
    assert verdict(plan, {"state": state})["notes"] == []
    assert verdict(plan, {"state": installed(plan)})["notes"] == [cudnn_problem(cudnn_check(CU130), {})]


def test_a_wheelhouse_lacking_wheels_is_a_problem_naming_the_variable():
    plan = plan_of(offline=True)
    result = verdict(plan, {"wheelhouse": [SGL_KERNEL_CU130_WHEEL, "torch-2.9.1+cu130-cp311-cp311-linux_x86_64.whl",
                                           "sglang-0.5.9-py3-none-any.whl"]})
    assert result["problems"] == [
        "ml_stack_wheelhouse_path=/var/cache/blackwell-gpu-node/wheelhouse lacks wheels for: flashinfer-python 0.6.4 "
        "(a wheel for this Python and platform); flashinfer-cubin 0.6.4 (a wheel for this Python and platform); "
        "flashinfer-jit-cache 0.6.4+cu130 (a wheel for this Python and platform); add them, or set "
        "ml_stack_wheelhouse_controller_path to have the controller download them"]


# What sgl-kernel 0.3.21 raises where it cannot load its kernels, as its load_utils.py words it (the real cu128
# run, tests/molecule_real, met it on this machine, which has no GPU driver): it tries three places and lists
# every failure; the first is the cause.
SGL_KERNEL_WITHOUT_DRIVER = """ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library!

Attempted locations:
1. Architecture-specific pattern: /v/sgl_kernel/sm100/common_ops.* - found files: ['/v/sgl_kernel/sm100/common_ops.abi3.so']
2. Fallback pattern: /v/sgl_kernel/common_ops.* - found files: []
3. Standard Python import: common_ops - failed

GPU Info:
- Compute capability: None
- Expected variant: CPU/No GPU detected (using precise math)

Please ensure sgl_kernel is properly installed with:
pip install --upgrade sgl_kernel

Error details from previous import attempts:
- ImportError: libcuda.so.1: cannot open shared object file: No such file or directory
- ModuleNotFoundError: No module named 'common_ops'"""


def test_the_line_that_names_the_cause_stands_for_a_long_import_error():
    assert error_line(SGL_KERNEL_WITHOUT_DRIVER) == (
        "- ImportError: libcuda.so.1: cannot open shared object file: No such file or directory")
    assert error_line("RuntimeError: first\nsecond") == "RuntimeError: first"
    assert error_line("") == "no error text"


def test_sgl_kernel_without_driver_is_diagnosed_by_its_first_failure_not_its_last():
    assert diagnose("sgl_kernel", SGL_KERNEL_WITHOUT_DRIVER, plan_of()).startswith(
        "libcuda.so.1 is the NVIDIA driver's library")
    observed = {"verification": verification(sgl_kernel={"ok": False, "error": SGL_KERNEL_WITHOUT_DRIVER})}
    assert verdict(plan_of(), observed, gpus_required=False)["ok"]
    assert verdict(plan_of(), observed)["problems"][0].startswith(
        "import sgl_kernel failed: - ImportError: libcuda.so.1: cannot open shared object file: No such file or "
        "directory. Diagnosis: libcuda.so.1 is the NVIDIA driver's library")


# Pruning old per-profile virtualenvs.
PRUNE_VENV = "/home/sglang/ml-env"
OLDEST, OLDER, PREVIOUS, CURRENT = ("ml-env.cu126-00000001", "ml-env.cu128-0000000a", "ml-env.cu128-1a2b3c4d",
                                    "ml-env.cu130-5e6f7a8b")


def beside(name):
    return "/home/sglang/" + name


PRUNE_CANDIDATES = [
    {"path": beside(OLDEST), "mtime": 1.0},
    {"path": beside(OLDER), "mtime": 2.0},
    {"path": beside(PREVIOUS), "mtime": 3.0},
    {"path": beside(CURRENT), "mtime": 4.0},
    # Not ours: other names beside the stable path, and anything elsewhere, are never touched.
    {"path": beside("ml-env.backup"), "mtime": 0.5},
    {"path": beside("ml-env.cu128-1A2B3C4D"), "mtime": 0.5},
    {"path": beside("ml-env.cu128-1a2b3c4d.old"), "mtime": 0.5},
    {"path": beside("other-env.cu128-1a2b3c4d"), "mtime": 0.5},
    {"path": "/srv/ml-env.cu128-1a2b3c4d", "mtime": 0.5},
    {"path": beside("data"), "mtime": 0.5},
]


def test_pruning_keeps_the_newest_old_virtualenvs_and_never_the_current_one():
    plan = prune_plan(PRUNE_VENV, PRUNE_CANDIDATES, 1, [CURRENT])
    assert plan == {"remove": [beside(OLDER), beside(OLDEST)], "kept": [beside(PREVIOUS)], "problems": []}


def test_pruning_never_removes_the_previous_target_before_the_new_stack_is_proven():
    plan = prune_plan(PRUNE_VENV + "/", PRUNE_CANDIDATES, 0, [CURRENT, beside(PREVIOUS) + "/"])
    assert plan["remove"] == [beside(OLDER), beside(OLDEST)]


def test_pruning_with_keep_null_removes_nothing():
    assert prune_plan(PRUNE_VENV, PRUNE_CANDIDATES, None, [CURRENT]) == {
        "remove": [], "kept": [beside(PREVIOUS), beside(OLDER), beside(OLDEST)], "problems": []}


def test_pruning_strips_only_trailing_slashes_from_the_stable_path():
    candidates = [{"path": "/srv/venvs/X.cu130-5e6f7a8b", "mtime": 1.0}]
    assert prune_plan("/srv/venvs/X", candidates, 0, [])["remove"] == ["/srv/venvs/X.cu130-5e6f7a8b"]


def test_a_protected_target_elsewhere_protects_nothing_here():
    plan = prune_plan(PRUNE_VENV, PRUNE_CANDIDATES, 0, ["/opt/" + CURRENT, None])
    assert plan["remove"] == [beside(CURRENT), beside(PREVIOUS), beside(OLDER), beside(OLDEST)]


@pytest.mark.parametrize("keep", [-1, "1", 1.5, True])
def test_a_keep_that_is_no_count_is_refused_naming_the_variable(keep):
    plan = prune_plan(PRUNE_VENV, PRUNE_CANDIDATES, keep, [CURRENT])
    assert plan == {"remove": [], "kept": [], "problems": [
        "ml_stack_keep=%r must be a whole number, 0 or more (old virtualenvs kept besides the current one), or null to "
        "keep every one" % (keep,)]}


def test_the_file_names_and_pip_options_are_the_ones_hosts_already_have():
    # Literal, not the module's constants: virtualenvs built by earlier runs carry these names (the README, the
    # molecule tests and the upgrade read them), and pip must never stop to ask or draw a progress bar in a log.
    plan = plan_of()
    venv_dir = plan["venv_dir"]
    assert plan["files"] == {"marker": venv_dir + "/ml-stack.json",
                             "constraints": venv_dir + "/ml-stack-constraints.txt",
                             "pip_conf": venv_dir + "/pip.conf",
                             "pip_check": venv_dir + "/ml-stack-pip-check.txt"}
    for argv in plan["install"].values():
        assert argv[:5] == ["install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"]


# Mutation testing (issue 21): the plan's fields, names and messages exactly, and the edges.

def test_the_plan_and_its_marker_name_the_interpreter_its_series_and_every_pin():
    plan = plan_of()
    assert (plan["python"], plan["python_series"], plan["offline"], plan["wheelhouse"]) == (
        "/usr/bin/python3", "3.11", False, None)
    assert plan["marker"] == {
        "profile": "cu130", "digest": plan["digest"], "python": "/usr/bin/python3", "python_series": "3.11",
        "packages": {"torch": "2.9.1+cu130", "sgl-kernel": "0.3.21", "flashinfer-python": "0.6.4",
                     "flashinfer-cubin": "0.6.4", "flashinfer-jit-cache": "0.6.4+cu130", "sglang": "0.5.9"},
        "wheels": {"sgl-kernel": SGL_KERNEL_CU130_WHEEL},
    }


def test_only_trailing_slashes_are_stripped_from_the_paths():
    plan = plan_of(venv_path="/srv/venvs/X", offline=True, wheelhouse_path="/srv/XX/X",
                   wheelhouse_controller_path="/srv/XX/X")
    assert (plan["venv_path"], plan["venv_dir"], plan["wheelhouse"]) == (
        "/srv/venvs/X", "/srv/venvs/X.cu130-" + plan["digest"], "/srv/XX/X")
    assert plan["download"]["folder"].startswith("/srv/XX/X/cu130-")


def test_the_download_folder_is_keyed_by_the_pins_and_the_newest_platform_as_hosts_already_have_it():
    # A changed key downloads every wheel again: these are the names existing controllers hold.
    assert plan_of(offline=True, wheelhouse_controller_path="/srv/wheelhouses")["download"]["folder"] == (
        "/srv/wheelhouses/cu130-b28fe512-cp311-manylinux_2_36_x86_64")
    newer_torch = copy.deepcopy(CU130)
    newer_torch["python"]["torch"]["version"] = "2.9.2+cu130"
    assert plan_of(newer_torch, offline=True, wheelhouse_controller_path="/srv/wheelhouses")["download"]["folder"] != (
        "/srv/wheelhouses/cu130-b28fe512-cp311-manylinux_2_36_x86_64")


def test_i686_goes_down_to_manylinux1_with_the_manylinux2010_alias_at_glibc_2_12():
    assert manylinux_platforms("2.12", "i686") == [
        "manylinux_2_12_i686", "manylinux2010_i686", "manylinux_2_11_i686", "manylinux_2_10_i686", "manylinux_2_9_i686",
        "manylinux_2_8_i686", "manylinux_2_7_i686", "manylinux_2_6_i686", "manylinux_2_5_i686", "manylinux1_i686",
        "linux_i686"]


def test_pip_environment_takes_variable_names_only():
    assert plan_of(pip_environment={"PIP_NO_CACHE_DIR": "1", "_X9": ""})["problems"] == []
    assert plan_of(pip_environment={"9PIP": "1"})["problems"] == [
        "ml_stack_pip_environment must map environment variable names to strings (quote numbers)"]


def test_a_main_index_reached_through_a_mirror_is_probed_naming_both():
    probes = plan_of(index_url="https://mirror.example/simple",
                     index_mirrors={"https://mirror.example/": "https://other.example/"})["sources"]
    assert probes[-1] == {"url": "https://other.example/simple", "project": None, "version": None,
                          "origin": "ml_stack_index_url=https://mirror.example/simple through ml_stack_index_mirrors"}


def test_an_sglang_wheel_is_installed_from_its_url_and_no_index():
    profile = copy.deepcopy(CU130)
    profile["python"]["sglang"]["source"] = "https://example.org/sglang-0.5.9-py3-none-any.whl"
    assert plan_of(profile)["install"]["sglang"] == ["install"] + PIP_OPTIONS + [
        "--no-deps", "--no-index", "sglang @ https://example.org/sglang-0.5.9-py3-none-any.whl"]


def test_a_wheel_for_aarch64_is_refused_on_x86_64_and_a_wheel_without_dashes_is_named():
    profile = copy.deepcopy(CU130)
    aarch64 = "https://example.org/sgl_kernel-0.3.21-cp310-abi3-manylinux2014_aarch64.whl"
    profile["python"]["sgl_kernel"]["source"] = aarch64
    assert plan_of(profile)["problems"] == [
        "stack_profiles.cu130.python.sgl_kernel.source=%s is a wheel for aarch64, but this host is x86_64; set the "
        "x86_64 wheel under stack_profiles_custom.cu130.python.sgl_kernel.source" % aarch64]
    profile["python"]["sgl_kernel"]["source"] = "https://example.org/sgl_kernel.whl"
    assert plan_of(profile)["problems"] == [
        "stack_profiles.cu130.python.sgl_kernel.source=https://example.org/sgl_kernel.whl is a wheel of "
        "sgl_kernel.whl, not of sgl-kernel"]


def test_dependencies_go_on_after_a_pinned_one_or_an_extra_and_read_the_marker_after_the_first_semicolon():
    assert dependencies(["torch==2.9.0", 'x @ https://h/x-1;v=1.whl ; extra == "dev"', "requests>=2"], ["torch"]) == [
        "requests>=2"]


def test_pip_check_without_output_or_after_a_blank_line():
    line = "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4."
    assert classify_pip_check(None, {}) == ([], [])
    assert classify_pip_check("\nNo broken requirements found.\n" + line, {"flashinfer-python": "0.6.4"}) == (
        [line], [])


def test_the_explanation_lists_each_deliberate_line_on_its_own():
    assert pip_check_explanation("cu130", ["a", "b"]).endswith("is a real problem.\na\nb\n")


@pytest.mark.parametrize("error, expected", [
    ("libcuda.so.1: cannot open shared object file",
     "libcuda.so.1 is the NVIDIA driver's library: this host has no driver, so torch cannot load. Install the driver "
     "(the cuda role can), or set ml_stack_gpus_required: false on a machine without GPU"),
    ("libcudart.so.12: cannot open shared object file",
     "torch wants libcudart.so.12: a CUDA 12 wheel on this CUDA 13.0 stack (profile cu130). Install the package from "
     "the profile's source, as this role does."),
    ("undefined symbol: _ZN3c10",
     "ABI mismatch: torch was built against another torch than the installed torch (undefined symbol _ZN3c10); the "
     "profile pins torch 2.9.1+cu130, and a package that replaced torch, or a wheel made for another torch release, "
     "causes this"),
    ("No module named 'sympy'", "sympy is not installed in the virtualenv (import torch)"),
    ("boom", "no known cause; the error above is what Python said"),
])
def test_diagnoses_in_full(error, expected):
    assert diagnose("torch", error, plan_of()) == expected


@pytest.mark.parametrize("library", ["cudart", "nvrtc", "nvrtc-builtins", "cublas", "cublasLt", "cusparse", "cufft",
                                     "curand", "cusolver", "nvJitLink", "cupti"])
def test_each_cuda_runtime_library_of_the_stacks_major_is_a_linker_problem(library):
    assert diagnose("torch", "lib%s.so.13: cannot open shared object file" % library, plan_of()) == (
        "lib%s.so.13 is not found by the dynamic linker: torch's nvidia-* runtime wheels are missing from the "
        "virtualenv, or CUDA 13.0's lib64 is not registered with ldconfig (the cuda role registers it)" % library)


def test_a_wheel_installed_from_another_wheel_is_not_the_profiles():
    plan = plan_of()
    other = "https://example.org/sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    result = verdict(plan, {"state": installed(plan, direct_urls={"sgl-kernel": other}), "marker": plan["marker"]})
    assert (result["exact"], result["problems"]) == (False, [
        "sgl-kernel was installed from %s, not from the profile's wheel %s" % (other, SGL_KERNEL_CU130_WHEEL)])


def test_a_verdict_without_state_is_not_exact():
    assert verdict(plan_of(), {}) == {"exact": False, "ok": True, "problems": [], "notes": []}


def test_every_import_is_checked_after_one_that_passed_or_needs_the_absent_driver():
    plan = plan_of()
    result = verdict(plan, {"verification": verification(
        torch={"ok": False, "error": "libcuda.so.1: cannot open shared object file"},
        sglang={"ok": False, "error": "No module named 'sympy'"})}, gpus_required=False)
    assert result["problems"] == ["import sglang failed: No module named 'sympy'. Diagnosis: sympy is not installed in "
                                  "the virtualenv (import sglang)"]


def test_an_abi_mismatch_names_the_installed_torch_version():
    result = verdict(plan_of(), {"verification": verification(sgl_kernel={"ok": False, "error": "undefined symbol: _Z1"})})
    assert "than the installed 2.9.1+cu130 (undefined symbol _Z1)" in result["problems"][0]


def test_unexplained_pip_check_lines_are_listed_apart():
    checked = verification()
    checked["pip_check"] = "a 1 requires b, which is not installed.\nc 2 requires d, which is not installed.\n"
    assert verdict(plan_of(), {"verification": checked})["problems"] == [
        "pip check reports problems the profile does not explain: a 1 requires b, which is not installed. | c 2 requires "
        "d, which is not installed."]
