#!/usr/bin/env bash
# Installs a pinned npm folder from its lockfile, once per lockfile: by
# default services/systemtest/npm (the official TS SDK client, the MCP
# conformance suite, and Node 22 as an npm package); `make column` passes
# services/systemtest/columns/npm (the four agent CLIs).
set -euo pipefail
dir=${1:-services/systemtest/npm}
cd "$(dirname "$0")/../$dir" 2>/dev/null || { echo "npm-deps: $dir missing"; exit 1; }
if ! command -v npm >/dev/null 2>&1; then
  echo "npm-deps: npm not found: install Node.js (any version >= 18; Node 22 itself comes from npm)" >&2
  exit 1
fi
stamp=node_modules/.sharedos-lock-sha
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && "$(cat $stamp)" == "$want" ]]; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
