package e2e

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// setRotation sets the acceptance client's refresh token rotation, as `authctl clients update
// --refresh-token-rotation` does.
func (e *env) setRotation(t *testing.T, rotation string) {
	t.Helper()
	e.updateClient(t, clientID, func(c *oauth.Client) error { c.RefreshTokenRotation = rotation; return nil })
}

// TestFAPI_RefreshTokenDoesNotRotateUnlessTheClientOptsIn: a FAPI 2.0 client's refresh token
// is not rotated (FAPI 2.0 Security Profile (Final) 5.3.2.1): each refresh answers with the same
// refresh token and a new access token, the token keeps working, and the grant keeps at most
// two live access tokens (the older ones are revoked as in a rotation). With
// --refresh-token-rotation on and a retry window the same client's token rotates again.
func TestFAPI_RefreshTokenDoesNotRotateUnlessTheClientOptsIn(t *testing.T) {
	m := newMTLSEnv(t)
	c := m.fapiMTLSClient(t, "fapi-keep", "PS256")
	conf := m.fapiConfig(c)
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, m.client(&m.certA))
	verifier := oauth2.GenerateVerifier()
	loc := m.fapiAuthorize(t, conf.AuthCodeURL("st-keep", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("redirect_uri", redirectURI)))
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	refresh := func() apiResponse {
		return apiCall(t, m.client(&m.certA), http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "",
			url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {c.ID}})
	}
	valid := func(at string) bool {
		return apiCall(t, m.client(&m.certA), http.MethodGet, m.tlsSrv.URL+httpapi.PathUserinfo, "Bearer "+at, nil).status == http.StatusOK
	}
	access := []string{tok.AccessToken}
	for i := range 3 {
		r := refresh()
		if r.status != http.StatusOK {
			t.Fatalf("refresh %d of the same refresh token: %d %s", i+1, r.status, r.raw)
		}
		if r.json["refresh_token"] != tok.RefreshToken {
			t.Fatalf("refresh %d rotated the refresh token of a FAPI 2.0 client", i+1)
		}
		at, _ := r.json["access_token"].(string)
		if at == "" || at == access[len(access)-1] {
			t.Fatalf("refresh %d gave no new access token: %s", i+1, r.raw)
		}
		access = append(access, at)
	}
	for i, at := range access {
		if want := i >= len(access)-2; valid(at) != want {
			t.Errorf("access token %d of %d valid %v, want %v (the grant keeps the two newest)", i+1, len(access), !want, want)
		}
	}

	// The client opts into rotation, with the retry window FAPI 2.0 then requires.
	m.updateClient(t, c.ID, func(c *oauth.Client) error {
		c.RefreshTokenRotation, c.RefreshReuseInterval = oauth.RotationOn, 30*time.Second
		return c.CheckProfile()
	})
	r := refresh()
	if next, _ := r.json["refresh_token"].(string); r.status != http.StatusOK || next == "" || next == tok.RefreshToken {
		t.Fatalf("refresh of a client that opted into rotation: %d %s, want a new refresh token", r.status, r.raw)
	}
}

// TestRefresh_RacingRefreshesOfAKeptTokenSucceedOrFailCleanly: 50 racing refreshes of one
// refresh token that does not rotate (the acceptance client with rotation off), on both
// stores: each gets tokens or 503 temporarily_unavailable (its write lost a race and changed
// nothing), never anything else; the token works afterwards; the grant keeps at most two live
// access tokens; and revoking the refresh token ends every token the racers got.
func TestRefresh_RacingRefreshesOfAKeptTokenSucceedOrFailCleanly(t *testing.T) {
	for name, build := range map[string]func(t *testing.T) *env{
		"embedded": newEnv,
		"dynamodb": func(t *testing.T) *env { e, _, _ := newAWSEnv(t); return e },
	} {
		t.Run(name, func(t *testing.T) {
			e := build(t)
			e.setRotation(t, oauth.RotationOff)
			tok := e.tokens(t, "openid")
			rt := tok["refresh_token"].(string)
			const racers = 50
			type answer struct {
				status int
				body   map[string]any
			}
			answers := make([]answer, racers)
			var ready, done sync.WaitGroup
			gate := make(chan struct{})
			ready.Add(racers)
			done.Add(racers)
			for i := range racers {
				go func() {
					defer done.Done()
					ready.Done()
					<-gate
					answers[i].status, answers[i].body = e.refresh(t, rt, nil)
				}()
			}
			ready.Wait()
			close(gate)
			done.Wait()
			access := []string{tok["access_token"].(string)}
			won := 0
			for i, a := range answers {
				switch {
				case a.status == http.StatusOK:
					won++
					if a.body["refresh_token"] != rt {
						t.Errorf("racer %d: the kept refresh token rotated", i)
					}
					access = append(access, a.body["access_token"].(string))
				case a.status == http.StatusServiceUnavailable && a.body["error"] == "temporarily_unavailable":
				default:
					t.Errorf("racer %d: %d %v, want 200 or 503 temporarily_unavailable", i, a.status, a.body)
				}
			}
			if won == 0 {
				t.Fatal("no racing refresh succeeded")
			}
			live := 0
			for _, at := range access {
				if e.tokenValid(at) {
					live++
				}
			}
			if live > 2 {
				t.Errorf("%d live access tokens after %d refreshes, want at most 2", live, won)
			}
			st, body := e.refresh(t, rt, nil)
			if st != http.StatusOK {
				t.Fatalf("the kept refresh token after the race: %d %v", st, body)
			}
			access = append(access, body["access_token"].(string))
			t.Logf("%d of %d racing refreshes got tokens, the others 503", won, racers)

			if st := e.revoke(t, httpapi.PathRevoke, rt, nil); st != http.StatusOK {
				t.Fatalf("revoke: %d", st)
			}
			for i, at := range access {
				if e.tokenValid(at) {
					t.Errorf("access token %d survived the revocation of its refresh token", i)
				}
			}
			if st, body := e.refresh(t, rt, nil); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
				t.Fatalf("the revoked refresh token: %d %v, want invalid_grant", st, body)
			}
		})
	}
}
