#!/usr/bin/env bash
# Usage (repository root, on this machine, with PyPI reachable): tests/device/real_sglang_wheelhouse.sh [LOCK]
# The wheelhouse of the real-SGLang device run (README.md): every wheel of LOCK (the sglang-0.5.17-cu130 profile's)
# for cp312-x86_64 except torch and what only torch's closure requires (the GPU host's torch 2.11.0+cu130 in
# /opt/torch/.venv is adopted), downloaded by the lock's URL and checked against its sha256 into
# .device-wheels/wheels/, beside the ansible-core wheels of .whl/ (the host has no internet); then split into
# pieces and packed into .device-wheels/batch-NN/, each small enough to travel in one device call beside the
# working tree (64 MiB in all), each with the manifest the host puts them together by. A wheel already there with
# the right sha256 is not downloaded again. BATCH_MIB=N sets the batch size instead.
set -euo pipefail
lock=${1:-roles/stack/files/locks/sglang-0.5.17-cu130.json}
environment=cp312-x86_64
out=.device-wheels
[ -r "$lock" ] || { echo "no stack lock at $lock" >&2; exit 1; }
compgen -G ".whl/*.whl" >/dev/null || {
  echo "no ansible-core wheels in .whl/: download them as tests/device/README.md says (record_site.sh)" >&2; exit 1; }

# Ignored, so that only the batch a call names in carry travels.
exclude=$(git rev-parse --git-path info/exclude)
grep -qx "/$out/" "$exclude" 2>/dev/null || echo "/$out/" >>"$exclude"
mkdir -p "$out/wheels"

python3 tests/device/real_sglang.py plan "$lock" "$environment" >"$out/plan.json"
python3 -c 'import json, sys; plan = json.load(open(sys.argv[1]))
print("%d wheels to carry; left to the host (its torch adopted): %s" % (len(plan["wheels"]), " ".join(plan["adopted"])))' \
  "$out/plan.json"
python3 tests/device/real_sglang.py download "$out/wheels" <"$out/plan.json"

# The travelling tree: tracked files and untracked ones git does not ignore (a deleted tracked file does not travel).
tree=$(git ls-files -z --cached --others --exclude-standard | python3 -c 'import os, sys
print(sum(os.lstat(path).st_size for path in sys.stdin.read().split("\0") if os.path.lexists(path)))')
limit=$(( ${BATCH_MIB:-0} * 1048576 ))
[ "$limit" -gt 0 ] || limit=$(( 64 * 1048576 - tree - 2 * 1048576 ))
[ "$limit" -le $(( 60 * 1048576 )) ] || limit=$(( 60 * 1048576 ))
echo "working tree: $(( tree / 1048576 )) MiB; batches of at most $(( limit / 1048576 )) MiB"

python3 - "$out/plan.json" "$out/wheels" .whl >"$out/files.json" <<'PY'
import json, os, sys
sys.path.insert(0, "tests/device")
from real_sglang import sha256_of
plan, wheels, ansible = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
files = [{"path": os.path.join(wheels, wheel["file"]), "dest": "wheelhouse", "sha256": wheel["sha256"]}
         for wheel in plan["wheels"]]
files += [{"path": os.path.join(ansible, name), "dest": "ansible", "sha256": sha256_of(os.path.join(ansible, name))}
          for name in sorted(os.listdir(ansible)) if name.endswith(".whl")]
json.dump(files, sys.stdout)
PY
python3 tests/device/real_sglang.py pack "$out" "$limit" <"$out/files.json"
