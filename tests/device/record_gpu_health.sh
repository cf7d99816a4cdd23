#!/usr/bin/env bash
# Usage (repository root, on the GPU host): tests/device/record_gpu_health.sh OUTPUT_DIR
# The raw outputs gpu_health_info reads, as the host prints them: nvidia-smi -q (plain and -x), its health sections
# (-d), the NVLink error counters, DCGM's level-1 diagnostic where dcgmi is installed, and the kernel's NVRM and Xid
# lines since boot. Changes nothing.
# Output: OUTPUT_DIR/gpu_health_q.txt, gpu_health_q.xml, gpu_health_sections.txt, gpu_health_nvlink.txt,
# gpu_health_dcgmi.txt, gpu_health_kernel.txt.
set -uo pipefail
out=${1:?usage: record_gpu_health.sh OUTPUT_DIR}
mkdir -p "$out"

# Each command as a "$ command" line, its output, and its exit status, as the other recordings here.
record() {
    echo "\$ $*"
    timeout 180 "$@" 2>&1
    echo "[exit $?]"
    echo
}

{ date -u; uname -r; } >"$out/gpu_health_sections.txt"
nvidia-smi -q >"$out/gpu_health_q.txt" 2>&1
nvidia-smi -q -x >"$out/gpu_health_q.xml" 2>&1
record nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER,ECC,PERFORMANCE,PCIE,TEMPERATURE,POWER >>"$out/gpu_health_sections.txt"
{
    record nvidia-smi nvlink -e
    record nvidia-smi nvlink -s
    record nvidia-smi nvlink -h
} >"$out/gpu_health_nvlink.txt"
{
    echo "\$ command -v dcgmi nv-hostengine"
    command -v dcgmi nv-hostengine
    echo "[exit $?]"
    echo
    if command -v dcgmi >/dev/null; then
        record dcgmi diag -r 1
    fi
} >"$out/gpu_health_dcgmi.txt"
{
    echo "\$ dmesg | grep -Ei 'NVRM|Xid|nvidia'"
    dmesg 2>&1 | grep -Ei 'NVRM|Xid|nvidia|dmesg'
    echo "[exit ${PIPESTATUS[0]}]"
} >"$out/gpu_health_kernel.txt"
