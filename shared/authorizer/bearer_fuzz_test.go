package authorizer

import (
	"errors"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// FuzzBearerToken feeds any Authorization header to the bearer parsing of the authorizer: no
// panic; the answer is a token or an RFC 6750 error; an accepted token is a bounded b64token
// that the header carries after a Bearer scheme, so nothing else reaches the store lookup.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer at_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG", "bearer   x", "Bearer", "Bearer ", "Basic abc",
		"Bearer a b", "Bearer ====", "Bearer a==", "Bearer a=b", "  Bearer\tx", "Bearer " + strings.Repeat("a", 2000), "Bearer \x00", "BEARER é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := BearerToken(header)
		if err != nil {
			var oe *oauth.Error
			if !errors.As(err, &oe) || (oe.Code != oauth.ErrCodeInvalidRequest && oe.Code != oauth.ErrCodeInvalidToken) || oe.Status >= 500 {
				t.Fatalf("BearerToken(%q) error %v", header, err)
			}
			if tok != "" {
				t.Fatal("a token came with an error")
			}
			return
		}
		if tok == "" || len(tok) > maxTokenLength || !isB64Token(tok) || strings.ContainsAny(tok, " \t\r\n") {
			t.Fatalf("BearerToken(%q) accepted %q", header, tok)
		}
		scheme, _, _ := strings.Cut(strings.TrimSpace(header), " ")
		if !strings.EqualFold(scheme, "Bearer") || !strings.HasSuffix(strings.TrimSpace(header), tok) {
			t.Fatalf("BearerToken(%q) = %q", header, tok)
		}
	})
}

// FuzzCertThumbprintPEM feeds any text as the client certificate API Gateway passes on: no
// panic, and the thumbprint is either empty (refused) or a base64url SHA-256.
func FuzzCertThumbprintPEM(f *testing.F) {
	f.Add("")
	f.Add("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	f.Add("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
	f.Fuzz(func(t *testing.T, pem string) {
		if tp := CertThumbprintPEM(pem); tp != "" && len(tp) != 43 {
			t.Fatalf("thumbprint %q", tp)
		}
	})
}
