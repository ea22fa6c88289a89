package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// A body of MaxBodyBytes is read whole; one byte more is invalid_request with status 413.
func TestReadParams_BodyUpToTheLimitThen413(t *testing.T) {
	for _, n := range []int{MaxBodyBytes, MaxBodyBytes + 1, 3 * MaxBodyBytes} {
		body := "a=" + strings.Repeat("x", n-2)
		r := httptest.NewRequest(http.MethodPost, PathToken, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		v, err := readParams(httptest.NewRecorder(), r)
		if n <= MaxBodyBytes {
			if err != nil || len(v.Get("a")) != n-2 {
				t.Fatalf("%d bytes: got %d bytes of a, %v", n, len(v.Get("a")), err)
			}
			continue
		}
		var oe *oauth.Error
		if !errors.As(err, &oe) || oe.Code != oauth.ErrCodeInvalidRequest || oe.Status != http.StatusRequestEntityTooLarge ||
			oe.Description != "the request body is too large" {
			t.Fatalf("%d bytes: err %v, want invalid_request 413", n, err)
		}
	}
}

// Each bad body gets its own invalid_request description; a malformed form is reported before
// a repeat, and JSON's duplicate keys (which encoding/json would silently resolve) are refused.
func TestReadParams_BadBodiesAndTheirDescriptions(t *testing.T) {
	cases := []struct{ ct, body, want string }{
		{"application/x-www-form-urlencoded", "a=1&a=2", "the a parameter is repeated"},
		{"application/x-www-form-urlencoded", "b=1&b=2&a=1&a=2", "the a parameter is repeated"},
		{"application/x-www-form-urlencoded", "a=1&a=2&b=%zz", "the form body is malformed"},
		{"application/x-www-form-urlencoded", "a;b=1", "the form body is malformed"},
		{"application/json", `{"a":"1","a":"2"}`, "the a parameter is repeated"},
		{"application/json", `{"a":null,"a":"2"}`, "the a parameter is repeated"},
		{"application/json", `{"a":1}`, "the JSON body must be an object of string values"},
		{"application/json", `{"a":"1"} {}`, "the JSON body must be an object of string values"},
		{"text/plain", "a=1", "Content-Type must be application/x-www-form-urlencoded or application/json"},
		{"", "a=1", "Content-Type must be application/x-www-form-urlencoded or application/json"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodPost, PathToken, strings.NewReader(c.body))
		r.Header.Set("Content-Type", c.ct)
		_, err := readParams(httptest.NewRecorder(), r)
		var oe *oauth.Error
		if !errors.As(err, &oe) || oe.Code != oauth.ErrCodeInvalidRequest || oe.Description != c.want {
			t.Errorf("%s %q: err %v, want invalid_request %q", c.ct, c.body, err, c.want)
		}
	}
	// What is accepted: both encodings, parameters charset and case aside.
	for ct, body := range map[string]string{"application/x-www-form-urlencoded; charset=UTF-8": "token=at%2Bx", "Application/JSON": `{"token":"at+x","hint":null}`} {
		r := httptest.NewRequest(http.MethodPost, PathToken, strings.NewReader(body))
		r.Header.Set("Content-Type", ct)
		v, err := readParams(httptest.NewRecorder(), r)
		if err != nil || v.Get("token") != "at+x" || len(v) != 1 {
			t.Errorf("%s %q: %v, %v", ct, body, v, err)
		}
	}
}

// Basic credentials are form-decoded after base64 (RFC 6749 2.3.1), with one or more spaces
// after the scheme (RFC 7235 2.1); anything undecodable is invalid_client.
func TestClientCredentials_Basic(t *testing.T) {
	cases := []struct{ auth, id, secret, err string }{
		{"Basic " + b64("cl%3Aone:s3cret%2B%25"), "cl:one", "s3cret+%", ""},
		{"basic   " + b64("a:b"), "a", "b", ""},
		{"Basic " + b64("a+b:c+d"), "a b", "c d", ""},
		{"Basic !!!", "", "", "malformed Basic credentials"},
		{"Basic " + b64("no-colon"), "", "", "malformed Basic credentials"},
		{"Basic " + b64("%zz:x"), "", "", "malformed Basic credentials"},
		{"Basic " + b64("x:%"), "", "", "malformed Basic credentials"},
		{"Bearer at_x", "", "", "unsupported authentication scheme; use Basic"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodPost, PathToken, nil)
		r.Header.Set("Authorization", c.auth)
		got, err := clientCredentials(r, nil)
		if c.err != "" {
			var oe *oauth.Error
			if !errors.As(err, &oe) || oe.Code != oauth.ErrCodeInvalidClient || oe.Description != c.err {
				t.Errorf("%q: err %v, want invalid_client %q", c.auth, err, c.err)
			}
			continue
		}
		if err != nil || got.ID != c.id || got.Secret != c.secret {
			t.Errorf("%q: %q %q %v, want %q %q", c.auth, got.ID, got.Secret, err, c.id, c.secret)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A form without a repeated parameter, every token request a client means, is checked without
// allocating; with repeats, the first in sorted order is named (TestReadParams_BadBodies...).
func TestNoRepeats_AllocatesNothingWithoutARepeat(t *testing.T) {
	v := url.Values{"grant_type": {"authorization_code"}, "code": {"ac_x"}, "redirect_uri": {"https://app.example/cb"},
		"code_verifier": {strings.Repeat("v", 43)}, "client_id": {"cl_1"}, "client_assertion_type": {oauth.AssertionTypeJWTBearer},
		"client_assertion": {"e.p.s"}}
	if n := testing.AllocsPerRun(100, func() {
		if err := NoRepeats(v); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("NoRepeats allocated %v times for a form without repeats", n)
	}
}

// The body is read into one buffer of its announced length, but the announcement is the
// client's word: a Content-Length of 1 GiB over a short body allocates no more than the body
// limit, and a body longer than announced is still read whole.
func TestReadParams_ContentLengthSizesTheBufferWithinTheLimit(t *testing.T) {
	for _, c := range []struct {
		announced int64
		body      string
	}{{1 << 30, "a=1"}, {3, "a=" + strings.Repeat("x", 5000)}, {-1, "a=" + strings.Repeat("y", 700)}} {
		r := httptest.NewRequest(http.MethodPost, PathToken, strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.ContentLength = c.announced
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v, err := readParams(httptest.NewRecorder(), r)
		runtime.ReadMemStats(&after)
		if err != nil || "a="+v.Get("a") != c.body {
			t.Fatalf("announced %d, %d bytes: %v, %v", c.announced, len(c.body), len(v.Get("a")), err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 4*MaxBodyBytes {
			t.Fatalf("announced %d, %d bytes: allocated %d bytes", c.announced, len(c.body), got)
		}
	}
}
