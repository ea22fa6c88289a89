package app

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/httpapi"
)

// UserinfoHandler serves the OIDC UserInfo endpoint (the userinfo function).
func (a *App) UserinfoHandler() http.Handler {
	return &httpapi.UserinfoHandler{Service: a.Service, Log: a.Log}
}

// IntrospectHandler serves RFC 7662 introspection (the introspect function), with the
// resource servers named by AUTH_INTROSPECTION_CLIENTS.
func (a *App) IntrospectHandler() http.Handler {
	return &httpapi.IntrospectHandler{Service: a.Service, Log: a.Log, ResourceServers: a.Config.IntrospectionClients}
}

// Authorizer is the bearer-token authorizer of the bank API routes over the app's token
// domain, with the route table of AUTH_ROUTE_SCOPES laid over the default one.
func (a *App) Authorizer() (*authorizer.Authorizer, error) {
	az := authorizer.New(a.Service, a.Config.RouteScopes, a.Log)
	az.Origins = a.Config.Origins()
	return az, nil
}

// APIOptions configure the bank API routes of the local server.
type APIOptions struct {
	// Upstream is the bank API's URL; empty answers the identity context as JSON.
	Upstream string
	// Deprecation is the RFC 9745 value of the deprecated routes ("@1767225600"); empty
	// means httpapi.DefaultDeprecationDate.
	Deprecation string
	// Sunset is the RFC 8594 HTTP-date of their removal; empty sends no Sunset header.
	Sunset string
}

// MountBankAPI adds the protected bank API routes to m (the local server; in AWS API Gateway
// serves them behind the authorizer function).
func (a *App) MountBankAPI(m *http.ServeMux, opts APIOptions) error {
	az, err := a.Authorizer()
	if err != nil {
		return err
	}
	api := &httpapi.BankAPI{Authorizer: az, Log: a.Log}
	if opts.Upstream != "" {
		u, err := url.Parse(opts.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return fmt.Errorf("API upstream %q: want an absolute http(s) URL without query", opts.Upstream)
		}
		api.Upstream = u
	}
	if api.Deprecation.Since, err = ParseDeprecation(opts.Deprecation); err != nil {
		return err
	}
	if opts.Sunset != "" {
		if api.Deprecation.Sunset, err = http.ParseTime(opts.Sunset); err != nil {
			return fmt.Errorf("sunset %q: want an HTTP-date like \"Thu, 31 Dec 2026 23:59:59 GMT\": %w", opts.Sunset, err)
		}
	}
	api.Register(m)
	return nil
}

// ParseDeprecation reads an RFC 9745 Deprecation value, "@" and epoch seconds; empty gives
// httpapi.DefaultDeprecationDate.
func ParseDeprecation(s string) (time.Time, error) {
	if s == "" {
		return httpapi.DefaultDeprecationDate, nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "@"), 10, 64)
	if err != nil || !strings.HasPrefix(s, "@") || n < 0 {
		return time.Time{}, fmt.Errorf("deprecation date %q: want @epoch-seconds like @1767225600", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// TLSConfig is the local server's TLS: its certificate and key, and when clientCAFile is
// given, client certificates requested and verified against those CAs when offered
// (tls.VerifyClientCertIfGiven), so certificate-bound and RFC 8705 clients work next to
// clients without a certificate. A self-signed client certificate is accepted when it is in
// the CA file itself.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pemData, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("client CA %s: no PEM certificate found", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
