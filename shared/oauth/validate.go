package oauth

import (
	"context"
	"errors"
)

// ValidateAccessToken checks a bearer token with one store read: unknown, expired, revoked
// (whole grant or the token alone) and refresh tokens are invalid_token. A token bound to a
// client certificate (RFC 8705) is valid only with that certificate's thumbprint.
func (s *Service) ValidateAccessToken(ctx context.Context, token, certThumbprint string) (Token, error) {
	if token == "" {
		return Token{}, InvalidToken("no access token")
	}
	t, err := s.Grants.GetToken(WithHome(ctx, HomeOf(token)), HashToken(token), s.now())
	if errors.Is(err, ErrNotFound) {
		return Token{}, InvalidToken("the access token is invalid, expired or revoked")
	}
	if err != nil {
		return Token{}, AsError(err)
	}
	if t.Kind != KindAccess {
		return Token{}, InvalidToken("the token is not an access token")
	}
	if b := t.Grant.CertThumbprint; b != "" && !constantEqual(b, certThumbprint) {
		return Token{}, InvalidToken("the access token is bound to a client certificate that was not presented")
	}
	return t, nil
}
