#!/usr/bin/env bash
# Runs the FAPI 2.0 flows of panva's oauth4webapi against the local server: builds the server,
# installs the pinned client from package-lock.json (npm ci) when node_modules is missing or
# older than the lockfile, and runs every test/fapi/*.test.mjs with Node's test runner. Each
# test file starts its own server on a free loopback port with a fresh data directory and its
# seed in a temporary folder, and stops it; this script removes the build at exit. Any failure
# fails the script.
#
#   test/fapi/run.sh                 all flows
#   test/fapi/run.sh fapi.test.mjs   one file
#   test/fapi/run.sh --help          this text
#
# AUTHSERVER=path runs a server binary built elsewhere; AUTHCTL=path an authctl built elsewhere
# (by-hand.test.mjs runs its `clients keygen`).
set -euo pipefail
case "${1:-}" in
-h | --help | help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
esac
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if [[ -z "${AUTHSERVER:-}" ]]; then
	(cd "$ROOT" && go build -o "$WORK/authserver" ./cmd/authserver)
	export AUTHSERVER="$WORK/authserver"
fi
if [[ -z "${AUTHCTL:-}" ]]; then
	(cd "$ROOT" && go build -o "$WORK/authctl" ./cmd/authctl)
	export AUTHCTL="$WORK/authctl"
fi

cd "$HERE"
if [[ ! -d node_modules || package-lock.json -nt node_modules ]]; then
	npm ci --no-audit --no-fund --loglevel=error
fi
if (($# == 0)); then set -- *.test.mjs; fi
# Rate limits stay on: the flows make a few dozen requests, well under them.
node --test --test-reporter=spec "$@"
