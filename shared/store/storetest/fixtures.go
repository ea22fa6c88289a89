package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Durations of the fixtures: the suite's own, not the service's defaults.
const (
	codeTTL    = 5 * time.Minute
	accessTTL  = time.Hour
	refreshTTL = 24 * time.Hour
	grantTTL   = 30 * 24 * time.Hour
	// millis gives stored non-expiry times a sub-second part, to prove millisecond precision.
	millis = 123 * time.Millisecond
)

// start is the suite's "now": the wall clock truncated to the second, so that items the suite
// writes are not already past a real backend's TTL, while expiry instants stay whole seconds.
func start() time.Time { return time.Now().UTC().Truncate(time.Second) }

// id returns a random identifier, so that adapters sharing one table across sub-tests never
// see another sub-test's items.
func id(prefix string) string { return oauth.NewID(prefix) }

// hash returns the store key of a fresh random secret.
func hash(prefix string) string { return oauth.HashToken(oauth.NewSecret(prefix)) }

// newGrant returns a grant of uid to clientID with every field set.
func newGrant(uid, clientID string, now time.Time) oauth.Grant {
	return oauth.Grant{
		ID:                   id(oauth.PrefixGrant),
		ClientID:             clientID,
		UID:                  uid,
		Scopes:               oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeEmail, oauth.ScopeTransfersWriteDotted},
		CompanyProfileID:     "cp-" + uid,
		CompanyUserID:        "cu-" + uid,
		AuthTime:             now.Add(-time.Minute + millis),
		Nonce:                "n-0S6_WzA2Mj",
		Claims:               oauth.Claims{Email: "ada@example.com", EmailVerified: true, UpdatedAt: 1700000000},
		CertThumbprint:       "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2",
		AuthorizationDetails: json.RawMessage(`[{"type":"account_information","permissions":["balances"]}]`),
		CreatedAt:            now.Add(millis),
		ExpiresAt:            now.Add(grantTTL),
	}
}

// detailsOfSize is an authorization_details value (a JSON array) of exactly n bytes.
func detailsOfSize(n int) json.RawMessage {
	const head, tail = `[{"type":"payment_initiation","creditorName":"`, `"}]`
	return json.RawMessage(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// anyGrant returns a grant of a random user to a random client.
func anyGrant(now time.Time) oauth.Grant { return newGrant(id("u_"), id(oauth.PrefixClientID), now) }

// newCode returns a code that starts grant g.
func newCode(g oauth.Grant, now time.Time) oauth.Code {
	return oauth.Code{
		Hash:          hash(oauth.PrefixCode),
		Grant:         g,
		RedirectURI:   "https://client.example.com/cb",
		CodeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		ExpiresAt:     now.Add(codeTTL),
	}
}

// newToken returns a token of kind for grant g issued at now.
func newToken(kind string, g oauth.Grant, now time.Time) oauth.Token {
	ttl := accessTTL
	prefix := oauth.PrefixAccess
	if kind == oauth.KindRefresh {
		ttl, prefix = refreshTTL, oauth.PrefixRefresh
	}
	return oauth.Token{
		Hash:      hash(prefix),
		Kind:      kind,
		Scopes:    g.Scopes,
		IssuedAt:  now.Add(millis),
		ExpiresAt: now.Add(ttl),
		Grant:     g,
	}
}

// firstIssue returns the issuance that exchanges a code for grant g.
func firstIssue(g oauth.Grant, now time.Time) oauth.Issue {
	a := newToken(oauth.KindAccess, g, now)
	r := newToken(oauth.KindRefresh, g, now)
	r.Live = []string{a.Hash}
	return oauth.Issue{Grant: g, Access: a, Refresh: r, FromCode: true, Tokens: []string{a.Hash, r.Hash}}
}

// nextIssue returns the refresh issuance that follows prev, built as the domain builds it
// (oauth.Service.Refresh): it spends prev's refresh token (Spent), the new refresh token's Live
// holds the new access token and the previous one, any older access token is retired, and the
// grant's token list is the live access tokens and the new refresh token.
func nextIssue(prev oauth.Issue, now time.Time) oauth.Issue {
	g := prev.Grant
	a := newToken(oauth.KindAccess, g, now)
	r := newToken(oauth.KindRefresh, g, now)
	var live, retire []string
	if len(prev.Refresh.Live) > 0 {
		live, retire = prev.Refresh.Live[:1], prev.Refresh.Live[1:]
	}
	r.Live = append([]string{a.Hash}, live...)
	tokens := append(slices.Clone(r.Live), r.Hash)
	return oauth.Issue{Grant: g, Access: a, Refresh: r, Retire: retire, Tokens: tokens, Spent: prev.Refresh.Hash}
}

// refresh writes the refresh that follows prev (nextIssue) at now, spending prev's refresh
// token, and returns it.
func refresh(t *testing.T, s oauth.Store, prev oauth.Issue, now time.Time) oauth.Issue {
	t.Helper()
	next := nextIssue(prev, now)
	mustNil(t, s.IssueTokens(t.Context(), next, now), "refresh")
	return next
}

// --- assertions ---

// mustNil fails the test at once on an unexpected error.
func mustNil(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

// wantErr checks that err matches target (errors.Is).
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

// wantEqual compares got and want at the suite's precision (see the package comment).
func wantEqual(t *testing.T, got, want any, what string) {
	t.Helper()
	g, w := normalize(reflect.ValueOf(got)), normalize(reflect.ValueOf(want))
	if !reflect.DeepEqual(g.Interface(), w.Interface()) {
		t.Errorf("%s:\n got: %+v\nwant: %+v", what, g.Interface(), w.Interface())
	}
}

var timeType = reflect.TypeOf(time.Time{})

// normalize returns a deep copy of v with every time truncated to the millisecond in UTC and
// every empty slice or map made nil, so that backends of different precision and encoding
// compare equal when they keep what the contract asks.
func normalize(v reflect.Value) reflect.Value {
	if !v.IsValid() {
		return v
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			tm := v.Interface().(time.Time)
			if !tm.IsZero() {
				tm = time.UnixMilli(tm.UnixMilli()).UTC()
			} else {
				tm = time.Time{}
			}
			return reflect.ValueOf(tm)
		}
		out := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if !out.Field(i).CanSet() {
				panic(fmt.Sprintf("storetest: cannot compare unexported field %s.%s", v.Type(), v.Type().Field(i).Name))
			}
			out.Field(i).Set(normalize(v.Field(i)))
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(normalize(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), normalize(it.Value()))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(normalize(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(normalize(v.Elem()))
		return out
	default:
		return v
	}
}
