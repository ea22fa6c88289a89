package registration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

// StatementAlgs are the JWS algorithms a software statement may be signed with; "none" and
// the HMAC algorithms are refused before anything else is read.
var StatementAlgs = []jose.SignatureAlgorithm{jose.PS256, jose.ES256, jose.RS256}

const (
	// maxStatementBytes bounds a software statement (its bytes are stored on the client).
	maxStatementBytes = 16 << 10
	// statementIATSkew is how far in the future a statement's iat may be: the directory's
	// clock and ours may differ by that much.
	statementIATSkew = time.Minute
)

// directoryKeys finds a directory's keys of one kid: inline, or at its jwks_uri.
type directoryKeys func(ctx context.Context, d config.Directory, kid string, now time.Time) ([]jose.JSONWebKey, error)

// statement is a verified software statement: its directory, its claims, and its bytes.
type statement struct {
	raw       string
	directory config.Directory
	claims    map[string]json.RawMessage
}

// verifyStatement checks a software statement (RFC 7591 2.3) and returns its claims: a JWS
// of one of StatementAlgs, whose iss is a trusted directory (else
// unapproved_software_statement), signed by a key of that directory's set, with an exp not
// past and an iat not in the future (else invalid_software_statement).
func verifyStatement(ctx context.Context, raw string, dirs []config.Directory, keysOf directoryKeys, now time.Time) (*statement, error) {
	if len(raw) > maxStatementBytes {
		return nil, oauth.InvalidSoftwareStatement("the software statement is longer than %d bytes", maxStatementBytes)
	}
	tok, err := jwt.ParseSigned(raw, StatementAlgs)
	if err != nil {
		return nil, oauth.InvalidSoftwareStatement("the software statement is not a JWT signed with PS256, ES256 or RS256")
	}
	if len(tok.Headers) != 1 {
		return nil, oauth.InvalidSoftwareStatement("the software statement must have one signature")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, oauth.InvalidSoftwareStatement("the software statement's claims are not a JSON object")
	}
	var dir *config.Directory
	for i := range dirs {
		if dirs[i].Issuer == unverified.Issuer {
			dir = &dirs[i]
		}
	}
	if dir == nil || unverified.Issuer == "" {
		return nil, oauth.UnapprovedSoftwareStatement("the software statement's issuer is not a directory this server trusts")
	}
	keys, err := keysOf(ctx, *dir, tok.Headers[0].KeyID, now)
	if err != nil {
		return nil, &oauth.Error{Code: oauth.ErrCodeInvalidSoftwareStatement, Status: 400,
			Description: "the directory's keys could not be read", Cause: err}
	}
	var claims jwt.Claims
	var members map[string]json.RawMessage
	verified := false
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != tok.Headers[0].Algorithm {
			continue
		}
		if err := tok.Claims(k.Key, &claims, &members); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, oauth.InvalidSoftwareStatement("the software statement's signature does not verify with the directory's keys")
	}
	switch {
	case claims.Expiry == nil:
		return nil, oauth.InvalidSoftwareStatement("the software statement has no exp")
	case !now.Before(claims.Expiry.Time()):
		return nil, oauth.InvalidSoftwareStatement("the software statement has expired")
	case claims.IssuedAt != nil && claims.IssuedAt.Time().After(now.Add(statementIATSkew)):
		return nil, oauth.InvalidSoftwareStatement("the software statement is issued in the future")
	case claims.NotBefore != nil && claims.NotBefore.Time().After(now.Add(statementIATSkew)):
		return nil, oauth.InvalidSoftwareStatement("the software statement is not valid yet")
	}
	return &statement{raw: raw, directory: *dir, claims: members}, nil
}

// inlineOrFetched returns a directory's keys of kid: from its inline set, else through cache
// (the jwks_uri fetcher: https, public addresses only). A kid the set lacks is no key.
func inlineOrFetched(cache *oauth.JWKSCache) directoryKeys {
	return func(ctx context.Context, d config.Directory, kid string, now time.Time) ([]jose.JSONWebKey, error) {
		if d.JWKSURI != "" {
			if cache == nil {
				return nil, errors.New("this deployment fetches no jwks_uri")
			}
			return cache.KeysAt(ctx, "directory:"+d.Issuer, d.JWKSURI, kid, now)
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(d.JWKS, &set); err != nil {
			return nil, fmt.Errorf("directory %s: jwks: %w", d.Issuer, err)
		}
		var out []jose.JSONWebKey
		for _, k := range set.Keys {
			if k.IsPublic() && (kid == "" || k.KeyID == kid) {
				out = append(out, k)
			}
		}
		return out, nil
	}
}
