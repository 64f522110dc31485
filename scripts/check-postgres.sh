#!/usr/bin/env bash
# Tests use a real PostgreSQL (never a mock). Say clearly how to get one.
set -euo pipefail
dsn="${SHAREDOS_TEST_PG_DSN:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
if command -v pg_isready >/dev/null 2>&1; then
  if pg_isready -d "$dsn" -t 5 >/dev/null 2>&1; then exit 0; fi
elif command -v psql >/dev/null 2>&1; then
  if psql "$dsn" -Atc 'select 1' >/dev/null 2>&1; then exit 0; fi
else
  # No client tools: try a TCP connect to the DSN's host:port.
  hostport=$(echo "$dsn" | sed -E 's#^[a-z]+://([^@/]*@)?([^/?]+).*#\2#')
  if (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null; then exit 0; fi
fi
cat >&2 <<MSG
PostgreSQL is not reachable at ${dsn%%\?*} (password, if any, hidden).
The tests need a real PostgreSQL 14+ server. Either:
  - Debian/Ubuntu: sudo apt-get install postgresql && sudo pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start
    (local trust auth for user postgres on 127.0.0.1), or
  - point SHAREDOS_TEST_PG_DSN at any server you can create databases on, e.g.
    export SHAREDOS_TEST_PG_DSN='postgres://user:pass@host:5432/postgres?sslmode=disable'
MSG
exit 1
