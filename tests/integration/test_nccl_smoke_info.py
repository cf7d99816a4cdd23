"""nccl_smoke_info, from a real virtualenv of nobody's whose torch is the torch.distributed stand-in
(tests/fixtures/torch_distributed_standin) and whose site-packages sets an NCCL variable at start-up, as the
runtime_env hook does. It proves the launch (one rank per GPU, as the owner, in an empty environment but for the
rank's variables, one deadline), the environment the ranks see, the parsing and the verdict; not NCCL."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import run_module
from process_tree import run_bounded

CHECKOUT = Path(__file__).resolve().parents[2]
STANDIN = CHECKOUT / "tests" / "fixtures" / "torch_distributed_standin" / "torch"
NOBODY = 65534
SIZES = [131072, 67108864]
FLOOR = {"links": "pcie", "family": "blackwell", "gpus": 2, "busbw_gbps": 30, "source": "https://example.org/x"}
RANK_VARIABLES = {"PATH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LC_CTYPE",
                  "NCCL_PROTO"}


def gpu(count):
    return {"state": "ok", "interconnect": "pcie" if count > 1 else "single", "nvswitch": False,
            "gpus": [{"index": index, "compute_capability": "12.0"} for index in range(count)]}


@pytest.fixture
def venv():
    """A virtualenv of nobody's with the stand-in torch and a start-up file that sets NCCL_PROTO=LL."""
    top = tempfile.mkdtemp(prefix="blackwell-nccl-smoke-test-")
    os.chmod(top, 0o755)
    path = os.path.join(top, "ml-env")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", path], check=True, timeout=120)
    site = glob.glob(os.path.join(path, "lib", "python3*", "site-packages"))[0]
    shutil.copytree(str(STANDIN), os.path.join(site, "torch"))
    with open(os.path.join(site, "00-nccl-hook.pth"), "w") as handle:
        handle.write("import os; os.environ.setdefault('NCCL_PROTO', 'LL')\n")
    os.mkdir(os.path.join(site, "ranks"))
    for root, directories, files in os.walk(path):
        for name in [root] + [os.path.join(root, entry) for entry in directories + files]:
            os.chown(name, NOBODY, NOBODY, follow_symlinks=False)
    yield path, site
    shutil.rmtree(top)


def scenario(site, **settings):
    with open(os.path.join(site, "torch", "scenario.json"), "w") as handle:
        json.dump(settings, handle)


def ranks_seen(site):
    seen = {}
    for path in sorted(glob.glob(os.path.join(site, "ranks", "*.json"))):
        with open(path) as handle:
            seen[int(os.path.basename(path)[:-5])] = json.load(handle)
    return seen


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the ranks as another user, as root does on a node")


def test_every_rank_runs_as_the_owner_with_the_rendered_nccl_environment_and_the_floor_is_met(venv):
    path, site = venv
    scenario(site, bytes_per_second=5e10)
    result = run_module("nccl_smoke_info", venv_path=path, gpu=gpu(2), sizes=SIZES, floors=[FLOOR],
                        expected_environment={"NCCL_PROTO": "LL"}, timeout=60)
    assert result.get("failed") is not True, result.get("msg")
    assert result["passed"] is True and result["world_size"] == 2 and result["nccl"] == "2.28.9"
    assert result["environment"] == {"NCCL_PROTO": "LL"}
    assert [item["size"] for item in result["figures"]] == SIZES
    assert result["floor"]["busbw_gbps"] == 30 and result["busbw_gbps"] >= 30
    assert result["summary"].startswith("NCCL all-reduce on 2 blackwell GPUs (pcie) passed: busbw ")
    seen = ranks_seen(site)
    assert sorted(seen) == [0, 1]
    for rank, who in seen.items():
        assert (who["uid"], who["gid"], who["backend"]) == (NOBODY, NOBODY, "nccl")
        assert set(who["environ"]) <= RANK_VARIABLES
        assert (who["environ"]["RANK"], who["environ"]["LOCAL_RANK"], who["environ"]["WORLD_SIZE"]) == (
            str(rank), str(rank), "2")
        assert who["environ"]["MASTER_ADDR"] == "127.0.0.1"
    assert seen[0]["environ"]["MASTER_PORT"] == seen[1]["environ"]["MASTER_PORT"]


def test_busbw_below_the_floor_fails_with_the_figures(venv):
    path, site = venv
    scenario(site, bytes_per_second=5e9)
    result = run_module("nccl_smoke_info", venv_path=path, gpu=gpu(2), sizes=SIZES, floors=[FLOOR], timeout=60)
    assert result["failed"] is True and result["passed"] is False
    assert "busbw %.2f GB/s at 64 MiB is below the floor of 30 GB/s for 2 blackwell GPUs on pcie" % (
        result["busbw_gbps"]) in result["msg"]
    assert "Figures: 128 KiB " in result["msg"] and result["msg"].endswith("; NCCL 2.28.9")


def test_one_gpu_passes_without_a_floor(venv):
    path, site = venv
    scenario(site)
    result = run_module("nccl_smoke_info", venv_path=path, gpu=gpu(1), sizes=SIZES, floors=[FLOOR], timeout=60)
    assert result.get("failed") is not True, result.get("msg")
    assert "1 GPU: no floor applies (no inter-GPU link)" in result["summary"] and result["floor"] is None


def test_a_hung_rank_is_killed_at_the_deadline_and_named(venv):
    path, site = venv
    scenario(site, hang_rank=1)
    result = run_module("nccl_smoke_info", venv_path=path, gpu=gpu(2), sizes=SIZES, timeout=5, run_timeout=120)
    assert result["failed"] is True
    assert ("rank 1 did not finish within 5 s and was killed (rank 1's standard error ends: stand-in rank 1 waits "
            "for its peers for ever)") in result["msg"]
    assert subprocess.run(["pgrep", "-u", str(NOBODY), "-f", "all_reduce_worker"], check=False).returncode == 1


def test_options_are_checked_before_anything_starts(venv):
    path, site = venv
    result = run_module("nccl_smoke_info", venv_path=path, gpu=gpu(2), gpus=4)
    assert result["failed"] is True and result["msg"] == "gpus=4: the host has 2 GPUs"
    result = run_module("nccl_smoke_info", venv_path=path, gpu={"state": "no_driver", "gpus": []})
    assert result["msg"] == "gpu: no GPU visible (gpu_facts state: no_driver)"
    result = run_module("nccl_smoke_info", venv_path=path, gpu=gpu(2), floors=[{"links": "pcie"}])
    assert result["msg"].startswith("floors[0].family: must name a GPU family")
    assert ranks_seen(site) == {}


def validate(venv_path, *options):
    """validate with the smoke on, on this machine with the fake nvidia-smi (2 H200 joined by NVLink, as recorded):
    the problems it noted and what the smoke's tasks returned."""
    fake = CHECKOUT / "tests" / "fixtures" / "fake_nvidia_smi"
    environ = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(CHECKOUT / ".build" / "collections"),
                   ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
                   PATH="%s:%s" % (fake, os.environ["PATH"]), FAKE_NVIDIA_SMI="h200")
    argv = [str(CHECKOUT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "gpu_node_hosts=localhost", "-e", "gpu_node_become=false",
            "-e", "ansible_python_interpreter=" + sys.executable, "-e", "gpu_node_validate_nccl=true",
            "-e", "gpu_node_validate_nccl_venv=" + venv_path, "-e", "gpu_node_validate_nccl_timeout=60",
            str(CHECKOUT / "playbooks" / "validate.yml")] + list(options)
    try:
        completed = run_bounded(argv, timeout=300, env=environ)
    except subprocess.TimeoutExpired:
        raise AssertionError("validate did not end within 300 s; its processes were killed")
    results = dict((task["task"]["name"], task["hosts"].get("localhost", {}))
                   for play in json.loads(completed.stdout)["plays"] for task in play["tasks"])
    problems = [problem for problem in results["Report the node"]["msg"]["problems"] if problem.startswith("nccl:")]
    return problems, results


def test_validate_notes_busbw_below_the_shipped_floor_of_the_topology(venv):
    path, site = venv
    scenario(site, bytes_per_second=1e10)
    problems, _results = validate(path)
    (problem,) = problems
    assert problem.startswith("nccl: NCCL all-reduce on 2 hopper GPUs (nvlink) failed: busbw ")
    assert "is below the floor of 92 GB/s for 2 hopper GPUs on nvlink (https://github.com/NVIDIA/nccl/issues/1161" in (
        problem)
    assert "Figures: 128 KiB " in problem and "256 MiB " in problem


def test_validate_takes_the_floors_of_the_inventory_and_says_what_the_all_reduce_measured(venv):
    path, site = venv
    scenario(site, bytes_per_second=1e10)
    floors = [dict(FLOOR, links="nvlink", family="hopper", busbw_gbps=5)]
    problems, results = validate(path, "-e", json.dumps({"gpu_node_validate_nccl_floors": floors}))
    assert problems == []
    assert results["Say what the all-reduce measured"]["msg"].startswith(
        "NCCL all-reduce on 2 hopper GPUs (nvlink) passed: busbw ")
    assert "meets the floor of 5 GB/s" in results["Say what the all-reduce measured"]["msg"]
