// Package config reads the service's settings from the environment, the one source every
// function and the local server share, with the documented defaults.
package config

import (
	"errors"
	"fmt"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvMaxPendingMB caps the embedded store's pending authorization requests, in MiB (default 64).
const EnvMaxPendingMB = "AUTH_EMBEDDED_MAX_PENDING_MB"

// Environment variables. Every function reads only these; the SAM template sets them.
const (
	EnvBaseURL         = "AUTH_BASE_URL"          // public base URL, e.g. https://auth.bank.example
	EnvIssuer          = "AUTH_ISSUER"            // default {base}/v2/authentication/oauth2
	EnvMTLSBaseURL     = "AUTH_MTLS_BASE_URL"     // optional connect host with mutual TLS
	EnvTable           = "AUTH_TABLE"             // DynamoDB table (store=dynamodb)
	EnvDynamoEndpoint  = "AUTH_DYNAMODB_ENDPOINT" // optional, e.g. DynamoDB Local
	EnvStore           = "AUTH_STORE"             // embedded | dynamodb
	EnvDataDir         = "AUTH_DATA_DIR"          // embedded store's file and local keys
	EnvNoSync          = "AUTH_EMBEDDED_NO_SYNC"  // true: skip fsync (benchmarks, throwaway data)
	EnvKeyBackend      = "AUTH_KEY_BACKEND"       // local | kms | kms-data-key
	EnvKMSDataKey      = "AUTH_KMS_DATA_KEY"      // kms-data-key: the symmetric key that wraps the signing keys
	EnvHomeRegion      = "AUTH_HOME_REGION"       // multi-region: this region (the home of what it issues)
	EnvPeerRegions     = "AUTH_PEER_REGIONS"      // multi-region: the other regions, comma-separated
	EnvKeyRotation     = "AUTH_KEY_ROTATION"      // on | off: off in the regions that do not rotate keys
	EnvRequirePAR      = "AUTH_REQUIRE_PAR"       // true: every client must push its authorization requests (RFC 9126)
	EnvDPoPNonceKey    = "AUTH_DPOP_NONCE_KEY"    // set: DPoP proofs at token and PAR need the server's nonce (RFC 9449 8), made with this key
	EnvSCAPolicy       = "AUTH_SCA_POLICY"        // when a sign-in must be strong: payments (default), always, or a duration such as 180d
	EnvPasskeyRPID     = "AUTH_PASSKEY_RP_ID"     // WebAuthn relying party ID; default the base URL's host
	EnvKMSTagValue     = "AUTH_KMS_KEY_TAG"       // value of the tag that marks our KMS keys
	EnvAccessTTL       = "AUTH_ACCESS_TOKEN_TTL"
	EnvRefreshTTL      = "AUTH_REFRESH_TOKEN_TTL"
	EnvGrantTTL        = "AUTH_GRANT_TTL"
	EnvCodeTTL         = "AUTH_CODE_TTL"
	EnvIDTokenTTL      = "AUTH_ID_TOKEN_TTL"
	EnvSessionTTL      = "AUTH_SESSION_TTL"
	EnvRequestTTL      = "AUTH_REQUEST_TTL"
	EnvClientCacheTTL  = "AUTH_CLIENT_CACHE_TTL"
	EnvKeyCacheTTL     = "AUTH_KEY_CACHE_TTL"
	EnvJWKSMaxAge      = "AUTH_JWKS_MAX_AGE"
	EnvRotationPeriod  = "AUTH_ROTATION_PERIOD"
	EnvLogLevel        = "AUTH_LOG_LEVEL"  // debug | info | warn | error
	EnvLogFormat       = "AUTH_LOG_FORMAT" // json | text
	EnvPasswordTime    = "AUTH_ARGON2_TIME"
	EnvPasswordMemory  = "AUTH_ARGON2_MEMORY_KIB"
	EnvLoginMaxFails   = "AUTH_LOGIN_MAX_FAILURES"
	EnvLoginFailWindow = "AUTH_LOGIN_FAILURE_WINDOW"
	// EnvRouteScopes overrides entries of the bank API's route/scope table as JSON
	// ({"GET /v2/bank/accounts":["openid"]}); see authorizer.ParseRoutes and docs/api.md.
	EnvRouteScopes = "AUTH_ROUTE_SCOPES"
	// EnvPasswordConcurrency bounds the password checks one process runs at once; unset, it is
	// sized from the CPUs and the memory limit (authn.HashConcurrency).
	EnvPasswordConcurrency = "AUTH_PASSWORD_CONCURRENCY"
	// EnvAuditLog is where the security events go, whatever AUTH_LOG_LEVEL: stdout (the
	// default; in Lambda, CloudWatch, each line marked "log":"audit"), stderr, or a file path
	// (appended to).
	EnvAuditLog = "AUTH_AUDIT_LOG"
	// EnvRateLimit turns the local server's per-address rate limits off (false) for load
	// benchmarks from one address; in AWS, API Gateway throttles instead.
	EnvRateLimit = "AUTH_RATE_LIMIT"
	// EnvIDTokenAlgs lists the id_token algorithms the key rotation keeps keys for, comma
	// separated (default "RS256,PS256,ES256"); a client may register only one of them.
	EnvIDTokenAlgs = "AUTH_ID_TOKEN_ALGS"
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
	// KMSDataKey is the symmetric KMS key (ID, ARN or alias) that wraps the signing keys when
	// KeyBackend is kms-data-key (docs/keys.md, "Signing past the KMS Sign quota").
	KMSDataKey string
	// HomeRegion and PeerRegions make a multi-region deployment (docs/multiregion.md): codes and
	// tokens issued here carry HomeRegion, and those of the peers are consumed at their home.
	HomeRegion  string
	PeerRegions []string
	// KeyRotation is false in the regions of a multi-region deployment that do not run the
	// key rotation: the registry has one writer (docs/multiregion.md).
	KeyRotation bool
	// RequirePAR makes every client push its authorization requests (RFC 9126).
	RequirePAR bool
	// DPoPNonceKey, when set, turns on server-provided DPoP nonces (RFC 9449 8): the HMAC key
	// every instance makes and checks them with (oauth.HMACNonces). At least 32 characters.
	DPoPNonceKey string
	// SCA says when a sign-in must be strong customer authentication (AUTH_SCA_POLICY).
	SCA oauth.SCAPolicy
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
	// RateLimit puts per-address rate limits in front of the local server (default true).
	RateLimit bool
	// IDTokenAlgs are the id_token algorithms with signing keys (AUTH_ID_TOKEN_ALGS).
	IDTokenAlgs []string
	// PendingMB caps the bytes of pending authorization requests the embedded store keeps, in
	// MiB (AUTH_EMBEDDED_MAX_PENDING_MB): beyond it new requests are refused
	// (temporarily_unavailable, 503).
	PendingMB int
}

// Lifetimes of what the service issues.
type Lifetimes = oauth.Lifetimes

// Defaults are the documented defaults (README, "Configuration").
func Defaults() Config {
	return Config{
		BaseURL:     "http://127.0.0.1:8080",
		SCA:         oauth.SCAPolicy{Scopes: oauth.DefaultSCAScopes},
		Store:       "embedded",
		PendingMB:   64,
		DataDir:     "data",
		KeyBackend:  "local",
		KeyRotation: true,
		Lifetimes: Lifetimes{
			AccessToken:  time.Hour,
			RefreshToken: 30 * 24 * time.Hour,
			Grant:        90 * 24 * time.Hour,
			Code:         2 * time.Minute,
			IDToken:      time.Hour,
			Session:      8 * time.Hour,
			Request:      15 * time.Minute,
		},
		ClientCacheTTL:   30 * time.Second,
		KeyCacheTTL:      time.Minute,
		JWKSMaxAge:       time.Hour,
		RotationPeriod:   30 * 24 * time.Hour,
		LogLevel:         "info",
		LogFormat:        "json",
		Argon2Time:       2,
		Argon2MemoryKiB:  19 * 1024,
		LoginMaxFailures: 5,
		LoginFailWindow:  15 * time.Minute,
		RateLimit:        true,
		IDTokenAlgs:      slices.Clone(keys.Algs),
	}
}

// FromEnv returns Defaults overridden by the environment. It reads nothing else and does no I/O.
func FromEnv() (Config, error) { return FromLookup(os.LookupEnv) }

// FromLookup is FromEnv over any lookup function (tests, flags layered over the environment).
func FromLookup(lookup func(string) (string, bool)) (Config, error) {
	c := Defaults()
	var errs []string
	str := func(key string, dst *string) {
		if v, ok := lookup(key); ok && v != "" {
			*dst = v
		}
	}
	dur := func(key string, dst *time.Duration) {
		if v, ok := lookup(key); ok && v != "" {
			d, err := parseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Sprintf("%s=%q: want a positive duration like 15m, 1h or 30d", key, v))
				return
			}
			*dst = d
		}
	}
	num := func(key string, dst *int) {
		if v, ok := lookup(key); ok && v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Sprintf("%s=%q: want a positive integer", key, v))
				return
			}
			*dst = n
		}
	}
	boolean := func(key string, dst *bool) {
		if v, ok := lookup(key); ok && v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: want true or false", key, v))
				return
			}
			*dst = b
		}
	}
	u32 := func(key string, dst *uint32) {
		var n int
		num(key, &n)
		if n > 0 {
			*dst = uint32(n)
		}
	}
	str(EnvBaseURL, &c.BaseURL)
	str(EnvIssuer, &c.Issuer)
	str(EnvMTLSBaseURL, &c.MTLSBaseURL)
	str(EnvStore, &c.Store)
	str(EnvTable, &c.Table)
	str(EnvDynamoEndpoint, &c.DynamoEndpoint)
	str(EnvDataDir, &c.DataDir)
	str(EnvKeyBackend, &c.KeyBackend)
	str(EnvKMSTagValue, &c.KMSTagValue)
	str(EnvKMSDataKey, &c.KMSDataKey)
	boolean(EnvRequirePAR, &c.RequirePAR)
	str(EnvDPoPNonceKey, &c.DPoPNonceKey)
	str(EnvPasskeyRPID, &c.PasskeyRPID)
	if v, ok := lookup(EnvSCAPolicy); ok {
		p, err := oauth.ParseSCAPolicy(v, parseDuration)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", EnvSCAPolicy, err))
		}
		c.SCA = p
	}
	str(EnvHomeRegion, &c.HomeRegion)
	v, _ := lookup(EnvKeyRotation)
	switch v {
	case "", "on":
	case "off":
		c.KeyRotation = false
	default:
		errs = append(errs, fmt.Sprintf("%s=%q: want on or off", EnvKeyRotation, v))
	}
	if v, _ := lookup(EnvPeerRegions); strings.TrimSpace(v) != "" {
		v = strings.TrimSpace(v)
		for _, r := range strings.Split(v, ",") {
			c.PeerRegions = append(c.PeerRegions, strings.TrimSpace(r))
		}
	}
	boolean(EnvNoSync, &c.NoSync)
	num(EnvMaxPendingMB, &c.PendingMB)
	str(EnvLogLevel, &c.LogLevel)
	str(EnvLogFormat, &c.LogFormat)
	dur(EnvAccessTTL, &c.Lifetimes.AccessToken)
	dur(EnvRefreshTTL, &c.Lifetimes.RefreshToken)
	dur(EnvGrantTTL, &c.Lifetimes.Grant)
	dur(EnvCodeTTL, &c.Lifetimes.Code)
	dur(EnvIDTokenTTL, &c.Lifetimes.IDToken)
	dur(EnvSessionTTL, &c.Lifetimes.Session)
	dur(EnvRequestTTL, &c.Lifetimes.Request)
	dur(EnvClientCacheTTL, &c.ClientCacheTTL)
	dur(EnvKeyCacheTTL, &c.KeyCacheTTL)
	dur(EnvJWKSMaxAge, &c.JWKSMaxAge)
	dur(EnvRotationPeriod, &c.RotationPeriod)
	dur(EnvLoginFailWindow, &c.LoginFailWindow)
	u32(EnvPasswordTime, &c.Argon2Time)
	u32(EnvPasswordMemory, &c.Argon2MemoryKiB)
	num(EnvLoginMaxFails, &c.LoginMaxFailures)
	num(EnvPasswordConcurrency, &c.PasswordConcurrency)
	str(EnvAuditLog, &c.AuditLog)
	boolean(EnvRateLimit, &c.RateLimit)
	if v, ok := lookup(EnvIDTokenAlgs); ok && v != "" {
		c.IDTokenAlgs = nil
		for _, alg := range strings.Split(v, ",") {
			if alg = strings.TrimSpace(alg); alg != "" {
				c.IDTokenAlgs = append(c.IDTokenAlgs, alg)
			}
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

// DPoPNonces are the server nonces DPoPNonceKey turns on (nil when off).
func (c Config) DPoPNonces() oauth.DPoPNonces {
	if c.DPoPNonceKey == "" {
		return nil
	}
	return oauth.HMACNonces{Key: []byte(c.DPoPNonceKey)}
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
	switch c.Store {
	case "embedded":
	case "dynamodb":
		if c.Table == "" {
			return fmt.Errorf("configuration: %s=dynamodb needs %s", EnvStore, EnvTable)
		}
	default:
		return fmt.Errorf("configuration: %s=%q: want embedded or dynamodb", EnvStore, c.Store)
	}
	switch c.KeyBackend {
	case "local", "kms":
	case "kms-data-key":
		if c.KMSDataKey == "" {
			return fmt.Errorf("configuration: %s=kms-data-key needs %s (the symmetric KMS key that wraps the signing keys)", EnvKeyBackend, EnvKMSDataKey)
		}
	default:
		return fmt.Errorf("configuration: %s=%q: want local, kms or kms-data-key", EnvKeyBackend, c.KeyBackend)
	}
	if err := c.validRegions(); err != nil {
		return err
	}
	if c.DPoPNonceKey != "" && len(c.DPoPNonceKey) < 32 {
		return fmt.Errorf("configuration: %s must be at least 32 characters (a random secret)", EnvDPoPNonceKey)
	}
	if c.Lifetimes.RefreshToken > c.Lifetimes.Grant {
		c.Lifetimes.RefreshToken = c.Lifetimes.Grant
	}
	if len(c.IDTokenAlgs) == 0 {
		return fmt.Errorf("configuration: %s lists no algorithm: want some of %s", EnvIDTokenAlgs, strings.Join(keys.Algs, ","))
	}
	for i, alg := range c.IDTokenAlgs {
		if !keys.Supported(alg) {
			return fmt.Errorf("configuration: %s: unsupported algorithm %q: want some of %s", EnvIDTokenAlgs, alg, strings.Join(keys.Algs, ","))
		}
		if slices.Contains(c.IDTokenAlgs[:i], alg) {
			return fmt.Errorf("configuration: %s lists %s twice", EnvIDTokenAlgs, alg)
		}
	}
	if err := c.KeyPolicy().Validate(); err != nil {
		if errors.Is(err, keys.ErrUnpublishedSigner) {
			return fmt.Errorf("configuration: %s=%v is longer than the key publication margin %v: the JWKS endpoint could serve a key set without the next key so late that a verifier caching it for %s=%v still holds it when that key signs; lower %s: %w",
				EnvKeyCacheTTL, c.KeyCacheTTL, keys.DefaultMargin, EnvJWKSMaxAge, c.JWKSMaxAge, EnvKeyCacheTTL, err)
		}
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// KeyPolicy is the key rotation's timing under these settings (docs/keys.md): the rotation
// and the functions that serve or sign with keys must all use the same values.
func (c Config) KeyPolicy() keys.Policy {
	return keys.Policy{RotationPeriod: c.RotationPeriod, JWKSCacheTTL: c.JWKSMaxAge, IDTokenTTL: c.Lifetimes.IDToken, CacheTTL: c.KeyCacheTTL,
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
