import copy
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_health import assess
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import parse_query
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import preflight as _preflight
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.preflight import (
    adopted_tree,
    GIB,
    driver_branch,
    evaluate,
    family_of,
    free_space,
    gpu_health_lines,
    gpu_health_state,
    reboot_pending,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import adopted, decide, levels
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import build_plan, profile_virtualenv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import os_id
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import resolve

ROOT = Path(__file__).resolve().parents[4]
PROFILES = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main.yml").read_text())["stack_profiles"]
CU130 = resolve("cu130", PROFILES)
DEFAULTS = yaml.safe_load((ROOT / "roles" / "preflight" / "defaults" / "main.yml").read_text())
# The defaults that follow another role's setting (the server's options, ml_stack's virtualenv), as they resolve
# where that setting is unset.
FOLLOWED = dict(tensor_parallel_size=1, nnodes=1, node_rank=0, dist_init_addr=None, model_path=None,
                model_is_hub_id=False, venv_path=None, venv_python="/usr/bin/python3", service_user_name="sglang",
                service_user_create=True, host="127.0.0.1", port=30000, server_name="sglang",
                server_state_dir="/var/lib/blackwell-gpu-node", driver_install=False, driver_reboot=False,
                fabric_manager="false", library_paths={}, venv_owner="sglang", torch_from=None)
SETTINGS = dict((name[len("preflight_"):], value) for name, value in DEFAULTS.items())
assert sorted(name for name, value in SETTINGS.items() if "{{" in str(value)) == sorted(FOLLOWED)
SETTINGS.update(FOLLOWED)

# The reference box: 8x RTX PRO 6000 Blackwell (compute capability 12.0) on PCIe, open kernel module.
RTX_PRO_6000 = dict(index=0, name="NVIDIA RTX PRO 6000 Blackwell Server Edition", uuid="GPU-x",
                    compute_capability="12.0", memory_total_mib=97887, driver_version="580.95.05")
REFERENCE_GPU = dict(state="ok", message="", count=8, driver_version="580.95.05", cuda_driver_version="13.0",
                     kernel_module="open", kernel_module_version="580.95.05",
                     kernel_module_installed_version="580.95.05", interconnect="pcie", nvlink_pairs=[],
                     gpus=[dict(RTX_PRO_6000, index=n) for n in range(8)])
NO_NVIDIA_SMI = dict(state="no_nvidia_smi", message="nvidia-smi is not installed", count=0, gpus=[],
                     driver_version=None, kernel_module=None, kernel_module_version=None,
                     kernel_module_installed_version=None)


def observed(**changes):
    base = dict(distribution="Ubuntu", distribution_version="24.04", architecture="x86_64", gpu=REFERENCE_GPU,
                reboot_required=False, reboot_required_packages=[], model={}, disk={}, port_state="free",
                host="gpu01", peers=[dict(host="gpu01", nnodes=1, node_rank=0, dist_init_addr=None)])
    base.update(changes)
    return base


def settings(**changes):
    return dict(copy.deepcopy(SETTINGS), **changes)


def test_reference_box_passes_and_says_what_was_checked():
    report = evaluate(settings(expected_gpu_family="blackwell", expected_compute_capability="12.0",
                               expected_gpu_count=8, tensor_parallel_size=8), CU130, observed())
    assert report["ok"] is True and report["problems"] == [] and report["notes"] == []
    assert report["checked"][:2] == ["GPUs required (preflight_gpus_required: true)",
                                     "ubuntu2404 on x86_64 is supported by stack profile cu130"]
    assert "driver 580.95.05 (branch 580 >= 580 for CUDA 13.0)" in report["checked"]
    assert "tp 8 x pp 1 over 1 node(s) fits 8 GPU(s)" in report["checked"]


@pytest.mark.parametrize("capability,family", [("12.0", "blackwell"), ("10.0", "blackwell"), ("9.0", "hopper"),
                                               ("8.9", "ada"), ("8.6", "ampere"), ("8.0", "ampere"), ("7.5", "turing"),
                                               ("7.0", "volta"), ("7.2", "volta"), ("6.1", None), (None, None)])
def test_families(capability, family):
    assert family_of(capability) == family


@pytest.mark.parametrize("distribution,version,expected", [("Ubuntu", "24.04", "ubuntu2404"),
                                                           ("Ubuntu", "22.04", "ubuntu2204"),
                                                           ("Debian", "12.8", "debian12"), ("Debian", "12", "debian12"),
                                                           ("Rocky", "9.4", "rocky9")])
def test_os_ids_are_nvidia_repository_names(distribution, version, expected):
    assert os_id(distribution, version) == expected


def test_unsupported_os_names_the_profile_fields_and_the_variable():
    report = evaluate(settings(), CU130, observed(distribution="Ubuntu", distribution_version="20.04"))
    assert report["problems"] == [
        "This host runs ubuntu2004 on x86_64, but stack profile cu130 supports debian12, ubuntu2204, ubuntu2404 on "
        "x86_64, aarch64 (stack_profiles.cu130.operating_systems and .architectures): use a supported host, or "
        "another stack_profile."]


def test_old_driver_branch_is_refused_for_cuda_13_but_not_for_12_8():
    gpu = dict(REFERENCE_GPU, driver_version="570.133.20")
    report = evaluate(settings(), CU130, observed(gpu=gpu))
    assert report["problems"] == [
        "Driver 570.133.20 (branch 570) is older than branch 580, which CUDA 13.0 of stack profile cu130 needs "
        "(stack_profiles.cu130.cuda.driver_branch_min=580): install driver branch 580 or newer (role "
        "blackwell.gpu_node.cuda with cuda_driver_install: true) and reboot, or choose a stack_profile whose "
        "cuda.driver_branch_min this driver meets."]
    assert evaluate(settings(), resolve("cu128", PROFILES), observed(gpu=gpu))["ok"] is True


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_shipped_profile_refuses_a_driver_below_its_branch_naming_it_the_branch_and_the_variable(name):
    profile = resolve(name, PROFILES)
    minimum = profile["cuda"]["driver_branch_min"]
    below = dict(REFERENCE_GPU, driver_version="%d.100.01" % (minimum - 1))
    (problem,) = [line for line in evaluate(settings(), profile, observed(gpu=below))["problems"]
                  if line.startswith("Driver ")]
    assert "Driver %d.100.01 (branch %d) is older than branch %d" % (minimum - 1, minimum - 1, minimum) in problem
    assert "stack profile %s needs (stack_profiles.%s.cuda.driver_branch_min=%d)" % (name, name, minimum) in problem
    at = dict(REFERENCE_GPU, driver_version="%d.159.04" % minimum)
    assert "driver %d.159.04 (branch %d >= %d for CUDA %s)" % (minimum, minimum, minimum, profile["cuda"]["series"]) \
        in evaluate(settings(), profile, observed(gpu=at))["checked"]


def test_a_driver_version_without_a_branch_is_refused_saying_so():
    report = evaluate(settings(), CU130, observed(gpu=dict(REFERENCE_GPU, driver_version="unknown")))
    assert [line for line in report["problems"] if line.startswith("Driver unknown (branch unknown) is older than "
                                                                   "branch 580")]


def test_blackwell_on_the_proprietary_module_is_refused():
    report = evaluate(settings(), CU130, observed(gpu=dict(REFERENCE_GPU, kernel_module="proprietary")))
    assert len(report["problems"]) == 1 and "need NVIDIA's open kernel modules" in report["problems"][0]


def test_wrong_family_names_each_gpu():
    h200 = dict(RTX_PRO_6000, index=1, name="NVIDIA H200", compute_capability="9.0")
    gpu = dict(REFERENCE_GPU, gpus=[dict(RTX_PRO_6000, index=0), h200], count=2)
    report = evaluate(settings(expected_gpu_family="blackwell", expected_compute_capability="12.0"), CU130,
                      observed(gpu=gpu))
    assert report["problems"] == [
        "preflight_expected_gpu_family=blackwell, but GPU1 is NVIDIA H200 (compute capability 9.0, hopper): fix "
        "preflight_expected_gpu_family in the inventory, or run against the right hosts.",
        "preflight_expected_compute_capability=12.0, but GPU1 has 9.0: fix preflight_expected_compute_capability in "
        "the inventory, or run against the right hosts."]


def test_unknown_family_lists_the_known_ones():
    report = evaluate(settings(expected_gpu_family="rubin"), CU130, observed())
    assert report["problems"] == ["preflight_expected_gpu_family=rubin is not a GPU family; choose among blackwell, "
                                  "hopper, ada, ampere, turing, volta."]


def test_gpu_count_and_parallel_sizes():
    gpu = dict(REFERENCE_GPU, gpus=REFERENCE_GPU["gpus"][:7], count=7)
    report = evaluate(settings(expected_gpu_count=8, tensor_parallel_size=8), CU130, observed(gpu=gpu))
    assert report["problems"] == [
        "preflight_expected_gpu_count=8, but the driver sees 7 GPU(s): fix preflight_expected_gpu_count, or find out "
        "which GPU is missing (nvidia-smi -L, dmesg | grep -i nvrm).",
        "preflight_tensor_parallel_size=8 x preflight_pipeline_parallel_size=1 over preflight_nnodes=1 needs 8 GPU(s) "
        "per node, but this host has 7: lower the parallel sizes or add nodes."]


def test_the_pipeline_size_counts_towards_the_gpus_per_node():
    # tp 4 x pp 2 is 8 ranks: on 4 GPUs two ranks would share a GPU.
    gpu = dict(REFERENCE_GPU, gpus=REFERENCE_GPU["gpus"][:4], count=4)
    report = evaluate(settings(tensor_parallel_size=4, pipeline_parallel_size=2), CU130, observed(gpu=gpu))
    assert report["problems"] == [
        "preflight_tensor_parallel_size=4 x preflight_pipeline_parallel_size=2 over preflight_nnodes=1 needs 8 GPU(s) "
        "per node, but this host has 4: lower the parallel sizes or add nodes."]
    fits = evaluate(settings(tensor_parallel_size=2, pipeline_parallel_size=2), CU130, observed(gpu=gpu))
    assert "tp 2 x pp 2 over 1 node(s) fits 4 GPU(s)" in fits["checked"] and fits["ok"] is True


def test_parallel_sizes_split_over_nodes():
    peers = [dict(host="gpu0%d" % n, nnodes=2, node_rank=n, dist_init_addr="10.0.0.1:5000") for n in range(2)]
    two_nodes = settings(tensor_parallel_size=16, nnodes=2, node_rank=0, dist_init_addr="10.0.0.1:5000")
    report = evaluate(two_nodes, CU130, observed(peers=peers))
    assert report["ok"] is True, report["problems"]
    assert "node 0 of 2, joined at 10.0.0.1:5000" in report["checked"]
    uneven = evaluate(dict(two_nodes, tensor_parallel_size=3), CU130, observed(peers=peers))
    assert uneven["problems"] == [
        "preflight_tensor_parallel_size=3 x preflight_pipeline_parallel_size=1 does not split evenly over "
        "preflight_nnodes=2: each node runs the same number of ranks."]


def test_inconsistent_nodes_of_one_server():
    address = "10.0.0.1:5000"
    peers = [dict(host="gpu01", nnodes=2, node_rank=0, dist_init_addr=address),
             dict(host="gpu02", nnodes=3, node_rank=0, dist_init_addr=address),
             dict(host="gpu03", nnodes=2, node_rank=1, dist_init_addr=address),
             dict(host="other", nnodes=2, node_rank=0, dist_init_addr="10.0.0.9:5000")]
    report = evaluate(settings(nnodes=2, node_rank=0, dist_init_addr=address, tensor_parallel_size=2), CU130,
                      observed(peers=peers))
    assert report["problems"] == [
        "preflight_nnodes differs among the nodes of 10.0.0.1:5000: gpu01 has 2, gpu02 says 3. Give them one value.",
        "Nodes of 10.0.0.1:5000 share a preflight_node_rank (0: gpu01, gpu02): each node needs its own.",
        "preflight_nnodes=2, but 3 host(s) in this play use preflight_dist_init_addr=10.0.0.1:5000 (gpu01, gpu02, "
        "gpu03): run the play against every node of the server, or fix preflight_nnodes."]


def test_multi_node_needs_an_address_and_a_rank_in_range():
    report = evaluate(settings(nnodes=2, node_rank=2, tensor_parallel_size=2), CU130, observed())
    assert report["problems"] == [
        "preflight_node_rank=2 is outside 0..1 (preflight_nnodes=2).",
        "preflight_nnodes=2 but preflight_dist_init_addr is not set: give every node of the server the first node's "
        "address and a free port, like 10.0.0.1:5000."]


@pytest.mark.parametrize("model,problem", [
    ({"exists": False}, "preflight_model_path=/shared/kimi does not exist on this host"),
    ({"exists": True, "is_dir": True, "config_json": False}, "preflight_model_path=/shared/kimi has no config.json"),
    ({"exists": True, "is_dir": True, "config_json": True}, None),
])
def test_model_directory(model, problem):
    report = evaluate(settings(model_path="/shared/kimi"), CU130, observed(model=model))
    if problem is None:
        assert report["ok"] and "model /shared/kimi has config.json" in report["checked"]
    else:
        assert len(report["problems"]) == 1 and report["problems"][0].startswith(problem)


def test_hub_ids_are_not_looked_for_on_disk():
    report = evaluate(settings(model_path="moonshotai/Kimi-K2", model_is_hub_id=True), CU130, observed())
    assert report["ok"] is True


PYTHON_311 = {"executable": "/usr/bin/python3", "version": "3.11.2", "implementation": "cpython",
              "machine": "x86_64", "glibc": "2.36", "venv_error": None}
CU130_VENV = profile_virtualenv("/home/sglang/ml-env", CU130, "/usr/bin/python3", PYTHON_311)


def test_free_disk_for_a_new_virtualenv():
    small = {"siblings": [], "directory": "/home/sglang", "mount": "/home", "free_bytes": 5 * GIB}
    report = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130, observed(disk=small, venv_python=PYTHON_311))
    assert report["problems"] == [
        "/home has 5.0 GiB free for a new virtualenv of stack profile cu130 beside /home/sglang/ml-env, less than "
        "preflight_venv_min_free_gib=30: free space there, or choose another preflight_venv_path."]
    existing = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                        observed(disk=dict(small, siblings=[CU130_VENV["name"]]), venv_python=PYTHON_311))
    assert existing["ok"] is True
    assert ("virtualenv %s of stack profile cu130 exists; its disk was not checked" % CU130_VENV["dir"]
            in existing["checked"])
    roomy = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                     observed(disk=dict(small, free_bytes=31 * GIB), venv_python=PYTHON_311))
    assert "31.0 GiB free on /home for a new virtualenv" in roomy["checked"]


LOCKED = resolve("sglang-0.5.17-cu130", PROFILES)
LOCK = dict(json.loads((ROOT / "tests" / "data" / "stack_lock" / "sglang-0.5.17-cu130.json").read_text()),
            path="/srv/locks/sglang-0.5.17-cu130.json")
TREE = "/opt/torch/.venv"
TREE_SITE = TREE + "/lib/python3.11/site-packages"
# What inspect_torch.py reads of a torch image's virtualenv without importing torch, as preflight and the converged
# check ask it; the role's own run of it adds what importing torch said.
TREE_METADATA = {"executable": TREE + "/bin/python", "python": "3.11.2", "path": TREE, "candidates": [TREE_SITE],
                 "site_packages": TREE_SITE, "distributions": {"torch": "2.11.0+cu130", "triton": "3.6.0"},
                 "distributions_complete": True, "torch_distribution": "2.11.0+cu130", "import": None}
TREE_IMPORTED = dict(TREE_METADATA, **{"import": {"ok": True, "version": "2.11.0+cu130", "cuda": "13.0",
                                                  "file": TREE_SITE + "/torch/__init__.py"}})


def ml_stack_plan(profile, lock=None, torch_from=None):
    """The plan of the ml_stack role on the host preflight looks at; with torch_from, on the tree as the role's
    adopt_torch.yml found it (its inspect_torch.py run, importing torch)."""
    adoption = None
    if torch_from is not None:
        root = {"exists": True, "isdir": True, "islnk": False, "uid": 0, "pw_name": "root", "mode": "0755"}
        adoption = decide(profile, torch_from, TREE_IMPORTED, [root for _level in levels(TREE_SITE)], None, "3.11.2")
        assert adoption["ok"], adoption["problems"]
    return build_plan(
        {"venv_path": "/home/sglang/ml-env", "venv_owner": None, "python": "/usr/bin/python3",
         "index_url": "https://pypi.org/simple", "index_mirrors": {}, "pip_environment": {}, "offline": False,
         "wheelhouse_path": "/var/cache/w", "wheelhouse_controller_path": None, "system_packages": [],
         "torch_from": torch_from},
        profile, {"python": PYTHON_311, "owner": True, "venv_path": {"exists": True, "islnk": True},
                  "parent_exists": True, "dpkg": ""}, lock, adoption)


@pytest.mark.parametrize("profile, lock, torch_from", [(CU130, None, None), (LOCKED, LOCK, None), (LOCKED, LOCK, TREE)],
                         ids=["unlocked", "locked", "adopted"])
def test_the_profiles_virtualenv_is_the_one_ml_stack_builds(profile, lock, torch_from):
    plan = ml_stack_plan(profile, lock, torch_from)
    assert plan["problems"] == []
    small = {"siblings": [plan["venv_name"]], "directory": "/home/sglang", "mount": "/home", "free_bytes": 5 * GIB}
    report = evaluate(settings(venv_path="/home/sglang/ml-env", torch_from=torch_from), profile,
                      observed(disk=small, venv_python=PYTHON_311, lock=lock, adopted_tree=TREE_METADATA))
    assert report["ok"] is True
    assert "virtualenv %s of stack profile %s exists; its disk was not checked" % (
        plan["venv_dir"], profile["name"]) in report["checked"]
    assert _preflight.planned_virtualenv(settings(venv_path="/home/sglang/ml-env", torch_from=torch_from), profile,
                                         PYTHON_311, lock, TREE_METADATA)["dir"] == plan["venv_dir"]


def test_a_virtualenv_on_another_torch_or_none_counts_as_new():
    plan = ml_stack_plan(LOCKED, LOCK, TREE)
    small = {"siblings": [plan["venv_name"]], "directory": "/home/sglang", "mount": "/home", "free_bytes": 5 * GIB}
    for torch_from, tree in ((None, None), (TREE, dict(TREE_METADATA, torch_distribution="2.11.0")), (TREE, None),
                             (TREE, {"error": "Permission denied"})):
        report = evaluate(settings(venv_path="/home/sglang/ml-env", torch_from=torch_from), LOCKED,
                          observed(disk=small, venv_python=PYTHON_311, lock=LOCK, adopted_tree=tree))
        assert report["problems"][0].startswith("/home has 5.0 GiB free for a new virtualenv"), (torch_from, tree)


def test_preflight_reads_the_adopted_tree_as_ml_stack_does_without_importing_torch(monkeypatch):
    ran = []

    def run(argv):
        ran.append(argv)
        return 0, json.dumps(TREE_METADATA), ""

    monkeypatch.setattr(_preflight, "account", lambda name: {"uid": 0} if name == "sglang" else None)
    python = dict(PYTHON_311)
    assert adopted_tree(settings(torch_from=TREE), "# inspect torch", python, run) == TREE_METADATA
    assert ran == [["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "/usr/bin/python3", "-I", "-S", "-B", "-c", "# inspect torch", TREE, "--metadata-only"]]
    assert adopted(TREE_METADATA)["site_packages"] == TREE_SITE
    # No tree, a path that names none, no interpreter, or an owner who does not exist yet: nothing is run.
    for changes, python in (({}, PYTHON_311), ({"torch_from": "opt/torch"}, PYTHON_311),
                            ({"torch_from": TREE}, {"error": "not found"}),
                            ({"torch_from": TREE, "venv_owner": "mlserve"}, PYTHON_311)):
        assert adopted_tree(settings(**changes), "# inspect torch", python, run) is None
    assert len(ran) == 1


def measure_free_space(path):
    return free_space(str(path))


def test_a_stable_path_that_exists_does_not_spare_the_disk_check_for_a_new_profile(tmp_path):
    # Issue 14: the upgrade to cu130 builds a second virtualenv beside the cu128 one the stable path links to.
    (tmp_path / "ml-env.cu128-0123abcd").mkdir()
    (tmp_path / "ml-env.cu128-0123abcd" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "ml-env").symlink_to("ml-env.cu128-0123abcd")
    stable_path = str(tmp_path / "ml-env")
    more_than_any_disk = 2 ** 40
    upgrade = evaluate(settings(venv_path=stable_path, venv_min_free_gib=more_than_any_disk), CU130,
                       observed(disk=measure_free_space(stable_path), venv_python=PYTHON_311))
    assert upgrade["ok"] is False
    assert "for a new virtualenv of stack profile cu130 beside %s" % stable_path in upgrade["problems"][0]
    # Once cu130's own virtualenv is there, a re-run needs no room.
    (tmp_path / profile_virtualenv(stable_path, CU130, "/usr/bin/python3", PYTHON_311)["name"]).mkdir()
    rerun = evaluate(settings(venv_path=stable_path, venv_min_free_gib=more_than_any_disk), CU130,
                     observed(disk=measure_free_space(stable_path), venv_python=PYTHON_311))
    assert rerun["ok"] is True


def test_an_interpreter_that_does_not_run_leaves_the_virtualenv_counted_as_new():
    small = {"siblings": [CU130_VENV["name"]], "directory": "/home/sglang", "mount": "/home", "free_bytes": 5 * GIB}
    report = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                      observed(disk=small, venv_python={"error": "No such file or directory"}))
    assert report["problems"] == [
        "preflight_venv_python=/usr/bin/python3 (ml_stack_python) cannot run on this host (No such file or "
        "directory): install it, or point ml_stack_python at the interpreter the virtualenv is made with.",
        "/home has 5.0 GiB free for a new virtualenv of stack profile cu130 beside /home/sglang/ml-env, less than "
        "preflight_venv_min_free_gib=30: free space there, or choose another preflight_venv_path."]


def test_python_without_venv_support_is_refused_naming_the_package():
    report = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                      observed(disk={"siblings": [], "mount": "/", "free_bytes": 100 * GIB},
                               venv_python=dict(PYTHON_311, venv_error="No module named 'ensurepip'")))
    assert report["problems"] == [
        "preflight_venv_python=/usr/bin/python3 (ml_stack_python) cannot create virtualenvs (No module named "
        "'ensurepip'): apt-get install python3-venv (python3.11-venv for an interpreter other than the system's "
        "python3), then run again."]
    fine = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                    observed(disk={"siblings": [], "mount": "/", "free_bytes": 100 * GIB}, venv_python=PYTHON_311))
    assert fine["ok"] and "/usr/bin/python3 (Python 3.11.2) can create virtualenvs" in fine["checked"]


def test_without_a_virtualenv_the_interpreter_is_not_checked():
    report = evaluate(settings(), CU130, observed(venv_python={"error": "not asked"}))
    assert report["ok"] is True


@pytest.mark.parametrize("create,exists,problem", [(True, False, False), (False, True, False), (False, False, True)])
def test_the_service_user_must_exist_when_it_is_not_created(create, exists, problem):
    report = evaluate(settings(service_user_name="sglang", service_user_create=create), CU130,
                      observed(service_user_exists=exists))
    if problem:
        assert report["problems"] == [
            "service_user_name=sglang (preflight_service_user_name) is not a user on this host, and "
            "service_user_create is false: create the user first (useradd --system --shell /usr/sbin/nologin "
            "sglang), or set service_user_create: true to have the collection create it."]
    else:
        assert report["ok"] is True
        assert ("service user sglang exists" in report["checked"]) == (not create)


@pytest.mark.parametrize("state,ok", [("free", True), ("ours", True), ("in_use", False)])
def test_port(state, ok):
    report = evaluate(settings(), CU130, observed(port_state=state))
    assert report["ok"] is ok
    if not ok:
        assert report["problems"][0].startswith("preflight_port 127.0.0.1:30000 is in use by another process")


def test_container_without_gpus_passes_when_gpus_are_not_required_and_says_so():
    report = evaluate(settings(gpus_required=False, expected_gpu_family="blackwell"), CU130,
                      observed(gpu=NO_NVIDIA_SMI, distribution="Debian", distribution_version="12.8"))
    assert report["ok"] is True
    assert report["checked"][0] == "GPUs not required (preflight_gpus_required: false)"
    assert report["notes"] == ["GPUs are not required (preflight_gpus_required: false): no GPU was checked "
                               "(gpu_facts state no_nvidia_smi)."]


@pytest.mark.parametrize("state,fix", [("no_nvidia_smi", "Install the NVIDIA driver"), ("no_driver", "reboot"),
                                       ("driver_mismatch", "reboot"), ("no_gpu", "lspci")])
def test_gpus_required_but_unusable(state, fix):
    report = evaluate(settings(), CU130, observed(gpu=dict(NO_NVIDIA_SMI, state=state, message="said")))
    problem = [p for p in report["problems"] if p.startswith("GPUs are required")]
    assert problem and ("gpu_facts says %s: said." % state) in problem[0] and fix in problem[0]


def test_driver_updated_but_not_loaded_is_a_pending_reboot():
    gpu = dict(REFERENCE_GPU, kernel_module_installed_version="580.105.08")
    report = evaluate(settings(), CU130, observed(gpu=gpu))
    assert report["problems"] == ["A reboot is pending: NVIDIA kernel module 580.105.08 is installed but 580.95.05 "
                                  "is loaded. Reboot the host, then run again."]
    not_loaded = dict(NO_NVIDIA_SMI, state="no_driver", kernel_module_installed_version="580.95.05")
    report = evaluate(settings(gpus_required=False), CU130, observed(gpu=not_loaded))
    assert report["ok"] is True
    assert "A reboot is pending: NVIDIA kernel module 580.95.05 is installed but not loaded." in report["notes"]


def test_reboot_required_file():
    nvidia = evaluate(settings(), CU130, observed(reboot_required=True, reboot_required_packages=["nvidia-open-580"]))
    assert nvidia["problems"] == ["A reboot is pending: /var/run/reboot-required names nvidia-open-580. Reboot the "
                                  "host, then run again."]
    kernel = evaluate(settings(), CU130, observed(reboot_required=True, reboot_required_packages=["linux-base"]))
    assert kernel["ok"] is True
    assert kernel["notes"] == ["/var/run/reboot-required is present (linux-base): reboot when convenient."]


def test_every_problem_at_once():
    report = evaluate(settings(expected_gpu_family="hopper", model_path="/nope", tensor_parallel_size=16), CU130,
                      observed(port_state="in_use", distribution="Ubuntu", distribution_version="20.04"))
    assert len(report["problems"]) == 5


def test_public_blackwell_csv_is_a_blackwell_family():
    gpus = parse_query((ROOT / "tests" / "data" / "nvidia_smi" / "csv-rtx-pro-6000-blackwell-maxq.txt").read_text())
    assert set(family_of(gpu["compute_capability"]) for gpu in gpus) == {"blackwell"}


def test_the_recorded_h200_host_passes_as_hopper_and_is_refused_as_blackwell():
    """The 2x H200 host's gpu_facts, as the module returned them there (tests/device/record_preflight.sh); the
    refusal must be the one the role printed there (tests/data/h200/preflight.txt)."""
    import json
    h200 = json.loads((ROOT / "tests" / "data" / "h200" / "gpu_facts_module.json").read_text())["ansible_facts"]["gpu"]
    printed = (ROOT / "tests" / "data" / "h200" / "preflight.txt").read_text()
    host = observed(gpu=h200)
    hopper = evaluate(settings(expected_gpu_family="hopper", expected_compute_capability="9.0", expected_gpu_count=2,
                               tensor_parallel_size=2), CU130, host)
    assert hopper["ok"] is True
    assert "2 GPU(s): NVIDIA H200, compute capability 9.0" in hopper["checked"]
    blackwell = evaluate(settings(expected_gpu_family="blackwell", expected_compute_capability="12.0",
                                  expected_gpu_count=8, tensor_parallel_size=8), CU130, host)
    assert len(blackwell["problems"]) == 4
    for number, problem in enumerate(blackwell["problems"], 1):
        assert "(%d) %s" % (number, problem) in printed
    assert blackwell["problems"][0].startswith("preflight_expected_gpu_family=blackwell, but GPU0 is NVIDIA H200 "
                                               "(compute capability 9.0, hopper); GPU1 is NVIDIA H200")


def test_free_space_probe_measures_the_nearest_existing_ancestor(tmp_path):
    measure = measure_free_space
    new = measure(tmp_path / "not" / "yet" / "ml-env")
    assert new["siblings"] == [] and new["directory"] == str(tmp_path) and new["free_bytes"] > 0
    assert str(tmp_path).startswith(new["mount"])
    for name in ("ml-env", "ml-env.cu128-0123abcd", "ml-env.cu130-89abcdef", "ml-envy", "other"):
        (tmp_path / name).mkdir()
    assert measure(tmp_path / "ml-env")["siblings"] == ["ml-env.cu128-0123abcd", "ml-env.cu130-89abcdef"]


@pytest.mark.parametrize("capability", ["8.9\n", "12.0\n", "9.0 ", "12.0abc", "\u0661\u0662.0"])
def test_a_compute_capability_with_anything_after_it_has_no_family(capability):
    assert family_of(capability) is None


@pytest.mark.parametrize("version, branch", [("580.95.05", 580), ("580", None), ("\u0665\u0668\u0660.95", None), (None, None),
                                             ("9" * 5000 + ".1", None), ("\u00b2.1", None)])
def test_driver_branch_reads_ascii_digits_only(version, branch):
    assert driver_branch(version) == branch


def test_zero_nodes_is_a_message_not_a_division_by_zero():
    report = evaluate(settings(nnodes=0), CU130, observed())
    assert "preflight_nnodes=0 must be 1 or more." in report["problems"]
    assert not [line for line in report["checked"] if line.startswith("tp ")]


@pytest.mark.parametrize("name", ["tensor_parallel_size", "pipeline_parallel_size", "nnodes"])
def test_negative_sizes_are_refused_and_never_said_to_fit(name):
    report = evaluate(settings(**{name: -8}), CU130, observed())
    assert "preflight_%s=-8 must be 1 or more." % name in report["problems"]
    assert not [line for line in report["checked"] if line.startswith("tp ")]


def test_an_old_driver_that_the_run_replaces_is_reported_not_refused():
    gpu = dict(REFERENCE_GPU, driver_version="570.133.20", kernel_module="proprietary")
    report = evaluate(settings(driver_install=True), CU130, observed(gpu=gpu))
    assert report["ok"] is True
    assert report["notes"] == [
        "Driver 570.133.20 (branch 570) will be replaced by branch 580, which CUDA 13.0 of stack profile cu130 needs "
        "(stack_profiles.cu130.cuda.driver_branch_min=580), as cuda_driver_install is true; the server can start "
        "only after the reboot that loads it.",
        "The proprietary kernel module is loaded, which Blackwell GPUs cannot use; it will be replaced by the open "
        "one (nvidia-open, cuda_driver_install: true) and loaded by the reboot after it."]
    refused = evaluate(settings(driver_install=False), CU130, observed(gpu=gpu))
    assert len(refused["problems"]) == 2


def test_the_driver_plan_defaults_to_the_cuda_roles_variable():
    assert DEFAULTS["preflight_driver_install"] == "{{ cuda_driver_install | default(false) }}"


def test_a_pending_reboot_that_the_cuda_role_does_is_reported_not_refused():
    gpu = dict(REFERENCE_GPU, kernel_module_installed_version="580.105.08")
    rebooting = evaluate(settings(driver_install=True, driver_reboot=True), CU130, observed(gpu=gpu))
    assert rebooting["ok"] is True
    assert rebooting["notes"] == ["A reboot is pending: NVIDIA kernel module 580.105.08 is installed but 580.95.05 "
                                  "is loaded. The cuda role reboots the host (cuda_driver_install and "
                                  "cuda_driver_reboot: true)."]
    assert evaluate(settings(driver_install=True), CU130, observed(gpu=gpu))["ok"] is False
    assert DEFAULTS["preflight_driver_reboot"] == "{{ cuda_driver_reboot | default(false) }}"


# The tests below were written against the mutants that survived `make mutation` (tests/mutation/scores.txt): each
# pins a text or an edge that no other test looked at.


@pytest.mark.parametrize("state,message,fix", [
    ("no_nvidia_smi", "said", "Install the NVIDIA driver (role blackwell.gpu_node.cuda with cuda_driver_install: "
                              "true)."),
    ("no_driver", "said", "If the driver was just installed or updated, reboot; otherwise see `dmesg | grep -i nvrm`."),
    ("driver_mismatch", "said", "The loaded kernel module and the driver's libraries differ, as after a driver "
                                "update: reboot."),
    ("no_gpu", "said", "Check that the GPUs are seated and visible (lspci | grep -i nvidia)."),
    ("error", "said", "Run nvidia-smi on the host to see why it fails."),
    ("unheard_of", "", ""),
])
def test_each_unusable_state_has_its_whole_fix(state, message, fix):
    report = evaluate(settings(), CU130, observed(gpu=dict(NO_NVIDIA_SMI, state=state, message=message)))
    assert [p for p in report["problems"] if p.startswith("GPUs are required")] == [
        "GPUs are required (preflight_gpus_required: true) but gpu_facts says %s: %s. %s" % (
            state, message or "-", fix)]


def test_gpus_required_but_none_listed():
    report = evaluate(settings(), CU130, observed(gpu=dict(REFERENCE_GPU, gpus=[])))
    assert report["problems"] == ["GPUs are required (preflight_gpus_required: true) but nvidia-smi lists none."]


def test_gpus_not_required_are_still_checked_when_they_work():
    report = evaluate(settings(gpus_required=False), CU130, observed())
    assert "8 GPU(s): NVIDIA RTX PRO 6000 Blackwell Server Edition, compute capability 12.0" in report["checked"]
    assert report["notes"] == []


@pytest.mark.parametrize("gpu", [dict(REFERENCE_GPU, gpus=[]), dict(REFERENCE_GPU, state="no_driver")])
def test_gpus_not_required_are_not_checked_unless_ok_and_listed(gpu):
    report = evaluate(settings(gpus_required=False), CU130, observed(gpu=gpu))
    assert not [line for line in report["checked"] if "GPU(s)" in line]
    assert report["notes"] == ["GPUs are not required (preflight_gpus_required: false): no GPU was checked "
                               "(gpu_facts state %s)." % gpu["state"]]


def test_mixed_gpus_are_listed_each_and_an_unknown_capability_is_a_question_mark():
    hopper = dict(RTX_PRO_6000, index=1, name="NVIDIA H200", compute_capability="9.0")
    unknown = dict(RTX_PRO_6000, index=2, name="NVIDIA Mystery", compute_capability=None)
    report = evaluate(settings(expected_gpu_family="blackwell"), CU130,
                      observed(gpu=dict(REFERENCE_GPU, gpus=[RTX_PRO_6000, hopper, unknown])))
    assert ("3 GPU(s): NVIDIA H200, NVIDIA Mystery, NVIDIA RTX PRO 6000 Blackwell Server Edition, compute "
            "capability 12.0, 9.0, ?") in report["checked"]
    assert report["problems"] == [
        "preflight_expected_gpu_family=blackwell, but GPU1 is NVIDIA H200 (compute capability 9.0, hopper); GPU2 is "
        "NVIDIA Mystery (compute capability None, unknown family): fix preflight_expected_gpu_family in the "
        "inventory, or run against the right hosts."]


def test_what_was_checked_about_the_gpus_is_said_in_full():
    report = evaluate(settings(expected_gpu_family="blackwell", expected_compute_capability="12.0"), CU130,
                      observed())
    assert report["checked"][2:] == [
        "8 GPU(s): NVIDIA RTX PRO 6000 Blackwell Server Edition, compute capability 12.0",
        "driver 580.95.05 (branch 580 >= 580 for CUDA 13.0)",
        "open kernel module",
        "GPU family blackwell as expected",
        "compute capability 12.0 as expected",
        "tp 1 x pp 1 over 1 node(s) fits 8 GPU(s)",
        "port 127.0.0.1:30000 is free"]
    unnamed = evaluate(settings(), CU130, observed(gpu=dict(REFERENCE_GPU, kernel_module=None)))
    assert not [line for line in unnamed["checked"] if "kernel module" in line]


def test_blackwell_on_the_proprietary_module_is_refused_with_the_whole_fix():
    report = evaluate(settings(), CU130, observed(gpu=dict(REFERENCE_GPU, kernel_module="proprietary")))
    assert report["problems"] == [
        "Blackwell GPUs need NVIDIA's open kernel modules, but the proprietary one is loaded: install the open "
        "flavour (role blackwell.gpu_node.cuda with cuda_driver_install: true installs nvidia-open) and reboot."]


def test_a_driver_mismatch_is_a_pending_reboot_with_its_message():
    gpu = dict(REFERENCE_GPU, state="driver_mismatch", message="Failed to initialize NVML: Driver/library mismatch")
    assert reboot_pending(gpu, [], False) == [
        "the loaded NVIDIA kernel module and the driver's libraries differ (Failed to initialize NVML: "
        "Driver/library mismatch)"]
    assert reboot_pending(dict(gpu, state="ok"), [], False) == []


def test_every_pending_reason_is_listed_in_one_problem_or_note():
    gpu = dict(REFERENCE_GPU, kernel_module_installed_version="580.105.08")
    packages = ["nvidia-open-580", "nvidia-dkms-580", "linux-base"]
    reasons = ("NVIDIA kernel module 580.105.08 is installed but 580.95.05 is loaded; /var/run/reboot-required "
               "names nvidia-open-580, nvidia-dkms-580")
    refused = evaluate(settings(), CU130, observed(gpu=gpu, reboot_required=True, reboot_required_packages=packages))
    assert refused["problems"] == ["A reboot is pending: %s. Reboot the host, then run again." % reasons]
    assert refused["notes"] == []  # the reboot-required file is one of the reasons already
    rebooted = evaluate(settings(driver_install=True, driver_reboot=True), CU130,
                        observed(gpu=gpu, reboot_required=True, reboot_required_packages=packages))
    assert rebooted["notes"] == ["A reboot is pending: %s. The cuda role reboots the host (cuda_driver_install and "
                                 "cuda_driver_reboot: true)." % reasons]


def test_the_reboot_required_file_is_noted_when_no_pending_reason_names_it():
    gpu = dict(REFERENCE_GPU, kernel_module_installed_version="580.105.08")
    report = evaluate(settings(gpus_required=False), CU130,
                      observed(gpu=gpu, reboot_required=True, reboot_required_packages=["linux-base", "libc6"]))
    assert report["notes"] == [
        "A reboot is pending: NVIDIA kernel module 580.105.08 is installed but 580.95.05 is loaded.",
        "/var/run/reboot-required is present (linux-base, libc6): reboot when convenient."]
    unnamed = evaluate(settings(), CU130, observed(reboot_required=True, reboot_required_packages=[]))
    assert unnamed["notes"] == ["/var/run/reboot-required is present (no package named): reboot when convenient."]


def test_parallel_sizes_that_split_only_as_a_product():
    # tp 2 x pp 2 = 4 ranks split over 4 nodes, though neither size does alone.
    address = "10.0.0.1:5000"
    peers = [dict(host="gpu0%d" % rank, nnodes=4, node_rank=rank, dist_init_addr=address) for rank in range(4)]
    report = evaluate(settings(tensor_parallel_size=2, pipeline_parallel_size=2, nnodes=4, dist_init_addr=address),
                      CU130, observed(peers=peers))
    assert report["problems"] == []
    assert "tp 2 x pp 2 over 4 node(s) fits 8 GPU(s)" in report["checked"]
    assert "node 0 of 4, joined at 10.0.0.1:5000" in report["checked"]


def test_a_single_node_has_rank_0_only():
    report = evaluate(settings(node_rank=1), CU130, observed())
    assert report["problems"] == ["preflight_node_rank=1 is outside 0..0 (preflight_nnodes=1)."]


def test_every_disagreeing_node_and_shared_rank_is_listed_and_nothing_is_said_to_join():
    address = "10.0.0.1:5000"
    peers = [dict(host="gpu01", nnodes=2, node_rank=0, dist_init_addr=address),
             dict(host="gpu02", nnodes=3, node_rank=0, dist_init_addr=address),
             dict(host="gpu03", nnodes=4, node_rank=0, dist_init_addr=address),
             dict(host="gpu04", nnodes=2, node_rank=1, dist_init_addr=address),
             dict(host="gpu05", nnodes=2, node_rank=1, dist_init_addr=address)]
    report = evaluate(settings(nnodes=2, dist_init_addr=address, tensor_parallel_size=2), CU130,
                      observed(peers=peers))
    assert report["problems"][:2] == [
        "preflight_nnodes differs among the nodes of 10.0.0.1:5000: gpu01 has 2, gpu02 says 3, gpu03 says 4. Give "
        "them one value.",
        "Nodes of 10.0.0.1:5000 share a preflight_node_rank (0: gpu01, gpu02, gpu03; 1: gpu04, gpu05): each node "
        "needs its own."]
    assert not [line for line in report["checked"] if "joined at" in line]


@pytest.mark.parametrize("peers", [
    # as many members as nodes, but one disagrees: not joined
    [dict(host="gpu01", nnodes=2, node_rank=0), dict(host="gpu02", nnodes=3, node_rank=1)],
    # all agree, but one node is missing from the play: not joined
    [dict(host="gpu01", nnodes=2, node_rank=0)],
])
def test_a_node_is_said_to_join_only_when_every_check_passed(peers):
    address = "10.0.0.1:5000"
    report = evaluate(settings(nnodes=2, dist_init_addr=address, tensor_parallel_size=2), CU130,
                      observed(peers=[dict(peer, dist_init_addr=address) for peer in peers]))
    assert report["problems"]
    assert not [line for line in report["checked"] if "joined at" in line]


def test_model_texts_in_full():
    hub = evaluate(settings(model_path="moonshotai/Kimi-K2", model_is_hub_id=True), CU130, observed())
    assert "model moonshotai/Kimi-K2 is a hub id, downloaded by the server" in hub["checked"]
    missing = evaluate(settings(model_path="/m"), CU130, observed(model={"exists": False}))
    assert missing["problems"] == ["preflight_model_path=/m does not exist on this host: copy or mount the model "
                                   "there, or fix the path."]
    file = evaluate(settings(model_path="/m"), CU130, observed(model={"exists": True, "is_dir": False}))
    assert file["problems"] == ["preflight_model_path=/m has no config.json, so it is not a Hugging Face model "
                                "directory: point it at the directory that holds config.json."]


def test_the_service_user_is_created_unless_told_otherwise():
    unset = settings()
    del unset["service_user_create"]
    report = evaluate(unset, CU130, observed(service_user_exists=False))
    assert report["ok"] is True


def test_python_without_venv_support_and_without_a_version_names_the_generic_package():
    report = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                      observed(venv_python={"venv_error": "No module named ensurepip"}, disk={"free_bytes": None}))
    assert report["problems"] == [
        "preflight_venv_python=/usr/bin/python3 (ml_stack_python) cannot create virtualenvs (No module named "
        "ensurepip): apt-get install python3-venv (python-venv for an interpreter other than the system's python3), "
        "then run again."]


def test_unknown_free_space_is_a_note():
    report = evaluate(settings(venv_path="/home/sglang/ml-env"), CU130,
                      observed(disk={"mount": "/home", "free_bytes": None}, venv_python=PYTHON_311))
    assert report["ok"] is True
    assert report["notes"] == ["The free space for /home/sglang/ml-env is not known; it was not checked."]


def test_exactly_the_minimum_free_space_is_enough():
    gib = 1024 ** 3  # not the module's GIB: its value is what this checks
    report = evaluate(settings(venv_path="/home/sglang/ml-env", venv_min_free_gib=30), CU130,
                      observed(disk={"mount": "/home", "free_bytes": 30 * gib}, venv_python=PYTHON_311))
    assert report["ok"] is True
    assert "30.0 GiB free on /home for a new virtualenv" in report["checked"]
    short = evaluate(settings(venv_path="/home/sglang/ml-env", venv_min_free_gib=30), CU130,
                     observed(disk={"mount": "/home", "free_bytes": 30 * gib - 1}, venv_python=PYTHON_311))
    assert short["problems"][0].startswith("/home has 30.0 GiB free for a new virtualenv")


@pytest.mark.parametrize("host,state,line", [
    ("10.1.2.3", "free", "port 10.1.2.3:30000 is free"),
    (None, "free", "port 127.0.0.1:30000 is free"),
    ("", "ours", "port 127.0.0.1:30000 is held by our own server"),
])
def test_port_texts_in_full(host, state, line):
    report = evaluate(settings(host=host), CU130, observed(port_state=state))
    assert report["ok"] is True and report["checked"][-1] == line


def test_a_port_in_use_names_the_address_and_the_fix():
    report = evaluate(settings(host="10.1.2.3"), CU130, observed(port_state="in_use"))
    assert report["problems"] == [
        "preflight_port 10.1.2.3:30000 is in use by another process, not by this collection's server: stop it (ss "
        "-ltnp 'sport = :30000' shows which) or choose another port."]


def test_a_port_state_not_known_says_nothing():
    report = evaluate(settings(), CU130, observed(port_state=None))
    assert report["ok"] is True and not [line for line in report["checked"] if line.startswith("port ")]


# A bare-metal HGX H200: the nvidia-nvswitch driver holds its four switches.
H200 = dict(RTX_PRO_6000, name="NVIDIA H200", compute_capability="9.0", memory_total_mib=143771)
HGX_H200 = dict(REFERENCE_GPU, interconnect="nvlink", gpus=[dict(H200, index=n) for n in range(8)], nvswitch=True,
                nvswitch_devices=["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"],
                nvlink_generation=4, fabric=dict(state="Completed", status="Success"))
FABRIC_MANAGER_580_82 = "nvidia-fabricmanager\t580.82.07-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"


def test_a_fabric_manager_of_another_version_than_the_driver_is_refused():
    report = evaluate(settings(), CU130, observed(gpu=HGX_H200, fabric_packages=FABRIC_MANAGER_580_82))
    assert report["ok"] is False
    assert [problem for problem in report["problems"] if "fabricmanager" in problem] == [
        "nvidia-fabricmanager 580.82.07-1 is installed but the loaded NVIDIA driver is 580.95.05: Fabric Manager "
        "needs its packages at the driver's exact version (it refuses to start otherwise, and CUDA then fails with "
        "error 802 on NVSwitch systems). Run role blackwell.gpu_node.cuda (cuda_fabric_manager: auto or true puts "
        "them at the driver's version), or remove nvidia-fabricmanager where the host has no NVSwitch "
        "(cuda_fabric_manager: false)."]


def test_a_mismatch_the_cuda_role_is_about_to_fix_is_a_note():
    report = evaluate(settings(fabric_manager="auto"), CU130, observed(gpu=HGX_H200,
                                                                       fabric_packages=FABRIC_MANAGER_580_82))
    assert report["ok"] is True
    assert any(note.startswith("The cuda role will set this right (preflight_fabric_manager: auto): "
                               "nvidia-fabricmanager 580.82.07-1") for note in report["notes"])


def test_a_fabric_manager_at_the_driver_version_is_checked():
    packages = "nvidia-fabricmanager\t580.95.05-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"
    report = evaluate(settings(), CU130, observed(gpu=HGX_H200, fabric_packages=packages))
    assert report["ok"] is True
    assert "nvidia-fabricmanager 580.95.05-1 at the driver's version 580.95.05" in report["checked"]


def test_nvlink_5_switches_need_the_subnet_manager_beside_fabric_manager():
    b200_gpus = [dict(RTX_PRO_6000, index=n, name="NVIDIA B200", compute_capability="10.0") for n in range(8)]
    b200 = dict(HGX_H200, nvswitch_devices=[], nvlink_generation=5, gpus=b200_gpus)
    packages = "nvidia-fabricmanager\t580.95.05-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"
    report = evaluate(settings(), CU130, observed(gpu=b200, fabric_packages=packages))
    assert any("NVIDIA's NVLink subnet manager nvlsm is not" in problem for problem in report["problems"])
    fine = evaluate(settings(), CU130, observed(gpu=b200, fabric_packages=packages + "nvlsm\t2025.06.5-1\tii\n"))
    assert fine["ok"] is True


def test_no_fabric_packages_say_nothing_about_them():
    report = evaluate(settings(), CU130, observed())
    assert not [line for line in report["checked"] + report["notes"] + report["problems"] if "fabric" in line.lower()]


FABRIC_AT_580_95 = "nvidia-fabricmanager\t580.95.05-1\tii\nlibnvidia-nscq\t580.95.05-1\tii\n"


def test_a_missing_subnet_manager_is_refused_with_the_whole_fix():
    b200 = dict(HGX_H200, nvswitch_devices=[], nvlink_generation=5)
    report = evaluate(settings(), CU130, observed(gpu=b200, fabric_packages=FABRIC_AT_580_95))
    assert report["problems"] == [
        "nvidia-fabricmanager is installed on NVLink 5 switches, but NVIDIA's NVLink subnet manager nvlsm is not, "
        "without which the fabric does not come up: run role blackwell.gpu_node.cuda (cuda_fabric_manager: auto or "
        "true installs it)."]


def test_every_fabric_manager_package_is_checked_against_the_loaded_kernel_module():
    packages = FABRIC_AT_580_95 + "nvidia-fabricmanager-dev\t580.95.05-1\tii\n"
    # The kernel module's version is the loaded driver's; nvidia-smi's driver_version is its user space.
    gpu = dict(HGX_H200, driver_version="580.82.07")
    report = evaluate(settings(), CU130, observed(gpu=gpu, fabric_packages=packages))
    assert ("nvidia-fabricmanager 580.95.05-1, nvidia-fabricmanager-dev 580.95.05-1 at the driver's version "
            "580.95.05") in report["checked"]
    without_module = dict(HGX_H200, kernel_module_version=None, driver_version="580.95.05")
    report = evaluate(settings(), CU130, observed(gpu=without_module, fabric_packages=FABRIC_AT_580_95))
    assert "nvidia-fabricmanager 580.95.05-1 at the driver's version 580.95.05" in report["checked"]


def test_fabric_manager_is_checked_where_gpus_are_not_required():
    report = evaluate(settings(gpus_required=False), CU130,
                      observed(gpu=HGX_H200, fabric_packages=FABRIC_MANAGER_580_82))
    assert [problem for problem in report["problems"] if problem.startswith("nvidia-fabricmanager 580.82.07-1 ")]


# The GPUs' health: the recorded 2x H200 host (tests/data/h200/nvidia-smi-q.txt), as it was and with its second GPU's
# row remapping failed, the field as NVIDIA's "GPU Memory Error Management" says it reads then.
H200_DETAILS = (ROOT / "tests" / "data" / "h200" / "nvidia-smi-q.txt").read_text()
SECOND_GPU = "GPU 00000000:00:07.0"
REMAP_FAILED = ("Remapping Failure Occurred                     : No",
                "Remapping Failure Occurred                     : Yes")
REMAP_FAILURE_REFUSAL = (
    "GPU 1 (00000000:00:07.0) is unhealthy: row_remap_failure, Row remapping failed: a bank has no spare row left "
    "(NVIDIA's RMA criterion). Evidence: Remapped Rows > Remapping Failure Occurred: Yes. Action drain_and_open_case: "
    "Drain the node and open a case with NVIDIA or the system's vendor (RMA). Run again once it is done; to let the "
    "node serve with it anyway, set preflight_gpu_health_severity_overrides: {row_remap_failure: degraded}.")


def second_gpu_with(old, new):
    first, second = H200_DETAILS.split(SECOND_GPU, 1)
    return first + SECOND_GPU + second.replace(old, new, 1)


def health_of(details=H200_DETAILS, **more):
    return dict(assess("ok", "", details, **more), kernel_log=dict(read=True, source="/dev/kmsg", problem=None))


def test_an_unhealthy_gpu_refuses_the_node_naming_the_gpu_the_finding_its_evidence_the_action_and_the_setting():
    report = evaluate(settings(), CU130, observed(gpu_health=health_of(second_gpu_with(*REMAP_FAILED))))
    assert report["problems"] == [REMAP_FAILURE_REFUSAL]
    assert report["ok"] is False


def test_an_unhealthy_gpu_refuses_the_node_where_gpus_are_not_required_but_seen():
    report = evaluate(settings(gpus_required=False), CU130,
                      observed(gpu_health=health_of(second_gpu_with(*REMAP_FAILED))))
    assert report["problems"] == [REMAP_FAILURE_REFUSAL]


def test_a_degraded_gpu_is_a_warning_not_a_refusal():
    details = second_gpu_with(*REMAP_FAILED)
    health = health_of(details, severity_overrides={"row_remap_failure": "degraded"})
    report = evaluate(settings(), CU130, observed(gpu_health=health))
    warning = ("GPU 1 (00000000:00:07.0) is degraded: row_remap_failure, Row remapping failed: a bank has no spare row "
               "left (NVIDIA's RMA criterion). Evidence: Remapped Rows > Remapping Failure Occurred: Yes. Action "
               "drain_and_open_case: Drain the node and open a case with NVIDIA or the system's vendor (RMA).")
    assert (report["ok"], report["notes"]) == (True, [warning])
    assert gpu_health_lines(health)["warnings"] == [warning]


def test_healthy_gpus_are_said_to_be_checked():
    report = evaluate(settings(), CU130, observed(gpu_health=health_of()))
    assert "GPU health: 2 GPU(s), no unhealthy or degraded finding" in report["checked"]
    assert report["notes"] == [] and report["problems"] == []


def test_health_nvidia_smi_cannot_report_and_an_unread_kernel_log_are_notes():
    health = dict(assess("error", "nvidia-smi -q failed", ""),
                  kernel_log=dict(read=True, source=None, problem="kernel log not readable: /dev/kmsg: denied"))
    report = evaluate(settings(), CU130, observed(gpu_health=health))
    assert report["ok"] is True
    assert report["notes"] == [
        "The GPUs' health is not known: nvidia-smi could not report on the GPUs (error): nvidia-smi -q failed.",
        "Xid errors since boot were not looked for: kernel log not readable: /dev/kmsg: denied."]


def test_no_gpu_seen_is_no_health_to_weigh():
    report = evaluate(settings(gpus_required=False), CU130,
                      observed(gpu=NO_NVIDIA_SMI, gpu_health=health_of(second_gpu_with(*REMAP_FAILED))))
    assert report["ok"] is True
    assert not [line for line in report["notes"] + report["checked"] if "health" in line]


def test_health_is_read_only_where_gpus_are_seen_with_the_inventorys_severities():
    asked = []

    def gather(overrides):
        asked.append(overrides)
        return health_of()
    assert gpu_health_state(settings(), NO_NVIDIA_SMI, gather) is None
    assert gpu_health_state(settings(), dict(REFERENCE_GPU, gpus=[]), gather) is None
    overrides = {"pcie_width_degraded": "info", "xid_13": "degraded"}
    assert gpu_health_state(settings(gpu_health_severity_overrides=overrides), REFERENCE_GPU, gather)["verdict"] == (
        "healthy")
    assert asked == [overrides]


@pytest.mark.parametrize("overrides, words", [
    ({"pcie_lanes": "info"}, "preflight_gpu_health_severity_overrides: 'pcie_lanes' is no finding id; known ids: "),
    ({"row_remap_failure": "fatal"},
     "preflight_gpu_health_severity_overrides: row_remap_failure: 'fatal' is no severity; use one of unhealthy, "
     "degraded, info. Nothing was read of the GPUs' health."),
])
def test_an_override_that_is_not_valid_refuses_the_host_naming_the_setting_before_anything_is_read(overrides, words):
    health = gpu_health_state(settings(gpu_health_severity_overrides=overrides), REFERENCE_GPU, None)
    report = evaluate(settings(), CU130, observed(gpu_health=health))
    (problem,) = report["problems"]
    assert words in problem


# The loader path of the recorded H200 host (tests/data/h200/cuda_host.txt): driver 580.159.04, and NVIDIA's
# cuda-compat-13-0 580.95.05 installed in /usr/local/cuda-13.0/compat, there listed by no linker file.
DRIVERS_OWN = dict(directory="/usr/lib/x86_64-linux-gnu", libcuda="580.159.04", variable=None,
                   file="/etc/ld.so.conf.d/x86_64-linux-gnu.conf")
COMPAT = dict(directory="/usr/local/cuda-13.0/compat", libcuda="580.95.05", variable="runtime_env_extra_env", file=None)
H200_DRIVER = dict(REFERENCE_GPU, driver_version="580.159.04", kernel_module_version="580.159.04",
                   kernel_module_installed_version="580.159.04")


def test_the_drivers_own_libcuda_alone_on_the_loader_path_is_checked():
    report = evaluate(settings(), CU130, observed(gpu=H200_DRIVER, loader=[DRIVERS_OWN]))
    assert report["ok"] is True
    assert "the loader path holds no libcuda but the driver's own (580.159.04)" in report["checked"]


def test_compatibility_libraries_in_the_servers_library_path_on_a_newer_driver_are_refused():
    report = evaluate(settings(), CU130, observed(gpu=H200_DRIVER, loader=[COMPAT, DRIVERS_OWN]))
    assert report["problems"] == [
        "/usr/local/cuda-13.0/compat (LD_LIBRARY_PATH of runtime_env_extra_env) holds libcuda 580.95.05, a CUDA "
        "compatibility library, but driver 580.159.04 is new enough for CUDA 13.0.1 of stack profile cu130, which "
        "needs 580.82.07: a process that loads that libcuda instead of the driver's own fails with CUDA error 803 "
        "(cudaErrorSystemDriverMismatch). Compatibility libraries serve only a driver older than the CUDA release "
        "needs: remove /usr/local/cuda-13.0/compat from LD_LIBRARY_PATH in runtime_env_extra_env."]


def test_compatibility_libraries_in_the_linkers_configuration_on_the_driver_the_release_needs_are_refused():
    in_conf = dict(COMPAT, variable=None, file="/etc/ld.so.conf.d/00-cuda-compat.conf")
    gpu = dict(REFERENCE_GPU, driver_version="580.82.07")
    (problem,) = evaluate(settings(), CU130, observed(gpu=gpu, loader=[in_conf]))["problems"]
    assert problem.startswith("/usr/local/cuda-13.0/compat (/etc/ld.so.conf.d/00-cuda-compat.conf) holds libcuda "
                              "580.95.05, a CUDA compatibility library, but driver 580.82.07 is new enough for CUDA "
                              "13.0.1 of stack profile cu130, which needs 580.82.07")
    assert problem.endswith("remove /usr/local/cuda-13.0/compat from /etc/ld.so.conf.d/00-cuda-compat.conf and run "
                            "ldconfig, or remove the cuda-compat package that put it there.")


def test_compatibility_libraries_for_a_driver_older_than_the_release_needs_are_accepted():
    gpu = dict(REFERENCE_GPU, driver_version="580.65.06")
    report = evaluate(settings(), CU130, observed(gpu=gpu, loader=[COMPAT]))
    assert report["ok"] is True
    assert ("CUDA compatibility libraries for driver 580.65.06, older than the 580.82.07 that CUDA 13.0.1 needs: "
            "/usr/local/cuda-13.0/compat (LD_LIBRARY_PATH of runtime_env_extra_env) holds libcuda 580.95.05"
            in report["checked"])


def test_compatibility_libraries_for_a_driver_that_the_run_replaces_are_refused():
    gpu = dict(REFERENCE_GPU, driver_version="570.133.20")
    report = evaluate(settings(driver_install=True), CU130, observed(gpu=gpu, loader=[COMPAT]))
    assert len(report["problems"]) == 1
    assert ("but the driver of branch 580 that cuda_driver_install puts in its place is new enough for CUDA 13.0.1"
            in report["problems"][0])
    assert evaluate(settings(), CU130, observed(gpu=gpu, loader=[COMPAT]))["problems"][1:] == []


def test_compatibility_libraries_for_a_cuda_release_of_unknown_needs_are_a_note():
    profile = dict(CU130, cuda=dict(CU130["cuda"], version="13.9.4"))
    report = evaluate(settings(), profile, observed(gpu=H200_DRIVER, loader=[COMPAT]))
    assert report["ok"] is True
    assert report["notes"] == [
        "/usr/local/cuda-13.0/compat (LD_LIBRARY_PATH of runtime_env_extra_env) holds libcuda 580.95.05: CUDA "
        "compatibility libraries, and the driver that CUDA 13.9.4 of stack profile cu130 needs is not known here, so "
        "whether driver 580.159.04 needs them was not checked."]


def test_the_loader_path_is_weighed_only_where_the_driver_lists_gpus():
    report = evaluate(settings(gpus_required=False), CU130, observed(gpu=NO_NVIDIA_SMI, loader=[COMPAT]))
    assert report["ok"] is True and not [line for line in report["checked"] if "libcuda" in line]
