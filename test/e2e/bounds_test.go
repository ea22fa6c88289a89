package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// overLimit is a value one byte over limit l.
func overLimit(l oauth.ParamLimit) string { return strings.Repeat("a", l.Max+1) }

// limitDescription is what the refusal of a parameter over its limit says.
func limitDescription(l oauth.ParamLimit) string {
	return fmt.Sprintf("the %s parameter may be at most %d bytes", l.Name, l.Max)
}

// TestAuthorize_EveryParameterOverItsLimitRefusedAndNothingStored: for every parameter a
// pending request keeps, a value one byte over its limit is refused with invalid_request naming
// the parameter and its limit, sent by GET and by POST: at the client's redirect URI (without
// echoing an overlong state), or on an error page when the client_id or redirect_uri itself is
// over its limit. Nothing is stored.
func TestAuthorize_EveryParameterOverItsLimitRefusedAndNothingStored(t *testing.T) {
	e := newEnv(t)
	for _, l := range oauth.AuthorizeParamLimits() {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(method+" "+l.Name, func(t *testing.T) {
				before := e.writes.count()
				q, _ := url.ParseQuery(strings.SplitN(e.authorizeURL(nil), "?", 2)[1])
				q.Set(l.Name, overLimit(l))
				if l.Name == "request_uri" {
					// A request_uri of ours is taken as a pushed request's name; an overlong one is
					// refused there, on the error page (nothing says where to send the user).
					q.Set(l.Name, oauth.RequestURIPrefix+overLimit(l))
				}
				b := newBrowser(t)
				var resp *http.Response
				if method == http.MethodGet {
					resp = b.open(e.url(httpapi.PathAuthorize) + "?" + q.Encode())
				} else {
					var err error
					if resp, err = b.client.PostForm(e.url(httpapi.PathAuthorize), q); err != nil {
						t.Fatal(err)
					}
					b.read(resp)
				}
				switch l.Name {
				case "client_id", "redirect_uri", "request_uri":
					if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
						t.Fatalf("answered %d (Location %q), want the 400 error page", resp.StatusCode, resp.Header.Get("Location"))
					}
				default:
					loc, _ := url.Parse(resp.Header.Get("Location"))
					lq := loc.Query()
					if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc.String(), redirectURI) ||
						lq.Get("error") != "invalid_request" || lq.Get("error_description") != limitDescription(l) {
						t.Fatalf("answered %d %.300s, want a redirect with invalid_request: %s", resp.StatusCode, loc, limitDescription(l))
					}
					wantState := "st-123"
					if l.Name == "state" {
						wantState = "" // an overlong state is not sent back
					}
					if lq.Get("state") != wantState {
						t.Fatalf("state %.40q in the redirect, want %q", lq.Get("state"), wantState)
					}
				}
				if n := e.writes.count(); n != before {
					t.Fatalf("a refused request stored something: %v", e.writes.list()[before:])
				}
			})
		}
	}
}

// TestAuthorize_ParametersAtTheirLimitsAccepted: the limits refuse nothing a real client sends:
// a request with state, nonce, ui_locales and acr_values each exactly at its limit gets the
// login page and is stored.
func TestAuthorize_ParametersAtTheirLimitsAccepted(t *testing.T) {
	e := newEnv(t)
	extra := url.Values{}
	for _, l := range oauth.AuthorizeParamLimits() {
		switch l.Name {
		case "state", "nonce", "ui_locales", "acr_values":
			extra.Set(l.Name, strings.Repeat("a", l.Max))
		}
	}
	before := e.writes.count()
	resp := newBrowser(t).open(e.authorizeURL(extra))
	if resp.StatusCode != http.StatusOK || e.writes.count() != before+1 {
		t.Fatalf("answered %d with %d writes, want the login page and one stored request", resp.StatusCode, e.writes.count()-before)
	}
}

// TestAuthorize_RequestOverTheStoredSizeRefused: the backstop behind the per-parameter limits:
// a request whose stored encoding would exceed oauth.MaxAuthRequestBytes (a state and a nonce
// at their limits, of characters JSON escapes to six bytes) is refused with invalid_request at
// the redirect URI, nothing stored.
func TestAuthorize_RequestOverTheStoredSizeRefused(t *testing.T) {
	e := newEnv(t)
	extra := url.Values{"state": {strings.Repeat("<", 2048)}, "nonce": {strings.Repeat("<", 2048)}}
	before := e.writes.count()
	resp := newBrowser(t).open(e.authorizeURL(extra))
	loc, _ := url.Parse(resp.Header.Get("Location"))
	want := fmt.Sprintf("the authorization request may be at most %d bytes as stored", oauth.MaxAuthRequestBytes)
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" || loc.Query().Get("error_description") != want {
		t.Fatalf("answered %d %.200s, want invalid_request: %s", resp.StatusCode, loc, want)
	}
	if n := e.writes.count(); n != before {
		t.Fatalf("a refused request stored something: %v", e.writes.list()[before:])
	}
}

// TestPAR_EveryParameterOverItsLimitRefusedAndNothingStored: a pushed request with any stored
// parameter one byte over its limit is refused at the PAR endpoint with invalid_request (JSON,
// 400) naming the parameter and its limit; nothing is stored.
func TestPAR_EveryParameterOverItsLimitRefusedAndNothingStored(t *testing.T) {
	e := newEnv(t)
	for _, l := range oauth.AuthorizeParamLimits() {
		switch l.Name {
		case "client_id", "request_uri":
			continue // the authenticated client's; refused in a push whatever its length
		}
		t.Run(l.Name, func(t *testing.T) {
			p := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
			p.Set(l.Name, overLimit(l))
			before := e.writes.count()
			st, body, _ := e.post(t, httpapi.PathPAR, p, true, false)
			if st != http.StatusBadRequest || body["error"] != "invalid_request" || body["error_description"] != limitDescription(l) {
				t.Fatalf("%d %v, want 400 invalid_request: %s", st, body, limitDescription(l))
			}
			if n := e.writes.count(); n != before {
				t.Fatalf("a refused push stored something: %v", e.writes.list()[before:])
			}
		})
	}
}

// TestAuthorize_PendingCapRefusesNewRequestsKeepsSignInsInProgress: with the embedded store's
// cap on pending requests reached (AUTH_EMBEDDED_MAX_PENDING_MB=1 and large requests), a new
// authorization request or push is answered temporarily_unavailable, 503 with Retry-After, and
// nothing stored; a sign-in started before the cap was reached is not evicted and ends with a
// code.
func TestAuthorize_PendingCapRefusesNewRequestsKeepsSignInsInProgress(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvMaxPendingMB: "1"}})
	user := newBrowser(t)
	if resp := user.open(e.authorizeURL(nil)); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	big := url.Values{"state": {strings.Repeat("s", 2048)}, "nonce": {strings.Repeat("n", 2048)},
		"ui_locales": {strings.Repeat("u", 256)}, "acr_values": {strings.Repeat("a", 512)}}
	var full *http.Response
	for i := 0; i < 1000 && full == nil; i++ { // about 5 KB each: the cap is reached within 250
		b := newBrowser(t)
		if resp := b.open(e.authorizeURL(big)); resp.StatusCode != http.StatusOK {
			full = resp
		}
	}
	if full == nil || full.StatusCode != http.StatusServiceUnavailable || full.Header.Get("Retry-After") == "" {
		t.Fatalf("no 503 with Retry-After once the cap was reached: %v", full)
	}
	st0 := e.app.Store.(*embedded.Store)
	kept, err := st0.PendingBytes()
	if err != nil || kept > 1<<20 {
		t.Fatalf("pending requests take %d bytes (%v), over the 1 MiB cap", kept, err)
	}
	if resp := newBrowser(t).open(e.authorizeURL(big)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a new request at the cap: %d, want 503", resp.StatusCode)
	}
	push := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	for k, v := range big {
		push[k] = v
	}
	st, body, h := e.post(t, httpapi.PathPAR, push, true, false)
	if st != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" || h.Get("Retry-After") == "" {
		t.Fatalf("a push at the cap: %d %v (Retry-After %q), want 503 temporarily_unavailable", st, body, h.Get("Retry-After"))
	}
	if now, err := st0.PendingBytes(); err != nil || now != kept {
		t.Fatalf("refused requests changed what is kept: %d bytes, then %d (%v)", kept, now, err)
	}
	user.login(e, username, password)
	loc := user.decide(e, "allow")
	if loc.Query().Get("code") == "" {
		t.Fatalf("the sign-in in progress got no code: %s", loc.Redacted())
	}
}
