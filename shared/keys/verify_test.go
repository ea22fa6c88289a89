package keys_test

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
)

const testIssuer = "https://auth.example.test/v2/authentication/oauth2"

// jwksServer serves the registry's JWKS the way the JWKS endpoint does: from the registry,
// with Cache-Control max-age and a strong ETag, answering If-None-Match with 304.
func jwksServer(t *testing.T, reg oauth.KeyStore, maxAge time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set, err := reg.Keys(r.Context())
		if err != nil {
			http.Error(w, "registry", http.StatusServiceUnavailable)
			return
		}
		body, etag := keys.PublicJWKS(set)
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds())))
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// cachedKeySet is a verifier's copy of our JWKS, fetched at one moment and kept for the
// max-age the response allowed (or for keep, when set, to model a client that ignores it). It
// implements oidc.KeySet strictly: a token whose kid is not in the cached copy fails, as it
// would for a client that does not refetch on an unknown kid.
type cachedKeySet struct {
	fetched, expires time.Time
	keys             map[string]crypto.PublicKey
}

func fetchKeySet(t *testing.T, url string, now time.Time, keep time.Duration) *cachedKeySet {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Keys []struct{ Kty, Alg, Use, Kid, N, E, Crv, X, Y string } `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	maxAge, err := strconv.Atoi(strings.TrimPrefix(resp.Header.Get("Cache-Control"), "public, max-age="))
	if err != nil {
		t.Fatalf("Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
	if keep == 0 {
		keep = time.Duration(maxAge) * time.Second
	}
	ks := &cachedKeySet{fetched: now, expires: now.Add(keep), keys: map[string]crypto.PublicKey{}}
	for _, k := range doc.Keys {
		pub, err := keys.PublicKey(oauth.SigningKey{Kid: k.Kid, Alg: k.Alg, N: k.N, E: k.E, Crv: k.Crv, X: k.X, Y: k.Y})
		kid, _ := keys.Thumbprint(pub)
		kty := map[string]string{"RS256": "RSA", "PS256": "RSA", "ES256": "EC"}[k.Alg]
		if err != nil || kty == "" || k.Kty != kty || k.Use != "sig" || kid != k.Kid {
			t.Fatalf("bad JWK %+v: %v", k, err)
		}
		ks.keys[k.Kid] = pub
	}
	return ks
}

func (c *cachedKeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	head, _, _ := strings.Cut(jwt, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return nil, err
	}
	var h struct{ Kid string }
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, err
	}
	pub, ok := c.keys[h.Kid]
	if !ok {
		return nil, fmt.Errorf("kid %s not in the key set fetched at %v", h.Kid, c.fetched)
	}
	return (&oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{pub}}).VerifySignature(ctx, jwt)
}

type signedToken struct {
	raw, alg string
	kid      string
	iat, exp time.Time
}

// simulate runs the service and its clients over simulated time: every rotateEvery the
// rotation runs (as a frequent schedule would; with force, as Promote, so keys rotate as fast
// as the publish lead allows); every step, in between, the signer signs an id_token with each
// algorithm and a client fetches the JWKS. Every token is verified with go-oidc by every client key set whose cache life overlaps
// the token's validity (seen from a client whose clock runs ClockSkew behind ours), at a
// moment inside both. It returns the failures.
func simulate(t *testing.T, p keys.Policy, signerTTL, rotateEvery, step, horizon, clientKeep time.Duration, force bool) (failures []string, kids map[string]bool) {
	t.Helper()
	f := newRotFixture(t, p)
	signer := keys.NewSigner(f.reg, f.back, f.clock, signerTTL)
	srv := jwksServer(t, f.reg, p.JWKSCacheTTL)
	ctx := context.Background()
	var tokens []signedToken
	var sets []*cachedKeySet
	kids = map[string]bool{}

	verify := func(tok signedToken, ks *cachedKeySet, at time.Time) {
		v := oidc.NewVerifier(testIssuer, ks, &oidc.Config{ClientID: "client-1", SupportedSigningAlgs: []string{tok.alg},
			Now: func() time.Time { return at.Add(-p.ClockSkew) }})
		if _, err := v.Verify(ctx, tok.raw); err != nil {
			failures = append(failures, fmt.Sprintf("token of key %s issued %v, key set fetched %v, verified %v: %v",
				tok.kid, tok.iat, ks.fetched, at, err))
		}
	}
	start := f.clock.Now()
	for now := start; now.Before(start.Add(horizon)); now = now.Add(step) {
		f.clock.Set(now)
		if now.Sub(start)%rotateEvery == 0 {
			run := f.rot.Rotate
			if force {
				run = f.rot.Promote
			}
			if _, err := run(ctx); err != nil {
				t.Fatal(err)
			}
			f.states(t)
		}
		// Live for a client whose clock is ClockSkew behind: until exp + skew in our time.
		live := func(tk signedToken) bool { return !now.After(tk.exp.Add(p.ClockSkew)) }
		cached := func(ks *cachedKeySet) bool { return now.Before(ks.expires) }
		for _, alg := range keys.Algs {
			raw, err := signer.SignJWT(ctx, alg, jwt.MapClaims{"iss": testIssuer, "aud": "client-1", "sub": "u1",
				"iat": now.Unix(), "exp": now.Add(p.IDTokenTTL).Unix()})
			if err != nil {
				t.Fatal(err)
			}
			kid, _ := signer.Kid(ctx, alg)
			kids[kid] = true
			tok := signedToken{raw: raw, alg: alg, kid: kid, iat: now, exp: now.Add(p.IDTokenTTL)}
			for _, ks := range sets {
				if cached(ks) {
					verify(tok, ks, now)
				}
			}
			tokens = append(tokens, tok)
		}
		ks := fetchKeySet(t, srv.URL, now, clientKeep)
		sets = append(sets, ks)
		for _, tk := range tokens {
			if live(tk) {
				verify(tk, ks, now)
			}
		}
		// Forget what can no longer overlap anything.
		for len(tokens) > 0 && !live(tokens[0]) {
			tokens = tokens[1:]
		}
		for len(sets) > 0 && !cached(sets[0]) {
			sets = sets[1:]
		}
	}
	return failures, kids
}

// TestRotation_TokensVerifyBeforeDuringAndAfterRotations is the promise of the key lifecycle,
// for every algorithm: a client that caches our JWKS for its max-age verifies (with go-oidc)
// every id_token we sign, whenever it
// fetched the JWKS, across several rotations and deletions, with a signer whose cached current
// key lags a promotion (signerTTL > step).
func TestRotation_TokensVerifyBeforeDuringAndAfterRotations(t *testing.T) {
	t.Parallel()
	p := keys.Policy{RotationPeriod: 12 * time.Hour, JWKSCacheTTL: time.Hour, IDTokenTTL: time.Hour,
		ClockSkew: 5 * time.Minute, Margin: 15 * time.Minute}
	for _, tc := range []struct {
		name     string
		horizon  time.Duration
		force    bool
		wantKids int
	}{
		{"scheduled rotation every 12h", 38 * time.Hour, false, 4 * len(keys.Algs)},
		{"forced rotation as soon as the next key is ripe", 10 * time.Hour, true, 7 * len(keys.Algs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failures, kids := simulate(t, p, 13*time.Minute, 12*time.Minute, 4*time.Minute, tc.horizon, 0, tc.force)
			for i, f := range failures {
				if i == 5 {
					t.Errorf("... and %d more", len(failures)-5)
					break
				}
				t.Error(f)
			}
			if len(kids) < tc.wantKids {
				t.Fatalf("tokens were signed by %d keys, want at least %d: the simulation must span several rotations of every algorithm", len(kids), tc.wantKids)
			}
		})
	}
}

// TestRotation_ClientCachingBeyondMaxAgeIsCaught shows the simulation can fail: a client that
// keeps the JWKS far beyond its max-age (longer than a next key is published before it
// signs, here a whole rotation period) misses a promoted key.
func TestRotation_ClientCachingBeyondMaxAgeIsCaught(t *testing.T) {
	t.Parallel()
	p := keys.Policy{RotationPeriod: 3 * time.Hour, JWKSCacheTTL: time.Hour, IDTokenTTL: time.Hour,
		ClockSkew: 5 * time.Minute, Margin: 15 * time.Minute}
	failures, _ := simulate(t, p, 10*time.Minute, 10*time.Minute, 10*time.Minute, 10*time.Hour, 4*time.Hour, false)
	if len(failures) == 0 {
		t.Fatal("a client caching the JWKS past its max-age verified every token; the simulation cannot see broken timing")
	}
	if !strings.Contains(failures[0], "not in the key set") {
		t.Fatalf("unexpected failure: %s", failures[0])
	}
}
