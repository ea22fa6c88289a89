package multiregion_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// resourceURL is the bank API URL the proofs below are made for.
const resourceURL = "https://api.bank.example/v1/accounts"

// boundAccessTokens has region a exchange n codes for access tokens bound to key (RFC 9449 5),
// and waits until everything the exchanges wrote is in region b.
func (w *world) boundAccessTokens(t *testing.T, n int, key *ecdsa.PrivateKey) []string {
	t.Helper()
	jkt, err := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	codes := w.issueCodes(t, n)
	tokens := make([]string, n)
	for i, c := range codes {
		resp, err := w.svcA.ExchangeCode(context.Background(), w.client, oauth.CodeExchange{Code: c, RedirectURI: w.redirect,
			DPoPJKT: base64.RawURLEncoding.EncodeToString(jkt)})
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = resp.AccessToken
	}
	w.settle(t)
	return tokens
}

// resourceProof is a DPoP proof of key for a GET of resourceURL with token, with a fresh jti.
func resourceProof(t *testing.T, key *ecdsa.PrivateKey, token string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	ath := sha256.Sum256([]byte(token))
	payload, err := json.Marshal(map[string]any{"jti": oauth.NewID("j_"), "htm": "GET", "htu": resourceURL,
		"iat": time.Now().Unix(), "ath": base64.RawURLEncoding.EncodeToString(ath[:])})
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// presentProofsInBoth presents each bound token with its one proof to the resource check of
// region a and of region b at the same moment (2 × len(tokens) racing requests), and returns
// how many of the two each proof passed.
func presentProofsInBoth(t *testing.T, w *world, key *ecdsa.PrivateKey, tokens []string) []int {
	t.Helper()
	proofs := make([]string, len(tokens))
	for i, tok := range tokens {
		proofs[i] = resourceProof(t, key, tok)
	}
	accepted := make([]int, len(tokens))
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range tokens {
		for _, svc := range []*oauth.Service{w.svcA, w.svcB} {
			wg.Go(func() {
				<-start
				_, err := svc.ValidatePresented(context.Background(), oauth.Presentation{Token: tokens[i], DPoP: true,
					Proof: oauth.DPoPRequest{Proof: proofs[i], Method: "GET", URLs: []string{resourceURL}}})
				if err == nil {
					mu.Lock()
					accepted[i]++
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return accepted
}

func newProofKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestSimulation_WithoutHomeRoutingADPoPProofIsAcceptedInBothRegions shows the hazard for
// one-time values: with the jti recorded in the replica of the region the request reached, a
// proof replayed to the other region within the replication delay passes there too.
func TestSimulation_WithoutHomeRoutingADPoPProofIsAcceptedInBothRegions(t *testing.T) {
	w := newWorld(t, false, replicationDelay)
	key := newProofKey(t)
	accepted := presentProofsInBoth(t, w, key, w.boundAccessTokens(t, pairs, key))
	double := 0
	for _, n := range accepted {
		if n == 2 {
			double++
		}
	}
	t.Logf("plain regional writes: %d of %d DPoP proofs presented in both regions at once were accepted twice", double, pairs)
	if double == 0 {
		t.Fatalf("no proof was accepted twice: the simulation does not reproduce the replication window")
	}
}

// TestSimulation_HomeRoutedDPoPProofsAreAcceptedOnceAcrossRegions: with the jti recorded at the
// home of the access token the proof comes with, a proof presented in both regions at once (a
// replay to the other region within the proof's lifetime) is accepted exactly once: the other
// presentation meets the record at the token's home.
func TestSimulation_HomeRoutedDPoPProofsAreAcceptedOnceAcrossRegions(t *testing.T) {
	w := newWorld(t, true, replicationDelay)
	key := newProofKey(t)
	accepted := presentProofsInBoth(t, w, key, w.boundAccessTokens(t, pairs, key))
	for i, n := range accepted {
		if n != 1 {
			t.Errorf("proof %d, presented in both regions at once, was accepted %d times, want once", i, n)
		}
	}
	t.Logf("home-routed: %d DPoP proofs each presented in both regions at once; accepted per proof: %v", pairs, accepted)
}
