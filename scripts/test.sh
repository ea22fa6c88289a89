#!/usr/bin/env bash
# Runs every test of the project, as `make test` and CI do:
#   1. gofmt and go vet;
#   2. go test ./... against a DynamoDB Local it starts itself (installed from npm on first use),
#      so the DynamoDB adapter, the admin tool and the Lambda harness never skip;
#   3. every fuzz target for a short bounded time (FUZZTIME, default 5s);
#   4. the browser tests in headless Chromium (skipped with a notice outside CI when Chromium is
#      not installed; CI installs it).
# Environment: DYNAMODB_LOCAL_ENDPOINT (use a running DynamoDB Local instead), FUZZTIME,
# SKIP_BROWSER=1, SKIP_FUZZ=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

step "gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
if [[ -n "$unformatted" ]]; then
	echo "gofmt -l lists:"; echo "$unformatted"; exit 1
fi
go vet ./...

step "go mod tidy -diff (service and bench modules)"
go mod tidy -diff && (cd bench && go mod tidy -diff)

if [[ -z "${DYNAMODB_LOCAL_ENDPOINT:-}" ]]; then
	step "DynamoDB Local"
	[[ -d tools/dynamodb-local/node_modules ]] || scripts/dynamodb-local.sh install
	eval "$(scripts/dynamodb-local.sh start)"
	trap 'scripts/dynamodb-local.sh stop || true' EXIT
fi
echo "DYNAMODB_LOCAL_ENDPOINT=$DYNAMODB_LOCAL_ENDPOINT"

step "go test ./..."
go test -count=1 -timeout 20m ./...

step "bench module: go vet and go test"
(cd bench && go vet ./... && go test -count=1 ./...)

if [[ "${SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
	step "fuzz targets (${FUZZTIME:-5s} each)"
	FUZZTIME="${FUZZTIME:-5s}" scripts/fuzz.sh
fi

if [[ "${SKIP_BROWSER:-0}" != 1 && -x scripts/browser-tests.sh ]]; then
	if [[ -x /usr/bin/chromium || "${CI:-}" == true ]]; then
		step "browser tests"
		scripts/browser-tests.sh
	else
		echo "browser tests skipped: /usr/bin/chromium is not installed (apt-get install chromium chromium-driver)"
	fi
fi
step "all tests passed"
