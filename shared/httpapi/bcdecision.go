package httpapi

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/ciba/appbackend"
	"github.com/acmebank/authserver/shared/oauth"
)

// BCDecisionHandler serves PathBCDecision: the bank's app backend POSTs a decision token
// (Content-Type application/jwt, the compact JWS as the body) and gets 204 once the decision
// is recorded. The rules are package appbackend's (the token) and ciba's (the decision);
// refusals are RFC 6750-style JSON errors with a WWW-Authenticate challenge for a token that
// is refused, and write nothing.
type BCDecisionHandler struct {
	Callback *appbackend.Callback
	Log      *slog.Logger
}

func (h *BCDecisionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/jwt" {
		writeError(w, r, h.Log, oauth.InvalidRequest("the decision token is posted as application/jwt"))
		return
	}
	// One byte past the bound is read, so an oversized token is refused by its rule.
	body, err := io.ReadAll(io.LimitReader(r.Body, appbackend.MaxTokenBytes+1))
	if err != nil {
		writeError(w, r, h.Log, oauth.InvalidRequest("the body could not be read"))
		return
	}
	if err := h.Callback.Handle(r.Context(), strings.TrimSpace(string(body))); err != nil {
		writeBearerError(w, r, h.Log, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
