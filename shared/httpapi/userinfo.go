package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/resource"
)

// UserinfoHandler serves the OIDC UserInfo endpoint (OIDC Core 5.3) on GET and POST: it reads
// the access token and hands it to the resource check (shared/resource), which answers the
// claims. A token bound to a client certificate (RFC 8705) is accepted only with that
// certificate. Errors carry RFC 6750's WWW-Authenticate challenge.
type UserinfoHandler struct {
	Resource *resource.Checker
	Log      *slog.Logger
}

func (h *UserinfoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		methodNotAllowed(w, "GET, POST")
		return
	}
	claims, err := h.userinfo(w, r)
	if err != nil {
		writeBearerError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, claims)
}

func (h *UserinfoHandler) userinfo(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	token, dpop, err := userinfoToken(w, r)
	if err != nil {
		return nil, err
	}
	thumb, _ := ClientCertificate(r)
	return h.Resource.UserInfo(r.Context(), resource.UserInfoRequest{Token: token, DPoP: dpop, CertThumbprint: thumb, Proof: proofHeaders(r)})
}

// userinfoToken finds the access token: in the Authorization header (RFC 6750 2.1) or, on a
// POST, as access_token in a form body (2.2), never both (RFC 6750 2: one method only). The
// query (2.3) is refused: URLs end up in logs and histories.
func userinfoToken(w http.ResponseWriter, r *http.Request) (token string, dpop bool, err error) {
	if _, inQuery := r.URL.Query()["access_token"]; inQuery {
		return "", false, oauth.InvalidRequest("send the access token in the Authorization header, not in the URL")
	}
	header := r.Header.Get("Authorization")
	var body url.Values
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		if r.Header.Get("Content-Type") != "" {
			v, err := readParams(w, r)
			if err != nil {
				return "", false, err
			}
			body = v
		} else if n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 1)); n > 0 {
			return "", false, oauth.InvalidRequest("a request body needs Content-Type application/x-www-form-urlencoded")
		}
	}
	inBody := body.Get("access_token")
	switch {
	case header != "" && inBody != "":
		return "", false, oauth.InvalidRequest("send the access token one way only: the Authorization header or the body")
	case inBody != "":
		return inBody, false, nil
	}
	return authorizer.AccessToken(header)
}
