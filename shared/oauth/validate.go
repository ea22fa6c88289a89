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
	// Allow is the resource's own check of a valid token (the route's scopes), made before the
	// proof's jti is recorded, so a request the resource refuses writes nothing either; nil
	// allows every valid token.
	Allow func(Token) error
	// Spend makes the presentation a use of the token at the bank API: a payment grant's token
	// (payment.go) is then accepted once, its grant consumed by the presentation's last write.
	Spend bool
}

// ValidateAccessToken checks a bearer token presented without DPoP: see ValidatePresented.
func (s *Service) ValidateAccessToken(ctx context.Context, token, certThumbprint string) (Token, error) {
	return s.ValidatePresented(ctx, Presentation{Token: token, CertThumbprint: certThumbprint})
}

// ValidatePresented checks an access token with one store read: unknown, expired, revoked
// (whole grant or the token alone) and refresh tokens are invalid_token. p.Allow then has its
// say, and a DPoP-bound token's proof has its jti recorded last, with one conditional write. A token bound to a
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
	// Under the DPoP scheme the proof is verified first, in memory; its jti is recorded only
	// once the token is found live and bound to the proof's key, so a refused request (a
	// made-up or revoked token with a valid self-made proof) writes nothing. The check is then
	// two sequential round trips, the read and the conditional write (docs/scale.md).
	var proof DPoPProof
	var proofErr error
	if p.DPoP {
		req := p.Proof
		req.AccessToken = p.Token
		proof, proofErr = s.VerifyDPoP(req)
	}
	t, err := s.Grants.GetToken(WithHome(ctx, HomeOf(p.Token)), HashToken(p.Token), s.now())
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
		if proofErr != nil {
			return Token{}, proofErr
		}
		if !constantEqual(proof.JKT, jkt) {
			return Token{}, InvalidToken("the DPoP proof is not made with the key the access token is bound to")
		}
	}
	if p.Allow != nil {
		if err := p.Allow(t); err != nil {
			return Token{}, err
		}
	}
	if p.Spend && t.Grant.IsPayment() {
		return t, s.spendPayment(ctx, &t, proof.Once)
	}
	// Everything else holds: the proof's jti is recorded last (RFC 9449 11.1); without a
	// bound token proof.Once is zero and nothing is written.
	if err := s.Record(ctx, proof.Once); err != nil {
		return Token{}, err
	}
	return t, nil
}
