// Package appbackend is the callback of the bank's app backend (issue 31): the AWS adapter
// through which a customer's decision on a CIBA request, made in the bank's app, comes back.
// The backend POSTs a decision token, a JWT it signs (PS256 or ES256) with a key of the set
// the deployment trusts (AUTH_CIBA_APP_JWKS); Callback verifies it (Verify: every claim's
// rule, nothing read or written) and hands the decision, with its jti as a one-time value
// recorded in the decision's own write (ciba.Decision.Once), to the use case
// (ciba.Service.Decide), whose rules (the customer's pending
// request, strong authentication, the payment's dynamic linking) are package ciba's and
// shared/oauth's. The contract is docs/api.md's "The bank's app backend: the contract".
package appbackend

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/oauth"
)

// The decision token's rules.
const (
	// TokenType is the JWS typ header a decision token carries (RFC 8725 3.11), so that no
	// other JWT the app backend signs is taken for a decision.
	TokenType = "ciba-decision+jwt"
	// MaxTokenBytes bounds the token before it is parsed.
	MaxTokenBytes = 8 << 10
	// MaxLifetime is the longest a token may live (exp - iat); Skew the clock difference
	// allowed on iat and auth_time.
	MaxLifetime = 5 * time.Minute
	Skew        = 30 * time.Second
	// MaxAuthAge is how long before the token the customer's authentication may have been.
	MaxAuthAge = 10 * time.Minute
	// maxJTI and maxClaim bound the token's strings (the jti is a store key).
	maxJTI   = 128
	maxClaim = 256
)

// Decisions a token states.
const (
	Approved = "approved"
	Denied   = "denied"
)

// Algs are the algorithms a decision token may be signed with (FAPI 2.0's).
var Algs = []jose.SignatureAlgorithm{jose.PS256, jose.ES256}

// Claims are a decision token's claims (docs/api.md).
type Claims struct {
	jwt.Claims
	// Ref is the request's reference, as the event gave it.
	Ref string `json:"ref"`
	// Decision is "approved" or "denied".
	Decision string `json:"decision"`
	// AMR are the methods (RFC 8176) the app authenticated the customer with; AuthTime when.
	AMR      []string `json:"amr"`
	AuthTime int64    `json:"auth_time"`
	// DetailsSHA256 is, for a payment, the base64url SHA-256 of the authorization_details
	// the app showed (the event's authorization_details, byte for byte).
	DetailsSHA256 string `json:"details_sha256,omitempty"`
}

// Requests is what the callback asks of the CIBA use case (*ciba.Service).
type Requests interface {
	Decide(ctx context.Context, d ciba.Decision) error
}

// Deps are what New builds a Callback from; all are required.
type Deps struct {
	// Issuer is the app backend's id (the token's iss); Audience ours (the token's aud).
	Issuer   string
	Audience string
	// JWKS is the app backend's public keys, a JWK Set (AUTH_CIBA_APP_JWKS).
	JWKS     []byte
	Requests Requests
	Clock    oauth.Clock
	Log      *slog.Logger
}

// Callback is the decision callback's use case.
type Callback struct {
	d    Deps
	keys []jose.JSONWebKey
}

// New returns the Callback of d, or an error naming every missing or unusable dependency.
func New(d Deps) (*Callback, error) {
	var errs []error
	need := func(ok bool, what string) {
		if !ok {
			errs = append(errs, errors.New("appbackend: missing "+what))
		}
	}
	need(d.Issuer != "", "Issuer")
	need(d.Audience != "", "Audience")
	need(d.Requests != nil, "Requests")
	need(d.Clock != nil, "Clock")
	need(d.Log != nil, "Log")
	keys, err := ParseKeys(d.JWKS)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Callback{d: d, keys: keys}, nil
}

// ParseKeys reads the app backend's JWK Set: at least one key, each public, with a kid
// unique in the set, and usable with PS256 (RSA of 2048 bits or more) or ES256 (P-256).
func ParseKeys(raw []byte) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) == 0 {
		return nil, errors.New("appbackend: the app backend's keys must be a JWK Set with at least one key")
	}
	seen := map[string]bool{}
	for _, k := range set.Keys {
		if !k.IsPublic() || k.KeyID == "" || seen[k.KeyID] {
			return nil, fmt.Errorf("appbackend: key %q: each key must be public and have a kid of its own", k.KeyID)
		}
		seen[k.KeyID] = true
		if k.Use != "" && k.Use != "sig" {
			return nil, fmt.Errorf("appbackend: key %q is not a signing key", k.KeyID)
		}
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < 2048 || (k.Algorithm != "" && k.Algorithm != string(jose.PS256)) {
				return nil, fmt.Errorf("appbackend: key %q: an RSA key must have 2048 bits or more and be for PS256", k.KeyID)
			}
		case *ecdsa.PublicKey:
			if pub.Curve != elliptic.P256() || (k.Algorithm != "" && k.Algorithm != string(jose.ES256)) {
				return nil, fmt.Errorf("appbackend: key %q: an EC key must be P-256 for ES256", k.KeyID)
			}
		default:
			return nil, fmt.Errorf("appbackend: key %q: want an RSA (PS256) or P-256 (ES256) key", k.KeyID)
		}
	}
	return set.Keys, nil
}

// Verified is a decision token that passed every rule of Verify.
type Verified struct {
	Decision ciba.Decision
	JTI      string
	Expiry   time.Time
	// DetailsHash is the SHA-256 the token states (nil when it states none).
	DetailsHash []byte
}

// refused is a decision token refused: 401 invalid_token with the reason (RFC 6750 3.1).
func refused(format string, args ...any) error { return oauth.InvalidToken(format, args...) }

// Verify checks a decision token, one rule after another, and reads and writes nothing: size,
// a compact JWS of one signature with typ TokenType and alg PS256 or ES256, a kid of the
// configured set whose key verifies it, iss the app backend's, aud ours, iat not in the future,
// exp not past and at most MaxLifetime after iat, a jti, a ref, a sub, a decision, and for an
// approval an amr and an auth_time within MaxAuthAge. Its errors are *oauth.Error.
func (c *Callback) Verify(raw string, now time.Time) (*Verified, error) {
	if len(raw) > MaxTokenBytes {
		return nil, refused("the decision token is longer than %d bytes", MaxTokenBytes)
	}
	tok, err := jwt.ParseSigned(raw, Algs)
	if err != nil {
		return nil, refused("the decision token is not a JWT signed with PS256 or ES256")
	}
	if len(tok.Headers) != 1 {
		return nil, refused("the decision token must have one signature")
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != TokenType {
		return nil, refused("the decision token's typ must be %s", TokenType)
	}
	var claims Claims
	verified := false
	for _, k := range c.keys {
		if h.KeyID == "" || k.KeyID != h.KeyID {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			break
		}
		verified = tok.Claims(k.Key, &claims) == nil
		break
	}
	if !verified {
		return nil, refused("the decision token's signature does not verify with a key of the app backend")
	}
	switch {
	case claims.Issuer != c.d.Issuer:
		return nil, refused("the decision token's iss is not the app backend")
	case len(claims.Audience) != 1 || claims.Audience[0] != c.d.Audience:
		return nil, refused("the decision token's aud must be this issuer alone")
	case claims.IssuedAt == nil || claims.Expiry == nil:
		return nil, refused("the decision token needs iat and exp")
	case claims.IssuedAt.Time().After(now.Add(Skew)):
		return nil, refused("the decision token is issued in the future")
	case !now.Before(claims.Expiry.Time()):
		return nil, refused("the decision token has expired")
	case claims.Expiry.Time().Sub(claims.IssuedAt.Time()) > MaxLifetime:
		return nil, refused("the decision token lives longer than %d seconds", int(MaxLifetime/time.Second))
	case claims.NotBefore != nil && claims.NotBefore.Time().After(now.Add(Skew)):
		return nil, refused("the decision token is not valid yet")
	case claims.ID == "" || len(claims.ID) > maxJTI:
		return nil, refused("the decision token needs a jti of at most %d characters", maxJTI)
	case claims.Ref == "" || len(claims.Ref) > maxClaim:
		return nil, refused("the decision token needs the request's ref")
	case claims.Subject == "" || len(claims.Subject) > maxClaim:
		return nil, refused("the decision token needs the customer's sub")
	case claims.Decision != Approved && claims.Decision != Denied:
		return nil, refused("the decision token's decision must be approved or denied")
	case len(claims.AMR) > 10:
		return nil, refused("the decision token's amr lists too many methods")
	}
	v := &Verified{JTI: claims.ID, Expiry: claims.Expiry.Time(),
		Decision: ciba.Decision{Ref: claims.Ref, UID: claims.Subject, Approve: claims.Decision == Approved, AMR: claims.AMR}}
	if claims.DetailsSHA256 != "" {
		hash, err := base64.RawURLEncoding.DecodeString(claims.DetailsSHA256)
		if err != nil || len(hash) != 32 {
			return nil, refused("the decision token's details_sha256 must be a base64url SHA-256")
		}
		v.DetailsHash = hash
	}
	if v.Decision.Approve {
		at := time.Unix(claims.AuthTime, 0)
		switch {
		case claims.AuthTime == 0:
			return nil, refused("an approval needs the customer's auth_time")
		case at.After(now.Add(Skew)) || at.Before(claims.IssuedAt.Time().Add(-MaxAuthAge)):
			return nil, refused("the approval's auth_time is not within %d seconds before the token", int(MaxAuthAge/time.Second))
		}
		v.Decision.AuthTime = at
		if v.DetailsHash != nil {
			v.Decision.Evidence = oauth.NewAppEvidence(v.DetailsHash, v.JTI, now)
		}
	}
	return v, nil
}

// Errors of Handle beyond Verify's, as the callback answers them (docs/api.md).
var (
	errUnknown = &oauth.Error{Code: oauth.ErrCodeInvalidRequest, Status: http.StatusNotFound,
		Description: "no pending request of this customer has this ref"}
	errDecided = &oauth.Error{Code: oauth.ErrCodeInvalidRequest, Status: http.StatusConflict,
		Description: "the request was decided before"}
	errNotStrong = &oauth.Error{Code: "insufficient_user_authentication", Status: http.StatusForbidden,
		Description: "an approval needs strong authentication of the customer (amr with mfa)"}
	errPaymentLink = &oauth.Error{Code: oauth.ErrCodeInvalidRequest, Status: http.StatusBadRequest,
		Description: "the approval is not bound to the payment's authorization_details (details_sha256)"}
	errReplayed = oauth.InvalidToken("the decision token was used before")
)

// Handle decides the request a decision token names: Verify, then a read of the request
// (the customer's pending request, and for an approval the rules of ciba.Decide checked on
// it: strong authentication, a payment's evidence), each refused before anything is written;
// then the token's jti is recorded once and the decision handed to ciba.Service.Decide, which
// records it once. Only a decision that races another past the read is refused after its jti
// was recorded (errDecided): the jti of a token whose request was decided anyway.
func (c *Callback) Handle(ctx context.Context, raw string) error {
	now := c.d.Clock.Now()
	v, err := c.Verify(raw, now)
	if err != nil {
		return err
	}
	// Decide holds the rules on the decision (the customer's pending request, strong
	// authentication, a payment's link to what the app showed), each checked before it
	// writes; the token's jti is recorded in the decision's own write (Decision.Once), so a
	// token used before decides nothing and a refused decision records no jti.
	d := v.Decision
	d.Once = []oauth.Once{{Key: "ciba-decision:" + oauth.HashToken(c.d.Issuer+"\x00"+v.JTI), Expires: v.Expiry}}
	return c.answer(c.d.Requests.Decide(ctx, d))
}

// answer maps the use case's errors onto the callback's answers.
func (c *Callback) answer(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ciba.ErrUnknownRequest):
		return errUnknown
	case errors.Is(err, ciba.ErrDecided):
		return errDecided
	case errors.Is(err, ciba.ErrNotStrong):
		return errNotStrong
	case errors.Is(err, ciba.ErrPaymentLink):
		return errPaymentLink
	case errors.Is(err, ciba.ErrReplayed):
		return errReplayed
	}
	return oauth.AsError(err)
}

var _ Requests = (*ciba.Service)(nil)
