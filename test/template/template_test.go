// Package template_test checks template.yaml against the code: routes, builds, environment,
// table, IAM, throttles, the custom domain and the outputs. A template that drifts from the
// code deploys fine and fails in production; these tests make it fail here.
package template_test

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/test/template/cfn"
)

// functionNames maps each function's logical id to its directory under functions/ (the
// design's layout).
var functionNames = map[string]string{
	"AuthorizeFunction":   "authorize",
	"TokenFunction":       "token",
	"RevokeFunction":      "revoke",
	"ParFunction":         "par",
	"JwksFunction":        "jwks",
	"UserinfoFunction":    "userinfo",
	"IntrospectFunction":  "introspect",
	"AuthorizerFunction":  "authorizer",
	"RotateKeysFunction":  "rotatekeys",
	"HealthFunction":      "health",
	"GrantsFunction":      "grants",
	"RegisterFunction":    "register",
	"BackchannelFunction": "backchannel",
}

// lambdaRoutes are the routes of the design served by a Lambda function, and which one.
var lambdaRoutes = map[string]string{
	"GET /v2/authentication/oauth2/authorize":                        "AuthorizeFunction",
	"POST /v2/authentication/oauth2/authorize":                       "AuthorizeFunction",
	"GET /v2/authentication/oauth2/assets/{file+}":                   "AuthorizeFunction",
	"GET /v2/authentication/oauth2/account/apps":                     "AuthorizeFunction",
	"POST /v2/authentication/oauth2/account/apps":                    "AuthorizeFunction",
	"GET /v2/authentication/oauth2/account/apps/receipt":             "AuthorizeFunction",
	"GET /v2/authentication/oauth2/logout":                           "AuthorizeFunction",
	"POST /v2/authentication/oauth2/logout":                          "AuthorizeFunction",
	"POST /v2/authentication/oauth2/token":                           "TokenFunction",
	"POST /v2/authentication/oauth2/token/revoke":                    "RevokeFunction",
	"POST /v2/authentication/oauth2/par":                             "ParFunction",
	"POST /v2/authentication/oauth2/bc-authorize":                    "BackchannelFunction",
	"POST /v2/authentication/token/revoke":                           "RevokeFunction",
	"GET /v2/authentication/oauth2/.well-known/jwks.json":            "JwksFunction",
	"GET /v2/authentication/oauth2/.well-known/openid-configuration": "JwksFunction",
	"GET /v2/authentication/oauth2/userinfo":                         "UserinfoFunction",
	"POST /v2/authentication/oauth2/userinfo":                        "UserinfoFunction",
	"POST /v2/authentication/oauth2/token/introspect":                "IntrospectFunction",
	"GET /v2/authentication/oauth2/grants/{grantId}":                 "GrantsFunction",
	"DELETE /v2/authentication/oauth2/grants/{grantId}":              "GrantsFunction",
	"POST /v2/authentication/oauth2/register":                        "RegisterFunction",
	"GET /v2/authentication/oauth2/register/{clientId}":              "RegisterFunction",
	"PUT /v2/authentication/oauth2/register/{clientId}":              "RegisterFunction",
	"DELETE /v2/authentication/oauth2/register/{clientId}":           "RegisterFunction",
	"GET /readyz": "HealthFunction",
}

// healthRoutes are the routes on the health API (HealthApi) rather than the HttpApi: the
// region's own execute-api host, which its Route 53 health check calls.
var healthRoutes = map[string]bool{"GET /readyz": true}

// protectedRoutes are the bank API routes behind the authorizer, and the backend path each
// is proxied to (the deprecated ones rewritten to their successors).
var protectedRoutes = map[string]string{
	"GET /v2/bank/accounts":               "/v2/bank/accounts",
	"GET /invoicing/invoices":             "/invoicing/invoices",
	"GET /invoicing/invoices/{invoiceId}": "/invoicing/invoices/${request.path.invoiceId}",
	"GET /invoices/query":                 "/invoicing/invoices",
	"GET /invoices/{invoiceId}":           "/invoicing/invoices/${request.path.invoiceId}",
}

var deprecatedRoutes = []string{"GET /invoices/query", "GET /invoices/{invoiceId}"}

func load(t *testing.T) *cfn.Template {
	t.Helper()
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func rootDir(t testing.TB) string {
	t.Helper()
	dir, err := cfn.Root()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// templateRoutes collects the HttpApi events of every function: "METHOD /path" -> logical id.
func templateRoutes(t *testing.T, tpl *cfn.Template) map[string]string {
	t.Helper()
	got := map[string]string{}
	for id, fn := range tpl.Functions() {
		for name, ev := range cfn.AsMap(cfn.Path(fn, "Properties", "Events")) {
			e := cfn.AsMap(ev)
			if e["Type"] != "HttpApi" {
				continue
			}
			p := cfn.AsMap(e["Properties"])
			key := p["Method"].(string) + " " + p["Path"].(string)
			if api := map[bool]string{true: "HealthApi", false: "HttpApi"}[healthRoutes[key]]; !cfn.Refs(p["ApiId"], api) {
				t.Errorf("%s event %s (%s) is not on the %s", id, name, key, api)
			}
			if prev, dup := got[key]; dup {
				t.Errorf("route %s is served by both %s and %s", key, prev, id)
			}
			got[key] = id
		}
	}
	return got
}

func TestRoutes_EveryDesignRoutePointsToItsFunction(t *testing.T) {
	tpl := load(t)
	got := templateRoutes(t, tpl)
	for route, want := range lambdaRoutes {
		if got[route] != want {
			t.Errorf("route %s: served by %q, want %q", route, got[route], want)
		}
	}
	for route, fn := range got {
		if _, ok := lambdaRoutes[route]; !ok {
			t.Errorf("route %s (%s) is not in the design", route, fn)
		}
	}
}

func TestRoutes_ProtectedRoutesGoThroughTheAuthorizerToTheBackend(t *testing.T) {
	tpl := load(t)
	api := tpl.Resources["HttpApi"]
	paths := cfn.AsMap(cfn.Path(api, "Properties", "DefinitionBody", "paths"))
	seen := 0
	for p, ops := range paths {
		for method, op := range cfn.AsMap(ops) {
			route := strings.ToUpper(method) + " " + p
			want, ok := protectedRoutes[route]
			if !ok {
				t.Errorf("DefinitionBody route %s is not a protected route of the design", route)
				continue
			}
			seen++
			sec := cfn.AsSlice(cfn.AsMap(op)["security"])
			if len(sec) != 1 || cfn.AsMap(sec[0])["BearerAuthorizer"] == nil {
				t.Errorf("%s: security = %v, want the BearerAuthorizer only", route, sec)
			}
			integ := cfn.AsMap(cfn.AsMap(op)["x-amazon-apigateway-integration"])
			if integ["type"] != "http_proxy" {
				t.Errorf("%s: integration type %v, want http_proxy", route, integ["type"])
			}
			// Without the VPC link (backend_test.go checks it), the route calls BackendUrl.
			if uri, err := tpl.NewEvaluator(map[string]string{"BackendUrl": "https://backend.example"}).Eval(integ["uri"]); err != nil || !strings.HasPrefix(uri, "https://backend.example/") {
				t.Errorf("%s: integration uri %v = %q (%v) does not use the BackendUrl parameter", route, integ["uri"], uri, err)
			}
			req := cfn.AsMap(integ["requestParameters"])
			if req["overwrite:path"] != want {
				t.Errorf("%s: overwrite:path = %v, want %s", route, req["overwrite:path"], want)
			}
			for _, ctx := range []string{"uid", "companyProfileId", "companyUserId", "client_id", "scope"} {
				found := false
				for _, v := range req {
					found = found || v == "$context.authorizer."+ctx
				}
				if !found {
					t.Errorf("%s: the authorizer's %s is not passed to the backend", route, ctx)
				}
			}
			resp := cfn.AsMap(integ["responseParameters"])
			if slices.Contains(deprecatedRoutes, route) {
				for _, status := range []string{"200", "400", "401", "403", "404", "500", "502", "503", "504"} {
					h := cfn.AsMap(resp[status])
					if !cfn.Refs(h["overwrite:header.Deprecation"], "DeprecationDate") {
						t.Errorf("%s: %s responses lack the Deprecation header", route, status)
					}
					link, _ := h["overwrite:header.Link"].(string)
					if !strings.Contains(link, `rel="successor-version"`) || !strings.Contains(link, "</invoicing/invoices") {
						t.Errorf("%s: %s responses: Link = %q, want the successor-version", route, status, link)
					}
					if !cfn.Refs(h["overwrite:header.Sunset"], "DeprecationSunset") {
						t.Errorf("%s: %s responses lack the (optional) Sunset header", route, status)
					}
				}
			} else if len(resp) > 0 {
				t.Errorf("%s: a current route marks its responses: %v", route, resp)
			}
		}
	}
	if seen != len(protectedRoutes) {
		t.Errorf("DefinitionBody has %d protected routes, want %d", seen, len(protectedRoutes))
	}

	auth := cfn.AsMap(cfn.Path(api, "Properties", "Auth", "Authorizers", "BearerAuthorizer"))
	checks := []struct {
		what string
		ok   bool
	}{
		{"FunctionArn is the AuthorizerFunction (its live alias)", cfn.Refs(auth["FunctionArn"], "AuthorizerFunction.Alias")},
		{"payload format 2.0", auth["AuthorizerPayloadFormatVersion"] == "2.0"},
		{"simple responses", auth["EnableSimpleResponses"] == true},
		{"API Gateway may invoke it", auth["EnableFunctionDefaultPermissions"] == true},
		{"identity source is the Authorization header", slices.Equal(cfn.Strs(cfn.Path(auth, "Identity", "Headers")), []string{"Authorization"})},
		{"result caching is off (revocation takes effect at once)", cfn.Path(auth, "Identity", "ReauthorizeEvery") == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("BearerAuthorizer: %s: not so in %v", c.what, auth)
		}
	}
}

func TestRoutes_PathsMatchTheHandlersConstants(t *testing.T) {
	// The design's paths, as shared/httpapi spells them, must each be a template route.
	src, err := os.ReadFile(filepath.Join(rootDir(t), "shared", "httpapi", "routes.go"))
	if err != nil {
		t.Skipf("shared/httpapi/routes.go not there yet: %v", err)
	}
	consts := goStringConsts(t, "routes.go", src)
	tpl := load(t)
	routes := templateRoutes(t, tpl)
	for name, p := range consts {
		if !strings.HasPrefix(name, "Path") || name == "PathPrefix" {
			continue
		}
		if name == "PathAssets" {
			p += "{file+}"
		}
		if name == "PathGrants" {
			p += "/{grantId}"
		}
		found := false
		for r := range routes {
			found = found || strings.SplitN(r, " ", 2)[1] == p
		}
		if !found {
			t.Errorf("httpapi.%s = %q has no route in template.yaml", name, p)
		}
	}
}

// goStringConsts evaluates the string constants of one Go file (concatenations of literals and
// earlier constants).
func goStringConsts(t *testing.T, name string, src []byte) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var eval func(e ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		case *ast.Ident:
			s, ok := out[x.Name]
			return s, ok
		case *ast.BinaryExpr:
			l, ok1 := eval(x.X)
			r, ok2 := eval(x.Y)
			return l + r, ok1 && ok2 && x.Op == token.ADD
		case *ast.ParenExpr:
			return eval(x.X)
		}
		return "", false
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if v, ok := eval(vs.Values[i]); ok {
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

func TestFunctions_BuildFromTheMakefileForArm64(t *testing.T) {
	tpl := load(t)
	targets, err := cfn.BuildTargets()
	if err != nil {
		t.Fatal(err)
	}
	gofns := tpl.GoFunctions()
	if !testing.Short() {
		// Compile every present function's packages for arm64 once, in one go command, so the
		// parallel `make build-<LogicalId>` runs below find them in the build cache instead of
		// each compiling the AWS SDK again.
		warm := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w",
			"-o", t.TempDir()+string(filepath.Separator), "./functions/...")
		warm.Dir = rootDir(t)
		warm.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if b, err := warm.CombinedOutput(); err != nil {
			t.Logf("arm64 warm-up build failed (each target reports its own error below): %v\n%s", err, b)
		}
	}
	if len(gofns) != len(functionNames) {
		t.Errorf("template has %d Go functions, the design %d", len(gofns), len(functionNames))
	}
	for id, name := range functionNames {
		t.Run(id, func(t *testing.T) {
			t.Parallel() // the go build cache is shared; links run side by side
			fn, ok := gofns[id]
			if !ok {
				t.Fatalf("%s is not a BuildMethod makefile function in template.yaml", id)
			}
			for prop, want := range map[string]any{"Runtime": "provided.al2023", "Handler": "bootstrap", "CodeUri": ".", "Tracing": "Active"} {
				if got := tpl.FunctionProp(fn, prop); got != want {
					t.Errorf("%s = %v, want %v", prop, got, want)
				}
			}
			if arch := cfn.Strs(tpl.FunctionProp(fn, "Architectures")); !slices.Equal(arch, []string{"arm64"}) {
				t.Errorf("Architectures = %v, want [arm64]", arch)
			}
			if targets[id] != name {
				t.Fatalf("Makefile target build-%s builds %q, want ./functions/%s", id, targets[id], name)
			}
			main := filepath.Join(rootDir(t), "functions", name, "main.go")
			if _, err := os.Stat(main); err != nil {
				t.Skipf("functions/%s/main.go not there yet; the target is checked once it lands", name)
			}
			f, err := parser.ParseFile(token.NewFileSet(), main, nil, parser.PackageClauseOnly)
			if err != nil || f.Name.Name != "main" {
				t.Fatalf("functions/%s/main.go is not package main: %v", name, err)
			}
			if testing.Short() {
				t.Skip("-short: not cross-compiling")
			}
			// Run the very target `sam build` runs, into a scratch ARTIFACTS_DIR.
			out := t.TempDir()
			cmd := exec.Command("make", "--no-print-directory", "build-"+id, "ARTIFACTS_DIR="+out)
			cmd.Dir = rootDir(t)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("make build-%s: %v\n%s", id, err, b)
			}
			bin := filepath.Join(out, "bootstrap")
			ef, err := elf.Open(bin)
			if err != nil {
				t.Fatalf("bootstrap is not an ELF binary: %v", err)
			}
			defer ef.Close()
			if ef.Machine != elf.EM_AARCH64 {
				t.Errorf("bootstrap is built for %v, want EM_AARCH64 (arm64)", ef.Machine)
			}
			if ef.Section(".interp") != nil {
				t.Errorf("bootstrap is dynamically linked (CGO_ENABLED=0 lost)")
			}
			if ef.Section(".symtab") != nil {
				t.Errorf("bootstrap has a symbol table (-ldflags -s lost)")
			}
			st, _ := os.Stat(bin)
			t.Logf("linux/arm64 bootstrap of %s: %.1f MiB", name, float64(st.Size())/(1<<20))
		})
	}
}

// configEnvNames are the names of the settings shared/config declares (config.Settings).
func configEnvNames(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, s := range config.Settings() {
		out = append(out, s.Name)
	}
	return out
}

// TestEnvironment_EveryFunctionGetsAValidConfigurationOfDeclaredSettings checks each Lambda
// function's environment as CloudFormation will hand it over: the template after the SAM
// transform (Globals merged into each function), evaluated for every deployment the template's
// parameter checks and Rules accept among the combinations of the domain configurations of
// domains_test.go, single region or either region of a pair, KMS Sign or data keys, with or
// without a key tag and DPoP nonces; together these give every condition a function's
// variables choose by each of its values, which the test also requires. With no hand-kept
// list of what a function reads:
//
//   - what a function reads is what config.FromLookup asks for (the functions read settings
//     only through it, config.FromEnv). A recording lookup over exactly the function's
//     variables must be asked for every AUTH_* variable the template passes: a variable no
//     declaration reads (a typo, a removed setting) fails, and so does one of the local
//     server's own settings;
//   - the load must succeed and meet Lambda's rules (the DynamoDB store and its table, a KMS
//     key backend and its tag, an https base URL and its issuer), so a value the code would
//     refuse at start fails here;
//   - every setting declared as required in AWS (config.Setting.RequiredIn) for this function,
//     or for every function, must be passed, so no deployment leaves it to the local default.
func TestEnvironment_EveryFunctionGetsAValidConfigurationOfDeclaredSettings(t *testing.T) {
	out := samTransform(t)
	evaluators := deployments(out)
	t.Logf("%d deployments accepted by the parameter checks and Rules", len(evaluators))
	lambdas := 0
	for _, r := range out.Resources {
		if r["Type"] == "AWS::Lambda::Function" && cfn.Path(r, "Properties", "Handler") == "bootstrap" {
			lambdas++
		}
	}
	if lambdas != len(functionNames) {
		t.Errorf("the transformed template has %d Go Lambda functions, functionNames %d: check every one", lambdas, len(functionNames))
	}
	for id, name := range functionNames {
		t.Run(id, func(t *testing.T) {
			fn := out.Resources[id]
			if fn["Type"] != "AWS::Lambda::Function" {
				t.Fatalf("%s is %v after the transform, want AWS::Lambda::Function", id, fn["Type"])
			}
			env := cfn.AsMap(cfn.Path(fn, "Properties", "Environment", "Variables"))
			for _, s := range config.Settings() {
				if _, ok := env[s.Name]; !ok && (slices.Contains(s.RequiredIn, config.EveryFunction) || slices.Contains(s.RequiredIn, name)) {
					t.Errorf("%s needs %s (config.Settings: RequiredIn %v) but the template does not pass it", id, s.Name, s.RequiredIn)
				}
			}
			conds := cfn.ConditionsIn(env)
			seen := map[string]map[bool]bool{}
			reported := map[string]bool{} // each wrong variable once, not once per deployment
			for i, ev := range evaluators {
				values := map[string]bool{}
				for _, c := range conds {
					v, err := ev.Cond(c)
					if err != nil {
						t.Fatal(err)
					}
					values[c] = v
					if seen[c] == nil {
						seen[c] = map[bool]bool{}
					}
					seen[c][v] = true
				}
				vals := map[string]string{}
				for k, v := range env {
					s, err := ev.Eval(v)
					if errors.Is(err, cfn.ErrNoValue) {
						continue
					}
					if err != nil {
						t.Fatalf("deployment %d: %s: %v", i, k, err)
					}
					vals[k] = s
				}
				asked := map[string]bool{}
				cfg, err := config.FromLookup(func(k string) (string, bool) { asked[k] = true; v, ok := vals[k]; return v, ok })
				if err != nil {
					t.Fatalf("deployment %d (conditions %v): the function's environment is not a valid configuration: %v", i, values, err)
				}
				for k := range vals {
					if strings.HasPrefix(k, "AUTH_") && !asked[k] && !reported[k] {
						reported[k] = true
						t.Errorf("%s gets %s, which the configuration does not read (a typo, or not a setting of shared/config)", id, k)
					}
				}
				for _, s := range config.Settings() {
					if _, ok := vals[s.Name]; ok && s.LocalServer && !reported[s.Name] {
						reported[s.Name] = true
						t.Errorf("%s gets %s, a setting of the local server only", id, s.Name)
					}
				}
				if cfg.Store != "dynamodb" || (cfg.KeyBackend != "kms" && cfg.KeyBackend != "kms-data-key") || cfg.Table == "" || cfg.KMSTagValue == "" {
					t.Errorf("deployment %d (conditions %v): store %q, key backend %q, table %q, key tag %q: want dynamodb, kms or kms-data-key, the table, a tag",
						i, values, cfg.Store, cfg.KeyBackend, cfg.Table, cfg.KMSTagValue)
				}
				if !strings.HasPrefix(cfg.BaseURL, "https://") || !strings.HasSuffix(cfg.Issuer, "/v2/authentication/oauth2") {
					t.Errorf("deployment %d (conditions %v): base %q issuer %q", i, values, cfg.BaseURL, cfg.Issuer)
				}
			}
			for _, c := range conds {
				if len(seen[c]) != 2 {
					t.Errorf("%s's variables choose by %s, which the deployments checked gave only %v: add one giving the other value", id, c, seen[c])
				}
			}
		})
	}
}

// TestEnvironment_TableIsTheStacks: every function's AUTH_TABLE names the stack's table (or
// the global table's name), in the template as written.
func TestEnvironment_TableIsTheStacks(t *testing.T) {
	tpl := load(t)
	for id := range functionNames {
		if env := tpl.Env(tpl.Resources[id]); !cfn.Refs(env[config.EnvTable], "Table") {
			t.Errorf("%s: %s = %v, want !Ref Table", id, config.EnvTable, env[config.EnvTable])
		}
	}
}

func TestTable_MatchesTheStoresDefinition(t *testing.T) {
	tpl := load(t)
	table := tpl.Resources["Table"]
	if table["Type"] != "AWS::DynamoDB::Table" {
		t.Fatalf("Table is %v", table["Type"])
	}
	p := cfn.AsMap(table["Properties"])
	def := dynamo.TableDefinition("x")

	wantAttrs := map[string]string{}
	for _, a := range def.AttributeDefinitions {
		wantAttrs[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	gotAttrs := map[string]string{}
	for _, a := range cfn.AsSlice(p["AttributeDefinitions"]) {
		m := cfn.AsMap(a)
		gotAttrs[m["AttributeName"].(string)] = m["AttributeType"].(string)
	}
	if !mapsEqual(gotAttrs, wantAttrs) {
		t.Errorf("AttributeDefinitions = %v, want %v", gotAttrs, wantAttrs)
	}
	keySchema := func(v any) []string {
		var out []string
		for _, k := range cfn.AsSlice(v) {
			m := cfn.AsMap(k)
			out = append(out, m["AttributeName"].(string)+":"+m["KeyType"].(string))
		}
		return out
	}
	var wantKeys []string
	for _, k := range def.KeySchema {
		wantKeys = append(wantKeys, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	if got := keySchema(p["KeySchema"]); !slices.Equal(got, wantKeys) {
		t.Errorf("KeySchema = %v, want %v", got, wantKeys)
	}
	wantGSI := map[string]string{}
	for _, g := range def.GlobalSecondaryIndexes {
		var ks []string
		for _, k := range g.KeySchema {
			ks = append(ks, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		wantGSI[aws.ToString(g.IndexName)] = strings.Join(ks, ",") + " " + string(g.Projection.ProjectionType)
	}
	gotGSI := map[string]string{}
	for _, g := range cfn.AsSlice(p["GlobalSecondaryIndexes"]) {
		m := cfn.AsMap(g)
		gotGSI[m["IndexName"].(string)] = strings.Join(keySchema(m["KeySchema"]), ",") + " " + cfn.Path(m, "Projection", "ProjectionType").(string)
	}
	if !mapsEqual(gotGSI, wantGSI) {
		t.Errorf("GlobalSecondaryIndexes = %v, want %v", gotGSI, wantGSI)
	}
	if p["BillingMode"] != string(def.BillingMode) {
		t.Errorf("BillingMode = %v, want %v", p["BillingMode"], def.BillingMode)
	}
	if cfn.Path(p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
		t.Error("point-in-time recovery is off")
	}
	if cfn.Path(p, "SSESpecification", "SSEEnabled") != true {
		t.Error("SSE (KMS encryption at rest) is off")
	}
	if table["DeletionPolicy"] != "Retain" {
		t.Errorf("DeletionPolicy = %v: deleting the stack would delete every grant, client and user", table["DeletionPolicy"])
	}
}

func TestTable_TTLAttributeIsTheStores(t *testing.T) {
	tpl := load(t)
	ttl := cfn.AsMap(cfn.Path(tpl.Resources["Table"], "Properties", "TimeToLiveSpecification"))
	if ttl["AttributeName"] != dynamo.TTLAttribute || ttl["Enabled"] != true {
		t.Errorf("TimeToLiveSpecification = %v, want AttributeName %q enabled", ttl, dynamo.TTLAttribute)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// kmsTagKey is the tag key the KMS adapter puts on every signing key it creates: the key the
// template's IAM conditions must name.
const kmsTagKey = kmskey.DefaultTagKey

// allowedKMS is which KMS actions each function may have: signing for the functions that sign
// (token; authorize and introspect for JARM and RFC 9701 responses, grants for consent receipts),
// key management for the rotation, nothing for the others.
var allowedKMS = map[string][]string{
	"TokenFunction":      {"kms:Sign"},
	"AuthorizeFunction":  {"kms:Sign"},
	"IntrospectFunction": {"kms:Sign"},
	"GrantsFunction":     {"kms:Sign"},
	"RotateKeysFunction": {"kms:CreateKey", "kms:TagResource", "kms:GetPublicKey", "kms:ScheduleKeyDeletion"},
}

// unscopable are actions IAM cannot scope to a resource: Resource "*" is the narrowest there
// is, and they must then carry conditions.
var unscopable = map[string]bool{"kms:CreateKey": true}

func TestIAM_NoWildcardWhereANarrowerGrantExists(t *testing.T) {
	tpl := load(t)
	for id, fn := range tpl.Functions() {
		t.Run(id, func(t *testing.T) {
			stmts, err := tpl.Statements(fn)
			if err != nil {
				t.Fatal(err)
			}
			if len(stmts) == 0 {
				t.Fatal("no inline policy: the function would get SAM's defaults or nothing")
			}
			for _, s := range stmts {
				if s.Effect != "Allow" {
					continue
				}
				for _, a := range s.Actions {
					if strings.Contains(a, "*") {
						t.Errorf("%s: action %q is a wildcard", s.Sid, a)
					}
					if strings.HasPrefix(a, "kms:") && !slices.Contains(allowedKMS[id], a) {
						t.Errorf("%s: %s may not have %s", s.Sid, id, a)
					}
				}
				for _, r := range s.Resources {
					if r != "*" {
						if str, ok := r.(string); ok && strings.HasSuffix(str, ":*") {
							t.Errorf("%s: resource %q is a wildcard", s.Sid, str)
						}
						continue
					}
					for _, a := range s.Actions {
						if !unscopable[a] {
							t.Errorf("%s: %s on Resource \"*\", but it can be scoped to a resource", s.Sid, a)
						}
					}
					if len(s.Condition) == 0 {
						t.Errorf("%s: Resource \"*\" without a condition", s.Sid)
					}
				}
				var dynamoActions, kmsActions bool
				for _, a := range s.Actions {
					dynamoActions = dynamoActions || strings.HasPrefix(a, "dynamodb:")
					kmsActions = kmsActions || strings.HasPrefix(a, "kms:")
				}
				if dynamoActions {
					for _, r := range s.Resources {
						if !cfn.Refs(r, "Table") {
							t.Errorf("%s: DynamoDB actions on %v, want the table only", s.Sid, r)
						}
						// Two request paths query an index: the authorize function lists a
						// user's grants (the Connected apps page, remembered consent) from gsi1,
						// and the register function a client's grants from gsi2 when the client
						// deletes its registration (RFC 7592 2.3: its grants are revoked).
						js, _ := json.Marshal(r)
						queries := slices.Equal(s.Actions, []string{"dynamodb:Query"})
						userGrants := id == "AuthorizeFunction" && queries && strings.Contains(string(js), "/index/gsi1\"")
						clientGrants := id == "RegisterFunction" && queries && strings.Contains(string(js), "/index/gsi2\"")
						if strings.Contains(string(js), "/index/") && !userGrants && !clientGrants {
							t.Errorf("%s: index access %s, but only the authorize function's Query of gsi1 and the register function's of gsi2 query an index", s.Sid, js)
						}
					}
					if len(s.LeadingKeys()) == 0 {
						t.Errorf("%s: DynamoDB actions without a dynamodb:LeadingKeys condition", s.Sid)
					}
					for _, k := range s.LeadingKeys() {
						if k == "*" || !strings.Contains(k, "#") {
							t.Errorf("%s: leading-key pattern %q does not name an item type", s.Sid, k)
						}
					}
				}
				if kmsActions {
					cond, _ := json.Marshal(s.Condition)
					if !strings.Contains(string(cond), "aws:ResourceTag/"+kmsTagKey) && !strings.Contains(string(cond), "aws:RequestTag/"+kmsTagKey) {
						t.Errorf("%s: KMS actions not limited to keys tagged %s: %s", s.Sid, kmsTagKey, cond)
					}
				}
			}
		})
	}
}

func TestIAM_KMSTagValueIsTheFunctionsTagValue(t *testing.T) {
	// The conditions compare the tag with the value the functions tag keys with
	// (AUTH_KMS_KEY_TAG, which app passes to kmskey as TagValue).
	tpl := load(t)
	ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://a.example", "KeyTag": "k1"})
	for _, id := range []string{"TokenFunction", "RotateKeysFunction"} {
		stmts, err := tpl.Statements(tpl.Resources[id])
		if err != nil {
			t.Fatal(err)
		}
		envTag, _ := ev.Eval(tpl.Env(tpl.Resources[id])[config.EnvKMSTagValue])
		for _, s := range stmts {
			for _, op := range []string{"aws:ResourceTag/", "aws:RequestTag/"} {
				v, ok := cfn.AsMap(s.Condition["StringEquals"])[op+kmsTagKey]
				if !ok {
					continue
				}
				if got, err := ev.Eval(v); err != nil || got != envTag {
					t.Errorf("%s %s: %s%s = %q, want the functions' %s %q", id, s.Sid, op, kmsTagKey, got, config.EnvKMSTagValue, envTag)
				}
			}
		}
	}
}

func TestLogs_EveryFunctionHasALogGroupWithRetention(t *testing.T) {
	tpl := load(t)
	for id, fn := range tpl.Functions() {
		lg := cfn.Path(fn, "Properties", "LoggingConfig", "LogGroup")
		ref, _ := cfn.AsMap(lg)["Ref"].(string)
		group := tpl.Resources[ref]
		if group["Type"] != "AWS::Logs::LogGroup" {
			t.Errorf("%s: LoggingConfig.LogGroup = %v, not a log group of the template", id, lg)
			continue
		}
		if cfn.Path(group, "Properties", "RetentionInDays") == nil {
			t.Errorf("%s: log group %s keeps logs forever", id, ref)
		}
	}
	if cfn.Path(tpl.Resources["HttpApi"], "Properties", "AccessLogSettings", "DestinationArn") == nil {
		t.Error("the HTTP API writes no access log")
	}
	// Each access log line names its request, which the functions' log and audit lines carry
	// as request_id, and the host it reached: the connect host (mutual TLS) and the public one
	// share the API.
	format, err := tpl.NewEvaluator(nil).Eval(cfn.Path(tpl.Resources["HttpApi"], "Properties", "AccessLogSettings", "Format"))
	if err != nil {
		t.Errorf("the access log format: %v", err)
	}
	for _, field := range []string{`"requestId":"$context.requestId"`, `"domainName":"$context.domainName"`} {
		if !strings.Contains(format, field) {
			t.Errorf("the access log format lacks %s", field)
		}
	}
}

func TestThrottles_TokenAndAuthorizeRoutesHaveTheirOwn(t *testing.T) {
	tpl := load(t)
	api := cfn.AsMap(tpl.Resources["HttpApi"]["Properties"])
	settings := cfn.AsMap(api["RouteSettings"])
	routes := templateRoutes(t, tpl)
	for route, param := range map[string]string{
		"POST /v2/authentication/oauth2/token":     "Token",
		"GET /v2/authentication/oauth2/authorize":  "Authorize",
		"POST /v2/authentication/oauth2/authorize": "Authorize",
		"POST /v2/authentication/oauth2/register":  "Register",
	} {
		s := cfn.AsMap(settings[route])
		if !cfn.Refs(s["ThrottlingRateLimit"], param+"RateLimit") || !cfn.Refs(s["ThrottlingBurstLimit"], param+"BurstLimit") {
			t.Errorf("RouteSettings[%s] = %v, want the %sRateLimit/%sBurstLimit parameters", route, s, param, param)
		}
		if _, ok := routes[route]; !ok {
			t.Errorf("throttled route %s does not exist", route)
		}
	}
	for r := range settings {
		if _, ok := routes[r]; !ok {
			t.Errorf("RouteSettings names %s, which is no route (the stage would fail to deploy)", r)
		}
	}
	if cfn.AsMap(api["DefaultRouteSettings"])["ThrottlingRateLimit"] == nil {
		t.Error("no default route throttle")
	}
}

func TestCustomDomain_MutualTLSAndNoBypass(t *testing.T) {
	tpl := load(t)
	dom := tpl.Resources["CustomDomain"]
	if dom["Condition"] != "HasCustomDomain" {
		t.Errorf("CustomDomain condition = %v", dom["Condition"])
	}
	mtls := cfn.AsMap(cfn.Path(dom, "Properties", "MutualTlsAuthentication"))
	if !cfn.Refs(mtls["TruststoreUri"], "TruststoreUri") || !cfn.Refs(mtls["TruststoreVersion"], "TruststoreVersion") {
		t.Errorf("MutualTlsAuthentication = %v, want the truststore parameters", mtls)
	}
	cfgs := cfn.AsSlice(cfn.Path(dom, "Properties", "DomainNameConfigurations"))
	if len(cfgs) != 1 || cfn.AsMap(cfgs[0])["SecurityPolicy"] != "TLS_1_2" {
		t.Errorf("DomainNameConfigurations = %v, want TLS_1_2", cfgs)
	}
	dis := cfn.Path(tpl.Resources["HttpApi"], "Properties", "DisableExecuteApiEndpoint")
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"BaseUrl": "https://a.example"}, "false"},
		{map[string]string{"CustomDomainName": "connect.bank.example"}, "true"},
	} {
		got, err := tpl.NewEvaluator(tc.params).Eval(dis)
		if err != nil || got != tc.want {
			t.Errorf("DisableExecuteApiEndpoint with %v = %q (%v), want %s", tc.params, got, err, tc.want)
		}
	}
	mapping := tpl.Resources["CustomDomainMapping"]
	if mapping["Condition"] != "HasCustomDomain" || !cfn.Refs(mapping["Properties"], "HttpApi") || !cfn.Refs(mapping["Properties"], "CustomDomain") {
		t.Errorf("CustomDomainMapping = %v", mapping)
	}
}

func TestRotation_ScheduledAndRunOnceAtDeploy(t *testing.T) {
	tpl := load(t)
	// The schedule is an EventBridge rule of its own (not a SAM Schedule event, whose Enabled
	// the transform cannot take from a condition); TestTransform_RotationScheduleRunsOnlyIn…
	// checks where it runs.
	rule := tpl.Resources["RotationRule"]
	if rule["Type"] != "AWS::Events::Rule" || !cfn.Refs(cfn.Path(rule, "Properties", "ScheduleExpression"), "RotationSchedule") ||
		!cfn.Refs(cfn.Path(rule, "Properties", "Targets"), "RotateKeysFunction") {
		t.Errorf("RotationRule = %v, want an EventBridge rule on the RotationSchedule parameter invoking RotateKeysFunction", rule)
	}
	perm := tpl.Resources["RotationRulePermission"]
	if perm["Condition"] != rule["Condition"] || !cfn.Refs(cfn.Path(perm, "Properties", "SourceArn"), "RotationRule") ||
		cfn.Path(perm, "Properties", "Principal") != "events.amazonaws.com" {
		t.Errorf("RotationRulePermission = %v, want events.amazonaws.com invoking from RotationRule only, under the rule's condition", perm)
	}
	// The rotation function itself is the custom resource's service (functions/rotatekeys
	// answers the protocol): one language, no shim.
	cr := tpl.Resources["InitialKey"]
	if cr["Type"] != "AWS::CloudFormation::CustomResource" ||
		!cfn.Refs(cfn.Path(cr, "Properties", "ServiceToken"), "RotateKeysFunction") {
		t.Errorf("InitialKey does not run the rotation at deploy: %v", cr)
	}
	for _, setting := range []string{"KeyTag", "RotationPeriod", "JwksMaxAge", "KeyCacheTtl"} {
		if !cfn.Refs(cfn.Path(cr, "Properties", setting), setting) {
			t.Errorf("InitialKey's %s does not follow the parameter: a change would not rotate again", setting)
		}
	}
	for id, fn := range tpl.Functions() {
		if rt, _ := tpl.FunctionProp(fn, "Runtime").(string); rt != "provided.al2023" || cfn.Path(fn, "Properties", "InlineCode") != nil {
			t.Errorf("%s: runtime %q (inline code %v): every function is one of our Go binaries", id, rt, cfn.Path(fn, "Properties", "InlineCode") != nil)
		}
	}
}

func TestOutputs_EveryURL(t *testing.T) {
	tpl := load(t)
	want := map[string]string{
		"ApiUrl": "", "BaseUrl": "", "IssuerUrl": "/v2/authentication/oauth2",
		"AuthorizeUrl": "/v2/authentication/oauth2/authorize", "TokenUrl": "/v2/authentication/oauth2/token",
		"RevokeUrl": "/v2/authentication/oauth2/token/revoke", "LegacyRevokeUrl": "/v2/authentication/token/revoke",
		"IntrospectUrl": "/v2/authentication/oauth2/token/introspect", "RegisterUrl": "/v2/authentication/oauth2/register", "UserinfoUrl": "/v2/authentication/oauth2/userinfo",
		"JwksUrl": "/v2/authentication/oauth2/.well-known/jwks.json", "DiscoveryUrl": "/v2/authentication/oauth2/.well-known/openid-configuration",
		"AccountsUrl": "/v2/bank/accounts", "InvoicesUrl": "/invoicing/invoices", "DeprecatedInvoicesQueryUrl": "/invoices/query",
	}
	ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://auth.bank.example"})
	var names []string
	for name, suffix := range want {
		names = append(names, name)
		o, ok := tpl.Outputs[name]
		if !ok {
			t.Errorf("output %s missing", name)
			continue
		}
		got, err := ev.Eval(o["Value"])
		if err != nil {
			t.Errorf("output %s: %v", name, err)
			continue
		}
		if !strings.HasPrefix(got, "https://") || !strings.HasSuffix(got, suffix) {
			t.Errorf("output %s = %q, want an https URL ending in %q", name, got, suffix)
		}
	}
	sort.Strings(names)
	if _, ok := tpl.Outputs["ConnectHostUrl"]; !ok {
		t.Error("output ConnectHostUrl missing")
	}
}

// TestEvents_MatchTheTemplate keeps events/ usable with `sam local invoke -e`: every HTTP event
// names a route of the template and is served by the function it is meant for.
func TestEvents_MatchTheTemplate(t *testing.T) {
	tpl := load(t)
	routes := templateRoutes(t, tpl)
	files, _ := filepath.Glob(filepath.Join(rootDir(t), "events", "*.json"))
	if len(files) == 0 {
		t.Fatal("no events/*.json")
	}
	covered := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("%s: not JSON: %v", name, err)
			continue
		}
		switch {
		case name == "env.json":
			checkSamLocalEnv(t, tpl, cfn.AsMap(ev["Parameters"]))
		case ev["type"] == "REQUEST":
			rk, _ := ev["routeKey"].(string)
			if _, ok := protectedRoutes[rk]; !ok || ev["version"] != "2.0" {
				t.Errorf("%s: authorizer event for %q (version %v) is not a protected route with payload 2.0", name, rk, ev["version"])
			}
			covered["AuthorizerFunction"] = true
		case ev["detail-type"] == "Scheduled Event":
			covered["RotateKeysFunction"] = true
		default:
			rk, _ := ev["routeKey"].(string)
			fn, ok := routes[rk]
			if !ok || ev["version"] != "2.0" {
				t.Errorf("%s: routeKey %q (version %v) is not a route of the template with payload 2.0", name, rk, ev["version"])
				continue
			}
			method, pattern, _ := strings.Cut(rk, " ")
			if cfn.Path(ev, "requestContext", "http", "method") != method || !routeMatches(pattern, ev["rawPath"].(string)) {
				t.Errorf("%s: method/rawPath do not match its routeKey %s", name, rk)
			}
			covered[fn] = true
		}
	}
	for id := range functionNames {
		if !covered[id] {
			t.Errorf("no sample event in events/ for %s", id)
		}
	}
}

// routeMatches matches an HTTP API route pattern ({x} one segment, {x+} the rest) against a path.
func routeMatches(pattern, p string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(p, "/")
	for i, seg := range ps {
		if strings.HasSuffix(seg, "+}") {
			return len(xs) > i
		}
		if i >= len(xs) {
			return false
		}
		if !(strings.HasPrefix(seg, "{") && xs[i] != "") && seg != xs[i] {
			return false
		}
	}
	return len(ps) == len(xs)
}

// TestIAM_KMSConditionsFollowTheAlgorithms: the rotation may create only the key specs the KMS
// adapter makes (RSA_2048 for RS256 and PS256, ECC_NIST_P256 for ES256), and the token function
// may sign only with the adapter's three signing algorithms; the template's conditions list
// exactly those, so adding an algorithm to the code without the template (or the reverse) fails.
func TestIAM_KMSConditionsFollowTheAlgorithms(t *testing.T) {
	tpl := load(t)
	for _, tc := range []struct {
		fn, action, key string
		want            []string
	}{
		{"RotateKeysFunction", "kms:CreateKey", "kms:KeySpec", kmskey.KeySpecs()},
		{"TokenFunction", "kms:Sign", "kms:SigningAlgorithm", kmskey.SigningAlgorithms()},
		{"AuthorizeFunction", "kms:Sign", "kms:SigningAlgorithm", kmskey.SigningAlgorithms()},
		{"IntrospectFunction", "kms:Sign", "kms:SigningAlgorithm", kmskey.SigningAlgorithms()},
		{"GrantsFunction", "kms:Sign", "kms:SigningAlgorithm", kmskey.SigningAlgorithms()},
	} {
		stmts, err := tpl.Statements(tpl.Resources[tc.fn])
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range stmts {
			if !slices.Contains(s.Actions, tc.action) {
				continue
			}
			found = true
			got := cfn.Strs(cfn.AsMap(s.Condition["StringEquals"])[tc.key])
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: %s = %v, want %v", tc.fn, s.Sid, tc.key, got, tc.want)
			}
		}
		if !found {
			t.Errorf("%s has no statement allowing %s", tc.fn, tc.action)
		}
	}
	if want := []string{"ECC_NIST_P256", "RSA_2048"}; !slices.Equal(kmskey.KeySpecs(), want) {
		t.Errorf("kmskey.KeySpecs() = %v, want %v", kmskey.KeySpecs(), want)
	}
	if want := []string{"ECDSA_SHA_256", "RSASSA_PKCS1_V1_5_SHA_256", "RSASSA_PSS_SHA_256"}; !slices.Equal(kmskey.SigningAlgorithms(), want) {
		t.Errorf("kmskey.SigningAlgorithms() = %v, want %v", kmskey.SigningAlgorithms(), want)
	}
}

// samLocalEndpoints are the variables events/env.json must set for `sam local` to run against
// the emulators instead of AWS (docs/deploy.md section 6): DynamoDB Local through the service's
// own setting, local-kms through the SDK's service endpoint variable.
var samLocalEndpoints = []string{"AUTH_DYNAMODB_ENDPOINT", "AWS_ENDPOINT_URL_KMS"}

// checkSamLocalEnv: sam local only overrides the variables the template declares, so every
// variable events/env.json sets must be declared for every Go function (else it is silently
// ignored), and the file must point the functions at both emulators.
func checkSamLocalEnv(t *testing.T, tpl *cfn.Template, params map[string]any) {
	t.Helper()
	for _, k := range samLocalEndpoints {
		if v, _ := params[k].(string); v == "" {
			t.Errorf("env.json does not set %s: sam local would call AWS", k)
		}
	}
	for id, fn := range tpl.GoFunctions() {
		env := tpl.Env(fn)
		for k := range params {
			if _, ok := env[k]; !ok {
				t.Errorf("env.json sets %s, which the template does not declare for %s (sam local would ignore it)", k, id)
			}
		}
	}
}
