package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acmebank/authserver/shared/oauth/rar"
)

// Rich authorization requests (RFC 9396). A client may ask, beside or instead of broad scopes,
// for authorization_details: a JSON array of objects, each of a type the deployment declares
// with a JSON Schema (package rar holds the types, their schemas and the narrowing rule). They
// are accepted at PAR and at the authorization endpoint, kept with the pending request and the
// grant as validated JSON, returned in the token response (RFC 9396 7) and in introspection
// (9.1), and narrowed at refresh (7.2). Every refusal is invalid_authorization_details and is
// made before anything is stored.

// authorizationDetails validates the authorization_details parameter raw of client c: ""
// is none; otherwise the value kept with the request (compacted JSON), or the refusal.
func (s *Service) authorizationDetails(c *Client, raw string) (json.RawMessage, *Error) {
	if raw == "" {
		return nil, nil
	}
	details, err := s.AuthorizationDetails.Validate(raw, c.AuthorizationDetailsTypes)
	if err != nil {
		return nil, detailsError(err)
	}
	return details, nil
}

// narrowDetails is what a refresh that asks for authorization_details raw gets (RFC 9396
// 7.2): details the client may use and that the grant's cover (rar.Covers), which its access
// token then carries; "" asks for the grant's (nil).
func (s *Service) narrowDetails(c *Client, granted json.RawMessage, raw string) (json.RawMessage, *Error) {
	if raw == "" {
		return nil, nil
	}
	want, err := s.authorizationDetails(c, raw)
	if err != nil {
		return nil, err
	}
	if err := rar.Covers(granted, want); err != nil {
		return nil, detailsError(err)
	}
	return want, nil
}

// detailsError is the invalid_authorization_details of a refusal of package rar; any other
// error (not expected) is a server error.
func detailsError(err error) *Error {
	var re *rar.Error
	if errors.As(err, &re) {
		return InvalidAuthorizationDetails("%s", re.Error())
	}
	return ServerError(err)
}

// ValidAuthorizationDetailsTypes checks a client's authorization_details_types at
// registration: each a type of the deployment's registry r, none repeated.
func ValidAuthorizationDetailsTypes(r *rar.Registry, types []string) error {
	seen := map[string]bool{}
	for _, t := range types {
		if !r.Has(t) {
			return fmt.Errorf("authorization_details_types: unknown type %q (known: %s)", t, strings.Join(r.Types(), ", "))
		}
		if seen[t] {
			return fmt.Errorf("authorization_details_types: %q is listed twice", t)
		}
		seen[t] = true
	}
	return nil
}
