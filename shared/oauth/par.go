package oauth

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
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
	req, err := s.validatePush(ctx, client, p, repeated)
	if err != nil {
		return "", 0, err
	}
	return s.keepPushed(ctx, client, req)
}

// pushedParams reads the authorization request of a push by client: from the signed request
// object of the request parameter when there is one, else from the form. With a request
// object, only its claims count (RFC 9101 6.3: the server "MUST only use the parameters in
// the Request Object"; FAPI 1.0 Advanced 5.2.2-10 likewise): the form's other authorization
// parameters, which RFC 9126 3 says a client does not send beside it, are ignored. A client
// registered with require_signed_request_object (RFC 9101 10.5) must send one.
func (s *Service) pushedParams(ctx context.Context, client *Client, params url.Values) (AuthorizeParams, []string, error) {
	switch n := len(params["request"]); {
	case n > 1:
		return AuthorizeParams{}, nil, InvalidRequest("the request parameter is repeated")
	case n == 0 && client.RequireSignedRequestObject:
		return AuthorizeParams{}, nil, InvalidRequest("this client must send its authorization request as a signed request object (the request parameter, RFC 9101)")
	case n == 0:
		p, repeated := ParseAuthorizeParams(params)
		return p, repeated, nil
	}
	claims, err := s.verifyRequestObject(ctx, client, params.Get("request"))
	if err != nil {
		return AuthorizeParams{}, nil, err
	}
	p, _ := ParseAuthorizeParams(claims)
	return p, nil, nil
}

// validatePush checks a pushed authorization request of an authenticated client and returns
// the pending request to keep.
func (s *Service) validatePush(ctx context.Context, client *Client, p AuthorizeParams, repeated []string) (*AuthRequest, error) {
	switch {
	case p.ClientID != "" && p.ClientID != client.ID:
		return nil, InvalidRequest("client_id does not match the authenticated client")
	case p.RequestURI != "":
		return nil, InvalidRequest("request_uri is not allowed in a pushed authorization request")
	case p.RedirectURI == "":
		// RFC 9126 leaves it to the request; FAPI 2.0 and OAuth 2.1 require it, and a pushed
		// request is always one the client composed itself.
		return nil, InvalidRequest("the redirect_uri parameter is required")
	}
	p.ClientID = client.ID
	_, req, err := s.validateAuthorize(ctx, p, repeated, pushedByClient)
	if err != nil {
		var ae *AuthorizeError
		if errors.As(err, &ae) {
			return nil, ae.Err
		}
		return nil, AsError(err)
	}
	return req, nil
}

// keepPushed stores a validated pushed request under a new request_uri.
func (s *Service) keepPushed(ctx context.Context, client *Client, req *AuthRequest) (string, time.Duration, error) {
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

// OpenPushedRequest answers an authorization request that names a request_uri: the pushed
// request, if it was pushed by clientID and has not expired, as a new pending request of the
// pages, with its client. It only reads the pushed request: opening it again (a reload, a link
// prefetch, 50 browsers at once) opens it again, and a request naming another client, or an
// unknown one, changes nothing, so the right client's user can still use it. The request_uri
// is spent once, at the decision on the request (spendPushed, from Approve and Deny): FAPI 2.0
// Security Profile (Final) 5.3.2.2, the note on request_uri reuse; RFC 9126 4 and 7.3 allow a
// reload. Every failure is an *AuthorizeError without a redirect: a request_uri that is unknown,
// used or another client's says nothing trustworthy about where to send the user.
func (s *Service) OpenPushedRequest(ctx context.Context, clientID, requestURI string) (*Client, *AuthRequest, error) {
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
	home := HomeOf(strings.TrimPrefix(requestURI, RequestURIPrefix))
	pushedID := pushedRequestID(requestURI)
	req, err := s.Interactions.GetAuthRequest(WithHome(ctx, home), pushedID, now)
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
	req.PushedID, req.PushedHome = pushedID, home
	req.CreatedAt, req.ExpiresAt = now, now.Add(s.Lifetimes.Request)
	return &c, &req, nil
}

// ErrRequestURIUsed is a decision on a pending request whose request_uri another decision has
// spent (two browsers on one request_uri): nothing is issued.
var ErrRequestURIUsed = errors.New("oauth: the request_uri was used by another decision")

// spendPushed spends the request_uri a pending request was opened from, once: of racing
// decisions on pending requests opened from one request_uri, one spends it and the others get
// ErrRequestURIUsed (a ReplayStore.UseOnce at the request_uri's home). The pushed request is
// then deleted, so the request_uri opens no new page. The mark outlives every page the
// request_uri can have opened: each was opened before the pushed request expired, within
// PushedRequestLifetime of now, and lives Lifetimes.Request. A request that was not pushed
// spends nothing.
func (s *Service) spendPushed(ctx context.Context, r *AuthRequest) error {
	if r.PushedID == "" {
		return nil
	}
	ctx = WithHome(ctx, r.PushedHome)
	now := s.now()
	err := s.Replay.UseOnce(ctx, "request_uri:"+r.PushedID, now.Add(PushedRequestLifetime+s.Lifetimes.Request), now)
	if errors.Is(err, ErrUsed) {
		return ErrRequestURIUsed
	}
	if err != nil {
		return AsError(err)
	}
	// The mark decides; the delete only saves a page that could not be decided. A failed one
	// leaves the pushed request to expire.
	if _, err := s.Interactions.TakeAuthRequest(ctx, r.PushedID, now); err != nil && !errors.Is(err, ErrNotFound) {
		s.Log.WarnContext(ctx, "delete a spent pushed request", slog.Any("err", err))
	}
	return nil
}

// RequiresPAR reports whether authorization requests of c must be pushed: the client's
// registration or the deployment says so.
func (s *Service) RequiresPAR(c *Client) bool { return s.RequirePAR || c.RequirePAR || c.IsFAPI2() }
