#!/usr/bin/env bash
# Runs every Go fuzz target in the workspace for the given time each
# (services/systemtest/verify's targets are make verify's, with its build tag).
set -euo pipefail
t="${1:-20s}"
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' proto services catalog-svc authz-svc bridge-svc 2>/dev/null | grep -v '^services/systemtest/verify/' | while read -r f; do
  dir=$(dirname "$f")
  for fn in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed 's/^func //'); do
    echo "== $dir $fn ($t)"
    go test -run='^$' -fuzz="^${fn}\$" -fuzztime="$t" "./$dir"
  done
done
