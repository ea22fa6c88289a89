package web

import (
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
)

func pageHandler(t *testing.T) *AuthorizeHandler {
	t.Helper()
	return &AuthorizeHandler{Pages: fuzzPages(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A page that fails part way through sends none of itself: the response is a whole error
// page (500, the unavailable kind) with its own Content-Length.
func TestRender_PageThatFailsPartWayBecomesAWholeErrorPage(t *testing.T) {
	h := pageHandler(t)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, httpapi.PathAuthorize, nil)
	h.render(w, r, "en", "https://app.example/cb", false, func(b io.Writer) error {
		_, _ = io.WriteString(b, "<!doctype html><p>half a page")
		return errors.New("template broke")
	})
	body := w.Body.String()
	if w.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", w.Code)
	}
	if strings.Contains(body, "half a page") || strings.Count(body, "<!doctype html>") != 1 {
		t.Errorf("the failed page's start was sent: %q", body)
	}
	if !strings.Contains(body, html.EscapeString(pages.Messages("en")["error.unavailable.heading"])) {
		t.Errorf("not the unavailable error page: %q", body)
	}
	if got := w.Header().Get("Content-Length"); got != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q for a body of %d bytes", got, len(body))
	}
	if csp := w.Header().Get("Content-Security-Policy"); strings.Contains(csp, "app.example") {
		t.Errorf("the error page allows the client as form target: %q", csp)
	}
}

func TestRender_PageGoesOutWithItsLengthAndFormTarget(t *testing.T) {
	h := pageHandler(t)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, httpapi.PathAuthorize, nil)
	client := &oauth.Client{Name: "Budget", RedirectURIs: []string{"https://app.example/cb"}}
	form := pages.Form{Action: httpapi.PathAuthorize, RequestID: "ar_1", CSRF: "c", Client: client, RedirectURI: "https://app.example/cb"}
	h.render(w, r, "fr", "https://app.example/cb", false, func(b io.Writer) error {
		return h.Pages.Login(b, "fr", form, "", pages.LoginProblem{})
	})
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `<html lang="fr">`) {
		t.Fatalf("status %d, body %q", w.Code, body)
	}
	if got := w.Header().Get("Content-Length"); got != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q for a body of %d bytes", got, len(body))
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "https://app.example") {
		t.Errorf("CSP form-action does not allow the client's redirect URI: %q", csp)
	}
}
