package receipt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/receipt"
	"github.com/acmebank/authserver/shared/store/embedded"
)

const issuer = "https://auth.example.test/v2/authentication/oauth2"

// fixedClock is the receipts' clock: iat is checked to the second.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// deployment is one deployment's receipts: the embedded store, a key backend whose keys the
// rotation made, the JWKS handler serving them, and the Maker.
type deployment struct {
	store *embedded.Store
	maker *receipt.Maker
	jwks  string // the JWKS endpoint's URL
	now   time.Time
}

// backends are the key backends a receipt is signed through: the local key files and KMS
// (local-kms; skipped without LOCAL_KMS_ENDPOINT, failed under CI).
var backends = []struct {
	name string
	new  func(t *testing.T) keys.Backend
}{
	{"localkey", func(t *testing.T) keys.Backend {
		b, err := localkey.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
	{"kms", func(t *testing.T) keys.Backend {
		client, _ := kmstest.New(t)
		return kmskey.New(client, kmskey.Options{})
	}},
}

func newDeployment(t *testing.T, backend keys.Backend, st *embedded.Store) *deployment {
	t.Helper()
	ctx := t.Context()
	if st == nil {
		var err error
		st, err = embedded.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := keys.NewRotator(st, backend, keys.Policy{}, nil, nil).Rotate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Truncate(time.Second)
	jwks := httptest.NewServer(&httpapi.JWKSHandler{Keys: st, Clock: oauth.SystemClock{}, MaxAge: time.Minute, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(jwks.Close)
	m, err := receipt.New(ctx, receipt.Deps{
		Signer: keys.NewSigner(st, backend, nil, 0), Clients: st, Salts: st, Issuer: issuer, Clock: fixedClock{now},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &deployment{store: st, maker: m, jwks: jwks.URL, now: now}
}

func (d *deployment) addClient(t *testing.T, id, alg string, redirects ...string) {
	t.Helper()
	err := d.store.CreateClient(t.Context(), oauth.Client{ID: id, Name: id, RedirectURIs: redirects, Scopes: []string{"openid"}, IDTokenSignedResponseAlg: alg})
	if err != nil {
		t.Fatal(err)
	}
}

// verify checks jws against the keys the JWKS endpoint serves, as a customer or a client
// does with go-jose, and returns the header's typ and the claims.
func (d *deployment) verify(t *testing.T, jws string) (typ string, claims map[string]any, err error) {
	t.Helper()
	resp, err := http.Get(d.jwks)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256})
	if err != nil {
		return "", nil, err
	}
	h := sig.Signatures[0].Protected
	found := set.Key(h.KeyID)
	if len(found) != 1 {
		return "", nil, errors.New("kid not in the JWKS")
	}
	payload, err := sig.Verify(found[0])
	if err != nil {
		return "", nil, err
	}
	typ, _ = h.ExtraHeaders[jose.HeaderType].(string)
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		t.Fatal(err)
	}
	return typ, claims, nil
}

const payment = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`

func paymentGrant(now time.Time) oauth.Grant {
	return oauth.Grant{
		ID: "g_receipt", ClientID: "tpp", UID: "u-42", Scopes: oauth.ParseScopes("openid bank:transfers:write"),
		AuthTime: now.Add(-2 * time.Minute), AMR: []string{"pwd", "hwk", "mfa"},
		AuthorizationDetails: json.RawMessage(payment), CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(5 * time.Minute),
	}
}

func TestReceipt_VerifiesAgainstThePublishedJWKSWithEveryClaim(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			backend := b.new(t)
			d := newDeployment(t, backend, nil)
			for _, alg := range []string{"", keys.PS256, keys.ES256} {
				id := "tpp" + strings.ToLower(alg)
				d.addClient(t, id, alg, "https://tpp.example/cb", "https://tpp.example/other")
				g := paymentGrant(d.now)
				g.ClientID = id
				jws, err := d.maker.Receipt(t.Context(), g)
				if err != nil {
					t.Fatal(err)
				}
				typ, claims, err := d.verify(t, jws)
				if err != nil {
					t.Fatalf("%s receipt does not verify against the JWKS: %v", alg, err)
				}
				if typ != receipt.Type {
					t.Errorf("typ %q, want %q", typ, receipt.Type)
				}
				wantAlg := alg
				if wantAlg == "" {
					wantAlg = oauth.DefaultIDTokenAlg
				}
				if got := headerAlg(t, jws); got != wantAlg {
					t.Errorf("alg %q, want the client's id_token algorithm %q", got, wantAlg)
				}
				salt, _ := d.store.PairwiseSalt(t.Context(), nil)
				want := map[string]any{
					"iss":          issuer,
					"iat":          json.Number(itoa(d.now.Unix())),
					"grant_id":     g.ID,
					"client_id":    id,
					"sub":          oidcPairwise("tpp.example", g.UID, salt),
					"scope":        "openid bank:transfers:write",
					"consented_at": json.Number(itoa(g.CreatedAt.Unix())),
					"auth_time":    json.Number(itoa(g.AuthTime.Unix())),
					"acr":          oauth.ACRStrong,
					"amr":          []any{"pwd", "hwk", "mfa"},
				}
				for k, v := range want {
					if got, _ := json.Marshal(claims[k]); string(got) != mustJSON(v) {
						t.Errorf("claim %s = %s, want %s", k, got, mustJSON(v))
					}
				}
				details, _ := json.Marshal(claims["authorization_details"])
				if !jsonEqual(t, details, []byte(payment)) {
					t.Errorf("authorization_details = %s, want the grant's %s", details, payment)
				}
				if jti, _ := claims["jti"].(string); !strings.HasPrefix(jti, "rcpt_") {
					t.Errorf("jti %q", claims["jti"])
				}
				for _, absent := range []string{"aud", "exp"} {
					if _, ok := claims[absent]; ok {
						t.Errorf("receipt carries %s: it is evidence, not a credential", absent)
					}
				}
			}
		})
	}
}

func TestReceipt_PairwiseSubjectDiffersPerSectorAndIsStable(t *testing.T) {
	backend := backends[0].new(t)
	d := newDeployment(t, backend, nil)
	d.addClient(t, "a1", "", "https://a.example/cb")
	d.addClient(t, "a2", "", "https://a.example/other", "https://a.example:8443/cb") // same host: same sector
	d.addClient(t, "b", "", "https://b.example/cb")
	sub := func(d *deployment, client, uid string) string {
		t.Helper()
		g := paymentGrant(d.now)
		g.ClientID, g.UID = client, uid
		jws, err := d.maker.Receipt(t.Context(), g)
		if err != nil {
			t.Fatal(err)
		}
		_, claims, err := d.verify(t, jws)
		if err != nil {
			t.Fatal(err)
		}
		return claims["sub"].(string)
	}
	a := sub(d, "a1", "u-1")
	if a == "u-1" || a != sub(d, "a1", "u-1") {
		t.Fatalf("sub %q: want a pairwise subject, the same every time", a)
	}
	if got := sub(d, "a2", "u-1"); got != a {
		t.Errorf("a client of the same sector got %q, want %q", got, a)
	}
	if got := sub(d, "b", "u-1"); got == a {
		t.Errorf("clients of two sectors got one subject %q for one customer", got)
	}
	if got := sub(d, "a1", "u-2"); got == a {
		t.Errorf("two customers got one subject %q", got)
	}
	// Another instance of the deployment (a cold start) reads the stored salt: same subject.
	again := newDeployment(t, backend, d.store)
	if got := sub(again, "a1", "u-1"); got != a {
		t.Errorf("another instance made sub %q, want the stable %q", got, a)
	}
	// Another deployment (another salt) gives the customer another subject.
	other := newDeployment(t, backends[0].new(t), nil)
	other.addClient(t, "a1", "", "https://a.example/cb")
	if got := sub(other, "a1", "u-1"); got == a {
		t.Errorf("two deployments' salts gave one subject %q", got)
	}
}

func TestReceipt_TamperedReceiptFailsVerification(t *testing.T) {
	d := newDeployment(t, backends[0].new(t), nil)
	d.addClient(t, "tpp", keys.PS256, "https://tpp.example/cb")
	jws, err := d.maker.Receipt(t.Context(), paymentGrant(d.now))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.verify(t, jws); err != nil {
		t.Fatalf("the untouched receipt: %v", err)
	}
	parts := strings.Split(jws, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	enc := base64.RawURLEncoding.EncodeToString
	for name, forged := range map[string]string{
		"amount changed":      parts[0] + "." + enc(bytes.Replace(payload, []byte("123.50"), []byte("923.50"), 1)) + "." + parts[2],
		"typ changed":         enc(bytes.Replace(header, []byte(receipt.Type), []byte("JWT"), 1)) + "." + parts[1] + "." + parts[2],
		"signature truncated": parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4],
	} {
		if forged == jws {
			t.Fatalf("%s: the forgery changed nothing", name)
		}
		if _, _, err := d.verify(t, forged); err == nil {
			t.Errorf("%s: the receipt still verifies", name)
		}
	}
}

func TestReceipt_ClientOnSeveralHostsIsRefused(t *testing.T) {
	d := newDeployment(t, backends[0].new(t), nil)
	d.addClient(t, "tpp", "", "https://a.example/cb", "https://b.example/cb")
	_, err := d.maker.Receipt(t.Context(), paymentGrant(d.now))
	if !errors.Is(err, receipt.ErrNoSector) {
		t.Fatalf("receipt for a client on two hosts: %v, want ErrNoSector", err)
	}
}

func TestReceipt_UnknownClientIsAnError(t *testing.T) {
	d := newDeployment(t, backends[0].new(t), nil)
	if _, err := d.maker.Receipt(t.Context(), paymentGrant(d.now)); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("receipt of a grant whose client is gone: %v, want ErrNotFound", err)
	}
}

func TestNew_RefusesMissingDependencies(t *testing.T) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = receipt.New(context.Background(), receipt.Deps{Clients: st, Salts: st})
	if err == nil || !strings.Contains(err.Error(), "Signer") || !strings.Contains(err.Error(), "Issuer") || !strings.Contains(err.Error(), "Clock") {
		t.Fatalf("New without Signer, Issuer, Clock: %v", err)
	}
	if salt, _ := st.PairwiseSalt(context.Background(), nil); salt != nil {
		t.Fatalf("a refused New stored a salt")
	}
}

// oidcPairwise is OIDC Core 8.1's formula, written out here apart from the package's.
func oidcPairwise(sector, uid string, salt []byte) string {
	sum := sha256.Sum256(append([]byte(sector+uid), salt...))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func headerAlg(t *testing.T, jws string) string {
	raw, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(jws, ".", 2)[0])
	var h struct{ Alg string }
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.Alg
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
