#!/usr/bin/env bash
# Usage (repository root, on the GPU host): tests/device/record_gpu_services.sh OUTPUT_DIR
# What gpu_facts reports there about the interconnect (NVLink between the GPUs of the x2/x4/x8 kinds, NVSwitch
# or not) and the raw outputs a NVSwitch/NVLink-generation parser needs, and the state of nvidia-persistenced
# (the unit where systemd runs, the daemon's process otherwise, the GPUs' persistence mode). Changes nothing.
# Output: OUTPUT_DIR/gpu_services_facts.json (gpu_facts' core, every command it ran, the nvidia-nvswitch driver's
# entries), gpu_services_nvswitch.txt (what it concludes: nvswitch, nvlink_generation, fabric),
# gpu_services_module.json (the module through Ansible), gpu_services_raw.txt (nvidia-smi nvlink/topo/-q fabric, /proc and /sys NVSwitch traces,
# lspci), gpu_services_persistenced.txt.
set -uo pipefail
out=${1:?usage: record_gpu_services.sh OUTPUT_DIR}
mkdir -p "$out"

# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh
export PYTHONPATH=/tmp/collections:$PYTHONPATH

python3 tests/device/record_gpu_facts.py "$out/gpu_services_facts.json"
# What gpu_facts concludes about NVSwitch there (a single GPU: expect nvswitch false), in one short file.
python3 - "$out/gpu_services_facts.json" >"$out/gpu_services_nvswitch.txt" 2>&1 <<'PYTHON'
import json
import sys

facts = json.load(open(sys.argv[1]))["facts"]
for key in ("state", "count", "interconnect", "nvlink_pairs", "nvswitch", "nvswitch_devices", "nvlink_generation",
            "fabric"):
    print("%s: %s" % (key, json.dumps(facts.get(key))))
PYTHON

cat >/tmp/gpu_services.yml <<'YAML'
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: /usr/bin/python3
  tasks:
    - name: The module's own result
      blackwell.gpu_node.gpu_facts:
      register: facts
    - name: Keep it
      ansible.builtin.copy:
        content: "{{ facts | to_nice_json }}"
        dest: "{{ output }}/gpu_services_module.json"
        mode: "0644"
YAML
{
  echo "\$ ansible-playbook gpu_services.yml"
  python3 /tmp/site/bin/ansible-playbook -i localhost, -e "output=$out" /tmp/gpu_services.yml
  echo "[exit $?]"
} >"$out/gpu_services_playbook.txt" 2>&1

record() { local file=$1; shift; { echo "\$ $*"; timeout 60 sh -c "$*"; echo "[exit $?]"; echo; } >>"$out/$file" 2>&1; }
: >"$out/gpu_services_raw.txt"
for command in "nvidia-smi -L" "nvidia-smi topo -m" "nvidia-smi nvlink --status" "nvidia-smi nvlink -s" \
    "nvidia-smi nvlink --capabilities" "nvidia-smi nvlink -c" "nvidia-smi nvlink --remotelinkinfo" \
    "nvidia-smi -q" "nvidia-smi -q | sed -n '/Fabric/,/^    [A-Z]/p'" \
    "nvidia-smi --query-gpu=index,name,fabric.state,fabric.status --format=csv" \
    "ls -la /dev/nvidia* /dev/nvidia-caps 2>&1" "ls /proc/driver/nvidia /proc/driver/nvidia/gpus 2>&1" \
    "cat /proc/driver/nvidia/version" "ls -la /proc/driver/nvidia-nvswitch /proc/driver/nvidia-nvlink 2>&1" \
    "ls /sys/bus/pci/drivers/nvidia-nvswitch 2>&1" "ls -la /proc/driver/nvidia-nvswitch/devices 2>&1" \
    "lspci -nn | grep -i -E 'nvidia|bridge: .*nvidia' 2>&1" \
    "lspci -nn -d 10de: 2>&1" "command -v nv-fabricmanager nvlsm; dpkg -l '*fabricmanager*' '*nvlsm*' '*nscq*' 2>&1 | grep '^.i'" \
    "systemctl status nvidia-fabricmanager 2>&1 | head -n 20"; do
  record gpu_services_raw.txt "$command"
done

: >"$out/gpu_services_persistenced.txt"
for command in "ps -o pid,user,args -C nvidia-persistenced" "command -v nvidia-persistenced" \
    "test -d /run/systemd/system && echo systemd is PID 1 || echo systemd is not PID 1; cat /proc/1/comm" \
    "systemctl is-enabled nvidia-persistenced; systemctl is-active nvidia-persistenced" \
    "systemctl cat nvidia-persistenced 2>&1 | head -n 40" \
    "nvidia-smi --query-gpu=index,persistence_mode --format=csv" "ls -la /var/run/nvidia-persistenced 2>&1" \
    "dpkg -l '*persistenced*' 2>&1 | grep '^.i'"; do
  record gpu_services_persistenced.txt "$command"
done
echo "recorded into $out"
