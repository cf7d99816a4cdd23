#!/usr/bin/env bash
# Usage (repository root): tests/device/tree_digest.sh
# One digest of everything that runs on a GPU host (roles, plugins, playbooks, the collection's
# metadata). The device script records it beside its output; `make device-evidence` compares it
# with the working tree, so evidence is known to belong to the code it ran.
set -euo pipefail
find roles plugins playbooks meta galaxy.yml -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
