"""The GPUs a server's ranks take on a node against those it sees there (plugins/module_utils/_sglang/gpus.py), on the
recorded 2x H200 host's GPUs (tests/data/h200/host.txt) and a host of eight."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import gpus as core

H200 = [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b"},
        {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014"}]
EIGHT = [{"index": index, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%d0000000-0000-0000-0000-00000000000%d" % (
    index, index)} for index in range(8)]


@pytest.mark.parametrize("visible_devices, seen", [
    (None, ["0", "1"]),  # unset: all of them
    ("1", ["1"]),
    ("1,0", ["1", "0"]),  # in its own order
    ("0, 1", ["0", "1"]),
    ("", []),  # empty: none
    ("0,-1,1", ["0"]),  # read up to the first entry that names no GPU of the host
    ("2,0", []),
    ("0,0", ["0"]),
    ("GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014", ["GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014"]),
    ("GPU-7c14", ["GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014"]),  # a beginning only one UUID has
    ("gpu-05955E7C,1", ["GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b", "1"]),
    ("GPU-", []),  # a beginning both have names neither
    ("GPU-ffff,0", []),
    ("MIG-GPU-05955e7c-75f2-7cdc-397f-0c334c1a526b/1/0", None),  # a MIG device: not told
    ("0,MIG-5c7e0b4e-2f4f-5b73-9b0a-0a5d0c1e2f3a", None),
])
def test_the_gpus_a_server_sees_are_read_as_cuda_reads_its_visible_devices(visible_devices, seen):
    assert core.visible_gpus(H200, visible_devices) == seen


@pytest.mark.parametrize("sizes, needed", [
    ((1,), 1), ((8,), 8), ((16, 2), 8), ((4, 1, 2), 8), ((8, 2, 2), 8), ((3, 2), 2)])
def test_a_node_takes_a_gpu_per_rank_of_its_share(sizes, needed):
    assert core.gpus_needed(*sizes) == needed


def params(size, env=None, secret_env=None, nnodes=1, manager="systemd"):
    return dict(tensor_parallel_size=size, nnodes=nnodes, env=env or {}, secret_env=secret_env or {}, manager=manager)


@pytest.mark.parametrize("options, host", [
    (params(2), H200),  # unset: all
    (params(1, env={"CUDA_VISIBLE_DEVICES": "1"}), H200),  # a subset
    (params(2, env={"CUDA_VISIBLE_DEVICES": "GPU-7c14,GPU-0595"}), H200),  # UUIDs
    (params(16, nnodes=2), EIGHT),  # a node's share
    (params(4, env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"}), EIGHT),
    (params(2, env={"CUDA_VISIBLE_DEVICES": "MIG-GPU-05955e7c/1/0"}), H200),  # not told: SGLang judges
    (params(8), None),  # nvidia-smi missing or failing: SGLang judges
    (params(0), H200),  # refused by check_options, named once
])
def test_ranks_that_each_have_a_gpu_pass(options, host):
    assert core.tensor_parallel_problems(options, host, {}) == []


@pytest.mark.parametrize("options, host, message", [
    (params(2), H200[:1],
     "tensor_parallel_size=2 needs 2 GPU(s) on this node, but the server would see 1 (GPU(s) 0 of the host's 1, as "
     "nvidia-smi lists them; CUDA_VISIBLE_DEVICES is unset): lower tensor_parallel_size "
     "(sglang_server_tensor_parallel_size in the role) to 1 or less"),
    (params(2, env={"CUDA_VISIBLE_DEVICES": "1"}), H200,
     "tensor_parallel_size=2 needs 2 GPU(s) on this node, but the server would see 1 (GPU(s) 1 of the host's 2, as "
     "CUDA_VISIBLE_DEVICES='1' in env (sglang_server_env in the role) leaves visible): lower tensor_parallel_size "
     "(sglang_server_tensor_parallel_size in the role) to 1 or less, or name more of the host's GPUs (indices or "
     "UUIDs) in CUDA_VISIBLE_DEVICES, or leave it unset for all of them"),
    (params(2, secret_env={"CUDA_VISIBLE_DEVICES": "GPU-7c14"}, env={"CUDA_VISIBLE_DEVICES": "0,1"}), H200,
     "tensor_parallel_size=2 needs 2 GPU(s) on this node, but the server would see 1 (GPU(s) "
     "GPU-7c147265-c1dc-22ad-90f4-6ccd06d65014 of the host's 2, as CUDA_VISIBLE_DEVICES='GPU-7c14' in secret_env "
     "(sglang_server_secret_env in the role) leaves visible): lower tensor_parallel_size "
     "(sglang_server_tensor_parallel_size in the role) to 1 or less, or name more of the host's GPUs (indices or "
     "UUIDs) in CUDA_VISIBLE_DEVICES, or leave it unset for all of them"),
    (params(1, env={"CUDA_VISIBLE_DEVICES": ""}), H200,
     "tensor_parallel_size=1 needs 1 GPU(s) on this node, but the server would see 0 (none of the host's 2, as "
     "CUDA_VISIBLE_DEVICES='' in env (sglang_server_env in the role) leaves visible): name more of the host's GPUs "
     "(indices or UUIDs) in CUDA_VISIBLE_DEVICES, or leave it unset for all of them"),
    (params(4, env={"CUDA_VISIBLE_DEVICES": "0,-1,1"}), H200,
     "tensor_parallel_size=4 needs 4 GPU(s) on this node, but the server would see 1 (GPU(s) 0 of the host's 2, as "
     "CUDA_VISIBLE_DEVICES='0,-1,1' in env (sglang_server_env in the role) leaves visible; CUDA reads it up to "
     "'-1', which names no GPU of this host): lower tensor_parallel_size (sglang_server_tensor_parallel_size in the "
     "role) to 1 or less, or name more of the host's GPUs (indices or UUIDs) in CUDA_VISIBLE_DEVICES, or leave it "
     "unset for all of them"),
    (params(32, nnodes=2), EIGHT,
     "tensor_parallel_size=32 over nnodes=2 needs 16 GPU(s) on this node, but the server would see 8 (GPU(s) 0, 1, 2, "
     "3, 4, 5, 6, 7 of the host's 8, as nvidia-smi lists them; CUDA_VISIBLE_DEVICES is unset): lower "
     "tensor_parallel_size (sglang_server_tensor_parallel_size in the role) to 16 or less"),
])
def test_more_ranks_than_visible_gpus_are_refused_naming_the_size_the_gpus_and_the_variables(options, host, message):
    assert core.tensor_parallel_problems(options, host, {}) == [message]


def test_a_host_where_nvidia_smi_finds_no_gpu_is_left_to_preflight_and_sglang():
    assert core.tensor_parallel_problems(params(1), [], {}) == []


def test_a_server_the_module_starts_itself_inherits_the_modules_visible_devices_and_one_under_systemd_does_not():
    inherited = {"CUDA_VISIBLE_DEVICES": "1"}
    (problem,) = core.tensor_parallel_problems(params(2, manager="module"), H200, inherited)
    assert "CUDA_VISIBLE_DEVICES='1' in the module's own environment, which the server inherits" in problem
    assert core.tensor_parallel_problems(params(2, manager="systemd"), H200, inherited) == []
    assert core.tensor_parallel_problems(params(2, manager="module", env={"CUDA_VISIBLE_DEVICES": "0,1"}), H200,
                                         inherited) == []


@pytest.mark.parametrize("needed, visible, fits", [(2, ["0", "1"], True), (3, ["0", "1"], False), (0, [], True),
                                                   (8, None, True)])
def test_fits_is_the_one_decision(needed, visible, fits):
    assert core.fits(needed, visible) is fits
