// Package receipt makes signed consent receipts: a JWS, signed through the key backend with the
// keys that sign id_tokens (so it verifies against the published JWKS), that records what a
// customer granted a client: the grant, the client, a pairwise subject, the scopes and
// authorization_details, when and how the customer authenticated. The customer downloads it
// from the Connected apps page, the client gets it from the grant API (docs/api.md, "Consent
// receipts").
package receipt

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/oauth"
)

// Type is the JWS typ header of a receipt (RFC 8725 3.11): no id_token, introspection
// response or JARM response can be taken for one, nor a receipt for them.
const Type = "consent-receipt+jwt"

// ErrNoSector is a client whose redirect URIs are on more than one host: OIDC Core 8.1 then
// requires a registered sector identifier, which the client model does not have yet.
var ErrNoSector = errors.New("receipt: the client's redirect URIs span several hosts and it registered no sector identifier")

// Deps are what a Maker needs; every field is required.
type Deps struct {
	// Signer signs with the key backend's current key (keys.Signer: KMS in AWS, the key file
	// locally), as id_tokens are.
	Signer oauth.IDTokenSigner
	// Clients are read for the client's redirect URIs (its sector) and its id_token algorithm.
	Clients oauth.ClientStore
	// Salts holds the deployment's pairwise salt; New reads it, storing a fresh one when none
	// is stored yet.
	Salts  oauth.PairwiseSaltStore
	Issuer string
	Clock  oauth.Clock
}

// Maker makes the receipts of one deployment.
type Maker struct {
	signer  oauth.IDTokenSigner
	clients oauth.ClientStore
	issuer  string
	clock   oauth.Clock
	salt    []byte
}

// New checks d and reads the pairwise salt once (it never changes once stored).
func New(ctx context.Context, d Deps) (*Maker, error) {
	var missing []string
	for _, f := range []struct {
		ok   bool
		name string
	}{{d.Signer != nil, "Signer"}, {d.Clients != nil, "Clients"}, {d.Salts != nil, "Salts"}, {d.Issuer != "", "Issuer"}, {d.Clock != nil, "Clock"}} {
		if !f.ok {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("receipt: missing %v", missing)
	}
	fresh := make([]byte, oauth.PairwiseSaltLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("receipt: make a pairwise salt: %w", err)
	}
	salt, err := d.Salts.PairwiseSalt(ctx, fresh)
	if err != nil {
		return nil, fmt.Errorf("receipt: read the pairwise salt: %w", err)
	}
	return &Maker{signer: d.Signer, clients: d.Clients, issuer: d.Issuer, clock: d.Clock, salt: salt}, nil
}

// Receipt signs the consent receipt of g. Its claims (docs/api.md): iss, iat, a jti, grant_id,
// client_id, sub (the customer's pairwise subject for the client's sector), scope,
// authorization_details (when granted), consented_at (when the customer consented: the
// grant's creation), auth_time, acr and amr. It carries no aud and no exp: it is evidence of
// a consent, to be kept, not a credential. It is signed with the client's id_token algorithm.
func (m *Maker) Receipt(ctx context.Context, g oauth.Grant) (string, error) {
	c, err := m.clients.GetClient(ctx, g.ClientID)
	if err != nil {
		return "", fmt.Errorf("receipt of grant %s: read client: %w", g.ID, err)
	}
	sector, err := Sector(&c)
	if err != nil {
		return "", err
	}
	claims := jwt.MapClaims{
		"iss":          m.issuer,
		"iat":          m.clock.Now().Unix(),
		"jti":          oauth.NewID("rcpt_"),
		"grant_id":     g.ID,
		"client_id":    g.ClientID,
		"sub":          PairwiseSubject(sector, g.UID, m.salt),
		"scope":        g.Scopes.String(),
		"consented_at": g.CreatedAt.Unix(),
		"auth_time":    g.AuthTime.Unix(),
		"acr":          oauth.ACRFor(g.AMR),
	}
	if len(g.AMR) > 0 {
		claims["amr"] = g.AMR
	}
	if len(g.AuthorizationDetails) > 0 {
		claims["authorization_details"] = json.RawMessage(g.AuthorizationDetails)
	}
	jws, err := m.signer.SignJWTWithType(ctx, c.IDTokenSignedResponseAlg, Type, claims)
	if err != nil {
		return "", fmt.Errorf("receipt of grant %s: sign: %w", g.ID, err)
	}
	return jws, nil
}

// Sector is the client's sector identifier (OIDC Core 8.1): the one host of its redirect URIs.
func Sector(c *oauth.Client) (string, error) {
	host := ""
	for _, r := range c.RedirectURIs {
		u, err := url.Parse(r)
		if err != nil || u.Hostname() == "" {
			return "", fmt.Errorf("receipt: client %s: redirect URI without a host", c.ID)
		}
		switch {
		case host == "":
			host = u.Hostname()
		case host != u.Hostname():
			return "", fmt.Errorf("client %s: %w", c.ID, ErrNoSector)
		}
	}
	if host == "" {
		return "", fmt.Errorf("receipt: client %s has no redirect URI", c.ID)
	}
	return host, nil
}

// PairwiseSubject is OIDC Core 8.1's pairwise identifier: base64url(SHA-256(sector || uid ||
// salt)), unpadded. The same customer has one subject per sector, the same every time, and
// two clients of different sectors cannot tell from their subjects that they have one
// customer in common.
func PairwiseSubject(sector, uid string, salt []byte) string {
	h := sha256.New()
	h.Write([]byte(sector))
	h.Write([]byte(uid))
	h.Write(salt)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
