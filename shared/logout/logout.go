// Package logout ends a customer's browser session at the request of an app (OpenID
// RP-Initiated Logout 1.0) and tells the apps of that session (OpenID Back-Channel Logout 1.0).
// Its rules are here, not in the pages: which request is accepted (Check), what ending a
// session does (End), and how logout tokens are made and delivered (backchannel.go). The pages'
// adapter (shared/web) renders the confirmation page and calls these.
//
// What ends: the session the browser's cookie names, and nothing of another user's or another
// browser's. The grants given in that session (Grant.SID) are found by the user's grant
// listing filtered by sid (one Query of the user's partition of gsi1, no index of their own),
// and revoked for the clients whose LogoutRevokesGrants is set. Each of those clients with a
// backchannel_logout_uri gets one logout token, delivered concurrently within Bound.
package logout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Deps are what New builds a Service from; each is required but Audit.
type Deps struct {
	// Clients are the registered clients (their post_logout_redirect_uris and logout settings).
	Clients oauth.ClientStore
	// Interactions keep the sessions.
	Interactions oauth.InteractionStore
	// Grants are listed by user and revoked.
	Grants oauth.GrantStore
	// Keys is the key registry an id_token_hint is verified against.
	Keys oauth.KeyStore
	// Signer signs logout tokens with the id_token keys.
	Signer oauth.IDTokenSigner
	// Sender delivers logout tokens.
	Sender *Sender
	Clock  oauth.Clock
	Issuer string
	Log    *slog.Logger
	// Audit receives the logout's events (ids only, never a token); optional, nil is Log.
	Audit *slog.Logger
}

// Service is the end-session use case.
type Service struct{ d Deps }

// New returns the Service of d, or an error naming every missing dependency.
func New(d Deps) (*Service, error) {
	var missing []error
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, errors.New("logout: missing "+what))
		}
	}
	need(d.Clients != nil, "Clients")
	need(d.Interactions != nil, "Interactions")
	need(d.Grants != nil, "Grants")
	need(d.Keys != nil, "Keys")
	need(d.Signer != nil, "Signer")
	need(d.Sender != nil, "Sender")
	need(d.Clock != nil, "Clock")
	need(d.Issuer != "", "Issuer")
	need(d.Log != nil, "Log")
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	if d.Audit == nil {
		d.Audit = d.Log
	}
	return &Service{d: d}, nil
}

// Request is an RP-initiated logout request's parameters (RP-Initiated Logout 1.0 2).
type Request struct {
	IDTokenHint           string
	ClientID              string
	PostLogoutRedirectURI string
	State                 string
	UILocales             string
}

// Checked is a logout request that passed Check: the client it names (nil when it names
// none), where the browser goes afterwards ("" for our signed-out page) with its state, and
// what the hint said.
type Checked struct {
	Client      *oauth.Client
	RedirectURI string
	State       string
	UILocales   string
	// HintSub and HintSID are the hint's sub and sid ("" without a hint).
	HintSub, HintSID string
}

// Redirect is the URL the browser is sent to after the logout: the registered
// post_logout_redirect_uri with state added to its query; "" when there is none.
func (c *Checked) Redirect() string {
	if c.RedirectURI == "" {
		return ""
	}
	u, err := url.Parse(c.RedirectURI) // registered, so it parses
	if err != nil {
		return ""
	}
	if c.State != "" {
		q := u.Query()
		q.Set("state", c.State)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Bounds of the parameters: longer ones are refused before anything is read.
const (
	maxHint  = 16 << 10
	maxParam = 2048
)

// ErrBadRequest is a logout request refused: an unknown client, an unregistered
// post_logout_redirect_uri, a hint not signed by us or not the client's. The browser is never
// redirected for it, and nothing is changed.
var ErrBadRequest = errors.New("logout: bad request")

// ErrUnregisteredURI is the ErrBadRequest of a post_logout_redirect_uri the client did not
// register: the page says so, as the authorization endpoint's does for a redirect_uri.
var ErrUnregisteredURI = fmt.Errorf("%w: post_logout_redirect_uri is not registered for the client", ErrBadRequest)

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}

// Check validates a logout request and reads nothing but the client and the key registry: it
// changes nothing. A post_logout_redirect_uri needs a client (client_id, or the hint's
// audience) that registered it exactly; a hint must be an id_token we signed (expired ones
// are accepted, RP-Initiated Logout 1.0 2), for client_id when both are given.
func (s *Service) Check(ctx context.Context, r Request) (*Checked, error) {
	if len(r.IDTokenHint) > maxHint || len(r.ClientID) > maxParam || len(r.PostLogoutRedirectURI) > maxParam ||
		len(r.State) > maxParam || len(r.UILocales) > maxParam {
		return nil, bad("a parameter is too long")
	}
	out := &Checked{State: r.State, UILocales: r.UILocales}
	clientID := r.ClientID
	if r.IDTokenHint != "" {
		h, err := s.verifyHint(ctx, r.IDTokenHint)
		if err != nil {
			return nil, err
		}
		if clientID != "" && !slices.Contains(h.aud, clientID) {
			return nil, bad("the id_token_hint was not issued to client_id")
		}
		if clientID == "" {
			if len(h.aud) != 1 {
				return nil, bad("the id_token_hint has no single audience")
			}
			clientID = h.aud[0]
		}
		out.HintSub, out.HintSID = h.sub, h.sid
	}
	if clientID != "" {
		c, err := s.d.Clients.GetClient(ctx, clientID)
		if errors.Is(err, oauth.ErrNotFound) {
			return nil, bad("unknown client")
		}
		if err != nil {
			return nil, fmt.Errorf("logout: read client: %w", err)
		}
		if c.Disabled {
			return nil, bad("the client is disabled")
		}
		out.Client = &c
	}
	if r.PostLogoutRedirectURI != "" {
		if out.Client == nil {
			return nil, bad("post_logout_redirect_uri without client_id or id_token_hint")
		}
		if !out.Client.HasPostLogoutRedirectURI(r.PostLogoutRedirectURI) {
			return nil, ErrUnregisteredURI
		}
		out.RedirectURI = r.PostLogoutRedirectURI
	}
	return out, nil
}

// Ended is what End did.
type Ended struct {
	// UID and SID are the session's user and id; empty when no session was found (the
	// browser was signed out already).
	UID, SID string
	// Revoked are the grants revoked; Notified and Failed the clients whose back-channel
	// delivery succeeded and failed.
	Revoked, Notified, Failed []string
}

// End ends the session the cookie names: deletes it, revokes the grants given in it for the
// clients that ask so, and delivers a logout token to each client with a grant in it and a
// backchannel_logout_uri, all within Bound. A cookie naming no live session ends nothing. Only
// the cookie's own session, and grants of its user with its sid, are touched.
func (s *Service) End(ctx context.Context, cookie string) (Ended, error) {
	if cookie == "" || len(cookie) > 200 {
		return Ended{}, nil
	}
	now := s.d.Clock.Now()
	sess, err := s.d.Interactions.GetSession(ctx, oauth.HashToken(cookie), now)
	if errors.Is(err, oauth.ErrNotFound) {
		return Ended{}, nil
	}
	if err != nil {
		return Ended{}, fmt.Errorf("logout: read session: %w", err)
	}
	if err := s.d.Interactions.DeleteSession(ctx, sess.Hash); err != nil {
		return Ended{}, fmt.Errorf("logout: delete session: %w", err)
	}
	out := Ended{UID: sess.UID, SID: sess.SID}
	s.audit(ctx, "session_logout", sess.UID, slog.String("sid", sess.SID))
	if sess.SID == "" {
		return out, nil
	}
	list, err := s.d.Grants.ListGrants(ctx, oauth.GrantFilter{UID: sess.UID}, now)
	if err != nil {
		// The session has ended; its apps could not be found, so none is told.
		s.d.Log.ErrorContext(ctx, "logout: list the session's grants", slog.String("sid", sess.SID), slog.Any("err", err))
		return out, nil
	}
	byClient := map[string][]string{}
	var order []string
	for _, rec := range list {
		g := rec.Grant
		if rec.Revoked || g.SID != sess.SID || g.UID != sess.UID {
			continue
		}
		if _, ok := byClient[g.ClientID]; !ok {
			order = append(order, g.ClientID)
		}
		byClient[g.ClientID] = append(byClient[g.ClientID], g.ID)
	}
	var deliveries []delivery
	for _, id := range order {
		c, err := s.d.Clients.GetClient(ctx, id)
		if err != nil {
			s.d.Log.WarnContext(ctx, "logout: read a session's client", slog.String("client_id", id), slog.Any("err", err))
			continue
		}
		if c.LogoutRevokesGrants {
			for _, gid := range byClient[id] {
				if err := s.d.Grants.RevokeGrant(ctx, gid, now); err != nil {
					s.d.Log.ErrorContext(ctx, "logout: revoke a session's grant", slog.String("grant_id", gid), slog.Any("err", err))
					continue
				}
				out.Revoked = append(out.Revoked, gid)
				s.audit(ctx, "grant_revoked_at_logout", sess.UID, slog.String("grant_id", gid), slog.String("client_id", id))
			}
		}
		if c.BackchannelLogoutURI != "" {
			deliveries = append(deliveries, delivery{client: c})
		}
	}
	s.deliver(ctx, deliveries, sess, now, &out)
	return out, nil
}

// delivery is one client to tell.
type delivery struct {
	client   oauth.Client
	attempts int
	err      error
}

// deliver signs and sends every delivery's logout token concurrently, all within Bound of the
// sender, and audits each outcome (never the token).
func (s *Service) deliver(ctx context.Context, ds []delivery, sess oauth.Session, now time.Time, out *Ended) {
	if len(ds) == 0 {
		return
	}
	// The deliveries outlive neither the bound nor the request; a client's failure is
	// audited, not the customer's: the session has ended whatever the apps answer.
	ctx, cancel := context.WithTimeout(ctx, s.d.Sender.bound)
	defer cancel()
	var wg sync.WaitGroup
	for i := range ds {
		wg.Add(1)
		go func(d *delivery) {
			defer wg.Done()
			tok, err := s.logoutToken(ctx, &d.client, sess, now)
			if err != nil {
				d.err = err
				return
			}
			d.attempts, d.err = s.d.Sender.Send(ctx, d.client.BackchannelLogoutURI, tok)
		}(&ds[i])
	}
	wg.Wait()
	for _, d := range ds {
		if d.err != nil {
			out.Failed = append(out.Failed, d.client.ID)
			s.audit(ctx, "backchannel_logout_failed", sess.UID, slog.String("client_id", d.client.ID),
				slog.String("sid", sess.SID), slog.Int("attempts", d.attempts), slog.String("reason", d.err.Error()))
			continue
		}
		out.Notified = append(out.Notified, d.client.ID)
		s.audit(ctx, "backchannel_logout_sent", sess.UID, slog.String("client_id", d.client.ID),
			slog.String("sid", sess.SID), slog.Int("attempts", d.attempts))
	}
}

func (s *Service) audit(ctx context.Context, event, uid string, attrs ...slog.Attr) {
	oauth.WriteAudit(ctx, s.d.Audit, event, &oauth.Grant{UID: uid}, attrs...)
}
