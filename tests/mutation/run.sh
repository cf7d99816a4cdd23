#!/usr/bin/env bash
# Mutation testing of the pure-Python cores against the unit tests, one file at a time (`make mutation`).
#
# usage: tests/mutation/run.sh [FILE...]   (default: plugins/module_utils/_*.py and plugins/filter/*.py)
#
# mutmut 2 mutates the files in place, so it works on a staged copy of the files git would commit (the checkout is
# never left mutated, even when this is killed), and that copy's tests import the copy's code through its own
# .build/collections link. Each file is tested against the unit test files that import it, not the whole suite,
# so that a mutant costs about a second. Writes tests/output/mutation/<file>.txt (the score and the diff of each
# surviving mutant) and adds one line per file to tests/output/mutation/summary.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mutmut=${MUTMUT:-mutmut}
stage=$root/.build/mutation
copy=$stage/ansible_collections/blackwell/gpu_node
reports=$root/tests/output/mutation
mkdir -p "$reports"

rm -rf "$stage" && mkdir -p "$copy"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -c) \
  | tar -x -C "$copy"
mkdir -p "$copy/.build/collections/ansible_collections/blackwell"
ln -sfn "$copy" "$copy/.build/collections/ansible_collections/blackwell/gpu_node"

cd "$copy"
if [ $# -eq 0 ]; then
  set -- plugins/module_utils/_*.py plugins/filter/*.py
fi
for file in "$@"; do
  name=$(basename "$file" .py)
  # The unit test files that import this module (module_utils by its file name, filters by their import path).
  if [[ $file == plugins/filter/* ]]; then
    pattern="plugins\.filter\.$name\b|plugins/filter/$name\.py"
  else
    pattern="module_utils\.$name\b|module_utils import .*\b$name\b"
  fi
  mapfile -t tests < <(grep -rlE "$pattern" tests/unit --include='test_*.py' | sort)
  report=$reports/$name.txt
  if [ ${#tests[@]} -eq 0 ]; then
    echo "$file: no unit test imports it" | tee "$report" >> "$reports/summary.txt"
    continue
  fi
  rm -f .mutmut-cache
  status=0
  "$mutmut" run --paths-to-mutate "$file" --tests-dir tests/unit --no-progress \
    --runner "python -m pytest -x -q -p no:cacheprovider ${tests[*]}" > "$reports/$name.log" 2>&1 || status=$?
  if (( status & 1 )); then
    echo "$file: mutmut failed, see $reports/$name.log" | tee "$report" >> "$reports/summary.txt"
    continue
  fi
  count() { "$mutmut" result-ids "$1" | wc -w; }
  # mutmut's "suspicious" mutants failed the tests, only slowly (a busy machine); "timeout" ones ran ten times the
  # baseline and were stopped (a loop that no longer ends): both count as killed, the timeouts are listed.
  killed=$(($(count killed) + $(count suspicious))) timeout=$(count timeout) survived=$(count survived)
  total=$((killed + timeout + survived))
  score=$(python3 -c "print('%.1f' % (100.0 * ($killed + $timeout) / $total if $total else 100.0))")
  line="$file: $score% killed ($((killed + timeout)) of $total, $timeout by timeout; $survived survived) by ${tests[*]}"
  {
    echo "$line"
    for kind in survived timeout; do
      for id in $("$mutmut" result-ids "$kind"); do echo; echo "--- $kind: mutant $id"; "$mutmut" show "$id"; done
    done
  } > "$report"
  echo "$line" | tee -a "$reports/summary.txt"
done
