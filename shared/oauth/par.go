package oauth

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Pushed authorization requests (RFC 9126). A client posts its authorization request to the
// PAR endpoint, authenticated as at the token endpoint; the request is validated there, kept
// for PushedRequestLifetime, and the client sends the user to authorize with only client_id
// and the request_uri it got back. The request's parameters then never travel through the
// browser, so they cannot be read or changed on the way, and the client is authenticated
// before any of them is used.

// RequestURIPrefix starts every request_uri the service issues (RFC 9126 2.2).
const RequestURIPrefix = "urn:ietf:params:oauth:request_uri:"

// PushedRequestLifetime is how long a request_uri can be used: long enough for a redirect,
// short as RFC 9126 7.1 recommends (FAPI 2.0 asks for less than 600 s).
const PushedRequestLifetime = 60 * time.Second

// pushedRequestID is the key a pushed request is kept under in the interaction store: a prefix
// of its own and the hash of the request_uri, so a stored key never reveals a usable
// request_uri and no pending request of the pages can be taken for a pushed one.
func pushedRequestID(requestURI string) string { return "pr_" + HashToken(requestURI) }

// PushAuthorizationRequest validates a pushed authorization request of an authenticated client
// and keeps it; it returns the request_uri and how long it lives. Errors are *Error (JSON at
// the PAR endpoint, RFC 9126 2.3): nothing is redirected and nothing is kept.
func (s *Service) PushAuthorizationRequest(ctx context.Context, client *Client, p AuthorizeParams, repeated []string) (string, time.Duration, error) {
	switch {
	case p.ClientID != "" && p.ClientID != client.ID:
		return "", 0, InvalidRequest("client_id does not match the authenticated client")
	case p.RequestURI != "":
		return "", 0, InvalidRequest("request_uri is not allowed in a pushed authorization request")
	case p.RedirectURI == "":
		// RFC 9126 leaves it to the request; FAPI 2.0 and OAuth 2.1 require it, and a pushed
		// request is always one the client composed itself.
		return "", 0, InvalidRequest("the redirect_uri parameter is required")
	}
	p.ClientID = client.ID
	_, req, err := s.validateAuthorize(ctx, p, repeated, pushedByClient)
	if err != nil {
		var ae *AuthorizeError
		if errors.As(err, &ae) {
			return "", 0, ae.Err
		}
		return "", 0, AsError(err)
	}
	// In a multi-region deployment the request_uri carries this region as its home, so the
	// authorize request that takes it, wherever the browser lands, takes it here.
	uri := RequestURIPrefix + NewSecret(s.homePrefix("pr_"))
	now := s.now()
	req.ID = pushedRequestID(uri)
	req.ExpiresAt = now.Add(PushedRequestLifetime)
	if err := s.Interactions.PutAuthRequest(ctx, *req); err != nil {
		return "", 0, AsError(err)
	}
	s.audit(ctx, "authorization_request_pushed", &Grant{ClientID: client.ID})
	return uri, PushedRequestLifetime, nil
}

// TakePushedRequest answers an authorization request that names a request_uri: the pushed
// request, taken once (of racing uses one succeeds), if it was pushed by clientID and has not
// expired. It returns the request as a new pending request of the pages, with its client.
// Every failure is an *AuthorizeError without a redirect: a request_uri that is unknown, used
// or another client's says nothing trustworthy about where to send the user.
func (s *Service) TakePushedRequest(ctx context.Context, clientID, requestURI string) (*Client, *AuthRequest, error) {
	bad := func(e *Error) (*Client, *AuthRequest, error) { return nil, nil, &AuthorizeError{Err: e} }
	if clientID == "" {
		return bad(InvalidRequest("the client_id parameter is required"))
	}
	if !strings.HasPrefix(requestURI, RequestURIPrefix) {
		return bad(InvalidRequest("request_uri is not one this server issued"))
	}
	if l := limitOf("request_uri"); len(requestURI) > l.Max {
		return bad(tooLongError(l))
	}
	now := s.now()
	ctx = WithHome(ctx, HomeOf(strings.TrimPrefix(requestURI, RequestURIPrefix)))
	req, err := s.Interactions.TakeAuthRequest(ctx, pushedRequestID(requestURI), now)
	if errors.Is(err, ErrNotFound) {
		return bad(InvalidRequest("request_uri is unknown, used or expired"))
	}
	if err != nil {
		return bad(AsError(err))
	}
	if req.ClientID != clientID {
		return bad(InvalidRequest("request_uri was pushed by another client"))
	}
	c, err := s.Clients.GetClient(ctx, req.ClientID)
	if err != nil {
		return bad(InvalidRequest("unknown client"))
	}
	if c.Disabled {
		return bad(UnauthorizedClient("the client is disabled"))
	}
	req.ID = NewID(PrefixRequest)
	req.CreatedAt, req.ExpiresAt = now, now.Add(s.Lifetimes.Request)
	return &c, &req, nil
}

// RequiresPAR reports whether authorization requests of c must be pushed: the client's
// registration or the deployment says so.
func (s *Service) RequiresPAR(c *Client) bool { return s.RequirePAR || c.RequirePAR || c.IsFAPI2() }
