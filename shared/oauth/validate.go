package oauth

import (
	"context"
	"errors"
)

// Presentation is an access token as a resource received it: the token, the Authorization
// scheme it came with, the client certificate of the connection, and the request's DPoP proof.
type Presentation struct {
	Token string
	// DPoP reports the DPoP scheme (Authorization: DPoP …, RFC 9449 7.1); false is Bearer.
	DPoP           bool
	CertThumbprint string
	// Proof is the request's DPoP proof with the method and URLs it must name; its
	// AccessToken is set from Token.
	Proof DPoPRequest
}

// ValidateAccessToken checks a bearer token presented without DPoP: see ValidatePresented.
func (s *Service) ValidateAccessToken(ctx context.Context, token, certThumbprint string) (Token, error) {
	return s.ValidatePresented(ctx, Presentation{Token: token, CertThumbprint: certThumbprint})
}

// ValidatePresented checks an access token with one store read: unknown, expired, revoked
// (whole grant or the token alone) and refresh tokens are invalid_token. A token bound to a
// client certificate (RFC 8705) is valid only with that certificate's thumbprint; a token
// bound to a DPoP key only under the DPoP scheme with a proof of that key made for this
// request and this token (RFC 9449 7). A DPoP-bound token sent as Bearer is refused: it would
// otherwise be usable by whoever copied it.
func (s *Service) ValidatePresented(ctx context.Context, p Presentation) (Token, error) {
	// The token's read and its proof's jti go to the store of the token's home.
	ctx = WithHome(ctx, HomeOf(p.Token))
	if p.Token == "" {
		return Token{}, InvalidToken("no access token")
	}
	if p.DPoP && p.Proof.Proof == "" {
		return Token{}, InvalidDPoPProof("the DPoP scheme needs a DPoP proof header")
	}
	// Under the DPoP scheme the proof is checked (its jti written) while the token is read:
	// one round trip of latency, not two.
	type checked struct {
		jkt string
		err error
	}
	var proof chan checked
	if p.DPoP {
		proof = make(chan checked, 1)
		req := p.Proof
		req.AccessToken = p.Token
		go func() {
			jkt, err := s.CheckDPoP(ctx, req)
			proof <- checked{jkt, err}
		}()
	}
	t, err := s.Grants.GetToken(WithHome(ctx, HomeOf(p.Token)), HashToken(p.Token), s.now())
	var pr checked
	if proof != nil {
		pr = <-proof
	}
	if errors.Is(err, ErrNotFound) {
		return Token{}, InvalidToken("the access token is invalid, expired or revoked")
	}
	if err != nil {
		return Token{}, AsError(err)
	}
	if t.Kind != KindAccess {
		return Token{}, InvalidToken("the token is not an access token")
	}
	if b := t.Grant.CertThumbprint; b != "" && !constantEqual(b, p.CertThumbprint) {
		return Token{}, InvalidToken("the access token is bound to a client certificate that was not presented")
	}
	jkt := t.Grant.DPoPJKT
	switch {
	case jkt != "" && !p.DPoP:
		return Token{}, InvalidToken("the access token is DPoP-bound: present it with the DPoP scheme and a proof")
	case jkt == "" && p.DPoP:
		return Token{}, InvalidToken("the access token is not DPoP-bound: present it as a Bearer token")
	case jkt != "":
		if pr.err != nil {
			return Token{}, pr.err
		}
		if !constantEqual(pr.jkt, jkt) {
			return Token{}, InvalidToken("the DPoP proof is not made with the key the access token is bound to")
		}
	}
	return t, nil
}
