package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// eidasDN is the subject of an eIDAS QWAC as a TPP writes it in its registration: RFC 4514
// with organizationIdentifier by name and a multi-valued first RDN.
const eidasDN = "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB"

// issueEIDAS makes an eIDAS-shaped client certificate signed by the CA: country, organisation,
// organizationIdentifier (2.5.4.97, ETSI EN 319 412-1) orgID, then CN and OU in one RDN; with
// the SANs san sets.
func (p *mtlsPKI) issueEIDAS(t *testing.T, orgID string, san func(*x509.Certificate)) mtlsCert {
	t.Helper()
	raw, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 6}, Value: "GB"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Fintech Ltd"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 97}, Value: orgID}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "0015800001041REAAY"}, {Type: asn1.ObjectIdentifier{2, 5, 4, 11}, Value: "Open Banking"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mtlsSerial++
	tpl := &x509.Certificate{SerialNumber: big.NewInt(mtlsSerial), RawSubject: raw,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if san != nil {
		san(tpl)
	}
	return p.sign(t, tpl, key, false)
}

// mtlsAuthenticates runs a code exchange over mutual TLS for the client id with cert and
// reports the answer; a 200 must carry a token bound to cert (RFC 8705 3).
func (m *mtlsEnv) mtlsAuthenticates(t *testing.T, id string, cert mtlsCert) bool {
	t.Helper()
	r := m.exchangeOver(t, m.client(&cert), m.code(t, url.Values{"client_id": {id}, "scope": {"openid"}}), url.Values{"client_id": {id}})
	switch {
	case r.status == http.StatusOK:
		ri := m.apiIntrospect(t, m.client(&cert), m.tlsSrv.URL, id, "", r.json["access_token"].(string))
		if cnf, _ := ri.json["cnf"].(map[string]any); cnf["x5t#S256"] != cert.thumb {
			t.Errorf("%s: token not bound to the certificate: %s", id, ri.raw)
		}
		return true
	case r.status == http.StatusUnauthorized && r.json["error"] == "invalid_client":
		return false
	}
	t.Fatalf("%s: token answered %d: %s", id, r.status, r.raw)
	return false
}

// TestMTLS_EIDASSubjectDN: a tls_client_auth client registered with its eIDAS certificate's
// subject DN as the TPP writes it (RFC 8705 2.1.2 tls_client_auth_subject_dn, RFC 4514, with
// organizationIdentifier and a multi-valued RDN) authenticates over mutual TLS with that
// certificate, and not with one whose organizationIdentifier differs.
func TestMTLS_EIDASSubjectDN(t *testing.T) {
	m := newMTLSEnv(t)
	now := time.Now()
	if err := m.app.Store.CreateClient(context.Background(), oauth.Client{ID: "eidas-tpp", Name: "eIDAS TPP",
		RedirectURIs: []string{redirectURI}, Scopes: []string{"openid"}, CertSubjectDN: eidasDN, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	qwac := m.pki.issueEIDAS(t, "PSDGB-FCA-123456", nil)
	other := m.pki.issueEIDAS(t, "PSDGB-FCA-654321", nil)
	if !m.mtlsAuthenticates(t, "eidas-tpp", qwac) {
		t.Errorf("the certificate with subject %q did not authenticate the client registered with %q", qwac.leaf.Subject, eidasDN)
	}
	if m.mtlsAuthenticates(t, "eidas-tpp", other) {
		t.Error("a certificate with another organizationIdentifier authenticated the client")
	}
}

// TestMTLS_SubjectAltNameOptions: a tls_client_auth client registered with one SAN option
// (RFC 8705 2.1.2 tls_client_auth_san_dns, _san_uri, _san_ip, _san_email) authenticates over
// mutual TLS with a certificate carrying that SAN, and not with one of the same subject
// whose SANs differ.
func TestMTLS_SubjectAltNameOptions(t *testing.T) {
	m := newMTLSEnv(t)
	software, _ := url.Parse("https://tpp.example.com/software/123")
	elsewhere, _ := url.Parse("https://other.example.com/software/123")
	qwac := m.pki.issueEIDAS(t, "PSDGB-FCA-123456", func(c *x509.Certificate) {
		c.DNSNames, c.URIs = []string{"tpp.example.com"}, []*url.URL{software}
		c.IPAddresses, c.EmailAddresses = []net.IP{net.ParseIP("192.0.2.10")}, []string{"ops@tpp.example.com"}
	})
	other := m.pki.issueEIDAS(t, "PSDGB-FCA-123456", func(c *x509.Certificate) {
		c.DNSNames, c.URIs = []string{"other.example.com"}, []*url.URL{elsewhere}
		c.IPAddresses, c.EmailAddresses = []net.IP{net.ParseIP("192.0.2.11")}, []string{"ops@other.example.com"}
	})
	now := time.Now()
	for _, c := range []oauth.Client{
		{ID: "san-dns", CertSANDNS: "TPP.example.com"},
		{ID: "san-uri", CertSANURI: "https://tpp.example.com/software/123"},
		{ID: "san-ip", CertSANIP: "192.0.2.10"},
		{ID: "san-email", CertSANEmail: "ops@tpp.example.com"},
	} {
		t.Run(c.ID, func(t *testing.T) {
			c.Name, c.RedirectURIs, c.Scopes, c.CreatedAt, c.UpdatedAt = c.ID, []string{redirectURI}, []string{"openid"}, now, now
			if err := m.app.Store.CreateClient(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if !m.mtlsAuthenticates(t, c.ID, qwac) {
				t.Error("the certificate with the registered SAN did not authenticate the client")
			}
			if m.mtlsAuthenticates(t, c.ID, other) {
				t.Error("a certificate without the registered SAN authenticated the client")
			}
		})
	}
}
