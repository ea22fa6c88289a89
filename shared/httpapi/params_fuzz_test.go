package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// The fuzz targets of the token and revoke bodies and of the Authorization header: whatever
// arrives, the parsers answer a value or an RFC error, never a panic, and what they accept
// keeps the promises the endpoints rely on (one value per parameter, only the two encodings).
// scripts/fuzz.sh runs each for a bounded time; testdata/fuzz holds their corpora.

// isRequestError reports whether err is the protocol error a malformed request gets.
func isRequestError(err error, codes ...string) bool {
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Status >= 500 {
		return false
	}
	for _, c := range codes {
		if oe.Code == c {
			return true
		}
	}
	return false
}

func FuzzParseForm(f *testing.F) {
	for _, s := range []string{"", "grant_type=authorization_code&code=ac_x&redirect_uri=https%3A%2F%2Fc.example%2Fcb",
		"a=1&a=2", "a=%zz", "a;b=1", "=&=", "a", "a=1&&b=2", "client_secret=%00%ff", strings.Repeat("k=v&", 50)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := parseForm(body)
		if err != nil {
			if !isRequestError(err, oauth.ErrCodeInvalidRequest) {
				t.Fatalf("parseForm(%q) error %v is not invalid_request", body, err)
			}
			return
		}
		for k, vs := range v {
			if len(vs) != 1 {
				t.Fatalf("parseForm(%q) accepted %d values for %q", body, len(vs), k)
			}
		}
	})
}

func FuzzParseJSONObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"grant_type":"refresh_token","refresh_token":"rt_x","client_id":"c"}`, `{"a":"1","a":"2"}`,
		`{"a":null,"a":"2"}`, `{"a":1}`, `{"a":{"b":"c"}}`, `{"a":["x"]}`, `[]`, `"x"`, `{"a":"1"} {}`, `{"a":"1"`, `{"a":"\u0000"}`,
		`{"\ud800":"x"}`, ` {"a" : "b" } `, `{"a":true}`, `null`, ``, `{"a":"1",}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := parseJSONObject(body)
		if err != nil {
			if !isRequestError(err, oauth.ErrCodeInvalidRequest) {
				t.Fatalf("parseJSONObject(%q) error %v is not invalid_request", body, err)
			}
			return
		}
		// What is accepted is one valid JSON object whose values are strings or null, each key
		// at most once.
		if !json.Valid(body) {
			t.Fatalf("parseJSONObject accepted invalid JSON %q", body)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || m == nil {
			t.Fatalf("parseJSONObject accepted %q, which is not an object: %v", body, err)
		}
		for k, val := range m {
			switch val.(type) {
			case string, nil:
			default:
				t.Fatalf("parseJSONObject accepted a %T value for %q", val, k)
			}
		}
		for k, vs := range v {
			if len(vs) != 1 {
				t.Fatalf("%d values for %q", len(vs), k)
			}
			if m[k] != vs[0] {
				t.Fatalf("value of %q = %q, JSON says %v", k, vs[0], m[k])
			}
		}
	})
}

func FuzzReadParams(f *testing.F) {
	f.Add("application/x-www-form-urlencoded", []byte("grant_type=refresh_token&refresh_token=rt_1"))
	f.Add("application/json; charset=utf-8", []byte(`{"token":"at_1"}`))
	f.Add("application/JSON", []byte(`{"token":"at_1"}`))
	f.Add("text/plain", []byte("token=at_1"))
	f.Add("multipart/form-data; boundary=x", []byte("--x--"))
	f.Add("", []byte("a=b"))
	f.Add("application/x-www-form-urlencoded; charset=\"", []byte("a=b"))
	f.Add("application/json", bytes.Repeat([]byte("a"), MaxBodyBytes+1))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, PathToken, bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		v, err := readParams(httptest.NewRecorder(), r)
		if err != nil {
			if !isRequestError(err, oauth.ErrCodeInvalidRequest) {
				t.Fatalf("readParams(%q) error %v is not invalid_request", contentType, err)
			}
			return
		}
		if len(body) > MaxBodyBytes {
			t.Fatalf("accepted a body of %d bytes", len(body))
		}
		mt := strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
		if mt != "application/json" && mt != "application/x-www-form-urlencoded" {
			t.Fatalf("accepted Content-Type %q", contentType)
		}
		for k, vs := range v {
			if len(vs) != 1 {
				t.Fatalf("%d values for %q", len(vs), k)
			}
		}
	})
}

func FuzzClientCredentials(f *testing.F) {
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
	}
	f.Add(basic("client", "s3cret:with+plus%"), "grant_type=refresh_token")
	f.Add(basic("client", "s"), "client_id=client")
	f.Add(basic("client", "s"), "client_id=other")
	f.Add(basic("client", "s"), "client_secret=s")
	f.Add("Basic !!!", "")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("no-colon")), "")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("%zz:%")), "")
	f.Add("Bearer at_x", "")
	f.Add("basic    "+base64.StdEncoding.EncodeToString([]byte("a:b")), "")
	f.Add("", "client_id=c&client_secret=s")
	f.Fuzz(func(t *testing.T, authorization, body string) {
		v, err := parseForm(body)
		if err != nil {
			return
		}
		r := httptest.NewRequest(http.MethodPost, PathToken, nil)
		r.Header.Set("Authorization", authorization)
		c, err := clientCredentials(r, v)
		if err != nil {
			if !isRequestError(err, oauth.ErrCodeInvalidRequest, oauth.ErrCodeInvalidClient) {
				t.Fatalf("clientCredentials(%q) error %v", authorization, err)
			}
			return
		}
		if r.Header.Get("Authorization") == "" {
			if c.ID != v.Get("client_id") || c.Secret != v.Get("client_secret") {
				t.Fatalf("body credentials not taken as given")
			}
			return
		}
		// Basic was accepted: the id and secret are the form-decoded halves of the header
		// (RFC 6749 2.3.1), and the body named no secret and no other client.
		scheme, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Basic") {
			t.Fatalf("accepted scheme %q", scheme)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			t.Fatalf("accepted undecodable Basic credentials %q", rest)
		}
		id, secret, _ := strings.Cut(string(raw), ":")
		wantID, _ := url.QueryUnescape(id)
		wantSecret, _ := url.QueryUnescape(secret)
		if c.ID != wantID || c.Secret != wantSecret {
			t.Fatalf("Basic %q gave id %q secret %q", raw, c.ID, c.Secret)
		}
		if v.Get("client_secret") != "" || (v.Get("client_id") != "" && v.Get("client_id") != c.ID) {
			t.Fatalf("Basic accepted beside body credentials %v", v)
		}
	})
}
