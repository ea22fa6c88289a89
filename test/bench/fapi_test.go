package bench

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// The FAPI 2.0 token requests of bench/peer.sh's FAPI mode, in-process: a fapi2 client that
// authenticates with private_key_jwt (ES256), binds its tokens with DPoP (ES256) and gets ES256
// id_tokens, through the real token handler over the embedded store. The assertions and the
// proofs, each with a new jti, are signed before the timer starts: the client's signatures are
// not the server's work, while the server's verification of them is.

// fapiScope is the scope of the bench's FAPI flows.
const fapiScope = "openid email"

// fapiClient is a registered fapi2 client with its assertion key and its DPoP key.
type fapiClient struct {
	id       string
	key      *ecdsa.PrivateKey
	assertor jose.Signer
	prover   jose.Signer
	jkt      string
}

func (s *bench) registerFAPI(b *testing.B) *fapiClient {
	b.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	dkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig", Algorithm: "ES256"}}})
	c, _, err := admin.New(s.app.Store, cheap, s.app.Clock, s.app.Audit).CreateClient(context.Background(), admin.ClientSpec{
		Name: "FAPI bench", RedirectURIs: []string{redirectURI}, Scopes: []string{"openid", "email", "phone", "profile"},
		Profile: oauth.ProfileFAPI2, RequirePKCE: true, RequirePAR: true, DPoPBoundAccessTokens: true,
		TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwks, IDTokenSignedResponseAlg: "ES256",
	})
	if err != nil {
		b.Fatal(err)
	}
	assertor, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	prover, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: dkey}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		b.Fatal(err)
	}
	tp, err := (&jose.JSONWebKey{Key: dkey.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		b.Fatal(err)
	}
	return &fapiClient{id: c.ID, key: key, assertor: assertor, prover: prover, jkt: base64.RawURLEncoding.EncodeToString(tp)}
}

// sign is the compact JWS of claims by signer.
func sign(b *testing.B, signer jose.Signer, claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		b.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// request is a token request of the client: its assertion (new jti) in the body, a proof of
// its DPoP key (new jti) for the token endpoint in the header.
func (s *bench) fapiRequest(b *testing.B, c *fapiClient, params url.Values) *http.Request {
	now := time.Now()
	v := url.Values{"client_id": {c.id}, "client_assertion_type": {oauth.AssertionTypeJWTBearer},
		"client_assertion": {sign(b, c.assertor, map[string]any{"iss": c.id, "sub": c.id, "aud": s.app.Config.Issuer,
			"jti": oauth.NewID("j_"), "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})}}
	for k, vs := range params {
		v[k] = vs
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, httpapi.PathToken, strings.NewReader(v.Encode()))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", sign(b, c.prover, map[string]any{"jti": oauth.NewID("j_"), "htm": http.MethodPost,
		"htu": s.app.Config.BaseURL + httpapi.PathToken, "iat": now.Unix()}))
	return req
}

// fapiCodes approves n pushed-style requests of c (PKCE S256, the code bound to c's DPoP key)
// through the domain, untimed, and returns the codes with their verifier.
func (s *bench) fapiCodes(b *testing.B, c *fapiClient, n int) ([]string, string) {
	b.Helper()
	ctx := context.Background()
	client, err := s.app.Store.GetClient(ctx, c.id)
	if err != nil {
		b.Fatal(err)
	}
	verifier := strings.Repeat("v", 43)
	sess := &oauth.Session{UID: s.user.UID, AuthTime: time.Now(), AMR: []string{"pwd"}}
	out := make([]string, n)
	for i := range out {
		r := &oauth.AuthRequest{ClientID: c.id, RedirectURI: redirectURI, Scopes: oauth.ParseScopes(fapiScope), State: "s", Nonce: "n",
			CodeChallenge: oauth.S256(verifier), CodeChallengeMethod: "S256", DPoPJKT: c.jkt}
		red, err := s.app.Service.Approve(ctx, r, &client, s.user, sess)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = red.Params.Get("code")
	}
	return out, verifier
}

func fapiExchangeParams(code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
}

// BenchmarkFAPIExchange is a FAPI 2.0 code exchange (ES256 assertion and DPoP proof, ES256
// id_token) through the real token handler over the embedded store.
func BenchmarkFAPIExchange(b *testing.B) {
	s := setup(b)
	c := s.registerFAPI(b)
	codes, verifier := s.fapiCodes(b, c, b.N)
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		reqs[i] = s.fapiRequest(b, c, fapiExchangeParams(codes[i], verifier))
	}
	t := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, reqs[i], 200)
	}
	t.stop(b)
}

// BenchmarkFAPIRefresh is a FAPI 2.0 refresh (the fapi2 client's refresh token is kept, not
// rotated) with a new assertion and proof each time, through the real token handler over the
// embedded store.
func BenchmarkFAPIRefresh(b *testing.B) {
	s := setup(b)
	c := s.registerFAPI(b)
	codes, verifier := s.fapiCodes(b, c, 1)
	w := s.serve(b, s.fapiRequest(b, c, fapiExchangeParams(codes[0], verifier)), 200)
	rt := refreshTokenOf(b, w.Body.String())
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		reqs[i] = s.fapiRequest(b, c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
	}
	t := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, reqs[i], 200)
	}
	t.stop(b)
}
