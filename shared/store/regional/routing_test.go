package regional_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/regional"
)

const (
	here = "eu-west-1"
	peer = "eu-central-1"
)

// twoRegions is region here's store over two real replicas: local (here's) and remote (peer's).
type twoRegions struct {
	st            *regional.Store
	local, remote oauth.Store
	now           time.Time
}

func newTwoRegions(t *testing.T) twoRegions {
	t.Helper()
	local, remote := open(t), open(t)
	st, err := regional.New(here, local, map[string]oauth.Store{peer: remote})
	if err != nil {
		t.Fatal(err)
	}
	return twoRegions{st: st, local: local, remote: remote, now: time.Now().UTC()}
}

// issued writes the same fresh grant, access and refresh token into each of stores, with ctx.
func issued(t *testing.T, ctx context.Context, now time.Time, stores ...oauth.Store) (oauth.Grant, oauth.Token) {
	t.Helper()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: "cl_1", UID: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	access := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixAccess)), Kind: oauth.KindAccess, Grant: g, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	refresh := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixRefresh)), Kind: oauth.KindRefresh, Grant: g, IssuedAt: now, ExpiresAt: now.Add(time.Hour), Live: []string{access.Hash}}
	for _, s := range stores {
		if err := s.IssueTokens(ctx, oauth.Issue{Grant: g, Access: access, Refresh: refresh, FromCode: true, Tokens: []string{access.Hash, refresh.Hash}}, now); err != nil {
			t.Fatal(err)
		}
	}
	return g, access
}

// reachesHome proves, for one method routed home, that a call through region here's store
// whose context names peer acts on peer's replica and leaves the local replica as it was.
// Where the method writes, both replicas start with the same state.
var reachesHome = map[string]func(t *testing.T, w twoRegions, ctx context.Context){
	"ConsumeCode": func(t *testing.T, w twoRegions, ctx context.Context) {
		c := code(w.now)
		for _, s := range []oauth.Store{w.local, w.remote} {
			if err := s.CreateCode(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
		// With a token request's one-time value, recorded where the code is consumed.
		jti := oauth.Once{Key: oauth.NewID("dpop:"), Expires: w.now.Add(time.Minute)}
		if _, err := w.st.ConsumeCode(ctx, c.Hash, "cl_1", w.now, jti); err != nil {
			t.Fatal(err)
		}
		if _, err := w.remote.ConsumeCode(context.Background(), c.Hash, "cl_1", w.now); !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("peer's replica: %v, want the code used there", err)
		}
		if err := w.remote.UseOnce(context.Background(), jti.Key, jti.Expires, w.now); !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("peer's replica: %v, want the one-time value recorded there", err)
		}
		if _, err := w.local.ConsumeCode(context.Background(), c.Hash, "cl_1", w.now); err != nil {
			t.Errorf("local replica: %v, want the code untouched", err)
		}
		if err := w.local.UseOnce(context.Background(), jti.Key, jti.Expires, w.now); err != nil {
			t.Errorf("local replica: %v, want the one-time value not recorded there", err)
		}
	},
	"IssueTokens": func(t *testing.T, w twoRegions, ctx context.Context) {
		_, access := issued(t, ctx, w.now, w.st)
		if _, err := w.remote.GetToken(context.Background(), access.Hash, w.now); err != nil {
			t.Errorf("peer's replica: %v, want the token written there", err)
		}
		if _, err := w.local.GetToken(context.Background(), access.Hash, w.now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("local replica: %v, want no token", err)
		}
	},
	"GetToken": func(t *testing.T, w twoRegions, ctx context.Context) {
		_, access := issued(t, context.Background(), w.now, w.remote)
		if _, err := w.st.GetToken(ctx, access.Hash, w.now); err != nil {
			t.Errorf("a token only the peer's replica has: %v, want it read there", err)
		}
	},
	"RevokeToken": func(t *testing.T, w twoRegions, ctx context.Context) {
		_, access := issued(t, context.Background(), w.now, w.local, w.remote)
		if err := w.st.RevokeToken(ctx, access.Hash); err != nil {
			t.Fatal(err)
		}
		if _, err := w.remote.GetToken(context.Background(), access.Hash, w.now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("peer's replica: %v, want the token gone", err)
		}
		if _, err := w.local.GetToken(context.Background(), access.Hash, w.now); err != nil {
			t.Errorf("local replica: %v, want the token untouched", err)
		}
	},
	"RevokeGrant": func(t *testing.T, w twoRegions, ctx context.Context) {
		g, _ := issued(t, context.Background(), w.now, w.local, w.remote)
		if err := w.st.RevokeGrant(ctx, g.ID, w.now); err != nil {
			t.Fatal(err)
		}
		if rec, err := w.remote.GetGrant(context.Background(), g.ID, w.now); err != nil || !rec.Revoked {
			t.Errorf("peer's replica: %+v %v, want the grant revoked", rec, err)
		}
		if rec, err := w.local.GetGrant(context.Background(), g.ID, w.now); err != nil || rec.Revoked {
			t.Errorf("local replica: %+v %v, want the grant live", rec, err)
		}
	},
	"ConsumeGrant": func(t *testing.T, w twoRegions, ctx context.Context) {
		g, _ := issued(t, context.Background(), w.now, w.local, w.remote)
		if err := w.st.ConsumeGrant(ctx, g.ID, w.now); err != nil {
			t.Fatal(err)
		}
		if rec, err := w.remote.GetGrant(context.Background(), g.ID, w.now); err != nil || rec.ConsumedAt.IsZero() {
			t.Errorf("peer's replica: %+v %v, want the grant consumed", rec, err)
		}
		if rec, err := w.local.GetGrant(context.Background(), g.ID, w.now); err != nil || !rec.ConsumedAt.IsZero() {
			t.Errorf("local replica: %+v %v, want the grant unconsumed", rec, err)
		}
	},
	"GetGrant": func(t *testing.T, w twoRegions, ctx context.Context) {
		g, _ := issued(t, context.Background(), w.now, w.remote)
		if _, err := w.st.GetGrant(ctx, g.ID, w.now); err != nil {
			t.Errorf("a grant only the peer's replica has: %v, want it read there", err)
		}
	},
	"GetAuthRequest": func(t *testing.T, w twoRegions, ctx context.Context) {
		req := oauth.AuthRequest{ID: oauth.NewID("pr_"), ClientID: "cl_1", RedirectURI: "https://c.example/cb", CreatedAt: w.now, ExpiresAt: w.now.Add(time.Minute)}
		if err := w.remote.PutAuthRequest(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got, err := w.st.GetAuthRequest(ctx, req.ID, w.now); err != nil || got.ClientID != "cl_1" {
			t.Errorf("a pushed request only the peer's replica has: %+v %v, want it read there", got, err)
		}
	},
	"TakeAuthRequest": func(t *testing.T, w twoRegions, ctx context.Context) {
		req := oauth.AuthRequest{ID: oauth.NewID("pr_"), ClientID: "cl_1", RedirectURI: "https://c.example/cb", CreatedAt: w.now, ExpiresAt: w.now.Add(time.Minute)}
		for _, s := range []oauth.Store{w.local, w.remote} {
			if err := s.PutAuthRequest(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.st.TakeAuthRequest(ctx, req.ID, w.now); err != nil {
			t.Fatal(err)
		}
		if _, err := w.remote.GetAuthRequest(context.Background(), req.ID, w.now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("peer's replica: %v, want the request taken", err)
		}
		if _, err := w.local.GetAuthRequest(context.Background(), req.ID, w.now); err != nil {
			t.Errorf("local replica: %v, want the request untouched", err)
		}
	},
	"GetInitialAccessToken": func(t *testing.T, w twoRegions, ctx context.Context) {
		iat := oauth.InitialAccessToken{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixInitialAccess)), CreatedAt: w.now, ExpiresAt: w.now.Add(time.Hour)}
		if err := w.remote.PutInitialAccessToken(context.Background(), iat); err != nil {
			t.Fatal(err)
		}
		if _, err := w.st.GetInitialAccessToken(ctx, iat.Hash, w.now); err != nil {
			t.Fatalf("a token stored at its home only: %v, want it read there", err)
		}
	},
	"TakeInitialAccessToken": func(t *testing.T, w twoRegions, ctx context.Context) {
		iat := oauth.InitialAccessToken{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixInitialAccess)), CreatedAt: w.now, ExpiresAt: w.now.Add(time.Hour)}
		for _, s := range []oauth.Store{w.local, w.remote} {
			if err := s.PutInitialAccessToken(context.Background(), iat); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.st.TakeInitialAccessToken(ctx, iat.Hash, w.now); err != nil {
			t.Fatal(err)
		}
		if _, err := w.remote.TakeInitialAccessToken(context.Background(), iat.Hash, w.now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("peer's replica: %v, want the token taken", err)
		}
		if _, err := w.local.TakeInitialAccessToken(context.Background(), iat.Hash, w.now); err != nil {
			t.Errorf("local replica: %v, want the token untouched", err)
		}
	},
	"UseOnce": func(t *testing.T, w twoRegions, ctx context.Context) {
		key := oauth.NewID("dpop:")
		if err := w.st.UseOnce(ctx, key, w.now.Add(time.Minute), w.now); err != nil {
			t.Fatal(err)
		}
		if err := w.remote.UseOnce(context.Background(), key, w.now.Add(time.Minute), w.now); !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("peer's replica: %v, want the value recorded there", err)
		}
		if err := w.local.UseOnce(context.Background(), key, w.now.Add(time.Minute), w.now); err != nil {
			t.Errorf("local replica: %v, want nothing recorded", err)
		}
	},
}

// TestRegional_EveryStoreMethodIsRoutedOrExemptWithAReason lists oauth.Store's methods by
// reflection: each must have a route; a local one must say why; a home one must have a test
// above proving it reaches the home's replica. A method added to oauth.Store (a new single-use
// write, say) fails here until it is decided.
func TestRegional_EveryStoreMethodIsRoutedOrExemptWithAReason(t *testing.T) {
	routes := regional.Routes()
	iface := reflect.TypeFor[oauth.Store]()
	methods := make([]string, 0, iface.NumMethod())
	for i := range iface.NumMethod() {
		methods = append(methods, iface.Method(i).Name)
	}
	for _, m := range methods {
		r, ok := routes[m]
		switch {
		case !ok:
			t.Errorf("oauth.Store.%s has no route in regional's table: route it home or exempt it (Local) with a reason", m)
		case r.Reason == "":
			t.Errorf("%s: routed %v without a reason", m, r.Route)
		case r.Route == regional.Home && reachesHome[m] == nil:
			t.Errorf("%s is routed home, but no test proves it reaches the home's replica (reachesHome)", m)
		case r.Route != regional.Home && r.Route != regional.Local:
			t.Errorf("%s: route %v is neither home nor local", m, r.Route)
		}
	}
	for m := range routes {
		if !slices.Contains(methods, m) {
			t.Errorf("the table routes %s, which oauth.Store does not have", m)
		}
	}
	for m := range reachesHome {
		if routes[m].Route != regional.Home {
			t.Errorf("%s has a home test but is routed %v", m, routes[m].Route)
		}
	}
}

// TestRegional_EveryHomeRoutedMethodReachesThePeersReplica runs, for every method the table
// routes home, its proof against two real (embedded bbolt) replicas.
func TestRegional_EveryHomeRoutedMethodReachesThePeersReplica(t *testing.T) {
	for m, r := range regional.Routes() {
		if r.Route != regional.Home {
			continue
		}
		t.Run(m, func(t *testing.T) {
			probe := reachesHome[m]
			if probe == nil {
				t.Fatalf("no test for %s", m)
			}
			w := newTwoRegions(t)
			probe(t, w, oauth.WithHome(context.Background(), peer))
		})
	}
}

// TestUseOnce_AJTIPresentedInBothRegionsIsRecordedOnceAtItsHome: 50 racing requests, half
// through each region's store, present one jti with a code or token of home peer: exactly one
// is accepted, since every one is decided by peer's replica (with every write local, each
// region would accept one).
func TestUseOnce_AJTIPresentedInBothRegionsIsRecordedOnceAtItsHome(t *testing.T) {
	w := newTwoRegions(t)
	there, err := regional.New(peer, w.remote, map[string]oauth.Store{here: w.local})
	if err != nil {
		t.Fatal(err)
	}
	ctx := oauth.WithHome(context.Background(), peer)
	key := oauth.NewID("dpop:")
	const racers = 50
	errs := make(chan error, racers)
	start := make(chan struct{})
	for i := range racers {
		st := w.st
		if i%2 == 1 {
			st = there
		}
		go func() {
			<-start
			errs <- st.UseOnce(ctx, key, w.now.Add(time.Minute), w.now)
		}()
	}
	close(start)
	won := 0
	for range racers {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, oauth.ErrUsed):
			t.Errorf("a racer: %v, want used", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing uses of one jti accepted across two regions, want 1", won, racers)
	}
}

// TestUseOnce_WithNoHomeIsLocalAndWithAnUnknownHomeIsRefused: a request that carries no code
// or token of a home (a PAR request, a resource request whose token has no home label) records
// its jti in this region's replica; one whose code or token names a home this deployment does
// not have is refused as used, and nothing is written anywhere.
func TestUseOnce_WithNoHomeIsLocalAndWithAnUnknownHomeIsRefused(t *testing.T) {
	w := newTwoRegions(t)
	exp := w.now.Add(time.Minute)
	key := oauth.NewID("dpop:")
	if err := w.st.UseOnce(context.Background(), key, exp, w.now); err != nil {
		t.Fatal(err)
	}
	if err := w.local.UseOnce(context.Background(), key, exp, w.now); !errors.Is(err, oauth.ErrUsed) {
		t.Errorf("local replica after a use with no home: %v, want used", err)
	}
	if err := w.remote.UseOnce(context.Background(), key, exp, w.now); err != nil {
		t.Errorf("peer's replica after a use with no home: %v, want nothing recorded", err)
	}

	other := oauth.NewID("dpop:")
	err := w.st.UseOnce(oauth.WithHome(context.Background(), "us-east-1"), other, exp, w.now)
	if !errors.Is(err, oauth.ErrUsed) || !errors.Is(err, regional.ErrUnknownHome) {
		t.Fatalf("a use at an unknown home: %v, want refused as used (unknown home)", err)
	}
	for name, s := range map[string]oauth.Store{"local": w.local, "peer's": w.remote} {
		if err := s.UseOnce(context.Background(), other, exp, w.now); err != nil {
			t.Errorf("%s replica after the refused use: %v, want nothing recorded", name, err)
		}
	}
}
