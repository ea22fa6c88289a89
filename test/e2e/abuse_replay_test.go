package e2e

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// gatedIssue holds the first code exchange's IssueTokens until the test releases it, so replays
// can be sent while that exchange is in flight.
type gatedIssue struct {
	oauth.GrantStore
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedIssue) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	if in.FromCode {
		g.once.Do(func() {
			close(g.entered)
			<-g.release
		})
	}
	return g.GrantStore.IssueTokens(ctx, in, now)
}

// exchangeResult is one presentation of a code.
type exchangeResult struct {
	status int
	body   map[string]any
}

// presentations exchanges code n times at once.
func presentations(t *testing.T, e *env, code string, n int) []exchangeResult {
	out := make([]exchangeResult, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			out[i].status, out[i].body = e.exchange(t, code, nil)
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// checkNothingSurvives: every presentation got tokens or invalid_grant, at most one got
// tokens, and no token any of them got still works.
func checkNothingSurvives(t *testing.T, e *env, results []exchangeResult) {
	t.Helper()
	wins := 0
	for i, r := range results {
		switch {
		case r.status == 200:
			wins++
			if e.tokenValid(r.body["access_token"].(string)) {
				t.Errorf("presentation %d: the access token of a replayed code still works", i)
			}
			if st, _ := e.refresh(t, r.body["refresh_token"].(string), nil); st == 200 {
				t.Errorf("presentation %d: the refresh token of a replayed code still works", i)
			}
		case r.status != 400 || r.body["error"] != "invalid_grant":
			t.Errorf("presentation %d answered %d (error %v), want 200 or invalid_grant", i, r.status, r.body["error"])
		}
	}
	if wins > 1 {
		t.Errorf("%d presentations of one code got tokens", wins)
	}
}

// TestCode_ReplayAtAnyMomentRevokes: a code presented more than once leaves no usable token,
// whether the replays race the first exchange from the start, arrive while it is in flight
// (after its code was consumed, before its tokens are written), or come after it completed; on
// the embedded store and on DynamoDB.
func TestCode_ReplayAtAnyMomentRevokes(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		t.Run("together", func(t *testing.T) {
			checkNothingSurvives(t, e, presentations(t, e, e.code(t, nil), 50))
		})
		t.Run("during", func(t *testing.T) {
			code := e.code(t, nil)
			g := &gatedIssue{GrantStore: e.app.Service.Grants, entered: make(chan struct{}), release: make(chan struct{})}
			e.app.Service.Grants = g
			defer func() { e.app.Service.Grants = g.GrantStore }()
			first := make(chan exchangeResult, 1)
			go func() {
				var r exchangeResult
				r.status, r.body = e.exchange(t, code, nil)
				first <- r
			}()
			<-g.entered
			replays := presentations(t, e, code, 50)
			close(g.release)
			r := <-first
			if r.status != 400 || r.body["error"] != "invalid_grant" {
				t.Errorf("the in-flight first exchange answered %d (error %v), want invalid_grant", r.status, r.body["error"])
			}
			checkNothingSurvives(t, e, append(replays, r))
		})
		t.Run("after", func(t *testing.T) {
			code := e.code(t, nil)
			st, body := e.exchange(t, code, url.Values{})
			if st != 200 {
				t.Fatalf("first exchange answered %d %v", st, body)
			}
			checkNothingSurvives(t, e, append(presentations(t, e, code, 50), exchangeResult{st, body}))
		})
	})
}
