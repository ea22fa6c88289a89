package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	oidCountry   = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidOrg       = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOrgUnit   = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidCN        = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrgID     = asn1.ObjectIdentifier{2, 5, 4, 97}
	oidLocality  = asn1.ObjectIdentifier{2, 5, 4, 7}
	eidasOrgID   = "PSDGB-FCA-123456"
	eidasSubject = pkix.RDNSequence{
		{{Type: oidCountry, Value: "GB"}},
		{{Type: oidOrg, Value: "Fintech Ltd"}},
		{{Type: oidOrgID, Value: eidasOrgID}},
		// A multi-valued RDN, as some QWACs carry: CN and OU in one set.
		{{Type: oidCN, Value: "0015800001041REAAY"}, {Type: oidOrgUnit, Value: "Open Banking"}},
	}
)

// testCert makes a certificate with the given DER subject (multi-valued RDNs and
// organizationIdentifier need the raw form: pkix.Name cannot say them) and SANs.
func testCert(t testing.TB, subject pkix.RDNSequence, san func(*x509.Certificate)) *x509.Certificate {
	t.Helper()
	raw, err := asn1.Marshal(subject)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: raw, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if san != nil {
		san(tpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertMatches_SubjectDNAttributeByAttribute: a registered tls_client_auth_subject_dn
// (RFC 8705 2.1.2, an RFC 4514 string) matches an eIDAS certificate's subject however the TPP
// writes it (names or OIDs, organizationIdentifier included, #-hex BER values, any order
// inside a multi-valued RDN, any case, extra spaces), and nothing that differs in a value, an
// attribute type, the RDN order or the RDN grouping.
func TestCertMatches_SubjectDNAttributeByAttribute(t *testing.T) {
	cert := testCert(t, eidasSubject, nil)
	orgIDHex := "#13" + hex.EncodeToString([]byte{byte(len(eidasOrgID))}) + hex.EncodeToString([]byte(eidasOrgID))
	match := map[string]string{
		"as the TPP writes it":            "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB",
		"multi-valued RDN in other order": "OU=Open Banking+CN=0015800001041REAAY,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB",
		"organizationIdentifier by OID":   "CN=0015800001041REAAY+OU=Open Banking,2.5.4.97=PSDGB-FCA-123456,O=Fintech Ltd,C=GB",
		"organizationIdentifier as hex":   "CN=0015800001041REAAY+OU=Open Banking,2.5.4.97=" + orgIDHex + ",O=Fintech Ltd,C=GB",
		"every type by OID":               "2.5.4.3=0015800001041REAAY+2.5.4.11=Open Banking,2.5.4.97=PSDGB-FCA-123456,2.5.4.10=Fintech Ltd,2.5.4.6=GB",
		"other case and spaces":           "cn=0015800001041reaay + ou=open   banking, ORGANIZATIONIDENTIFIER=psdgb-fca-123456, o=FINTECH LTD, c=gb",
		"long attribute names":            "commonName=0015800001041REAAY+organizationalUnitName=Open Banking,organizationIdentifier=PSDGB-FCA-123456,organizationName=Fintech Ltd,countryName=GB",
	}
	refuse := map[string]string{
		"another organizationIdentifier": "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-654321,O=Fintech Ltd,C=GB",
		"an attribute missing":           "CN=0015800001041REAAY,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB",
		"an attribute more":              "CN=0015800001041REAAY+OU=Open Banking+L=London,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB",
		"an RDN more":                    "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,L=London,C=GB",
		"the multi-valued RDN split":     "CN=0015800001041REAAY,OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB",
		"RDNs reversed":                  "C=GB,O=Fintech Ltd,organizationIdentifier=PSDGB-FCA-123456,CN=0015800001041REAAY+OU=Open Banking",
		"another type, same value":       "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,OU=Fintech Ltd,C=GB",
		"a value with a suffix":          "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd.,C=GB",
		"hex of another value":           "CN=0015800001041REAAY+OU=Open Banking,2.5.4.97=#130141,O=Fintech Ltd,C=GB",
	}
	for name, dn := range match {
		t.Run("matches/"+name, func(t *testing.T) {
			c := &Client{CertSubjectDN: dn}
			if err := c.ValidCertBinding(); err != nil {
				t.Fatalf("registration refused: %v", err)
			}
			if !certMatches(c, ClientCredentials{Cert: cert}) {
				t.Errorf("%q does not match the certificate's subject %s", dn, cert.Subject)
			}
		})
	}
	for name, dn := range refuse {
		t.Run("refuses/"+name, func(t *testing.T) {
			if certMatches(&Client{CertSubjectDN: dn}, ClientCredentials{Cert: cert}) {
				t.Errorf("%q matches the certificate's subject %s", dn, cert.Subject)
			}
		})
	}
	if certMatches(&Client{CertSubjectDN: match["as the TPP writes it"]}, ClientCredentials{}) {
		t.Error("a request without a certificate matches")
	}
}

// TestCertMatches_EscapedAndUnicodeValues: RFC 4514 escapes in the registered DN stand for
// the characters they escape, and values compare after NFKC normalisation and case folding
// (RFC 4518, caseIgnoreMatch).
func TestCertMatches_EscapedAndUnicodeValues(t *testing.T) {
	cert := testCert(t, pkix.RDNSequence{
		{{Type: oidCountry, Value: "DE"}},
		{{Type: oidOrg, Value: "Zahlung, Süd + Co"}},
		{{Type: oidLocality, Value: "München"}},
		{{Type: oidCN, Value: "tpp"}},
	}, nil)
	for _, dn := range []string{
		`CN=tpp,L=München,O=Zahlung\, Süd \+ Co,C=DE`,
		`CN=tpp,L=MÜNCHEN,O=zahlung\2C süd \2b co,C=DE`,
		"CN=tpp,L=Mu\u0308nchen,O=Zahlung\\, Su\u0308d \\+ Co,C=DE", // decomposed ü
	} {
		if !certMatches(&Client{CertSubjectDN: dn}, ClientCredentials{Cert: cert}) {
			t.Errorf("%q does not match %s", dn, cert.Subject)
		}
	}
	if certMatches(&Client{CertSubjectDN: `CN=tpp,L=Munchen,O=Zahlung\, Süd \+ Co,C=DE`}, ClientCredentials{Cert: cert}) {
		t.Error("Munchen matches München")
	}
}

// TestCertMatches_UnknownAttributeTypesCompareExactly: an attribute the server knows by no
// name, registered by dotted OID, matches only its exact value (its X.520 matching rule is
// unknown, so no case folding).
func TestCertMatches_UnknownAttributeTypesCompareExactly(t *testing.T) {
	cert := testCert(t, pkix.RDNSequence{
		{{Type: oidCountry, Value: "GB"}},
		{{Type: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: "Licence-AB"}},
	}, nil)
	if !certMatches(&Client{CertSubjectDN: "1.3.6.1.4.1.99999.1=Licence-AB,C=GB"}, ClientCredentials{Cert: cert}) {
		t.Error("the exact value of an unknown attribute does not match")
	}
	if certMatches(&Client{CertSubjectDN: "1.3.6.1.4.1.99999.1=licence-ab,C=GB"}, ClientCredentials{Cert: cert}) {
		t.Error("an unknown attribute matches in another case")
	}
}

// TestCertMatches_SubjectAltNames: tls_client_auth_san_dns, _san_uri, _san_ip and _san_email
// (RFC 8705 2.1.2) match an entry of that type in the certificate's subjectAltName, and
// nothing else: not another type's entry, not the subject, not a near value.
func TestCertMatches_SubjectAltNames(t *testing.T) {
	software, _ := url.Parse("https://tpp.example.com/software/123")
	cert := testCert(t, eidasSubject, func(c *x509.Certificate) {
		c.DNSNames = []string{"api.tpp.example.com", "tpp.example.com", "*.wild.example.com"}
		c.URIs = []*url.URL{software}
		c.IPAddresses = []net.IP{net.ParseIP("192.0.2.10"), net.ParseIP("2001:db8::1")}
		c.EmailAddresses = []string{"Ops@TPP.example.com"}
	})
	plain := testCert(t, pkix.RDNSequence{{{Type: oidCN, Value: "tpp.example.com"}}}, nil)
	tests := []struct {
		name   string
		client Client
		cert   *x509.Certificate
		want   bool
	}{
		{"dns: an entry", Client{CertSANDNS: "tpp.example.com"}, cert, true},
		{"dns: case and trailing dot", Client{CertSANDNS: "TPP.Example.COM."}, cert, true},
		{"dns: a parent domain", Client{CertSANDNS: "example.com"}, cert, false},
		{"dns: another name", Client{CertSANDNS: "www.tpp.example.com"}, cert, false},
		{"dns: a wildcard entry covers no name", Client{CertSANDNS: "x.wild.example.com"}, cert, false},
		{"dns: only in the subject CN", Client{CertSANDNS: "tpp.example.com"}, plain, false},
		{"uri: the entry", Client{CertSANURI: "https://tpp.example.com/software/123"}, cert, true},
		{"uri: a trailing slash", Client{CertSANURI: "https://tpp.example.com/software/123/"}, cert, false},
		{"uri: a prefix", Client{CertSANURI: "https://tpp.example.com/software/12"}, cert, false},
		{"ip: IPv4", Client{CertSANIP: "192.0.2.10"}, cert, true},
		{"ip: IPv6 written longer", Client{CertSANIP: "2001:0db8:0:0::1"}, cert, true},
		{"ip: another address", Client{CertSANIP: "192.0.2.11"}, cert, false},
		{"email: domain in another case", Client{CertSANEmail: "Ops@tpp.example.com"}, cert, true},
		{"email: local part in another case", Client{CertSANEmail: "ops@tpp.example.com"}, cert, false},
		{"email: a DNS name is not an email", Client{CertSANEmail: "Ops@api.tpp.example.com"}, cert, false},
		{"no certificate", Client{CertSANDNS: "tpp.example.com"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.client.ValidCertBinding(); err != nil {
				t.Fatalf("registration refused: %v", err)
			}
			if !tc.client.UsesMTLS() {
				t.Fatal("a client with a SAN registered does not use mutual TLS")
			}
			if got := certMatches(&tc.client, ClientCredentials{Cert: tc.cert}); got != tc.want {
				t.Errorf("certMatches = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestValidCertBinding_RefusesWhatCouldNeverMatch: exactly one of the RFC 8705 2.1.2 options
// (or a thumbprint), each well formed; anything else is refused at registration.
func TestValidCertBinding_RefusesWhatCouldNeverMatch(t *testing.T) {
	cases := map[string]Client{
		"subject DN and a SAN":        {CertSubjectDN: "CN=tpp", CertSANDNS: "tpp.example.com"},
		"two SANs":                    {CertSANIP: "192.0.2.1", CertSANEmail: "a@b.example"},
		"thumbprint and a SAN":        {CertThumbprint: strings.Repeat("A", 43), CertSANURI: "https://tpp.example/"},
		"DN without a value":          {CertSubjectDN: "CN"},
		"DN with an empty value":      {CertSubjectDN: "CN=,O=x"},
		"DN with an unknown type":     {CertSubjectDN: "favouriteColour=blue"},
		"DN with a bad OID":           {CertSubjectDN: "2.5.x.97=PSDGB-FCA-123456"},
		"DN with bad hex":             {CertSubjectDN: "2.5.4.97=#13zz"},
		"DN with hex and extra bytes": {CertSubjectDN: "2.5.4.97=#1301410000"},
		"DN of spaces":                {CertSubjectDN: "   "},
		"dns with a space":            {CertSANDNS: "tpp example.com"},
		"dns with a wildcard":         {CertSANDNS: "*.example.com"},
		"relative uri":                {CertSANURI: "/software/123"},
		"ip with a port":              {CertSANIP: "192.0.2.1:443"},
		"ip that is a name":           {CertSANIP: "tpp.example.com"},
		"email with a display name":   {CertSANEmail: "Ops <ops@tpp.example.com>"},
		"email without a domain":      {CertSANEmail: "ops"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if err := c.ValidCertBinding(); err == nil {
				t.Errorf("%+v registered", c)
			}
		})
	}
	if err := (&Client{CertSubjectDN: ""}).ValidCertBinding(); err != nil {
		t.Errorf("a client without a certificate: %v", err)
	}
}

// BenchmarkCertMatches_EIDASSubjectDN is the per-request cost of tls_client_auth by subject
// DN: parsing the registered DN and the certificate's subject, and comparing them.
func BenchmarkCertMatches_EIDASSubjectDN(b *testing.B) {
	cert := testCert(b, eidasSubject, nil)
	c := &Client{CertSubjectDN: "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB"}
	cred := ClientCredentials{Cert: cert}
	for b.Loop() {
		if !certMatches(c, cred) {
			b.Fatal("no match")
		}
	}
}

// TestCertMatches_OpenSSLPrintsTheDNToRegister: the subject that `openssl x509 -noout -subject
// -nameopt RFC2253` prints is the RFC 4514 string to register, for an eIDAS certificate and
// for one whose RDNs are not in the usual C, O, CN order (the certificate's order counts, so
// the other order is refused). Skipped where openssl is not installed.
func TestCertMatches_OpenSSLPrintsTheDNToRegister(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed")
	}
	for name, tc := range map[string]struct {
		subject pkix.RDNSequence
		refused string
	}{
		"eIDAS":       {eidasSubject, "C=GB,O=Fintech Ltd,organizationIdentifier=PSDGB-FCA-123456,CN=0015800001041REAAY+OU=Open Banking"},
		"CN before O": {pkix.RDNSequence{{{Type: oidCN, Value: "my-app"}}, {{Type: oidOrg, Value: "Fintech"}}}, "CN=my-app,O=Fintech"},
	} {
		t.Run(name, func(t *testing.T) {
			cert := testCert(t, tc.subject, nil)
			f := filepath.Join(t.TempDir(), "client.pem")
			if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(openssl, "x509", "-in", f, "-noout", "-subject", "-nameopt", "RFC2253").Output()
			if err != nil {
				t.Fatalf("openssl: %v", err)
			}
			dn := strings.TrimSpace(strings.TrimPrefix(string(out), "subject="))
			c := &Client{CertSubjectDN: dn}
			if err := c.ValidCertBinding(); err != nil {
				t.Fatalf("openssl's %q refused at registration: %v", dn, err)
			}
			if !certMatches(c, ClientCredentials{Cert: cert}) {
				t.Errorf("openssl's %q does not match", dn)
			}
			if certMatches(&Client{CertSubjectDN: tc.refused}, ClientCredentials{Cert: cert}) {
				t.Errorf("%q (RDNs in another order than openssl's %q) matches", tc.refused, dn)
			}
		})
	}
}

// FuzzCertMatches_SubjectDNNeverPanics: whatever string is registered as the subject DN,
// registration and matching answer without panicking, and a DN that registration refuses
// never matches.
func FuzzCertMatches_SubjectDNNeverPanics(f *testing.F) {
	for _, s := range []string{eidasDNForFuzz, "2.5.4.97=#131050534447422d4643412d313233343536", `O=a\,b+CN=\2C`, "CN=#", "=,+;\\", "1.2=#"} {
		f.Add(s)
	}
	cert := testCert(f, eidasSubject, nil)
	f.Fuzz(func(t *testing.T, dn string) {
		c := &Client{CertSubjectDN: dn}
		valid := c.ValidCertBinding() == nil
		if certMatches(c, ClientCredentials{Cert: cert}) && !valid {
			t.Errorf("%q matches but is refused at registration", dn)
		}
	})
}

const eidasDNForFuzz = "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB"
