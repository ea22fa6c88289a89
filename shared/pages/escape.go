package pages

import "strings"

// The escapers of the compiled pages. Each reproduces, byte for byte, what html/template's
// contextual escaping writes for a plain string in the same context (golden_test.go proves it
// against html/template itself): the pages changed renderer, not output.

// appendHTML appends s escaped for HTML text, an RCDATA element (title) or a quoted attribute
// value: html/template's htmlEscaper, rcdataEscaper and attrEscaper, which share one
// replacement table for strings. Every byte it replaces is ASCII, so a byte loop is exact
// even for invalid UTF-8 (html/template passes undecodable bytes through unchanged too).
func appendHTML(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		var repl string
		switch s[i] {
		case 0:
			repl = "\uFFFD"
		case '"':
			repl = "&#34;"
		case '&':
			repl = "&amp;"
		case '\'':
			repl = "&#39;"
		case '+':
			repl = "&#43;"
		case '<':
			repl = "&lt;"
		case '>':
			repl = "&gt;"
		default:
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, repl...)
		last = i + 1
	}
	return append(b, s[last:]...)
}

// unsafeURL is what a refused URL becomes, as html/template writes it: a fragment that goes
// nowhere and is easy to search for.
const unsafeURL = "#ZgotmplZ"

// safeURL is html/template's isSafeURL: a URL with a scheme must be http, https or mailto
// (any case); javascript:, data:, vbscript: and every other scheme are refused. A colon after
// the first slash is a path, not a scheme.
func safeURL(s string) bool {
	if scheme, _, ok := strings.Cut(s, ":"); ok && !strings.Contains(scheme, "/") {
		return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https") || strings.EqualFold(scheme, "mailto")
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendURL appends s as a whole URL attribute value (href, src, action) in a quoted
// attribute: html/template's urlFilter (refuse unsafe schemes), urlNormalizer (percent-encode
// what is not allowed in a URL, keep valid escapes and reserved characters) and attrEscaper
// (& and + as entities; the normalizer leaves no other character the attribute escapes).
func appendURL(b []byte, s string) []byte {
	if !safeURL(s) {
		s = unsafeURL
	}
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			continue
		}
		switch c {
		case '!', '#', '$', '*', ',', '/', ':', ';', '=', '?', '@', '[', ']', '-', '.', '_', '~':
			continue
		case '%':
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				continue
			}
		}
		b = append(b, s[last:i]...)
		switch c {
		case '&':
			b = append(b, "&amp;"...)
		case '+':
			b = append(b, "&#43;"...)
		default:
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xf])
		}
		last = i + 1
	}
	return append(b, s[last:]...)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
