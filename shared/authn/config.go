package authn

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

// FromConfig is the user's authentication of a deployment, over its store (DepsFromConfig).
// The pages' function and the local server call it; the functions that serve no page do not,
// and link none of this package.
func FromConfig(cfg config.Config, store oauth.Store, log, audit *slog.Logger) (*Service, error) {
	return New(DepsFromConfig(cfg, store, log, audit))
}

// DepsFromConfig are the dependencies of a deployment's authentication over its store:
// argon2id with the configured cost, the login lockout, password checks bounded by the CPUs
// and the memory limit, passkeys on the base URL's host (off, said once in log, where that
// cannot be), and the SCA policy.
func DepsFromConfig(cfg config.Config, store oauth.Store, log, audit *slog.Logger) Deps {
	return Deps{
		Users:           store,
		Interactions:    store,
		Factors:         store,
		Clock:           oauth.SystemClock{},
		Passwords:       PasswordHasher{Time: cfg.Argon2Time, MemoryKiB: cfg.Argon2MemoryKiB, Threads: 1},
		SessionLifetime: cfg.Lifetimes.Session,
		Log:             log,
		Hashing:         NewHashGate(passwordConcurrency(cfg), DefaultHashWait),
		LoginPolicy:     LoginPolicy{MaxFailures: cfg.LoginMaxFailures, Window: cfg.LoginFailWindow},
		Passkeys:        passkeys(cfg, log),
		SCA:             cfg.SCA,
		PaymentFactors:  cfg.PaymentFactors,
		Audit:           audit,
	}
}

// passkeys is the WebAuthn relying party of the pages at the base URL. A host that cannot be
// one (an IP address: browsers refuse them as RP IDs) turns passkeys off, said in the log;
// locally, use http://localhost:8080 as the base URL to try them.
func passkeys(cfg config.Config, log *slog.Logger) *Passkeys {
	p, err := NewPasskeys(cfg.BaseURL, cfg.PasskeyRPID, "Acme Bank")
	if err != nil {
		if log != nil {
			if host := rpHost(cfg); net.ParseIP(host) != nil {
				local := "http://localhost:8080"
				if u, err := url.Parse(cfg.BaseURL); err == nil && u.Port() != "" {
					local = u.Scheme + "://localhost:" + u.Port()
				}
				log.Warn(fmt.Sprintf("passkeys are off: the server's address %s is an IP address, and a passkey needs a host name; to use passkeys locally, start with --base-url %s (%s=%s)", host, local, config.EnvBaseURL, local))
			} else {
				log.Warn("passkeys are off", slog.String("reason", err.Error()))
			}
		}
		return nil
	}
	return p
}

// rpHost is the passkey relying party's host: AUTH_PASSKEY_RP_ID, else the base URL's host.
func rpHost(cfg config.Config) string {
	if cfg.PasskeyRPID != "" {
		return cfg.PasskeyRPID
	}
	if u, err := url.Parse(cfg.BaseURL); err == nil {
		return u.Hostname()
	}
	return ""
}
