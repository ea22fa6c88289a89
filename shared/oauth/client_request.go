package oauth

import (
	"context"
	"net/url"
	"time"
)

// ProofHeaders are the DPoP side of an HTTP request, as the adapter read it: the method, the
// path it was served on and the values of its DPoP headers (RFC 9449 4.1).
type ProofHeaders struct {
	Method string
	Path   string
	Values []string
}

// ClientRequest is a client-authenticated request to a JSON endpoint (token, PAR, revocation,
// introspection) as the domain sees it.
type ClientRequest struct {
	Credentials ClientCredentials
	// Proof is the request's DPoP side; nil at the endpoints that take no proof (revocation,
	// introspection).
	Proof *ProofHeaders
	// Home is where the request's one-time values are recorded: the home of the code or refresh
	// token it spends, beside the single-use write they guard ("" for the local replica;
	// docs/multiregion.md).
	Home string
}

// DPoPNonce is the DPoP-Nonce a token or PAR answer carries (RFC 9449 8.2), "" with server
// nonces off. It is sent on every answer, refusals included, so a client always has a fresh one.
func (s *Service) DPoPNonce() string {
	if s.DPoPNonces == nil {
		return ""
	}
	return s.DPoPNonces.Current(s.now())
}

// ProofRequest is the proof of h for VerifyDPoP: the URLs of its path under each public origin
// (RFC 9449 4.3: htu names the URL the client called, whichever host that was). It asks for no
// server nonce; the token and PAR endpoints set NonceRequired.
func (s *Service) ProofRequest(h ProofHeaders) DPoPRequest {
	urls := make([]string, 0, len(s.Origins))
	for _, o := range s.Origins {
		urls = append(urls, o+h.Path)
	}
	d := DPoPRequest{Method: h.Method, URLs: urls, Repeated: len(h.Values) > 1}
	if len(h.Values) == 1 {
		d.Proof = h.Values[0]
	}
	return d
}

// AuthenticateRequest authenticates the client of r and checks its DPoP proof, if any, and
// returns the client and the proof key's thumbprint ("" without a proof). The proof is verified
// in memory and the client authenticated before anything is written; only then are the
// one-time values recorded (a client assertion's jti, the proof's jti), both at once, so a
// request refused for its client or its proof writes nothing. The token endpoint uses
// AuthenticateTokenRequest instead, whose grant records them with its own write.
func (s *Service) AuthenticateRequest(ctx context.Context, r ClientRequest) (*Client, string, error) {
	a, err := s.authenticateDeferred(ctx, r)
	if err != nil {
		return nil, "", err
	}
	if err := a.record(ctx, s); err != nil {
		return nil, "", err
	}
	return a.client, a.proof.JKT, nil
}

// AuthenticateTokenRequest is AuthenticateRequest for the token endpoint's grants: it writes
// nothing and returns the request's one-time values (the client assertion's jti, the proof's
// jti), which the grant records in the one write that spends its code or refresh token
// (CodeExchange.Once, RefreshRequest.Once). So a request refused anywhere writes no jti, a
// replayed jti spends no code and no refresh token, and a FAPI token request costs the store
// writes of a plain one.
func (s *Service) AuthenticateTokenRequest(ctx context.Context, r ClientRequest) (*Client, string, []OneTime, error) {
	a, err := s.authenticateDeferred(ctx, r)
	if err != nil {
		return nil, "", nil, err
	}
	return a.client, a.proof.JKT, onceValues(a.assertion, a.proof.Once), nil
}

// onceValues drops the zero values.
func onceValues(values ...OneTime) []OneTime {
	var out []OneTime
	for _, v := range values {
		if !v.IsZero() {
			out = append(out, v)
		}
	}
	return out
}

// authenticatedRequest is a client request whose client and proof were checked, with the
// one-time values still to record (record) once the rest of the request has passed.
type authenticatedRequest struct {
	client    *Client
	proof     DPoPProof
	assertion OneTime
	home      string
}

func (a authenticatedRequest) record(ctx context.Context, s *Service) error {
	return s.Record(WithHome(ctx, a.home), a.assertion, a.proof.Once)
}

// authenticateDeferred is AuthenticateRequest without the writes: the caller records them
// (authenticatedRequest.record) after its own checks, so a request refused by them writes
// nothing either.
func (s *Service) authenticateDeferred(ctx context.Context, r ClientRequest) (authenticatedRequest, error) {
	var proof DPoPProof
	var proofErr error
	if r.Proof != nil {
		req := s.ProofRequest(*r.Proof)
		req.NonceRequired = true // the token and PAR endpoints can answer use_dpop_nonce
		proof, proofErr = s.VerifyDPoP(req)
	}
	client, assertion, err := s.AuthenticateClientDeferred(ctx, r.Credentials)
	if err != nil {
		return authenticatedRequest{}, err
	}
	if proofErr != nil {
		return authenticatedRequest{}, proofErr
	}
	if proof.JKT != "" {
		if err := client.CheckProofAlg(proof.Alg); err != nil {
			return authenticatedRequest{}, err
		}
	}
	return authenticatedRequest{client: client, proof: proof, assertion: assertion, home: r.Home}, nil
}

// Push is the PAR endpoint's use case (RFC 9126): it authenticates the client of r, reads the
// authorization request from params, or only from the signed request object in its request
// parameter when there is one (pushedParams), binds the request to the key of its DPoP proof,
// if any (RFC 9449 10.1, as dpop_jkt does; both must then name the same key), validates it and
// keeps it. Every check comes before the first write: a refused push records no jti and keeps
// nothing.
func (s *Service) Push(ctx context.Context, r ClientRequest, params url.Values) (string, time.Duration, error) {
	a, err := s.authenticateDeferred(ctx, r)
	if err != nil {
		return "", 0, err
	}
	client, jkt := a.client, a.proof.JKT
	p, repeated, err := s.pushedParams(ctx, client, params)
	if err != nil {
		return "", 0, err
	}
	if jkt != "" {
		if p.DPoPJKT != "" && p.DPoPJKT != jkt {
			return "", 0, InvalidDPoPProof("dpop_jkt is not the thumbprint of the DPoP proof's key")
		}
		p.DPoPJKT = jkt
	}
	req, err := s.validatePush(ctx, client, p, repeated)
	if err != nil {
		return "", 0, err
	}
	if err := a.record(ctx, s); err != nil {
		return "", 0, err
	}
	return s.keepPushed(ctx, client, req)
}
