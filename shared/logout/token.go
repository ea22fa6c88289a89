package logout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
)

// TypeLogout is the typ of a logout token (Back-Channel Logout 1.0 2.4), so that it cannot be
// taken for an id_token (RFC 8725 3.11).
const TypeLogout = "logout+jwt"

// EventBackchannelLogout is the one member of a logout token's events claim.
const EventBackchannelLogout = "http://schemas.openid.net/event/backchannel-logout"

// TokenLifetime is a logout token's exp after its iat: long enough for the retries within
// Bound and a receiver's clock skew, short enough that a copy is soon useless.
const TokenLifetime = 2 * time.Minute

// logoutToken signs the logout token of c for sess (Back-Channel Logout 1.0 2.4): iss, aud,
// iat, exp, jti, sub, sid and events, never a nonce, with the client's id_token algorithm and
// keys, typ logout+jwt.
func (s *Service) logoutToken(ctx context.Context, c *oauth.Client, sess oauth.Session, now time.Time) (string, error) {
	claims := jwt.MapClaims{
		"iss":    s.d.Issuer,
		"aud":    c.ID,
		"iat":    now.Unix(),
		"exp":    now.Add(TokenLifetime).Unix(),
		"jti":    oauth.NewID("lt_"),
		"sub":    sess.UID,
		"sid":    sess.SID,
		"events": map[string]any{EventBackchannelLogout: map[string]any{}},
	}
	tok, err := s.d.Signer.SignJWTWithType(ctx, c.IDTokenSignedResponseAlg, TypeLogout, claims)
	if err != nil {
		return "", fmt.Errorf("sign the logout token: %w", err)
	}
	return tok, nil
}

// hint is what a verified id_token_hint says.
type hint struct {
	aud      []string
	sub, sid string
}

// verifyHint checks that raw is an id_token we signed (VerifyIDTokenHint) and returns what it
// says.
func (s *Service) verifyHint(ctx context.Context, raw string) (*hint, error) {
	h, err := VerifyIDTokenHint(ctx, s.d.Keys, s.d.Issuer, raw)
	if err != nil {
		return nil, err
	}
	return &hint{aud: h.Aud, sub: h.Sub, sid: h.SID}, nil
}

// IDTokenHint is what a verified id_token_hint says: its audience, subject and session.
type IDTokenHint struct {
	Aud      []string
	Sub, SID string
}

// VerifyIDTokenHint checks that raw is an id_token issuer signed with a key of ks: a JWS of
// one of our algorithms whose kid names a published key of that algorithm in the registry
// (next, current or retired), typ JWT, the issuer, a subject and an audience. Its expiry is
// not checked: a hint identifies, and RP-Initiated Logout 1.0 2 (and CIBA Core 7.1) have the
// OP accept an expired one. The error wraps ErrBadRequest, or is the registry's read error.
// The end-session request and the backchannel authentication request (package ciba) share it.
func VerifyIDTokenHint(ctx context.Context, ks oauth.KeyStore, issuer, raw string) (*IDTokenHint, error) {
	set, err := ks.Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("logout: read the key registry: %w", err)
	}
	var claims jwt.MapClaims
	_, err = jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		if typ, _ := t.Header["typ"].(string); typ != "JWT" {
			return nil, errors.New("not an id_token (typ)")
		}
		kid, _ := t.Header["kid"].(string)
		for _, k := range set.Published() {
			if k.Kid == kid && k.Algorithm() == t.Method.Alg() {
				return keys.PublicKey(k)
			}
		}
		return nil, errors.New("no published key of ours signed it")
	}, jwt.WithValidMethods(keys.Algs), jwt.WithoutClaimsValidation())
	if err != nil {
		return nil, bad("the id_token_hint is not an id_token of ours: %v", err)
	}
	iss, _ := claims["iss"].(string)
	sub, _ := claims["sub"].(string)
	sid, _ := claims["sid"].(string)
	aud, err := claims.GetAudience()
	if iss != issuer || sub == "" || err != nil || len(aud) == 0 || slices.Contains(aud, "") {
		return nil, bad("the id_token_hint is not an id_token of this issuer")
	}
	return &IDTokenHint{Aud: aud, Sub: sub, SID: sid}, nil
}
