package lambda_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// nonceProof is a DPoP proof of key for a POST to u carrying nonce ("" none).
func nonceProof(t *testing.T, key *ecdsa.PrivateKey, u, nonce string) string {
	t.Helper()
	claims := map[string]any{"jti": oauth.NewID("j_"), "htm": "POST", "htu": u, "iat": time.Now().Unix()}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	return signES256(t, key, dpopHeader(), claims)
}

// TestDPoPNonces_TokenAndPARUnwrapTheKeyAtStartAndAnotherRoleFailsClosed deploys the stack
// with DPoPNonces=Enabled (KMS Sign mode, so the wrapping key exists for the nonces alone).
// The rotatekeys bootstrap, as InitialKey, makes the nonce key under the wrapping key
// (GenerateDataKeyWithoutPlaintext, checked against its IAM and the key's policy) and keeps
// it in the table, encrypted only. The token and PAR bootstraps, with the template's
// environment (no key in it) and KMS refusing whatever their role's IAM or the key's policy
// would refuse, read and unwrap it at start and ask for the nonce (use_dpop_nonce with a
// DPoP-Nonce header), then accept it; the nonce of one is good at the other. The token
// bootstrap running as the authorize or userinfo function's role, whose KMS Decrypt of the
// nonce key is refused, does not start.
func TestDPoPNonces_TokenAndPARUnwrapTheKeyAtStartAndAnotherRoleFailsClosed(t *testing.T) {
	for _, n := range []string{"token", "par", "rotatekeys"} {
		requireFunction(t, n)
	}
	s := newStackWith(t, map[string]string{"SigningMode": "kms-sign", "DPoPNonces": "Enabled"})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	set, err := s.store.NonceKeys(ctx)
	if err != nil || len(set.Keys) != 1 || len(set.Keys[0].Wrapped) <= oauth.NonceKeyLen {
		t.Fatalf("nonce keys after the first rotation: %+v %v, want one KMS ciphertext", set, err)
	}
	s.enforceAs = map[string]string{"token": "TokenFunction", "par": "ParFunction"}
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	for _, n := range []string{"token", "par"} {
		f, rec := s.start(t, ctx, n)
		c.fns[n] = f
		defer rec.close()
		defer f.stop()
		defer s.checkIAM(t, n, rec)
		if d := rec.kms.count("kms:Decrypt"); d != 1 {
			t.Errorf("%s made %d KMS Decrypt at start, want 1 (the nonce key)", n, d)
		}
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	const tokenPath, parPath = "/v2/authentication/oauth2/token", "/v2/authentication/oauth2/par"
	post := func(fn, path, nonce string, form url.Values) (int, string, string) {
		hdr := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth,
			"dpop": nonceProof(t, key, sampleBaseURL+path, nonce)}
		r := c.do(fn, "POST", path, "", hdr, form.Encode())
		var body struct{ Error string }
		_ = json.Unmarshal([]byte(r.Body), &body)
		return r.StatusCode, body.Error, header(r, "DPoP-Nonce")
	}
	par := url.Values{"response_type": {"code"}, "client_id": {sampleClientID}, "redirect_uri": {sampleRedirectURI},
		"scope": {"openid email"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
	code := url.Values{"grant_type": {"authorization_code"}, "code": {"made-up"}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {strings.Repeat("v", 43)}}
	st, e, parNonce := post("par", parPath, "", par)
	if st != 400 || e != "use_dpop_nonce" || parNonce == "" {
		t.Fatalf("PAR without a nonce: %d %s nonce %q, want 400 use_dpop_nonce with DPoP-Nonce", st, e, parNonce)
	}
	if st, e, _ := post("par", parPath, parNonce, par); st != 201 {
		t.Fatalf("PAR with its nonce: %d %s, want 201", st, e)
	}
	st, e, tokenNonce := post("token", tokenPath, "", code)
	if st != 400 || e != "use_dpop_nonce" || tokenNonce == "" {
		t.Fatalf("token without a nonce: %d %s nonce %q, want 400 use_dpop_nonce with DPoP-Nonce", st, e, tokenNonce)
	}
	// The PAR function's nonce at the token function: past the nonce check, to the made-up code.
	if st, e, _ := post("token", tokenPath, parNonce, code); e != "invalid_grant" {
		t.Fatalf("token with the PAR function's nonce: %d %s, want invalid_grant (the nonce accepted)", st, e)
	}

	for _, role := range []string{"AuthorizeFunction", "UserinfoFunction"} {
		s.enforceAs["token"] = role
		f, rec, err := s.tryStart(t, ctx, "token")
		if err == nil {
			rec.close()
			f.stop()
			t.Fatalf("the token function started as %s's role, whose Decrypt of the nonce key is refused", role)
		}
		if !strings.Contains(err.Error(), "nonce") {
			t.Errorf("as %s's role: the init failure does not say it is the nonce key: %v", role, err)
		}
	}
}
