#!/usr/bin/env bash
# `make demo`: converge the runtime_env scenario (a virtualenv from Debian's python3 in a
# Debian 12 container), then show what a process started from it sees. The container is
# kept, so a second run only re-applies the role, which then changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

container=runtime-env-debian-python
venv=/opt/ml-env
start=$SECONDS

molecule create -s runtime_env
molecule prepare -s runtime_env
molecule converge -s runtime_env -- --limit "$container"

echo
echo "==> $venv/lib/python3.11/site-packages/00-blackwell-gpu-node-env.pth in $container:"
docker exec "$container" cat "$venv/lib/python3.11/site-packages/00-blackwell-gpu-node-env.pth"
echo
echo "==> What 'env -i $venv/bin/python' sees, with nothing exported:"
docker exec "$container" env -i "$venv/bin/python" -c '
import os, sitecustomize
for name in sorted(os.environ):
    print("   %s=%s" % (name, os.environ[name]))
print("   (import sitecustomize resolves to %s: a sitecustomize.py in the venv would be shadowed)"
      % sitecustomize.__file__)'
echo
echo "==> The same, with NCCL_NTHREADS=256 exported by the caller (a value already set wins):"
docker exec "$container" env -i NCCL_NTHREADS=256 "$venv/bin/python" -c \
  'import os; print("   NCCL_NTHREADS=" + os.environ["NCCL_NTHREADS"])'
echo
echo "Done in $((SECONDS - start)) s. Remove the demo container with: molecule destroy -s runtime_env"
