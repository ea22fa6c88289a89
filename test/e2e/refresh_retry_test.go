package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// retryWindow is the refresh retry window the tests give the acceptance client.
const retryWindow = 30 * time.Second

// retryEnvs runs a test on the embedded store and on DynamoDB Local (skipped when it is not
// running), with the acceptance client's refresh retry window set to window.
func retryEnvs(t *testing.T, window time.Duration, run func(t *testing.T, e *env)) {
	for name, build := range map[string]func(t *testing.T) *env{
		"embedded": newEnv,
		"dynamodb": func(t *testing.T) *env { e, _, _ := newAWSEnv(t); return e },
	} {
		t.Run(name, func(t *testing.T) {
			e := build(t)
			e.setRetryWindow(t, window)
			run(t, e)
		})
	}
}

// setRetryWindow sets the acceptance client's RefreshReuseInterval, as `authctl clients update
// --refresh-reuse-interval` does.
func (e *env) setRetryWindow(t *testing.T, window time.Duration) {
	t.Helper()
	e.updateClient(t, clientID, func(c *oauth.Client) error { c.RefreshReuseInterval = window; return nil })
}

// updateClient changes client id in the store and drops it from the client cache, as
// `authctl clients update` does; an error of change fails the test.
func (e *env) updateClient(t *testing.T, id string, change func(*oauth.Client) error) {
	t.Helper()
	err := e.app.Store.UpdateClient(context.Background(), id, func(c oauth.Client) (oauth.Client, error) {
		return c, change(&c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if cache, ok := e.app.Service.Clients.(*oauth.ClientCache); ok {
		cache.Forget(id)
	}
}

// refreshOK refreshes and fails the test unless it succeeded.
func (e *env) refreshOK(t *testing.T, rt string) map[string]any {
	t.Helper()
	st, body := e.refresh(t, rt, nil)
	if st != http.StatusOK {
		t.Fatalf("refresh: %d %v", st, body)
	}
	return body
}

// refreshRefused refreshes and fails the test unless the answer is invalid_grant.
func (e *env) refreshRefused(t *testing.T, rt, what string) {
	t.Helper()
	if st, body := e.refresh(t, rt, nil); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("%s: %d %v, want 400 invalid_grant", what, st, body)
	}
}

// grantLive reports whether the refresh token rt (never used) still refreshes, which spends
// it; it returns the new refresh token.
func (e *env) grantLive(t *testing.T, rt string) (string, bool) {
	t.Helper()
	st, body := e.refresh(t, rt, nil)
	if st != http.StatusOK {
		return "", false
	}
	return body["refresh_token"].(string), true
}

// losingTransport delivers requests to the server but, while lose is set, drops the answer
// to a refresh and keeps it: the network failure a retry window is for.
type losingTransport struct {
	mu   sync.Mutex
	lose bool
	lost map[string]any
}

func (l *losingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || !l.lose {
		return resp, err
	}
	l.lose = false
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &l.lost); err != nil {
		return nil, err
	}
	return nil, errors.New("connection reset (the test drops this answer)")
}

// TestRefreshRetry_LostResponseRetriedWithinTheWindow: golang.org/x/oauth2 refreshes, the
// answer is lost on the way back, and the library's next Token() presents the same refresh
// token again: within the client's window it gets a new pair, the grant lives on, and the
// tokens of the lost answer no longer work (an attacker who caught them loses them).
func TestRefreshRetry_LostResponseRetriedWithinTheWindow(t *testing.T) {
	retryEnvs(t, retryWindow, func(t *testing.T, e *env) {
		net := &losingTransport{}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: net})
		conf := e.oauth2Config("openid", "email")
		tok, err := conf.Exchange(ctx, e.authorize(t, conf.AuthCodeURL("s")).Query().Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		tok.Expiry = time.Now().Add(-time.Minute) // make the library refresh
		net.mu.Lock()
		net.lose = true
		net.mu.Unlock()
		e.clock.Advance(2 * time.Second)
		if _, err := conf.TokenSource(ctx, tok).Token(); err == nil {
			t.Fatal("the refresh whose answer was dropped succeeded")
		}
		lostAccess, _ := net.lost["access_token"].(string)
		lostRefresh, _ := net.lost["refresh_token"].(string)
		if lostAccess == "" || lostRefresh == "" {
			t.Fatalf("the dropped answer carried no tokens: %v", net.lost)
		}
		e.clock.Advance(retryWindow - 3*time.Second) // still inside the window of the spend
		fresh, err := conf.TokenSource(ctx, tok).Token()
		if err != nil {
			t.Fatalf("retry within the window: %v", err)
		}
		if fresh.RefreshToken == tok.RefreshToken || fresh.RefreshToken == lostRefresh || fresh.AccessToken == lostAccess {
			t.Fatal("the retry did not issue a new pair")
		}
		if !e.tokenValid(fresh.AccessToken) {
			t.Fatal("the retry's access token does not work")
		}
		if e.tokenValid(lostAccess) {
			t.Fatal("the lost answer's access token still works after the retry")
		}
		e.refreshRefused(t, lostRefresh, "the lost answer's refresh token")
		if !e.tokenValid(fresh.AccessToken) {
			t.Fatal("presenting the retired refresh token revoked the grant")
		}
		if _, ok := e.grantLive(t, fresh.RefreshToken); !ok {
			t.Fatal("the retry's refresh token does not refresh")
		}
		if !strings.Contains(e.logs.String(), `"event":"refresh_retry"`) {
			t.Fatal("no audit event for the retry")
		}
	})
}

// TestRefreshRetry_AfterTheWindowRevokes: the same repeat one second after the window is reuse,
// and the whole grant goes, the lost answer's tokens with it.
func TestRefreshRetry_AfterTheWindowRevokes(t *testing.T) {
	retryEnvs(t, retryWindow, func(t *testing.T, e *env) {
		first := e.tokens(t, "openid")
		rt := first["refresh_token"].(string)
		lost := e.refreshOK(t, rt)
		e.clock.Advance(retryWindow + time.Second)
		e.refreshRefused(t, rt, "repeat after the window")
		if e.tokenValid(lost["access_token"].(string)) {
			t.Fatal("the grant's access token still works after reuse")
		}
		if _, ok := e.grantLive(t, lost["refresh_token"].(string)); ok {
			t.Fatal("the grant survived reuse after the window")
		}
	})
}

// TestRefreshRetry_WindowOffRevokesAtOnce: a client without a window (the default) loses the
// grant on the first repeat, one second after the spend.
func TestRefreshRetry_WindowOffRevokesAtOnce(t *testing.T) {
	retryEnvs(t, 0, func(t *testing.T, e *env) {
		rt := e.tokens(t, "openid")["refresh_token"].(string)
		lost := e.refreshOK(t, rt)
		e.clock.Advance(time.Second)
		e.refreshRefused(t, rt, "repeat without a window")
		if _, ok := e.grantLive(t, lost["refresh_token"].(string)); ok {
			t.Fatal("the grant survived reuse without a window")
		}
	})
}

// TestRefreshRetry_AfterTheSuccessorWasUsedRevokes: a repeat within the window after the
// client used the refresh token of the answer (so it was not lost) is reuse.
func TestRefreshRetry_AfterTheSuccessorWasUsedRevokes(t *testing.T) {
	retryEnvs(t, retryWindow, func(t *testing.T, e *env) {
		rt := e.tokens(t, "openid")["refresh_token"].(string)
		next := e.refreshOK(t, rt)
		after := e.refreshOK(t, next["refresh_token"].(string))
		e.refreshRefused(t, rt, "repeat after the successor was used")
		if _, ok := e.grantLive(t, after["refresh_token"].(string)); ok {
			t.Fatal("the grant survived a repeat after its successor was used")
		}
	})
}

// TestRefreshRetry_SecondRetryAfterTheRetrysTokenWasUsedRevokes: one retry per spend; a
// repeat after the retry's refresh token was used is reuse, inside the window too.
func TestRefreshRetry_SecondRetryAfterTheRetrysTokenWasUsedRevokes(t *testing.T) {
	retryEnvs(t, retryWindow, func(t *testing.T, e *env) {
		rt := e.tokens(t, "openid")["refresh_token"].(string)
		e.refreshOK(t, rt) // lost
		retried := e.refreshOK(t, rt)
		after := e.refreshOK(t, retried["refresh_token"].(string))
		e.clock.Advance(time.Second)
		e.refreshRefused(t, rt, "second retry after the first retry's token was used")
		if _, ok := e.grantLive(t, after["refresh_token"].(string)); ok {
			t.Fatal("the grant survived a second retry after the first retry's token was used")
		}
	})
}

// TestRefreshRetry_RacingRetriesOneWins: 50 retries of one spent token at once: exactly one
// gets tokens, the others invalid_grant, and the grant stays live for the winner.
func TestRefreshRetry_RacingRetriesOneWins(t *testing.T) {
	retryEnvs(t, retryWindow, func(t *testing.T, e *env) {
		rt := e.tokens(t, "openid")["refresh_token"].(string)
		e.refreshOK(t, rt) // lost
		const racers = 50
		status := make([]int, racers)
		bodies := make([]map[string]any, racers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				status[i], bodies[i] = e.refresh(t, rt, nil)
			}()
		}
		close(gate)
		wg.Wait()
		var winner string
		for i, st := range status {
			switch {
			case st == http.StatusOK && winner == "":
				winner = bodies[i]["refresh_token"].(string)
			case st == http.StatusOK:
				t.Errorf("racer %d also succeeded", i)
			case st != http.StatusBadRequest || bodies[i]["error"] != "invalid_grant":
				t.Errorf("racer %d: %d %v, want 400 invalid_grant", i, st, bodies[i])
			}
		}
		if winner == "" {
			t.Fatal("no racing retry succeeded")
		}
		if _, ok := e.grantLive(t, winner); !ok {
			t.Fatal("the racing retries revoked the grant")
		}
	})
}

// TestRefreshRetry_AnotherClientIsNotARetry: the spent token presented by another client is
// invalid_grant and costs the owner nothing: its own retry still works.
func TestRefreshRetry_AnotherClientIsNotARetry(t *testing.T) {
	retryEnvs(t, retryWindow, func(t *testing.T, e *env) {
		rt := e.tokens(t, "openid")["refresh_token"].(string)
		e.refreshOK(t, rt) // lost
		st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt},
			"client_id": {otherID}, "client_secret": {otherSecret}}, false, false)
		if st != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("other client's repeat: %d %v", st, body)
		}
		retried := e.refreshOK(t, rt)
		if _, ok := e.grantLive(t, retried["refresh_token"].(string)); !ok {
			t.Fatal("the owner's retry did not leave a live grant")
		}
	})
}
