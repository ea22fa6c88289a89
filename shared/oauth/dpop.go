package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// DPoP (RFC 9449): a client proves, with a signed JWT in the DPoP header of each request,
// that it holds the private key its tokens are bound to. The token endpoint binds the access
// and refresh tokens it issues to the key's thumbprint (cnf.jkt); userinfo, introspection's
// callers and the bank API's authorizer accept a bound access token only with a proof of the
// same key made for that request and that token (ath).

// Error codes of RFC 9449 (7.1, 8, 12.2).
const (
	ErrCodeInvalidDPoPProof = "invalid_dpop_proof"
	ErrCodeUseDPoPNonce     = "use_dpop_nonce"
)

// TokenTypeDPoP is the token_type of a DPoP-bound access token and the Authorization scheme
// it is presented with (RFC 9449 5, 7.1).
const TokenTypeDPoP = "DPoP"

// DPoPAlgs are the proof algorithms accepted (dpop_signing_alg_values_supported): asymmetric
// only (RFC 9449 4.3 step 5), the three FAPI 2.0 allows first (EdDSA with Ed25519 keys); RS256
// only from a client without the fapi2 profile (Client.CheckProofAlg).
var DPoPAlgs = []string{"ES256", "PS256", "EdDSA", "RS256"}

var dpopJOSEAlgs = []jose.SignatureAlgorithm{jose.ES256, jose.PS256, jose.EdDSA, jose.RS256}

const (
	// DPoPProofLifetime is how old a proof's iat may be; the proof's jti is remembered for as
	// long (plus DPoPClockSkew), after which the iat check refuses it anyway.
	DPoPProofLifetime = 60 * time.Second
	// DPoPClockSkew is how far in the future a proof's iat may be, for clients whose clocks
	// run ahead: FAPI 2.0 Security Profile (Final) 5.3.2.1 has the authorization server accept
	// JWTs whose iat is up to 10 seconds in the future (and refuse those more than 60 ahead).
	DPoPClockSkew = 10 * time.Second
	// maxDPoPProof bounds what is parsed: a proof with an RSA 4096 key is under 2 KiB.
	maxDPoPProof = 8 << 10
	// maxJTI bounds the jti kept in the replay store.
	maxJTI = 256
)

// InvalidDPoPProof is a DPoP proof that is missing where required, malformed, or fails a check
// of RFC 9449 4.3 (400 at the token endpoint; resource servers answer it with 401).
func InvalidDPoPProof(format string, args ...any) *Error {
	return newError(ErrCodeInvalidDPoPProof, http.StatusBadRequest, format, args...)
}

// UseDPoPNonceError asks the client to repeat the request with the server's nonce, which the
// response carries in its DPoP-Nonce header (RFC 9449 8, 9).
type UseDPoPNonceError struct {
	Err   *Error
	Nonce string
}

func (e *UseDPoPNonceError) Error() string { return e.Err.Error() }
func (e *UseDPoPNonceError) Unwrap() error { return e.Err }

// DPoPRequest is a request that may carry a DPoP proof: the proof (the DPoP header, "" when
// absent), and the method and URLs the proof must name. URLs are every URL under which the
// endpoint is reachable (the public host and the mutual-TLS host); htu must be one of them.
// AccessToken is the token presented with the proof to a resource, whose hash the proof's
// ath must be (RFC 9449 4.3 step 12); empty at the token endpoint.
type DPoPRequest struct {
	Proof       string
	Method      string
	URLs        []string
	AccessToken string
	// Repeated reports that the request carried more than one DPoP header (refused: RFC 9449
	// 4.3 step 1).
	Repeated bool
	// NonceRequired asks for the server's nonce when Service.DPoPNonces is set: at the token
	// and PAR endpoints, which can answer use_dpop_nonce with a DPoP-Nonce header. Resource
	// servers do not ask for one: the bank API's Lambda authorizer cannot send a header.
	NonceRequired bool
}

// dpopClaims are the claims of a proof (RFC 9449 4.2).
type dpopClaims struct {
	JTI   string   `json:"jti"`
	HTM   string   `json:"htm"`
	HTU   string   `json:"htu"`
	IAT   *float64 `json:"iat"`
	ATH   string   `json:"ath"`
	Nonce string   `json:"nonce"`
}

// DPoPProof is a proof that passed every check of RFC 9449 4.3 but the last, that its jti is
// new: JKT is the JWK SHA-256 thumbprint of its key (RFC 7638), "" when the request carried no
// proof; Once is its jti, which the caller records (Service.Record) once everything else about
// the request is checked.
type DPoPProof struct {
	JKT string
	// Alg is the proof's signing algorithm, which the client's profile may restrict.
	Alg  string
	Once OneTime
}

// CheckDPoP verifies the proof of r and records its jti, and returns the JWK SHA-256
// thumbprint of its key for binding; "" with no error when r carries no proof. A request that
// has more to check than its proof uses VerifyDPoP and records the jti last.
func (s *Service) CheckDPoP(ctx context.Context, r DPoPRequest) (string, error) {
	p, err := s.VerifyDPoP(r)
	if err != nil {
		return "", err
	}
	if err := s.Record(ctx, p.Once); err != nil {
		return "", err
	}
	return p.JKT, nil
}

// VerifyDPoP makes every check of RFC 9449 4.3 on the proof of r but the replay check, without
// touching the store: the zero DPoPProof with no error when r carries no proof. With server
// nonces on (Service.DPoPNonces) a proof without the current nonce is a *UseDPoPNonceError.
func (s *Service) VerifyDPoP(r DPoPRequest) (DPoPProof, error) {
	if r.Repeated {
		return DPoPProof{}, InvalidDPoPProof("send one DPoP header")
	}
	if r.Proof == "" {
		return DPoPProof{}, nil
	}
	now := s.now()
	if len(r.Proof) > maxDPoPProof {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof is too long")
	}
	// A proof is a JWT (RFC 9449 4.2): the compact serialization only, parsed once here.
	jws, err := jose.ParseSignedCompact(r.Proof, dpopJOSEAlgs)
	if err != nil {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof is not a compact JWS of %s", strings.Join(DPoPAlgs, ", "))
	}
	if len(jws.Signatures) != 1 {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof must have one signature")
	}
	h := jws.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != "dpop+jwt" {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's typ must be dpop+jwt")
	}
	jwk := h.JSONWebKey
	if jwk == nil || !jwk.Valid() || !jwk.IsPublic() {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's jwk header must be a public key")
	}
	if err := checkProofKey(jwk.Key, h.Algorithm); err != nil {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's key: %s", err)
	}
	payload, err := jws.Verify(jwk.Key)
	if err != nil {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's signature does not verify with its jwk")
	}
	var c dpopClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's claims are not a JSON object of the right types")
	}
	if c.JTI == "" || len(c.JTI) > maxJTI {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof needs a jti of at most %d characters", maxJTI)
	}
	if c.HTM != r.Method {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's htm is not the request's method")
	}
	if !htuMatches(c.HTU, r.URLs) {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's htu is not this endpoint's URL")
	}
	if c.IAT == nil {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof needs an iat")
	}
	iat := time.Unix(int64(*c.IAT), 0)
	switch {
	case iat.After(now.Add(DPoPClockSkew)):
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's iat is more than %v ahead of the server's time", DPoPClockSkew)
	case iat.Before(now.Add(-DPoPProofLifetime)):
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's iat is more than %v old", DPoPProofLifetime)
	}
	if r.AccessToken != "" {
		if c.ATH == "" || !constantEqual(c.ATH, hashB64(r.AccessToken)) {
			return DPoPProof{}, InvalidDPoPProof("the DPoP proof's ath is not the hash of the access token")
		}
	}
	if r.NonceRequired && s.DPoPNonces != nil && !s.DPoPNonces.Valid(c.Nonce, now) {
		return DPoPProof{}, &UseDPoPNonceError{
			Err:   newError(ErrCodeUseDPoPNonce, http.StatusBadRequest, "the DPoP proof must carry the server's nonce, sent in the DPoP-Nonce header"),
			Nonce: s.DPoPNonces.Current(now),
		}
	}
	jkt, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return DPoPProof{}, InvalidDPoPProof("the DPoP proof's jwk has no thumbprint")
	}
	thumb := base64.RawURLEncoding.EncodeToString(jkt)
	// The proof is good: its jti may be used once, for as long as its iat is accepted.
	return DPoPProof{JKT: thumb, Alg: h.Algorithm, Once: OneTime{
		key:     "dpop:" + thumb + ":" + c.JTI,
		expires: iat.Add(DPoPProofLifetime + DPoPClockSkew),
		reused:  InvalidDPoPProof("the DPoP proof was already used (its jti is not new)"),
	}}, nil
}

// checkProofKey refuses keys too weak for a proof, and a key of another type than alg.
func checkProofKey(key any, alg string) error {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if alg != string(jose.ES256) || k.Curve != elliptic.P256() {
			return fmt.Errorf("ES256 needs a P-256 key")
		}
	case *rsa.PublicKey:
		if alg != string(jose.PS256) && alg != string(jose.RS256) {
			return fmt.Errorf("an RSA key signs PS256 or RS256")
		}
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("an RSA key needs at least 2048 bits")
		}
	case ed25519.PublicKey:
		if alg != string(jose.EdDSA) {
			return fmt.Errorf("an Ed25519 key signs EdDSA")
		}
	default:
		return fmt.Errorf("%T keys are not accepted", key)
	}
	return nil
}

// htuMatches compares a proof's htu with the endpoint's URLs, ignoring query and fragment
// (RFC 9449 4.3 step 9) and normalising as RFC 3986 6.2.2 and 6.2.3 say: case of scheme and
// host, the default port.
func htuMatches(htu string, urls []string) bool {
	got, ok := normalURL(htu)
	if !ok {
		return false
	}
	for _, u := range urls {
		if want, ok := normalURL(u); ok && want == got {
			return true
		}
	}
	return false
}

func normalURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return "", false
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	host = strings.TrimSuffix(host, map[string]string{"https": ":443", "http": ":80"}[scheme])
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, true
}

// validThumbprint checks the form of a JWK SHA-256 thumbprint: 43 base64url characters.
func validThumbprint(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// hashB64 is base64url(SHA-256(s)): a proof's ath (RFC 9449 4.2).
func hashB64(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// DPoPNonces are server-provided DPoP nonces (RFC 9449 8, 9): a proof must carry a nonce the
// server issued recently, which limits a proof made in advance (by code that could use the
// client's key for a moment) to the nonce's life.
type DPoPNonces interface {
	// Current is the nonce to send in DPoP-Nonce now.
	Current(now time.Time) string
	// Valid reports whether a proof's nonce is one the server issued and still accepts.
	Valid(nonce string, now time.Time) bool
}

// DefaultNoncePeriod is how long one nonce is issued for.
const DefaultNoncePeriod = 5 * time.Minute
