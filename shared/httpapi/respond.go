package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/acmebank/authserver/shared/oauth"
)

// The header values of every JSON answer, shared so that setting them allocates nothing. Each
// has capacity 1, so a later Header.Add copies instead of writing into it; nothing may assign
// to their elements.
var (
	hdrJSONType = []string{"application/json;charset=UTF-8"}
	hdrNoStore  = []string{"no-store"}
	hdrNoCache  = []string{"no-cache"}
)

// setJSONHeaders sets the headers of a JSON answer. Every JSON answer of the service may carry
// a token or says something about one, so none may be cached (RFC 6749 5.1). The keys are in
// canonical form, as Header.Set would write them.
func setJSONHeaders(h http.Header) {
	h["Content-Type"] = hdrJSONType
	h["Cache-Control"] = hdrNoStore
	h["Pragma"] = hdrNoCache
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// bufPool holds the buffers the token response is encoded into; a Write does not keep its
// argument, so a buffer goes back to the pool as soon as it is written.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeTokenResponse writes the token endpoint's success (status 200). It is encoded by hand
// (appendTokenResponse), byte for byte what writeJSON's encoding/json would write, since it is
// the answer of every code exchange and refresh.
func writeTokenResponse(w http.ResponseWriter, resp *oauth.TokenResponse) {
	setJSONHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	bp := bufPool.Get().(*[]byte)
	b := appendTokenResponse((*bp)[:0], resp)
	_, _ = w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		bufPool.Put(bp)
	}
}

// appendTokenResponse appends r as encoding/json's Encoder writes an oauth.TokenResponse:
// fields in declaration order, id_token omitted when empty, HTML characters escaped, and a
// final newline. TestAppendTokenResponse_SameAsEncodingJSON holds the two together.
func appendTokenResponse(b []byte, r *oauth.TokenResponse) []byte {
	b = append(b, `{"access_token":`...)
	b = appendJSONString(b, r.AccessToken)
	b = append(b, `,"token_type":`...)
	b = appendJSONString(b, r.TokenType)
	b = append(b, `,"expires_in":`...)
	b = strconv.AppendInt(b, r.ExpiresIn, 10)
	b = append(b, `,"refresh_token":`...)
	b = appendJSONString(b, r.RefreshToken)
	b = append(b, `,"scope":`...)
	b = appendJSONString(b, r.Scope)
	if r.IDToken != "" {
		b = append(b, `,"id_token":`...)
		b = appendJSONString(b, r.IDToken)
	}
	b = append(b, `,"metadata":{"uid":`...)
	b = appendJSONString(b, r.Metadata.UID)
	b = append(b, `,"companyProfileId":`...)
	b = appendJSONString(b, r.Metadata.CompanyProfileID)
	b = append(b, `,"companyUserId":`...)
	b = appendJSONString(b, r.Metadata.CompanyUserID)
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string. Printable ASCII that needs no escape (every
// token, scope and identifier the service issues) is copied as it is; anything else is
// encoded by encoding/json itself, so the escaping is always exactly encoding/json's
// (HTML-safe, invalid UTF-8 replaced, U+2028 and U+2029 escaped).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(s) // a string always marshals
			return append(b, js...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// errorBody is RFC 6749 5.2's error response.
type errorBody struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description,omitempty"`
}

// writeError is the one place an error becomes an HTTP answer on the JSON endpoints: the RFC
// code and description go to the client; the internal cause goes to the log only.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := oauth.AsError(err)
	if e.Status >= 500 {
		log.ErrorContext(r.Context(), "request failed", slog.String("error", e.Code), slog.Any("cause", e.Cause))
	}
	if e.Code == oauth.ErrCodeInvalidClient {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth2", charset="UTF-8"`)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{Error: e.Code, ErrorDescription: e.Description})
}

// methodNotAllowed answers a method the endpoint does not serve.
func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: oauth.ErrCodeInvalidRequest, ErrorDescription: "method not allowed; use " + allow})
}
