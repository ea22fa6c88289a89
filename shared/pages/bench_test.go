package pages

import (
	"io"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// The page renderings alone, without the HTTP handler around them: what a request pays for
// its HTML.

func BenchmarkRenderLogin(b *testing.B) {
	p, f := newPages(b), testForm()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Login(io.Discard, "en", f, "", LoginProblem{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderLoginFailed(b *testing.B) {
	p, f := newPages(b), testForm()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Login(io.Discard, "fr", f, "alice", LoginProblem{Failed: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderConsent(b *testing.B) {
	p, f := newPages(b), testForm()
	scopes := oauth.Scopes{"openid", "email", "bank:transfers:write"}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Consent(io.Discard, "en", f, "Alice Martin", scopes, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderError(b *testing.B) {
	p := newPages(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Error(io.Discard, "en", "expired"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNew is the pages' share of a function's init: parsing and compiling every page of
// every language.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New("/assets/"); err != nil {
			b.Fatal(err)
		}
	}
}
