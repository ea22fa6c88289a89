package httpapi

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// dpopRequest is the DPoP side of r for svc.VerifyDPoP: the proof header, the method and the
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

// authenticatedDPoPRequest is authenticatedRequest and the check of the request's DPoP proof
// (the key's thumbprint, "" without a proof). The proof is verified in memory and the client
// authenticated before anything is written; only then are the one-time values recorded (a
// client assertion's jti, the proof's jti), both at once, so a request refused for its client
// or its proof writes nothing and a FAPI client's token request waits for one write round
// trip, not two. With server nonces on, the response carries the current nonce either way, so
// a client always has a fresh one (RFC 9449 8.2).
func authenticatedDPoPRequest(w http.ResponseWriter, r *http.Request, svc *oauth.Service) (url.Values, *oauth.Client, oauth.ClientCredentials, string, error) {
	if svc.DPoPNonces != nil {
		w.Header().Set("DPoP-Nonce", svc.DPoPNonces.Current(svc.Clock.Now()))
	}
	proof, proofErr := svc.VerifyDPoP(dpopRequest(r, svc, true))
	v, client, cred, assertion, err := authenticatedRequestDeferred(w, r, svc)
	if err != nil {
		return nil, nil, cred, "", err
	}
	if proofErr != nil {
		return nil, nil, cred, "", proofErr
	}
	if err := svc.Record(oauth.WithHome(r.Context(), homeOf(v)), assertion, proof.Once); err != nil {
		return nil, nil, cred, "", err
	}
	return v, client, cred, proof.JKT, nil
}

// writeNonce adds the DPoP-Nonce header of a use_dpop_nonce answer.
func writeNonce(w http.ResponseWriter, err error) {
	var ne *oauth.UseDPoPNonceError
	if errors.As(err, &ne) {
		w.Header().Set("DPoP-Nonce", ne.Nonce)
	}
}

// homeOf is the home of the code or refresh token a token request carries (none for a pushed
// request): its one-time values are recorded there, beside the single-use write they guard
// (docs/multiregion.md).
func homeOf(v url.Values) string {
	switch v.Get("grant_type") {
	case "authorization_code":
		return oauth.HomeOf(v.Get("code"))
	case "refresh_token":
		return oauth.HomeOf(v.Get("refresh_token"))
	}
	return ""
}
