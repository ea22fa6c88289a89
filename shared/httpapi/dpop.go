package httpapi

import (
	"errors"
	"net/http"
	"net/url"

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

// authenticatedDPoPRequest is authenticatedRequest and the check of the request's DPoP proof
// (the key's thumbprint, "" without a proof), run at once: each may make one write (a client
// assertion's jti, the proof's jti), and the two are independent, so a FAPI client's token
// request waits for one round trip here, not two. With server nonces on, the response carries
// the current nonce either way, so a client always has a fresh one (RFC 9449 8.2).
func authenticatedDPoPRequest(w http.ResponseWriter, r *http.Request, svc *oauth.Service) (url.Values, *oauth.Client, oauth.ClientCredentials, string, error) {
	if svc.DPoPNonces != nil {
		w.Header().Set("DPoP-Nonce", svc.DPoPNonces.Current(svc.Clock.Now()))
	}
	type checked struct {
		jkt string
		err error
	}
	proof := make(chan checked, 1)
	d := dpopRequest(r, svc, true)
	go func() {
		jkt, err := svc.CheckDPoP(r.Context(), d)
		proof <- checked{jkt, err}
	}()
	v, client, cred, err := authenticatedRequest(w, r, svc)
	p := <-proof
	if err != nil {
		return nil, nil, cred, "", err
	}
	if p.err != nil {
		return nil, nil, cred, "", p.err
	}
	return v, client, cred, p.jkt, nil
}

// writeNonce adds the DPoP-Nonce header of a use_dpop_nonce answer.
func writeNonce(w http.ResponseWriter, err error) {
	var ne *oauth.UseDPoPNonceError
	if errors.As(err, &ne) {
		w.Header().Set("DPoP-Nonce", ne.Nonce)
	}
}
