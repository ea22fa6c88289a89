package pages

import (
	"slices"
	"testing"
)

// FuzzNegotiate feeds any ui_locales parameter and Accept-Language header to the language
// choice of the pages: no panic, and the answer is always a language the pages have.
func FuzzNegotiate(f *testing.F) {
	f.Add("fr-CA en", "")
	f.Add("", "fr-FR,fr;q=0.9,en;q=0.8")
	f.Add("x-klingon", "*;q=0.1")
	f.Add("", "en;q=nope,,,;")
	f.Add("zh-Hant-TW-u-ca-chinese-x-private", "de-DE-1996;q=0.5")
	f.Fuzz(func(t *testing.T, uiLocales, acceptLanguage string) {
		got := Negotiate(uiLocales, acceptLanguage)
		if !slices.Contains(Locales, got) {
			t.Fatalf("Negotiate(%q, %q) = %q, not one of %v", uiLocales, acceptLanguage, got, Locales)
		}
	})
}
