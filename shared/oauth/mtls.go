package oauth

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/go-ldap/ldap/v3"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// This file holds every rule of mutual-TLS client authentication (RFC 8705 2): how a client
// registers the certificate it will present, and whether a presented certificate is it.
//
// FAPI 2.0 Security Profile (Final) 5.3.2.1 (authorization server) allows mutual TLS client
// authentication (RFC 8705) beside private_key_jwt; RFC 8705 2.1.2 lets a tls_client_auth
// client register exactly one of tls_client_auth_subject_dn, tls_client_auth_san_dns,
// tls_client_auth_san_uri, tls_client_auth_san_ip and tls_client_auth_san_email.

// certBindings lists a client's registered certificate values by the RFC 8705 2.1.2 (and
// 2.2, for the thumbprint) metadata name each stands for.
func (c *Client) certBindings() map[string]string {
	return map[string]string{
		"certificate thumbprint":     c.CertThumbprint,
		"tls_client_auth_subject_dn": c.CertSubjectDN,
		"tls_client_auth_san_dns":    c.CertSANDNS,
		"tls_client_auth_san_uri":    c.CertSANURI,
		"tls_client_auth_san_ip":     c.CertSANIP,
		"tls_client_auth_san_email":  c.CertSANEmail,
	}
}

// ValidCertBinding checks a client's registered certificate: at most one of the thumbprint
// and the five RFC 8705 2.1.2 options ("A client using the tls_client_auth authentication
// method MUST use exactly one of the below metadata parameters"), each well formed, so a
// registered value that could never match a certificate is refused when it is registered
// rather than at every request.
func (c *Client) ValidCertBinding() error {
	var set []string
	for name, v := range c.certBindings() {
		if v != "" {
			set = append(set, name)
		}
	}
	if len(set) > 1 {
		slices.Sort(set)
		return fmt.Errorf("register exactly one way to recognise the client's certificate, not %s (RFC 8705 2.1.2)", strings.Join(set, " and "))
	}
	switch {
	case c.CertSubjectDN != "":
		if _, err := ParseSubjectDN(c.CertSubjectDN); err != nil {
			return err
		}
	case c.CertSANDNS != "":
		if normalDNSName(c.CertSANDNS) == "" {
			return fmt.Errorf("tls_client_auth_san_dns %q is not a DNS name", c.CertSANDNS)
		}
	case c.CertSANURI != "":
		if u, err := url.Parse(c.CertSANURI); err != nil || !u.IsAbs() {
			return fmt.Errorf("tls_client_auth_san_uri %q is not an absolute URI", c.CertSANURI)
		}
	case c.CertSANIP != "":
		if _, err := netip.ParseAddr(c.CertSANIP); err != nil {
			return fmt.Errorf("tls_client_auth_san_ip %q is not an IPv4 or IPv6 address", c.CertSANIP)
		}
	case c.CertSANEmail != "":
		if a, err := mail.ParseAddress(c.CertSANEmail); err != nil || a.Address != c.CertSANEmail || a.Name != "" {
			return fmt.Errorf("tls_client_auth_san_email %q is not an email address (addr-spec)", c.CertSANEmail)
		}
	}
	return nil
}

// certMatches reports whether the certificate the client presented is the one it registered:
// by thumbprint (self_signed_tls_client_auth, RFC 8705 2.2), else by subject DN or one SAN
// (tls_client_auth, RFC 8705 2.1.2; the chain was already verified by the TLS layer).
func certMatches(c *Client, cred ClientCredentials) bool {
	if c.CertThumbprint != "" {
		return cred.CertThumbprint != "" && constantEqual(c.CertThumbprint, cred.CertThumbprint)
	}
	cert := cred.Cert
	if cert == nil {
		return false
	}
	switch {
	case c.CertSubjectDN != "":
		want, err := ParseSubjectDN(c.CertSubjectDN)
		if err != nil {
			return false
		}
		return want.matches(cert.RawSubject)
	case c.CertSANDNS != "":
		want := normalDNSName(c.CertSANDNS)
		return slices.ContainsFunc(cert.DNSNames, func(n string) bool { return normalDNSName(n) == want })
	case c.CertSANURI != "":
		// RFC 8705 2.1.2 asks for the value "matching"; a URI is compared as the exact string,
		// as RFC 5280 4.2.1.6 presents it, with no normalisation that could merge two URIs.
		return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == c.CertSANURI })
	case c.CertSANIP != "":
		want, err := netip.ParseAddr(c.CertSANIP)
		if err != nil {
			return false
		}
		for _, ip := range cert.IPAddresses {
			if got, ok := netip.AddrFromSlice(ip); ok && got.Unmap() == want.Unmap() {
				return true
			}
		}
		return false
	case c.CertSANEmail != "":
		return slices.ContainsFunc(cert.EmailAddresses, func(e string) bool { return emailMatches(e, c.CertSANEmail) })
	}
	return false
}

// normalDNSName is a DNS name in the form two names are compared in (case-insensitive, RFC
// 4343; no trailing dot), or "" when s is not a host name.
func normalDNSName(s string) string {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" || len(s) > 253 {
		return ""
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return ""
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return ""
			}
		}
	}
	return s
}

// emailMatches compares two rfc822Names as RFC 5280 7.5 says: the local part exactly, the
// domain case-insensitively.
func emailMatches(a, b string) bool {
	la, da, okA := strings.Cut(a, "@")
	lb, db, okB := strings.Cut(b, "@")
	return okA && okB && la == lb && strings.EqualFold(da, db)
}

// SubjectDN is a parsed distinguished name: its RDNs in the certificate's order (the reverse
// of the RFC 4514 string's, RFC 4514 2.1), each a set of attributes.
type SubjectDN [][]dnAttribute

// dnAttribute is one attribute of an RDN, its type as an OID and its value normalised for
// comparison.
type dnAttribute struct {
	oid   string
	value string
}

// dnAttributeTypes maps the names a DN string may use for an attribute type to its OID: RFC
// 4514 3's table, the X.520 and eIDAS names TPPs write (organizationIdentifier, 2.5.4.97, on
// every PSD2 certificate, ETSI EN 319 412-1 5.1.4), and the names Go's pkix.Name.String
// prints. Lookup is case-insensitive (RFC 4512 1.4: descriptors are case-insensitive).
var dnAttributeTypes = map[string]string{
	"cn": "2.5.4.3", "commonname": "2.5.4.3",
	"sn": "2.5.4.4", "surname": "2.5.4.4",
	"serialnumber": "2.5.4.5",
	"c":            "2.5.4.6", "countryname": "2.5.4.6",
	"l": "2.5.4.7", "localityname": "2.5.4.7",
	"st": "2.5.4.8", "s": "2.5.4.8", "stateorprovincename": "2.5.4.8",
	"street": "2.5.4.9", "streetaddress": "2.5.4.9",
	"o": "2.5.4.10", "organizationname": "2.5.4.10",
	"ou": "2.5.4.11", "organizationalunitname": "2.5.4.11",
	"title":            "2.5.4.12",
	"businesscategory": "2.5.4.15",
	"postalcode":       "2.5.4.17",
	"gn":               "2.5.4.42", "givenname": "2.5.4.42",
	"initials":               "2.5.4.43",
	"generationqualifier":    "2.5.4.44",
	"dnqualifier":            "2.5.4.46",
	"pseudonym":              "2.5.4.65",
	"organizationidentifier": "2.5.4.97",
	"uid":                    "0.9.2342.19200300.100.1.1", "userid": "0.9.2342.19200300.100.1.1",
	"dc": "0.9.2342.19200300.100.1.25", "domaincomponent": "0.9.2342.19200300.100.1.25",
	"emailaddress": "1.2.840.113549.1.9.1", "e": "1.2.840.113549.1.9.1",
}

// knownOIDs is the set of OIDs dnAttributeTypes maps to. The X.520 (and PKCS #9) equality
// rule of each is caseIgnoreMatch or caseIgnoreIA5Match; types not listed are compared by
// exact value, since their rule is unknown here.
var knownOIDs = func() map[string]bool {
	m := map[string]bool{}
	for _, oid := range dnAttributeTypes {
		m[oid] = true
	}
	return m
}()

// ParseSubjectDN parses an RFC 4514 DN string, as a client registers tls_client_auth_subject_dn
// (RFC 8705 2.1.2: "A string representation of the expected subject distinguished name of the
// certificate, as defined in [RFC4514]"). Attribute types are names or dotted OIDs; values
// may be escaped or, for a dotted type, the #-hex BER form (RFC 4514 2.4).
func ParseSubjectDN(s string) (SubjectDN, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("tls_client_auth_subject_dn is empty")
	}
	dn, err := ldap.ParseDN(s)
	if err != nil {
		return nil, fmt.Errorf("tls_client_auth_subject_dn is not an RFC 4514 distinguished name: %w", err)
	}
	out := make(SubjectDN, 0, len(dn.RDNs))
	for i := len(dn.RDNs) - 1; i >= 0; i-- {
		var rdn []dnAttribute
		for _, a := range dn.RDNs[i].Attributes {
			oid, err := attributeOID(a.Type)
			if err != nil {
				return nil, err
			}
			if a.Value == "" {
				return nil, fmt.Errorf("tls_client_auth_subject_dn: attribute %s has an empty value", a.Type)
			}
			rdn = append(rdn, dnAttribute{oid: oid, value: normalDNValue(oid, a.Value)})
		}
		out = append(out, rdn)
	}
	return out, nil
}

// attributeOID is the OID of an attribute type written as a name or dotted decimal.
func attributeOID(t string) (string, error) {
	t = strings.TrimSpace(t)
	if oid, ok := dnAttributeTypes[strings.ToLower(t)]; ok {
		return oid, nil
	}
	var parts []int
	for _, p := range strings.Split(t, ".") {
		n := 0
		if p == "" || len(p) > 9 || (len(p) > 1 && p[0] == '0') {
			return "", fmt.Errorf("tls_client_auth_subject_dn: unknown attribute type %q (use a name such as CN, O, organizationIdentifier, or a dotted OID)", t)
		}
		for _, r := range p {
			if r < '0' || r > '9' {
				return "", fmt.Errorf("tls_client_auth_subject_dn: unknown attribute type %q (use a name such as CN, O, organizationIdentifier, or a dotted OID)", t)
			}
			n = n*10 + int(r-'0')
		}
		parts = append(parts, n)
	}
	if len(parts) < 2 {
		return "", fmt.Errorf("tls_client_auth_subject_dn: unknown attribute type %q (use a name such as CN, O, organizationIdentifier, or a dotted OID)", t)
	}
	return asn1.ObjectIdentifier(parts).String(), nil
}

// normalDNValue prepares a value for comparison under its type's equality rule (RFC 4518,
// the X.520 caseIgnoreMatch rule): Unicode NFKC, insignificant space removed (leading and
// trailing spaces dropped, inner runs of spaces made one), and case folded. Values of
// unknown types are kept as they are.
func normalDNValue(oid, v string) string {
	if !knownOIDs[oid] {
		return v
	}
	return cases.Fold().String(strings.Join(strings.Fields(norm.NFKC.String(v)), " "))
}

// matches compares the DN with a certificate's DER subject, attribute by attribute (X.501
// distinguishedNameMatch, RFC 4517 4.2.15): the same number of RDNs in the same order, each
// RDN the same set of attribute types with matching values (a multi-valued RDN is a set:
// its order in the string or the DER does not matter).
func (d SubjectDN) matches(rawSubject []byte) bool {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(rawSubject, &seq); err != nil || len(rest) != 0 || len(seq) != len(d) {
		return false
	}
	for i, rdn := range seq {
		got := make([]dnAttribute, 0, len(rdn))
		for _, atv := range rdn {
			value, ok := atv.Value.(string)
			if !ok {
				return false
			}
			oid := atv.Type.String()
			got = append(got, dnAttribute{oid: oid, value: normalDNValue(oid, value)})
		}
		if !slices.Equal(sortedAttributes(got), sortedAttributes(d[i])) {
			return false
		}
	}
	return true
}

// sortedAttributes is a sorted copy of rdn, so two RDNs compare as sets.
func sortedAttributes(rdn []dnAttribute) []dnAttribute {
	out := slices.Clone(rdn)
	slices.SortFunc(out, func(a, b dnAttribute) int {
		if c := strings.Compare(a.oid, b.oid); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	return out
}
