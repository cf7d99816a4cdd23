#!/usr/bin/env bash
# Usage (repository root, on the lent GPU host, in each call that carries a batch):
#   tests/device/real_sglang_receive.sh .device-wheels/batch-NN [ROOT]
# Moves the batch that real_sglang_wheelhouse.sh packed into ROOT/wheelhouse-parts (ROOT: /tmp, kept while the host
# stays warm) and says which batches are there. Once every batch of the manifest is, puts each file together into
# ROOT/wheelhouse (the profile's wheels: ml_stack_wheelhouse_path) or ROOT/ansible-wheels (ansible-core's, for
# ansible_from_wheels.sh) and checks its sha256, failing with the file's name and its batches.
set -euo pipefail
batch=${1:?usage: real_sglang_receive.sh .device-wheels/batch-NN [ROOT]}
root=${2:-/tmp}
exec python3 tests/device/real_sglang.py receive "$batch" "$root/wheelhouse-parts" \
  "wheelhouse=$root/wheelhouse" "ansible=$root/ansible-wheels"
