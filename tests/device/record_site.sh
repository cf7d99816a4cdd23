#!/usr/bin/env bash
# Usage (repository root, on the GPU host): tests/device/record_site.sh OUTPUT_DIR STACK_INDEX
# The site playbook for real on a GPU host with a local connection, GPUs required: preflight,
# cuda (which adopts the CUDA 13.0 the host came with), ml_stack from the stack index fixture
# (STACK_INDEX, carried along: the host has no internet), runtime_env and sglang_server (the
# index's sglang is the stand-in); then a second run, validate and stop.
set -uo pipefail
out=${1:?usage: record_site.sh OUTPUT_DIR STACK_INDEX}
index=$(cd "${2:?usage: record_site.sh OUTPUT_DIR STACK_INDEX}" && pwd)
mkdir -p "$out"

# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh

mkdir -p /tmp/models/tiny && echo '{"architectures": ["LlamaForCausalLM"]}' >/tmp/models/tiny/config.json
cat >/tmp/inventory.yml <<YAML
all:
  children:
    gpu_nodes:
      hosts:
        localhost:
          ansible_connection: local
          ansible_python_interpreter: /usr/bin/python3
          gpu_node_become: false
          preflight_expected_gpu_family: hopper
          preflight_expected_gpu_count: 2
          ml_stack_venv_path: /opt/ml-env
          ml_stack_index_mirrors:
            https://pypi.org/simple: file://$index/pypi/simple
            https://download.pytorch.org/whl/cu130: file://$index/pytorch-cu130/simple
            https://flashinfer.ai/whl/cu130: file://$index/flashinfer-cu130/simple
            https://github.com/sgl-project/whl/releases/download/v0.3.21/: file://$index/sgl-kernel-cu130/files/
          runtime_env_nccl_overrides: {NCCL_NVLS_ENABLE: 0}
          sglang_server_model_path: /tmp/models/tiny
          sglang_server_tensor_parallel_size: 2
          sglang_server_env: {SGLANG_STANDIN_STEP: "0.05"}
YAML
playbook() {
  local name=$1; shift
  echo "\$ ansible-playbook blackwell.gpu_node.$name $*"
  local begin=$SECONDS
  python3 /tmp/site/bin/ansible-playbook -i /tmp/inventory.yml "blackwell.gpu_node.$name" "$@"
  echo "[exit $? after $((SECONDS - begin)) s]"
  echo
}
playbook site >"$out/site.txt" 2>&1
{ playbook site; playbook validate; } 2>&1 | grep -E '^\$|^\[exit|PLAY RECAP|^localhost|"msg"|problem|fatal' >"$out/site_again.txt"
{ ldconfig -p | grep -E 'libcudart|libnvrtc'; ls -la /etc/ld.so.conf.d /usr/local/cuda; cat /etc/profile.d/blackwell-gpu-node-cuda.sh
  /opt/ml-env/bin/python -c 'import torch, sglang, flashinfer, sgl_kernel; print(torch.__version__, torch.version.cuda, sglang.__version__, flashinfer.__version__)'
  env -i /opt/ml-env/bin/python -c 'import os; print({k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL", "CUDA", "SGLANG", "FLASHINFER", "TRITON"))})'
  python3 -c 'import urllib.request as u; print("/health", u.urlopen("http://127.0.0.1:30000/health").status)'
  tail -n 5 /var/log/sglang/sglang.log
  playbook stop
} >"$out/site_effect.txt" 2>&1
ls -la "$out"
