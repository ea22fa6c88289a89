package metrics

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"

	"github.com/acmebank/authserver/shared/oauth"
)

// Reasons are the values of the Reason dimension: the error codes the service answers with
// (shared/oauth), and "other" for anything else, so that no value of a request can become a
// dimension.
var Reasons = []string{
	oauth.ErrCodeInvalidRequest, oauth.ErrCodeInvalidClient, oauth.ErrCodeInvalidGrant,
	oauth.ErrCodeUnauthorizedClient, oauth.ErrCodeUnsupportedGrantType, oauth.ErrCodeUnsupportedResponseType,
	oauth.ErrCodeUnsupportedTokenType, oauth.ErrCodeInvalidScope, oauth.ErrCodeAccessDenied,
	oauth.ErrCodeServerError, oauth.ErrCodeTemporarilyUnavailable, oauth.ErrCodeInvalidToken,
	oauth.ErrCodeInsufficientScope, oauth.ErrCodeLoginRequired, oauth.ErrCodeRequestNotSupported,
	oauth.ErrCodeRequestURINotSupported, oauth.ErrCodeInvalidRequestObject, oauth.ErrCodeInvalidDPoPProof,
	oauth.ErrCodeUseDPoPNonce, ReasonOther,
}

// ReasonOther is the Reason of an error code not in Reasons.
const ReasonOther = "other"

// Reason is code when it is one of Reasons, else ReasonOther.
func Reason(code string) string {
	if slices.Contains(Reasons, code) {
		return code
	}
	return ReasonOther
}

// maxErrorBody bounds what Refusals keeps of an error answer's body: an RFC 6749 5.2 error
// object is a code and a short description.
const maxErrorBody = 4096

// Refusals returns next with every error answer it sends recorded as a refusal, by the RFC
// error code the client receives: the "error" member of a JSON error body (status 400 and
// above: RFC 6749 5.2, RFC 6750 3.1, RFC 7009 2.2.1, RFC 9449 7.1), or the "error" parameter of
// a redirect to the client (RFC 6749 4.1.2.1, in the query or the fragment). Answers with no
// such code (a page, a JWT-secured response) are not counted. The answer itself is not
// changed. With a nil Recorder it returns next.
func (r *Recorder) Refusals(next http.Handler) http.Handler {
	if r == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rw := &recorder{ResponseWriter: w}
		next.ServeHTTP(rw, req)
		if code := rw.errorCode(); code != "" {
			r.Refusal(req.Context(), code)
		}
	})
}

// recorder keeps the status, and the beginning of the body of a JSON error answer.
type recorder struct {
	http.ResponseWriter
	status int
	keep   bool
	body   bytes.Buffer
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		ct, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
		w.keep = status >= 400 && ct == "application/json"
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.keep && w.body.Len() < maxErrorBody {
		w.body.Write(p[:min(len(p), maxErrorBody-w.body.Len())])
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the adapter's writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// errorCode is the RFC error code of the answer, "" when it carries none.
func (w *recorder) errorCode() string {
	switch {
	case w.keep:
		var body struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(w.body.Bytes(), &body) == nil {
			return body.Error
		}
	case w.status >= 300 && w.status < 400:
		loc, err := url.Parse(w.Header().Get("Location"))
		if err != nil {
			return ""
		}
		if code := loc.Query().Get("error"); code != "" {
			return code
		}
		if frag, err := url.ParseQuery(loc.Fragment); err == nil {
			return frag.Get("error")
		}
	}
	return ""
}
