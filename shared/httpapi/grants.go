package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/grantmgmt"
)

// GrantsHandler serves the grant management endpoint (Grant Management for OAuth 2.0) under
// PathGrants: GET /grants/{grant_id} answers the grant, DELETE revokes it (204). The access
// token comes in the Authorization header only (Bearer, or DPoP with its proof); the rules are
// package grantmgmt's. Errors carry RFC 6750's WWW-Authenticate challenge.
type GrantsHandler struct {
	Grants *grantmgmt.Manager
	Log    *slog.Logger
}

func (h *GrantsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, PathGrants+"/")
	if !ok || id == "" || strings.Contains(id, "/") {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodDelete {
		methodNotAllowed(w, "GET, DELETE")
		return
	}
	token, dpop, err := authorizer.AccessToken(r.Header.Get("Authorization"))
	if err != nil {
		writeBearerError(w, r, h.Log, err)
		return
	}
	thumb, _ := ClientCertificate(r)
	req := grantmgmt.Request{Method: r.Method, GrantID: id, Token: token, DPoP: dpop, CertThumbprint: thumb, Proof: proofHeaders(r)}
	if r.Method == http.MethodDelete {
		if err := h.Grants.Revoke(r.Context(), req); err != nil {
			writeBearerError(w, r, h.Log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	st, err := h.Grants.Query(r.Context(), req)
	if err != nil {
		writeBearerError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
