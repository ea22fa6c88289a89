// Package storetest is the contract every adapter of oauth.Store must keep: one conformance
// suite (in the manner of Dex's storage/conformance) that the embedded store and the DynamoDB
// store both run from their own tests, so the two can never drift apart.
//
// An adapter's test calls Run with a constructor of fresh, empty stores:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) oauth.Store { return openTempStore(t) })
//	}
//
// What the suite expects of a store beyond the doc comments of shared/oauth/store.go:
//
//   - Time precision: stored times come back equal to the millisecond at least (the suite
//     compares every time.Time truncated to the millisecond, in UTC). Expiry instants used by
//     the suite are whole seconds, so stores that compare expiry in epoch seconds pass too.
//   - Expiry rule: an item is live while now is before its ExpiresAt; at ExpiresAt it is gone
//     (ErrNotFound), whether or not the backend has deleted it yet.
//   - Nil and empty slices and maps are equal (backends differ in how they store "none").
//   - A RevokeGrant tombstone blocks IssueTokens for at least an hour after `now`, long enough
//     to outlive any code exchange in flight.
//   - IssueTokens with FromCode for a grant that already exists (and is live) fails with
//     ErrAlreadyExists or ErrRevoked and writes nothing.
//   - UpdateUser refuses an fn that changes the uid or the username (any error) and writes
//     nothing, since the username index would otherwise go stale.
//   - A code or refresh token presented with another client's id is ErrNotFound even when it
//     was used or spent before (ErrUsed would let one client have another's grant revoked), and
//     it stays as it was for its own client.
//   - GetGrant of a tombstone returns ErrNotFound or a record with Revoked set; both are
//     accepted. The Tokens of a revoked grant's record are not checked.
//   - UpdateKeys reads the set, calls fn without holding any lock (fn runs once per call and
//     may itself call the store), then writes only if the version is unchanged, setting
//     Version to the read version plus one; on a lost race it returns ErrConflict.
//   - UpdateClient and UpdateUser may retry fn internally or return ErrConflict on a lost race,
//     but must never lose an update that returned nil. An error from fn is returned (errors.Is
//     finds it) and nothing is written.
//   - Deleting an unknown client or user returns nil or ErrNotFound; both are accepted.
//
// Sub-tests run one after another, each on its own fresh, empty store from newStore (the
// key-registry and empty-listing tests rely on it being empty). Ids, hashes and usernames are
// random all the same, so a backend whose "fresh store" lives beside old data in a shared
// service never sees a collision.
package storetest

import (
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// test is one sub-test of the suite: a behaviour, named after what it proves, run against a
// fresh store.
type test struct {
	name string
	run  func(t *testing.T, s oauth.Store)
}

// Run runs every sub-test of the suite, each against a fresh, empty store from newStore.
// newStore should register any cleanup it needs with t.Cleanup. The suite passes `now` to
// every call and never sleeps; its concurrency sub-tests start up to 50 goroutines at once.
func Run(t *testing.T, newStore func(t *testing.T) oauth.Store) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"Codes", codeTests},
		{"IssueTokens", issueTests},
		{"RefreshTokens", refreshTests},
		{"RefreshRetry", retryTests},
		{"RefreshKeep", keepTests},
		{"Tokens", tokenTests},
		{"Grants", grantTests},
		{"ClientOnlyGrants", clientOnlyTests},
		{"Clients", clientTests},
		{"Users", userTests},
		{"AuthRequests", authRequestTests},
		{"Sessions", sessionTests},
		{"Failures", failureTests},
		{"Keys", keyTests},
		{"NonceKeys", nonceKeyTests},
		{"PairwiseSalt", pairwiseSaltTests},
		{"Concurrency", concurrencyTests},
		{"PaymentGrants", paymentTests},
		{"GrantRewrites", rewriteTests},
		{"Attempts", attemptTests},
		{"Replay", replayTests},
		{"OnceWithTheWrite", onceTests},
		{"Factors", factorTests},
		{"Registration", registrationTests},
		{"Backchannel", backchannelTests},
		{"Health", []test{{"CheckWriteSucceedsAndChangesNothingElse", testCheckWrite}}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, newStore(t))
				})
			}
		})
	}
}
