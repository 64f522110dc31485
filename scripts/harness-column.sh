#!/usr/bin/env bash
# The harness column: real agent CLIs (Claude Code, Codex, Gemini CLI, Pi)
# against a live turn of this repository's stack. Starts bin/sharedos-dev on
# its own ports, opens the demo turn, runs the offline harness runner (only
# the model is scripted) against the turn's MCP URL with its bearer token,
# and stops the stack. Exit code: the number of failed columns.
#
#   make harness-column                      (or scripts/harness-column.sh)
#   HARNESS_COLUMN=/path/to/harness-column   the runner (default ../shared/tools/harness-column)
#   CLIS="claude codex"                      a subset of columns (the runner's knob)
set -euo pipefail
cd "$(dirname "$0")/.."
runner=${HARNESS_COLUMN:-../shared/tools/harness-column}
[ -x "$runner/run.sh" ] || { echo "harness-column: no runner at $runner (set HARNESS_COLUMN)"; exit 2; }
command -v node >/dev/null || { echo "harness-column: needs node and npm (the CLIs are npm packages)"; exit 2; }
[ -x bin/sharedos-dev ] || { echo "harness-column: run 'make build' first"; exit 2; }

work=$(mktemp -d /tmp/sharedos-harness-column.XXXXXX)
ready=$work/ready.json
bin/sharedos-dev --bin bin --root . --catalog-addr 127.0.0.1:17401 --authz-addr 127.0.0.1:17402 \
  --bridge-addr 127.0.0.1:17403 --files-addr 127.0.0.1:17404 --mcp-addr 127.0.0.1:17480 \
  --ready-file "$ready" >"$work/stack.log" 2>&1 &
stack=$!
trap 'kill -INT $stack 2>/dev/null; wait $stack 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  [ -s "$ready" ] && break
  kill -0 $stack 2>/dev/null || { echo "harness-column: the stack exited:"; tail -20 "$work/stack.log"; exit 1; }
  sleep 0.1
done
[ -s "$ready" ] || { echo "harness-column: the stack was not ready within 60 s"; tail -20 "$work/stack.log"; exit 1; }
url=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).mcpUrl)' "$ready")
token=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).token)' "$ready")
turn=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).turnId)' "$ready")
echo "# turn $url (stack log: $work/stack.log)"
rc=0
MCP_BEARER=$token "$runner/run.sh" "$url" || rc=$?
echo "# records of the turn:"
bin/sharedosctl --catalog 127.0.0.1:17401 ops list --turn "$turn" --output table || true
exit $rc
