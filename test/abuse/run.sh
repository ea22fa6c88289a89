#!/usr/bin/env bash
# Builds the local server, starts it on a free loopback port with the bench seed and a fresh data
# directory, runs one abuse load against it (test/abuse/main.go), prints the server's memory and
# the data directory's size, and stops the server.
#
#   AUTH_RATE_LIMIT=false test/abuse/run.sh logins -n 150   (the limits would refuse the pages)
#   test/abuse/run.sh flood -d 60s -c 16
#   test/abuse/run.sh big -d 60s       (also rotate, par, max: the storage floods, docs/benchmarks.md)
#
# AUTHSERVER=path runs a server binary built elsewhere (another commit, for a before/after).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
cd "$ROOT"
# shellcheck source=../../bench/seed.sh
source bench/seed.sh
write_seed "$WORK/seed.json"
if [[ -n "${AUTHSERVER:-}" ]]; then cp "$AUTHSERVER" "$WORK/authserver"; else go build -o "$WORK/authserver" ./cmd/authserver; fi
go build -o "$WORK/abuse" ./test/abuse
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
AUTH_LOG_LEVEL=error "$WORK/authserver" --addr "127.0.0.1:$PORT" --data "$WORK/data" --seed "$WORK/seed.json" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$PORT/v2/authentication/oauth2/.well-known/openid-configuration" >/dev/null && break; sleep 0.1; done
"$WORK/abuse" -pid "$PID" -data "$WORK/data" -base "http://127.0.0.1:$PORT" "$@"
echo "data dir: $(du -sh "$WORK/data" | cut -f1)"
