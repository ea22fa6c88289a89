package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// encodingJSON is what writeJSON writes for v.
func encodingJSON(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The hand-written encoding must stay exactly encoding/json's: every field of the response
// (a new one would be missing from appendTokenResponse), every escape.
func TestAppendTokenResponse_SameAsEncodingJSON(t *testing.T) {
	if n := reflect.TypeFor[oauth.TokenResponse]().NumField(); n != 7 {
		t.Fatalf("oauth.TokenResponse has %d fields; appendTokenResponse writes 7: update it", n)
	}
	if n := reflect.TypeFor[oauth.TokenMetadata]().NumField(); n != 3 {
		t.Fatalf("oauth.TokenMetadata has %d fields; appendTokenResponse writes 3: update it", n)
	}
	full := oauth.TokenResponse{AccessToken: "at_" + oauth.NewSecret(""), TokenType: "Bearer", ExpiresIn: 3600,
		RefreshToken: oauth.NewSecret("rt_"), Scope: "openid email bank:transfers.write", IDToken: "eyJ.eyJ.sig",
		Metadata: oauth.TokenMetadata{UID: "uid-1", CompanyProfileID: "cp-1", CompanyUserID: "cu-1"}}
	cases := map[string]oauth.TokenResponse{"full": full, "zero": {}}
	noID := full
	noID.IDToken = ""
	cases["no_id_token"] = noID
	neg := full
	neg.ExpiresIn = -1
	cases["negative_expiry"] = neg
	for name, s := range map[string]string{"quote": `a"b\c`, "html": "<script>&amp;</script>", "control": "a\x00\x01\n\r\t\b\f\x1f",
		"utf8": "Zoë 東京 😀", "line_separators": "a\u2028b\u2029c", "invalid_utf8": "a\xffb\xc3", "del": "\x7f"} {
		r := full
		r.Metadata.CompanyUserID, r.Scope, r.IDToken = s, s, s
		cases[name] = r
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			want := encodingJSON(t, r)
			if got := appendTokenResponse(nil, &r); !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"`, "\\", "<>&", "\x00", "\u2028", "\xff", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

// The token response goes out with the headers of every JSON answer and the same body
// writeJSON would write.
func TestWriteTokenResponse_HeadersAndBodyOfWriteJSON(t *testing.T) {
	r := &oauth.TokenResponse{AccessToken: "at_x", TokenType: "Bearer", ExpiresIn: 60, RefreshToken: "rt_x", Scope: "email",
		Metadata: oauth.TokenMetadata{UID: "u"}}
	for i := 0; i < 3; i++ { // pooled buffers are reused
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeTokenResponse(got, r)
		writeJSON(want, 200, r)
		if got.Code != 200 || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
			t.Fatalf("writeTokenResponse: %d %v %q; writeJSON: %d %v %q", got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
		for k, v := range map[string]string{"Content-Type": "application/json;charset=UTF-8", "Cache-Control": "no-store", "Pragma": "no-cache"} {
			if got.Header().Get(k) != v {
				t.Fatalf("%s = %q, want %q", k, got.Header().Get(k), v)
			}
		}
	}
	// Adding to a shared header value copies it; the shared value is untouched.
	w := httptest.NewRecorder()
	writeTokenResponse(w, r)
	w.Header().Add("Cache-Control", "private")
	if hdrNoStore[0] != "no-store" || len(hdrNoStore) != 1 {
		t.Fatalf("shared header value changed: %v", hdrNoStore)
	}
}
