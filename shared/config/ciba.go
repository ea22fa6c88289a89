package config

import (
	"encoding/json"
	"errors"
)

// cibaAppJWKS reads AUTH_CIBA_APP_JWKS: a JWK Set with at least one key. The keys' own rules
// (public, a kid each, PS256 or ES256) are package appbackend's ParseKeys, which the callback's
// constructor applies.
func cibaAppJWKS(c *Config, v string) error {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(v), &set); err != nil || len(set.Keys) == 0 {
		return errors.New("want a JWK Set with at least one key: {\"keys\":[…]}")
	}
	c.CIBAAppJWKS = v
	return nil
}

// CIBAAppBackend reports whether the decision callback of the bank's app backend is
// configured: an issuer and its keys.
func (c Config) CIBAAppBackend() bool { return c.CIBAAppIssuer != "" && c.CIBAAppJWKS != "" }
