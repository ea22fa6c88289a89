package embedded_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bbolterrors "go.etcd.io/bbolt/errors"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// fill writes sessions until a write fails, as on a full disk, and returns that failure and the
// session it could not write.
func fill(t *testing.T, st *embedded.Store) (oauth.Session, error) {
	t.Helper()
	now := time.Now()
	for i := 0; i < 100_000; i++ {
		s := oauth.Session{Hash: oauth.HashToken(oauth.NewSecret("fill_")), UID: strings.Repeat("u", 2000), AuthTime: now, ExpiresAt: now.Add(time.Hour)}
		if err := st.PutSession(context.Background(), s); err != nil {
			return s, err
		}
	}
	t.Fatal("the store never filled up")
	return oauth.Session{}, nil
}

// A write that finds no room (bbolt's own failure when the file may not grow, as on a full
// disk) fails as a transient error and leaves the store as it was: what was written before is
// still there, the failed item is not, and once there is room again the same store (no
// restart) writes again.
func TestFullStore_WriteFailsTransientAndRecovers(t *testing.T) {
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true, MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, now := context.Background(), time.Now()
	kept := oauth.Session{Hash: oauth.HashToken(oauth.NewSecret("kept_")), UID: "u-kept", AuthTime: now, ExpiresAt: now.Add(time.Hour)}
	if err := st.PutSession(ctx, kept); err != nil {
		t.Fatal(err)
	}
	lost, err := fill(t, st)
	if !errors.Is(err, oauth.ErrTransient) || !errors.Is(err, bbolterrors.ErrMaxSizeReached) {
		t.Fatalf("a write into a full store: %v, want oauth.ErrTransient wrapping bbolt's ErrMaxSizeReached", err)
	}
	if _, err := st.GetSession(ctx, lost.Hash, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("the failed write left its item: %v", err)
	}
	if got, err := st.GetSession(ctx, kept.Hash, now); err != nil || got.UID != kept.UID {
		t.Fatalf("an item written before the store filled up: %+v, %v", got, err)
	}
	if err := st.SetMaxSize(64 << 20); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSession(ctx, lost); err != nil {
		t.Fatalf("a write once there is room again: %v", err)
	}
	if _, err := st.GetSession(ctx, lost.Hash, now); err != nil {
		t.Fatalf("the write after recovery is not there: %v", err)
	}
}

// Through the service: while the store cannot commit (FailCommits), the token endpoint answers 503
// temporarily_unavailable with Retry-After and the authorization endpoint a 503 page with
// Retry-After; nothing is half-done (the code survives the failed exchange, the refresh token
// the failed refresh); once writes succeed again the same server answers 200 and the very same
// code is exchanged and the very same refresh token refreshed.
func TestFullStore_ServiceAnswers503ThenRecoversWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := embedded.OpenWith(filepath.Join(dir, "data"), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keysBackend, err := localkey.New(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.AuditLog = filepath.Join(dir, "audit.jsonl")
	cfg.BaseURL = "http://127.0.0.1:1"
	cfg.Issuer = cfg.BaseURL + httpapi.PathPrefix
	a, err := app.Assemble(cfg, st, keysBackend, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mux, err := a.Mux()
	if err != nil {
		t.Fatal(err)
	}
	ctx, now := context.Background(), time.Now()
	const secret, redirect = "cs1_fault-test-secret-0123456789abcdef", "https://app.example/cb"
	client := oauth.Client{ID: "fault-client", Name: "Fault", SecretHashes: []oauth.SecretHash{{Hash: oauth.HashSecret(secret)}},
		RedirectURIs: []string{redirect}, Scopes: []string{"email"}, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateClient(ctx, client); err != nil {
		t.Fatal(err)
	}
	code := oauth.NewSecret(oauth.PrefixCode)
	grant := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: client.ID, UID: "u-1", Scopes: oauth.Scopes{"email"},
		AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	if err := st.CreateCode(ctx, oauth.Code{Hash: oauth.HashToken(code), Grant: grant, RedirectURI: redirect, ExpiresAt: now.Add(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	exchange := func() *httptest.ResponseRecorder {
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
			"client_id": {client.ID}, "client_secret": {secret}}
		r := httptest.NewRequest(http.MethodPost, httpapi.PathToken, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	authorize := func() *httptest.ResponseRecorder {
		q := url.Values{"response_type": {"code"}, "client_id": {client.ID}, "redirect_uri": {redirect}, "scope": {"email"}, "state": {"s"}}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, httpapi.PathAuthorize+"?"+q.Encode(), nil))
		return w
	}

	st.FailCommits(syscall.ENOSPC)
	w := exchange()
	var body struct{ Error string }
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != http.StatusServiceUnavailable || body.Error != oauth.ErrCodeTemporarilyUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("token endpoint on a full store: %d %s Retry-After=%q, want 503 temporarily_unavailable with Retry-After",
			w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if w := authorize(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("authorization endpoint on a full store: %d Retry-After=%q, want a 503 page with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}

	st.FailCommits(nil) // the disk has room again
	if w := authorize(); w.Code != http.StatusOK {
		t.Fatalf("authorization endpoint after recovery: %d, want 200", w.Code)
	}
	w = exchange()
	var tokens struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &tokens); w.Code != http.StatusOK || err != nil || tokens.AccessToken == "" {
		t.Fatalf("the same code after recovery: %d %s, want 200 with tokens (the failed exchange must not have spent it)", w.Code, w.Body)
	}

	// A refresh on the full store: 503 with Retry-After, and the refresh token is not spent
	// (its spend is part of the write that failed), so the same refresh works once there is
	// room again.
	refresh := func() *httptest.ResponseRecorder {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tokens.RefreshToken},
			"client_id": {client.ID}, "client_secret": {secret}}
		r := httptest.NewRequest(http.MethodPost, httpapi.PathToken, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	st.FailCommits(syscall.ENOSPC)
	if w := refresh(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("refresh on a full store: %d %s Retry-After=%q, want 503 with Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	st.FailCommits(nil)
	if w := refresh(); w.Code != http.StatusOK {
		t.Fatalf("the same refresh after recovery: %d %s, want 200 (the failed refresh must not have spent its token)", w.Code, w.Body)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", embedded.FileName)); err != nil {
		t.Fatal(err)
	}
}

// The readiness probe follows the store: 200 while it takes writes, 503 with Retry-After while
// it cannot commit, 200 again once it can, with no restart.
func TestReadiness_FollowsTheStoresWrites(t *testing.T) {
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mux := http.NewServeMux()
	(&httpapi.Health{Store: st, Clock: oauth.SystemClock{}, Timeout: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Register(mux)
	ready := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, httpapi.PathReady, nil))
		return w
	}
	if w := ready(); w.Code != http.StatusOK {
		t.Fatalf("readiness of a healthy store: %d", w.Code)
	}
	st.FailCommits(syscall.ENOSPC)
	if w := ready(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("readiness while commits fail: %d Retry-After=%q, want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	live := httptest.NewRecorder()
	mux.ServeHTTP(live, httptest.NewRequest(http.MethodGet, httpapi.PathLive, nil))
	if live.Code != http.StatusOK {
		t.Fatalf("liveness while the store fails: %d, want 200 (the process serves; restarting it would not help)", live.Code)
	}
	st.FailCommits(nil)
	if w := ready(); w.Code != http.StatusOK {
		t.Fatalf("readiness after the store recovered: %d", w.Code)
	}
}
