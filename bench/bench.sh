#!/usr/bin/env bash
# Runs the load matrix of docs/benchmarks.md ("Load"): the local server (built from this
# checkout) on the embedded store and on DynamoDB Local, with and without openid, at each
# concurrency, one JSON result per run under docs/bench/, then draws docs/bench/token.png.
#
#   bench/bench.sh                 every store below
#   bench/bench.sh embedded        the embedded store, its log on disk (every write
#                                         waits for fsync, shared by a group commit)
#   bench/bench.sh embedded-nosync the embedded store with AUTH_EMBEDDED_NO_SYNC=true (no
#                                         fsync: what the service costs without the disk)
#   bench/bench.sh embedded-tmpfs  the embedded store, its log in /dev/shm (fsync free)
#   bench/bench.sh dynamodb        DynamoDB Local (started here when
#                                         DYNAMODB_LOCAL_ENDPOINT is unset)
#
# Environment: D (measured seconds per run, 5), WARMUP (1), CONC ("1 2 4 8 16 32"),
# OUT (docs/bench), PORT (18080). The user's password hash has a cheap argon2id cost
# (t=1, m=64 KiB): password hashing is excluded from these figures on purpose.
# Only loopback is contacted; every run is bounded by D.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
D="${D:-5}" WARMUP="${WARMUP:-1}" CONC="${CONC:-1 2 4 8 16 32}" OUT="${OUT:-docs/bench}" PORT="${PORT:-18080}"
STORES=("$@")
[[ ${#STORES[@]} -gt 0 ]] || STORES=(embedded embedded-nosync dynamodb)

WORK="$(mktemp -d "${TMPDIR:-/tmp}/loadbench.XXXXXX")"
SHM="/dev/shm/loadbench.$$"
server="" dynamo_started=""
cleanup() {
	[[ -z "$server" ]] || kill "$server" 2>/dev/null || true
	[[ -z "$dynamo_started" ]] || scripts/dynamodb-local.sh stop >/dev/null 2>&1 || true
	rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

go build -o "$WORK/authserver" ./cmd/authserver
(cd bench && go build -o "$WORK/loadtest" ./loadtest && go build -o "$WORK/chart" ./chart)
mkdir -p "$OUT"

source bench/seed.sh
write_seed "$WORK/seed.json"

# start_server STORE DATADIR: a fresh server, seeded, listening on PORT.
start_server() {
	# Refuse a port already taken: the run would measure whatever listens there.
	if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
		echo "port $PORT is already in use: set PORT to a free port" >&2
		return 1
	fi
	local store="${1%-*}" data="$2" nosync=false
	[[ "$1" != embedded-nosync ]] || nosync=true
	[[ "$1" != dynamodb ]] || store=dynamodb
	env AUTH_STORE="$store" AUTH_EMBEDDED_NO_SYNC="$nosync" AUTH_ARGON2_TIME=1 AUTH_ARGON2_MEMORY_KIB=64 AUTH_LOG_LEVEL=warn AUTH_RATE_LIMIT=false \
		"$WORK/authserver" --addr "127.0.0.1:$PORT" --data "$data" --seed "$WORK/seed.json" >"$WORK/server.log" 2>&1 &
	server=$!
	for _ in $(seq 1 100); do
		curl -fsS -o /dev/null "http://127.0.0.1:$PORT/v2/authentication/oauth2/.well-known/jwks.json" 2>/dev/null && return 0
		kill -0 "$server" 2>/dev/null || { cat "$WORK/server.log" >&2; return 1; }
		sleep 0.1
	done
	echo "server did not start" >&2
	return 1
}

stop_server() {
	kill "$server" 2>/dev/null || true
	wait "$server" 2>/dev/null || true
	server=""
}

for store in "${STORES[@]}"; do
	data="$WORK"
	case "$store" in
	embedded | embedded-nosync) ;;
	embedded-tmpfs) data="$SHM" ;;
	dynamodb)
		if [[ -z "${DYNAMODB_LOCAL_ENDPOINT:-}" ]]; then
			eval "$(scripts/dynamodb-local.sh start)"
			dynamo_started=1
		fi
		export AUTH_TABLE="loadbench-$$" AUTH_DYNAMODB_ENDPOINT="$DYNAMODB_LOCAL_ENDPOINT"
		# The server creates the table on DynamoDB Local at its start.
		;;
	*) echo "unknown store $store (embedded, embedded-nosync, embedded-tmpfs or dynamodb)" >&2; exit 2 ;;
	esac
	for kind in oauth openid; do
		scope="email phone profile"
		[[ "$kind" == openid ]] && scope="openid $scope"
		# On DynamoDB the key registry is in the table and the local key files in the data
		# directory: both runs of the table share one directory, or the second cannot sign.
		dir="$data/data-$store-$kind"
		[[ "$store" != dynamodb ]] || dir="$data/data-$store"
		start_server "$store" "$dir"
		for c in $CONC; do
			echo "== $store $kind c=$c" >&2
			"$WORK/loadtest" -base "http://127.0.0.1:$PORT" -c "$c" -d "${D}s" -warmup "${WARMUP}s" -q -server-pid "$server" \
				-scope "$scope" -label "$store, $kind" -json "$OUT/load-$store-$kind-c$c.json"
		done
		stop_server
	done
done
"$WORK/chart" -o "$OUT/token.png" "$OUT"/load-*.json
echo "wrote $OUT/load-*.json and $OUT/token.png" >&2
