// Package regional is the store of a multi-region deployment (docs/multiregion.md). The table
// is a DynamoDB global table: every region reads and writes its own replica, and replication
// between replicas is asynchronous (typically under a second) with last-writer-wins. A
// conditional write is evaluated against the replica it is sent to, so two regions could both
// consume one code, or both spend one refresh token, within the replication window.
//
// Store closes that window: the single-use writes of a code or a refresh token (its consume or
// spend, the issuance that follows, the revocation that a replay triggers, and revocations by
// the client), and the one-time values (DPoP proof and client assertion jti) presented with
// them, go to the replica of the code's or token's home, the region that issued it, named in
// the context by the domain (oauth.WithHome). One replica then serializes every write that
// decides who wins, as in a single region. Everything else (the pages' state, sessions,
// clients, users, the key registry) is served by the local replica. An access token not yet
// replicated to the local replica is looked up at its home.
//
// Store implements every method of oauth.Store itself (it embeds nothing), and routes is the
// one place that says, per method, which replica serves it: a method added to oauth.Store does
// not compile here until it is written, and routing_test.go fails until routes decides it.
//
// When a home is unreachable, its codes and refresh tokens cannot be used (the client gets
// temporarily_unavailable); codes live a minute, and a client whose refresh token's home is
// gone for longer signs its user in again.
package regional

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Store serves a region's requests: Local is this region's replica (home Home), Peers the
// other homes' replicas, by home label.
type Store struct {
	Local oauth.Store
	Home  string
	Peers map[string]oauth.Store
	// PeerTimeout bounds each call to another region's replica, its SDK retries included
	// (DefaultPeerTimeout when zero): during that region's brownout a request answers
	// temporarily_unavailable instead of hanging until the function's timeout.
	PeerTimeout time.Duration
}

// DefaultPeerTimeout is the deadline of a call to another region's replica when none is
// configured (AUTH_PEER_TIMEOUT): a cross-region round trip takes tens of milliseconds, the
// functions' timeout is 10 s.
const DefaultPeerTimeout = 2 * time.Second

var _ oauth.Store = (*Store)(nil)

// ErrUnknownHome is a code or token whose home is not a region of this deployment: it was not
// issued here (or the deployment's regions changed), so it is treated as unknown.
var ErrUnknownHome = errors.New("home region not configured")

// New returns the store of region home over its local replica and its peers' replicas.
func New(home string, local oauth.Store, peers map[string]oauth.Store) (*Store, error) {
	if !oauth.ValidHome(home) {
		return nil, fmt.Errorf("home label %q: want 1 to 32 lowercase letters, digits or dashes", home)
	}
	for h := range peers {
		if !oauth.ValidHome(h) || h == home {
			return nil, fmt.Errorf("peer home label %q is invalid or is this region's", h)
		}
	}
	return &Store{Local: local, Home: home, Peers: peers, PeerTimeout: DefaultPeerTimeout}, nil
}

// bound gives a call to st its deadline: a peer's replica gets PeerTimeout, the local one the
// caller's context as it is.
func (s *Store) bound(ctx context.Context, st oauth.Store) (context.Context, context.CancelFunc) {
	if st == s.Local {
		return ctx, func() {}
	}
	d := s.PeerTimeout
	if d <= 0 {
		d = DefaultPeerTimeout
	}
	return context.WithTimeout(ctx, d)
}

// peerErr marks a call that ran out of its peer deadline as transient (oauth.ErrTransient: the
// client gets temporarily_unavailable and may retry), whatever error the replica returned.
func peerErr(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, oauth.ErrTransient) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: the home region's replica did not answer in time: %w", oauth.ErrTransient, err)
}

// replica returns the replica that serves method for ctx, as routes decides: the local one, or
// the one of the home named in ctx (the local one when ctx names none or this region's). A
// method routes does not name is an error, never a silent local write.
func (s *Store) replica(ctx context.Context, method string) (oauth.Store, error) {
	r, ok := routes[method]
	if !ok {
		return nil, fmt.Errorf("regional: %s has no route", method)
	}
	if r.Route == Local {
		return s.Local, nil
	}
	h := oauth.HomeFrom(ctx)
	if h == "" || h == s.Home {
		return s.Local, nil
	}
	if p, ok := s.Peers[h]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownHome, h)
}

// GrantStore.

func (s *Store) CreateCode(ctx context.Context, c oauth.Code) error {
	st, err := s.replica(ctx, "CreateCode")
	if err != nil {
		return err
	}
	return st.CreateCode(ctx, c)
}

// ConsumeCode consumes the code at its home, with the request's one-time values in the same
// write there, as UseOnce would record them alone.
func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time, once ...oauth.Once) (oauth.Code, error) {
	st, err := s.replica(ctx, "ConsumeCode")
	if err != nil {
		return oauth.Code{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.ConsumeCode(ctx, hash, clientID, now, once...)
	return v, peerErr(ctx, err)
}

func (s *Store) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	st, err := s.replica(ctx, "IssueTokens")
	if err != nil {
		return fmt.Errorf("%w (%w)", oauth.ErrRevoked, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	return peerErr(ctx, st.IssueTokens(ctx, in, now))
}

// GetToken reads the local replica first: an access token is checked on every API call, and
// its own region answers in one local read. A token the local replica does not have yet (issued
// at its home less than a replication delay ago) is read at its home.
func (s *Store) GetToken(ctx context.Context, hash string, now time.Time) (oauth.Token, error) {
	t, err := s.Local.GetToken(ctx, hash, now)
	if !errors.Is(err, oauth.ErrNotFound) {
		return t, err
	}
	st, herr := s.replica(ctx, "GetToken")
	if herr != nil || st == s.Local {
		return t, err
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	t, err = st.GetToken(ctx, hash, now)
	return t, peerErr(ctx, err)
}

// RevokeToken deletes the token at its home, where it was written: a delete in a replica that
// has not received the token yet would be undone when the token arrives.
func (s *Store) RevokeToken(ctx context.Context, hash string) error {
	st, err := s.replica(ctx, "RevokeToken")
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	return peerErr(ctx, st.RevokeToken(ctx, hash))
}

func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	st, err := s.replica(ctx, "RevokeGrant")
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	return peerErr(ctx, st.RevokeGrant(ctx, grantID, now))
}

func (s *Store) ConsumeGrant(ctx context.Context, grantID string, now time.Time, once ...oauth.Once) error {
	st, err := s.replica(ctx, "ConsumeGrant")
	if err != nil {
		return fmt.Errorf("%w (%w)", oauth.ErrRevoked, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	return peerErr(ctx, st.ConsumeGrant(ctx, grantID, now, once...))
}

func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	st, err := s.replica(ctx, "GetGrant")
	if err != nil {
		return oauth.GrantRecord{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.GetGrant(ctx, id, now)
	return v, peerErr(ctx, err)
}

func (s *Store) ListGrants(ctx context.Context, f oauth.GrantFilter, now time.Time) ([]oauth.GrantRecord, error) {
	st, err := s.replica(ctx, "ListGrants")
	if err != nil {
		return nil, err
	}
	return st.ListGrants(ctx, f, now)
}

// ClientStore.

func (s *Store) GetClient(ctx context.Context, id string) (oauth.Client, error) {
	st, err := s.replica(ctx, "GetClient")
	if err != nil {
		return oauth.Client{}, err
	}
	return st.GetClient(ctx, id)
}

func (s *Store) CreateClient(ctx context.Context, c oauth.Client) error {
	st, err := s.replica(ctx, "CreateClient")
	if err != nil {
		return err
	}
	return st.CreateClient(ctx, c)
}

func (s *Store) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) error {
	st, err := s.replica(ctx, "UpdateClient")
	if err != nil {
		return err
	}
	return st.UpdateClient(ctx, id, fn)
}

func (s *Store) DeleteClient(ctx context.Context, id string) error {
	st, err := s.replica(ctx, "DeleteClient")
	if err != nil {
		return err
	}
	return st.DeleteClient(ctx, id)
}

func (s *Store) ListClients(ctx context.Context) ([]oauth.Client, error) {
	st, err := s.replica(ctx, "ListClients")
	if err != nil {
		return nil, err
	}
	return st.ListClients(ctx)
}

// UserStore.

func (s *Store) GetUser(ctx context.Context, uid string) (oauth.User, error) {
	st, err := s.replica(ctx, "GetUser")
	if err != nil {
		return oauth.User{}, err
	}
	return st.GetUser(ctx, uid)
}

func (s *Store) GetUserByUsername(ctx context.Context, username string) (oauth.User, error) {
	st, err := s.replica(ctx, "GetUserByUsername")
	if err != nil {
		return oauth.User{}, err
	}
	return st.GetUserByUsername(ctx, username)
}

func (s *Store) CreateUser(ctx context.Context, u oauth.User) error {
	st, err := s.replica(ctx, "CreateUser")
	if err != nil {
		return err
	}
	return st.CreateUser(ctx, u)
}

func (s *Store) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) error {
	st, err := s.replica(ctx, "UpdateUser")
	if err != nil {
		return err
	}
	return st.UpdateUser(ctx, uid, fn)
}

func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	st, err := s.replica(ctx, "DeleteUser")
	if err != nil {
		return err
	}
	return st.DeleteUser(ctx, uid)
}

func (s *Store) ListUsers(ctx context.Context) ([]oauth.User, error) {
	st, err := s.replica(ctx, "ListUsers")
	if err != nil {
		return nil, err
	}
	return st.ListUsers(ctx)
}

// InteractionStore.

func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	st, err := s.replica(ctx, "PutAuthRequest")
	if err != nil {
		return err
	}
	return st.PutAuthRequest(ctx, r)
}

func (s *Store) GetAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	st, err := s.replica(ctx, "GetAuthRequest")
	if err != nil {
		return oauth.AuthRequest{}, err
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.GetAuthRequest(ctx, id, now)
	return v, peerErr(ctx, err)
}

// TakeAuthRequest takes a pushed authorization request (RFC 9126) at its home, the region its
// client pushed it to, whichever region the browser reached; a pending request of the pages
// (no home named) is this region's.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	st, err := s.replica(ctx, "TakeAuthRequest")
	if err != nil {
		return oauth.AuthRequest{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.TakeAuthRequest(ctx, id, now)
	return v, peerErr(ctx, err)
}

func (s *Store) PutSession(ctx context.Context, sess oauth.Session) error {
	st, err := s.replica(ctx, "PutSession")
	if err != nil {
		return err
	}
	return st.PutSession(ctx, sess)
}

func (s *Store) GetSession(ctx context.Context, hash string, now time.Time) (oauth.Session, error) {
	st, err := s.replica(ctx, "GetSession")
	if err != nil {
		return oauth.Session{}, err
	}
	return st.GetSession(ctx, hash, now)
}

func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	st, err := s.replica(ctx, "DeleteSession")
	if err != nil {
		return err
	}
	return st.DeleteSession(ctx, hash)
}

func (s *Store) TakeSession(ctx context.Context, hash string) error {
	st, err := s.replica(ctx, "TakeSession")
	if err != nil {
		return err
	}
	return st.TakeSession(ctx, hash)
}

func (s *Store) CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error) {
	st, err := s.replica(ctx, "CountFailure")
	if err != nil {
		return 0, err
	}
	return st.CountFailure(ctx, key, window, now)
}

func (s *Store) Failures(ctx context.Context, key string, now time.Time) (int, error) {
	st, err := s.replica(ctx, "Failures")
	if err != nil {
		return 0, err
	}
	return st.Failures(ctx, key, now)
}

func (s *Store) ResetFailures(ctx context.Context, key string) error {
	st, err := s.replica(ctx, "ResetFailures")
	if err != nil {
		return err
	}
	return st.ResetFailures(ctx, key)
}

// KeyStore.

func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	st, err := s.replica(ctx, "Keys")
	if err != nil {
		return oauth.KeySet{}, err
	}
	return st.Keys(ctx)
}

func (s *Store) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	st, err := s.replica(ctx, "UpdateKeys")
	if err != nil {
		return err
	}
	return st.UpdateKeys(ctx, fn)
}

// NonceKeyStore.

func (s *Store) NonceKeys(ctx context.Context) (oauth.NonceKeySet, error) {
	st, err := s.replica(ctx, "NonceKeys")
	if err != nil {
		return oauth.NonceKeySet{}, err
	}
	return st.NonceKeys(ctx)
}

func (s *Store) UpdateNonceKeys(ctx context.Context, fn func(oauth.NonceKeySet) (oauth.NonceKeySet, error)) error {
	st, err := s.replica(ctx, "UpdateNonceKeys")
	if err != nil {
		return err
	}
	return st.UpdateNonceKeys(ctx, fn)
}

// ReplayStore.

// UseOnce records a DPoP proof's or a client assertion's jti at the home of the code or token
// the request carries, so a proof replayed to another region within its lifetime meets the
// same record. A home that is not one of this deployment's cannot record it where it would
// decide, so the value is refused (as used) and nothing is written: the code or token it came
// with is unknown anyway.
func (s *Store) UseOnce(ctx context.Context, key string, expires, now time.Time) error {
	st, err := s.replica(ctx, "UseOnce")
	if err != nil {
		return fmt.Errorf("%w (%w)", oauth.ErrUsed, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	return peerErr(ctx, st.UseOnce(ctx, key, expires, now))
}

// FactorStore.

func (s *Store) Factors(ctx context.Context, uid string) (oauth.UserFactors, error) {
	st, err := s.replica(ctx, "Factors")
	if err != nil {
		return oauth.UserFactors{}, err
	}
	return st.Factors(ctx, uid)
}

func (s *Store) UpdateFactors(ctx context.Context, uid string, fn func(oauth.UserFactors) (oauth.UserFactors, error)) error {
	st, err := s.replica(ctx, "UpdateFactors")
	if err != nil {
		return err
	}
	return st.UpdateFactors(ctx, uid, fn)
}

// PairwiseSaltStore.

func (s *Store) PairwiseSalt(ctx context.Context, fresh []byte) ([]byte, error) {
	st, err := s.replica(ctx, "PairwiseSalt")
	if err != nil {
		return nil, err
	}
	return st.PairwiseSalt(ctx, fresh)
}

// RegistrationStore.

// PutInitialAccessToken stores an operator's initial access token in this region, the home
// its label names (authctl gives it AUTH_HOME_REGION's label).
func (s *Store) PutInitialAccessToken(ctx context.Context, t oauth.InitialAccessToken) error {
	st, err := s.replica(ctx, "PutInitialAccessToken")
	if err != nil {
		return err
	}
	return st.PutInitialAccessToken(ctx, t)
}

// GetInitialAccessToken reads an initial access token at its home, where it was stored and
// will be taken: a token stored a moment ago in the other region is found before it has
// replicated.
func (s *Store) GetInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	st, err := s.replica(ctx, "GetInitialAccessToken")
	if err != nil {
		return oauth.InitialAccessToken{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.GetInitialAccessToken(ctx, hash, now)
	return v, peerErr(ctx, err)
}

// TakeInitialAccessToken takes an initial access token at its home, the region that stored
// it, so its single use is decided by one replica whichever region the registration reached.
func (s *Store) TakeInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	st, err := s.replica(ctx, "TakeInitialAccessToken")
	if err != nil {
		return oauth.InitialAccessToken{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.TakeInitialAccessToken(ctx, hash, now)
	return v, peerErr(ctx, err)
}

// BackchannelStore. Each call acts on one request, at the home its ID names (or, for an ID
// without one, the home the context names): the ID carries its auth_req_id's home
// (oauth.BackchannelRequestID), so a device's decision reaching either region is decided where
// the client polls.

// atHome returns ctx naming the home of the backchannel request id, when its ID carries one.
func atHome(ctx context.Context, id string) context.Context {
	return oauth.WithHome(ctx, oauth.HomeOf(id))
}

func (s *Store) PutBackchannelRequest(ctx context.Context, r oauth.BackchannelRequest) error {
	ctx = atHome(ctx, r.ID)
	st, err := s.replica(ctx, "PutBackchannelRequest")
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	return peerErr(ctx, st.PutBackchannelRequest(ctx, r))
}

func (s *Store) GetBackchannelRequest(ctx context.Context, id string, now time.Time) (oauth.BackchannelRequest, error) {
	ctx = atHome(ctx, id)
	st, err := s.replica(ctx, "GetBackchannelRequest")
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.GetBackchannelRequest(ctx, id, now)
	return v, peerErr(ctx, err)
}

func (s *Store) PollBackchannelRequest(ctx context.Context, id, clientID string, now time.Time) (oauth.BackchannelRequest, error) {
	ctx = atHome(ctx, id)
	st, err := s.replica(ctx, "PollBackchannelRequest")
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.PollBackchannelRequest(ctx, id, clientID, now)
	return v, peerErr(ctx, err)
}

func (s *Store) DecideBackchannelRequest(ctx context.Context, id, uid string, d oauth.BackchannelDecision, now time.Time) (oauth.BackchannelRequest, error) {
	ctx = atHome(ctx, id)
	st, err := s.replica(ctx, "DecideBackchannelRequest")
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.DecideBackchannelRequest(ctx, id, uid, d, now)
	return v, peerErr(ctx, err)
}

// ConsumeBackchannelRequest issues the request at its home, with the poll's one-time values
// in the same write there.
func (s *Store) ConsumeBackchannelRequest(ctx context.Context, id, clientID string, now time.Time, once ...oauth.Once) (oauth.BackchannelRequest, error) {
	ctx = atHome(ctx, id)
	st, err := s.replica(ctx, "ConsumeBackchannelRequest")
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	ctx, cancel := s.bound(ctx, st)
	defer cancel()
	v, err := st.ConsumeBackchannelRequest(ctx, id, clientID, now, once...)
	return v, peerErr(ctx, err)
}

func (s *Store) ListBackchannelRequests(ctx context.Context, uid string, now time.Time) ([]oauth.BackchannelRequest, error) {
	st, err := s.replica(ctx, "ListBackchannelRequests")
	if err != nil {
		return nil, err
	}
	return st.ListBackchannelRequests(ctx, uid, now)
}
