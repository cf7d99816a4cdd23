#!/usr/bin/env bash
# What a publisher checks before uploading the tarball: what it ships, and Galaxy's own importer (the one Galaxy
# runs on upload, offline, ansible-test off) with not one error or warning.
set -euo pipefail
tarball=$1
work=$(mktemp -d /tmp/blackwell-importer.XXXXXX)
trap 'rm -rf "$work"' EXIT

listing=$(tar -tzf "$tarball")
for shipped in CHANGELOG.rst changelogs/changelog.yaml meta/execution-environment.yml tests/config.yml \
  $(cd "$(dirname "$0")/../.." && ls -d roles/*/README.md); do
  grep -qx "$shipped" <<<"$listing" || { echo "$tarball lacks $shipped" >&2; exit 1; }
done
# Test-only content needs community.docker and a checkout's fixtures; of tests/, only config.yml is shipped.
if grep -E '^(inventory/demo|changelogs/fragments|molecule)(/|$)|^tests/.' <<<"$listing" | grep -vx 'tests/config.yml'; then
  echo "$tarball ships test-only content (above): add it to build_ignore in galaxy.yml" >&2
  exit 1
fi

cat > "$work/galaxy-importer.cfg" <<CFG
[galaxy-importer]
run_ansible_test = false
run_ansible_lint = true
offline_ansible_lint = true
run_ansible_doc = true
check_changelog = true
ansible_local_tmp = $work/ansible-tmp
tmp_root_dir = $work
CFG
# The importer reads the config file named here before its own defaults.
(cd "$work" && GALAXY_IMPORTER_CONFIG="$work/galaxy-importer.cfg" python -m galaxy_importer.main "$tarball") \
  > "$work/importer.log" 2>&1 || { cat "$work/importer.log" >&2; exit 1; }
tail -n 4 "$work/importer.log"
if grep -E '(ERROR|WARNING|Warning)' "$work/importer.log" >&2; then
  echo "galaxy-importer reported the problems above for $tarball" >&2
  exit 1
fi
grep -qx 'Importer processing completed successfully' "$work/importer.log"
