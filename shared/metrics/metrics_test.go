package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/metrics"
	"github.com/acmebank/authserver/shared/metrics/emftest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/requestid"
)

// syncBuffer is a log sink many goroutines write to, as a function's stdout.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func counts(t *testing.T, log string) map[string]float64 {
	t.Helper()
	ms, err := emftest.Metrics(log)
	if err != nil {
		t.Fatalf("an EMF line breaks the specification: %v", err)
	}
	for _, m := range ms {
		if m.Namespace != metrics.Namespace {
			t.Errorf("namespace %q, want %q", m.Namespace, metrics.Namespace)
		}
	}
	return emftest.Count(ms)
}

// oauthError answers as httpapi's writeError does: an RFC 6749 5.2 JSON error body.
func oauthError(status int, code string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "the code_verifier ab12 does not match"})
	})
}

func redirect(location string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, location, http.StatusSeeOther) })
}

// TestRefusals_OneEMFLinePerErrorAnswerByItsRFCCode: every error answer of a JSON endpoint, and
// every error redirect to a client, is one valid EMF line counting Refusals with the RFC code as
// Reason (an unknown code as "other"); a success, a page and a redirect without an error are
// none; the answer reaches the client unchanged; nothing of the request is in the line.
func TestRefusals_OneEMFLinePerErrorAnswerByItsRFCCode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.Handler
		want    string // the Reason, "" for no line
	}{
		{"invalid_client", oauthError(401, oauth.ErrCodeInvalidClient), "invalid_client"},
		{"invalid_grant", oauthError(400, oauth.ErrCodeInvalidGrant), "invalid_grant"},
		{"use_dpop_nonce", oauthError(400, oauth.ErrCodeUseDPoPNonce), "use_dpop_nonce"},
		{"temporarily unavailable", oauthError(503, oauth.ErrCodeTemporarilyUnavailable), "temporarily_unavailable"},
		{"a code of no RFC", oauthError(400, "rt_secret-looking-value"), "other"},
		{"error redirect, query", redirect("https://client.example/cb?error=access_denied&state=s1"), "access_denied"},
		{"error redirect, fragment", redirect("https://client.example/cb#error=login_required&state=s1"), "login_required"},
		{"code redirect", redirect("https://client.example/cb?code=ac_secret&state=s1"), ""},
		{"success", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"at_secret","token_type":"Bearer"}`))
		}), ""},
		{"error page", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`<p>{"error":"invalid_request"}</p>`))
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			rec := metrics.New(&out, "token", "sandbox")
			direct := httptest.NewRecorder()
			tc.handler.ServeHTTP(direct, httptest.NewRequest("POST", "/token", nil))
			w := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/token", strings.NewReader("client_secret=cs1_secret"))
			req = req.WithContext(requestid.With(req.Context(), "req-1"))
			rec.Refusals(tc.handler).ServeHTTP(w, req)
			if w.Code != direct.Code || w.Body.String() != direct.Body.String() || w.Header().Get("Location") != direct.Header().Get("Location") {
				t.Errorf("the answer changed: %d %q, want %d %q", w.Code, w.Body, direct.Code, direct.Body)
			}
			got := counts(t, out.String())
			want := map[string]float64{}
			if tc.want != "" {
				want["Refusals Environment=sandbox Function=token Reason="+tc.want] = 1
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("metrics %v, want %v\n%s", got, want, out.String())
			}
			for _, secret := range []string{"cs1_secret", "at_secret", "ac_secret", "rt_secret", "ab12"} {
				if strings.Contains(out.String(), secret) {
					t.Errorf("the metric line carries %q: %s", secret, out.String())
				}
			}
			if tc.want != "" && !strings.Contains(out.String(), `"request_id":"req-1"`) {
				t.Errorf("the metric line lacks the request id: %s", out.String())
			}
		})
	}
}

// TestAudit_ExchangesAndSignInsAreCountedFromTheAuditRecords: the audit records the domain
// writes (oauth.WriteAudit) reach the audit log unchanged, and each exchange and each sign-in
// attempt is one EMF line with its grant type, or its factor and result; other events are none.
func TestAudit_ExchangesAndSignInsAreCountedFromTheAuditRecords(t *testing.T) {
	var out, auditOut syncBuffer
	rec := metrics.New(&out, "authorize", "production")
	audit := rec.Audit(slog.New(slog.NewJSONHandler(&auditOut, nil)).With("log", "audit"))
	ctx := context.Background()
	g := &oauth.Grant{ID: "g-1", ClientID: "cl_1", UID: "u-1"}
	events := []struct {
		event, reason string
	}{
		{"grant_issued", ""}, {"grant_refreshed", ""}, {"refresh_retry", ""}, {"grant_revoked", "code_reuse"},
		{"login_succeeded", ""}, {"login_failed", "bad_credentials"}, {"login_locked", "too_many_attempts"},
		{"factor_succeeded", "totp"}, {"factor_failed", "totp_step_used"}, {"factor_enrolled", "totp"},
		{"factor_failed", "recovery_code"}, {"factor_succeeded", "passkey"}, {"factor_failed", "passkey_malformed"},
		{"factor_locked", "too_many_attempts"}, {"consent_granted", ""}, {"client_credentials_issued", ""},
		{"ciba_issued", ""},
	}
	for _, e := range events {
		var attrs []slog.Attr
		if e.reason != "" {
			attrs = append(attrs, slog.String("reason", e.reason))
		}
		oauth.WriteAudit(ctx, audit, e.event, g, attrs...)
	}
	if n := strings.Count(auditOut.String(), `"log":"audit"`); n != len(events) {
		t.Errorf("%d audit records, want %d", n, len(events))
	}
	key := func(name string, kv ...string) string {
		dims := map[string]string{metrics.DimFunction: "authorize", metrics.DimEnvironment: "production"}
		for i := 0; i < len(kv); i += 2 {
			dims[kv[i]] = kv[i+1]
		}
		return emftest.Metric{Name: name, Dimensions: dims}.Key()
	}
	signIn := func(factor, result string) string {
		return key(metrics.SignIns, metrics.DimFactor, factor, metrics.DimResult, result)
	}
	want := map[string]float64{
		key(metrics.Exchanges, metrics.DimGrantType, "authorization_code"): 1,
		key(metrics.Exchanges, metrics.DimGrantType, "refresh_token"):      2,
		key(metrics.Exchanges, metrics.DimGrantType, "client_credentials"): 1,
		key(metrics.Exchanges, metrics.DimGrantType, "ciba"):               1,
		signIn("password", "success"):                                      1,
		signIn("password", "failure"):                                      2,
		signIn("totp", "success"):                                          2,
		signIn("totp", "failure"):                                          1,
		signIn("recovery_code", "failure"):                                 1,
		signIn("passkey", "success"):                                       1,
		signIn("passkey", "failure"):                                       1,
	}
	if got := counts(t, out.String()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("metrics\n got %v\nwant %v", got, want)
	}
	for _, v := range []string{"u-1", "cl_1", "g-1"} {
		if strings.Contains(out.String(), `"`+v+`"`) {
			t.Errorf("a metric line carries the audit record's %q", v)
		}
	}
}

// TestRefusals_FiftyRacingRefusalsAreFiftyValidLines: 50 requests refused at once through one
// Recorder write 50 whole EMF lines, none lost or interleaved.
func TestRefusals_FiftyRacingRefusalsAreFiftyValidLines(t *testing.T) {
	var out syncBuffer
	rec := metrics.New(&out, "token", "sandbox")
	srv := httptest.NewServer(rec.Refusals(oauthError(401, oauth.ErrCodeInvalidClient)))
	defer srv.Close()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL, "application/x-www-form-urlencoded", strings.NewReader("client_id=x"))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	got := counts(t, out.String())
	if n := got["Refusals Environment=sandbox Function=token Reason=invalid_client"]; n != 50 || len(got) != 1 {
		t.Errorf("metrics %v, want 50 invalid_client refusals", got)
	}
}

// TestNilRecorder_RecordsNothingAndChangesNothing: the local server has no Recorder; its
// handler and audit logger are the ones it passed.
func TestNilRecorder_RecordsNothingAndChangesNothing(t *testing.T) {
	var rec *metrics.Recorder
	h := oauthError(400, "invalid_grant")
	log := slog.Default()
	if rec.Audit(log) != log {
		t.Error("a nil Recorder wrapped the audit logger")
	}
	w := httptest.NewRecorder()
	rec.Refusals(h).ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
	rec.Exchange(context.Background(), "authorization_code")
	if w.Code != 400 {
		t.Errorf("status %d", w.Code)
	}
}

// TestReason_OnlyTheListedCodes: Reason keeps a listed code and turns anything else into
// "other", so the Reason dimension has len(Reasons) values at most.
func TestReason_OnlyTheListedCodes(t *testing.T) {
	for _, c := range metrics.Reasons {
		if metrics.Reason(c) != c {
			t.Errorf("Reason(%q) = %q", c, metrics.Reason(c))
		}
	}
	for _, c := range []string{"", "Invalid_Grant", "invalid_grant ", "u-1001"} {
		if metrics.Reason(c) != metrics.ReasonOther {
			t.Errorf("Reason(%q) = %q, want other", c, metrics.Reason(c))
		}
	}
}
