#!/usr/bin/env bash
# Usage (repository root, on the GPU host): tests/device/record_preflight.sh OUTPUT_DIR
# gpu_facts and the preflight role for real, and what the host's CUDA packaging and torch venv look like.
set -uo pipefail
out=${1:?usage: record_preflight.sh OUTPUT_DIR}
mkdir -p "$out"

# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh
export PYTHONPATH=/tmp/collections:$PYTHONPATH

python3 tests/device/record_gpu_facts.py "$out/gpu_facts_core.json"

mkdir -p /tmp/model && echo '{"architectures": ["DeepseekV3ForCausalLM"]}' >/tmp/model/config.json
cat >/tmp/preflight.yml <<'YAML'
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: /usr/bin/python3
    preflight_expected_gpu_count: 2
    preflight_tensor_parallel_size: 2
    preflight_model_path: /tmp/model
    preflight_venv_path: /opt/new-ml-env
  tasks:
    - name: The module's own result
      blackwell.gpu_node.gpu_facts:
      register: facts
    - name: Keep it
      ansible.builtin.copy:
        content: "{{ facts | to_nice_json }}"
        dest: "{{ output }}/gpu_facts_module.json"
        mode: "0644"
      check_mode: false
    - name: Preflight
      ansible.builtin.include_role:
        name: blackwell.gpu_node.preflight
YAML
run() { echo "\$ ansible-playbook $*"; python3 /tmp/site/bin/ansible-playbook -i localhost, -e "output=$out" /tmp/preflight.yml "$@"; echo "[exit $?]"; echo; }
{
  run -e preflight_expected_gpu_family=hopper -e preflight_expected_compute_capability=9.0
  run --check -e preflight_expected_gpu_family=hopper
  run -e preflight_expected_gpu_family=blackwell -e preflight_expected_compute_capability=12.0 \
      -e preflight_expected_gpu_count=8 -e preflight_tensor_parallel_size=8
  run -e preflight_gpus_required=false -e preflight_expected_gpu_family=hopper
} >"$out/preflight.txt" 2>&1

record() { local file=$1; shift; { echo "\$ $*"; sh -c "$*"; echo "[exit $?]"; echo; } >>"$out/$file" 2>&1; }
for command in "dpkg -l 'cuda*' 'libcudnn*' 'libnccl*' '*nvidia*' | grep '^.i'" "apt-mark showhold" \
    "ls -la /etc/apt/sources.list.d /usr/share/keyrings /etc/apt/trusted.gpg.d" \
    "head -n 50 /etc/ld.so.conf.d/*" "update-alternatives --display cuda; update-alternatives --display cuda-13" \
    "ls -la /usr/local /usr/local/cuda-13.0 /usr/local/cuda-13.0/targets/x86_64-linux/lib | head -n 80" \
    "for p in \$(dpkg -l 'cuda-toolkit*config-common' 'cuda-cudart-13-0' 'cuda-nvrtc-13-0' | awk '/^ii/ {print \$2}'); do echo \"== \$p\"; dpkg -s \$p; dpkg -L \$p | grep -v '^/usr/share/doc' | head -n 40; for s in postinst prerm postrm; do f=/var/lib/dpkg/info/\$p.\$s; [ -f \$f ] && { echo \"-- \$s\"; cat \$f; }; done; done" \
    "ldconfig -p | grep -E 'libcudart|libnvrtc|libnccl'" \
    "python3 -c 'import ctypes; l = ctypes.CDLL(\"libnvrtc.so.13\"); a, b = ctypes.c_int(), ctypes.c_int(); print(l.nvrtcVersion(ctypes.byref(a), ctypes.byref(b)), a.value, b.value)'" \
    "command -v modinfo lsmod; lsmod | grep -i nvidia; modinfo -F version nvidia" "ls -la /var/run/reboot-required* /run/reboot-required*" \
    "apt-key list 2>&1 | head -n 20"; do
  record cuda_host.txt "$command"
done
for command in "/opt/torch/.venv/bin/python -m pip --version; ls /opt/torch/.venv/bin | head -n 30" \
    "/opt/torch/.venv/bin/python -c 'import importlib.metadata as m; [print(d.metadata[\"Name\"], d.version) for d in sorted(m.distributions(), key=lambda d: d.metadata[\"Name\"].lower())]'" \
    "/opt/torch/.venv/bin/python -c 'import importlib.metadata as m; print(\"\\n\".join(m.requires(\"torch\") or []))'" \
    "cat /opt/torch/.venv/lib/python3.12/site-packages/torch-*.dist-info/WHEEL" \
    "/opt/torch/.venv/bin/python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'" \
    "df -h / /opt /tmp"; do
  record stack_host.txt "$command"
done
ls -la "$out"
