// Package config reads the service's settings from the environment, the one source every
// function and the local server share. Every setting is declared once, in Settings (settings.go):
// its name, flag, default, one-line doc and parser. FromLookup parses by the declarations, and
// the README's table (Markdown, `go run ./cmd/authserver --print-settings-markdown`) and
// `authserver --help` (Usage) are printed from them; tests hold the README and the template to
// them.
//
// Dependencies go one way: config imports the leaf shared/keys/keypolicy (the algorithms and
// the key-timing rule, to refuse a bad combination at load) and never shared/keys; the key
// packages (keys, keys/backend) may import config.
package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/keys/keypolicy"
	"github.com/acmebank/authserver/shared/oauth"
)

// Config is the service's settings.
type Config struct {
	BaseURL string
	Issuer  string
	// MTLSBaseURL is the connect host, where clients present certificates (RFC 8705 5).
	MTLSBaseURL    string
	Store          string
	Table          string
	DynamoEndpoint string
	DataDir        string
	// NoSync skips the embedded store's fsync (benchmarks and throwaway data only).
	NoSync      bool
	KeyBackend  string
	KMSTagValue string
	// KMSKeySigners, KMSKeyManager and KMSKeyAdmins name the principals of the key policy of
	// every signing key the rotation creates (kmskey.KeyPolicy); unset, KMS's default policy.
	KMSKeySigners []string
	KMSKeyManager string
	KMSKeyAdmins  []string
	// KMSDataKey is the symmetric KMS key (ID, ARN or alias) that wraps the signing keys when
	// KeyBackend is kms-data-key (docs/keys.md, "Signing past the KMS Sign quota").
	KMSDataKey string
	// HomeRegion and PeerRegions make a multi-region deployment (docs/multiregion.md): codes and
	// tokens issued here carry HomeRegion, and those of the peers are consumed at their home.
	HomeRegion  string
	PeerRegions []string
	// PeerTimeout bounds each call to another region's replica (regional.Store.PeerTimeout).
	PeerTimeout time.Duration
	// KeyRotation is false in the regions of a multi-region deployment that do not run the
	// key rotation: the registry has one writer (docs/multiregion.md).
	KeyRotation bool
	// RequirePAR makes every client push its authorization requests (RFC 9126).
	RequirePAR bool
	// JWKSURIAllowPrivate lets a client's jwks_uri resolve to a non-public address (tests only;
	// shared/jwksuri).
	JWKSURIAllowPrivate bool
	// DPoPNonces turns on server-provided DPoP nonces (RFC 9449 8) at the token and PAR
	// endpoints. Their keys live in the store, wrapped (oauth.NonceKeyring): never in the
	// environment.
	DPoPNonces bool
	// SCA says when a sign-in must be strong customer authentication (AUTH_SCA_POLICY).
	SCA oauth.SCAPolicy
	// PaymentFactors are the factors that may authorize a payment (AUTH_PAYMENT_FACTORS).
	PaymentFactors []string
	// PasskeyRPID is the WebAuthn relying party ID ("" is the base URL's host).
	PasskeyRPID    string
	Lifetimes      Lifetimes
	ClientCacheTTL time.Duration
	KeyCacheTTL    time.Duration
	JWKSMaxAge     time.Duration
	RotationPeriod time.Duration
	LogLevel       string
	LogFormat      string
	// Argon2Time and Argon2MemoryKiB set the cost of new password hashes (argon2id).
	Argon2Time       uint32
	Argon2MemoryKiB  uint32
	LoginMaxFailures int
	LoginFailWindow  time.Duration
	// PasswordConcurrency bounds concurrent password checks; 0 sizes it from CPUs and memory.
	PasswordConcurrency int
	// AuditLog is the audit sink: "stdout" (default), "stderr" or a file path.
	AuditLog string
	// MetricsEnvironment is the Environment dimension of the functions' EMF metrics (shared/metrics);
	// empty: no metrics.
	MetricsEnvironment string
	// RateLimit puts per-address rate limits in front of the local server (default true).
	RateLimit bool
	// IDTokenAlgs are the id_token algorithms with signing keys (AUTH_ID_TOKEN_ALGS).
	IDTokenAlgs []string
	// RouteScopes is the bank API's route → scope table: the default one with the overrides of
	// AUTH_ROUTE_SCOPES laid over it.
	RouteScopes authorizer.Routes
	// IntrospectionClients are the client ids of the resource servers that may introspect every
	// access token (AUTH_INTROSPECTION_CLIENTS); other clients introspect only their own.
	IntrospectionClients map[string]bool
	// Registration turns on dynamic client registration (AUTH_REGISTRATION): the registration
	// endpoint, and registration_endpoint in discovery.
	Registration bool
	// RegistrationDirectories are the software statement issuers registration trusts
	// (AUTH_REGISTRATION_DIRECTORIES).
	RegistrationDirectories []Directory
	// CIBAEventBus is the EventBridge bus CIBA requests are published on (AUTH_CIBA_EVENT_BUS);
	// CIBAAppIssuer and CIBAAppJWKS the app backend whose decision tokens the callback accepts
	// (AUTH_CIBA_APP_ISSUER, AUTH_CIBA_APP_JWKS: both or neither).
	CIBAEventBus  string
	CIBAAppIssuer string
	CIBAAppJWKS   string
	// ClientTokenRoutes are the bank API route keys that accept client-only tokens
	// (AUTH_CLIENT_TOKEN_ROUTES), as given; ClientRoutes is the set, checked against
	// RouteScopes when the configuration loads.
	ClientTokenRoutes []string
	ClientRoutes      authorizer.ClientRoutes
	// The local server's own settings (cmd/authserver; the Lambda functions ignore them): its
	// listen address, seed file, TLS and mutual TLS files, and the bank API routes' upstream
	// and deprecation headers (checked where they are used, shared/app).
	Addr, Seed, TLSCert, TLSKey, ClientCA           string
	APIUpstream, DeprecationDate, DeprecationSunset string
	// PendingMB caps the bytes of pending authorization requests the embedded store keeps, in
	// MiB (AUTH_EMBEDDED_MAX_PENDING_MB): beyond it new requests are refused
	// (temporarily_unavailable, 503).
	PendingMB int
}

// Lifetimes of what the service issues.
type Lifetimes = oauth.Lifetimes

// Defaults are the declared defaults (Settings), as FromLookup applies them to an empty
// environment, before validation.
func Defaults() Config {
	c := Config{KeyRotation: true, RateLimit: true}
	for _, s := range settings {
		if s.Default != "" {
			_ = s.parse(&c, s.Default) // every declared default parses: TestSettings_EveryDeclaredDefaultParses
		}
	}
	if c.RouteScopes == nil {
		c.RouteScopes = authorizer.DefaultRoutes()
	}
	if c.IntrospectionClients == nil {
		c.IntrospectionClients = map[string]bool{}
	}
	return c
}

// FromEnv returns Defaults overridden by the environment. It reads nothing else and does no I/O.
func FromEnv() (Config, error) { return FromLookup(os.LookupEnv) }

// FromLookup is FromEnv over any lookup function (tests, flags layered over the environment).
// It asks lookup for each declared setting, and only for those; an unset or empty variable
// keeps its default.
func FromLookup(lookup func(string) (string, bool)) (Config, error) {
	c := Defaults()
	var errs []string
	for _, s := range settings {
		v, ok := lookup(s.Name)
		if !ok || v == "" {
			continue
		}
		if err := s.parse(&c, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", s.Name, v, err))
		}
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, c.finish()
}

// Origins are the public origins the endpoints are served under: the base URL and, when set,
// the mutual-TLS connect host (what a DPoP proof's htu may name).
func (c Config) Origins() []string {
	if c.MTLSBaseURL == "" {
		return []string{c.BaseURL}
	}
	return []string{c.BaseURL, c.MTLSBaseURL}
}

// finish derives the issuer and checks what must hold together.
func (c *Config) finish() error {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if !strings.HasPrefix(c.BaseURL, "https://") && !strings.HasPrefix(c.BaseURL, "http://") {
		return fmt.Errorf("configuration: %s=%q must be an absolute http(s) URL", EnvBaseURL, c.BaseURL)
	}
	if c.Issuer == "" {
		c.Issuer = c.BaseURL + "/v2/authentication/oauth2"
	}
	c.Issuer = strings.TrimRight(c.Issuer, "/")
	c.MTLSBaseURL = strings.TrimRight(c.MTLSBaseURL, "/")
	if c.MTLSBaseURL != "" && !strings.HasPrefix(c.MTLSBaseURL, "https://") {
		return fmt.Errorf("configuration: %s=%q must be an https URL", EnvMTLSBaseURL, c.MTLSBaseURL)
	}
	if c.Store == "dynamodb" && c.Table == "" {
		return fmt.Errorf("configuration: %s=dynamodb needs %s", EnvStore, EnvTable)
	}
	if c.KeyBackend == "kms-data-key" && c.KMSDataKey == "" {
		return fmt.Errorf("configuration: %s=kms-data-key needs %s (the symmetric KMS key that wraps the signing keys)", EnvKeyBackend, EnvKMSDataKey)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") || (c.ClientCA != "" && c.TLSCert == "") {
		return fmt.Errorf("configuration: %s and %s (--tls-cert, --tls-key) go together, and %s (--client-ca) needs them", EnvTLSCert, EnvTLSKey, EnvClientCA)
	}
	if err := c.validRegions(); err != nil {
		return err
	}
	if (c.CIBAAppIssuer == "") != (c.CIBAAppJWKS == "") {
		return fmt.Errorf("configuration: %s and %s go together (the app backend and its keys)", EnvCIBAAppIssuer, EnvCIBAAppJWKS)
	}
	routes, err := authorizer.ParseClientRoutes(strings.Join(c.ClientTokenRoutes, ","), c.RouteScopes)
	if err != nil {
		return fmt.Errorf("configuration: %s: %w", EnvClientTokenRoutes, err)
	}
	c.ClientRoutes = routes
	if (len(c.KMSKeySigners) == 0) != (c.KMSKeyManager == "") || (len(c.KMSKeyAdmins) > 0 && c.KMSKeyManager == "") {
		return fmt.Errorf("configuration: %s and %s go together (the signing keys' policy), and %s needs them", EnvKMSKeySigners, EnvKMSKeyManager, EnvKMSKeyAdmins)
	}
	if c.KMSKeyManager != "" && !strings.HasPrefix(c.KMSKeyManager, "arn:") {
		return fmt.Errorf("configuration: %s=%q is not an IAM ARN", EnvKMSKeyManager, c.KMSKeyManager)
	}
	if c.DPoPNonces && c.Store == "dynamodb" && c.KMSDataKey == "" {
		return fmt.Errorf("configuration: %s=on with %s=dynamodb needs %s (the symmetric KMS key that wraps the nonce keys)", EnvDPoPNonces, EnvStore, EnvKMSDataKey)
	}
	if c.Lifetimes.RefreshToken > c.Lifetimes.Grant {
		c.Lifetimes.RefreshToken = c.Lifetimes.Grant
	}
	if len(c.IDTokenAlgs) == 0 {
		return fmt.Errorf("configuration: %s lists no algorithm: want some of %s", EnvIDTokenAlgs, strings.Join(keypolicy.Algs, ","))
	}
	for i, alg := range c.IDTokenAlgs {
		if !keypolicy.Supported(alg) {
			return fmt.Errorf("configuration: %s: unsupported algorithm %q: want some of %s", EnvIDTokenAlgs, alg, strings.Join(keypolicy.Algs, ","))
		}
		if slices.Contains(c.IDTokenAlgs[:i], alg) {
			return fmt.Errorf("configuration: %s lists %s twice", EnvIDTokenAlgs, alg)
		}
	}
	if err := c.KeyPolicy().Validate(); err != nil {
		if errors.Is(err, keypolicy.ErrUnpublishedSigner) {
			return fmt.Errorf("configuration: %s=%v is longer than the key publication margin %v: the JWKS endpoint could serve a key set without the next key so late that a verifier caching it for %s=%v still holds it when that key signs; lower %s: %w",
				EnvKeyCacheTTL, c.KeyCacheTTL, keypolicy.DefaultMargin, EnvJWKSMaxAge, c.JWKSMaxAge, EnvKeyCacheTTL, err)
		}
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// KeyPolicy is the key rotation's timing under these settings (docs/keys.md): the rotation
// and the functions that serve or sign with keys must all use the same values.
func (c Config) KeyPolicy() keypolicy.Policy {
	return keypolicy.Policy{RotationPeriod: c.RotationPeriod, JWKSCacheTTL: c.JWKSMaxAge, IDTokenTTL: c.Lifetimes.IDToken, CacheTTL: c.KeyCacheTTL,
		Algs: c.IDTokenAlgs}
}

// parseDuration accepts Go durations and a day suffix ("30d"), which Go's parser lacks.
func parseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// Secure reports whether the public base URL is https (cookies get Secure and __Host-).
func (c Config) Secure() bool { return strings.HasPrefix(c.BaseURL, "https://") }

// validRegions checks the multi-region settings: region names as labels, the peers distinct and
// other than this region, and none without a home.
func (c Config) validRegions() error {
	if c.HomeRegion == "" {
		if len(c.PeerRegions) > 0 {
			return fmt.Errorf("configuration: %s needs %s", EnvPeerRegions, EnvHomeRegion)
		}
		return nil
	}
	if !oauth.ValidHome(c.HomeRegion) {
		return fmt.Errorf("configuration: %s=%q: want a region name (lowercase letters, digits, dashes)", EnvHomeRegion, c.HomeRegion)
	}
	seen := map[string]bool{c.HomeRegion: true}
	for _, r := range c.PeerRegions {
		if !oauth.ValidHome(r) || seen[r] {
			return fmt.Errorf("configuration: %s: %q is not a region name, or is listed twice or as this region", EnvPeerRegions, r)
		}
		seen[r] = true
	}
	return nil
}
