package keys_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
)

func TestThumbprint_MatchesRFC7638Example(t *testing.T) {
	// RFC 7638 section 3.1.
	k := oauth.SigningKey{Kid: "x",
		N: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
		E: "AQAB"}
	pub, err := keys.PublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := keys.Thumbprint(pub); got != "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs" || err != nil {
		t.Fatalf("Thumbprint = %s, %v", got, err)
	}
	// And the record NewSigningKey makes round-trips to the same members.
	rec, err := keys.NewSigningKey("ref", keys.RS256, pub, time.Now())
	if err != nil || rec.N != k.N || rec.E != k.E || rec.Kid != "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs" || rec.State != oauth.KeyNext || rec.Alg != "RS256" {
		t.Fatalf("NewSigningKey = %+v", rec)
	}
}

func TestPublicKey_RejectsBadMembers(t *testing.T) {
	for name, k := range map[string]oauth.SigningKey{
		"empty":       {},
		"not base64":  {N: "!!", E: "AQAB"},
		"short key":   {N: "AQAB", E: "AQAB"},
		"even e":      {N: strings.Repeat("A", 342) + "Q", E: "Ag"},
		"e too large": {N: strings.Repeat("_", 342), E: "AQABAQAB"},
	} {
		if _, err := keys.PublicKey(k); err == nil {
			t.Errorf("%s: PublicKey accepted %+v", name, k)
		}
	}
}

func TestPublicJWKS_PublishesNextCurrentRetiredOnly(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(kid, state string, age int) oauth.SigningKey {
		return oauth.SigningKey{Kid: kid, State: state, N: "n-" + kid, E: "AQAB", CreatedAt: base.AddDate(0, 0, -age)}
	}
	set := oauth.KeySet{Keys: []oauth.SigningKey{
		mk("old-retired", oauth.KeyRetired, 90), mk("deleted", oauth.KeyDeleted, 120),
		mk("next", oauth.KeyNext, 1), mk("retired", oauth.KeyRetired, 60), mk("current", oauth.KeyCurrent, 30),
	}, Version: 7}
	body, etag := keys.PublicJWKS(set)
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range doc.Keys {
		kids = append(kids, k["kid"])
		for member, want := range map[string]string{"kty": "RSA", "use": "sig", "alg": "RS256", "e": "AQAB", "n": "n-" + k["kid"]} {
			if k[member] != want {
				t.Errorf("key %s: %s = %q, want %q", k["kid"], member, k[member], want)
			}
		}
		if len(k) != 6 {
			t.Errorf("key %s has members %v, want exactly kty use alg kid n e", k["kid"], k)
		}
	}
	if got, want := strings.Join(kids, ","), "current,next,retired,old-retired"; got != want {
		t.Fatalf("published kids %s, want %s", got, want)
	}
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		t.Fatalf("etag %s is not a strong entity tag", etag)
	}

	// Same published keys, other order and version: same document. Another key: another tag.
	set.Keys[0], set.Keys[4] = set.Keys[4], set.Keys[0]
	set.Version = 8
	body2, etag2 := keys.PublicJWKS(set)
	if string(body2) != string(body) || etag2 != etag {
		t.Fatal("the JWKS changed although the published keys did not")
	}
	set.Keys = append(set.Keys, mk("newer-next", oauth.KeyNext, 0))
	if _, etag3 := keys.PublicJWKS(set); etag3 == etag {
		t.Fatal("the ETag did not change when a key was added")
	}
}

func TestPublicJWKS_EmptyRegistryIsEmptyKeyList(t *testing.T) {
	body, _ := keys.PublicJWKS(oauth.KeySet{})
	if string(body) != `{"keys":[]}` {
		t.Fatalf("JWKS of an empty registry = %s", body)
	}
}
