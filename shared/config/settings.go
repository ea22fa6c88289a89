package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/keys/keypolicy"
	"github.com/acmebank/authserver/shared/oauth"
)

// Environment variables: the names of the declarations in Settings. Every function reads only
// these, through FromLookup; the SAM template sets them.
const (
	EnvBaseURL              = "AUTH_BASE_URL"
	EnvIssuer               = "AUTH_ISSUER"
	EnvMTLSBaseURL          = "AUTH_MTLS_BASE_URL"
	EnvTable                = "AUTH_TABLE"
	EnvDynamoEndpoint       = "AUTH_DYNAMODB_ENDPOINT"
	EnvStore                = "AUTH_STORE"
	EnvDataDir              = "AUTH_DATA_DIR"
	EnvNoSync               = "AUTH_EMBEDDED_NO_SYNC"
	EnvMaxPendingMB         = "AUTH_EMBEDDED_MAX_PENDING_MB"
	EnvKeyBackend           = "AUTH_KEY_BACKEND"
	EnvKMSDataKey           = "AUTH_KMS_DATA_KEY"
	EnvHomeRegion           = "AUTH_HOME_REGION"
	EnvPeerRegions          = "AUTH_PEER_REGIONS"
	EnvPeerTimeout          = "AUTH_PEER_TIMEOUT"
	EnvKeyRotation          = "AUTH_KEY_ROTATION"
	EnvRequirePAR           = "AUTH_REQUIRE_PAR"
	EnvDPoPNonces           = "AUTH_DPOP_NONCES"
	EnvSCAPolicy            = "AUTH_SCA_POLICY"
	EnvPasskeyRPID          = "AUTH_PASSKEY_RP_ID"
	EnvPaymentFactors       = "AUTH_PAYMENT_FACTORS"
	EnvKMSTagValue          = "AUTH_KMS_KEY_TAG"
	EnvKMSKeySigners        = "AUTH_KMS_KEY_SIGNERS"
	EnvKMSKeyManager        = "AUTH_KMS_KEY_MANAGER"
	EnvKMSKeyAdmins         = "AUTH_KMS_KEY_ADMINS"
	EnvAccessTTL            = "AUTH_ACCESS_TOKEN_TTL"
	EnvPaymentTTL           = "AUTH_PAYMENT_TOKEN_TTL"
	EnvRefreshTTL           = "AUTH_REFRESH_TOKEN_TTL"
	EnvGrantTTL             = "AUTH_GRANT_TTL"
	EnvCodeTTL              = "AUTH_CODE_TTL"
	EnvIDTokenTTL           = "AUTH_ID_TOKEN_TTL"
	EnvSessionTTL           = "AUTH_SESSION_TTL"
	EnvRequestTTL           = "AUTH_REQUEST_TTL"
	EnvClientCacheTTL       = "AUTH_CLIENT_CACHE_TTL"
	EnvKeyCacheTTL          = "AUTH_KEY_CACHE_TTL"
	EnvJWKSMaxAge           = "AUTH_JWKS_MAX_AGE"
	EnvRotationPeriod       = "AUTH_ROTATION_PERIOD"
	EnvIDTokenAlgs          = "AUTH_ID_TOKEN_ALGS"
	EnvLogLevel             = "AUTH_LOG_LEVEL"
	EnvLogFormat            = "AUTH_LOG_FORMAT"
	EnvPasswordTime         = "AUTH_ARGON2_TIME"
	EnvPasswordMemory       = "AUTH_ARGON2_MEMORY_KIB"
	EnvLoginMaxFails        = "AUTH_LOGIN_MAX_FAILURES"
	EnvLoginFailWindow      = "AUTH_LOGIN_FAILURE_WINDOW"
	EnvPasswordConcurrency  = "AUTH_PASSWORD_CONCURRENCY"
	EnvAuditLog             = "AUTH_AUDIT_LOG"
	EnvMetricsEnvironment   = "AUTH_METRICS_ENVIRONMENT"
	EnvRateLimit            = "AUTH_RATE_LIMIT"
	EnvRouteScopes          = "AUTH_ROUTE_SCOPES"
	EnvClientTokenRoutes    = "AUTH_CLIENT_TOKEN_ROUTES"
	EnvIntrospectionClients = "AUTH_INTROSPECTION_CLIENTS"
	EnvJWKSURIAllowPrivate  = "AUTH_JWKS_URI_ALLOW_PRIVATE"
	// Dynamic client registration (RFC 7591, RFC 7592).
	EnvRegistration            = "AUTH_REGISTRATION"
	EnvRegistrationDirectories = "AUTH_REGISTRATION_DIRECTORIES"
	// CIBA's AWS device adapters (issue 31): the bus the requests are published on and the
	// app backend whose signed decisions the callback accepts.
	EnvCIBAEventBus  = "AUTH_CIBA_EVENT_BUS"
	EnvCIBAAppIssuer = "AUTH_CIBA_APP_ISSUER"
	EnvCIBAAppJWKS   = "AUTH_CIBA_APP_JWKS"
	// The local server's own settings (cmd/authserver), each also a flag.
	EnvAddr              = "AUTH_ADDR"
	EnvSeed              = "AUTH_SEED"
	EnvTLSCert           = "AUTH_TLS_CERT"
	EnvTLSKey            = "AUTH_TLS_KEY"
	EnvClientCA          = "AUTH_CLIENT_CA"
	EnvAPIUpstream       = "AUTH_API_UPSTREAM"
	EnvDeprecationDate   = "AUTH_DEPRECATION_DATE"
	EnvDeprecationSunset = "AUTH_DEPRECATION_SUNSET"
)

// EveryFunction in Setting.RequiredIn: every Lambda function must get the setting from the
// template.
const EveryFunction = "*"

// Setting declares one setting: the one place its name, default, documentation and parsing
// live. FromLookup parses with it, the README's table (Markdown) and authserver --help (Usage)
// are printed from it, and the template test checks the template against it.
type Setting struct {
	// Name is the environment variable.
	Name string
	// Flag is the local server's flag for the setting ("" none): authserver --flag overrides
	// the variable.
	Flag string
	// Default is the value applied when the variable is unset or empty, parsed like one that
	// is set ("" none).
	Default string
	// DefaultDoc documents a default that is derived rather than a value (the issuer's from
	// the base URL); when set, the docs show it instead of Default.
	DefaultDoc string
	// Doc says in one line what the setting does (Markdown: the README shows it as is).
	Doc string
	// LocalServer marks the settings only the local server reads (cmd/authserver): the Lambda
	// functions ignore them.
	LocalServer bool
	// RequiredIn names the Lambda functions (their directories under functions/, or
	// EveryFunction) that must be given the setting by the template: what a deployment must
	// not leave to the local default.
	RequiredIn []string
	// parse checks v and stores it in c; its error says what is wanted, FromLookup adds the
	// name and value.
	parse func(c *Config, v string) error
}

// Settings are the declarations of every setting, in the order the docs list them.
func Settings() []Setting { return settings }

var settings = []Setting{
	{Name: EnvBaseURL, Flag: "base-url", Default: "http://127.0.0.1:8080", DefaultDoc: "`http://{addr}`", RequiredIn: all,
		Doc: "public base URL; https turns on Secure, `__Host-` cookies", parse: text(func(c *Config) *string { return &c.BaseURL })},
	{Name: EnvIssuer, DefaultDoc: "`{base}/v2/authentication/oauth2`", RequiredIn: all,
		Doc: "the `iss` of id_tokens and discovery", parse: text(func(c *Config) *string { return &c.Issuer })},
	{Name: EnvMTLSBaseURL, RequiredIn: all,
		Doc: "the mutual-TLS connect host, announced as `mtls_endpoint_aliases` (RFC 8705)", parse: text(func(c *Config) *string { return &c.MTLSBaseURL })},
	{Name: EnvAddr, Flag: "addr", Default: "127.0.0.1:8080", LocalServer: true,
		Doc: "local server's listen address", parse: text(func(c *Config) *string { return &c.Addr })},
	{Name: EnvDataDir, Flag: "data", Default: "data",
		Doc: "data directory: embedded store file and local keys", parse: text(func(c *Config) *string { return &c.DataDir })},
	{Name: EnvSeed, Flag: "seed", LocalServer: true,
		Doc: "seed file of clients and users, loaded idempotently at start", parse: text(func(c *Config) *string { return &c.Seed })},
	{Name: EnvStore, Default: "embedded", RequiredIn: all,
		Doc: "`embedded` (a bbolt file, `auth.db`, under the data directory) or `dynamodb`", parse: oneOf(func(c *Config) *string { return &c.Store }, "embedded", "dynamodb")},
	{Name: EnvTable, RequiredIn: all,
		Doc: "DynamoDB table (`AUTH_STORE=dynamodb`)", parse: text(func(c *Config) *string { return &c.Table })},
	{Name: EnvDynamoEndpoint, RequiredIn: all,
		Doc: "DynamoDB endpoint, e.g. DynamoDB Local's", parse: text(func(c *Config) *string { return &c.DynamoEndpoint })},
	{Name: EnvKeyBackend, Default: "local", RequiredIn: all,
		Doc:   "`local` (PEM files), `kms` (one KMS Sign per id_token) or `kms-data-key` (KMS data key pairs, signed in memory: docs/keys.md)",
		parse: oneOf(func(c *Config) *string { return &c.KeyBackend }, "local", "kms", "kms-data-key")},
	{Name: EnvKMSTagValue, RequiredIn: all,
		Doc: "the tag value marking our KMS keys", parse: text(func(c *Config) *string { return &c.KMSTagValue })},
	{Name: EnvKMSKeySigners, RequiredIn: []string{"rotatekeys"},
		Doc: "kms-sign: the IAM role ARNs (comma-separated) the key policy of every signing key the rotation creates lets sign: the token function's; set together with `AUTH_KMS_KEY_MANAGER`, unset keys get KMS's default policy ([docs/keys.md](docs/keys.md), \"Key policies\")", parse: arns(func(c *Config) *[]string { return &c.KMSKeySigners })},
	{Name: EnvKMSKeyManager, RequiredIn: []string{"rotatekeys"},
		Doc: "kms-sign: the rotation's own IAM role ARN, which the key policy lets read the public key, name and delete the key, and nothing else", parse: text(func(c *Config) *string { return &c.KMSKeyManager })},
	{Name: EnvKMSKeyAdmins, RequiredIn: []string{"rotatekeys"},
		Doc: "kms-sign: the IAM role ARNs (comma-separated) that administer the signing keys without using them; unset, the account's IAM policies do", parse: arns(func(c *Config) *[]string { return &c.KMSKeyAdmins })},
	{Name: EnvKMSDataKey, RequiredIn: all,
		Doc: "the symmetric KMS key that wraps the signing keys (`kms-data-key`) and the DPoP nonce keys (`AUTH_DPOP_NONCES=on` with DynamoDB)", parse: text(func(c *Config) *string { return &c.KMSDataKey })},
	{Name: EnvHomeRegion, RequiredIn: all,
		Doc: "multi-region: this region, the home of the codes and tokens it issues ([docs/multiregion.md](docs/multiregion.md))", parse: text(func(c *Config) *string { return &c.HomeRegion })},
	{Name: EnvPeerRegions, RequiredIn: all,
		Doc: "multi-region: the other regions, comma-separated, whose codes and tokens are consumed at their home", parse: regions},
	{Name: EnvPeerTimeout, Default: "2s",
		Doc: "multi-region: the deadline of each call to another region's replica, retries included; past it the request answers `temporarily_unavailable`", parse: duration(func(c *Config) *time.Duration { return &c.PeerTimeout })},
	{Name: EnvKeyRotation, Default: "on", RequiredIn: []string{"rotatekeys"},
		Doc: "`off` in the regions that do not rotate keys (a multi-region deployment's secondary)", parse: onOff(func(c *Config) *bool { return &c.KeyRotation })},
	{Name: EnvRequirePAR, Default: "false",
		Doc: "`true`: every client must push its authorization requests (RFC 9126, docs/api.md)", parse: boolean(func(c *Config) *bool { return &c.RequirePAR })},
	{Name: EnvJWKSURIAllowPrivate, Default: "false",
		Doc:   "`true` for tests only: a client's `jwks_uri` and `backchannel_logout_uri` may resolve to a private, loopback or link-local address; otherwise the fetch or the logout token's delivery refuses such an address when it dials it (docs/api.md)",
		parse: boolean(func(c *Config) *bool { return &c.JWKSURIAllowPrivate })},
	{Name: EnvSCAPolicy, Default: "payments",
		Doc:   "when a sign-in needs strong customer authentication: `payments` (the transfers scope, or `acr_values` asking for it), `always`, or a duration such as `180d` (payments, and any sign-in whose last strong one is older)",
		parse: scaPolicy},
	{Name: EnvPaymentFactors, Default: "passkey",
		Doc:   "the factors that may authorize a payment (dynamic linking, docs/SECURITY.md): `passkey` (its assertion is bound to the amount and payee), `totp`, or `passkey,totp`",
		parse: paymentFactors},
	{Name: EnvPasskeyRPID, DefaultDoc: "the base URL's host",
		Doc: "the WebAuthn relying party ID (a registrable domain the pages' host belongs to)", parse: text(func(c *Config) *string { return &c.PasskeyRPID })},
	{Name: EnvDPoPNonces, Default: "off", RequiredIn: []string{"token", "par", "rotatekeys"},
		Doc:   "`on`: DPoP proofs at the token and PAR endpoints must carry the server's nonce (RFC 9449 8, docs/api.md); the nonce keys are read from the store at start, wrapped by `AUTH_KMS_DATA_KEY` with DynamoDB (the rotation makes them), never from the environment (docs/keys.md)",
		parse: onOff(func(c *Config) *bool { return &c.DPoPNonces })},
	{Name: EnvAccessTTL, Default: "1h", RequiredIn: all, Doc: "access token lifetime", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.AccessToken })},
	{Name: EnvPaymentTTL, Default: "5m", Doc: "access token lifetime of a payment grant (one-time, no refresh token; 1m to 15m, docs/api.md)",
		parse: durationWithin(oauth.MinPaymentTokenTTL, oauth.MaxPaymentTokenTTL, func(c *Config) *time.Duration { return &c.Lifetimes.PaymentAccessToken })},
	{Name: EnvRefreshTTL, Default: "30d", RequiredIn: all, Doc: "refresh token lifetime (capped by the grant's)", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.RefreshToken })},
	{Name: EnvGrantTTL, Default: "90d", RequiredIn: all, Doc: "absolute grant lifetime", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.Grant })},
	{Name: EnvCodeTTL, Default: "2m", RequiredIn: all, Doc: "authorization code lifetime", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.Code })},
	{Name: EnvIDTokenTTL, Default: "1h", RequiredIn: all, Doc: "id_token lifetime", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.IDToken })},
	{Name: EnvSessionTTL, Default: "8h", Doc: "sign-in session on our pages", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.Session })},
	{Name: EnvRequestTTL, Default: "15m", Doc: "a pending authorization request", parse: duration(func(c *Config) *time.Duration { return &c.Lifetimes.Request })},
	{Name: EnvClientCacheTTL, Default: "30s", Doc: "how long a function keeps a client in memory", parse: duration(func(c *Config) *time.Duration { return &c.ClientCacheTTL })},
	{Name: EnvKeyCacheTTL, Default: "1m", RequiredIn: all,
		Doc: "how long signers and the JWKS keep the key registry; refused above the key publication margin (15m, docs/keys.md)", parse: duration(func(c *Config) *time.Duration { return &c.KeyCacheTTL })},
	{Name: EnvJWKSMaxAge, Default: "1h", RequiredIn: all, Doc: "JWKS `Cache-Control: max-age`", parse: duration(func(c *Config) *time.Duration { return &c.JWKSMaxAge })},
	{Name: EnvRotationPeriod, Default: "30d", RequiredIn: all, Doc: "signing key rotation period", parse: duration(func(c *Config) *time.Duration { return &c.RotationPeriod })},
	{Name: EnvIDTokenAlgs, Default: strings.Join(keypolicy.Algs, ","), RequiredIn: all,
		Doc: "id_token algorithms the key rotation keeps keys for; discovery lists them and a client registers one (`--id-token-alg`, docs/keys.md)", parse: list(func(c *Config) *[]string { return &c.IDTokenAlgs })},
	{Name: EnvPasswordTime, Default: "2", Doc: "argon2id time cost of new password hashes", parse: positiveUint32(func(c *Config) *uint32 { return &c.Argon2Time })},
	{Name: EnvPasswordMemory, Default: "19456", Doc: "argon2id memory cost of new password hashes, in KiB", parse: positiveUint32(func(c *Config) *uint32 { return &c.Argon2MemoryKiB })},
	{Name: EnvLoginMaxFails, Default: "5", Doc: "login lockout per username: failures allowed in the window (4x per IP)", parse: positive(func(c *Config) *int { return &c.LoginMaxFailures })},
	{Name: EnvLoginFailWindow, Default: "15m", Doc: "login lockout per username: the window the failures are counted in", parse: duration(func(c *Config) *time.Duration { return &c.LoginFailWindow })},
	{Name: EnvPasswordConcurrency, DefaultDoc: "one per CPU, within half the memory limit",
		Doc:   "password checks (argon2id, ~19 MiB each) run at once per process; a login that waits 2 s for one is answered busy (503, `Retry-After`)",
		parse: positive(func(c *Config) *int { return &c.PasswordConcurrency })},
	{Name: EnvAuditLog, DefaultDoc: "`stdout`",
		Doc:   "where the audit records go, whatever `AUTH_LOG_LEVEL`: `stdout`, `stderr` or a file (appended); `authctl` writes to stderr unless it names a file",
		parse: text(func(c *Config) *string { return &c.AuditLog })},
	{Name: EnvMetricsEnvironment, RequiredIn: all,
		Doc:   "Lambda: the `Environment` dimension of the CloudWatch embedded-metric-format lines the functions write to stdout (docs/operations.md); empty writes none (the local server)",
		parse: text(func(c *Config) *string { return &c.MetricsEnvironment })},
	{Name: EnvLogLevel, Default: "info", RequiredIn: all, Doc: "slog level: `debug`, `info`, `warn` or `error`", parse: text(func(c *Config) *string { return &c.LogLevel })},
	{Name: EnvLogFormat, Default: "json", RequiredIn: all, Doc: "slog format: `json` or `text`", parse: text(func(c *Config) *string { return &c.LogFormat })},
	{Name: EnvRateLimit, Default: "true",
		Doc:   "local server only: per-address rate limits on the authorization, login and token endpoints, userinfo and the bank API routes (429 + `Retry-After`); `false` for load benchmarks. In AWS, API Gateway throttles (docs/deploy.md)",
		parse: boolean(func(c *Config) *bool { return &c.RateLimit })},
	{Name: EnvRouteScopes, DefaultDoc: "see [api.md](docs/api.md)", RequiredIn: []string{"authorizer"},
		Doc: "JSON overrides of the bank API's route → scope table, e.g. `{\"GET /v2/bank/accounts\":[\"openid\"]}`", parse: routeScopes},
	{Name: EnvClientTokenRoutes, RequiredIn: []string{"authorizer"},
		Doc:   "bank API route keys (comma-separated, each in the route → scope table) that also accept client-only tokens (client_credentials); other routes refuse them (403 `insufficient_scope`)",
		parse: list(func(c *Config) *[]string { return &c.ClientTokenRoutes })},
	{Name: EnvIntrospectionClients, RequiredIn: []string{"introspect"},
		Doc: "client ids (comma-separated) of resource servers that may introspect any access token; other clients introspect only their own", parse: introspectionClients},
	{Name: EnvRegistration, Default: "off", RequiredIn: []string{"register", "jwks"},
		Doc:   "`on` serves dynamic client registration (RFC 7591, RFC 7592) and announces `registration_endpoint`; a registration needs an initial access token (`authctl registration token create`) or a software statement of a trusted directory, never open ([docs/api.md](docs/api.md#dynamic-client-registration))",
		parse: onOff(func(c *Config) *bool { return &c.Registration })},
	{Name: EnvRegistrationDirectories, Default: "[]", RequiredIn: []string{"register"},
		Doc:   "JSON array of the directories whose software statements registration trusts: `[{\"issuer\":\"https://directory.example\",\"jwks_uri\":\"https://directory.example/jwks\",\"profile\":\"fapi2\"}]` (`jwks` inline instead of `jwks_uri`; `profile` optional)",
		parse: registrationDirectories},
	{Name: EnvCIBAEventBus, RequiredIn: []string{"backchannel"},
		Doc:   "CIBA: the EventBridge bus (name or ARN) the backchannel authentication requests are published on for the bank's app backend ([docs/api.md](docs/api.md#the-banks-app-backend-the-contract)); the template passes its own bus",
		parse: text(func(c *Config) *string { return &c.CIBAEventBus })},
	{Name: EnvCIBAAppIssuer, RequiredIn: []string{"bcdecision"},
		Doc:   "CIBA: the bank's app backend's id, the `iss` of its decision tokens; with `AUTH_CIBA_APP_JWKS` the decision callback is served",
		parse: text(func(c *Config) *string { return &c.CIBAAppIssuer })},
	{Name: EnvCIBAAppJWKS, RequiredIn: []string{"bcdecision"},
		Doc:   "CIBA: the app backend's public keys, an inline JWK Set (PS256 RSA of 2048 bits or more, or ES256 P-256; each with its `kid`) its decision tokens are verified with",
		parse: cibaAppJWKS},
	{Name: EnvTLSCert, Flag: "tls-cert", LocalServer: true, Doc: "PEM certificate: the local server serves HTTPS (needs `AUTH_TLS_KEY`)", parse: text(func(c *Config) *string { return &c.TLSCert })},
	{Name: EnvTLSKey, Flag: "tls-key", LocalServer: true, Doc: "PEM private key of `AUTH_TLS_CERT`", parse: text(func(c *Config) *string { return &c.TLSKey })},
	{Name: EnvClientCA, Flag: "client-ca", LocalServer: true,
		Doc: "PEM CAs of accepted client certificates: the local server asks for them (mutual TLS, certificate-bound tokens)", parse: text(func(c *Config) *string { return &c.ClientCA })},
	{Name: EnvAPIUpstream, Flag: "api-upstream", LocalServer: true,
		Doc: "where the local server proxies the bank API routes (none: it answers the identity as JSON)", parse: text(func(c *Config) *string { return &c.APIUpstream })},
	{Name: EnvDeprecationDate, Flag: "deprecation", LocalServer: true, DefaultDoc: "`@1767225600` (2026-01-01)",
		Doc: "`Deprecation` of the deprecated invoice routes (RFC 9745: `@` and epoch seconds, sent as is)", parse: text(func(c *Config) *string { return &c.DeprecationDate })},
	{Name: EnvDeprecationSunset, Flag: "sunset", LocalServer: true,
		Doc: "`Sunset` of the deprecated invoice routes (RFC 8594, an HTTP-date); none sends no header", parse: text(func(c *Config) *string { return &c.DeprecationSunset })},
	{Name: EnvNoSync, Default: "false", Doc: "skip the embedded store's fsync (benchmarks and throwaway data only)", parse: boolean(func(c *Config) *bool { return &c.NoSync })},
	{Name: EnvMaxPendingMB, Default: "64",
		Doc:   "the embedded store keeps at most this many MiB of pending authorization requests; beyond it new ones are answered 503 with `Retry-After` (docs/api.md)",
		parse: positive(func(c *Config) *int { return &c.PendingMB })},
}

var all = []string{EveryFunction}

// The parsers of the declarations, one per type. Each returns what is wanted on a bad value.

func text(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func oneOf(field func(*Config) *string, allowed ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		for _, a := range allowed {
			if v == a {
				*field(c) = v
				return nil
			}
		}
		if len(allowed) == 2 {
			return fmt.Errorf("want %s or %s", allowed[0], allowed[1])
		}
		return fmt.Errorf("want %s or %s", strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])
	}
}

func duration(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration like 15m, 1h or 30d")
		}
		*field(c) = d
		return nil
	}
}

// durationWithin is duration bounded to [lo, hi].
func durationWithin(lo, hi time.Duration, field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil || d < lo || d > hi {
			return fmt.Errorf("want a duration from %s to %s, like 5m", lo, hi)
		}
		*field(c) = d
		return nil
	}
}

func positive(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive integer")
		}
		*field(c) = n
		return nil
	}
}

func positiveUint32(field func(*Config) *uint32) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("want a positive integer")
		}
		*field(c) = uint32(n)
		return nil
	}
}

func boolean(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*field(c) = b
		return nil
	}
}

func onOff(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch v {
		case "on":
			*field(c) = true
		case "off":
			*field(c) = false
		default:
			return fmt.Errorf("want on or off")
		}
		return nil
	}
}

// list splits a comma-separated value, trimmed, leaving out empty entries.
func list(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*field(c) = out
		return nil
	}
}

// arns splits a comma-separated list of IAM ARNs; each must start with arn:.
func arns(field func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		*field(c) = nil
		if v = strings.TrimSpace(v); v == "" {
			return nil
		}
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); !strings.HasPrefix(a, "arn:") {
				return fmt.Errorf("want IAM ARNs separated by commas, got %q", a)
			}
			*field(c) = append(*field(c), strings.TrimSpace(a))
		}
		return nil
	}
}

// regions splits AUTH_PEER_REGIONS, keeping an empty entry for validRegions to refuse.
func regions(c *Config, v string) error {
	c.PeerRegions = nil
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	for _, r := range strings.Split(v, ",") {
		c.PeerRegions = append(c.PeerRegions, strings.TrimSpace(r))
	}
	return nil
}

func scaPolicy(c *Config, v string) error {
	p, err := oauth.ParseSCAPolicy(v, parseDuration)
	if err != nil {
		return err
	}
	c.SCA = p
	return nil
}

func paymentFactors(c *Config, v string) error {
	f, err := oauth.ParsePaymentFactors(v)
	if err != nil {
		return err
	}
	c.PaymentFactors = f
	return nil
}

// routeScopes lays the overrides over the default route table (authorizer.ParseRoutes, the one
// function that reads them), so a bad table fails the load of every function, not only the
// authorizer's first request.
func routeScopes(c *Config, v string) error {
	routes, err := authorizer.ParseRoutes(v)
	if err != nil {
		return err
	}
	c.RouteScopes = routes
	return nil
}

func introspectionClients(c *Config, v string) error {
	var ids []string
	if err := list(func(*Config) *[]string { return &ids })(c, v); err != nil {
		return err
	}
	c.IntrospectionClients = map[string]bool{}
	for _, id := range ids {
		c.IntrospectionClients[id] = true
	}
	return nil
}

// defaultDoc is the default as the docs show it.
func (s Setting) defaultDoc() string {
	switch {
	case s.DefaultDoc != "":
		return s.DefaultDoc
	case s.Default != "":
		return "`" + s.Default + "`"
	}
	return ""
}

// Markdown writes the settings table of README.md ("Configuration"): one row per declaration.
func Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, s := range settings {
		name := "`" + s.Name + "`"
		if s.Flag != "" {
			name += " (`--" + s.Flag + "`)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, s.defaultDoc(), s.Doc)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Usage writes every setting for a terminal (authserver --help): name, default, doc.
func Usage(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Settings (environment variables; a flag above overrides its variable):\n")
	for _, s := range settings {
		def := strings.ReplaceAll(s.defaultDoc(), "`", "")
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(&b, "  %s (default %s)\n    \t%s\n", s.Name, def, strings.ReplaceAll(s.Doc, "`", ""))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
