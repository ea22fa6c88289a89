package bench

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// The cost of the signed responses of FAPI 2.0 Message Signing next to their plain forms:
// a JARM authorization response (one signature with the id_token key) and an RFC 9701 JWT
// introspection response. Each reports cpu-µs/op and store-writes/op.

// writeCounter counts the store writes of the grant, interaction and one-time stores.
type writeCounter struct {
	oauth.Store
	n atomic.Int64
}

func (w *writeCounter) CreateCode(ctx context.Context, c oauth.Code) error {
	w.n.Add(1)
	return w.Store.CreateCode(ctx, c)
}

func (w *writeCounter) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	w.n.Add(1)
	return w.Store.IssueTokens(ctx, in, now)
}

func (w *writeCounter) PutAuthRequest(ctx context.Context, a oauth.AuthRequest) error {
	w.n.Add(1)
	return w.Store.PutAuthRequest(ctx, a)
}

func (w *writeCounter) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	w.n.Add(1)
	return w.Store.TakeAuthRequest(ctx, id, now)
}

func (w *writeCounter) UseOnce(ctx context.Context, key string, expires, now time.Time) error {
	w.n.Add(1)
	return w.Store.UseOnce(ctx, key, expires, now)
}

// countWrites puts a writeCounter in front of the service's stores.
func (s *bench) countWrites() *writeCounter {
	w := &writeCounter{Store: s.app.Store}
	s.app.Service.Grants, s.app.Service.Interactions, s.app.Service.Replay = w, w, w
	return w
}

func reportWrites(b *testing.B, w *writeCounter, before int64) {
	b.ReportMetric(float64(w.n.Load()-before)/float64(b.N), "store-writes/op")
}

// benchApprove is the authorization decision (Service.Approve: the code written, the redirect
// made) in a response mode: "" is the plain query, "jwt" the JARM response signed with the
// local key of alg.
func benchApprove(b *testing.B, mode, alg string) {
	s := setup(b)
	s.client.AuthorizationSignedResponseAlg = alg
	w := s.countWrites()
	ctx := context.Background()
	sess := &oauth.Session{UID: s.user.UID, AuthTime: time.Now()}
	r := &oauth.AuthRequest{ClientID: clientID, RedirectURI: redirectURI, Scopes: oauth.ParseScopes("openid email"),
		State: "s", Nonce: "n", ResponseMode: mode}
	before := w.n.Load()
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		to, err := s.app.Service.Approve(ctx, r, s.client, s.user, sess)
		if err != nil || (mode != "" && to.Params.Get("response") == "") {
			b.Fatalf("approve: %v", err)
		}
	}
	c.stop(b)
	reportWrites(b, w, before)
}

// BenchmarkApprove is the decision answered in the query (code, state, iss).
func BenchmarkApprove(b *testing.B) { benchApprove(b, "", "") }

// BenchmarkApproveJARM is the decision answered with a JARM response (response_mode=jwt),
// RS256 (the default) and ES256.
func BenchmarkApproveJARM(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) { benchApprove(b, oauth.ResponseModeJWT, alg) })
	}
}

// benchIntrospect introspects an access token over the handler, with the Accept header accept.
func benchIntrospect(b *testing.B, accept, wantType, alg string) {
	s := setup(b)
	if err := s.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
		c.IntrospectionSignedResponseAlg = alg
		return c, nil
	}); err != nil {
		b.Fatal(err)
	}
	at := s.exchange(b, s.codes(b, 1, "email")[0])["access_token"].(string)
	w := s.countWrites()
	body := url.Values{"token": {at}}.Encode()
	before := w.n.Load()
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		req := clientPost(httpapi.PathIntrospect, body)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if got := s.serve(b, req, http.StatusOK).Header().Get("Content-Type"); got != wantType {
			b.Fatalf("Content-Type %q, want %q", got, wantType)
		}
	}
	c.stop(b)
	reportWrites(b, w, before)
}

// BenchmarkIntrospect is RFC 7662's JSON answer.
func BenchmarkIntrospect(b *testing.B) {
	benchIntrospect(b, "", "application/json;charset=UTF-8", "")
}

// BenchmarkIntrospectJWT is the RFC 9701 answer: the same, signed with the local key, RS256
// (the default) and ES256.
func BenchmarkIntrospectJWT(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			benchIntrospect(b, "application/token-introspection+jwt", "application/token-introspection+jwt", alg)
		})
	}
}
