#!/usr/bin/env bash
# Usage (repository root, on the lent GPU host):
#   GPU_NODE_COMMIT=<git commit of this tree> tests/device/record_site.sh OUTPUT_DIR STACK_INDEX
# The device run that finishes every change to a role or module: the site playbook for real with a
# local connection and GPUs required, twice (the second must change nothing), then validate, the
# health playbook and gpu_health_info (health.txt, health.json, gpu_health_module.txt: the module on the live host, on
# a bundle of the same outputs saved there, and the remediation planned), and stop. validate runs
# its NCCL smoke (gpu_node_validate_nccl) from /opt/nccl-env, which sees the host's torch. preflight, cuda (which adopts the CUDA 13.0 the host came with), ml_stack from the stack
# index fixture (STACK_INDEX, carried along: the host has no internet), runtime_env and
# sglang_server (the index's sglang is the stand-in, holding GPU memory through torch).
# site_commit.txt names the commit and the digest of the code that ran (tests/device/tree_digest.sh);
# `make device-evidence` checks that the kept output belongs to the working tree.
# Exits non-zero when a playbook failed or the second run changed something.
set -uo pipefail
out=${1:?usage: record_site.sh OUTPUT_DIR STACK_INDEX}
index=$(cd "${2:?usage: record_site.sh OUTPUT_DIR STACK_INDEX}" && pwd)
mkdir -p "$out"

# shellcheck source=tests/device/record_common.sh
. tests/device/record_common.sh
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
host_header >"$out/site_commit.txt" 2>&1

# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh
echo "ansible-core: $(ansible --version | head -n 1)" >>"$out/site_commit.txt"

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
          preflight_expected_gpu_count: $gpus
          ml_stack_venv_path: /opt/ml-env
          ml_stack_index_mirrors:
            https://pypi.org/simple: file://$index/pypi/simple
            https://download.pytorch.org/whl/cu130: file://$index/pytorch-cu130/simple
            https://flashinfer.ai/whl/cu130: file://$index/flashinfer-cu130/simple
            https://github.com/sgl-project/whl/releases/download/v0.3.21/: file://$index/sgl-kernel-cu130/files/
          runtime_env_nccl_overrides: {NCCL_NVLS_ENABLE: 0}
          sglang_server_model_path: /tmp/models/tiny
          sglang_server_tensor_parallel_size: $gpus
          sglang_server_env: {SGLANG_STANDIN_STEP: "0.05"}
YAML
failed=0
playbook site >"$out/site.txt" 2>&1
playbook site >/tmp/site_again.txt 2>&1
# validate with its NCCL smoke: /opt/ml-env holds the stack index's stand-ins, not torch, so the all-reduce runs from
# /opt/nccl-env, a virtualenv that sees the host's torch, rendered by runtime_env from the same inventory. On one GPU
# NCCL runs with no peer: the figures are its per-call cost, and no floor applies.
cuda_home=/usr/local/cuda; [ -d /usr/local/cuda-13.0 ] && cuda_home=/usr/local/cuda-13.0
/opt/torch/.venv/bin/python -m venv --without-pip /opt/nccl-env
purelib="import sysconfig; print(sysconfig.get_paths()['purelib'])"
/opt/torch/.venv/bin/python -c "$purelib" >"$(/opt/nccl-env/bin/python -c "$purelib")/host-torch.pth"
printf -- '- hosts: gpu_nodes\n  gather_facts: false\n  roles: [blackwell.gpu_node.runtime_env]\n' >/tmp/nccl_env.yml
python3 /tmp/site/bin/ansible-playbook -i /tmp/inventory.yml -e runtime_env_venv_path=/opt/nccl-env \
  -e "runtime_env_cuda_home=$cuda_home" /tmp/nccl_env.yml >/tmp/nccl_env.txt 2>&1 || { cat /tmp/nccl_env.txt; failed=1; }
playbook validate -e gpu_node_validate_nccl=true -e gpu_node_validate_nccl_venv=/opt/nccl-env >/tmp/validate.txt 2>&1
# The GPUs' health: the health playbook (a verdict line, the JSON report) and gpu_health_info's whole result.
playbook health -e "gpu_node_health_report=$out/health.json" >"$out/health.txt" 2>&1
{ echo "\$ ansible localhost -m blackwell.gpu_node.gpu_health_info -a '{\"dcgm_diag\": true}'"
  python3 /tmp/site/bin/ansible localhost -c local -i localhost, -e ansible_python_interpreter=/usr/bin/python3 \
    -m blackwell.gpu_node.gpu_health_info -a '{"dcgm_diag": true}'
  echo "[exit $?]"
  # The same host's outputs saved as a bundle, assessed on their own (as an operator's support bundle is), and the
  # remediation the health playbook would carry out, planned only: the lent host is shared.
  bundle=/tmp/gpu-evidence; rm -rf "$bundle"; mkdir -p "$bundle"
  nvidia-smi -q >"$bundle/nvidia-smi-q.txt"; nvidia-smi nvlink -e >"$bundle/nvlink-e.txt"
  nvidia-smi nvlink -s >"$bundle/nvlink-s.txt"; dmesg >"$bundle/dmesg.txt"
  if command -v dcgmi >/dev/null; then dcgmi diag -r 1 >"$bundle/dcgmi-diag.txt"; fi
  if command -v nvidia-bug-report.sh >/dev/null; then
    (cd /tmp && nvidia-bug-report.sh --output-file /tmp/nvidia-bug-report.log >/dev/null 2>&1)
  fi
  echo "\$ ls $bundle; nvidia-bug-report.sh: $(command -v nvidia-bug-report.sh || echo absent)"; ls -l "$bundle"
  for evidence in "$bundle" /tmp/nvidia-bug-report.log.gz; do
    [ -e "$evidence" ] || continue
    echo "\$ ansible localhost -m blackwell.gpu_node.gpu_health_info -a '{\"evidence_path\": \"$evidence\"}'"
    python3 /tmp/site/bin/ansible localhost -c local -i localhost, -e ansible_python_interpreter=/usr/bin/python3 \
      -m blackwell.gpu_node.gpu_health_info -a "{\"evidence_path\": \"$evidence\"}"
    echo "[exit $?]"
  done
  playbook health -e gpu_node_health_remediate=plan -e "gpu_node_health_report=/tmp/health-plan.json"
  python3 -c 'import json; print(json.dumps({host: report.get("remediation") for host, report in
    json.load(open("/tmp/health-plan.json")).items()}, indent=1))'
} >"$out/gpu_health_module.txt" 2>&1
grep -q 'localhost *: ok=[0-9]* *changed=0 ' /tmp/site_again.txt || { echo "the second run changed something" >>"$out/site_commit.txt"; failed=1; }
{ summary /tmp/site_again.txt; summary /tmp/validate.txt; } >"$out/site_again.txt"
{ ldconfig -p | grep -E 'libcudart|libnvrtc'; ls -la /etc/ld.so.conf.d /usr/local/cuda; cat /etc/profile.d/blackwell-gpu-node-cuda.sh
  /opt/ml-env/bin/python -c 'import torch, sglang, flashinfer, sgl_kernel; print(torch.__version__, torch.version.cuda, sglang.__version__, flashinfer.__version__)'
  env -i /opt/ml-env/bin/python -c 'import os; print({k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL", "CUDA", "SGLANG", "FLASHINFER", "TRITON"))})'
  python3 -c 'import urllib.request as u; print("/health", u.urlopen("http://127.0.0.1:30000/health").status)'
  echo "server processes (user, pid, command):"; pgrep -f sglang.launch_server | xargs -r ps -o user=,pid=,args= -p
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
  ls -la /var/log/sglang
  tail -n 5 /var/log/sglang/sglang.log
  playbook stop
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} >"$out/site_effect.txt" 2>&1

# The server on the GPU as the service user (the module manager: no systemd here): the stand-in from the
# host's own torch virtualenv, holding 2 GiB of GPU memory, then stopped, its memory released.
rm -rf /tmp/standin && cp -r tests/fixtures/sglang_standin /tmp/standin && chmod -R a+rX /tmp/standin
cat >/tmp/gpu_user.yml <<YAML
- hosts: localhost
  connection: local
  gather_facts: false
  vars: {ansible_python_interpreter: /usr/bin/python3}
  tasks:
    - name: Start the stand-in on the GPU as the service user
      blackwell.gpu_node.sglang_server:
        name: gpu-user
        user: sglang
        python: /opt/torch/.venv/bin/python
        model_path: /tmp/models/tiny
        port: 30001
        log_path: /var/log/sglang/gpu-user.log
        env: {PYTHONPATH: /tmp/standin, SGLANG_STANDIN_STEP: "0.05", SGLANG_STANDIN_GPU_MIB: "2048", NCCL_NVLS_ENABLE: "0"}
      register: launch
    - name: Wait until it is ready
      blackwell.gpu_node.wait_for_server:
        log_path: /var/log/sglang/gpu-user.log
        offset: "{{ launch.offset }}"
        pid: "{{ launch.pid }}"
        health_url: http://127.0.0.1:30001/health
        timeout: 120
    - name: Show who runs it and who holds GPU memory
      ansible.builtin.shell: ps -o user=,pid=,args= -p {{ launch.pid }}; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
      changed_when: false
      register: holders
    - name: Print it
      ansible.builtin.debug:
        var: holders.stdout_lines
    - name: Stop it and wait until its GPU memory is released
      blackwell.gpu_node.sglang_server:
        name: gpu-user
        state: stopped
YAML
{ echo "\$ ansible-playbook /tmp/gpu_user.yml"; python3 /tmp/site/bin/ansible-playbook -i localhost, -v /tmp/gpu_user.yml
  status=$?; [ "$status" -eq 0 ] || failed=1; echo "[exit $status]"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv; } >"$out/site_gpu_user.txt" 2>&1

ls -la "$out"
exit "$failed"
