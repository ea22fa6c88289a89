package keys

import (
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

// DefaultSignerCacheTTL is how long a Signer keeps using the current key it last read from the
// registry. A promotion reaches every signer within this time, so Policy.Margin must be at
// least this long.
const DefaultSignerCacheTTL = 60 * time.Second

// ErrNoCurrentKey means the registry has no current key: the rotation has never run (or the
// registry was wiped). Run the rotation once; a fresh deployment's first run creates one.
var ErrNoCurrentKey = errors.New("no current signing key in the registry: run the key rotation")

// Signer signs id_tokens with the registry's current key (oauth.IDTokenSigner). It resolves the
// current key once per cache period, puts its kid in the protected header (so the kid is part
// of what is signed) and signs with the key's Ref, never an alias, so the kid and the key that
// signs can never disagree.
type Signer struct {
	reg    oauth.KeyStore
	method *SigningMethod
	clock  oauth.Clock
	ttl    time.Duration

	mu      sync.Mutex
	cached  *currentKey
	fetched time.Time
}

// currentKey is what a Signer caches: the registry record and its decoded public key, used to
// check each signature before it leaves the process.
type currentKey struct {
	key oauth.SigningKey
	pub crypto.PublicKey
}

var _ oauth.IDTokenSigner = (*Signer)(nil)

// NewSigner returns a Signer over the registry reg and the backend b that holds the private
// keys. cacheTTL is how long the current key is cached (DefaultSignerCacheTTL when zero).
func NewSigner(reg oauth.KeyStore, b Backend, clock oauth.Clock, cacheTTL time.Duration) *Signer {
	if cacheTTL <= 0 {
		cacheTTL = DefaultSignerCacheTTL
	}
	if clock == nil {
		clock = oauth.SystemClock{}
	}
	return &Signer{reg: reg, method: NewSigningMethod(b, RS256), clock: clock, ttl: cacheTTL}
}

// SignJWT returns claims as a compact RS256 JWS with the current key's kid in the header.
// Failures worth retrying (the registry or the backend throttled, timed out or answered 5xx)
// wrap oauth.ErrTransient, which the token endpoint answers with 503 temporarily_unavailable.
func (s *Signer) SignJWT(ctx context.Context, claims jwt.MapClaims) (string, error) {
	cur, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	tok := jwt.NewWithClaims(s.method, claims)
	tok.Header["kid"] = cur.key.Kid
	signingInput, err := tok.SigningString()
	if err != nil {
		return "", fmt.Errorf("sign id_token: encode: %w", err)
	}
	sig, err := s.method.Sign(signingInput, KeyRef{Ctx: ctx, Ref: cur.key.Ref})
	if err != nil {
		if errors.Is(err, ErrUnknownKey) {
			s.forget() // the registry may have moved on: read it again on the next call
		}
		return "", fmt.Errorf("sign id_token with key %s: %w", cur.key.Kid, classify(ctx, err))
	}
	// A signature that does not verify with the published key would be a token no client can
	// use (a ref that names another key, a corrupted file): refuse it here rather than there.
	digest := sha256.Sum256([]byte(signingInput))
	if err := VerifyDigest(cur.pub, s.method.Alg(), digest[:], sig); err != nil {
		s.forget()
		return "", fmt.Errorf("sign id_token: signature of key %s does not verify with its published key: %w", cur.key.Kid, err)
	}
	return signingInput + "." + tok.EncodeSegment(sig), nil
}

// Kid returns the kid the Signer currently signs with (resolving it if needed); for logs and
// diagnostics.
func (s *Signer) Kid(ctx context.Context) (string, error) {
	cur, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	return cur.key.Kid, nil
}

// current returns the cached current key, reading the registry when the cache has expired.
// Concurrent callers share one read.
func (s *Signer) current(ctx context.Context) (*currentKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.cached != nil && now.Before(s.fetched.Add(s.ttl)) && !now.Before(s.fetched) {
		return s.cached, nil
	}
	set, err := s.reg.Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read signing-key registry: %w", classify(ctx, err))
	}
	k, ok := set.Current(s.method.Alg())
	if !ok {
		return nil, ErrNoCurrentKey
	}
	pub, err := PublicKey(k)
	if err != nil {
		return nil, fmt.Errorf("current signing key: %w", err)
	}
	s.cached, s.fetched = &currentKey{key: k, pub: pub}, now
	return s.cached, nil
}

// forget drops the cached key so the next call reads the registry again.
func (s *Signer) forget() {
	s.mu.Lock()
	s.cached = nil
	s.mu.Unlock()
}

// classify marks errors worth retrying with oauth.ErrTransient when the adapter did not:
// deadlines and network timeouts. Adapters classify their own service's errors (throttling,
// 5xx); a canceled request is the caller going away, not a failure of ours.
func classify(ctx context.Context, err error) error {
	if errors.Is(err, oauth.ErrTransient) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		(ctx.Err() == nil && errors.Is(err, syscall.ECONNRESET)) {
		return fmt.Errorf("%w: %w", oauth.ErrTransient, err)
	}
	return err
}
