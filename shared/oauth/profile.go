package oauth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Client profiles (Client.Profile): a profile is a set of registration and request rules a
// client opts into at registration, checked when it is registered or changed and again on
// every request, so a client changed around the registration checks is still held to them.
const (
	// ProfileFAPI2 is the FAPI 2.0 Security Profile (OpenID Foundation, final): pushed
	// authorization requests, PKCE S256, sender-constrained tokens (DPoP or mutual TLS),
	// private_key_jwt or tls_client_auth, PS256 or ES256 id_tokens.
	ProfileFAPI2 = "fapi2"
)

// FAPI2CodeLifetime caps the life of a FAPI 2.0 client's authorization codes (FAPI 2.0
// Security Profile 5.3.2.1: at most 60 seconds), whatever the server's code lifetime.
const FAPI2CodeLifetime = 60 * time.Second

// ValidProfile checks a profile name at registration: "" (none) or ProfileFAPI2.
func ValidProfile(p string) error {
	switch p {
	case "", ProfileFAPI2:
		return nil
	}
	return fmt.Errorf("unknown profile %q (the one profile is %q)", p, ProfileFAPI2)
}

// IsFAPI2 reports whether the client registered under the FAPI 2.0 profile.
func (c *Client) IsFAPI2() bool { return c.Profile == ProfileFAPI2 }

// FAPI2ProofAlgs are the algorithms a fapi2 client's DPoP proofs may be signed with: FAPI 2.0
// Security Profile (Final) 5.4.1 allows PS256, ES256 and EdDSA (Ed25519) only; RS256 is refused.
var FAPI2ProofAlgs = []string{"PS256", "ES256", "EdDSA"}

// CheckProofAlg refuses a DPoP proof signed with an algorithm the client's profile does not
// allow; the PAR and token endpoints check it once the client is authenticated
// (Service.AuthenticateRequest), before anything is recorded.
func (c *Client) CheckProofAlg(alg string) error {
	if c.IsFAPI2() && !slices.Contains(FAPI2ProofAlgs, alg) {
		return InvalidDPoPProof("a FAPI 2.0 client signs its DPoP proofs with PS256, ES256 or EdDSA, not %s", alg)
	}
	return nil
}

// CodeLifetime is how long the client's authorization codes live: the server's setting,
// capped for a FAPI 2.0 client.
func (c *Client) CodeLifetime(server time.Duration) time.Duration {
	if c.IsFAPI2() && server > FAPI2CodeLifetime {
		return FAPI2CodeLifetime
	}
	return server
}

// ApplyProfileDefaults sets what the client's profile implies, at registration: a FAPI 2.0
// client pushes its authorization requests (FAPI 2.0 Security Profile (Final) 5.3.2.2), so it is
// stored with RequirePAR on whether or not the operator said so.
func (c *Client) ApplyProfileDefaults() {
	if c.IsFAPI2() {
		c.RequirePAR = true
	}
}

// CheckProfile reports every requirement of the client's profile that its registration
// misses, in one error, so an operator fixes them all at once; nil for a client with no
// profile.
func (c *Client) CheckProfile() error {
	if err := ValidProfile(c.Profile); err != nil {
		return err
	}
	if !c.IsFAPI2() {
		return nil
	}
	var missing []string
	if !c.RequirePKCE {
		missing = append(missing, "require PKCE (S256)")
	}
	// A certificate-registered client authenticates with it (tls_client_auth) and its tokens
	// are always bound to it (RFC 8705), which meets both requirements at once.
	if !c.UsesMTLS() && !c.UsesPrivateKeyJWT() {
		missing = append(missing, "authenticate with private_key_jwt or tls_client_auth (a registered certificate)")
	}
	if !c.UsesMTLS() && !c.DPoPBoundAccessTokens {
		missing = append(missing, "have sender-constrained tokens (dpop_bound_access_tokens, or mutual TLS with a registered certificate)")
	}
	// FAPI 2.0 5.4: PS256, ES256 (or EdDSA, which keys do not offer); never RS256.
	if c.IDTokenSignedResponseAlg != "PS256" && c.IDTokenSignedResponseAlg != "ES256" {
		missing = append(missing, "sign its id_tokens with PS256 or ES256 (not RS256)")
	}
	// FAPI 2.0 5.4 again, for the responses signed for the client (JARM, RFC 9701).
	for _, a := range []struct{ name, alg string }{
		{"authorization_signed_response_alg", c.AuthorizationSignedResponseAlg},
		{"introspection_signed_response_alg", c.IntrospectionSignedResponseAlg},
	} {
		if a.alg != "" && !slices.Contains(FAPI2ResponseAlgs, a.alg) {
			missing = append(missing, "have its "+a.name+" PS256 or ES256 (not "+a.alg+")")
		}
	}
	// FAPI 2.0 5.3.2.2: a FAPI 2.0 authorization server shall require pushed authorization
	// requests. ApplyProfileDefaults turns it on at registration; turning it off is refused.
	if !c.RequirePAR {
		missing = append(missing, "require pushed authorization requests (PAR)")
	}
	// FAPI 2.0 5.3.2.1: no refresh token rotation except in extraordinary circumstances, and
	// then only where a retry with the previous refresh token succeeds when the client lost the
	// new one. A client that opts into rotation therefore needs the retry window.
	if c.RotatesRefreshTokens() && c.RefreshReuseInterval <= 0 {
		missing = append(missing, "have a refresh reuse interval when it opts into refresh token rotation (the retry FAPI 2.0 5.3.2.1 requires of rotating refresh tokens; at most 60 s)")
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("a " + ProfileFAPI2 + " client must " + strings.Join(missing, "; "))
}
