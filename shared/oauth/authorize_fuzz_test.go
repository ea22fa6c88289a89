package oauth

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oneClient is the client store of the authorization-request fuzz target.
type oneClient struct {
	ClientStore
	c Client
}

func (o oneClient) GetClient(_ context.Context, id string) (Client, error) {
	if id != o.c.ID {
		return Client{}, ErrNotFound
	}
	return o.c, nil
}

// FuzzAuthorizeRequest feeds any query string to ParseAuthorizeParams and ValidateAuthorize:
// no panic; an error that redirects goes only to a registered redirect URI (never an open
// redirector, RFC 9700 4.11); an accepted request names a registered URI, known and allowed
// scopes, an S256 challenge of the right alphabet, and bounded state and nonce.
func FuzzAuthorizeRequest(f *testing.F) {
	base := url.Values{"client_id": {"c1"}, "redirect_uri": {"https://app.example/cb"}, "scope": {"openid email"}, "state": {"xyz"}}
	f.Add(base.Encode())
	for _, extra := range []string{"&response_type=token", "&code_challenge=" + strings.Repeat("A", 43) + "&code_challenge_method=S256",
		"&code_challenge=abc&code_challenge_method=plain", "&scope=admin", "&max_age=-5", "&max_age=99999999999999999999",
		"&prompt=none%20login", "&state=" + strings.Repeat("s", 3000), "&client_id=c2", "&redirect_uri=https://evil.example/cb",
		"&scope=bank:transfers.write", "&nonce=n&nonce=m"} {
		f.Add(base.Encode() + extra)
	}
	for _, s := range []string{"", "client_id=c1", "client_id=c1&redirect_uri=https://APP.example/cb&scope=openid",
		"client_id=c1&redirect_uri=https://app.example/cb/&scope=openid", "client_id=c1&redirect_uri=https://app.example/cb%2F&scope=openid",
		"client_id=c1&redirect_uri=https://u@app.example/cb&scope=openid", "client_id=c1&redirect_uri=https://app.example/cb%23x&scope=openid",
		"client_id=%ff&scope=%", "client_id=c1;scope=openid"} {
		f.Add(s)
	}
	c := Client{ID: "c1", RedirectURIs: []string{"https://app.example/cb", "myapp:/cb?k=v"}, Scopes: []string{"openid", "email", "bank:transfers:write"}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{Clients: oneClient{c: c}, Clock: ClockFunc(func() time.Time { return now }), Issuer: "https://as.example",
		Lifetimes: Lifetimes{Request: time.Minute}}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return // the handler reads what net/http parsed; a malformed query parses partially
		}
		p, repeated := ParseAuthorizeParams(v)
		cl, req, err := s.ValidateAuthorize(context.Background(), p, repeated)
		if err != nil {
			var ae *AuthorizeError
			if !errors.As(err, &ae) || ae.Err == nil {
				t.Fatalf("error %v is not an *AuthorizeError", err)
			}
			if ae.Redirect != nil {
				if !slices.Contains(c.RedirectURIs, ae.Redirect.URI) {
					t.Fatalf("error redirects to unregistered %q", ae.Redirect.URI)
				}
				u, err := url.Parse(ae.Redirect.String())
				if err != nil || u.Query().Get("error") != ae.Err.Code || u.Query().Get("iss") != s.Issuer {
					t.Fatalf("error redirect %q malformed", ae.Redirect.String())
				}
				// The state comes back byte for byte, but for one over its limit, which is the
				// error and is not echoed (RFC 6749 4.1.2.1 asks for the state "if present": an
				// overlong one is refused as a whole).
				overlong := len(p.State) > limitOf("state").Max
				if got := u.Query().Get("state"); p.State != "" && !overlong && got != p.State || overlong && got != "" {
					t.Fatalf("state not returned intact (or an overlong one echoed)")
				}
			}
			return
		}
		if len(repeated) > 0 {
			t.Fatalf("accepted repeated %v", repeated)
		}
		if !slices.Contains(c.RedirectURIs, RedirectURIOf(req, cl)) {
			t.Fatalf("accepted redirect %q", RedirectURIOf(req, cl))
		}
		if err := req.Scopes.ValidateFor(cl); err != nil || len(req.Scopes) == 0 {
			t.Fatalf("accepted scopes %v: %v", req.Scopes, err)
		}
		if req.CodeChallenge != "" && (req.CodeChallengeMethod != "S256" || !validPKCEValue(req.CodeChallenge)) {
			t.Fatalf("accepted challenge %q method %q", req.CodeChallenge, req.CodeChallengeMethod)
		}
		if p.ResponseType != "" && p.ResponseType != "code" {
			t.Fatalf("accepted response_type %q", p.ResponseType)
		}
		if len(req.State) > 2048 || len(req.Nonce) > 2048 {
			t.Fatal("accepted an unbounded state or nonce")
		}
	})
}

// BenchmarkParseScopes_64KiB is the worst scope parameter a request body can carry: distinct
// names filling the body limit. It found a quadratic de-duplication that cost 2 s per request;
// linear, it takes milliseconds.
func BenchmarkParseScopes_64KiB(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 64<<10; i++ {
		sb.WriteString("s")
		sb.WriteString(strconv.Itoa(i))
		sb.WriteString(" ")
	}
	param := sb.String()
	b.ResetTimer()
	for b.Loop() {
		if len(ParseScopes(param)) < 10000 {
			b.Fatal("scopes lost")
		}
	}
}
