# shellcheck shell=bash
# Sourced by the device scripts, from the repository root: ansible-core from the wheels carried in .whl/, or in
# the folder ANSIBLE_WHEELS names (another core's; the GPU host has no internet), and this checkout as the
# blackwell.gpu_node collection. /tmp/site is emptied first: a warm host keeps the previous call's core.
rm -rf /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "${ANSIBLE_WHEELS:-.whl}"/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
mkdir -p /tmp/collections/ansible_collections/blackwell
ln -sfn "$(pwd)" /tmp/collections/ansible_collections/blackwell/gpu_node
export ANSIBLE_COLLECTIONS_PATH=/tmp/collections LC_ALL=C.UTF-8 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
