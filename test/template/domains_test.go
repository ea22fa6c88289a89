package template_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/test/template/cfn"
)

const (
	testCert       = "arn:aws:acm:eu-west-1:123456789012:certificate/0d7b0c0e-1111-2222-3333-444455556666"
	testPublicCert = "arn:aws:acm:eu-west-1:123456789012:certificate/9f8e7d6c-1111-2222-3333-444455556666"
)

// domainConfig is one way to set the stack's hosts: which parameters, and either the rule
// that refuses them or the public base URL and connect host the stack must then use.
type domainConfig struct {
	name    string
	params  map[string]string
	refused string // part of the AssertDescription of the rule that refuses it
	base    string // public base URL (AUTH_BASE_URL, the BaseUrl output)
	mtls    string // connect host (AUTH_MTLS_BASE_URL, the ConnectHostUrl output), "" for none
}

// domainConfigs are the domain configurations of docs/deploy.md: none, public only, connect
// only, both; with and without BaseUrl and certificates.
var domainConfigs = []domainConfig{
	{name: "none", params: map[string]string{"BaseUrl": "https://auth.bank.example"}, base: "https://auth.bank.example"},
	{name: "none without BaseUrl", params: map[string]string{}, refused: "Set BaseUrl, or PublicDomainName"},
	{name: "public only", params: map[string]string{"PublicDomainName": "auth.bank.example", "PublicCertificateArn": testPublicCert},
		base: "https://auth.bank.example"},
	{name: "public only on the shared certificate", params: map[string]string{"PublicDomainName": "auth.bank.example", "CertificateArn": testCert},
		base: "https://auth.bank.example"},
	{name: "public only without a certificate", params: map[string]string{"PublicDomainName": "auth.bank.example"},
		refused: "PublicDomainName needs PublicCertificateArn"},
	{name: "connect only", params: map[string]string{"CustomDomainName": "connect.bank.example", "CertificateArn": testCert, "TruststoreUri": "s3://truststore/ca.pem"},
		refused: "CustomDomainName needs PublicDomainName"},
	{name: "connect without a truststore", params: map[string]string{"CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example", "CertificateArn": testCert},
		refused: "CustomDomainName needs TruststoreUri"},
	{name: "both", params: map[string]string{"CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example",
		"CertificateArn": testCert, "TruststoreUri": "s3://truststore/ca.pem"},
		base: "https://auth.bank.example", mtls: "https://connect.bank.example"},
	{name: "both with a public certificate of its own", params: map[string]string{"CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example",
		"CertificateArn": testCert, "PublicCertificateArn": testPublicCert, "TruststoreUri": "s3://truststore/ca.pem"},
		base: "https://auth.bank.example", mtls: "https://connect.bank.example"},
	{name: "both behind BaseUrl", params: map[string]string{"BaseUrl": "https://login.bank.example", "CustomDomainName": "connect.bank.example",
		"PublicDomainName": "auth.bank.example", "CertificateArn": testCert, "TruststoreUri": "s3://truststore/ca.pem"},
		base: "https://login.bank.example", mtls: "https://connect.bank.example"},
}

// urlOutputs are the outputs that advertise an endpoint of the service to its clients.
var urlOutputs = []string{"IssuerUrl", "AuthorizeUrl", "TokenUrl", "RevokeUrl", "LegacyRevokeUrl", "IntrospectUrl",
	"UserinfoUrl", "JwksUrl", "DiscoveryUrl", "AccountsUrl", "InvoicesUrl", "DeprecatedInvoicesQueryUrl"}

// TestDomains_OutputsAndFunctionsAgreeInEveryConfiguration evaluates the template in every
// domain configuration, with and without the Issuer parameter: the stack is refused by a rule
// before it creates anything, or its outputs advertise exactly the base URL and issuer every
// function's configuration uses, on the public host, never on the mutual-TLS connect host.
func TestDomains_OutputsAndFunctionsAgreeInEveryConfiguration(t *testing.T) {
	tpl := load(t)
	for _, dc := range domainConfigs {
		for _, issuer := range []string{"", "https://id.bank.example/oidc"} {
			params := map[string]string{"Issuer": issuer}
			for k, v := range dc.params {
				params[k] = v
			}
			name := dc.name
			if issuer != "" {
				name += ", Issuer set"
			}
			t.Run(name, func(t *testing.T) {
				ev := tpl.NewEvaluator(params)
				if bad := ev.CheckParameters(); len(bad) > 0 {
					t.Fatalf("parameters refused: %v", bad)
				}
				failed, err := ev.FailedRules()
				if err != nil {
					t.Fatal(err)
				}
				if dc.refused != "" {
					if !slices.ContainsFunc(failed, func(d string) bool { return strings.Contains(d, dc.refused) }) {
						t.Fatalf("rules failed %q, want one saying %q", failed, dc.refused)
					}
					return
				}
				if len(failed) > 0 {
					t.Fatalf("rules refuse the stack: %q", failed)
				}
				checkDomainOutputs(t, tpl, ev, dc, issuer)
			})
		}
	}
}

func checkDomainOutputs(t *testing.T, tpl *cfn.Template, ev *cfn.Evaluator, dc domainConfig, issuer string) {
	t.Helper()
	out := func(name string) (string, bool) {
		v, ok, err := ev.Output(name)
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		return v, ok
	}
	wantIssuer := issuer
	if wantIssuer == "" {
		wantIssuer = dc.base + "/v2/authentication/oauth2"
	}
	if got, _ := out("BaseUrl"); got != dc.base {
		t.Errorf("BaseUrl output = %q, want %q", got, dc.base)
	}
	if got, _ := out("IssuerUrl"); got != wantIssuer {
		t.Errorf("IssuerUrl output = %q, want %q", got, wantIssuer)
	}
	for _, name := range urlOutputs {
		got, _ := out(name)
		if name == "IssuerUrl" && issuer != "" {
			continue
		}
		if !strings.HasPrefix(got, dc.base+"/") {
			t.Errorf("%s output = %q, want it on the public base %s", name, got, dc.base)
		}
		if u, err := url.Parse(got); err == nil && dc.mtls != "" && "https://"+u.Host == dc.mtls {
			t.Errorf("%s output = %q is on the mutual-TLS connect host, which browsers cannot use", name, got)
		}
	}
	connect, present := out("ConnectHostUrl")
	if present != (dc.mtls != "") || connect != dc.mtls {
		t.Errorf("ConnectHostUrl output = %q (present %v), want %q", connect, present, dc.mtls)
	}

	// Each function's configuration, as shared/config reads its environment.
	for id := range tpl.GoFunctions() {
		vals := map[string]string{}
		for k, v := range tpl.Env(tpl.Resources[id]) {
			s, err := ev.Eval(v)
			if err != nil {
				t.Fatalf("%s: %s: %v", id, k, err)
			}
			vals[k] = s
		}
		cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := vals[k]; return v, ok })
		if err != nil {
			t.Fatalf("%s: environment refused by shared/config: %v", id, err)
		}
		if cfg.BaseURL != dc.base || cfg.Issuer != wantIssuer || cfg.MTLSBaseURL != dc.mtls {
			t.Errorf("%s: AUTH_BASE_URL %q, issuer %q, AUTH_MTLS_BASE_URL %q; the outputs say %q, %q, %q",
				id, cfg.BaseURL, cfg.Issuer, cfg.MTLSBaseURL, dc.base, wantIssuer, dc.mtls)
		}
	}

	// Every domain the stack creates has a certificate (API Gateway refuses it otherwise, and
	// the stack rolls back).
	for _, dom := range []string{"PublicDomain", "CustomDomain"} {
		r := tpl.Resources[dom]
		if ok, err := ev.Cond(r["Condition"].(string)); err != nil || !ok {
			continue
		}
		for _, c := range cfn.AsSlice(cfn.Path(r, "Properties", "DomainNameConfigurations")) {
			if cert, err := ev.Eval(cfn.AsMap(c)["CertificateArn"]); err != nil || !strings.HasPrefix(cert, "arn:aws:acm:") {
				t.Errorf("%s is created with certificate %q (%v)", dom, cert, err)
			}
		}
	}
}

// TestParameters_IssuerWithATrailingSlashIsRefused: shared/config trims a trailing slash from
// the issuer, so such a value would make the IssuerUrl output differ from the iss the tokens
// carry; the parameter's pattern refuses it.
func TestParameters_IssuerWithATrailingSlashIsRefused(t *testing.T) {
	tpl := load(t)
	for issuer, ok := range map[string]bool{"https://id.bank.example/oidc/": false, "https://id.bank.example/": false,
		"https://id.bank.example": true, "http://id.bank.example": false} {
		bad := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://auth.bank.example", "Issuer": issuer}).CheckParameters()
		if (len(bad) == 0) != ok {
			t.Errorf("Issuer=%q: refused %v, want accepted=%v", issuer, bad, ok)
		}
	}
}

// TestLogs_RetainedWhenTheStackIsDeleted: deleting (or replacing) the stack must not delete a
// bank's audit trail: every log group, the access log among them, is retained.
func TestLogs_RetainedWhenTheStackIsDeleted(t *testing.T) {
	tpl := load(t)
	n := 0
	for id, r := range tpl.Resources {
		if r["Type"] != "AWS::Logs::LogGroup" {
			continue
		}
		n++
		if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
			t.Errorf("%s: DeletionPolicy %v, UpdateReplacePolicy %v, want Retain for both", id, r["DeletionPolicy"], r["UpdateReplacePolicy"])
		}
	}
	if _, ok := tpl.Resources["AccessLogGroup"]; !ok || n < len(tpl.GoFunctions())+1 {
		t.Errorf("%d log groups; want one per function and the access log", n)
	}
}

// timingSetting reports whether an AUTH_* variable is one of the service's durations.
func timingSetting(name string) bool {
	for _, suffix := range []string{"_TTL", "_MAX_AGE", "_PERIOD", "_WINDOW"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// TestTiming_OneSetOfValuesForEveryFunction: the rotation publishes a next key for the JWKS
// max-age plus a margin before it signs, which is only safe if the rotation, the JWKS function
// and the signers use the same durations. Every duration setting comes from Globals, and no
// function overrides one.
func TestTiming_OneSetOfValuesForEveryFunction(t *testing.T) {
	tpl := load(t)
	globals := cfn.AsMap(cfn.Path(tpl.Globals, "Environment", "Variables"))
	var timing []string
	for _, name := range configEnvNames(t) {
		if timingSetting(name) {
			timing = append(timing, name)
		}
	}
	for _, must := range []string{config.EnvJWKSMaxAge, config.EnvRotationPeriod, config.EnvIDTokenTTL, config.EnvKeyCacheTTL} {
		if _, ok := globals[must]; !ok {
			t.Errorf("Globals do not set %s: each function would use its own default", must)
		}
	}
	for id, fn := range tpl.Functions() {
		own := cfn.AsMap(cfn.Path(fn, "Properties", "Environment", "Variables"))
		for _, name := range timing {
			if v, ok := own[name]; ok {
				t.Errorf("%s overrides %s (%v): every function must get the Globals' value", id, name, v)
			}
		}
	}
}

// TestTiming_TemplateRefusesAKeyCacheBeyondThePublicationMargin: the functions' configuration
// refuses at start a KeyCacheTtl under which a key could sign before caches saw it.
func TestTiming_TemplateRefusesAKeyCacheBeyondThePublicationMargin(t *testing.T) {
	tpl := load(t)
	for cache, ok := range map[string]bool{"1m": true, "15m": true, "1h": false} {
		ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://auth.bank.example", "KeyCacheTtl": cache})
		vals := map[string]string{}
		for k, v := range tpl.Env(tpl.Resources["JwksFunction"]) {
			s, err := ev.Eval(v)
			if err != nil {
				t.Fatal(err)
			}
			vals[k] = s
		}
		_, err := config.FromLookup(func(k string) (string, bool) { v, ok := vals[k]; return v, ok })
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), config.EnvKeyCacheTTL)) {
			t.Errorf("KeyCacheTtl=%s: %v, want accepted=%v", cache, err, ok)
		}
	}
}
