package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// mtlsPKI is what a mutual-TLS test needs: a CA, the certificates it issued, and their files.
type mtlsPKI struct {
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	dir    string
}

// mtlsCert is one certificate with its key, as a tls.Certificate and by RFC 8705 thumbprint.
type mtlsCert struct {
	tls     tls.Certificate
	leaf    *x509.Certificate
	thumb   string
	certPEM []byte
	keyPEM  []byte
}

func newMTLSPKI(t *testing.T) *mtlsPKI {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Test Client CA", Organization: []string{"Acme Bank"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &mtlsPKI{caCert: ca, caKey: key, pool: pool, dir: t.TempDir()}
}

var mtlsSerial int64 = 100

// issue makes a certificate for cn signed by the CA (selfSigned: by its own key). A server
// certificate is for 127.0.0.1; a client one carries clientAuth.
func (p *mtlsPKI) issue(t *testing.T, cn string, server, selfSigned bool) mtlsCert {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mtlsSerial++
	tpl := &x509.Certificate{SerialNumber: big.NewInt(mtlsSerial), Subject: pkix.Name{CommonName: cn, Organization: []string{"Fintech Ltd"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	return p.sign(t, tpl, key, selfSigned)
}

// sign issues the certificate tpl for key, signed by the CA (selfSigned: by key itself).
func (p *mtlsPKI) sign(t *testing.T, tpl *x509.Certificate, key *ecdsa.PrivateKey, selfSigned bool) mtlsCert {
	t.Helper()
	parent, signer := p.caCert, any(p.caKey)
	if selfSigned {
		parent, signer = tpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	sum := sha256.Sum256(der)
	return mtlsCert{tls: pair, leaf: leaf, thumb: base64.RawURLEncoding.EncodeToString(sum[:]), certPEM: certPEM, keyPEM: keyPEM}
}

func (p *mtlsPKI) write(t *testing.T, name string, data ...[]byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	if err := os.WriteFile(f, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// mtlsEnv is the service on two listeners, like the two hosts in AWS: the plain one the
// browser uses for the pages, and the local server's TLS one, configured by app.TLSConfig
// exactly as cmd/authserver does, that asks for client certificates.
type mtlsEnv struct {
	*env
	tlsSrv  *httptest.Server
	pki     *mtlsPKI
	certA   mtlsCert // issued by the CA to the acceptance client
	certB   mtlsCert // issued by the CA to someone else
	selfSig mtlsCert // self-signed, listed in the client CA file (self_signed_tls_client_auth)
}

func newMTLSEnv(t *testing.T) *mtlsEnv {
	t.Helper()
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{})
	p := newMTLSPKI(t)
	m := &mtlsEnv{env: e, pki: p, certA: p.issue(t, "app-a", false, false), certB: p.issue(t, "app-b", false, false),
		selfSig: p.issue(t, "self-signed-app", false, true)}
	srvCert := p.issue(t, "127.0.0.1", true, false)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.caCert.Raw})
	cfg, err := app.TLSConfig(p.write(t, "server.pem", srvCert.certPEM), p.write(t, "server.key", srvCert.keyPEM),
		p.write(t, "client-ca.pem", caPEM, m.selfSig.certPEM))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Fatalf("ClientAuth = %v, want VerifyClientCertIfGiven", cfg.ClientAuth)
	}
	m.tlsSrv = httptest.NewUnstartedServer(e.srv.Config.Handler)
	m.tlsSrv.TLS = cfg
	m.tlsSrv.StartTLS()
	t.Cleanup(m.tlsSrv.Close)
	return m
}

// client is an HTTPS client that trusts the CA and presents cert (none when nil).
func (m *mtlsEnv) client(cert *mtlsCert) *http.Client {
	c := &tls.Config{RootCAs: m.pki.pool}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.tls}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c}}
}

// exchangeOver trades a code at the TLS token endpoint through client.
func (m *mtlsEnv) exchangeOver(t *testing.T, client *http.Client, code string, creds url.Values) apiResponse {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	for k, v := range creds {
		form[k] = v
	}
	return apiCall(t, client, http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", form)
}

var mtlsSecretCreds = url.Values{"client_id": {clientID}, "client_secret": {clientSecret}}

// TestMTLS_BoundTokens: a token requested over mutual TLS is bound to the certificate
// (RFC 8705 3) and is accepted by the bank API, userinfo and introspection only with it.
func TestMTLS_BoundTokens(t *testing.T) {
	m := newMTLSEnv(t)
	withA, withB, noCert := m.client(&m.certA), m.client(&m.certB), m.client(nil)
	r := m.exchangeOver(t, withA, m.code(t, url.Values{"scope": {"openid email"}}), mtlsSecretCreds)
	if r.status != http.StatusOK {
		t.Fatalf("token over mTLS answered %d: %s", r.status, r.raw)
	}
	access, refresh := r.json["access_token"].(string), r.json["refresh_token"].(string)

	ri := m.apiIntrospect(t, withA, m.tlsSrv.URL, clientID, clientSecret, access)
	if cnf, _ := ri.json["cnf"].(map[string]any); ri.json["active"] != true || cnf["x5t#S256"] != m.certA.thumb {
		t.Fatalf("introspection of the bound token: %s (want cnf.x5t#S256 %s)", ri.raw, m.certA.thumb)
	}

	tests := []struct {
		name   string
		client *http.Client
		base   string
		ok     bool
	}{
		{"with its certificate", withA, m.tlsSrv.URL, true},
		{"with another certificate of the same CA", withB, m.tlsSrv.URL, false},
		{"over TLS without a certificate", noCert, m.tlsSrv.URL, false},
		{"over plain HTTP", http.DefaultClient, m.srv.URL, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v2/bank/accounts", "/invoices/query", httpapi.PathUserinfo} {
				r := apiCall(t, tc.client, http.MethodGet, tc.base+path, "Bearer "+access, nil)
				if tc.ok && r.status != http.StatusOK {
					t.Errorf("%s answered %d: %s", path, r.status, r.raw)
				}
				if !tc.ok && (r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`)) {
					t.Errorf("%s answered %d %q: %s", path, r.status, r.header.Get("WWW-Authenticate"), r.raw)
				}
			}
			ri := m.apiIntrospect(t, tc.client, tc.base, clientID, clientSecret, access)
			if ri.json["active"] != tc.ok {
				t.Errorf("own introspection: %s, want active=%v", ri.raw, tc.ok)
			}
		})
	}

	t.Run("refresh keeps the binding", func(t *testing.T) {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {clientID}, "client_secret": {clientSecret}}
		r := apiCall(t, withA, http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", form)
		if r.status != http.StatusOK {
			t.Fatalf("refresh with the certificate answered %d: %s", r.status, r.raw)
		}
		next := r.json["access_token"].(string)
		if st := apiCall(t, withB, http.MethodGet, m.tlsSrv.URL+"/v2/bank/accounts", "Bearer "+next, nil).status; st != http.StatusUnauthorized {
			t.Errorf("refreshed token with another certificate: %d", st)
		}
		if st := apiCall(t, withA, http.MethodGet, m.tlsSrv.URL+"/v2/bank/accounts", "Bearer "+next, nil).status; st != http.StatusOK {
			t.Errorf("refreshed token with its certificate: %d", st)
		}
		// Another certificate, or none, is refused and changes nothing: the same token then
		// refreshes with its certificate, and the spent one presented without it revokes
		// nothing.
		form.Set("refresh_token", r.json["refresh_token"].(string))
		for name, c := range map[string]*http.Client{"another certificate": withB, "no certificate": noCert} {
			if r := apiCall(t, c, http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", form); r.status != http.StatusBadRequest || r.json["error"] != "invalid_grant" {
				t.Errorf("refresh with %s answered %d: %s", name, r.status, r.raw)
			}
		}
		r = apiCall(t, withA, http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", form)
		if r.status != http.StatusOK {
			t.Fatalf("refresh with its certificate after the refused ones answered %d: %s", r.status, r.raw)
		}
		last := r.json["access_token"].(string)
		if r := apiCall(t, withB, http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", form); r.status != http.StatusBadRequest || r.json["error"] != "invalid_grant" {
			t.Errorf("the spent refresh token with another certificate answered %d: %s", r.status, r.raw)
		}
		if st := apiCall(t, withA, http.MethodGet, m.tlsSrv.URL+"/v2/bank/accounts", "Bearer "+last, nil).status; st != http.StatusOK {
			t.Errorf("the spent token presented with another certificate ended the grant: %d", st)
		}
	})
}

// TestMTLS_UnboundTokensStillWork: a client that presents no certificate gets an unbound
// token, which works on both hosts, with or without a certificate.
func TestMTLS_UnboundTokensStillWork(t *testing.T) {
	m := newMTLSEnv(t)
	r := m.exchangeOver(t, m.client(nil), m.code(t, url.Values{"scope": {"openid"}}), mtlsSecretCreds)
	if r.status != http.StatusOK {
		t.Fatalf("token over TLS without a certificate answered %d: %s", r.status, r.raw)
	}
	access := r.json["access_token"].(string)
	for name, c := range map[string]struct {
		client *http.Client
		base   string
	}{"plain HTTP": {http.DefaultClient, m.srv.URL}, "TLS, no certificate": {m.client(nil), m.tlsSrv.URL}, "TLS, a certificate": {m.client(&m.certB), m.tlsSrv.URL}} {
		if st := apiCall(t, c.client, http.MethodGet, c.base+"/v2/bank/accounts", "Bearer "+access, nil).status; st != http.StatusOK {
			t.Errorf("%s: unbound token answered %d", name, st)
		}
	}
	if ri := m.apiIntrospect(t, http.DefaultClient, m.srv.URL, clientID, clientSecret, access); ri.json["cnf"] != nil {
		t.Errorf("unbound token has cnf: %s", ri.raw)
	}
}

// TestMTLS_ClientAuthentication: clients registered with a certificate (RFC 8705 2.1
// tls_client_auth by subject DN, 2.2 self_signed_tls_client_auth by thumbprint) authenticate
// on the token, introspection and revocation endpoints only with it, and their tokens are
// always bound.
func TestMTLS_ClientAuthentication(t *testing.T) {
	m := newMTLSEnv(t)
	ctx := context.Background()
	now := time.Now()
	for _, c := range []oauth.Client{
		{ID: "pki-client", Name: "PKI App", RedirectURIs: []string{redirectURI}, Scopes: []string{"openid", "email"},
			CertSubjectDN: m.certA.leaf.Subject.String(), CreatedAt: now, UpdatedAt: now},
		{ID: "self-signed-client", Name: "Self-signed App", RedirectURIs: []string{redirectURI}, Scopes: []string{"openid", "email"},
			CertThumbprint: m.selfSig.thumb, CreatedAt: now, UpdatedAt: now},
	} {
		if err := m.app.Store.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, id string
		right    mtlsCert
		wrong    mtlsCert
	}{
		{"tls_client_auth", "pki-client", m.certA, m.certB},
		{"self_signed_tls_client_auth", "self-signed-client", m.selfSig, m.certA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			creds := url.Values{"client_id": {tc.id}}
			for name, c := range map[string]*http.Client{"no certificate": m.client(nil), "another certificate": m.client(&tc.wrong)} {
				code := m.code(t, url.Values{"client_id": {tc.id}, "scope": {"openid"}})
				if r := m.exchangeOver(t, c, code, creds); r.status != http.StatusUnauthorized || r.json["error"] != "invalid_client" {
					t.Errorf("%s: token answered %d: %s", name, r.status, r.raw)
				}
			}
			right := m.client(&tc.right)
			r := m.exchangeOver(t, right, m.code(t, url.Values{"client_id": {tc.id}, "scope": {"openid"}}), creds)
			if r.status != http.StatusOK {
				t.Fatalf("token with the registered certificate answered %d: %s", r.status, r.raw)
			}
			access := r.json["access_token"].(string)
			ri := m.apiIntrospect(t, right, m.tlsSrv.URL, tc.id, "", access)
			if cnf, _ := ri.json["cnf"].(map[string]any); ri.json["active"] != true || cnf["x5t#S256"] != tc.right.thumb {
				t.Errorf("introspection with the certificate: %s", ri.raw)
			}
			if ri := m.apiIntrospect(t, m.client(nil), m.tlsSrv.URL, tc.id, "", access); ri.status != http.StatusUnauthorized {
				t.Errorf("introspection without the certificate answered %d", ri.status)
			}
			if st := apiCall(t, right, http.MethodGet, m.tlsSrv.URL+"/v2/bank/accounts", "Bearer "+access, nil).status; st != http.StatusOK {
				t.Errorf("bank API with the certificate: %d", st)
			}
			revoke := url.Values{"client_id": {tc.id}, "token": {access}}
			if r := apiCall(t, m.client(nil), http.MethodPost, m.tlsSrv.URL+httpapi.PathRevoke, "", revoke); r.status != http.StatusUnauthorized {
				t.Errorf("revoke without the certificate answered %d", r.status)
			}
			if r := apiCall(t, right, http.MethodPost, m.tlsSrv.URL+httpapi.PathRevokeLegacy, "", revoke); r.status != http.StatusOK {
				t.Errorf("revoke with the certificate answered %d: %s", r.status, r.raw)
			}
			if st := apiCall(t, right, http.MethodGet, m.tlsSrv.URL+"/v2/bank/accounts", "Bearer "+access, nil).status; st != http.StatusUnauthorized {
				t.Errorf("revoked token: %d", st)
			}
		})
	}
}

// TestMTLS_UntrustedCertificateRefused: a certificate from a CA not in the client CA file
// fails the handshake; it never reaches a handler.
func TestMTLS_UntrustedCertificateRefused(t *testing.T) {
	m := newMTLSEnv(t)
	stranger := newMTLSPKI(t).issue(t, "stranger", false, false)
	_, err := m.client(&stranger).Get(m.tlsSrv.URL + httpapi.PathDiscovery)
	if err == nil {
		t.Fatal("a certificate of an unknown CA was accepted")
	}
	if resp, err := m.client(nil).Get(m.tlsSrv.URL + httpapi.PathDiscovery); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("no certificate: %v", err)
	} else {
		resp.Body.Close()
	}
}
