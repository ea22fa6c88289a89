package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenResponse is the token endpoint's success body (RFC 6749 5.1, OIDC Core 3.1.3.3), with
// the documented metadata object.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	// RefreshToken is absent for a payment grant (payment.go): it is one-time.
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
	IDToken      string `json:"id_token,omitempty"`
	// AuthorizationDetails are the access token's (RFC 9396 7): the grant's, or those a
	// refresh narrowed them to.
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty"`
	// GrantID is the grant's id when the client manages it (Grant Management for OAuth 2.0:
	// the authorization request carried grant_management_action), on every issuance.
	GrantID string `json:"grant_id,omitempty"`
	// Metadata is absent (all its fields empty) for a token without a user
	// (client_credentials): it names none.
	Metadata TokenMetadata `json:"metadata,omitzero"`
}

// TokenMetadata identifies the user to the client in the bank's terms.
type TokenMetadata struct {
	UID              string `json:"uid"`
	CompanyProfileID string `json:"companyProfileId"`
	CompanyUserID    string `json:"companyUserId"`
}

// issuance is one set of tokens about to be written.
type issuance struct {
	in      Issue
	access  string
	refresh string
	// atHash is the access token's at_hash, from the SHA-256 that hashed it for the store.
	atHash string
}

// newTokens says what an issuance is for: the grant and the access token's scopes, when, and
// which of the grant's tokens it keeps or retires.
type newTokens struct {
	Grant Grant
	// Scopes are the access token's (a refresh may narrow them); the refresh token keeps the
	// grant's.
	Scopes Scopes
	// Details are the access token's authorization_details when a refresh narrowed them;
	// empty, it carries the grant's.
	Details json.RawMessage
	Now     time.Time
	// FromCode marks a code exchange: the grant is written with its first tokens. False is a
	// refresh of a grant already stored.
	FromCode bool
	// Live lists the grant's access tokens that stay valid beside the new one (at most one: the
	// previous); Retire the hashes the refresh spends.
	Live   []string
	Retire []string
	// Keep is, for a refresh that does not rotate, the refresh token presented (its value and
	// its record as read): no refresh token is minted, and the write updates the kept one.
	Keep *kept
}

// kept is the refresh token a non-rotating refresh keeps.
type kept struct {
	value string
	token *Token
}

// newIssuance mints an access and a refresh token for n.Grant (only the access token when
// n.Keep names the refresh token to keep).
func (s *Service) newIssuance(n newTokens) issuance {
	g, scopes, now, live := n.Grant, n.Scopes, n.Now, n.Live
	access := NewSecret(s.homePrefix(PrefixAccess))
	aHash, at := accessTokenHashes(access)
	accessExp := minTime(now.Add(s.accessLifetime(&g)), g.ExpiresAt)
	// rLive (the new access token, then live) and tokens (rLive, then the refresh token) share
	// one array; rLive's capacity ends at its length, so appending to it cannot reach tokens.
	hashes := make([]string, 0, 2*(1+len(live))+1)
	hashes = append(append(hashes, aHash), live...)
	rLive := hashes[:len(hashes):len(hashes)]
	// The tokens carry a copy of the grant without its payment evidence: it stays on the
	// code and the grant record, and every read of a token stays small.
	tg := g
	tg.PaymentEvidence = nil
	is := issuance{
		access: access,
		in: Issue{
			Grant: g,
			Access: Token{Hash: aHash, Kind: KindAccess, Scopes: scopes, AuthorizationDetails: n.Details,
				IssuedAt: now, ExpiresAt: accessExp, Grant: tg},
			FromCode: n.FromCode,
			Retire:   n.Retire,
		},
	}
	is.atHash = at
	if k := n.Keep; k != nil {
		is.refresh = k.value
		is.in.Keep = &Keep{Hash: k.token.Hash, Read: k.token.Live, Live: rLive}
		is.in.Tokens = append(append(hashes[len(hashes):], rLive...), k.token.Hash)
		return is
	}
	if g.IsPayment() || g.ClientOnly {
		// A payment grant is one-time (payment.go), and a client_credentials grant gets none
		// (RFC 6749 4.4.3): no refresh token, whatever the scopes.
		is.in.Tokens = append(hashes[len(hashes):], rLive...)
		return is
	}
	is.refresh = NewSecret(s.homePrefix(PrefixRefresh))
	rHash := HashToken(is.refresh)
	refreshExp := minTime(now.Add(s.Lifetimes.RefreshToken), g.ExpiresAt)
	is.in.Refresh = Token{Hash: rHash, Kind: KindRefresh, Scopes: g.Scopes, IssuedAt: now, ExpiresAt: refreshExp, Grant: tg, Live: rLive}
	is.in.Tokens = append(append(hashes[len(hashes):], rLive...), rHash)
	return is
}

// issue writes a code exchange's issuance and, when openid was granted, signs the id_token
// beside the write: the two are the second and last round trip of an exchange (DESIGN.md
// decision 3). If either fails the client gets an error; if only the signature failed, the
// written grant is revoked, so no usable half-grant is left (decision 7). idTokenAlg is the
// client's id_token_signed_response_alg. A refresh signs first instead (signIDToken), so that
// nothing is written when the signature fails.
func (s *Service) issue(ctx context.Context, is issuance, nonce, idTokenAlg string, now time.Time) (*TokenResponse, error) {
	g := is.in.Grant
	type signed struct {
		jwt string
		err error
	}
	var sigc chan signed
	if is.in.Access.Scopes.Has(ScopeOpenID) {
		sigc = make(chan signed, 1)
		claims := s.idTokenClaims(g, is.in.Access.Scopes, is.atHash, nonce, now)
		go func() {
			j, err := s.Signer.SignJWT(ctx, idTokenAlg, claims)
			sigc <- signed{j, err}
		}()
	}
	werr := s.Grants.IssueTokens(ctx, is.in, now)
	var idToken string
	if sigc != nil {
		sg := <-sigc
		if sg.err != nil {
			if werr == nil {
				if err := s.Grants.RevokeGrant(context.WithoutCancel(ctx), g.ID, now); err != nil {
					s.Log.ErrorContext(ctx, "revoke grant after failed signature", slog.String("grant_id", g.ID), slog.Any("err", err))
				}
			}
			return nil, AsError(sg.err)
		}
		idToken = sg.jwt
	}
	if werr != nil {
		if is.in.Rewrite != nil && (errors.Is(werr, ErrConflict) || errors.Is(werr, ErrRevoked)) {
			return nil, rewriteRefused(werr)
		}
		if errors.Is(werr, ErrRevoked) {
			return nil, InvalidGrant("the grant has been revoked")
		}
		return nil, AsError(werr)
	}
	return s.response(is, idToken, now), nil
}

// signIDToken signs the issuance's id_token when openid was granted ("" otherwise), before
// anything is written: what a refresh does, so that a failed signature leaves its refresh
// token unspent.
func (s *Service) signIDToken(ctx context.Context, is issuance, nonce, idTokenAlg string, now time.Time) (string, error) {
	if !is.in.Access.Scopes.Has(ScopeOpenID) {
		return "", nil
	}
	return s.Signer.SignJWT(ctx, idTokenAlg, s.idTokenClaims(is.in.Grant, is.in.Access.Scopes, is.atHash, nonce, now))
}

// response is the token response of a written issuance.
func (s *Service) response(is issuance, idToken string, now time.Time) *TokenResponse {
	g := is.in.Grant
	tokenType := "Bearer"
	if g.DPoPJKT != "" {
		tokenType = TokenTypeDPoP
	}
	return &TokenResponse{
		AccessToken:  is.access,
		TokenType:    tokenType,
		ExpiresIn:    int64(is.in.Access.ExpiresAt.Sub(now).Round(time.Second) / time.Second),
		RefreshToken: is.refresh,
		Scope:        is.in.Access.Scopes.String(),
		IDToken:      idToken,
		// RFC 9396 7: the details the access token carries.
		AuthorizationDetails: is.in.Access.Details(),
		GrantID:              managedGrantID(&g),
		Metadata:             TokenMetadata{UID: g.UID, CompanyProfileID: g.CompanyProfileID, CompanyUserID: g.CompanyUserID},
	}
}

// idTokenClaims are the claims of an id_token (OIDC Core 2, 3.1.3.6) plus the claims the
// scopes release; atHash is the access token's (issuance.atHash).
func (s *Service) idTokenClaims(g Grant, scopes Scopes, atHash, nonce string, now time.Time) jwt.MapClaims {
	c := make(jwt.MapClaims, idTokenClaimsMax(scopes)) // sized for every claim it may hold: no growth
	c["iss"] = s.Issuer
	c["sub"] = g.UID
	c["aud"] = g.ClientID
	c["azp"] = g.ClientID
	c["iat"] = now.Unix()
	c["exp"] = now.Add(s.Lifetimes.IDToken).Unix()
	c["auth_time"] = g.AuthTime.Unix()
	if len(g.AMR) > 0 {
		c["amr"] = g.AMR
		c["acr"] = ACRFor(g.AMR)
	}
	if g.SID != "" {
		c["sid"] = g.SID // OIDC Front-Channel Logout 1.0 3: the session the user signed in with
	}
	c["at_hash"] = atHash
	if nonce != "" {
		c["nonce"] = nonce
	}
	g.Claims.putForScopes(c, scopes)
	return c
}

// idTokenClaimsMax is the most claims idTokenClaims puts in an id_token for scopes: the eight
// it always has, amr, acr, sid, nonce, and the most putForScopes releases for scopes.
func idTokenClaimsMax(scopes Scopes) int {
	n := 12
	if scopes.Has(ScopeEmail) {
		n += 2
	}
	if scopes.Has(ScopePhone) {
		n += 2
	}
	if scopes.Has(ScopeProfile) {
		n += 10
	}
	return n
}

// accessTokenHashes are the two digests an issued access token needs, from one SHA-256: the
// hash the store keys it by (HashToken) and the id_token's at_hash, the left half of the same
// sum (OIDC Core 3.1.3.6).
func accessTokenHashes(token string) (hash, atHash string) {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
