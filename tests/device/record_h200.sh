#!/usr/bin/env bash
# Usage (repository root, on the GPU host): tests/device/record_h200.sh OUTPUT_DIR
set -uo pipefail
out=${1:?usage: record_h200.sh OUTPUT_DIR}
mkdir -p "$out"
checkout=$(pwd)

# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh

# At most 8 files come back: one for nvidia-smi -q, one for the rest of what the host says.
record() { local file=$1; shift; { echo "\$ $*"; "$@"; echo "[exit $?]"; echo; } >>"$out/$file" 2>&1; }
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1
for command in "nvidia-smi" \
    "nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,driver_version --format=csv" \
    "nvidia-smi topo -m" "nvidia-smi --query-compute-apps=pid,used_memory --format=csv" \
    "cat /proc/driver/nvidia/version" "cat /etc/os-release" "uname -a" "ls -la /dev/" "ls /etc/ld.so.conf.d" \
    "python3 -c 'import sitecustomize; print(sitecustomize.__file__)'"; do
  record host.txt sh -c "$command"
done

# runtime_env on a venv of Ubuntu's /usr/bin/python3 (if it can make one) and on the image's
# torch venv (uv-built on the same Python).
record host.txt /usr/bin/python3 -m venv --without-pip /tmp/ubuntu-env
cat >/tmp/site.yml <<'YAML'
- hosts: localhost
  connection: local
  gather_facts: false
  vars: {ansible_python_interpreter: /usr/bin/python3}
  tasks:
    - name: Render into each virtualenv
      ansible.builtin.include_role:
        name: blackwell.gpu_node.runtime_env
      vars:
        runtime_env_venv_path: "{{ item }}"
        runtime_env_nccl_overrides: {NCCL_NVLS_ENABLE: 0}
      loop: "{{ venvs }}"
YAML
venvs='["/opt/torch/.venv"]'
[ -x /tmp/ubuntu-env/bin/python ] && venvs='["/tmp/ubuntu-env", "/opt/torch/.venv"]'
{ python3 /tmp/site/bin/ansible-playbook -i localhost, -e "{\"venvs\": $venvs}" /tmp/site.yml; echo "[exit $?]";
  echo "--- second run"
  python3 /tmp/site/bin/ansible-playbook -i localhost, -e "{\"venvs\": $venvs}" /tmp/site.yml | tail -3
} >"$out/runtime_env.txt" 2>&1
{ for venv in /tmp/ubuntu-env /opt/torch/.venv; do
    [ -x "$venv/bin/python" ] || continue
    echo "\$ env -i $venv/bin/python -c ..."
    env -i "$venv/bin/python" -c 'import os, sitecustomize; print("sitecustomize:", sitecustomize.__file__); print({k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL", "CUDA", "SGLANG", "FLASHINFER", "TRITON"))})'
  done
  echo "\$ torch in the rendered venv, NCCL all-reduce on the GPU(s)"
  env -i PATH=/usr/bin:/bin NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 /opt/torch/.venv/bin/python -c '
import os, torch, torch.distributed as dist
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29555", RANK="0", WORLD_SIZE="1", NCCL_DEBUG="INFO")
dist.init_process_group("nccl")
x = torch.ones(4, device="cuda")
dist.all_reduce(x)
print("all_reduce ok", x.tolist(), "NCCL_PROTO", os.environ["NCCL_PROTO"])
dist.destroy_process_group()'
} >"$out/runtime_env_effect.txt" 2>&1

# sglang_server + wait_for_server with the stand-in, then a stop that asks the real nvidia-smi.
mkdir -p /tmp/model /tmp/sglang-log
cat >/tmp/serve.yml <<YAML
- hosts: localhost
  connection: local
  gather_facts: false
  vars: {ansible_python_interpreter: /usr/bin/python3}
  tasks:
    - blackwell.gpu_node.sglang_server:
        python: /opt/torch/.venv/bin/python
        model_path: /tmp/model
        tensor_parallel_size: 1
        log_path: /tmp/sglang-log/server.log
        state_dir: /tmp/sglang-state
        env: {PYTHONPATH: "$checkout/tests/fixtures/sglang_standin", SGLANG_STANDIN_STEP: "0.05", SGLANG_STANDIN_GPU_MIB: "2048", NCCL_NVLS_ENABLE: "0"}
      register: launch
    - blackwell.gpu_node.wait_for_server:
        log_path: /tmp/sglang-log/server.log
        offset: "{{ launch.offset }}"
        pid: "{{ launch.pid }}"
        health_url: http://127.0.0.1:30000/health
        timeout: 120
    - ansible.builtin.command: nvidia-smi --query-compute-apps=pid,used_memory --format=csv
      changed_when: false
    - blackwell.gpu_node.sglang_server:
        state: stopped
        state_dir: /tmp/sglang-state
        gpu_release_timeout: 30
      register: stopped
    - ansible.builtin.debug:
        var: stopped
YAML
{ python3 /tmp/site/bin/ansible-playbook -i localhost, -v /tmp/serve.yml; echo "[exit $?]"; cat /tmp/sglang-log/server.log; } >"$out/sglang_server.txt" 2>&1
ls -la "$out"
