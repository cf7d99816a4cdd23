# shellcheck shell=bash
# Sourced by the device scripts that record the collection's runs on a GPU host (record_site.sh,
# record_real_sglang.sh), from the repository root.

# What the output belongs to: the commit, the digest of the code that ran (`make device-evidence` compares it with
# the working tree's) and the host.
host_header() {
  echo "commit: ${GPU_NODE_COMMIT:-unknown}"
  echo "tree digest: $(tests/device/tree_digest.sh)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), PID 1 $(cat /proc/1/comm)"
  echo "gpus: $(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "python3: $(python3 --version 2>&1) at $(command -v python3); /usr/bin/python3: $(/usr/bin/python3 --version 2>&1)"
  echo "python3-apt for /usr/bin/python3: $(/usr/bin/python3 -c 'import apt_pkg; print("present")' 2>/dev/null || echo absent)"
}

# playbook NAME ARGS...: blackwell.gpu_node.NAME on the inventory ANSIBLE_INVENTORY (/tmp/inventory.yml unless set),
# then its exit status and seconds; a failure sets failed=1.
playbook() {
  local name=$1; shift
  echo "\$ ansible-playbook blackwell.gpu_node.$name $*"
  local begin=$SECONDS status
  python3 /tmp/site/bin/ansible-playbook -i "${ANSIBLE_INVENTORY:-/tmp/inventory.yml}" "blackwell.gpu_node.$name" "$@"
  status=$?
  failed=$(( ${failed:-0} || status ))
  echo "[exit $status after $((SECONDS - begin)) s]"
  echo
}

# The lines of a playbook's output that say what it did.
summary() { grep -E '^\$|^\[exit|PLAY RECAP|^localhost|"msg"|problem|fatal' "$1"; }
