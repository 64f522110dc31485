#!/usr/bin/env bash
# make trace-demo: run the `make run` stack exporting OTLP to a local Jaeger
# all-in-one, make the demo tools/calls over MCP (curl, 2025-11-25 era:
# initialize, then tools/call), check through Jaeger's query API that each
# call arrived as one trace with the expected spans, and print where to look.
#
# Everything listens on 127.0.0.1; a default port that is taken is replaced
# by the next free one. Every process started here is stopped on exit.
#
# Environment:
#   BIN                   built binaries (default bin; `make build`)
#   JAEGER                Jaeger binary (default bin/tools/jaeger; built with `make tools-jaeger` when missing)
#   SHAREDOS_DATABASE_URL PostgreSQL for the stack (then pgx spans show); empty: embedded store
#   TRACE_DEMO_HOLD       1: keep everything running until Ctrl-C (default when stdin is a terminal); 0: exit after the checks
#   TRACE_DEMO_WAIT       seconds to wait for the traces to arrive (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
JAEGER=${JAEGER:-bin/tools/jaeger}
WAIT=${TRACE_DEMO_WAIT:-30}
if [[ -t 0 ]]; then HOLD=${TRACE_DEMO_HOLD:-1}; else HOLD=${TRACE_DEMO_HOLD:-0}; fi

command -v curl >/dev/null || { echo "trace-demo: curl is required" >&2; exit 1; }
[[ -x $JAEGER ]] || make --no-print-directory tools-jaeger
for b in sharedos-dev sharedosctl catalog-svc authz-svc bridge-svc files-provider; do
  [[ -x $BIN/$b ]] || { make --no-print-directory build; break; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/sharedos-trace-demo.XXXXXX")
jaeger_pid="" dev_pid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # sharedos-dev stops its services in order on SIGTERM.
  if [[ -n $dev_pid ]] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -TERM "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  if [[ -n $jaeger_pid ]] && kill -0 "$jaeger_pid" 2>/dev/null; then
    kill -TERM "$jaeger_pid" 2>/dev/null || true
    wait "$jaeger_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- ports: the defaults when free, else the next free one
taken=" "
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && [[ $taken != *" $1 "* ]]; }
pick_port() {
  local p=$1
  while ! port_free "$p"; do p=$((p + 1)); done
  taken+="$p "
  echo "$p"
}
OTLP_PORT=$(pick_port 4318)
UI_PORT=$(pick_port 16686)
QUERY_GRPC_PORT=$(pick_port 16685)
HEALTH_PORT=$(pick_port 13133)
CATALOG_PORT=$(pick_port 7401)
AUTHZ_PORT=$(pick_port 7402)
BRIDGE_PORT=$(pick_port 7403)
FILES_PORT=$(pick_port 7404)
MCP_PORT=$(pick_port 7480)
UI="http://127.0.0.1:$UI_PORT"

# ---- Jaeger all-in-one: OTLP/HTTP in, in-memory store, query API + UI
cat >"$work/jaeger.yaml" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$HEALTH_PORT
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$UI_PORT
    grpc:
      endpoint: 127.0.0.1:$QUERY_GRPC_PORT
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$OTLP_PORT
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
echo "trace-demo: starting Jaeger ($("$JAEGER" version 2>/dev/null | sed -nE 's/.*"gitVersion":"([^"]*)".*/\1/p')) — OTLP/HTTP 127.0.0.1:$OTLP_PORT, UI $UI"
"$JAEGER" --config "file:$work/jaeger.yaml" >"$work/jaeger.log" 2>&1 &
jaeger_pid=$!
for ((i = 0; ; i++)); do
  curl -fsS "$UI/api/services" >/dev/null 2>&1 && break
  if ! kill -0 "$jaeger_pid" 2>/dev/null || ((i > 300)); then
    echo "trace-demo: Jaeger did not come up:" >&2; tail -n 30 "$work/jaeger.log" >&2; exit 1
  fi
  sleep 0.1
done

# ---- the make-run stack, every process exporting to Jaeger
store="embedded store"
[[ -n ${SHAREDOS_DATABASE_URL:-} ]] && store="PostgreSQL" # never echo the URL: it may hold a password
echo "trace-demo: starting the stack ($store)"
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP_PORT" \
OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
OTEL_BSP_SCHEDULE_DELAY=200 \
OTEL_TRACES_SAMPLER=parentbased_always_on \
OTEL_METRICS_EXPORTER=none \
  "$BIN/sharedos-dev" --bin "$BIN" --root . \
  --catalog-addr "127.0.0.1:$CATALOG_PORT" --authz-addr "127.0.0.1:$AUTHZ_PORT" \
  --bridge-addr "127.0.0.1:$BRIDGE_PORT" --files-addr "127.0.0.1:$FILES_PORT" --mcp-addr "127.0.0.1:$MCP_PORT" \
  --ready-file "$work/ready.json" >"$work/stack.log" 2>&1 &
dev_pid=$!
for ((i = 0; ; i++)); do
  [[ -s $work/ready.json ]] && break
  if ! kill -0 "$dev_pid" 2>/dev/null || ((i > 900)); then
    echo "trace-demo: the stack did not come up:" >&2; tail -n 40 "$work/stack.log" >&2; exit 1
  fi
  sleep 0.1
done
field() { sed -nE "s/.*\"$1\":\"([^\"]*)\".*/\1/p" "$work/ready.json"; }
MCP_URL=$(field mcpUrl)
TURN=$(field turnId)
# The bearer token goes to curl in a header file, never on a command line.
(umask 077 && printf 'Authorization: Bearer %s\n' "$(field token)" >"$work/auth.h")

export SHAREDOS_CATALOG_ADDR="127.0.0.1:$CATALOG_PORT" SHAREDOS_AUTHZ_ADDR="127.0.0.1:$AUTHZ_PORT" \
  SHAREDOS_BRIDGE_ADDR="127.0.0.1:$BRIDGE_PORT" SHAREDOS_FILES_ADDR="127.0.0.1:$FILES_PORT"
"$BIN/sharedosctl" status >/dev/null

# ---- MCP over curl (2025-11-25: initialize, initialized, tools/call)
session=""
mcp() { # body [traceparent] -> response body on stdout
  local hdr=(-H @"$work/auth.h" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  [[ -n $session ]] && hdr+=(-H "Mcp-Session-Id: $session" -H 'MCP-Protocol-Version: 2025-11-25')
  [[ -n ${2:-} ]] && hdr+=(-H "traceparent: $2")
  curl -sS -D "$work/resp.h" "${hdr[@]}" --data "$1" "$MCP_URL"
}
mcp '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"trace-demo","version":"1"}}}' >/dev/null
session=$(tr -d '\r' <"$work/resp.h" | sed -nE 's/^[Mm]cp-[Ss]ession-[Ii]d: *(.*)$/\1/p')
[[ -n $session ]] || { echo "trace-demo: initialize returned no Mcp-Session-Id" >&2; cat "$work/resp.h" >&2; exit 1; }
mcp '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null

hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# name | tool | arguments | spans the trace must hold (service=operation, ';'-separated) | bridge span error?
common="sharedos-bridge=tools/call TOOL;sharedos-bridge=sharedos.v1.RuntimeService/InvokeTool;sharedos-catalog=sharedos.v1.RuntimeService/InvokeTool;sharedos-catalog=sharedos.runtime.invoke_tool"
authz="sharedos-catalog=sharedos.v1.AuthzService/Authorize;sharedos-authz=sharedos.v1.AuthzService/Authorize"
handle="sharedos-catalog=sharedos.v1.ToolHandlerService/Handle;sharedos-files=sharedos.v1.ToolHandlerService/Handle"
record=""
[[ -n ${SHAREDOS_DATABASE_URL:-} ]] && record=";sharedos-catalog=INSERT catalog.operations;sharedos-catalog=UPDATE catalog.operations"
calls=(
  "allowed|files.read|{\"path\":\"/public/a.txt\"}|$common;$authz;$handle$record|false"
  "denied|files.read|{\"path\":\"/private/a.txt\"}|$common;$authz$record|false"
  "unknown name|github.delete_repo|{\"repo\":\"x\"}|$common$record|false"
  "failed|files.read|{\"path\":5}|$common$record|true"
)
declare -a trace_ids
echo
echo "trace-demo: tools/call on turn $TURN"
for i in "${!calls[@]}"; do
  IFS='|' read -r name tool args _ <<<"${calls[$i]}"
  tid=$(hex 16)
  trace_ids[i]=$tid
  out=$(mcp "{\"jsonrpc\":\"2.0\",\"id\":$((i + 1)),\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":$args}}" "00-$tid-$(hex 8)-01")
  # The answer is JSON or one SSE "data:" line holding it.
  body=$(sed -n 's/^data: //p' <<<"$out"); body=${body:-$out}
  if command -v jq >/dev/null; then
    text=$(jq -r '(.result.content[0].text // .error.message // "") | .[0:60]' <<<"$body" 2>/dev/null || true)
  else
    text=$(grep -o '"text":"[^"]*' <<<"$body" | head -n1 | cut -d'"' -f4 | cut -c1-60)
  fi
  printf '  %-13s %-19s %-28s → %s   trace %s\n' "$name" "$tool" "$args" "${text:-$(cut -c1-80 <<<"$body")}" "$tid"
done

# ---- check the traces in Jaeger
echo
echo "trace-demo: checking Jaeger ($UI/api/traces)"
fail=0
deadline=$((SECONDS + WAIT))
while :; do
  services=$(curl -fsS "$UI/api/services")
  missing=""
  for svc in sharedos-bridge sharedos-catalog sharedos-authz sharedos-files; do
    grep -q "\"$svc\"" <<<"$services" || missing+=" $svc"
  done
  [[ -z $missing || $SECONDS -ge $deadline ]] && break
  sleep 0.5
done
if [[ -n $missing ]]; then
  echo "  ✗ services without spans:$missing"; fail=1
else
  echo "  ✓ services: sharedos-bridge sharedos-catalog sharedos-authz sharedos-files"
fi
n=$(curl -fsS "$UI/api/traces?service=sharedos-bridge&lookback=1h&limit=200" | grep -o '"traceID":"[0-9a-f]*"' | sort -u | wc -l)
if ((n > 0)); then echo "  ✓ GET /api/traces?service=sharedos-bridge: $n traces"; else echo "  ✗ no sharedos-bridge traces"; fail=1; fi

# spans_of json: one "service=operation" line per span of a /api/traces/{id}
# answer. With jq the pair is exact; without it, every service and every
# operation name of the trace is paired (presence only).
spans_of() {
  if command -v jq >/dev/null; then
    jq -r '.data[]? as $t | $t.spans[] | "\($t.processes[.processID].serviceName)=\(.operationName)"' <<<"$1"
  else
    local svc op
    for svc in $(grep -oE '"serviceName":"[^"]*"' <<<"$1" | cut -d'"' -f4 | sort -u); do
      grep -oE '"operationName":"[^"]*"' <<<"$1" | cut -d'"' -f4 | sort -u | while read -r op; do echo "$svc=$op"; done
    done
  fi
}
command -v jq >/dev/null || echo "  (jq not found: checking span names and services per trace, not which service made which span)"
for i in "${!calls[@]}"; do
  IFS='|' read -r name tool _ want want_error <<<"${calls[$i]}"
  tid=${trace_ids[i]}
  want=${want//TOOL/$tool}
  while :; do
    json=$(curl -sS "$UI/api/traces/$tid")
    got=$(spans_of "$json")
    lacking=()
    IFS=';' read -ra specs <<<"$want"
    for spec in "${specs[@]}"; do
      grep -qxF "$spec" <<<"$got" || lacking+=("$spec")
    done
    ((${#lacking[@]} == 0 || SECONDS >= deadline)) && break
    sleep 0.5
  done
  if command -v jq >/dev/null; then
    # Span status: Error for a failed call, never for a denial (Jaeger shows it as tag error=true).
    is_error=$(jq -r --arg op "tools/call $tool" '[.data[]?.spans[] | select(.operationName == $op) | .tags[]? | select(.key == "error") | .value] | any' <<<"$json")
    [[ $is_error == "$want_error" ]] || lacking+=("sharedos-bridge tools/call span with error=$want_error (it has error=$is_error)")
  fi
  if ((${#lacking[@]} == 0)); then
    echo "  ✓ $name: trace $tid has ${#specs[@]} expected spans"
  else
    fail=1
    echo "  ✗ $name: trace $tid lacks:"
    printf '      %s\n' "${lacking[@]}"
  fi
done

echo
echo "Jaeger UI:        $UI/search?service=sharedos-bridge"
for i in "${!calls[@]}"; do
  IFS='|' read -r name _ <<<"${calls[$i]}"
  printf '  %-13s   %s/trace/%s\n' "$name" "$UI" "${trace_ids[i]}"
done
if ((fail)); then
  echo "trace-demo: some traces are incomplete (see ✗ above)"
else
  echo "trace-demo: every call arrived as one trace with the expected spans"
fi
if [[ $HOLD == 1 ]]; then
  echo "Press Ctrl-C to stop Jaeger and the stack."
  wait "$dev_pid" || true
fi
exit "$fail"
