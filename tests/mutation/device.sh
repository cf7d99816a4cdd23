#!/usr/bin/env bash
# One batch of mutation testing on a lent machine with many cores and no internet (tests/mutation/parallel.py).
#
# usage: tests/mutation/device.sh OUT_DIR WHEEL_DIR [FILE...]
#   WHEEL_DIR holds the wheels of exactly the pinned versions that the unit tests and mutmut need (pytest, mutmut
#   2.5.1, ansible-core and their dependencies, for the machine's Python); `.whl-mutation/` is made for
#   Python 3.12 on x86-64 (.gitignore has /.whl-mutation/) by
#     pip download --only-binary=:all: --no-deps --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 \
#       -d .whl-mutation NAME==VERSION     (each pin of requirements/tools.txt named below)
#     pip wheel --no-deps -w .whl-mutation mutmut==2.5.1 glob2==0.7     (published as sources only)
#   for mutmut click glob2 junit-xml parso pony six toml pytest iniconfig pluggy Pygments packaging ansible-core pip
#   Jinja2 MarkupSafe PyYAML resolvelib cryptography cffi pycparser (pip: test_ml_stack runs pip's own option
#   parser, and the venv is made without pip).
#   FILE: default, every core and filter (parallel.py's default).
#   MUTATION_SECONDS (default 500): the driver's deadline, so that its partial reports are written before a
#   10-minute limit on the whole command kills it; MUTATION_JOBS (default: the number of cores);
#   MUTATION_COMMIT: the commit the tree was archived from, as the scores name it ("abc1234 2026-12-06": git log -1
#   --format='%h %cd' --date=short COMMIT), as the tree has no .git.
# The device tool sends the caller's checkout only: put the tree (git archive COMMIT) and the wheels in a folder
# of it that .git/info/exclude ignores, say .mutation-carry/{tree,wheels}, and run(carry=[".mutation-carry"],
# timeout_s=600, command="cd .mutation-carry/tree && bash tests/mutation/device.sh \"$OUT\" ../wheels").
# Writes OUT_DIR/summary.txt, OUT_DIR/mutation.log, OUT_DIR/reports.tar.gz (tests/output/mutation/<file>.txt
# of every file: a few files, since a device call returns at most 8) and OUT_DIR/scores.txt, the tree's
# tests/mutation/scores.txt with the lines of the files scored in full replaced: copy it over the checkout's.
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
wheels=$(cd "$2" && pwd)
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/mutation.XXXXXX)
python=${PYTHON:-python3}

# A venv of the carried wheels alone (no system site-packages, so the machine's own pytest or packaging cannot
# take their place). --without-pip: Debian's Python has no ensurepip; the outer pip installs into it by --prefix,
# --ignore-installed so that it skips no wheel because the outer Python has that package.
# Where no venv can be made, the wheels go into a folder put first on PYTHONPATH instead.
if "$python" -m venv --without-pip "$work/venv"; then
  "$python" -m pip install -q --no-index --no-deps --ignore-installed --no-warn-script-location \
    --prefix "$work/venv" "$wheels"/*.whl
  venv_python=$work/venv/bin/python
else
  "$python" -m pip install -q --no-index --no-deps --no-warn-script-location --target "$work/site" "$wheels"/*.whl
  export PYTHONPATH=$work/site
  venv_python=$python
fi
"$venv_python" -c 'import mutmut, pytest, ansible; print("mutmut", mutmut.__version__, "pytest", pytest.__version__)'

status=0
PYTHONUNBUFFERED=1 "$venv_python" "$root/tests/mutation/parallel.py" -j "${MUTATION_JOBS:-$(nproc)}" \
  --deadline "${MUTATION_SECONDS:-500}" --reports "$work/reports" --stage "$work/stage" \
  --measured-at "${MUTATION_COMMIT:-an unknown commit}" "$@" \
  2>&1 | tee "$out/mutation.log" || status=$?
cp "$work/reports/summary.txt" "$out/summary.txt" || true
cp "$root/tests/mutation/scores.txt" "$out/scores.txt"
tar -czf "$out/reports.tar.gz" -C "$work/reports" .
rm -rf "$work"
exit "$status"
