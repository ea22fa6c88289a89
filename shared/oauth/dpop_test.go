package oauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

const tokenURL = "https://auth.bank.example/v2/authentication/oauth2/token"

func signProof(tb testing.TB, alg jose.SignatureAlgorithm, key crypto.Signer, claims map[string]any) string {
	tb.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		tb.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

func dpopService(tb testing.TB, now time.Time) *oauth.Service {
	tb.Helper()
	st, err := embedded.OpenWith(tb.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return &oauth.Service{Replay: st, Clients: st, Clock: oauth.ClockFunc(func() time.Time { return now })}
}

// TestCheckDPoP_HTUIsComparedAsRFC3986Normalises: scheme and host case and the default port do
// not matter, the query and fragment are ignored, the path does matter.
func TestCheckDPoP_HTUIsComparedAsRFC3986Normalises(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := dpopService(t, now)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for htu, ok := range map[string]bool{
		tokenURL: true,
		"HTTPS://Auth.Bank.Example:443/v2/authentication/oauth2/token": true,
		tokenURL + "?x=1#frag": true,
		tokenURL + "/":         false,
		"https://auth.bank.example:8443/v2/authentication/oauth2/token": false,
		"http://auth.bank.example/v2/authentication/oauth2/token":       false,
		"/v2/authentication/oauth2/token":                               false,
	} {
		proof := signProof(t, jose.ES256, key, map[string]any{"jti": htu, "htm": "POST", "htu": htu, "iat": now.Unix()})
		_, err := s.CheckDPoP(context.Background(), oauth.DPoPRequest{Proof: proof, Method: "POST", URLs: []string{tokenURL}})
		if (err == nil) != ok {
			t.Errorf("htu %q: %v, want accepted %v", htu, err, ok)
		}
	}
}

// TestCheckDPoP_RefusesWeakOrMismatchedKeys: an RSA key under 2048 bits, and a key whose type
// is not the header's alg, are invalid_dpop_proof.
func TestCheckDPoP_RefusesWeakOrMismatchedKeys(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := dpopService(t, now)
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	claims := map[string]any{"jti": "j1", "htm": "POST", "htu": tokenURL, "iat": now.Unix()}
	proof := signProof(t, jose.PS256, weak, claims)
	_, err := s.CheckDPoP(context.Background(), oauth.DPoPRequest{Proof: proof, Method: "POST", URLs: []string{tokenURL}})
	if oauth.AsError(err).Code != oauth.ErrCodeInvalidDPoPProof {
		t.Fatalf("RSA 1024: %v, want invalid_dpop_proof", err)
	}
}

// BenchmarkCheckDPoP is the in-process cost of one proof at the token endpoint: parse, verify
// the signature, thumbprint, and record the jti (in the embedded store without fsync, so the
// figure is the CPU cost; in AWS the record is one conditional PutItem, docs/scale.md).
func BenchmarkCheckDPoP(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, k := range []struct {
		alg jose.SignatureAlgorithm
		key crypto.Signer
	}{{jose.ES256, ec}, {jose.PS256, rs}, {jose.EdDSA, ed}} {
		b.Run(string(k.alg), func(b *testing.B) {
			s := dpopService(b, now)
			proofs := make([]string, 0, 4096)
			for i := range cap(proofs) {
				proofs = append(proofs, signProof(b, k.alg, k.key, map[string]any{"jti": fmt.Sprint("j", i), "htm": "POST", "htu": tokenURL, "iat": now.Unix()}))
			}
			i := 0
			b.ResetTimer()
			for b.Loop() {
				if i == len(proofs) {
					b.StopTimer()
					s = dpopService(b, now) // a fresh replay store: the proofs are single-use
					i = 0
					b.StartTimer()
				}
				if _, err := s.CheckDPoP(context.Background(), oauth.DPoPRequest{Proof: proofs[i], Method: "POST", URLs: []string{tokenURL}}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestCheckDPoP_IATUpTo10SecondsAheadIsAcceptedAndBeyondRefusedWithItsReason: FAPI 2.0 (Final)
// 5.3.2.1 — a proof whose iat is up to 10 s in the future is accepted; 11 s ahead is refused
// saying it is ahead, and a proof older than its lifetime saying it is old.
func TestCheckDPoP_IATUpTo10SecondsAheadIsAcceptedAndBeyondRefusedWithItsReason(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := dpopService(t, now)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		offset time.Duration
		want   string // "" for accepted, else a part of the refusal's description
	}{
		{0, ""}, {6 * time.Second, ""}, {10 * time.Second, ""}, {-60 * time.Second, ""},
		{11 * time.Second, "more than 10s ahead"}, {time.Minute, "more than 10s ahead"},
		{-61 * time.Second, "more than 1m0s old"},
	} {
		proof := signProof(t, jose.ES256, key, map[string]any{"jti": oauth.NewID("j_"), "htm": "POST", "htu": tokenURL, "iat": now.Add(c.offset).Unix()})
		_, err := s.CheckDPoP(context.Background(), oauth.DPoPRequest{Proof: proof, Method: "POST", URLs: []string{tokenURL}})
		switch e := oauth.AsError(err); {
		case c.want == "" && err != nil:
			t.Errorf("iat %+v: %v, want accepted", c.offset, err)
		case c.want != "" && (e.Code != oauth.ErrCodeInvalidDPoPProof || !strings.Contains(e.Description, c.want)):
			t.Errorf("iat %+v: %v, want invalid_dpop_proof saying %q", c.offset, err, c.want)
		}
	}
}

// TestAuthenticateRequest_FAPI2ClientsProofIsPS256ES256OrEdDSA: FAPI 2.0 (Final) 5.4.1 — at PAR
// and token (AuthenticateRequest) a fapi2 client's RS256 proof is invalid_dpop_proof and
// records nothing (its client assertion then still works), while PS256, ES256 and EdDSA
// (Ed25519) proofs are accepted; a client without the profile may still use RS256.
func TestAuthenticateRequest_FAPI2ClientsProofIsPS256ES256OrEdDSA(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	auth := newClientKey(t, "es", jose.ES256)
	s := pkjwtService(t, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, auth), Profile: oauth.ProfileFAPI2}, now)
	if err := s.Clients.CreateClient(context.Background(), oauth.Client{ID: "plain", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT,
		JWKS: jwksOf(t, auth), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	rsKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	request := func(client string, alg jose.SignatureAlgorithm, key crypto.Signer, assertion string) error {
		proof := signProof(t, alg, key, map[string]any{"jti": oauth.NewID("j_"), "htm": "POST", "htu": tokenURL, "iat": now.Unix()})
		_, _, err := s.AuthenticateRequest(context.Background(), oauth.ClientRequest{
			Credentials: oauth.ClientCredentials{ID: client, Assertion: assertion, AssertionType: oauth.AssertionTypeJWTBearer},
			Proof:       &oauth.ProofHeaders{Method: "POST", Path: "/v2/authentication/oauth2/token", Values: []string{proof}},
		})
		return err
	}
	a := auth.sign(t, assertionClaims("tpp", now))
	err := request("tpp", jose.RS256, rsKey, a)
	if e := oauth.AsError(err); e.Code != oauth.ErrCodeInvalidDPoPProof || !strings.Contains(e.Description, "PS256, ES256 or EdDSA") {
		t.Fatalf("an RS256 proof of a fapi2 client: %v, want invalid_dpop_proof naming PS256, ES256 or EdDSA", err)
	}
	if err := request("tpp", jose.PS256, rsKey, a); err != nil {
		t.Fatalf("PS256 with the assertion of the refused request: %v (the refusal recorded its jti?)", err)
	}
	for alg, key := range map[jose.SignatureAlgorithm]crypto.Signer{jose.ES256: ecKey, jose.EdDSA: edKey} {
		if err := request("tpp", alg, key, auth.sign(t, assertionClaims("tpp", now))); err != nil {
			t.Errorf("a fapi2 client's %s proof: %v", alg, err)
		}
	}
	if err := request("plain", jose.RS256, rsKey, auth.sign(t, assertionClaims("plain", now))); err != nil {
		t.Errorf("an RS256 proof of a client without the profile: %v", err)
	}
}
