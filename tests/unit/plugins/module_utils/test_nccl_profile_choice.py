"""runtime_env_nccl_profile=auto: the profile chosen from gpu_facts, replayed on recorded hosts."""
import json
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import parse_query, parse_topology
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    RuntimeEnvError,
    build_environment,
    choose_nccl_profile,
)

DATA = Path(__file__).resolve().parents[3] / "data"
PCIE_BLACKWELL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
PROFILES = {"pcie_blackwell": PCIE_BLACKWELL, "none": {}}


def recorded_facts(path):
    return json.loads((DATA / path).read_text())["ansible_facts"]["gpu"]


def with_topology(facts, topology):
    links = parse_topology((DATA / "nvidia_smi" / topology).read_text())
    return dict(facts, interconnect=links["interconnect"], nvlink_pairs=links["nvlink_pairs"])


def pcie_blackwell_host(count=8):
    gpus = [{"index": index, "compute_capability": "12.0"} for index in range(count)]
    return {"state": "ok", "gpus": gpus, "interconnect": "pcie", "nvlink_pairs": []}


def test_the_recorded_two_h200_host_with_nvlink_keeps_nccl_defaults():
    name, reason = choose_nccl_profile(recorded_facts("h200/gpu_facts_module.json"))
    assert name == "none"
    assert reason == "2 GPUs with NVLink between them (GPU0-GPU1 NV18): NCCL's defaults suit it"


def test_the_recorded_eight_gpu_nvlink_matrix_keeps_nccl_defaults():
    facts = with_topology(pcie_blackwell_host(8), "topo-h100-8gpu-nvlink.txt")
    assert facts["interconnect"] == "nvlink"
    assert choose_nccl_profile(facts)[0] == "none"


def test_the_reference_box_blackwell_on_pcie_gets_the_tuned_profile():
    gpus = parse_query((DATA / "nvidia_smi" / "csv-rtx-pro-6000-blackwell-maxq.txt").read_text())
    facts = with_topology({"state": "ok", "gpus": gpus, "count": len(gpus)}, "topo-pcie-8gpu-pix-pxb.txt")
    assert facts["interconnect"] == "pcie"
    assert choose_nccl_profile(facts) == (
        "pcie_blackwell", "%d Blackwell GPUs on PCIe only, no NVLink: the profile tuned for that" % facts["count"])


def test_pcie_gpus_of_another_family_keep_nccl_defaults():
    facts = pcie_blackwell_host(8)
    facts["gpus"][3]["compute_capability"] = "8.9"
    assert choose_nccl_profile(facts) == (
        "none", "8 GPUs on PCIe only, of family ada/blackwell: pcie_blackwell was tuned for Blackwell, NCCL's defaults")


def test_an_nvswitch_fabric_keeps_nccl_defaults_whatever_the_matrix_says():
    facts = dict(pcie_blackwell_host(8), nvswitch=True)
    assert choose_nccl_profile(facts)[0] == "none"


def test_one_gpu_has_no_peer_to_tune_for():
    assert choose_nccl_profile(pcie_blackwell_host(1)) == ("none", "one GPU: no peer for NCCL to tune for")


def test_unread_topology_keeps_nccl_defaults():
    facts = dict(pcie_blackwell_host(4), interconnect="none")
    assert choose_nccl_profile(facts)[0] == "none"


@pytest.mark.parametrize("facts", [None, {}, {"state": "no_driver", "gpus": []}, {"state": "ok", "gpus": []}])
def test_no_gpu_visible_keeps_nccl_defaults_and_says_the_next_run_chooses_again(facts):
    name, reason = choose_nccl_profile(facts)
    assert name == "none"
    assert reason.startswith("no GPU visible (gpu_facts state: ")
    assert "the next run chooses again" in reason


def build(**changes):
    settings = dict(cuda_home="/c", triton_ptxas_path="/c/bin/ptxas", nccl_profile="auto",
                    nccl_profiles=PROFILES, gpu=pcie_blackwell_host(8))
    settings.update(changes)
    return build_environment(**settings)


def test_auto_renders_the_chosen_profile_and_returns_the_choice():
    result = build()
    assert result["environment"]["NCCL_PROTO"] == "LL"
    assert result["nccl_profile"]["name"] == "pcie_blackwell"
    assert "NCCL_PROTO" not in build(gpu=recorded_facts("h200/gpu_facts_module.json"))["environment"]


def test_a_named_profile_ignores_the_gpus():
    result = build(nccl_profile="pcie_blackwell", gpu=None)
    assert result["nccl_profile"] == {"name": "pcie_blackwell", "reason": "named by runtime_env_nccl_profile"}


def test_auto_choosing_a_profile_the_inventory_removed_is_an_error():
    with pytest.raises(RuntimeEnvError) as raised:
        build(nccl_profiles={"none": {}})
    assert raised.value.problems == [
        "runtime_env_nccl_profile=auto chose 'pcie_blackwell' (8 Blackwell GPUs on PCIe only, no NVLink: the profile "
        "tuned for that), which runtime_env_nccl_profiles lacks; keep the shipped profiles when adding your own"]


def test_a_profile_named_auto_is_refused():
    with pytest.raises(RuntimeEnvError) as raised:
        build(nccl_profile="none", nccl_profiles=dict(PROFILES, auto={}))
    assert raised.value.problems == [
        "runtime_env_nccl_profiles.auto: the name is reserved for choosing by the host's GPUs; rename that profile"]


@pytest.mark.parametrize("recording", ["h200/nccl_profiles_1gpu.json"])
def test_the_choice_recorded_on_a_lent_gpu_host_replays(recording):
    """bench/nccl_profiles.py kept what gpu_facts saw there and what the role printed."""
    report = json.loads((DATA / recording).read_text())
    name, reason = choose_nccl_profile(report["gpu_facts"])
    assert report["auto_said"] == ["runtime_env_nccl_profile=auto: %s (%s)" % (name, reason)]


@pytest.mark.parametrize("facts, state", [
    (None, "not gathered"), ({"state": "no_driver", "gpus": []}, "no_driver")])
def test_no_gpu_visible_names_the_gpu_facts_state(facts, state):
    assert choose_nccl_profile(facts) == ("none", (
        "no GPU visible (gpu_facts state: %s): NCCL's defaults; once the driver is up, the next run chooses again, "
        "or name a profile in runtime_env_nccl_profile" % state))


def test_each_reason_to_keep_nccl_defaults_says_what_was_seen():
    assert choose_nccl_profile(dict(pcie_blackwell_host(8), nvswitch=True)) == (
        "none", "8 GPUs on an NVSwitch fabric: NCCL's defaults (NVLS, tree) suit it")
    assert choose_nccl_profile(dict(pcie_blackwell_host(3), interconnect="nvlink",
                                    nvlink_pairs=[[0, 1, 18], [1, 2, 4]])) == (
        "none", "3 GPUs with NVLink between them (GPU0-GPU1 NV18, GPU1-GPU2 NV4): NCCL's defaults suit it")
    assert choose_nccl_profile(dict(pcie_blackwell_host(4), interconnect="none")) == (
        "none", "4 GPUs whose links nvidia-smi topo -m did not show: NCCL's defaults")
