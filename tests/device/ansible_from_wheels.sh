# shellcheck shell=bash
# Sourced by the device scripts, from the repository root: ansible-core from the wheels carried in .whl/
# (the GPU host has no internet), and this checkout as the blackwell.gpu_node collection.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
mkdir -p /tmp/collections/ansible_collections/blackwell
ln -sfn "$(pwd)" /tmp/collections/ansible_collections/blackwell/gpu_node
export ANSIBLE_COLLECTIONS_PATH=/tmp/collections LC_ALL=C.UTF-8 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
