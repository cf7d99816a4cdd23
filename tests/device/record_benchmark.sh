#!/usr/bin/env bash
# Usage (repository root, on the lent GPU host):
#   GPU_NODE_COMMIT=<git commit of this tree> tests/device/record_benchmark.sh OUTPUT_DIR [TORCH_PYTHON]
# The benchmark client against a process that really serves tokens from the GPU: the SGLang stand-in with
# SGLANG_STANDIN_TORCH=1 under the host's torch (TORCH_PYTHON, default /opt/torch/.venv/bin/python), each token
# one step of half-precision layers on the GPU, streamed through /v1/completions. The client is the collection's
# own (plugins/module_utils/_sglang/benchmark.py, loaded as it is by the host's python3, no Ansible), run on the
# decode-heavy and decode-batch workloads. It prints the client's CPU time per 1,000 tokens next to the server's,
# to show that the client's overhead is negligible next to a server. The token rates are the stand-in's GPU loop,
# nothing of SGLang. Writes OUTPUT_DIR/benchmark.txt and OUTPUT_DIR/benchmark.json; exits non-zero on a failure.
set -uo pipefail
out=${1:?usage: record_benchmark.sh OUTPUT_DIR [TORCH_PYTHON]}
torch_python=${2:-/opt/torch/.venv/bin/python}
mkdir -p "$out"
port=28400
log=$out/benchmark_server.log

{
  echo "commit: ${GPU_NODE_COMMIT:-unknown}"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) CPUs"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
  echo "client python: $(python3 --version 2>&1); server python: $torch_python"
} >"$out/benchmark.txt" 2>&1

# GPU_NODE_STANDIN_TORCH=0 runs the same without a GPU (the stand-in at its configured rate), to try the script.
PYTHONPATH=tests/fixtures/sglang_standin SGLANG_STANDIN_TORCH=${GPU_NODE_STANDIN_TORCH:-1} SGLANG_STANDIN_STEP=0.01 \
  "$torch_python" -m sglang.launch_server --model-path /tmp/no-model --port "$port" >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT
for _ in $(seq 1 240); do
  python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || { echo "the stand-in died: $(tail -n 20 "$log")" >>"$out/benchmark.txt"; exit 1; }
  sleep 0.5
done

GPU_NODE_SERVER_PID=$server GPU_NODE_PORT=$port python3 - "$out/benchmark.json" >>"$out/benchmark.txt" 2>&1 <<'PYTHON'
import importlib.util
import json
import os
import sys
import time

spec = importlib.util.spec_from_file_location("_benchmark", "plugins/module_utils/_sglang/benchmark.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
ticks = os.sysconf("SC_CLK_TCK")


def server_cpu():
    """User and system CPU seconds of the stand-in so far (all its threads)."""
    with open("/proc/%s/stat" % os.environ["GPU_NODE_SERVER_PID"]) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks


url = "http://127.0.0.1:%s" % os.environ["GPU_NODE_PORT"]
bench.run(url, "completions", "default", bench.workload("decode-heavy", dict(prompts=2, output_tokens=32)))  # warm-up
runs = []
for name in ("decode-heavy", "decode-batch"):
    chosen = bench.workload(name)
    client_before, server_before = time.process_time(), server_cpu()
    results, duration = bench.run(url, "completions", "default", chosen)
    client, served = time.process_time() - client_before, server_cpu() - server_before
    metrics = bench.summary(results, duration)
    tokens = metrics["output_tokens"] or 1
    runs.append(dict(workload=chosen, metrics=metrics, client_cpu_s=round(client, 3), server_cpu_s=round(served, 3),
                     client_cpu_ms_per_1000_tokens=round(client * 1e6 / tokens, 2),
                     server_cpu_ms_per_1000_tokens=round(served * 1e6 / tokens, 2),
                     client_cpu_share_of_wall=round(client / duration, 4)))
    print("%s: %d tokens in %.1f s (%.1f tok/s, TTFT p50 %s ms, ITL p50 %s ms); client CPU %.3f s = %.2f ms per "
          "1,000 tokens (%.2f%% of one core), server CPU %.1f ms per 1,000 tokens; %d failed"
          % (name, metrics["output_tokens"], metrics["duration_s"], metrics["output_throughput"],
             metrics["ttft_ms_median"], metrics["itl_ms_median"], client, runs[-1]["client_cpu_ms_per_1000_tokens"],
             100 * runs[-1]["client_cpu_share_of_wall"], runs[-1]["server_cpu_ms_per_1000_tokens"], metrics["failed"]))
with open(sys.argv[1], "w") as handle:
    json.dump(runs, handle, indent=2)
sys.exit(1 if any(run["metrics"]["failed"] or not run["metrics"]["completed"] for run in runs) else 0)
PYTHON
status=$?
echo "[exit $status]" >>"$out/benchmark.txt"
exit $status
