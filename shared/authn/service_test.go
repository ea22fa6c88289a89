package authn

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestNew_NamesEveryMissingRequiredDependency: an empty Deps is refused with one error that
// names every required dependency, and each one left out alone is named; the optional ones
// (Hashing, LoginPolicy, Passkeys, SCA, Audit) may be left out.
func TestNew_NamesEveryMissingRequiredDependency(t *testing.T) {
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	full := Deps{Users: st, Interactions: st, Factors: st, Clock: oauth.SystemClock{},
		Passwords: PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, SessionLifetime: time.Hour,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if s, err := New(full); err != nil || s == nil || s.PasskeysOn() {
		t.Fatalf("New(the required deps only) = %v, %v; want a service with passkeys off", s, err)
	}
	required := map[string]func(*Deps){
		"Users":           func(d *Deps) { d.Users = nil },
		"Interactions":    func(d *Deps) { d.Interactions = nil },
		"Factors":         func(d *Deps) { d.Factors = nil },
		"Clock":           func(d *Deps) { d.Clock = nil },
		"Passwords":       func(d *Deps) { d.Passwords = nil },
		"SessionLifetime": func(d *Deps) { d.SessionLifetime = 0 },
		"Log":             func(d *Deps) { d.Log = nil },
	}
	_, err = New(Deps{})
	for name, drop := range required {
		if err == nil || !strings.Contains(err.Error(), "missing "+name) {
			t.Errorf("New(Deps{}) = %v, want it to name %s", err, name)
		}
		d := full
		drop(&d)
		if s, err := New(d); s != nil || err == nil || !strings.Contains(err.Error(), "missing "+name) {
			t.Errorf("without %s: New = %v, %v; want an error naming it", name, s, err)
		}
	}
}
