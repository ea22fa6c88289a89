package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
)

const pkceClientID = "pkce-client"

// withPKCEClient adds a client registered with require_pkce.
func withPKCEClient(t *testing.T, e *env) {
	t.Helper()
	f := &seed.File{Clients: []seed.Client{{ClientID: pkceClientID, ClientSecret: clientSecret, Name: "PKCE App",
		RedirectURIs: []string{redirectURI}, Scopes: []string{"openid", "email"}, RequirePKCE: true}}}
	if _, err := seed.Load(context.Background(), e.app.Store, f, cheapHasher, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// wantRedirectError checks that an authorization request went back to the client's redirect
// URI with the error and the state, and that it stored nothing.
func wantRedirectError(t *testing.T, e *env, authURL, want string) {
	t.Helper()
	before := e.writes.count()
	resp := newBrowser(t).open(authURL)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != want || loc.Query().Get("state") != "st-123" ||
		loc.Query().Get("error_description") == "" || !strings.HasPrefix(loc.String(), redirectURI) {
		t.Fatalf("answered %d %s, want a redirect with error=%s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	if n := e.writes.count(); n != before {
		t.Fatalf("a refused request stored something: %v", e.writes.list()[before:])
	}
}

// TestAuthorize_RequirePKCEClientCannotGetACodeWithoutChallenge: a client registered with
// require_pkce gets invalid_request at its redirect URI for a request without code_challenge,
// nothing stored; with one the flow works; a code issued before the client was made to require
// PKCE is refused at the token endpoint.
func TestAuthorize_RequirePKCEClientCannotGetACodeWithoutChallenge(t *testing.T) {
	e := newEnv(t)
	withPKCEClient(t, e)
	wantRedirectError(t, e, e.authorizeURL(url.Values{"client_id": {pkceClientID}}), "invalid_request")

	verifier := randomVerifier()
	code := e.code(t, url.Values{"client_id": {pkceClientID}, "code_challenge": {oauth.S256(verifier)}, "code_challenge_method": {"S256"}})
	st, body := e.exchange(t, code, url.Values{"client_id": {pkceClientID}, "client_secret": {clientSecret}, "code_verifier": {verifier}})
	if st != 200 {
		t.Fatalf("exchange with PKCE: %d %v", st, body["error"])
	}

	// A code issued without challenge while PKCE was optional, then the client made to require it.
	code = e.code(t, nil)
	if err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
		c.RequirePKCE = true
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	st, body = e.exchange(t, code, nil)
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("code without challenge for a require_pkce client: %d (error %v)", st, body["error"])
	}
	// The seeded client without require_pkce kept working until then (the documented request).
}

// TestAuthorize_UnsupportedRequestParametersRefused: request objects (by value or reference)
// and response modes other than query and JARM's jwt and query.jwt are refused with the OIDC errors at the redirect URI,
// nothing stored, and discovery says they are not supported.
func TestAuthorize_UnsupportedRequestParametersRefused(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name  string
		extra url.Values
		want  string
	}{
		{"request object", url.Values{"request": {"eyJhbGciOiJub25lIn0.eyJzY29wZSI6Im9wZW5pZCJ9."}}, "request_not_supported"},
		{"request_uri", url.Values{"request_uri": {"https://attacker.example/req.jwt"}}, "request_uri_not_supported"},
		{"response_mode fragment", url.Values{"response_mode": {"fragment"}}, "invalid_request"},
		{"response_mode form_post", url.Values{"response_mode": {"form_post"}}, "invalid_request"},
		{"response_mode unknown", url.Values{"response_mode": {"jwt.query"}}, "invalid_request"},
		{"response_mode form_post.jwt", url.Values{"response_mode": {"form_post.jwt"}}, "invalid_request"},
		{"response_mode fragment.jwt", url.Values{"response_mode": {"fragment.jwt"}}, "invalid_request"},
		{"response_mode repeated", url.Values{"response_mode": {"query", "query"}}, "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) { wantRedirectError(t, e, e.authorizeURL(c.extra), c.want) })
	}
	// A request_uri of the PAR form names a pushed request: an unknown one is an error page,
	// since nothing in the URL says where the user could safely be sent (TestPAR_*).
	t.Run("unknown PAR request_uri", func(t *testing.T) {
		resp := newBrowser(t).open(e.authorizeURL(url.Values{"request_uri": {"urn:ietf:params:oauth:request_uri:abc"}}))
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Fatalf("answered %d to %q, want an error page", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("response_mode query", func(t *testing.T) {
		resp := newBrowser(t).open(e.authorizeURL(url.Values{"response_mode": {"query"}}))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("response_mode=query answered %d", resp.StatusCode)
		}
	})
	t.Run("discovery", func(t *testing.T) {
		st, doc, _ := do(t, mustRequest(t, e.url(httpapi.PathDiscovery)))
		if st != 200 || doc["request_parameter_supported"] != false || doc["request_uri_parameter_supported"] != false {
			t.Fatalf("discovery %d: request_parameter_supported=%v request_uri_parameter_supported=%v", st,
				doc["request_parameter_supported"], doc["request_uri_parameter_supported"])
		}
		if modes := fmt.Sprint(doc["response_modes_supported"]); modes != "[query jwt query.jwt]" {
			t.Fatalf("response_modes_supported = %v, want [query jwt query.jwt]", modes)
		}
	})
}

func mustRequest(t *testing.T, u string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
