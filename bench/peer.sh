#!/usr/bin/env bash
# Runs docs/benchmarks.md's "Peer comparison": the local server (built from this checkout, the
# embedded store without fsync, since oidc-provider keeps everything in memory) and panva's
# oidc-provider, driven by the same load driver of bench/peer, in alternating rounds
# (the service, then a freshly started peer) so that both see about the same background load.
# Prints one markdown table row per round and phase, and keeps each run's JSON under OUT.
#
#   bench/peer.sh                        RS256 client, client_secret_basic
#   MODE=fapi bench/peer.sh              FAPI 2.0 clients (ES256, then PS256)
#   PROFILE=cpu,allocs bench/peer.sh     and profiles of the local server
#
# MODE=fapi: both servers register the FAPI 2.0 clients of bench/peer/fapi-clients.mjs (keys
# made per run): PAR required, private_key_jwt, DPoP-bound tokens with server nonces (ours with
# AUTH_DPOP_NONCES=on, the peer with oidc-provider's FAPI 2.0 profile and its DPoP nonces), and
# the driver runs each phase with the ES256 client, then with the PS256 one.
# PROFILE=cpu, allocs or cpu,allocs: the local server runs with -pprof on PPROF_PORT (18091);
# the driver takes a CPU profile and allocation profiles over each phase's measured window
# (bench/peer/bench.mjs says which), and `go tool pprof -top` of each is saved under
# OUT/profiles as <phase>-<round>.{cpu,allocs}.txt, beside the raw profiles. Profiling slows the
# server: take figures from runs without it.
#
# Environment: ROUNDS (3), C (8), D (8), WARMUP (1), SCOPE ("openid email phone profile"),
# PEER_BENCH (bench/peer), OUT (a temporary directory), PORT (18090), AUTHSERVER (a server binary
# to measure instead of one built from this checkout, e.g. an older commit's), MODE, PROFILE,
# PPROF_PORT, PROFILE_SECONDS and PROFILE_BATCH (bench/peer/bench.mjs).
# Only loopback is contacted.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${ROUNDS:-3}" PORT="${PORT:-18090}" MODE="${MODE:-rs256}" PROFILE="${PROFILE:-}" PPROF_PORT="${PPROF_PORT:-18091}"
case "$MODE" in rs256 | fapi) ;; *) echo "MODE must be rs256 or fapi" >&2; exit 2 ;; esac
case "$PROFILE" in "" | cpu | allocs | cpu,allocs | allocs,cpu) ;; *) echo "PROFILE must be cpu, allocs or cpu,allocs" >&2; exit 2 ;; esac
export C="${C:-8}" D="${D:-8}" WARMUP="${WARMUP:-1}" SCOPE="${SCOPE:-openid email phone profile}"
PEER_BENCH="$(cd "${PEER_BENCH:-$ROOT/bench/peer}" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/peerbench.XXXXXX")"
OUT="${OUT:-$WORK/results}"
mkdir -p "$OUT"
server="" peer=""
cleanup() {
	for p in $server $peer; do kill "$p" 2>/dev/null || true; done
	rm -rf "$WORK/data" "$WORK/authserver" "$WORK/fapi-clients.json" # the bench clients' private keys
}
trap cleanup EXIT

ports=("$PORT" 4400)
[[ -z "$PROFILE" ]] || ports+=("$PPROF_PORT")
for p in "${ports[@]}"; do # refuse a taken port: the run would measure whatever listens there
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is already in use" >&2; exit 1; fi
done
[[ -d "$PEER_BENCH/node_modules/oidc-provider" ]] || (cd "$PEER_BENCH" && npm ci --no-audit --no-fund)
if [[ -n "${AUTHSERVER:-}" ]]; then cp "$AUTHSERVER" "$WORK/authserver"; else go build -o "$WORK/authserver" ./cmd/authserver; fi
source bench/seed.sh
write_seed "$WORK/seed.json"
server_env=(AUTH_EMBEDDED_NO_SYNC=true AUTH_ARGON2_TIME=1 AUTH_ARGON2_MEMORY_KIB=64 AUTH_LOG_LEVEL=warn AUTH_RATE_LIMIT=false)
driver_env=()
if [[ "$MODE" == fapi ]]; then
	# The clients test/fapi/lib.mjs's fapiClient seeds (profile fapi2, PKCE, PAR, DPoP-bound
	# tokens, private_key_jwt), with the public keys the peer registers too.
	(cd "$PEER_BENCH" && node fapi-clients.mjs "$WORK/fapi-clients.json" "$WORK/seed.json" "$REDIRECT_URI")
	server_env+=(AUTH_DPOP_NONCES=on)
	driver_env+=(FAPI_CLIENTS="$WORK/fapi-clients.json")
fi
server_args=()
if [[ -n "$PROFILE" ]]; then
	server_args+=(--pprof "127.0.0.1:$PPROF_PORT")
	mkdir -p "$OUT/profiles"
fi

# profile_tops ROUND writes `go tool pprof -top` of the profiles the driver saved in a round.
profile_tops() {
	local cpu base name
	for cpu in "$OUT"/profiles/service-"$1"-*.cpu.pb.gz; do
		[[ -e "$cpu" ]] || continue
		base="${cpu%.cpu.pb.gz}" name="${base#"$OUT"/profiles/service-"$1"-}"
		if [[ "$PROFILE" == *cpu* ]]; then
			go tool pprof -top -nodecount=40 "$WORK/authserver" "$cpu" >"$OUT/profiles/$name-$1.cpu.txt" 2>/dev/null
		fi
		if [[ "$PROFILE" == *allocs* ]]; then
			go tool pprof -top -nodecount=40 -sample_index=alloc_space -base "$base.allocs-start.pb.gz" \
				"$WORK/authserver" "$base.allocs-end.pb.gz" >"$OUT/profiles/$name-$1.allocs.txt" 2>/dev/null
		fi
	done
}

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
	env "${server_env[@]}" \
		"$WORK/authserver" --addr "127.0.0.1:$PORT" --data "$WORK/data" --seed "$WORK/seed.json" "${server_args[@]}" >"$WORK/server.log" 2>&1 &
	server=$!
	wait_for "$ours/.well-known/openid-configuration" "$server" || { cat "$WORK/server.log" >&2; exit 1; }
	profile_env=()
	[[ -z "$PROFILE" ]] || profile_env=(PPROF_URL="http://127.0.0.1:$PPROF_PORT" PROFILE_DIR="$OUT/profiles")
	(cd "$PEER_BENCH" && env "${driver_env[@]}" "${profile_env[@]}" ISSUER="$ours" SERVER_PID=$server LABEL="service-$round" OUT="$OUT/service-$round.json" \
		node --env-file=peer.env bench.mjs >"$WORK/service-$round.log") || { cat "$WORK/service-$round.log" >&2; exit 1; }
	kill "$server"; wait "$server" 2>/dev/null || true; server=""
	[[ -z "$PROFILE" ]] || profile_tops "$round"

	(cd "$PEER_BENCH" && env "${driver_env[@]}" ISSUER="$theirs" node --env-file=peer.env peer-server.mjs >"$WORK/peer.log" 2>&1) &
	peer=$!
	wait_for "$theirs/.well-known/openid-configuration" "$peer" || { cat "$WORK/peer.log" >&2; exit 1; }
	# The peer's process is node's, a child of the subshell: find it for its CPU figures.
	node_pid="$(pgrep -P "$peer" -f peer-server.mjs || echo "$peer")"
	(cd "$PEER_BENCH" && env "${driver_env[@]}" ISSUER="$theirs" SERVER_PID=$node_pid LABEL="oidc-provider-$round" OUT="$OUT/peer-$round.json" \
		node --env-file=peer.env bench.mjs >"$WORK/peer-$round.log") || { cat "$WORK/peer-$round.log" >&2; exit 1; }
	kill "$node_pid" "$peer" 2>/dev/null || true; wait "$peer" 2>/dev/null || true; peer=""
done

echo "| round | phase | service ops/s | oidc-provider ops/s | ratio | service token p99 ms | oidc-provider token p99 ms | service CPU ms/op | oidc-provider CPU ms/op | driver CPU ms/op (service / peer) | errors (service / peer) | load avg (service / peer) |"
echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for round in $(seq 1 "$ROUNDS"); do
	jq -r --slurp --arg round "$round" '
		.[0] as $s | .[1] as $p |
		def cpu(r): if r.cpu.serverCpuSec == null then "–" else (r.cpu.serverCpuSec / r.cpu.phaseWallSec / r.opsPerSec * 1000 * 100 | round / 100 | tostring) end;
		def drv(r): if r.cpu.clientCpuSec == null then "–" else (r.cpu.clientCpuSec / r.cpu.phaseWallSec / r.opsPerSec * 1000 * 100 | round / 100 | tostring) end;
		def errs(r): [r.errors[]] | add // 0;
		range(0; $s.results | length) as $i | $s.results[$i] as $a | $p.results[$i] as $b |
		"| \($round) | \($a.phase) | \($a.opsPerSec | round) | \($b.opsPerSec | round) | \($a.opsPerSec / $b.opsPerSec * 100 | round / 100) | \($a.token.p99) | \($b.token.p99) | \(cpu($a)) | \(cpu($b)) | \(drv($a)) / \(drv($b)) | \(errs($a)) / \(errs($b)) | \($s.loadavg[0] * 10 | round / 10) / \($p.loadavg[0] * 10 | round / 10) |"
	' "$OUT/service-$round.json" "$OUT/peer-$round.json"
done
echo "JSON: $OUT" >&2
[[ -z "$PROFILE" ]] || echo "profiles (go tool pprof -top): $OUT/profiles/*.txt" >&2
