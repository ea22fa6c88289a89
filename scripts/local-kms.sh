#!/usr/bin/env bash
# Installs, starts and stops local-kms (github.com/nsmithuk/local-kms, the KMS emulator
# LocalStack embeds), which the KMS key backend's tests and the Lambda harness run against. It
# is built from source with the Go toolchain, pinned in the tools module tools/local-kms
# (go.mod's tool line, go.sum), into tools/local-kms/bin.
#
#   scripts/local-kms.sh install          go build the pinned local-kms into tools/local-kms/bin
#   eval "$(scripts/local-kms.sh start)"  start on a free port, export its endpoint
#   scripts/local-kms.sh stop             stop the instance started here, delete its data
#   scripts/local-kms.sh status           print the endpoint of the running instance
#
# start prints exactly one line on stdout, `export LOCAL_KMS_ENDPOINT=http://127.0.0.1:PORT`;
# everything else goes to stderr. Its keys live in a temporary folder that stop deletes.
# Environment: LOCAL_KMS_STATE (state directory, default tools/local-kms/.state),
# LOCAL_KMS_PORT (a fixed port instead of a free one).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOL_DIR="$ROOT/tools/local-kms"
BIN="$TOOL_DIR/bin/local-kms"
STATE_DIR="${LOCAL_KMS_STATE:-$TOOL_DIR/.state}"
# What the emulator puts in its ARNs; the tests' clients use the same region.
KMS_REGION=eu-west-1
KMS_ACCOUNT_ID=111122223333

log() { echo "local-kms: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=emulator-lib.sh
source "$ROOT/scripts/emulator-lib.sh"

cmd_install() {
	command -v go >/dev/null || die "go is required"
	log "building the pinned local-kms into $BIN"
	mkdir -p "$(dirname "$BIN")"
	(cd "$TOOL_DIR" && CGO_ENABLED=0 go build -trimpath -o "$BIN" github.com/nsmithuk/local-kms >&2)
	log "installed $BIN"
}

cmd_start() {
	if running; then
		log "already running (pid $(cat "$STATE_DIR/pid"))"
		echo "export LOCAL_KMS_ENDPOINT=http://127.0.0.1:$(cat "$STATE_DIR/port")"
		return 0
	fi
	[[ -x "$BIN" ]] || die "$BIN not found; run: $0 install"
	local attempt port pid data i
	mkdir -p "$STATE_DIR"
	data="$(mktemp -d "${TMPDIR:-/tmp}/local-kms.XXXXXX")"
	echo "$data" >"$STATE_DIR/data"
	for attempt in 1 2 3; do
		port="${LOCAL_KMS_PORT:-$(free_port)}"
		# local-kms has no setting for its listen address: it listens on every interface
		# (":PORT"), not only on loopback. Its keys are throwaway test keys in a temporary
		# folder and the port is random, which is acceptable on a test machine; do not run it
		# on a host whose ports are reachable from networks you do not trust.
		# KMS_SEED_PATH points at a file that does not exist: no seeded keys, only the
		# tests' own.
		(cd "$STATE_DIR" && PORT="$port" KMS_DATA_PATH="$data" KMS_REGION="$KMS_REGION" \
			KMS_ACCOUNT_ID="$KMS_ACCOUNT_ID" KMS_SEED_PATH="$data/no-seed.yaml" \
			exec "$BIN" >"$STATE_DIR/local-kms.log" 2>&1 </dev/null) &
		pid=$!
		for i in $(seq 1 100); do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if answers "$port"; then
				echo "$pid" >"$STATE_DIR/pid"
				echo "$port" >"$STATE_DIR/port"
				log "started on port $port, all interfaces (pid $pid, data $data, log $STATE_DIR/local-kms.log)"
				echo "export LOCAL_KMS_ENDPOINT=http://127.0.0.1:$port"
				return 0
			fi
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		log "attempt $attempt on port $port failed:"
		tail -n 20 "$STATE_DIR/local-kms.log" >&2 || true
		[[ -z "${LOCAL_KMS_PORT:-}" ]] || break
	done
	rm -rf "$data"
	die "could not start local-kms"
}

cmd_stop() {
	if [[ ! -f "$STATE_DIR/pid" ]]; then
		log "not running"
		return 0
	fi
	local pid data i
	pid="$(cat "$STATE_DIR/pid")"
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "pid $pid did not stop; killing it"
			kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	if [[ -f "$STATE_DIR/data" ]]; then
		data="$(cat "$STATE_DIR/data")"
		[[ "$data" == */local-kms.* ]] && rm -rf "$data"
	fi
	rm -f "$STATE_DIR/pid" "$STATE_DIR/port" "$STATE_DIR/data"
	log "stopped (pid $pid)"
}

cmd_status() {
	running || die "not running"
	echo "export LOCAL_KMS_ENDPOINT=http://127.0.0.1:$(cat "$STATE_DIR/port")"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
	echo "usage: $0 install|start|stop|status" >&2
	exit 2
	;;
esac
