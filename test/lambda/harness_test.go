// Package lambda_test runs the functions' real bootstrap binaries under a Lambda Runtime API
// implemented in the test, in the production configuration (AUTH_STORE=dynamodb on DynamoDB
// Local, AUTH_KEY_BACKEND=kms on local-kms), as the Lambda service would run them: each
// function starts from its template environment with only the endpoints replaced, answers the
// events/ samples, and together they carry a whole authorization code flow. Every DynamoDB
// and KMS request a function makes is checked against its IAM statements in the template. It
// reports each function's init time (exec to first /next), binary size, peak RSS and CPU per
// invocation.
//
// The endpoints come from DYNAMODB_LOCAL_ENDPOINT and LOCAL_KMS_ENDPOINT
// (scripts/dynamodb-local.sh and scripts/local-kms.sh start print them); the tests that need
// them skip when they are unset, except under CI=true, where they fail. Functions whose main
// has not landed yet are skipped by name.
package lambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/test/template/cfn"
)

// functions maps each function of the design to its logical id in template.yaml.
var functions = map[string]string{
	"authorize":   "AuthorizeFunction",
	"token":       "TokenFunction",
	"revoke":      "RevokeFunction",
	"par":         "ParFunction",
	"jwks":        "JwksFunction",
	"userinfo":    "UserinfoFunction",
	"introspect":  "IntrospectFunction",
	"authorizer":  "AuthorizerFunction",
	"rotatekeys":  "RotateKeysFunction",
	"health":      "HealthFunction",
	"grants":      "GrantsFunction",
	"register":    "RegisterFunction",
	"backchannel": "BackchannelFunction",
}

// The sample client and user of events/ (the events carry these credentials).
const (
	sampleClientID     = "cl_sample"
	sampleClientSecret = "cs1_sample-secret-for-local-tests-only"
	sampleRedirectURI  = "https://client.example/callback"
	sampleUsername     = "sample.user"
	samplePassword     = "correct horse battery staple"
	sampleBaseURL      = "https://auth.bank.example"
)

// templateParams are the stack parameters the harness deploys with. The account is
// local-kms's, so that the key ARNs it makes match the template's KMS resource patterns.
// Registration is on, so the register function answers its sample (off, it answers 404).
var templateParams = map[string]string{"BaseUrl": sampleBaseURL, "AWS::AccountId": kmstest.Account, "AWS::Region": kmstest.Region, "Registration": "on"}

// Static AWS settings every process gets: DynamoDB Local and local-kms accept any signed
// request.
var awsEnv = map[string]string{
	"AWS_REGION":                  "eu-west-1",
	"AWS_DEFAULT_REGION":          "eu-west-1",
	"AWS_ACCESS_KEY_ID":           "harness",
	"AWS_SECRET_ACCESS_KEY":       "harness",
	"AWS_EC2_METADATA_DISABLED":   "true",
	"AWS_CONFIG_FILE":             os.DevNull,
	"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
}

var (
	moduleRoot string
	binDir     string
	buildMu    sync.Mutex
	builds     = map[string]*buildResult{}
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	var err error
	if moduleRoot, err = cfn.Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binDir, err = os.MkdirTemp("", "lambda-harness-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Build every function before any test starts its clock: on a machine with empty caches
	// the build takes minutes, which must not count against a function's init timeout.
	buildAll()
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// present reports whether functions/<name>/main.go exists.
func present(name string) bool {
	_, err := os.Stat(filepath.Join(moduleRoot, "functions", name, "main.go"))
	return err == nil
}

// requireFunction skips the test when the function's main has not landed yet.
func requireFunction(t testing.TB, name string) {
	t.Helper()
	if !present(name) {
		t.Skipf("functions/%s/main.go is not there yet: skipped until it lands", name)
	}
}

// regularFile reports whether path is a regular file.
func regularFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// lambdaBuild is `go build` with the Makefile's Lambda flags, for this machine's architecture.
func lambdaBuild(out string, pkgs ...string) error {
	args := append([]string{"build", "-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", out}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, msg)
	}
	return nil
}

var buildAllOnce sync.Once

// buildAll builds every present function in one go command (it compiles and links them in
// parallel); a function it did not produce is built alone by bootstrap, which then reports
// that function's own error.
func buildAll() {
	buildAllOnce.Do(func() {
		var pkgs []string
		for name := range functions {
			if present(name) {
				pkgs = append(pkgs, "./functions/"+name)
			}
		}
		dir := filepath.Join(binDir, "all")
		if len(pkgs) == 0 || os.MkdirAll(dir, 0o755) != nil {
			return
		}
		_ = lambdaBuild(dir+string(filepath.Separator), pkgs...)
	})
}

// binariesDirEnv names a directory of prebuilt bootstraps (<dir>/<name>, as `go build -o
// <dir>/ ./functions/...` writes them): a function found there runs instead of one built from
// this tree, so the same tests measure another commit's binary (docs/benchmarks.md, "The FAPI
// 2.0 exchange in the token bootstrap, before and after").
const binariesDirEnv = "LAMBDA_BINARIES_DIR"

// bootstrap builds the function for this machine exactly as the Makefile builds it for
// Lambda (static, lambda.norpc, trimmed, stripped), once per test binary, or takes it from
// LAMBDA_BINARIES_DIR when it is there.
func bootstrap(t testing.TB, name string) string {
	t.Helper()
	requireFunction(t, name)
	if dir := os.Getenv(binariesDirEnv); dir != "" {
		if bin := filepath.Join(dir, name); regularFile(bin) {
			return bin
		}
	}
	buildAll()
	buildMu.Lock()
	b, ok := builds[name]
	if !ok {
		b = &buildResult{}
		builds[name] = b
	}
	buildMu.Unlock()
	b.once.Do(func() {
		out := filepath.Join(binDir, name, "bootstrap")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			b.err = err
			return
		}
		if err := os.Rename(filepath.Join(binDir, "all", name), out); err == nil {
			b.path = out
			return
		}
		if b.err = lambdaBuild(out, "./functions/"+name); b.err == nil {
			b.path = out
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// env is a function's environment: the template's variables, evaluated for a deployment with
// BaseUrl set, with only what differs off AWS replaced (the endpoints).
func env(t testing.TB, name string, overrides map[string]string) map[string]string {
	t.Helper()
	return envIn(t, templateParams, name, overrides)
}

// envIn is env under other stack parameters (a signing mode, say).
func envIn(t testing.TB, params map[string]string, name string, overrides map[string]string) map[string]string {
	t.Helper()
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	fn, ok := tpl.Resources[functions[name]]
	if !ok {
		t.Fatalf("template.yaml has no %s", functions[name])
	}
	ev := tpl.NewEvaluator(params)
	out := map[string]string{}
	for k, v := range tpl.Env(fn) {
		s, err := ev.Eval(v)
		if err != nil {
			t.Fatalf("%s %s: %v", name, k, err)
		}
		out[k] = s
	}
	for k, v := range awsEnv {
		out[k] = v
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}

// stack is what a deployed stack has: the table (in DynamoDB Local), signing keys (in
// local-kms), and the sample client and user.
type stack struct {
	endpoint    string
	kmsEndpoint string
	table       string
	store       *dynamo.Store
	kms         *kms.Client // for the harness's own look-ups (key tags), not the functions'
	// params are the stack parameters: templateParams, plus SigningMode and the wrapping key
	// (as its key ID, what !Ref gives in AWS) in data-key mode or with DPoP nonces.
	params map[string]string
	// enforceAs names, per function, the function whose role it runs as for KMS: its KMS
	// requests that role's IAM policies or the wrapping key's policy refuse are answered
	// AccessDeniedException (as KMS would), instead of only failing the test afterwards.
	enforceAs map[string]string
}

// recorders are the two proxies one function's AWS requests go through.
type recorders struct {
	ddb *dynamoRecorder
	kms *kmsRecorder
}

func (r *recorders) close() { r.ddb.close(); r.kms.close() }

// delay makes both proxies hold each request d before it is answered, as the network to
// DynamoDB and KMS does in a region: requests a function sends together then overlap as they
// would in AWS, where DynamoDB Local on the same machine can answer a read before the function
// has sent the write it prepared beside it.
func (r *recorders) delay(d time.Duration) {
	r.ddb.latency.Store(int64(d))
	r.kms.latency.Store(int64(d))
}

// localEnv replaces the AWS-only settings: the table name and the endpoints (through rec,
// which records the function's DynamoDB and KMS requests). The store and key backend stay
// the template's: dynamodb and kms.
func (s *stack) localEnv(rec *recorders) map[string]string {
	return map[string]string{
		config.EnvTable:          s.table,
		config.EnvDynamoEndpoint: rec.ddb.url(),
		"AWS_ENDPOINT_URL_KMS":   rec.kms.url(),
		config.EnvLogLevel:       "debug",
	}
}

// newStack creates a fresh table, seeds the sample client and user through the store API, and
// gives it its first signing key the way a deployment does (the rotatekeys bootstrap, or the
// same rotation code when that function has not landed yet).
func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackIn(t, "kms-sign")
}

// newStackIn is newStack deployed with the template's SigningMode mode: in data-key mode the
// stack's wrapping key (SigningKeyWrapKey) is a symmetric key made in local-kms.
func newStackIn(t *testing.T, mode string) *stack {
	t.Helper()
	return newStackWith(t, map[string]string{"SigningMode": mode})
}

// newStackWith is newStack deployed with the template parameters params (SigningMode,
// DPoPNonces): the stack's wrapping key (SigningKeyWrapKey) is a symmetric key made in
// local-kms when data-key mode or DPoP nonces need it.
func newStackWith(t *testing.T, params map[string]string) *stack {
	t.Helper()
	endpoint := os.Getenv("DYNAMODB_LOCAL_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DYNAMODB_LOCAL_ENDPOINT is unset under CI")
		}
		t.Skip("DYNAMODB_LOCAL_ENDPOINT is not set (start one: eval \"$(scripts/dynamodb-local.sh start)\")")
	}
	kmsClient, _ := kmstest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(awsEnv["AWS_REGION"]),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(awsEnv["AWS_ACCESS_KEY_ID"], awsEnv["AWS_SECRET_ACCESS_KEY"], "")))
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	s := &stack{endpoint: endpoint, kmsEndpoint: kmstest.Endpoint(t), kms: kmsClient,
		table: fmt.Sprintf("harness-%d", time.Now().UnixNano()), params: maps.Clone(templateParams)}
	maps.Copy(s.params, params)
	if s.params["SigningMode"] == "data-key" || s.params["DPoPNonces"] == "Enabled" {
		out, err := kmsClient.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecSymmetricDefault, KeyUsage: kmstypes.KeyUsageTypeEncryptDecrypt})
		if err != nil {
			t.Fatalf("the stack's wrapping key: %v", err)
		}
		s.params["SigningKeyWrapKey"] = aws.ToString(out.KeyMetadata.KeyId)
	}
	if err := dynamo.CreateTable(ctx, client, s.table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(s.table)})
	})
	s.store = dynamo.New(client, s.table)
	now := time.Now().UTC()
	if err := s.store.CreateClient(ctx, oauth.Client{
		ID: sampleClientID, Name: "Sample Accounting App",
		SecretHashes: []oauth.SecretHash{{Hash: oauth.HashSecret(sampleClientSecret)}},
		RedirectURIs: []string{sampleRedirectURI},
		Scopes:       []string{"openid", "email", "phone", "profile", "bank:transfers:write", "grant_management_query"},
		// The payment flow's types (TestPaymentFlow_ThroughTheBootstraps).
		AuthorizationDetailsTypes: []string{"payment_initiation", "account_information"},
		// CIBA beside the defaults (events/backchannel.json).
		GrantTypes: []string{oauth.GrantTypeAuthorizationCode, oauth.GrantTypeRefreshToken, oauth.GrantTypeCIBA},
		CreatedAt:  now, UpdatedAt: now,
	}); err != nil {
		t.Fatalf("seed client: %v", err)
	}
	if err := s.store.CreateUser(ctx, oauth.User{
		UID: "u-1001", Username: sampleUsername, PasswordHash: authn.DefaultPasswordHasher.Hash(samplePassword),
		CompanyProfileID: "cp-42", CompanyUserID: "cu-7",
		Claims:    oauth.Claims{Email: "sample.user@example.com", EmailVerified: true, Name: "Sample User"},
		CreatedAt: now,
	}); err != nil {
		t.Fatalf("seed user: %v", err)
	}
	s.firstKey(t)
	return s
}

// firstKey runs the rotation once, as the template's InitialKey custom resource does.
func (s *stack) firstKey(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if present("rotatekeys") {
		f, rec := s.start(t, ctx, "rotatekeys")
		defer rec.close()
		defer f.stop()
		ev := readEvent(t, "rotatekeys.json")
		o, err := f.invoke(ctx, ev)
		if err != nil || o.errType != "" {
			t.Fatalf("rotatekeys on a fresh stack: %v %s %s\n%s", err, o.errType, o.body, f.out.String())
		}
		s.checkIAM(t, "rotatekeys", rec)
		report(t, "rotatekeys", bootstrap(t, "rotatekeys"), f)
	} else {
		// The rotation code rotatekeys runs, over the same table and local-kms, with the
		// template's key tag.
		b := kmskey.New(s.kms, kmskey.Options{TagValue: envIn(t, s.params, "rotatekeys", nil)[config.EnvKMSTagValue]})
		d := config.Defaults()
		p := keys.Policy{RotationPeriod: d.RotationPeriod, JWKSCacheTTL: d.JWKSMaxAge, IDTokenTTL: d.Lifetimes.IDToken}
		if _, err := keys.NewRotator(s.store, b, p, oauth.SystemClock{}, nil).Rotate(ctx); err != nil {
			t.Fatalf("first key: %v", err)
		}
	}
	ks, err := s.store.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur, ok := ks.Current(keys.RS256)
	if !ok {
		t.Fatalf("no current signing key after the first rotation: %+v", ks)
	}
	if present("rotatekeys") && s.params["SigningMode"] != "data-key" {
		s.checkSigningKeyPolicy(t, ctx, cur.Ref)
	}
}

// checkSigningKeyPolicy: the KMS key the rotation function made carries the key policy the
// template's environment names (docs/keys.md, "Key policies"), not KMS's default one: the roles
// of the functions that sign (token; authorize and introspect for JARM and JWT introspection)
// sign, everyone else is denied Sign.
func (s *stack) checkSigningKeyPolicy(t *testing.T, ctx context.Context, ref string) {
	t.Helper()
	out, err := s.kms.GetKeyPolicy(ctx, &kms.GetKeyPolicyInput{KeyId: aws.String(ref), PolicyName: aws.String("default")})
	if err != nil {
		t.Fatalf("the signing key's policy: %v", err)
	}
	var doc struct {
		Statement []struct {
			Sid, Effect string
			Principal   any
		}
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Policy)), &doc); err != nil {
		t.Fatalf("the signing key's policy: %v: %s", err, aws.ToString(out.Policy))
	}
	signers := strings.Split(envIn(t, s.params, "rotatekeys", nil)[config.EnvKMSKeySigners], ",")
	if !strings.Contains(signers[0], "TokenFunctionRole") {
		t.Fatalf("the template does not name the token function's role first among the signers: %q", signers)
	}
	sids := map[string]string{}
	for _, st := range doc.Statement {
		p, _ := json.Marshal(st.Principal)
		sids[st.Sid] = st.Effect + " " + string(p)
	}
	for _, signer := range signers {
		if got := sids["TokenFunctionSigns"]; !strings.HasPrefix(got, "Allow") || !strings.Contains(got, `"`+signer+`"`) {
			t.Errorf("the signing key's policy does not let %s sign: %v", signer, sids)
		}
	}
	if got := sids["NoOneElseSigns"]; !strings.HasPrefix(got, "Deny") {
		t.Errorf("the signing key's policy does not deny Sign to everyone else: %v", sids)
	}
}

// start runs a function against the stack behind its own DynamoDB and KMS recorders, in the
// production configuration the template gives it.
func (s *stack) start(t *testing.T, ctx context.Context, name string) (*function, *recorders) {
	t.Helper()
	f, rec, err := s.tryStart(t, ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return f, rec
}

// tryStart is start, returning the function's init failure instead of failing the test.
func (s *stack) tryStart(t *testing.T, ctx context.Context, name string) (*function, *recorders, error) {
	t.Helper()
	bin := bootstrap(t, name)
	ddb, err := newDynamoRecorder(s.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newKMSRecorder(s.kmsEndpoint)
	if err != nil {
		ddb.close()
		t.Fatal(err)
	}
	rec := &recorders{ddb: ddb, kms: k}
	if as, ok := s.enforceAs[name]; ok {
		k.refuse = s.refusedAs(as)
	}
	e := envIn(t, s.params, name, s.localEnv(rec))
	if e[config.EnvStore] != "dynamodb" || (e[config.EnvKeyBackend] != "kms" && e[config.EnvKeyBackend] != "kms-data-key") {
		rec.close()
		t.Fatalf("%s: template.yaml gives %s=%q %s=%q, want the production dynamodb and kms or kms-data-key", name,
			config.EnvStore, e[config.EnvStore], config.EnvKeyBackend, e[config.EnvKeyBackend])
	}
	f, err := startFunction(ctx, name, bin, e)
	if err != nil {
		rec.close()
		return nil, nil, err
	}
	return f, rec, nil
}

func readEvent(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "events", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// httpResponse decodes an HTTP API (payload 2.0) response.
func httpResponse(t *testing.T, o outcome) events.APIGatewayV2HTTPResponse {
	t.Helper()
	if o.errType != "" {
		t.Fatalf("function error %s: %s", o.errType, o.body)
	}
	var r events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(o.body, &r); err != nil {
		t.Fatalf("not an HTTP API response: %v: %s", err, o.body)
	}
	return r
}

func header(r events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func jsonBody(t *testing.T, r events.APIGatewayV2HTTPResponse) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("body is not JSON (status %d): %v: %q", r.StatusCode, err, r.Body)
	}
	return m
}

// sampleCase is one events/ file and what the function must answer to it.
type sampleCase struct {
	event string
	check func(t *testing.T, o outcome)
}

func wantHTTP(status int, contentType string, more func(t *testing.T, r events.APIGatewayV2HTTPResponse)) func(*testing.T, outcome) {
	return func(t *testing.T, o outcome) {
		r := httpResponse(t, o)
		if r.StatusCode != status {
			t.Fatalf("status %d, want %d: %s", r.StatusCode, status, r.Body)
		}
		if ct := header(r, "Content-Type"); !strings.HasPrefix(ct, contentType) {
			t.Errorf("Content-Type %q, want %s", ct, contentType)
		}
		if more != nil {
			more(t, r)
		}
	}
}

func wantOAuthError(status int, code string) func(*testing.T, outcome) {
	return wantHTTP(status, "application/json", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
		if got := jsonBody(t, r)["error"]; got != code {
			t.Errorf("error %v, want %s", got, code)
		}
		if !strings.Contains(header(r, "Cache-Control"), "no-store") {
			t.Errorf("Cache-Control %q, want no-store", header(r, "Cache-Control"))
		}
	})
}

func wantAuthorizer(allowed bool) func(*testing.T, outcome) {
	return func(t *testing.T, o outcome) {
		if o.errType != "" {
			t.Fatalf("authorizer error %s: %s", o.errType, o.body)
		}
		var r events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(o.body, &r); err != nil {
			t.Fatalf("not a simple authorizer response: %v: %s", err, o.body)
		}
		if r.IsAuthorized != allowed {
			t.Errorf("isAuthorized %v, want %v: %s", r.IsAuthorized, allowed, o.body)
		}
	}
}

// samples are the events/ files per function and the answers they must get.
var samples = map[string][]sampleCase{
	"authorize": {
		{"authorize.json", wantHTTP(200, "text/html", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			if !strings.Contains(r.Body, `name="csrf_token"`) || !strings.Contains(r.Body, `name="password"`) {
				t.Errorf("not the login page: %.300s", r.Body)
			}
		})},
		{"authorize-assets.json", wantHTTP(200, "text/css", nil)},
	},
	"token": {
		{"token.json", wantOAuthError(400, "invalid_grant")},
		{"token-refresh-json.json", wantOAuthError(400, "invalid_grant")},
	},
	"par": {
		{"par.json", wantHTTP(201, "application/json", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			if u, _ := jsonBody(t, r)["request_uri"].(string); !strings.HasPrefix(u, "urn:ietf:params:oauth:request_uri:") {
				t.Errorf("no request_uri: %s", r.Body)
			}
		})},
	},
	"backchannel": {
		{"backchannel.json", wantHTTP(200, "application/json", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			if id, _ := jsonBody(t, r)["auth_req_id"].(string); !strings.HasPrefix(id, oauth.PrefixAuthReqID) {
				t.Errorf("no auth_req_id: %s", r.Body)
			}
		})},
	},
	"revoke": {
		{"revoke.json", func(t *testing.T, o outcome) { wantStatus(t, o, 200) }},
		{"revoke-legacy.json", func(t *testing.T, o outcome) { wantStatus(t, o, 200) }},
	},
	"jwks": {
		{"jwks.json", wantHTTP(200, "application/", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			keys, _ := jsonBody(t, r)["keys"].([]any)
			if len(keys) == 0 {
				t.Fatalf("no keys published: %s", r.Body)
			}
			kty := map[string]string{"RS256": "RSA", "PS256": "RSA", "ES256": "EC"}
			algs := map[any]bool{}
			for _, k := range keys {
				m, _ := k.(map[string]any)
				alg, _ := m["alg"].(string)
				if m["kid"] == "" || kty[alg] == "" || m["kty"] != kty[alg] {
					t.Errorf("key %v: want a kid and alg RS256 or PS256 (kty RSA) or ES256 (kty EC)", m)
				}
				algs[alg] = true
			}
			if len(algs) != 3 {
				t.Errorf("published algorithms %v, want RS256, PS256 and ES256", algs)
			}
		})},
		{"discovery.json", wantHTTP(200, "application/json", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			d := jsonBody(t, r)
			if d["issuer"] != sampleBaseURL+"/v2/authentication/oauth2" {
				t.Errorf("issuer %v", d["issuer"])
			}
			if d["jwks_uri"] != sampleBaseURL+"/v2/authentication/oauth2/.well-known/jwks.json" {
				t.Errorf("jwks_uri %v", d["jwks_uri"])
			}
		})},
	},
	"grants": {
		// A token that was never issued: 401 invalid_token with the challenge, and no write.
		{"grants.json", func(t *testing.T, o outcome) {
			r := wantStatus(t, o, 401)
			if !strings.Contains(header(r, "WWW-Authenticate"), "invalid_token") {
				t.Errorf("WWW-Authenticate %q, want invalid_token", header(r, "WWW-Authenticate"))
			}
		}},
	},
	"register": {
		// An initial access token that was never issued: 401 invalid_token with the challenge
		// (AUTH_REGISTRATION is on in the harness's environment), and no client stored.
		{"register.json", func(t *testing.T, o outcome) {
			r := wantStatus(t, o, 401)
			if !strings.Contains(header(r, "WWW-Authenticate"), "invalid_token") {
				t.Errorf("WWW-Authenticate %q, want invalid_token", header(r, "WWW-Authenticate"))
			}
		}},
	},
	"userinfo": {
		{"userinfo.json", func(t *testing.T, o outcome) {
			r := wantStatus(t, o, 401)
			if !strings.Contains(header(r, "WWW-Authenticate"), "invalid_token") {
				t.Errorf("WWW-Authenticate %q, want error=invalid_token", header(r, "WWW-Authenticate"))
			}
		}},
	},
	"introspect": {
		{"introspect.json", wantHTTP(200, "application/json", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			if active := jsonBody(t, r)["active"]; active != false {
				t.Errorf("active %v for a token never issued", active)
			}
		})},
	},
	"authorizer": {
		{"authorizer.json", wantAuthorizer(false)},
		{"authorizer-deprecated-invoice.json", wantAuthorizer(false)},
	},
	"health": {
		{"health.json", wantHTTP(200, "text/plain", func(t *testing.T, r events.APIGatewayV2HTTPResponse) {
			if r.Body != "ok\n" || !strings.Contains(header(r, "Cache-Control"), "no-store") {
				t.Errorf("body %q, Cache-Control %q: want ok, no-store", r.Body, header(r, "Cache-Control"))
			}
		})},
	},
	"rotatekeys": {
		{"rotatekeys.json", func(t *testing.T, o outcome) {
			if o.errType != "" {
				t.Errorf("rotation failed: %s %s", o.errType, o.body)
			}
		}},
	},
}

func wantStatus(t *testing.T, o outcome, status int) events.APIGatewayV2HTTPResponse {
	t.Helper()
	r := httpResponse(t, o)
	if r.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", r.StatusCode, status, r.Body)
	}
	return r
}

// figures are one function's measurements, reported at the end.
type figures struct {
	init    time.Duration
	size    int64
	peakRSS int64
}

func report(t *testing.T, name, bin string, f *function) figures {
	t.Helper()
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	rss, err := f.peakRSS()
	if err != nil {
		t.Fatal(err)
	}
	cpu, n := f.cpuPerInvocation()
	fig := figures{init: f.initDuration(), size: st.Size(), peakRSS: rss}
	t.Logf("%-10s init %6.1f ms (CPU %5.1f ms)   binary %5.1f MiB   peak RSS %5.1f MiB   CPU %6.2f ms/invocation over %d",
		name, ms(fig.init), ms(f.initCPU), float64(fig.size)/(1<<20), float64(fig.peakRSS)/(1<<20), ms(cpu), n)
	return fig
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// checkIAM fails when the function made a DynamoDB or KMS request its template policy does
// not allow (it would be AccessDenied in AWS), and logs what it did.
func (s *stack) checkIAM(t *testing.T, name string, rec *recorders) {
	t.Helper()
	checkKMSIAM(t, s.params, name, rec.kms, s.kms)
	checkDynamoIAM(t, s.params, name, rec.ddb)
}

// checkDynamoIAM checks the function's DynamoDB accesses against its template policy under the
// stack's parameters.
func checkDynamoIAM(t *testing.T, params map[string]string, name string, rec *dynamoRecorder) {
	t.Helper()
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := tpl.StatementsIn(tpl.NewEvaluator(params), tpl.Resources[functions[name]])
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, a := range rec.accesses() {
		used = append(used, a.Action+" "+itemType(a.PK))
		if !allowedBy(stmts, a) {
			t.Errorf("%s: %s on %q (index %q) is not allowed by %s's policy in template.yaml", name, a.Action, a.PK, a.Index, functions[name])
		}
	}
	slices.Sort(used)
	t.Logf("%s DynamoDB accesses: %s", name, strings.Join(slices.Compact(used), ", "))
}

// TestFunctions_AnswerTheSampleEvents starts every function from its template environment and
// sends it the events/ files.
func TestFunctions_AnswerTheSampleEvents(t *testing.T) {
	s := newStack(t)
	names := make([]string, 0, len(functions))
	for n := range functions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			requireFunction(t, name)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			f, rec := s.start(t, ctx, name)
			defer rec.close()
			defer f.stop()
			for _, c := range samples[name] {
				t.Run(strings.TrimSuffix(c.event, ".json"), func(t *testing.T) {
					o, err := f.invoke(ctx, readEvent(t, c.event))
					if err != nil {
						t.Fatal(err)
					}
					c.check(t, o)
				})
			}
			report(t, name, bootstrap(t, name), f)
			s.checkIAM(t, name, rec)
			if t.Failed() {
				t.Logf("%s log:\n%s", name, f.out.String())
			}
		})
	}
}

// TestFunctions_InitFailureIsReported: a function whose environment is invalid must not
// start serving; it exits during init, which Lambda reports as an init error.
func TestFunctions_InitFailureIsReported(t *testing.T) {
	for _, name := range []string{"token", "jwks"} {
		t.Run(name, func(t *testing.T) {
			bin := bootstrap(t, name)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e := env(t, name, map[string]string{config.EnvAccessTTL: "forever"})
			f, err := startFunction(ctx, name, bin, e)
			if err == nil {
				f.stop()
				t.Fatal("started with AUTH_ACCESS_TOKEN_TTL=forever")
			}
			if !strings.Contains(err.Error(), config.EnvAccessTTL) {
				t.Errorf("the init failure does not name the bad variable: %v", err)
			}
		})
	}
}
