package seed

import (
	"strings"
	"testing"
)

// FuzzParse feeds any bytes to the seed-file parser: no panic, and what it accepts has the
// required fields, secrets of at least 32 characters, known scopes and redirect URIs that pass
// ValidateRedirectURI (absolute, no fragment, no userinfo, https or loopback http).
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"clients":[{"client_id":"c","client_secret":"0123456789abcdef0123456789abcdef","name":"C","redirect_uris":["https://a.example/cb"],"scopes":["openid","bank:transfers.write"]}],"users":[{"uid":"u1","username":"Alice","password":"pw","updated_at":1700000000}]}`))
	f.Add([]byte(`{"clients":[{"client_id":"c","client_secret":"short","name":"C","redirect_uris":["http://evil.example/cb"]}]}`))
	f.Add([]byte(`{"clients":[{"client_id":"c","client_secret":"0123456789abcdef0123456789abcdef","name":"C","redirect_uris":["javascript:alert(1)"]}]}`))
	f.Add([]byte(`{"clients":[{"client_id":"c","client_secret":"0123456789abcdef0123456789abcdef","name":"C","redirect_uris":["https://u:p@a.example/cb#f"]}]}`))
	f.Add([]byte(`{"users":[{"uid":"u","username":"x","password":"p","unknown":1}]}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"users":[{"uid":"u","username":"x","password":"p","updated_at":1e400}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			if file != nil {
				t.Fatal("an error came with a file")
			}
			if !strings.HasPrefix(err.Error(), "seed file") {
				t.Fatalf("error %q does not say where it comes from", err)
			}
			return
		}
		for _, c := range file.Clients {
			if c.ClientID == "" || c.Name == "" || len(c.ClientSecret) < 32 || len(c.RedirectURIs) == 0 {
				t.Fatalf("accepted client %+v", c)
			}
			for _, u := range c.RedirectURIs {
				if err := ValidateRedirectURI(u); err != nil || strings.ContainsAny(u, "#") {
					t.Fatalf("accepted redirect URI %q", u)
				}
			}
		}
		for _, u := range file.Users {
			if u.UID == "" || u.Username == "" || u.Password == "" {
				t.Fatalf("accepted user %+v", u)
			}
		}
	})
}
