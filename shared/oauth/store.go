package oauth

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors every store adapter returns, compared with errors.Is. Adapters wrap
// transient backend failures with ErrTransient.
var (
	// ErrNotFound: no such item, or it has expired (stores filter expired items themselves,
	// whether or not the backend has deleted them yet).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a create found the key (or a unique username) taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrUsed: the code was consumed, or the refresh token spent, before this call.
	ErrUsed = errors.New("already used")
	// ErrRevoked: the grant was revoked (or blocked by a tombstone) or has reached its end.
	ErrRevoked = errors.New("grant revoked")
	// ErrConflict: an optimistic update lost a race; callers may read again and retry.
	ErrConflict = errors.New("concurrent update")
	// ErrReplayed: a one-time value (Once) committed with a write was used before; the write
	// wrote nothing. Stores return it as a *ReplayedError naming the value.
	ErrReplayed = errors.New("one-time value already used")
)

// Once is a one-time value a store records in the same atomic write as a code's consumption
// or a refresh's issuance (GrantStore.ConsumeCode, Issue.Once), with ReplayStore.UseOnce's
// rule: the write commits only if no live record of Key exists (absent, or expired at now),
// and then keeps Key until Expires. Which values a request records, and what their refusal
// is, the domain decides (OneTime); the store only commits them with the request's write.
type Once struct {
	Key     string
	Expires time.Time
}

// ReplayedError is a write refused because the one-time value Key was used before; nothing
// was written. errors.Is(err, ErrReplayed) holds.
type ReplayedError struct{ Key string }

func (e *ReplayedError) Error() string { return ErrReplayed.Error() }

// Is makes a ReplayedError match ErrReplayed.
func (e *ReplayedError) Is(target error) bool { return target == ErrReplayed }

// GrantStore keeps codes, grants and tokens. Its single-use and revocation semantics are the
// security of the service; a new backend must keep every one of them, and the storetest suite
// checks them.
type GrantStore interface {
	// CreateCode stores a new authorization code.
	CreateCode(ctx context.Context, c Code) error
	// ConsumeCode marks the code used and returns it, in one atomic step. A code that is
	// unknown, expired, or issued to another client than clientID is ErrNotFound and is left
	// as it was (a client cannot spend another's code). A code consumed before is returned with
	// ErrUsed, so the caller can revoke the grant it started (RFC 6749 4.1.2); of N racing calls
	// exactly one succeeds.
	//
	// The once values, if any, are recorded in the same atomic write (Once): if one of them
	// was used before, the result is a *ReplayedError naming it, checked before the code, and
	// nothing is written (the code stays unconsumed); if the code is refused, no value is
	// recorded. So of N racing calls presenting one value over N codes exactly one consumes
	// its code, and the other codes stay unconsumed.
	ConsumeCode(ctx context.Context, hash, clientID string, now time.Time, once ...Once) (Code, error)
	// IssueTokens writes an issuance at once: the grant record and both tokens, or nothing.
	// For Issue.FromCode the grant must not exist (a tombstone of RevokeGrant blocks it:
	// ErrRevoked). For a refresh the grant must exist, be live and unexpired (else ErrRevoked);
	// the Retire tokens are deleted and the grant's live token list becomes Issue.Tokens.
	//
	// A refresh spends its refresh token in this same write (there is no separate spend): the
	// token Issue.Spent names must still be stored, unexpired, a refresh token of the grant's
	// client and unspent, and the write marks it spent at now (SpentAt) and records the new
	// access and refresh token hashes on it as its Successors. If it was spent since the caller
	// read it (a racing refresh won), or is gone, the result is ErrConflict and nothing is
	// written: of N racing refreshes of one token exactly one succeeds, and the others spend,
	// issue and revoke nothing. Because the spend and the issuance commit together, any failure
	// (of this write, or of a check or signature the caller makes before it) leaves the refresh
	// token unspent, so the client's retry of the same request works; a token is never left
	// spent without the tokens that replace it. Callers therefore do every check that can fail
	// before calling IssueTokens.
	//
	// With Issue.Retry set, the issuance is a retry of a refresh token spent before, within the
	// client's window, and the write is conditioned, atomically, on:
	//   - the grant live (else ErrRevoked) and the spent token still stored (else ErrRevoked),
	//     with the SpentAt and Successors that Retry.Token carries (it is not checked by the
	//     caller alone: the store compares them inside the write);
	//   - now no later than SpentAt + Retry.Window, else ErrUsed (reuse: the caller revokes);
	//   - the token not retried before and its Successors unchanged; otherwise another retry
	//     won, and the result depends on that winner's refresh token (the current Successors'
	//     second hash): still unspent, ErrConflict (a duplicate: the caller refuses it and
	//     revokes nothing); spent or gone, ErrUsed (reuse);
	//   - the successor refresh token unspent, else ErrUsed (the client received the first
	//     answer and used it: this is reuse, not a retry).
	// The write then deletes the Successors and the Retire tokens, writes the new pair, sets
	// the grant's list to Issue.Tokens and the spent token's Successors to the new pair with
	// Retried set. So each spent token has at most one successful retry (exactly one of N racing
	// retries succeeds), the window counts from the first spend, and the grant never holds more
	// live tokens than after a plain refresh.
	//
	// With Issue.Keep set, the refresh does not rotate (FAPI 2.0 Security Profile 5.3.2.1): the
	// write puts the new access token only (Issue.Refresh is empty), and sets the kept refresh
	// token's Live list to Keep.Live, conditioned on the token being stored, unexpired, a
	// refresh token of the grant's client, unspent, and its Live list still Keep.Read; else
	// ErrConflict and nothing is written. So of N racing refreshes of one kept token, those
	// that read the same list have exactly one winner, the others change nothing, and the
	// grant's list (Issue.Tokens) always names every live token, for RevokeGrant to delete.
	//
	// Issue.Once values are recorded in the same write (Once): one used before makes the
	// result a *ReplayedError naming it, whatever else fails, and nothing is written (no token
	// spent, none issued); a write refused for another reason records none of them.
	//
	// With Issue.Rewrite set (FromCode only: the code of a Grant Management merge or replace),
	// the grant Grant.ID must be stored, live, unexpired, not revoked, of the same client and
	// user as Issue.Grant (else ErrRevoked), and its Grant.Revision still Rewrite.Revision
	// (else ErrConflict: another merge or replace rewrote it since the code's consent). The
	// write then deletes every token the stored grant lists (its old tokens die at once),
	// replaces the grant with Issue.Grant (not consumed, not revoked) and writes the new tokens,
	// all in one atomic write: of N racing rewrites computed from one revision exactly one
	// succeeds and the others write nothing, and a refresh of the grant racing with it either
	// commits first (its tokens are then deleted too) or finds its token gone (ErrConflict).
	IssueTokens(ctx context.Context, in Issue, now time.Time) error
	// GetToken returns a live access or refresh token by hash in one strongly consistent read;
	// unknown, expired or revoked tokens are ErrNotFound. A spent refresh token is returned
	// with Spent, SpentAt, Successors and Retried as stored: a refresh reads its token with it,
	// tells reuse (spent) and a retry from a first spend, and then spends it in IssueTokens.
	GetToken(ctx context.Context, hash string, now time.Time) (Token, error)
	// RevokeToken deletes one token; unknown tokens are not an error.
	RevokeToken(ctx context.Context, hash string) error
	// RevokeGrant revokes a grant and every token of it in one step. A grant not yet written
	// gets a tombstone that makes a later IssueTokens for it fail, so a code replayed while its
	// first exchange is in flight cannot leave usable tokens. Idempotent.
	RevokeGrant(ctx context.Context, grantID string, now time.Time) error
	// ConsumeGrant marks a payment grant used at the bank API (GrantRecord.ConsumedAt = now)
	// in one conditional write: the grant must exist, be unexpired and not revoked (else
	// ErrRevoked), and not be consumed before (else ErrUsed); a refused call writes nothing.
	// Of N racing calls for one grant exactly one succeeds. The once values, if any (a DPoP
	// proof's jti), are recorded in the same atomic write, as ConsumeCode records them: one used
	// before is a *ReplayedError naming it, checked first, and the grant stays unconsumed.
	ConsumeGrant(ctx context.Context, grantID string, now time.Time, once ...Once) error
	// GetGrant returns a grant record (revoked ones too, with Revoked set).
	GetGrant(ctx context.Context, id string, now time.Time) (GrantRecord, error)
	// ListGrants lists the live grants of a user or of a client: for operators, for the
	// customer's Connected apps page and for the remembered consent of a sign-in (which confirms
	// what it relies on with GetGrant: the listing may lag a revocation where the backend's
	// index is eventually consistent). Never on a token, introspection or authorizer path.
	ListGrants(ctx context.Context, f GrantFilter, now time.Time) ([]GrantRecord, error)
}

// GrantRecord is a grant as stored: the grant, whether it is revoked, and the hashes of its
// live tokens (what revoking it deletes).
type GrantRecord struct {
	Grant   Grant    `json:"grant" dynamodbav:"grant"`
	Revoked bool     `json:"revoked,omitempty" dynamodbav:"revoked,omitempty"`
	Tokens  []string `json:"tokens,omitempty" dynamodbav:"tokens,omitempty"`
	// ConsumedAt is when the bank API accepted the payment grant's token (ConsumeGrant); zero
	// while it has not. Stores keep it as they keep Revoked, beside the grant.
	ConsumedAt time.Time `json:"consumed_at,omitzero" dynamodbav:"-"`
	// LastUsedAt is when the grant was last refreshed: set by a refresh's IssueTokens, in the
	// write of the grant it makes anyway (no write of its own, none on the authorizer's path,
	// none on the first issuance, whose item stays as it was), so an access token's use at
	// the bank API does not move it. Zero until the first refresh: the grant was last used at
	// its code exchange then, within the code's lifetime of its CreatedAt (LastUsed).
	LastUsedAt time.Time `json:"last_used_at,omitzero" dynamodbav:"-"`
}

// LastUsed is when the grant was last used: its last refresh, or a payment grant's use at
// the bank API (ConsumedAt), whichever is later; never refreshed nor consumed, its code
// exchange, which is its creation to within the code's lifetime (CreatedAt).
func (r *GrantRecord) LastUsed() time.Time {
	last := r.LastUsedAt
	if r.ConsumedAt.After(last) {
		last = r.ConsumedAt
	}
	if last.IsZero() {
		return r.Grant.CreatedAt
	}
	return last
}

// GrantFilter selects grants by user or by client (exactly one is set).
type GrantFilter struct {
	UID      string
	ClientID string
}

// ClientStore keeps registered clients.
type ClientStore interface {
	GetClient(ctx context.Context, id string) (Client, error)
	// CreateClient fails with ErrAlreadyExists when the id is taken.
	CreateClient(ctx context.Context, c Client) error
	// UpdateClient applies fn to the stored client atomically (compare-and-swap).
	UpdateClient(ctx context.Context, id string, fn func(Client) (Client, error)) error
	DeleteClient(ctx context.Context, id string) error
	ListClients(ctx context.Context) ([]Client, error)
}

// UserStore keeps users. Usernames are unique, compared as given (callers normalise them).
type UserStore interface {
	GetUser(ctx context.Context, uid string) (User, error)
	GetUserByUsername(ctx context.Context, username string) (User, error)
	// CreateUser fails with ErrAlreadyExists when the uid or the username is taken.
	CreateUser(ctx context.Context, u User) error
	// UpdateUser applies fn atomically; fn may not change the uid or the username.
	UpdateUser(ctx context.Context, uid string, fn func(User) (User, error)) error
	DeleteUser(ctx context.Context, uid string) error
	ListUsers(ctx context.Context) ([]User, error)
}

// InteractionStore keeps the state of the pages: pending authorization requests, sessions and
// login-failure counters, all short-lived.
type InteractionStore interface {
	PutAuthRequest(ctx context.Context, r AuthRequest) error
	// GetAuthRequest returns a pending request; expired ones are ErrNotFound. Opening a pushed
	// request reads it (at the home the context names) and never changes it: its request_uri is
	// spent at the decision (ReplayStore.UseOnce), then the pushed request taken.
	GetAuthRequest(ctx context.Context, id string, now time.Time) (AuthRequest, error)
	// TakeAuthRequest deletes and returns a pending request, once: of racing calls one succeeds,
	// the others get ErrNotFound. A consent is answered once.
	TakeAuthRequest(ctx context.Context, id string, now time.Time) (AuthRequest, error)

	PutSession(ctx context.Context, s Session) error
	GetSession(ctx context.Context, hash string, now time.Time) (Session, error)
	DeleteSession(ctx context.Context, hash string) error
	// TakeSession deletes a session, once: of racing calls on one session one succeeds, the
	// others (and a call on an unknown session) get ErrNotFound. A logout ends a session once,
	// so its clients are told once.
	TakeSession(ctx context.Context, hash string) error

	// CountFailure adds one failure to key's counter and returns the new count. A counter lives
	// for window from its first failure, then starts again from zero. It is one atomic
	// increment: of N racing calls on one key each gets its own count, 1..N each returned once
	// (also when the window has just ended and the racers start a new counter), since the login
	// counts an attempt before verifying its password and lets only counts within its limit
	// through.
	CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error)
	// Failures returns key's current count (zero when none or expired).
	Failures(ctx context.Context, key string, now time.Time) (int, error)
	// ResetFailures forgets key's counter.
	ResetFailures(ctx context.Context, key string) error
}

// KeyStore keeps the signing-key registry as one versioned set, so serving the JWKS is one read
// and a rotation is one compare-and-swap: two rotations at once cannot both win.
type KeyStore interface {
	// Keys returns the registry (an empty set, Version 0, when none was ever written).
	Keys(ctx context.Context) (KeySet, error)
	// UpdateKeys applies fn to the registry and writes it if its version is unchanged;
	// otherwise it returns ErrConflict and writes nothing.
	UpdateKeys(ctx context.Context, fn func(KeySet) (KeySet, error)) error
}

// PairwiseSaltLen is the length of the pairwise-subject salt: 32 random bytes.
const PairwiseSaltLen = 32

// PairwiseSaltStore keeps the deployment's one salt of pairwise subjects (OIDC Core 8.1, the
// consent receipts' sub: shared/receipt). The salt never changes once stored: a changed salt
// would change every pairwise subject. It is kept as it is, not wrapped: it keeps a client
// from linking its subjects to another client's, and whoever can read the store reads every
// grant's uid and client already.
type PairwiseSaltStore interface {
	// PairwiseSalt returns the stored salt. When none is stored it stores fresh first (which
	// must be PairwiseSaltLen bytes, else ErrInvalidSalt and nothing written), in one write
	// that holds only if none exists: the first caller's salt is the one every caller gets
	// from then on, racing callers included.
	PairwiseSalt(ctx context.Context, fresh []byte) ([]byte, error)
}

// ErrInvalidSalt is a fresh pairwise salt of the wrong length (PairwiseSaltStore).
var ErrInvalidSalt = errors.New("pairwise salt must be 32 bytes")

// ReplayStore remembers one-time values until they can no longer be replayed: the jti of a
// DPoP proof (RFC 9449 11.1) and of a client assertion (RFC 7523 3, private_key_jwt). Keys
// are namespaced by the caller ("dpop:<jkt>:<jti>", "assertion:<client_id>:<jti>"); a store
// keeps them as they are, so a caller must bound their length.
type ReplayStore interface {
	// UseOnce records key as used until expires. The first call for a key succeeds; every
	// later call before expires gets ErrUsed: of N racing calls exactly one succeeds. After
	// expires the key may be used again (the value it names is refused by then anyway).
	UseOnce(ctx context.Context, key string, expires, now time.Time) error
}

// Store is everything a deployment keeps; each adapter implements all of it, while each
// component asks only for the narrow part it uses.
type Store interface {
	GrantStore
	ClientStore
	UserStore
	InteractionStore
	KeyStore
	NonceKeyStore
	PairwiseSaltStore
	ReplayStore
	FactorStore
	RegistrationStore
	BackchannelStore
}

// WriteChecker is implemented by stores that can prove they take writes: the readiness probe
// of the local server asks it (a load balancer then sends no traffic to an instance whose
// disk is full). CheckWrite writes one small item of its own and reports whether the write
// was durable; it changes nothing else.
type WriteChecker interface {
	CheckWrite(ctx context.Context, now time.Time) error
}
