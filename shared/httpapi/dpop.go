package httpapi

import (
	"errors"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// proofHeaders is the DPoP side of r: the method, the path and the DPoP header values; the
// domain checks the proof against this endpoint's URL under each public origin.
func proofHeaders(r *http.Request) oauth.ProofHeaders {
	return oauth.ProofHeaders{Method: r.Method, Path: r.URL.EscapedPath(), Values: r.Header.Values("DPoP")}
}

// writeNonce adds the DPoP-Nonce header of a use_dpop_nonce answer.
func writeNonce(w http.ResponseWriter, err error) {
	var ne *oauth.UseDPoPNonceError
	if errors.As(err, &ne) {
		w.Header().Set("DPoP-Nonce", ne.Nonce)
	}
}
