# Builds, tests and lints the service. `sam build` calls the build-<LogicalId> targets (every
# function in template.yaml has BuildMethod: makefile and CodeUri: .), so the binaries SAM
# deploys are built exactly as `make build` builds them: linux/arm64, static, no RPC shim,
# stripped, reproducible paths.

GO ?= go
# Where `make build` puts bin/<function>/bootstrap.
BIN ?= bin

# Every function of the design; `make build` builds those whose main exists.
FUNCTIONS := authorize token par backchannel revoke jwks userinfo grants register introspect rotatekeys authorizer health
PRESENT := $(patsubst functions/%/main.go,%,$(wildcard $(addprefix functions/,$(addsuffix /main.go,$(FUNCTIONS)))))

# The one definition of how a Lambda binary is built (test/lambda builds the same way, for
# this machine's architecture).
LAMBDA_ENV := GOOS=linux GOARCH=arm64 CGO_ENABLED=0
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -buildvcs=false -ldflags "-s -w"

# lambda_build builds ./functions/$(1) into $(2)/bootstrap.
define lambda_build
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(2)/bootstrap ./functions/$(1)
endef

.PHONY: all build clean test test-dynamo test-lambda bench lint help \
	build-AuthorizeFunction build-TokenFunction build-ParFunction build-RevokeFunction build-JwksFunction \
	build-UserinfoFunction build-IntrospectFunction build-AuthorizerFunction build-RotateKeysFunction \
	build-HealthFunction build-GrantsFunction build-RegisterFunction

all: lint test build

help:
	@echo "make build        bin/<function>/bootstrap for linux/arm64, every function whose main exists"
	@echo "make test         every test, as CI runs them (starts DynamoDB Local itself)"
	@echo "make test-dynamo  go test ./... against a DynamoDB Local started for the run"
	@echo "make test-lambda  the Lambda Runtime API harness and template tests, with DynamoDB Local"
	@echo "make bench        go test -bench . ./..."
	@echo "make lint         gofmt -l and go vet"
	@echo "sam build         calls build-<LogicalId> below"

build: $(addprefix $(BIN)/,$(addsuffix /bootstrap,$(PRESENT)))
	@echo "built: $(PRESENT)"

# Always rebuilt: go's own cache makes an unchanged build cheap, and make cannot see the
# package's dependencies.
$(BIN)/%/bootstrap: FORCE
	$(call lambda_build,$*,$(BIN)/$*)

FORCE:

# --- targets `sam build` calls (ARTIFACTS_DIR is set by SAM) --------------------------------
build-AuthorizeFunction:
	$(call lambda_build,authorize,$(ARTIFACTS_DIR))
build-TokenFunction:
	$(call lambda_build,token,$(ARTIFACTS_DIR))
build-ParFunction:
	$(call lambda_build,par,$(ARTIFACTS_DIR))
build-BackchannelFunction:
	$(call lambda_build,backchannel,$(ARTIFACTS_DIR))
build-RevokeFunction:
	$(call lambda_build,revoke,$(ARTIFACTS_DIR))
build-JwksFunction:
	$(call lambda_build,jwks,$(ARTIFACTS_DIR))
build-UserinfoFunction:
	$(call lambda_build,userinfo,$(ARTIFACTS_DIR))
build-IntrospectFunction:
	$(call lambda_build,introspect,$(ARTIFACTS_DIR))
build-AuthorizerFunction:
	$(call lambda_build,authorizer,$(ARTIFACTS_DIR))
build-RotateKeysFunction:
	$(call lambda_build,rotatekeys,$(ARTIFACTS_DIR))
build-HealthFunction:
	$(call lambda_build,health,$(ARTIFACTS_DIR))
build-GrantsFunction:
	$(call lambda_build,grants,$(ARTIFACTS_DIR))
build-RegisterFunction:
	$(call lambda_build,register,$(ARTIFACTS_DIR))

# --- tests ----------------------------------------------------------------------------------
# test is the README's test command: everything CI runs (scripts/test.sh says what), with a
# DynamoDB Local it starts itself.
test:
	scripts/test.sh

# with_emulators points the recipe's shell at DynamoDB Local and local-kms: the *_ENDPOINT
# variable when set, else the instance the script already runs, else one it starts for the
# recipe and stops when the recipe's shell exits (success, failure or Ctrl-C). An instance it
# did not start is left running.
with_emulators = stops=""; \
	if [ -z "$$DYNAMODB_LOCAL_ENDPOINT" ]; then \
	  if ep="$$(scripts/dynamodb-local.sh status 2>/dev/null)"; then eval "$$ep"; \
	  else ep="$$(scripts/dynamodb-local.sh start)" || exit 1; eval "$$ep"; stops="$$stops dynamodb-local"; fi; \
	fi; \
	if [ -z "$$LOCAL_KMS_ENDPOINT" ]; then \
	  if ep="$$(scripts/local-kms.sh status 2>/dev/null)"; then eval "$$ep"; \
	  else [ -x tools/local-kms/bin/local-kms ] || scripts/local-kms.sh install || exit 1; \
	    ep="$$(scripts/local-kms.sh start)" || exit 1; eval "$$ep"; stops="$$stops local-kms"; fi; \
	fi; \
	trap 'for s in $$stops; do scripts/$$s.sh stop; done' EXIT; trap 'exit 130' INT TERM

# test-dynamo runs against the emulators (with_emulators), so no DynamoDB or KMS test skips.
test-dynamo:
	@$(with_emulators); \
	$(GO) test ./...

test-lambda:
	@$(with_emulators); \
	$(GO) test -v -count=1 ./test/lambda/ ./test/template/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN) .aws-sam
