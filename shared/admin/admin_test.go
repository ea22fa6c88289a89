package admin_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// cheapHasher keeps argon2id at a cost that makes tests fast.
var cheapHasher = authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newService returns an admin service over a fresh embedded store and a clock tests move.
func newService(t testing.TB) (*admin.Service, *clock) {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	return admin.New(st, cheapHasher, clk, nil), clk
}

var validClient = admin.ClientSpec{
	Name: "Acme Books", RedirectURIs: []string{"https://books.example/cb"}, Scopes: []string{"openid", "email"},
}

func mustClient(t *testing.T, s *admin.Service, spec admin.ClientSpec) (oauth.Client, string) {
	t.Helper()
	c, secret, err := s.CreateClient(context.Background(), spec)
	if err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	return c, secret
}

// issue writes a grant with an access and a refresh token for uid and clientID, as the token
// endpoint would, and returns the grant id and the access token's hash.
func issue(t *testing.T, s *admin.Service, uid, clientID string) (string, string) {
	t.Helper()
	now := s.Clock.Now()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: clientID, UID: uid, Scopes: oauth.Scopes{"openid"},
		AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	tok := func(kind string) oauth.Token {
		return oauth.Token{Hash: oauth.HashToken(oauth.NewSecret("t_")), Kind: kind, Scopes: g.Scopes, IssuedAt: now,
			ExpiresAt: now.Add(time.Hour), Grant: g}
	}
	a, r := tok(oauth.KindAccess), tok(oauth.KindRefresh)
	r.Live = []string{a.Hash}
	in := oauth.Issue{Grant: g, Access: a, Refresh: r, FromCode: true, Tokens: []string{a.Hash, r.Hash}}
	if err := s.Store.IssueTokens(context.Background(), in, now); err != nil {
		t.Fatalf("IssueTokens: %v", err)
	}
	return g.ID, a.Hash
}

func tokenLive(t *testing.T, s *admin.Service, hash string) bool {
	t.Helper()
	_, err := s.Store.GetToken(context.Background(), hash, s.Clock.Now())
	if err != nil && !errors.Is(err, oauth.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func TestCreateClient_RefusesInvalidInput(t *testing.T) {
	s, _ := newService(t)
	with := func(f func(*admin.ClientSpec)) admin.ClientSpec {
		spec := validClient
		spec.RedirectURIs = slices.Clone(spec.RedirectURIs)
		f(&spec)
		return spec
	}
	cases := map[string]admin.ClientSpec{
		"relative redirect URI":           with(func(c *admin.ClientSpec) { c.RedirectURIs = []string{"/cb"} }),
		"redirect URI with a fragment":    with(func(c *admin.ClientSpec) { c.RedirectURIs = []string{"https://a.example/cb#x"} }),
		"plain http off loopback":         with(func(c *admin.ClientSpec) { c.RedirectURIs = []string{"http://books.example/cb"} }),
		"no redirect URI":                 with(func(c *admin.ClientSpec) { c.RedirectURIs = nil }),
		"unknown scope":                   with(func(c *admin.ClientSpec) { c.Scopes = []string{"openid", "admin"} }),
		"no scope":                        with(func(c *admin.ClientSpec) { c.Scopes = nil }),
		"no name":                         with(func(c *admin.ClientSpec) { c.Name = "  " }),
		"client id with a space":          with(func(c *admin.ClientSpec) { c.ID = "acme books" }),
		"logo over http":                  with(func(c *admin.ClientSpec) { c.LogoURI = "http://books.example/logo.png" }),
		"malformed cert thumbprint":       with(func(c *admin.ClientSpec) { c.CertThumbprint = "abc" }),
		"thumbprint and subject DN both":  with(func(c *admin.ClientSpec) { c.CertThumbprint, c.CertSubjectDN = strings.Repeat("A", 43), "CN=x" }),
		"subject DN and a SAN both":       with(func(c *admin.ClientSpec) { c.CertSubjectDN, c.CertSANDNS = "CN=x", "tpp.example.com" }),
		"two SANs":                        with(func(c *admin.ClientSpec) { c.CertSANIP, c.CertSANURI = "192.0.2.1", "https://tpp.example/" }),
		"subject DN not RFC 4514":         with(func(c *admin.ClientSpec) { c.CertSubjectDN = "CN" }),
		"subject DN with an unknown type": with(func(c *admin.ClientSpec) { c.CertSubjectDN = "colour=blue" }),
		"SAN IP that is not one":          with(func(c *admin.ClientSpec) { c.CertSANIP = "tpp.example.com" }),
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := s.CreateClient(context.Background(), spec)
			if !errors.Is(err, admin.ErrInvalid) {
				t.Fatalf("CreateClient = %v, want ErrInvalid", err)
			}
		})
	}
	list, err := s.ListClients(context.Background())
	if err != nil || len(list) != 0 {
		t.Fatalf("refused creates stored %d client(s) (err %v)", len(list), err)
	}
}

func TestCreateClient_StoresOnlyTheSecretHash(t *testing.T) {
	s, clk := newService(t)
	spec := validClient
	spec.RedirectURIs = []string{"https://books.example/cb", "http://127.0.0.1:4499/cb", "https://books.example/cb"}
	spec.Scopes = []string{"openid", "bank:transfers.write", "bank:transfers:write"}
	c, secret := mustClient(t, s, spec)
	if !strings.HasPrefix(c.ID, oauth.PrefixClientID) || !strings.HasPrefix(secret, oauth.PrefixSecret) {
		t.Fatalf("id %q / secret prefix: want %s and %s", c.ID, oauth.PrefixClientID, oauth.PrefixSecret)
	}
	stored, err := s.Store.GetClient(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.SecretHashes) != 1 || stored.SecretHashes[0].Hash != oauth.HashSecret(secret) {
		t.Fatalf("stored secret hashes %+v, want the one hash of the secret", stored.SecretHashes)
	}
	if !stored.VerifySecret(secret, clk.Now()) || stored.VerifySecret(secret+"x", clk.Now()) {
		t.Fatal("the stored client does not verify exactly its secret")
	}
	if want := []string{"https://books.example/cb", "http://127.0.0.1:4499/cb"}; !slices.Equal(stored.RedirectURIs, want) {
		t.Errorf("redirect URIs %v, want duplicates dropped: %v", stored.RedirectURIs, want)
	}
	if want := []string{"openid", "bank:transfers.write"}; !slices.Equal(stored.Scopes, want) {
		t.Errorf("scopes %v, want both spellings of one scope kept once: %v", stored.Scopes, want)
	}
}

func TestCreateClient_MTLSClientGetsNoSecret(t *testing.T) {
	s, _ := newService(t)
	spec := validClient
	spec.CertThumbprint = "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"
	c, secret := mustClient(t, s, spec)
	if secret != "" || len(c.SecretHashes) != 0 || !c.UsesMTLS() {
		t.Fatalf("mTLS client: secret %q, hashes %v", secret, c.SecretHashes)
	}
	if _, _, err := s.RotateSecret(context.Background(), c.ID, 0); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("RotateSecret of an mTLS client = %v, want ErrInvalid", err)
	}
}

func TestCreateClient_TakenIDIsConflict(t *testing.T) {
	s, _ := newService(t)
	spec := validClient
	spec.ID = "acme-books"
	mustClient(t, s, spec)
	if _, _, err := s.CreateClient(context.Background(), spec); !errors.Is(err, oauth.ErrAlreadyExists) {
		t.Fatalf("second CreateClient = %v, want ErrAlreadyExists", err)
	}
}

func TestUnknownClientIsNotFound(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	name := "x"
	ops := map[string]func() error{
		"get":     func() error { _, err := s.GetClient(ctx, "nope"); return err },
		"update":  func() error { _, err := s.UpdateClient(ctx, "nope", admin.ClientChanges{Name: &name}); return err },
		"rotate":  func() error { _, _, err := s.RotateSecret(ctx, "nope", 0); return err },
		"disable": func() error { _, err := s.DisableClient(ctx, "nope"); return err },
		"enable":  func() error { return s.EnableClient(ctx, "nope") },
		"delete":  func() error { _, err := s.DeleteClient(ctx, "nope"); return err },
	}
	for op, f := range ops {
		if err := f(); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("%s of an unknown client = %v, want ErrNotFound", op, err)
		}
	}
}

func TestUpdateClient_EditsRedirectURIsAndScopes(t *testing.T) {
	s, _ := newService(t)
	c, _ := mustClient(t, s, validClient)
	ctx := context.Background()
	got, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{
		AddRedirectURIs: []string{"https://books.example/cb2"}, RemoveRedirectURIs: []string{"https://books.example/cb"},
		AddScopes: []string{"profile"}, RemoveScopes: []string{"email"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.RedirectURIs, []string{"https://books.example/cb2"}) || !slices.Equal(got.Scopes, []string{"openid", "profile"}) {
		t.Fatalf("after edit: %v %v", got.RedirectURIs, got.Scopes)
	}
	bad := map[string]admin.ClientChanges{
		"removing an unregistered URI": {RemoveRedirectURIs: []string{"https://other.example/cb"}},
		"removing the last URI":        {RemoveRedirectURIs: []string{"https://books.example/cb2"}},
		"adding an invalid URI":        {AddRedirectURIs: []string{"http://evil.example/cb"}},
		"replacing with no scopes":     {Scopes: []string{}},
		"adding an unknown scope":      {AddScopes: []string{"root"}},
	}
	for name, ch := range bad {
		if _, err := s.UpdateClient(ctx, c.ID, ch); !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	after, _ := s.GetClient(ctx, c.ID)
	if !slices.Equal(after.RedirectURIs, got.RedirectURIs) || !slices.Equal(after.Scopes, got.Scopes) {
		t.Errorf("refused updates changed the client: %v %v", after.RedirectURIs, after.Scopes)
	}
}

func TestRotateSecret_GraceKeepsTheOldSecretUntilItEnds(t *testing.T) {
	cases := []struct {
		name         string
		grace        time.Duration
		oldValidNow  bool
		oldValidLate bool
	}{
		{"no grace: the old secret fails at once", 0, false, false},
		{"grace: the old secret works until the grace ends", time.Hour, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newService(t)
			c, old := mustClient(t, s, validClient)
			secret, _, err := s.RotateSecret(context.Background(), c.ID, tc.grace)
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := s.Store.GetClient(context.Background(), c.ID)
			if !stored.VerifySecret(secret, clk.Now()) {
				t.Fatal("the new secret does not verify")
			}
			if got := stored.VerifySecret(old, clk.Now()); got != tc.oldValidNow {
				t.Errorf("old secret valid right after rotation = %v, want %v", got, tc.oldValidNow)
			}
			late := clk.Now().Add(tc.grace)
			if got := stored.VerifySecret(old, late); got != tc.oldValidLate {
				t.Errorf("old secret valid when the grace ends = %v, want %v", got, tc.oldValidLate)
			}
			if !stored.VerifySecret(secret, late.Add(365*24*time.Hour)) {
				t.Error("the new secret expires")
			}
		})
	}
}

func TestRotateSecret_DropsSecretsWhoseGraceEnded(t *testing.T) {
	s, clk := newService(t)
	c, _ := mustClient(t, s, validClient)
	if _, _, err := s.RotateSecret(context.Background(), c.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	_, got, err := s.RotateSecret(context.Background(), c.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.SecretHashes) != 2 {
		t.Fatalf("after two rotations with grace, %d secrets kept, want 2 (the expired one dropped)", len(got.SecretHashes))
	}
}

func TestDisableClient_RevokesItsGrantsOnly(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	c, _ := mustClient(t, s, validClient)
	other, _ := mustClient(t, s, validClient)
	_, mine1 := issue(t, s, "u1", c.ID)
	_, mine2 := issue(t, s, "u2", c.ID)
	_, theirs := issue(t, s, "u1", other.ID)
	revoked, err := s.DisableClient(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(revoked) != 2 {
		t.Errorf("revoked %d grants, want 2", len(revoked))
	}
	if tokenLive(t, s, mine1) || tokenLive(t, s, mine2) {
		t.Error("a token of the disabled client still validates")
	}
	if !tokenLive(t, s, theirs) {
		t.Error("another client's token was revoked")
	}
	got, _ := s.GetClient(ctx, c.ID)
	if !got.Disabled {
		t.Error("client not marked disabled")
	}
	if err := s.EnableClient(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetClient(ctx, c.ID); got.Disabled {
		t.Error("enable left the client disabled")
	}
	if tokenLive(t, s, mine1) {
		t.Error("enabling brought a revoked token back")
	}
}

func TestDeleteClient_RevokesThenDeletes(t *testing.T) {
	s, _ := newService(t)
	c, _ := mustClient(t, s, validClient)
	_, tok := issue(t, s, "u1", c.ID)
	revoked, err := s.DeleteClient(context.Background(), c.ID)
	if err != nil || len(revoked) != 1 {
		t.Fatalf("DeleteClient = %v, %v", revoked, err)
	}
	if tokenLive(t, s, tok) {
		t.Error("the deleted client's token still validates")
	}
	if _, err := s.GetClient(context.Background(), c.ID); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("GetClient after delete = %v", err)
	}
}

const goodPassword = "correct-horse-battery"

func mustUser(t *testing.T, s *admin.Service, spec admin.UserSpec) oauth.User {
	t.Helper()
	if spec.Password == "" {
		spec.Password = goodPassword
	}
	u, err := s.CreateUser(context.Background(), spec)
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	return u
}

func TestCreateUser_NormalisesUsernameAndHashesPassword(t *testing.T) {
	s, _ := newService(t)
	u := mustUser(t, s, admin.UserSpec{Username: "  Alice@Example.COM "})
	if u.Username != "alice@example.com" || !strings.HasPrefix(u.UID, admin.PrefixUID) {
		t.Fatalf("username %q uid %q", u.Username, u.UID)
	}
	stored, err := s.FindUser(context.Background(), "ALICE@example.com")
	if err != nil {
		t.Fatalf("FindUser by username in other case: %v", err)
	}
	if ok, err := cheapHasher.Verify(goodPassword, stored.PasswordHash); !ok || err != nil {
		t.Fatalf("stored hash does not verify the password (%v)", err)
	}
	if strings.Contains(stored.PasswordHash, goodPassword) {
		t.Fatal("the password is stored in clear")
	}
}

func TestCreateUser_RefusesInvalidInput(t *testing.T) {
	s, _ := newService(t)
	mustUser(t, s, admin.UserSpec{UID: "u-1", Username: "alice"})
	cases := []struct {
		name string
		spec admin.UserSpec
		want error
	}{
		{"short password", admin.UserSpec{Username: "bob", Password: "short"}, admin.ErrInvalid},
		{"password with a newline", admin.UserSpec{Username: "bob", Password: goodPassword + "\n"}, admin.ErrInvalid},
		{"empty username", admin.UserSpec{Username: "   ", Password: goodPassword}, admin.ErrInvalid},
		{"phone not E.164", admin.UserSpec{Username: "bob", Password: goodPassword, Claims: oauth.Claims{Phone: "0612345678"}}, admin.ErrInvalid},
		{"birthdate not a date", admin.UserSpec{Username: "bob", Password: goodPassword, Claims: oauth.Claims{Birthdate: "1990-13-45"}}, admin.ErrInvalid},
		{"uid with a space", admin.UserSpec{UID: "u 2", Username: "bob", Password: goodPassword}, admin.ErrInvalid},
		{"taken username in other case", admin.UserSpec{Username: "ALICE", Password: goodPassword}, oauth.ErrAlreadyExists},
		{"taken uid", admin.UserSpec{UID: "u-1", Username: "carol", Password: goodPassword}, oauth.ErrAlreadyExists},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateUser(context.Background(), tc.spec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CreateUser = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := s.CreateUser(context.Background(), admin.UserSpec{Username: "Alice", Password: goodPassword}); err == nil ||
		!strings.Contains(err.Error(), "username") {
		t.Errorf("duplicate username error %v does not say the username is taken", err)
	}
}

func TestUpdateUser_ChangesOnlyGivenClaims(t *testing.T) {
	s, clk := newService(t)
	u := mustUser(t, s, admin.UserSpec{Username: "alice", Claims: oauth.Claims{Email: "a@example.com", Name: "Alice"}})
	clk.Advance(time.Hour)
	phone, empty := "+33612345678", ""
	got, err := s.UpdateUser(context.Background(), "alice", admin.UserChanges{Phone: &phone, Name: &empty})
	if err != nil {
		t.Fatal(err)
	}
	if got.Claims.Phone != phone || got.Claims.Name != "" || got.Claims.Email != "a@example.com" {
		t.Fatalf("claims after update: %+v", got.Claims)
	}
	if got.Claims.UpdatedAt != clk.Now().Unix() {
		t.Errorf("updated_at %d, want the clock's %d", got.Claims.UpdatedAt, clk.Now().Unix())
	}
	if got.PasswordHash != u.PasswordHash {
		t.Error("a claim update changed the password hash")
	}
	bad := "06"
	if _, err := s.UpdateUser(context.Background(), u.UID, admin.UserChanges{Phone: &bad}); !errors.Is(err, admin.ErrInvalid) {
		t.Errorf("invalid phone: %v, want ErrInvalid", err)
	}
	if _, err := s.UpdateUser(context.Background(), "nobody", admin.UserChanges{Phone: &phone}); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("unknown user: %v, want ErrNotFound", err)
	}
}

func TestSetPassword_ReplacesTheHashAndCanRevokeGrants(t *testing.T) {
	for _, revoke := range []bool{false, true} {
		t.Run(map[bool]string{false: "keeps grants", true: "revokes grants"}[revoke], func(t *testing.T) {
			s, _ := newService(t)
			c, _ := mustClient(t, s, validClient)
			u := mustUser(t, s, admin.UserSpec{Username: "alice"})
			_, tok := issue(t, s, u.UID, c.ID)
			if _, err := s.SetPassword(context.Background(), "alice", "a-brand-new-passphrase", revoke); err != nil {
				t.Fatal(err)
			}
			got, _ := s.FindUser(context.Background(), u.UID)
			if ok, _ := cheapHasher.Verify("a-brand-new-passphrase", got.PasswordHash); !ok {
				t.Error("the new password does not verify")
			}
			if tokenLive(t, s, tok) == revoke {
				t.Errorf("token live = %v with revokeGrants %v", !revoke, revoke)
			}
		})
	}
}

func TestDisableUser_RevokesTheUsersGrantsOnly(t *testing.T) {
	s, _ := newService(t)
	c, _ := mustClient(t, s, validClient)
	alice := mustUser(t, s, admin.UserSpec{Username: "alice"})
	bob := mustUser(t, s, admin.UserSpec{Username: "bob"})
	_, aliceTok := issue(t, s, alice.UID, c.ID)
	_, bobTok := issue(t, s, bob.UID, c.ID)
	u, revoked, err := s.DisableUser(context.Background(), "alice")
	if err != nil || len(revoked) != 1 || !u.Disabled {
		t.Fatalf("DisableUser = %+v, %v, %v", u.Disabled, revoked, err)
	}
	if tokenLive(t, s, aliceTok) {
		t.Error("the disabled user's token still validates")
	}
	if !tokenLive(t, s, bobTok) {
		t.Error("another user's token was revoked")
	}
	if u, err := s.EnableUser(context.Background(), alice.UID); err != nil || u.Disabled {
		t.Errorf("EnableUser = %v, %v", u.Disabled, err)
	}
}

func TestDeleteUser_RevokesAndFreesTheUsername(t *testing.T) {
	s, _ := newService(t)
	c, _ := mustClient(t, s, validClient)
	alice := mustUser(t, s, admin.UserSpec{Username: "alice"})
	_, tok := issue(t, s, alice.UID, c.ID)
	if _, _, err := s.DeleteUser(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	if tokenLive(t, s, tok) {
		t.Error("the deleted user's token still validates")
	}
	mustUser(t, s, admin.UserSpec{Username: "alice"})
}

func TestRevokeGrant(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	id, tok := issue(t, s, "u1", "c1")
	already, err := s.RevokeGrant(ctx, id)
	if err != nil || already {
		t.Fatalf("first revoke = %v, %v", already, err)
	}
	if tokenLive(t, s, tok) {
		t.Error("token of the revoked grant still validates")
	}
	if already, err := s.RevokeGrant(ctx, id); err != nil || !already {
		t.Errorf("second revoke = %v, %v; want already revoked", already, err)
	}
	if _, err := s.RevokeGrant(ctx, "gr_unknown"); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("unknown grant: %v, want ErrNotFound", err)
	}
	if _, err := s.ListGrants(ctx, oauth.GrantFilter{}); !errors.Is(err, admin.ErrInvalid) {
		t.Errorf("ListGrants without owner: %v, want ErrInvalid", err)
	}
}

// TestResweep_RevokesGrantsIssuedDuringTheWait stands in for a code issued just before a
// disablement and exchanged after the first sweep: the grant it starts appears while Resweep
// waits, and the second sweep revokes it.
func TestResweep_RevokesGrantsIssuedDuringTheWait(t *testing.T) {
	s, _ := newService(t)
	c, _ := mustClient(t, s, validClient)
	if _, err := s.DisableClient(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	var late string
	var waited time.Duration
	s.Sleep = func(_ context.Context, d time.Duration) error {
		waited = d
		_, late = issue(t, s, "u1", c.ID)
		return nil
	}
	revoked, err := s.Resweep(context.Background(), oauth.GrantFilter{ClientID: c.ID}, admin.ReasonClientDisabled, 2*time.Minute)
	if err != nil || len(revoked) != 1 {
		t.Fatalf("Resweep = %v, %v; want the late grant", revoked, err)
	}
	if waited != 2*time.Minute {
		t.Errorf("waited %v, want 2m", waited)
	}
	if tokenLive(t, s, late) {
		t.Error("the token of the grant issued during the wait still validates")
	}
}

// TestClient_RefreshReuseIntervalIsCappedAndOffByDefault: a client registers without a retry
// window; one of up to 60 whole seconds is stored and can be turned off again; a larger or
// fractional one is refused at creation and at update, and changes nothing.
func TestClient_RefreshReuseIntervalIsCappedAndOffByDefault(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	plain, _ := mustClient(t, s, validClient)
	if plain.RefreshReuseInterval != 0 {
		t.Fatalf("default window %v, want off", plain.RefreshReuseInterval)
	}
	spec := validClient
	spec.ID, spec.RefreshReuseInterval = "", 30*time.Second
	c, _ := mustClient(t, s, spec)
	if stored, _ := s.GetClient(ctx, c.ID); stored.RefreshReuseInterval != 30*time.Second {
		t.Fatalf("stored window %v, want 30s", stored.RefreshReuseInterval)
	}
	for _, d := range []time.Duration{61 * time.Second, time.Hour, -time.Second, 1500 * time.Millisecond} {
		spec.RefreshReuseInterval = d
		if _, _, err := s.CreateClient(ctx, spec); !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("create with %v: %v, want ErrInvalid", d, err)
		}
		if _, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{RefreshReuseInterval: &d}); !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("update to %v: %v, want ErrInvalid", d, err)
		}
	}
	if stored, _ := s.GetClient(ctx, c.ID); stored.RefreshReuseInterval != 30*time.Second {
		t.Fatalf("refused updates changed the window to %v", stored.RefreshReuseInterval)
	}
	off := time.Duration(0)
	if got, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{RefreshReuseInterval: &off}); err != nil || got.RefreshReuseInterval != 0 {
		t.Fatalf("turning the window off: %v %v", got.RefreshReuseInterval, err)
	}
}

// TestClient_IDTokenAlgIsValidatedAgainstTheDeployment: a client may register RS256 (the
// default), PS256 or ES256, and only one the deployment keeps keys for; a refused algorithm
// leaves the store as it was and the error names what to use.
func TestClient_IDTokenAlgIsValidatedAgainstTheDeployment(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	for _, alg := range []string{"", "RS256", "PS256", "ES256"} {
		spec := validClient
		spec.IDTokenSignedResponseAlg = alg
		c, _ := mustClient(t, s, spec)
		if stored, _ := s.GetClient(ctx, c.ID); stored.IDTokenSignedResponseAlg != alg {
			t.Fatalf("stored alg %q, want %q", stored.IDTokenSignedResponseAlg, alg)
		}
	}
	before, _ := s.ListClients(ctx)
	for _, alg := range []string{"HS256", "none", "RS512", "ps256", "ES256 "} {
		spec := validClient
		spec.IDTokenSignedResponseAlg = alg
		_, _, err := s.CreateClient(ctx, spec)
		if !errors.Is(err, admin.ErrInvalid) || !strings.Contains(err.Error(), "RS256, PS256, ES256") {
			t.Errorf("create with %q: %v, want ErrInvalid naming the supported algorithms", alg, err)
		}
	}
	if after, _ := s.ListClients(ctx); len(after) != len(before) {
		t.Fatalf("refused registrations stored %d clients", len(after)-len(before))
	}

	// A deployment that keeps PS256 and ES256 keys only.
	s.IDTokenAlgs = []string{"PS256", "ES256"}
	for _, alg := range []string{"", "RS256"} {
		spec := validClient
		spec.IDTokenSignedResponseAlg = alg
		_, _, err := s.CreateClient(ctx, spec)
		if !errors.Is(err, admin.ErrInvalid) || !strings.Contains(err.Error(), "AUTH_ID_TOKEN_ALGS=PS256,ES256") {
			t.Errorf("create with %q where RS256 has no keys: %v", alg, err)
		}
	}
	spec := validClient
	spec.IDTokenSignedResponseAlg = "ES256"
	c, _ := mustClient(t, s, spec)
	rs := "RS256"
	if _, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{IDTokenSignedResponseAlg: &rs}); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("update to RS256 where it has no keys: %v", err)
	}
	ps := "PS256"
	if got, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{IDTokenSignedResponseAlg: &ps}); err != nil || got.IDTokenSignedResponseAlg != "PS256" {
		t.Fatalf("update to PS256: %q, %v", got.IDTokenSignedResponseAlg, err)
	}
}
