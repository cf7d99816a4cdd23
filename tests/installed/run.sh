#!/usr/bin/env bash
# Build the collection tarball, install it with ansible-galaxy into a scratch directory and
# run site.yml from outside the checkout with only that installation on the collections path.
set -euo pipefail
checkout=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d /tmp/blackwell-installed.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# Only the scratch installation: not the checkout that `make` links onto the path.
export ANSIBLE_COLLECTIONS_PATH="$scratch/collections"

cd "$checkout"
ansible-galaxy collection build --force --output-path "$scratch"
tarball=$(echo "$scratch"/blackwell-gpu_node-*.tar.gz)
tests/installed/check_tarball.sh "$tarball"
ansible-galaxy collection install --offline -p "$scratch/collections" "$tarball"
cp tests/installed/site.yml "$scratch/"

cd "$scratch"
INSTALLED_TEST_VENV="$scratch/venv" ansible-playbook -i localhost, site.yml
