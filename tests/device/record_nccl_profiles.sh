#!/usr/bin/env bash
# Usage (repository root, on the lent GPU host): tests/device/record_nccl_profiles.sh OUTPUT_DIR
# The NCCL profiles side by side on every GPU of the host (bench/nccl_profiles.py), each rendered by the
# runtime_env role into a virtualenv that sees the host's torch; the auto choice and gpu_facts with them.
set -uo pipefail
out=${1:?usage: record_nccl_profiles.sh OUTPUT_DIR}
mkdir -p "$out"
# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh
cuda_home=/usr/local/cuda
[ -d /usr/local/cuda-13.0 ] && cuda_home=/usr/local/cuda-13.0
NCCL_NVLS_ENABLE=0 python3 bench/nccl_profiles.py --torch-venv /opt/torch/.venv --cuda-home "$cuda_home" --out "$out"
