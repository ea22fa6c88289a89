package httpapi

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
)

// ClientCertificate returns the SHA-256 thumbprint (base64url, RFC 8705 x5t#S256) and the
// parsed TLS client certificate of a mutual-TLS request, or "" and nil. The
// certificate comes from the local server's own TLS handshake or, behind API Gateway's mutual
// TLS custom domain, from the request context API Gateway fills (it has already verified the
// chain against the truststore).
func ClientCertificate(r *http.Request) (thumbprint string, cert *x509.Certificate) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		c := r.TLS.PeerCertificates[0]
		return CertThumbprint(c.Raw), c
	}
	if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok {
		cc := rc.Authentication.ClientCert
		if cc.ClientCertPem == "" {
			return "", nil
		}
		block, _ := pem.Decode([]byte(cc.ClientCertPem))
		if block == nil {
			return "", nil
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			return CertThumbprint(c.Raw), c
		}
	}
	return "", nil
}

// CertThumbprint is the base64url SHA-256 of a DER certificate.
func CertThumbprint(der []byte) string {
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
