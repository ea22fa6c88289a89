package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// Directory is a software statement issuer the deployment trusts for dynamic client
// registration (AUTH_REGISTRATION_DIRECTORIES): its iss, and its public keys inline (JWKS) or
// at an https JWKSURI (never both). Profile, when set, is the security profile every client it
// vouches for is held to (oauth.ProfileFAPI2).
type Directory struct {
	Issuer  string          `json:"issuer"`
	JWKS    json.RawMessage `json:"jwks,omitempty"`
	JWKSURI string          `json:"jwks_uri,omitempty"`
	Profile string          `json:"profile,omitempty"`
}

// registrationDirectories parses AUTH_REGISTRATION_DIRECTORIES: a JSON array of directories,
// each with an absolute issuer, exactly one of jwks and jwks_uri (https), and a profile that is
// "" or fapi2; unknown fields and repeated issuers are refused, so a typo cannot silently
// trust nothing or something else.
func registrationDirectories(c *Config, v string) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	var dirs []Directory
	if err := dec.Decode(&dirs); err != nil {
		return fmt.Errorf("want a JSON array of {\"issuer\", \"jwks\" or \"jwks_uri\", \"profile\"}: %v", err)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if u, err := url.Parse(d.Issuer); d.Issuer == "" || err != nil || !u.IsAbs() {
			return fmt.Errorf("directory issuer %q must be an absolute URI", d.Issuer)
		}
		if seen[d.Issuer] {
			return fmt.Errorf("directory %q is listed twice", d.Issuer)
		}
		seen[d.Issuer] = true
		switch {
		case len(d.JWKS) > 0 && d.JWKSURI != "":
			return fmt.Errorf("directory %q: give jwks or jwks_uri, not both", d.Issuer)
		case len(d.JWKS) > 0:
			var set struct{ Keys []json.RawMessage }
			if err := json.Unmarshal(d.JWKS, &set); err != nil || len(set.Keys) == 0 {
				return fmt.Errorf("directory %q: jwks must be a JWK Set with at least one key", d.Issuer)
			}
		case d.JWKSURI != "":
			if err := oauth.ValidJWKSURI(d.JWKSURI); err != nil {
				return fmt.Errorf("directory %q: %v", d.Issuer, err)
			}
		default:
			return fmt.Errorf("directory %q needs jwks or jwks_uri", d.Issuer)
		}
		if d.Profile != "" && d.Profile != oauth.ProfileFAPI2 {
			return fmt.Errorf("directory %q: profile must be empty or %q", d.Issuer, oauth.ProfileFAPI2)
		}
	}
	if len(dirs) == 0 && v != "[]" {
		return errors.New("want a JSON array of directories")
	}
	c.RegistrationDirectories = dirs
	return nil
}
