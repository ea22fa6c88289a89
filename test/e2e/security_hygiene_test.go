package e2e

import (
	"context"
	"encoding/base64"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/seed"
)

// Request hygiene (RFC 6749 3.1, 3.2, 2.3.1; RFC 6819 5.1.4; RFC 9700 4.1): every malformed
// request gets the RFC error, never a 5xx, and changes nothing stored.

// TestHygiene_BadBodiesRefusedEverywhere: oversized bodies, repeated parameters (form and
// JSON), unknown content types and malformed encodings on the token endpoint and both revocation
// paths are invalid_request with no-store, and leave the store as it was.
func TestHygiene_BadBodiesRefusedEverywhere(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	creds := "client_id=" + clientID + "&client_secret=" + clientSecret
	jsonCreds := `"client_id":"` + clientID + `","client_secret":"` + clientSecret + `"`
	form, js := "application/x-www-form-urlencoded", "application/json"
	big := "token=" + strings.Repeat("a", httpapi.MaxBodyBytes) + "&" + creds
	cases := []struct {
		name, ct, body string
		status         int
	}{
		{"oversized form body", form, big, http.StatusRequestEntityTooLarge},
		{"oversized JSON body", js, `{"token":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `",` + jsonCreds + `}`, http.StatusRequestEntityTooLarge},
		{"repeated form parameter", form, "token=at_a&token=at_b&" + creds, 400},
		{"repeated client_id", form, "token=at_a&" + creds + "&client_id=" + clientID, 400},
		{"repeated JSON key", js, `{"token":"at_a","token":"at_b",` + jsonCreds + `}`, 400},
		{"repeated JSON key after null", js, `{"token":null,"token":"at_b",` + jsonCreds + `}`, 400},
		{"text/plain", "text/plain", "token=at_a&" + creds, 400},
		{"multipart", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\nat_a\r\n--x--", 400},
		{"no content type", "", "token=at_a&" + creds, 400},
		{"malformed content type", "application/json; charset=\"", `{"token":"at_a",` + jsonCreds + `}`, 400},
		{"malformed form encoding", form, "token=%zz&" + creds, 400},
		{"semicolon separator", form, "token=at_a;" + creds, 400},
		{"JSON array", js, `[{"token":"at_a"}]`, 400},
		{"JSON nested object", js, `{"token":{"v":"at_a"},` + jsonCreds + `}`, 400},
		{"JSON number", js, `{"token":12,` + jsonCreds + `}`, 400},
		{"JSON trailing data", js, `{"token":"at_a",` + jsonCreds + `}{}`, 400},
		{"JSON truncated", js, `{"token":"at_a",`, 400},
	}
	for _, path := range []string{httpapi.PathToken, httpapi.PathRevoke, httpapi.PathRevokeLegacy, httpapi.PathIntrospect} {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				before := e.writes.count()
				st, body, h := e.secPost(t, path, c.ct, c.body, nil)
				want := "invalid_request"
				if c.status == 401 {
					want = "invalid_client"
				}
				if st != c.status || body["error"] != want {
					t.Fatalf("%d %v, want %d %s", st, body, c.status, want)
				}
				if h.Get("Cache-Control") != "no-store" {
					t.Fatal("no Cache-Control: no-store")
				}
				if e.writes.count() != before {
					t.Fatalf("the store changed: %v", e.writes.list()[before:])
				}
			})
		}
	}
	// userinfo reads an access_token from a body by the same rules (RFC 6750 2.2).
	for _, c := range []struct {
		name, ct, body string
		status         int
	}{
		{"oversized", form, "access_token=" + strings.Repeat("a", httpapi.MaxBodyBytes), http.StatusRequestEntityTooLarge},
		{"repeated access_token", form, "access_token=at_a&access_token=at_b", 400},
		{"text/plain", "text/plain", "access_token=at_a", 400},
	} {
		t.Run(httpapi.PathUserinfo+"/"+c.name, func(t *testing.T) {
			before := e.writes.count()
			st, body, h := e.secPost(t, httpapi.PathUserinfo, c.ct, c.body, nil)
			if st != c.status || (body != nil && body["error"] != "invalid_request") {
				t.Fatalf("%d %v, want %d invalid_request", st, body, c.status)
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Fatal("no Cache-Control: no-store")
			}
			if e.writes.count() != before {
				t.Fatalf("the store changed: %v", e.writes.list()[before:])
			}
		})
	}
	t.Run("GET on the token endpoint", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, e.url(httpapi.PathToken)+"?grant_type=refresh_token&refresh_token=x&"+creds, nil)
		if st, body, _ := do(t, req); st != http.StatusMethodNotAllowed || body["error"] != "invalid_request" {
			t.Fatalf("%d %v", st, body)
		}
	})
}

// TestHygiene_BadFormsOnPages: the login and consent forms are form-encoded, bounded and
// unrepeated too; a bad one gets an error page and changes nothing.
func TestHygiene_BadFormsOnPages(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	good := url.Values{"request_id": {b.form.Get("request_id")}, "csrf_token": {b.form.Get("csrf_token")}, "action": {"login"},
		"username": {username}, "password": {password}}
	for _, c := range []struct {
		name, ct, body string
	}{
		{"repeated password", "application/x-www-form-urlencoded", good.Encode() + "&password=other"},
		{"repeated request_id", "application/x-www-form-urlencoded", good.Encode() + "&request_id=ar_other"},
		{"JSON", "application/json", `{"request_id":"` + good.Get("request_id") + `"}`},
		{"oversized", "application/x-www-form-urlencoded", good.Encode() + "&pad=" + strings.Repeat("a", httpapi.MaxBodyBytes)},
		{"malformed", "application/x-www-form-urlencoded", good.Encode() + "&%zz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.writes.count()
			req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathAuthorize), strings.NewReader(c.body))
			req.Header.Set("Content-Type", c.ct)
			resp, err := b.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b.read(resp)
			if resp.StatusCode != 400 || resp.Header.Get("Location") != "" || strings.Contains(b.last, `value="allow"`) {
				t.Fatalf("answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if e.writes.count() != before {
				t.Fatalf("the store changed: %v", e.writes.list()[before:])
			}
		})
	}
}

// trickyClient has an id and a secret made of the characters form-encoding changes.
const (
	trickyID     = "tricky:client+id%"
	trickySecret = "s3cr3t:with+plus%25and space&é=0123456789abcdef"
)

// TestHygiene_BasicCredentialsFormDecoded: Basic credentials are the form-encoded id and secret
// (RFC 6749 2.3.1), so ids and secrets with ':' '+' '%' and spaces work when encoded as the RFC
// says and fail otherwise; Basic beside a body secret, or naming another client, is refused.
func TestHygiene_BasicCredentialsFormDecoded(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	f := &seed.File{Clients: []seed.Client{{ClientID: trickyID, ClientSecret: trickySecret, Name: "Tricky", RedirectURIs: []string{otherURI}, Scopes: []string{"openid"}}}}
	if _, err := seed.Load(context.Background(), e.app.Store, f, cheapHasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	basic := func(id, secret string) http.Header {
		return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))}}
	}
	const form = "application/x-www-form-urlencoded"
	for _, c := range []struct {
		name   string
		header http.Header
		body   string
		status int
		err    string
	}{
		{"form-encoded", basic(url.QueryEscape(trickyID), url.QueryEscape(trickySecret)), "token=at_unknown", 200, ""},
		{"space as %20", basic(url.QueryEscape(trickyID), strings.ReplaceAll(url.QueryEscape(trickySecret), "+", "%20")), "token=at_unknown", 200, ""},
		{"not encoded", basic(trickyID, trickySecret), "token=at_unknown", 401, "invalid_client"},
		{"lower-case scheme", http.Header{"Authorization": {"basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(trickyID)+":"+url.QueryEscape(trickySecret)))}}, "token=at_unknown", 200, ""},
		{"wrong secret", basic(url.QueryEscape(trickyID), "wrong"), "token=at_unknown", 401, "invalid_client"},
		{"not base64", http.Header{"Authorization": {"Basic %%%"}}, "token=at_unknown", 401, "invalid_client"},
		{"no colon", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("abc"))}}, "token=at_unknown", 401, "invalid_client"},
		{"Bearer scheme", http.Header{"Authorization": {"Bearer at_x"}}, "token=at_unknown", 401, "invalid_client"},
		{"Basic and body secret", basic(url.QueryEscape(trickyID), url.QueryEscape(trickySecret)), "token=at_unknown&client_secret=" + url.QueryEscape(trickySecret), 400, "invalid_request"},
		{"Basic and other client_id", basic(url.QueryEscape(trickyID), url.QueryEscape(trickySecret)), "token=at_unknown&client_id=" + clientID, 400, "invalid_request"},
		{"body secret", nil, "token=at_unknown&client_id=" + url.QueryEscape(trickyID) + "&client_secret=" + url.QueryEscape(trickySecret), 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, body, h := e.secPost(t, httpapi.PathRevoke, form, c.body, c.header)
			if st != c.status || (c.err != "" && body["error"] != c.err) {
				t.Fatalf("%d %v, want %d %s", st, body, c.status, c.err)
			}
			if c.err == "invalid_client" && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic") {
				t.Fatal("401 without WWW-Authenticate: Basic")
			}
		})
	}
}

// redirectTricks are near misses of the registered http://127.0.0.1:4499/callback: each must
// be refused as unregistered (RFC 9700 4.1.3: exact string matching, no normalisation).
var redirectTricks = []string{
	"http://127.0.0.1:4499/callback/",             // trailing slash
	"http://127.0.0.1:4499/Callback",              // path case
	"HTTP://127.0.0.1:4499/callback",              // scheme case
	"http://127.0.0.1:4499/callback?",             // empty query
	"http://127.0.0.1:4499/callback?x=1",          // added query
	"http://127.0.0.1:4499/callback#",             // empty fragment
	"http://127.0.0.1:4499/callback#x",            // fragment
	"http://127.0.0.1:4499/%63allback",            // encoded unreserved character
	"http://127.0.0.1:4499/callback%2F",           // encoded slash
	"http://127.0.0.1:4499/callback%00",           // encoded NUL
	"http://127.0.0.1:4499/callback/../callback",  // dot segments
	"http://127.0.0.1:4499/./callback",            // dot segment
	"http://127.0.0.1:4499//callback",             // double slash
	"http://127.0.0.1:4499\\callback",             // backslash
	"http://user@127.0.0.1:4499/callback",         // userinfo
	"http://127.0.0.1:4499@evil.example/callback", // userinfo making evil.example the host
	"http://127.0.0.1:4499.evil.example/callback", // host suffix
	"http://127.0.0.1:80/callback",                // other port
	"http://127.0.0.1/callback",                   // no port
	"http://localhost:4499/callback",              // same loopback, other name
	"http://[::1]:4499/callback",                  // same loopback, IPv6
	"http://127.000.000.001:4499/callback",        // octets with zeros
	"https://127.0.0.1:4499/callback",             // other scheme
	" http://127.0.0.1:4499/callback",             // leading space
	"http://127.0.0.1:4499/callback ",             // trailing space
	"http://127.0.0.1:4499/callback\t",            // trailing tab
	"http://127.0.0.1:4499/callbac",               // prefix of the registered one
	"http://127.0.0.1:4499/callbackx",             // registered one as a prefix
	"http://127.0.0.1:4499/callback/evil",         // path below
	"//127.0.0.1:4499/callback",                   // scheme-relative
	"http://127.0.0.1:4499/c\u0430llback",         // Cyrillic a
	"http://127.0.0.1:4499/callback%252F",         // double encoding
	"javascript://127.0.0.1:4499/callback%0aalert(1)",
}

// TestHygiene_RedirectURIExactMatch: at authorize every near miss of a registered URI gets an
// error page and no redirect (not an open redirector), and stores nothing; at the token
// endpoint a near miss of the authorized URI is invalid_grant; on refresh an unregistered one
// is invalid_request.
func TestHygiene_RedirectURIExactMatch(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	for _, trick := range redirectTricks {
		t.Run("authorize "+trick, func(t *testing.T) {
			before := e.writes.count()
			b := newBrowser(t)
			resp := b.open(e.authorizeURL(url.Values{"redirect_uri": {trick}, "response_type": {"token"}, "scope": {"admin"}}))
			if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
				t.Fatalf("answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if e.writes.count() != before {
				t.Fatalf("the store changed: %v", e.writes.list()[before:])
			}
		})
	}
	t.Run("token", func(t *testing.T) {
		for _, trick := range redirectTricks[:8] {
			st, body := e.exchange(t, e.code(t, nil), url.Values{"redirect_uri": {trick}})
			if st != 400 || body["error"] != "invalid_grant" {
				t.Fatalf("%q: %d %v", trick, st, body)
			}
		}
		st, body := e.exchange(t, e.code(t, nil), url.Values{"redirect_uri": {""}})
		if st != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("omitted redirect_uri: %d %v", st, body)
		}
	})
	t.Run("refresh", func(t *testing.T) {
		tok := e.secTokens(t, nil)
		for _, trick := range redirectTricks[:4] {
			st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"},
				"refresh_token": {tok["refresh_token"].(string)}, "redirect_uri": {trick}}, false, false)
			if st != 400 || body["error"] != "invalid_request" {
				t.Fatalf("%q: %d %v", trick, st, body)
			}
		}
		if st, body := e.secRefresh(t, tok["refresh_token"].(string)); st != 200 {
			t.Fatalf("a refused redirect_uri spent the refresh token: %d %v", st, body)
		}
	})
}

// secretName matches identifiers that hold a secret, or a value derived from one, that a
// comparison could leak through its timing.
var secretName = regexp.MustCompile(`(?i)(secret|password|csrf|verifier|challenge|thumbprint|hash)`)

// TestHygiene_ConstantTimeComparisons: no secret, hash of a secret, CSRF token, PKCE value or
// certificate thumbprint is compared with == or != (or strings/bytes.Equal) in the packages that
// check them; those comparisons go through crypto/subtle, whose time does not depend on where
// the values differ (RFC 6819 5.1.4.2.x, 5.2.3.x). Comparisons with "" or nil (presence) are allowed.
func TestHygiene_ConstantTimeComparisons(t *testing.T) {
	var files []string
	for _, dir := range []string{"../../shared/oauth", "../../shared/httpapi", "../../shared/authorizer", "../../shared/web",
		"../../shared/tokenendpoint", "../../shared/introspection", "../../shared/revocation", "../../shared/resource",
		"../../shared/authn", "../../shared/signin"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d source files", len(files))
	}
	fset := token.NewFileSet()
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		name := func(x ast.Expr) string {
			return string(src[fset.Position(x.Pos()).Offset:fset.Position(x.End()).Offset])
		}
		isEmpty := func(x ast.Expr) bool {
			if id, ok := x.(*ast.Ident); ok {
				return id.Name == "nil"
			}
			l, ok := x.(*ast.BasicLit)
			return ok && (l.Value == `""` || l.Value == "``")
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if (x.Op == token.EQL || x.Op == token.NEQ) && !isEmpty(x.X) && !isEmpty(x.Y) &&
					(secretName.MatchString(name(x.X)) || secretName.MatchString(name(x.Y))) && !isLen(x.X) && !isLen(x.Y) {
					t.Errorf("%s: %s compared with %s; use crypto/subtle", fset.Position(x.Pos()), name(x), x.Op)
				}
			case *ast.CallExpr:
				if s, ok := x.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Equal" {
					if pkg, ok := s.X.(*ast.Ident); ok && (pkg.Name == "strings" || pkg.Name == "bytes") {
						for _, a := range x.Args {
							if secretName.MatchString(name(a)) {
								t.Errorf("%s: %s; use crypto/subtle", fset.Position(x.Pos()), name(x))
							}
						}
					}
				}
			}
			return true
		})
	}
}

// isLen reports whether x is a call of len or a number (a length check, not a comparison of
// values).
func isLen(x ast.Expr) bool {
	if c, ok := x.(*ast.CallExpr); ok {
		if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "len" {
			return true
		}
	}
	_, lit := x.(*ast.BasicLit)
	return lit
}
