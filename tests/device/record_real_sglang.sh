#!/usr/bin/env bash
# Usage (repository root, on the lent GPU host, once real_sglang_receive.sh has put the wheelhouse together):
#   GPU_NODE_COMMIT=<commit> tests/device/record_real_sglang.sh OUTPUT_DIR install|serve|failures
# The collection on real SGLang 0.5.17 (the sglang-0.5.17-cu130 profile), one stage a call:
# - install: a random-weight Llama made offline (make_tiny_model.py; REAL_SGLANG_MODEL=large for a 3 GB one), then
#   site without the server: ml_stack builds /opt/ml-env offline from /tmp/wheelhouse, adopting the host's torch
#   (/opt/torch/.venv), beside preflight, cuda, service_user and runtime_env;
# - serve: site again, which starts the server (cold), validate with its real generate, diagnose and stop;
# - failures: starts that fail, each launched by sglang_server, waited for by wait_for_server and diagnosed by
#   sglang_diagnosis: an unknown flag, an empty model directory, a tensor parallel size above the GPU count, an
#   unknown architecture in config.json, a service user whose home (the caches) cannot be written, and a start
#   beside a foreign process holding 90% of the GPU's memory;
# - warm: serve (the second start, on the caches the first one and the failures filled) and stop.
# Each step runs once per host: a stage run again (the host stays warm between calls) goes on where the last call
# stopped. A step is not begun when its usual time would cross REAL_SGLANG_BUDGET seconds (540) of this call; the
# stage then says to run it again. All output is kept in /tmp/real_sglang and copied to OUTPUT_DIR after every stage:
# real_sglang_summary.txt (the table: times to ready, the generated text, each failure's diagnosis and seconds),
# real_sglang_commit.txt, the stages' logs, the diagnose report and the server's log.
# Exits 0 when the stage is done and everything did as expected, 2 when steps are left for another call, else 1.
set -uo pipefail
usage="usage: record_real_sglang.sh OUTPUT_DIR install|serve|failures|warm"
out=${1:?$usage}
stage=${2:?$usage}
state=/tmp/real_sglang
size=${REAL_SGLANG_MODEL:-tiny}
model=/tmp/models/llama-$size
budget=${REAL_SGLANG_BUDGET:-540}
helper=tests/device/real_sglang.py
mkdir -p "$out" "$state/results" "$state/done" "$state/attempts" "$state/logs"
log=$state/logs/$stage.txt

if [ ! -e /tmp/wheelhouse-parts/complete.json ]; then
  echo "the wheelhouse is not complete in /tmp/wheelhouse: send every batch with real_sglang_receive.sh first" >&2
  exit 1
fi

# shellcheck source=tests/device/record_common.sh
. tests/device/record_common.sh
ANSIBLE_WHEELS=${ANSIBLE_WHEELS:-/tmp/ansible-wheels}
# shellcheck source=tests/device/ansible_from_wheels.sh
. tests/device/ansible_from_wheels.sh
# One line of JSON per task result with -v, where step-result finds wait_for_server's seconds.
export ANSIBLE_CALLBACK_RESULT_FORMAT=json ANSIBLE_CALLBACK_FORMAT_PRETTY=false
# NVLink multicast stays off in everything started here (the lent hosts' rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
export ANSIBLE_INVENTORY=$state/inventory.yml
server_env='{NCCL_NVLS_ENABLE: "0", TORCH_SYMM_MEM_DISABLE_MULTICAST: "1", NVSHMEM_DISABLE_NVLS: "1"}'
cat >"$ANSIBLE_INVENTORY" <<YAML
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
          stack_profile: sglang-0.5.17-cu130
          service_user_name: sglang
          ml_stack_venv_path: /opt/ml-env
          ml_stack_torch_from: /opt/torch/.venv
          ml_stack_offline: true
          ml_stack_wheelhouse_path: /tmp/wheelhouse
          runtime_env_nccl_overrides: {NCCL_NVLS_ENABLE: 0}
          sglang_server_model_path: $model
          sglang_server_tensor_parallel_size: 1
          sglang_server_ready_timeout: 420
          sglang_server_env: $server_env
YAML

# The first stage's header names the commit and tree digest; a later stage on other code is a failure.
digest=$(tests/device/tree_digest.sh)
if [ ! -s "$state/logs/commit.txt" ]; then
  { host_header; echo "ansible-core: $(ansible --version | head -n 1)"; echo "model: $model ($size)"
    echo "wheelhouse: $(tr -d '\n ' </tmp/wheelhouse-parts/complete.json)"; } >"$state/logs/commit.txt" 2>&1
fi
failed=0
echo "stage $stage: commit ${GPU_NODE_COMMIT:-unknown}, tree $digest, $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$state/logs/commit.txt"
if ! grep -qx "tree digest: $digest" "$state/logs/commit.txt"; then
  echo "stage $stage ran on tree $digest, not on the first stage's: the output mixes two codes" >>"$state/logs/commit.txt"
  failed=1
fi

pending=0
report=
# due NAME SECONDS: whether step NAME runs now: not done on this host by an earlier call, and its usual SECONDS fit in
# what is left of the budget (else the stage is to be run again). Sets attempt (above 1: a call was cut off in it).
due() {
  local name=$1 usual=$2
  [ ! -e "$state/done/$name" ] || return 1
  if [ $((SECONDS + usual)) -gt "$budget" ]; then
    echo "$name: not begun, $((budget - SECONDS)) s of $budget left in this call (it takes about $usual s)" | tee -a "$log"
    pending=1
    return 1
  fi
  attempt=$(( $(cat "$state/attempts/$name" 2>/dev/null || echo 0) + 1 ))
  echo "$attempt" >"$state/attempts/$name"
  echo "=== $name (attempt $attempt, $(date -u +%H:%M:%S))" >>"$log"
}
finished() { touch "$state/done/$1"; }

# playbook_step NAME PLAYBOOK ARGS...: a playbook as step NAME: its output in the stage's log, what it did in
# results/NAME.json (with the diagnose playbook's report where $report names it).
playbook_step() {
  local name=$1; shift
  playbook "$@" >"$state/logs/$name.log" 2>&1
  cat "$state/logs/$name.log" >>"$log"
  python3 "$helper" step-result "$state/logs/$name.log" "$attempt" ${report:+"$report"} >"$state/results/$name.json"
}

make_model() {
  rm -rf "$state/model-site" "$model"
  { echo "\$ pip install transformers tokenizers from /tmp/wheelhouse into $state/model-site"
    /opt/torch/.venv/bin/python -m pip install -q --no-index --find-links /tmp/wheelhouse --no-compile \
      --target "$state/model-site" transformers tokenizers
    echo "\$ make_tiny_model.py $model --size $size"
    # No progress bars: their carriage returns would end up in tests/data, which keeps plain lines.
    HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 PYTHONPATH=$state/model-site \
      /opt/torch/.venv/bin/python tests/device/make_tiny_model.py "$model" --size "$size"
  } >>"$log" 2>&1
  [ -e "$model/config.json" ] || { echo "no model was made" >>"$log"; failed=1; }
  chmod -R a+rX "$model"
}

versions() {
  { echo "\$ what /opt/ml-env runs"
    echo "/opt/ml-env -> $(readlink -f /opt/ml-env)"
    /opt/ml-env/bin/python - <<'PY'
import importlib.metadata as metadata, torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "from", torch.__file__)
for name in ("sglang", "sglang-kernel", "flashinfer-python", "transformers", "triton"):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        print(name, "absent")
print(len(list(metadata.distributions())), "distributions visible")
PY
    /opt/ml-env/bin/python -m pip list --format=freeze 2>/dev/null | wc -l; } >>"$log" 2>&1
}

# start_step NAME PLAYBOOK: a playbook that starts the server, with -v for wait_for_server's seconds. One cut off in
# an earlier call may have left the server running: it is stopped first, so that this start is a start.
start_step() {
  [ "$attempt" -eq 1 ] || playbook stop >>"$log" 2>&1
  playbook_step "$1" "$2" -v
}

server_facts() {
  { echo "\$ who runs the server, what it answers, who holds GPU memory"
    pid=$(cat /var/lib/blackwell-gpu-node/sglang.pid 2>/dev/null)
    ps -o user=,pid=,args= -p "$pid"; pgrep -P "$pid" | xargs -r ps -o user=,pid=,args= -p
    python3 -c 'import urllib.request as u; print("/health", u.urlopen("http://127.0.0.1:30000/health", timeout=10).status)'
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv; } >>"$log" 2>&1
}

cat >"$state/failure.yml" <<YAML
- name: Start SGLang as the case breaks it, wait, diagnose and stop it
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: /usr/bin/python3
    user: sglang
    model: $model
    tp: 1
    extra_args: []
    log: /var/log/sglang/{{ case }}.log
  tasks:
    - name: Start the server
      blackwell.gpu_node.sglang_server:
        name: "{{ case }}"
        user: "{{ user }}"
        venv_path: /opt/ml-env
        entrypoint: serve
        model_path: "{{ model }}"
        tensor_parallel_size: "{{ tp }}"
        port: 30001
        log_path: "{{ log }}"
        extra_args: "{{ extra_args }}"
        env: $server_env
      register: launch
      ignore_errors: true
    - name: Wait until it is ready or has failed
      blackwell.gpu_node.wait_for_server:
        log_path: "{{ log }}"
        offset: "{{ launch.offset }}"
        pid: "{{ launch.pid }}"
        health_url: http://127.0.0.1:30001/health
        timeout: 150
      register: ready
      ignore_errors: true
      when: launch is succeeded
    - name: Diagnose it as the diagnose playbook does
      blackwell.gpu_node.sglang_diagnosis:
        name: "{{ case }}"
        probe: health
      register: diagnosis
      ignore_errors: true
    - name: Stop it
      blackwell.gpu_node.sglang_server:
        name: "{{ case }}"
        state: stopped
    - name: Keep what the launch, the wait and the diagnosis said
      ansible.builtin.copy:
        dest: $state/results/failure-{{ case }}.json
        mode: "0644"
        content: >-
          {{ {'case': case,
              'launch': {'failed': launch is failed, 'msg': launch.msg | default(none), 'argv': launch.argv | default(none)},
              'ready': {'ready': ready.ready | default(none), 'elapsed': ready.elapsed | default(none),
                        'failure': ready.failure | default(none), 'msg': ready.msg | default(none)},
              'diagnosis': {'verdict': diagnosis.verdict | default(none), 'gpu_processes': diagnosis.gpu_processes | default(none),
                            'capacity': diagnosis.capacity | default(none)}} | to_nice_json }}
YAML

# failure CASE VARS: one failed start; VARS (JSON) set user, model, tp or extra_args of failure.yml.
failure() {
  local name=$1 vars=$2 begin=$SECONDS
  rm -f "$state/results/failure-$name.json"
  {
    if [ "$attempt" -gt 1 ]; then
      python3 /tmp/site/bin/ansible localhost -c local -i localhost, -e ansible_python_interpreter=/usr/bin/python3 \
        -m blackwell.gpu_node.sglang_server -a "name=$name state=stopped"
    fi
    echo "\$ ansible-playbook $state/failure.yml -e case=$name -e '$vars'"
    python3 /tmp/site/bin/ansible-playbook -i localhost, "$state/failure.yml" -e "case=$name" -e "$vars"
    echo "[exit $? after $((SECONDS - begin)) s]"
    echo "--- what the launch, wait_for_server and sglang_diagnosis said"
    cat "$state/results/failure-$name.json"
    echo "--- the end of /var/log/sglang/$name.log"
    tail -n 40 "/var/log/sglang/$name.log"
    echo
  } >>"$log" 2>&1
  if [ ! -e "$state/results/failure-$name.json" ]; then
    echo "$name: the playbook kept no result" >>"$log"; failed=1
  elif python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["ready"]["ready"] is not True)' \
       "$state/results/failure-$name.json"; then
    echo "$name: the server started: no failure" >>"$log"; failed=1
  fi
}

unknown_architecture() {
  rm -rf /tmp/models/unknown-arch && cp -r "$model" /tmp/models/unknown-arch
  python3 -c 'import json, sys; path = sys.argv[1]; config = json.load(open(path))
config["architectures"] = ["BlackwellNoSuchForCausalLM"]; json.dump(config, open(path, "w"), indent=1)' \
    /tmp/models/unknown-arch/config.json
  failure unknown_architecture '{"model": "/tmp/models/unknown-arch"}'
}

cache_not_writable() {
  # A system user whose home does not exist: SGLang's, Triton's and flashinfer's caches go under it.
  id sglang-nocache >/dev/null 2>&1 ||
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sglang-nocache
  failure cache_not_writable '{"user": "sglang-nocache"}'
}

foreign_gpu_holder() {
  /opt/torch/.venv/bin/python -c 'import time, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(int(free * 0.9), dtype=torch.uint8, device="cuda")
print("holding %d MiB of %d MiB" % (held.numel() >> 20, total >> 20), flush=True)
time.sleep(900)' >"$state/holder.txt" 2>&1 &
  local holder=$! waited=0
  until grep -q '^holding' "$state/holder.txt" || ! kill -0 "$holder" 2>/dev/null || [ "$waited" -ge 120 ]; do
    sleep 0.5; waited=$((waited + 1))
  done
  { echo "\$ a foreign process holds GPU memory: pid $holder"; cat "$state/holder.txt"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv; } >>"$log" 2>&1
  failure foreign_gpu_holder '{}'
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$log" 2>&1
}

case $stage in
  install)
    due model 120 && { make_model; finished model; }
    # site up to the server, which needs the stack first.
    due install 360 && { playbook_step install site --skip-tags sglang_server; finished install; }
    due versions 30 && { versions; finished versions; }
    ;;
  serve)
    due cold 240 && { start_step cold site; finished cold; }
    due server_facts 15 && { server_facts; finished server_facts; }
    due validate 90 && { playbook_step validate validate; finished validate; }
    report=$state/diagnose.json
    due diagnose 45 && { playbook_step diagnose diagnose -e "gpu_node_diagnose_report=$report"; finished diagnose; }
    report=
    due stop 40 && { playbook_step stop stop; finished stop; }
    ;;
  failures)
    # The GPU to the failures alone: the server of the serve stage stopped, had that stage not come to its end.
    due server_stopped 40 && { playbook_step server_stopped stop; finished server_stopped; }
    due unknown_flag 80 && { failure unknown_flag '{"extra_args": ["--no-such-flag"]}'; finished unknown_flag; }
    mkdir -p /tmp/models/empty
    due missing_model 80 && { failure missing_model '{"model": "/tmp/models/empty"}'; finished missing_model; }
    due tp_above_gpus 80 && { failure tp_above_gpus "{\"tp\": $((gpus + 1))}"; finished tp_above_gpus; }
    due unknown_architecture 90 && { unknown_architecture; finished unknown_architecture; }
    due cache_not_writable 90 && { cache_not_writable; finished cache_not_writable; }
    due foreign_gpu_holder 110 && { foreign_gpu_holder; finished foreign_gpu_holder; }
    ;;
  warm)
    # After the failures, whose starts would otherwise cost the cold start's caches nothing: the second start.
    due warm 150 && { start_step warm serve; finished warm; }
    due stop_warm 40 && { playbook_step stop_warm stop; finished stop_warm; }
    ;;
  *) echo "$usage" >&2; exit 1 ;;
esac

python3 "$helper" summary "$state" >"$state/logs/summary.txt"
cat "$state/logs/summary.txt"
cp "$state/logs/commit.txt" "$out/real_sglang_commit.txt"
cp "$state/logs/summary.txt" "$out/real_sglang_summary.txt"
for kept in install serve failures warm; do
  [ -e "$state/logs/$kept.txt" ] && tail -c 15000000 "$state/logs/$kept.txt" >"$out/real_sglang_$kept.txt"
done
[ -e "$state/diagnose.json" ] && cp "$state/diagnose.json" "$out/real_sglang_diagnose.json"
[ -e /var/log/sglang/sglang.log ] && tail -c 15000000 /var/log/sglang/sglang.log >"$out/real_sglang_server.log"
ls -la "$out"
failures=$([ "$failed" -eq 0 ] || echo ', with failures (see the logs)')
if [ "$pending" -ne 0 ]; then
  echo "stage $stage: steps left: run it again$failures"
  exit 2
fi
echo "stage $stage: done$failures"
exit "$failed"
