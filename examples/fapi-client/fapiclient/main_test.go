package fapiclient

import (
	"errors"
	"io"
	"testing"
	"time"
)

// TestParse_DefaultsAndRequiredFlags: the defaults docs/fapi-by-hand.md states (the loopback
// redirect URI of the walkthrough, scope openid, a 5 minute wait), and a usage error without
// --issuer, --client-id or --key, or with an argument.
func TestParse_DefaultsAndRequiredFlags(t *testing.T) {
	cfg, err := Parse([]string{"--issuer", "http://127.0.0.1:8080/v2/authentication/oauth2", "--client-id", "budget-app", "--key", "k.pem"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RedirectURI != "http://127.0.0.1:4499/callback" || cfg.Scope != "openid" || cfg.Timeout != 5*time.Minute || cfg.Paste || cfg.KeyID != "" {
		t.Fatalf("defaults: %+v", cfg)
	}
	for _, args := range [][]string{
		{"--client-id", "c", "--key", "k.pem"},
		{"--issuer", "https://as.example", "--key", "k.pem"},
		{"--issuer", "https://as.example", "--client-id", "c"},
		{"--issuer", "https://as.example", "--client-id", "c", "--key", "k.pem", "extra"},
		{"--issuer", "https://as.example", "--client-id", "c", "--key", "k.pem", "--colour"},
	} {
		if _, err := Parse(args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("Parse(%q): %v, want a usage error", args, err)
		}
		if code := Main(t.Context(), args, nil, io.Discard, io.Discard); code != 2 {
			t.Errorf("Main(%q) exit %d, want 2", args, code)
		}
	}
}
