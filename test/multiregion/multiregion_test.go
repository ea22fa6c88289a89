package multiregion_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/shared/store/regional"
)

// The two endpoints: scripts/test.sh starts two DynamoDB Local instances.
const (
	envRegionA = "DYNAMODB_LOCAL_ENDPOINT"
	envRegionB = "DYNAMODB_LOCAL_ENDPOINT_B"
)

// replicationDelay stands for global tables' replication latency ("typically within a
// second"); the requests below race well inside it.
const replicationDelay = 400 * time.Millisecond

// pairs is how many codes (and refresh tokens) are each presented in both regions at once.
const pairs = 25

func endpoint(t *testing.T, env string) string {
	t.Helper()
	e := os.Getenv(env)
	if e == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is unset under CI: scripts/test.sh starts two DynamoDB Local instances", env)
		}
		t.Skipf("%s is unset: start a second DynamoDB Local (DYNAMODB_LOCAL_STATE=tools/dynamodb-local/.state-b scripts/dynamodb-local.sh start)", env)
	}
	return e
}

// newRegion creates the table, with its stream, in the DynamoDB Local at env.
func newRegion(t *testing.T, name, env, table string) *region {
	t.Helper()
	ep := endpoint(t, env)
	creds := credentials.NewStaticCredentialsProvider("multiregion", "multiregion", "")
	r := &region{name: name, table: table,
		db:      dynamodb.New(dynamodb.Options{Region: name, BaseEndpoint: aws.String(ep), Credentials: creds}),
		streams: dynamodbstreams.New(dynamodbstreams.Options{Region: name, BaseEndpoint: aws.String(ep), Credentials: creds}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := dynamo.TableDefinition(table)
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	if _, err := r.db.CreateTable(ctx, in); err != nil {
		t.Fatalf("create the table in %s: %v", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(r.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = r.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return r
}

// world is two regions of one global table, their replicator, and each region's token
// service: plain (every write to the local replica) or home-routed (regional.Store).
type world struct {
	a, b     *region
	rep      *replicator
	storeA   oauth.Store
	storeB   oauth.Store
	svcA     *oauth.Service
	svcB     *oauth.Service
	client   *oauth.Client
	redirect string
}

func newWorld(t *testing.T, homeRouted bool, delay time.Duration) *world {
	t.Helper()
	table := "multiregion-" + time.Now().Format("150405.000000000")
	w := &world{redirect: "https://client.example/cb"}
	w.a = newRegion(t, "eu-west-1", envRegionA, table)
	w.b = newRegion(t, "eu-central-1", envRegionB, table)
	w.rep = startReplicator(t, w.a, w.b, delay)
	w.storeA, w.storeB = dynamo.New(w.a.db, table), dynamo.New(w.b.db, table)
	w.client = &oauth.Client{ID: "cl_multiregion", RedirectURIs: []string{w.redirect}, Scopes: []string{"email"}}
	gA, gB := w.storeA, w.storeB
	if homeRouted {
		ra, err := regional.New(w.a.name, w.storeA, map[string]oauth.Store{w.b.name: w.storeB})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := regional.New(w.b.name, w.storeB, map[string]oauth.Store{w.a.name: w.storeA})
		if err != nil {
			t.Fatal(err)
		}
		// This simulation is about replication, not deadlines: a peer call cut short by the
		// 2 s default on a loaded machine would answer temporarily_unavailable instead of
		// revoking the replayed code's grant. The deadline has its own tests
		// (shared/store/regional deadline_test.go).
		ra.PeerTimeout, rb.PeerTimeout = time.Minute, time.Minute
		gA, gB = ra, rb
	}
	w.svcA, w.svcB = service(gA, w.a.name), service(gB, w.b.name)
	return w
}

func service(st oauth.Store, home string) *oauth.Service {
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &oauth.Service{Clients: st, Interactions: st, Grants: st, Replay: st, Clock: oauth.SystemClock{},
		Issuer: "https://auth.bank.example/v2/authentication/oauth2", Home: home, Log: discard,
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: 24 * time.Hour, Grant: 72 * time.Hour,
			Code: time.Minute, IDToken: time.Hour, Session: time.Hour, Request: 10 * time.Minute}}
}

// issueCodes has region a issue n codes (as its consent page does) and waits until they have
// been replicated to region b.
func (w *world) issueCodes(t *testing.T, n int) []string {
	t.Helper()
	now := time.Now().UTC()
	codes := make([]string, n)
	before := w.rep.copied(w.b.name)
	for i := range codes {
		codes[i] = oauth.NewSecret(oauth.PrefixCode + w.a.name + ".")
		g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: w.client.ID, UID: "u-1001",
			Scopes: oauth.Scopes{"email"}, AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(72 * time.Hour)}
		if err := w.storeA.CreateCode(context.Background(), oauth.Code{Hash: oauth.HashToken(codes[i]), Grant: g,
			RedirectURI: w.redirect, ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	w.waitReplicated(t, w.b.name, before+n)
	return codes
}

func (w *world) waitReplicated(t *testing.T, to string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for w.rep.copied(to) < n {
		if time.Now().After(deadline) {
			t.Fatalf("replication to %s: %d changes after 30 s, want %d", to, w.rep.copied(to), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until the replicator has had nothing to copy for three spans of two replication
// delays in a row: under the full suite DynamoDB Local's streams can pause for longer than one
// span, which made a single quiet span end the wait before the last deletions were copied.
func (w *world) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last, quiet := -1, 0
	for time.Now().Before(deadline) {
		n := w.rep.copied(w.a.name) + w.rep.copied(w.b.name)
		if n == last {
			if quiet++; quiet == 3 {
				return
			}
		} else {
			last, quiet = n, 0
		}
		time.Sleep(2 * replicationDelay)
	}
	t.Fatal("replication did not settle within a minute")
}

// outcome of presenting one code or refresh token in both regions at once.
type outcome struct {
	wins   int // token responses given
	tokens []*oauth.TokenResponse
}

// presentInBoth presents each secret to region a and region b at the same moment (2 × len
// requests racing) and returns, per secret, what both regions answered.
func presentInBoth(w *world, secrets []string, present func(svc *oauth.Service, secret string) (*oauth.TokenResponse, error)) []outcome {
	out := make([]outcome, len(secrets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, s := range secrets {
		for _, svc := range []*oauth.Service{w.svcA, w.svcB} {
			wg.Go(func() {
				<-start
				resp, err := present(svc, s)
				if err == nil {
					mu.Lock()
					out[i].wins++
					out[i].tokens = append(out[i].tokens, resp)
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return out
}

func (w *world) exchange(svc *oauth.Service, code string) (*oauth.TokenResponse, error) {
	return svc.ExchangeCode(context.Background(), w.client, oauth.CodeExchange{Code: code, RedirectURI: w.redirect})
}

func (w *world) refresh(svc *oauth.Service, rt string) (*oauth.TokenResponse, error) {
	return svc.Refresh(context.Background(), w.client, oauth.RefreshRequest{RefreshToken: rt})
}

// usable counts the access tokens of outs that still validate, in either region, once
// replication has settled.
func (w *world) usable(t *testing.T, outs []outcome) int {
	t.Helper()
	w.settle(t)
	n := 0
	for _, o := range outs {
		for _, tok := range o.tokens {
			_, errA := w.svcA.ValidateAccessToken(context.Background(), tok.AccessToken, "")
			_, errB := w.svcB.ValidateAccessToken(context.Background(), tok.AccessToken, "")
			if errA == nil || errB == nil {
				n++
			}
		}
	}
	return n
}

// TestSimulation_WithoutHomeRoutingACodeIsExchangedInBothRegions shows the hazard the design
// closes: with every write sent to the local replica, a code presented in two regions within
// the replication delay is consumed once in each, and both presenters get tokens; neither
// region sees a replay, so nothing is revoked.
func TestSimulation_WithoutHomeRoutingACodeIsExchangedInBothRegions(t *testing.T) {
	w := newWorld(t, false, replicationDelay)
	codes := w.issueCodes(t, pairs)
	outs := presentInBoth(w, codes, w.exchange)
	double := 0
	for _, o := range outs {
		if o.wins == 2 {
			double++
		}
	}
	t.Logf("plain regional writes: %d of %d codes presented in both regions were exchanged twice; %d access tokens usable after replication",
		double, pairs, w.usable(t, outs))
	if double == 0 {
		t.Fatalf("no code was exchanged twice: the simulation does not reproduce the replication window")
	}
}

// TestSimulation_HomeRoutedCodesAreExchangedAtMostOnce: with the single-use writes sent to the
// code's home, a code presented in both regions at once is consumed once; the other
// presentation is a replay, which revokes the grant, so no presenter keeps usable tokens
// (exactly as a replay within one region, RFC 6749 4.1.2).
func TestSimulation_HomeRoutedCodesAreExchangedAtMostOnce(t *testing.T) {
	w := newWorld(t, true, replicationDelay)
	codes := w.issueCodes(t, pairs)
	outs := presentInBoth(w, codes, w.exchange)
	for i, o := range outs {
		if o.wins > 1 {
			t.Errorf("code %d was exchanged %d times", i, o.wins)
		}
	}
	n := w.usable(t, outs)
	t.Logf("home-routed: %d codes each presented in both regions at once; %d access tokens usable after replication", pairs, n)
	if n != 0 {
		t.Errorf("%d access tokens still usable after %d codes were each presented twice: the replays must revoke", n, pairs)
	}
	// A code presented only once, in the region that did not issue it, is exchanged normally.
	more := w.issueCodes(t, 1)
	if _, err := w.exchange(w.svcB, more[0]); err != nil {
		t.Fatalf("a code of region a exchanged once in region b: %v", err)
	}
}

// exchangeOnce gives n refresh tokens, each from one code exchanged in region a, replicated to b.
func (w *world) refreshTokens(t *testing.T, n int) []string {
	t.Helper()
	codes := w.issueCodes(t, n)
	before := w.rep.copied(w.b.name)
	rts := make([]string, n)
	for i, c := range codes {
		resp, err := w.exchange(w.svcA, c)
		if err != nil {
			t.Fatal(err)
		}
		rts[i] = resp.RefreshToken
	}
	// Each issuance writes code, grant and two tokens: wait until b has them all.
	w.waitReplicated(t, w.b.name, before+4*n)
	return rts
}

// TestSimulation_WithoutHomeRoutingARefreshTokenIsSpentInBothRegions: the same hazard for a
// refresh token: two rotations from one token, and no reuse detected.
func TestSimulation_WithoutHomeRoutingARefreshTokenIsSpentInBothRegions(t *testing.T) {
	w := newWorld(t, false, replicationDelay)
	outs := presentInBoth(w, w.refreshTokens(t, pairs), w.refresh)
	double := 0
	for _, o := range outs {
		if o.wins == 2 {
			double++
		}
	}
	t.Logf("plain regional writes: %d of %d refresh tokens presented in both regions were spent twice", double, pairs)
	if double == 0 {
		t.Fatalf("no refresh token was spent twice: the simulation does not reproduce the replication window")
	}
}

// TestSimulation_HomeRoutedRefreshTokensAreSpentAtMostOnce: with home routing, a refresh token
// presented in both regions at once behaves as two racing presentations in one region: at most
// one rotation; the other presentation is refused, and revokes the grant when it comes after
// the rotation has completed (reuse, RFC 9700 4.14.2). Never two usable rotations.
func TestSimulation_HomeRoutedRefreshTokensAreSpentAtMostOnce(t *testing.T) {
	w := newWorld(t, true, replicationDelay)
	outs := presentInBoth(w, w.refreshTokens(t, pairs), w.refresh)
	wins := 0
	for i, o := range outs {
		if o.wins > 1 {
			t.Errorf("refresh token %d was spent %d times", i, o.wins)
		}
		wins += o.wins
	}
	usable := w.usable(t, outs)
	t.Logf("home-routed: %d of %d refresh tokens presented in both regions rotated once; %d rotations usable after replication (the others were revoked: their second presentation came after the rotation had completed, which is reuse)",
		wins, pairs, usable)
	if usable > wins {
		t.Errorf("%d rotations usable, more than the %d that succeeded", usable, wins)
	}
}

// TestSimulation_AnAccessTokenWorksInTheOtherRegionBeforeItIsReplicated: a token issued at its
// home a moment ago is found at its home when the local replica does not have it yet.
func TestSimulation_AnAccessTokenWorksInTheOtherRegionBeforeItIsReplicated(t *testing.T) {
	// A long delay, so that the token is surely not in region b yet when it is used there.
	w := newWorld(t, true, 10*time.Second)
	codes := w.issueCodes(t, 1)
	resp, err := w.exchange(w.svcA, codes[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.storeB.GetToken(context.Background(), oauth.HashToken(resp.AccessToken), time.Now()); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("region b's replica has the token already (%v): the test needs it unreplicated", err)
	}
	if _, err := w.svcB.ValidateAccessToken(context.Background(), resp.AccessToken, ""); err != nil {
		t.Fatalf("region b refused a token its home issued a moment ago: %v", err)
	}
}
