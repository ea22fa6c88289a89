#!/usr/bin/env bash
# Runs every test of the project, as `make test` and CI do:
#   1. gofmt and go vet;
#   2. go test ./... against a DynamoDB Local it starts itself (installed from npm on first use),
#      so the DynamoDB adapter, the admin tool and the Lambda harness never skip;
#      and a local-kms it starts (built from the pinned tools/local-kms module on first use),
#      so the KMS key backend never skips either; then the packages with concurrency again
#      under -race;
#   3. every fuzz target for a short bounded time (FUZZTIME, default 5s);
#   4. the FAPI 2.0 flows of panva's oauth4webapi against the local server (test/fapi: Node and
#      the pinned client from its lockfile; skipped with a notice outside CI without Node);
#   5. the browser tests in headless Chromium (skipped with a notice outside CI when Chromium is
#      not installed; CI installs it).
# Environment: DYNAMODB_LOCAL_ENDPOINT (use a running DynamoDB Local instead),
# DYNAMODB_LOCAL_ENDPOINT_B (a second one, for the multi-region simulation),
# LOCAL_KMS_ENDPOINT (use a running local-kms instead), FUZZTIME,
# SKIP_BROWSER=1, SKIP_FUZZ=1, SKIP_FAPI=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

# stop_services stops, at exit, the emulators this script started (and only those).
started=()
stop_services() {
	local s
	for s in "${started[@]}"; do
		case "$s" in
		dynamodb-local-b) DYNAMODB_LOCAL_STATE=tools/dynamodb-local/.state-b scripts/dynamodb-local.sh stop || true ;;
		*) "scripts/$s.sh" stop || true ;;
		esac
	done
}
trap stop_services EXIT

step "gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
if [[ -n "$unformatted" ]]; then
	echo "gofmt -l lists:"; echo "$unformatted"; exit 1
fi
go vet ./...

# The local server and authctl run on developers' machines too: they must build there.
step "Windows and macOS builds of ./cmd/..."
GOOS=windows go build ./cmd/...
GOOS=darwin go build ./cmd/...

step "go mod tidy -diff (service and bench modules)"
go mod tidy -diff && (cd bench && go mod tidy -diff)

if [[ -z "${DYNAMODB_LOCAL_ENDPOINT:-}" ]]; then
	step "DynamoDB Local"
	[[ -d tools/dynamodb-local/node_modules ]] || scripts/dynamodb-local.sh install
	eval "$(scripts/dynamodb-local.sh start)"
	started+=(dynamodb-local)
fi
echo "DYNAMODB_LOCAL_ENDPOINT=$DYNAMODB_LOCAL_ENDPOINT"

# A second DynamoDB Local: the other region of the multi-region simulation (test/multiregion).
if [[ -z "${DYNAMODB_LOCAL_ENDPOINT_B:-}" ]]; then
	step "DynamoDB Local, second instance (the multi-region simulation's other region)"
	b="$(DYNAMODB_LOCAL_STATE=tools/dynamodb-local/.state-b scripts/dynamodb-local.sh start)"
	started+=(dynamodb-local-b)
	export DYNAMODB_LOCAL_ENDPOINT_B="${b#export DYNAMODB_LOCAL_ENDPOINT=}"
fi
echo "DYNAMODB_LOCAL_ENDPOINT_B=$DYNAMODB_LOCAL_ENDPOINT_B"

step "template gates' tools (test/template runs cfn-lint and the SAM transform)"
if ! cfn-lint --version || ! python3 -c 'import samtranslator; print("aws-sam-translator", samtranslator.__version__)'; then
	echo "cfn-lint or aws-sam-translator is missing: pip install cfn-lint==1.51.0 aws-sam-translator==1.110.0"; exit 1
fi

# local-kms, for the KMS key backend, the AWS round trips and the Lambda harness.
if [[ -z "${LOCAL_KMS_ENDPOINT:-}" ]]; then
	step "local-kms"
	[[ -x tools/local-kms/bin/local-kms ]] || scripts/local-kms.sh install
	eval "$(scripts/local-kms.sh start)"
	started+=(local-kms)
fi
echo "LOCAL_KMS_ENDPOINT=$LOCAL_KMS_ENDPOINT"

step "go test ./..."
go test -count=1 -timeout 20m ./...

# The packages with concurrency (stores, handlers, the domain, keys, the authorizer, the
# end-to-end tests and their racing requests) again under the race detector.
step "go test -race (packages with concurrency)"
go test -race -count=1 -timeout 20m ./shared/store/... ./shared/httpapi/... ./shared/oauth/... ./shared/signin/... \
	./shared/keys/... ./shared/authorizer/... ./test/e2e/...

step "bench module: go vet and go test"
(cd bench && go vet ./... && go test -count=1 ./...)

if [[ "${SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
	step "fuzz targets (${FUZZTIME:-5s} each)"
	FUZZTIME="${FUZZTIME:-5s}" scripts/fuzz.sh
fi

if [[ "${SKIP_FAPI:-0}" != 1 ]]; then
	if command -v node >/dev/null && command -v npm >/dev/null || [[ "${CI:-}" == true ]]; then
		step "FAPI 2.0 flows with oauth4webapi (test/fapi)"
		test/fapi/run.sh
	else
		echo "FAPI flows skipped: Node.js and npm are not installed (test/fapi/run.sh needs them)"
	fi
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
