#!/usr/bin/env bash
# The refused virtualenv of ml_stack_errors, file by file: prepare records it, verify compares.
set -euo pipefail
cd /opt/cases/cu12-sgl-kernel-on-cu13
readlink ml-env
find -L ml-env/ -type f ! -name '*.pyc' -printf '%P %s %T@\n' | LC_ALL=C sort
