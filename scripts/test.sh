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
# It ends with the total of every test it ran (Go through gotestsum, FAPI and browser
# through Node's test runner), its last line alone 'N passed, N failed', also when it stops
# early. Under CI=true a missing tool (Java, Node/npm, cfn-lint, aws-sam-translator) fails the
# run instead of skipping a step.
#   scripts/test.sh --help           this text
# Environment: DYNAMODB_LOCAL_ENDPOINT (use a running DynamoDB Local instead),
# DYNAMODB_LOCAL_ENDPOINT_B (a second one, for the multi-region simulation),
# LOCAL_KMS_ENDPOINT (use a running local-kms instead), FUZZTIME,
# SKIP_BROWSER=1, SKIP_FUZZ=1, SKIP_FAPI=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
-h | --help | help)
	sed -n '2,/^set -euo/p' scripts/test.sh | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
"") ;;
*)
	echo "scripts/test.sh: unknown argument $1 (it takes none; see scripts/test.sh --help)" >&2
	exit 2
	;;
esac

step() { printf '\n==> %s\n' "$*"; current_step="$*"; }
current_step=""
ci() { [[ "${CI:-}" == true ]]; }

# COUNTS collects one "passed failed skipped" line per test run; total prints their sum.
COUNTS="$(mktemp)"
skipped_steps=()
# gotest runs go test with the given arguments through gotestsum (the go.mod tool): a line per
# package, the output of every failed test, and its counts (subtests included) added to COUNTS
# (gotestsum counts a package that does not build, or dies before reporting, as a failed test;
# total counts a run that failed with nothing counted). GOTEST_RAW runs a command of test2json
# output instead.
gotest() {
	local status one total passed failed skipped
	one="$(mktemp)"
	set +e
	go tool gotestsum --format pkgname-and-test-fails \
		--post-run-command "bash -c 'echo \$TESTS_TOTAL \$TESTS_FAILED \$TESTS_SKIPPED >$one'" \
		${GOTEST_RAW:+--raw-command} -- "$@"
	status=$?
	set -e
	read -r total failed skipped <"$one" || { total=0 failed=0 skipped=0; }
	rm -f "$one"
	# gotestsum counts a package that failed to build as a failed test outside its total.
	passed=$((total - failed - skipped > 0 ? total - failed - skipped : 0))
	echo "$passed $failed $skipped" >>"$COUNTS"
	return "$status"
}
# nodetest runs a command whose output ends with Node's test runner summary and counts it.
nodetest() {
	local log status
	log="$(mktemp)"
	set +e
	"$@" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	set -e
	awk '/^ℹ pass [0-9]+$/ {p+=$3} /^ℹ fail [0-9]+$/ {f+=$3} /^ℹ skipped [0-9]+$/ {s+=$3}
		END {print p+0, f+0, s+0}' "$log" >>"$COUNTS"
	rm -f "$log"
	return "$status"
}
# require fails under CI when a tool is missing; elsewhere it says so and returns 1 (skip).
require() {
	local what="$1" fix="$2"
	shift 2
	if "$@" >/dev/null 2>&1; then return 0; fi
	if ci; then echo "$what is missing (required under CI=true): $fix" >&2; exit 1; fi
	echo "$what is missing: $fix"
	return 1
}
total() {
	local status=$? passed failed skipped
	read -r passed failed skipped < <(awk '{p+=$1; f+=$2; s+=$3} END {print p+0, f+0, s+0}' "$COUNTS")
	rm -f "$COUNTS"
	if ((status != 0 && failed == 0)); then
		failed=1 # a step that is not a test failed: the total must not read as a pass
		printf '\nthe step "%s" failed (counted as one failure)\n' "$current_step"
	fi
	printf '\n==> total: %d tests skipped inside the runs' "$skipped"
	if ((${#skipped_steps[@]})); then printf '; steps not run: %s' "$(IFS=,; echo "${skipped_steps[*]}")"; fi
	printf '\n%d passed, %d failed\n' "$passed" "$failed"
}

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
trap 'total; stop_services' EXIT

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
	require Java "install a Java 17 runtime (apt-get install openjdk-17-jre-headless)" java -version || exit 1
	require npm "install Node.js and npm" npm --version || exit 1
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
gotest -count=1 -timeout 20m ./...

# The packages with concurrency (stores, handlers, the domain, keys, the authorizer, the
# end-to-end tests and their racing requests) again under the race detector.
step "go test -race (packages with concurrency)"
gotest -race -count=1 -timeout 20m ./shared/store/... ./shared/httpapi/... ./shared/web/... ./shared/oauth/... \
	./shared/authn/... ./shared/signin/... ./shared/tokenendpoint/... ./shared/introspection/... ./shared/revocation/... \
	./shared/resource/... ./shared/keys/... ./shared/authorizer/... ./shared/registration/... ./test/e2e/...

step "bench module: go vet and go test"
(cd bench && go vet ./...)
GOTEST_RAW=1 gotest bash -c 'cd bench && go test -json -count=1 ./...'

if [[ "${SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
	step "fuzz targets (${FUZZTIME:-5s} each)"
	FUZZTIME="${FUZZTIME:-5s}" scripts/fuzz.sh
fi

if [[ "${SKIP_FAPI:-0}" != 1 ]]; then
	step "FAPI 2.0 flows with oauth4webapi (test/fapi)"
	if require "Node.js and npm" "install Node.js 20 or later with npm (test/fapi/run.sh needs them)" sh -c 'command -v node && command -v npm'; then
		nodetest test/fapi/run.sh
	else
		skipped_steps+=("FAPI flows (no Node.js)")
	fi
fi

if [[ "${SKIP_BROWSER:-0}" != 1 && -x scripts/browser-tests.sh ]]; then
	step "browser tests"
	# Under CI, scripts/browser-tests.sh installs Chromium itself and fails when it cannot.
	if ci || require Chromium "apt-get install chromium chromium-driver (or run scripts/browser-tests.sh, which installs it)" test -x /usr/bin/chromium; then
		nodetest scripts/browser-tests.sh
	else
		skipped_steps+=("browser tests (no Chromium)")
	fi
fi
current_step=""
