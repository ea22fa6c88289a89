#!/usr/bin/env bash
# Runs docs/benchmarks.md's "Peer comparison": the local server (built from this checkout, the
# embedded store without fsync, since oidc-provider keeps everything in memory) and panva's
# oidc-provider, driven by the same load driver of bench/peer, in alternating rounds
# (the service, then a freshly started peer) so that both see about the same background load.
# Prints one markdown table row per round and phase, and keeps each run's JSON under OUT.
#
#   bench/peer.sh
#
# Environment: ROUNDS (3), C (8), D (8), WARMUP (1), SCOPE ("openid email phone profile"),
# PEER_BENCH (bench/peer), OUT (a temporary directory), PORT (18090), AUTHSERVER (a server binary
# to measure instead of one built from this checkout, e.g. an older commit's).
# Only loopback is contacted.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${ROUNDS:-3}" PORT="${PORT:-18090}"
export C="${C:-8}" D="${D:-8}" WARMUP="${WARMUP:-1}" SCOPE="${SCOPE:-openid email phone profile}"
PEER_BENCH="$(cd "${PEER_BENCH:-$ROOT/bench/peer}" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/peerbench.XXXXXX")"
OUT="${OUT:-$WORK/results}"
mkdir -p "$OUT"
server="" peer=""
cleanup() {
	for p in $server $peer; do kill "$p" 2>/dev/null || true; done
	rm -rf "$WORK/data" "$WORK/authserver"
}
trap cleanup EXIT

for p in "$PORT" 4400; do # refuse a taken port: the run would measure whatever listens there
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is already in use" >&2; exit 1; fi
done
[[ -d "$PEER_BENCH/node_modules/oidc-provider" ]] || (cd "$PEER_BENCH" && npm ci --no-audit --no-fund)
if [[ -n "${AUTHSERVER:-}" ]]; then cp "$AUTHSERVER" "$WORK/authserver"; else go build -o "$WORK/authserver" ./cmd/authserver; fi
source bench/seed.sh
write_seed "$WORK/seed.json"

wait_for() { # URL PID
	for _ in $(seq 1 100); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

ours="http://127.0.0.1:$PORT/v2/authentication/oauth2"
theirs="http://127.0.0.1:4400/v2/authentication/oauth2"
for round in $(seq 1 "$ROUNDS"); do
	rm -rf "$WORK/data"
	AUTH_EMBEDDED_NO_SYNC=true AUTH_ARGON2_TIME=1 AUTH_ARGON2_MEMORY_KIB=64 AUTH_LOG_LEVEL=warn AUTH_RATE_LIMIT=false \
		"$WORK/authserver" --addr "127.0.0.1:$PORT" --data "$WORK/data" --seed "$WORK/seed.json" >"$WORK/server.log" 2>&1 &
	server=$!
	wait_for "$ours/.well-known/openid-configuration" "$server" || { cat "$WORK/server.log" >&2; exit 1; }
	(cd "$PEER_BENCH" && ISSUER="$ours" SERVER_PID=$server LABEL=service OUT="$OUT/service-$round.json" \
		node --env-file=peer.env bench.mjs >"$WORK/service-$round.log")
	kill "$server"; wait "$server" 2>/dev/null || true; server=""

	(cd "$PEER_BENCH" && ISSUER="$theirs" node --env-file=peer.env peer-server.mjs >"$WORK/peer.log" 2>&1) &
	peer=$!
	wait_for "$theirs/.well-known/openid-configuration" "$peer" || { cat "$WORK/peer.log" >&2; exit 1; }
	# The peer's process is node's, a child of the subshell: find it for its CPU figures.
	node_pid="$(pgrep -P "$peer" -f peer-server.mjs || echo "$peer")"
	(cd "$PEER_BENCH" && ISSUER="$theirs" SERVER_PID=$node_pid LABEL=oidc-provider OUT="$OUT/peer-$round.json" \
		node --env-file=peer.env bench.mjs >"$WORK/peer-$round.log")
	kill "$node_pid" "$peer" 2>/dev/null || true; wait "$peer" 2>/dev/null || true; peer=""
done

echo "| round | phase | service ops/s | oidc-provider ops/s | ratio | service token p99 ms | oidc-provider token p99 ms | service CPU ms/op | oidc-provider CPU ms/op | errors (service / peer) | load avg (service / peer) |"
echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for round in $(seq 1 "$ROUNDS"); do
	jq -r --slurp --arg round "$round" '
		.[0] as $s | .[1] as $p |
		def cpu(r): if r.cpu.serverCpuSec == null then "–" else (r.cpu.serverCpuSec / r.cpu.phaseWallSec / r.opsPerSec * 1000 * 100 | round / 100 | tostring) end;
		def errs(r): [r.errors[]] | add // 0;
		range(0; $s.results | length) as $i | $s.results[$i] as $a | $p.results[$i] as $b |
		"| \($round) | \($a.phase) | \($a.opsPerSec | round) | \($b.opsPerSec | round) | \($a.opsPerSec / $b.opsPerSec * 100 | round / 100) | \($a.token.p99) | \($b.token.p99) | \(cpu($a)) | \(cpu($b)) | \(errs($a)) / \(errs($b)) | \($s.loadavg[0] * 10 | round / 10) / \($p.loadavg[0] * 10 | round / 10) |"
	' "$OUT/service-$round.json" "$OUT/peer-$round.json"
done
echo "JSON: $OUT" >&2
