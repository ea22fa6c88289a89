package httpapi

import (
	"errors"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// dpopRequest is the DPoP side of r for svc.CheckDPoP: the proof header, the method and the
// URLs of this endpoint under each public origin (RFC 9449 4.3: htu names the URL the client
// called, whichever host that was).
func dpopRequest(r *http.Request, svc *oauth.Service, nonceRequired bool) oauth.DPoPRequest {
	proofs := r.Header.Values("DPoP")
	urls := make([]string, 0, len(svc.Origins))
	for _, o := range svc.Origins {
		urls = append(urls, o+r.URL.EscapedPath())
	}
	d := oauth.DPoPRequest{Method: r.Method, URLs: urls, Repeated: len(proofs) > 1, NonceRequired: nonceRequired}
	if len(proofs) == 1 {
		d.Proof = proofs[0]
	}
	return d
}

// checkDPoP verifies the DPoP proof of a token or PAR request and returns its key's
// thumbprint ("" without a proof). With server nonces on, the response carries the current
// nonce either way, so a client always has a fresh one (RFC 9449 8.2).
func checkDPoP(w http.ResponseWriter, r *http.Request, svc *oauth.Service) (string, error) {
	if svc.DPoPNonces != nil {
		w.Header().Set("DPoP-Nonce", svc.DPoPNonces.Current(svc.Clock.Now()))
	}
	return svc.CheckDPoP(r.Context(), dpopRequest(r, svc, true))
}

// writeNonce adds the DPoP-Nonce header of a use_dpop_nonce answer.
func writeNonce(w http.ResponseWriter, err error) {
	var ne *oauth.UseDPoPNonceError
	if errors.As(err, &ne) {
		w.Header().Set("DPoP-Nonce", ne.Nonce)
	}
}
