package oauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// BenchmarkAuthenticateTokenRequest_FAPI is the cryptographic path of a FAPI 2.0 token
// request in process: what the HTTP adapter reads of the assertion (AssertionClientID), then
// the client's authentication by private_key_jwt and the DPoP proof's verification
// (AuthenticateTokenRequest, which writes nothing: the grant records both jtis with its own
// write). The same assertion and proof serve every iteration, so no store write is measured;
// the client is read from the embedded store. cpu-µs/op is the process's CPU time per request,
// the figure to compare on a shared machine.
func BenchmarkAuthenticateTokenRequest_FAPI(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.PS256} {
		b.Run(string(alg), func(b *testing.B) {
			auth := newClientKey(b, "k1", alg)
			var proofKey crypto.Signer
			if alg == jose.ES256 {
				proofKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			} else {
				proofKey, _ = rsa.GenerateKey(rand.Reader, 2048)
			}
			s := pkjwtService(b, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT,
				JWKS: jwksOf(b, auth), Profile: oauth.ProfileFAPI2, DPoPBoundAccessTokens: true}, now)
			assertion := auth.sign(b, assertionClaims("tpp", now))
			proof := signProof(b, alg, proofKey, map[string]any{"jti": oauth.NewID("j_"), "htm": "POST", "htu": tokenURL, "iat": now.Unix()})
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				id := oauth.AssertionClientID(assertion)
				c, jkt, once, err := s.AuthenticateTokenRequest(ctx, oauth.ClientRequest{
					Credentials: oauth.ClientCredentials{ID: id, Assertion: assertion, AssertionType: oauth.AssertionTypeJWTBearer},
					Proof:       &oauth.ProofHeaders{Method: "POST", Path: "/v2/authentication/oauth2/token", Values: []string{proof}},
				})
				if err != nil || c.ID != "tpp" || jkt == "" || len(once) != 2 {
					b.Fatalf("AuthenticateTokenRequest = %v, %q, %d one-time values, %v", c, jkt, len(once), err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
