package e2e

import (
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/config"
)

// TestAudit_RacingTokenRequestsLoseNoLineAndKeepEachRequestsOrder: 50 code exchanges and 50
// replays of spent codes, all racing, through the local server's audit sink (AUTH_AUDIT_LOG, a
// file): when the last answer has arrived, the file holds every line, each whole JSON, once:
// grant_issued for each exchanged grant, and for each replayed code code_reuse_detected then
// grant_revoked of its grant, in that order. The lines are written before the answer
// (docs/benchmarks.md, "Audit lines on the response path"), so none is queued when the
// process stops or, in Lambda, is frozen.
func TestAudit_RacingTokenRequestsLoseNoLineAndKeepEachRequestsOrder(t *testing.T) {
	const n = 50
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvAuditLog: auditFile}})

	spent := make([]string, n)
	for i := range spent {
		spent[i] = e.code(t, nil)
		if st, body := e.exchange(t, spent[i], nil); st != http.StatusOK {
			t.Fatalf("setup exchange: %d %v", st, body)
		}
	}
	fresh := make([]string, n)
	for i := range fresh {
		fresh[i] = e.code(t, nil)
	}
	before := auditLines(t, auditFile)
	spentGrants := map[string]bool{}
	for _, l := range before {
		if l["event"] == "grant_issued" {
			spentGrants[l["grant_id"].(string)] = true
		}
	}
	if len(spentGrants) != n {
		t.Fatalf("setup wrote %d grant_issued lines, want %d", len(spentGrants), n)
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	statuses := make([]int, 2*n)
	for i, code := range append(slices.Clone(fresh), spent...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], _ = e.exchange(t, code, nil)
		}()
	}
	close(start)
	wg.Wait()
	for i, st := range statuses {
		if want := map[bool]int{true: http.StatusOK, false: http.StatusBadRequest}[i < n]; st != want {
			t.Fatalf("request %d answered %d, want %d", i, st, want)
		}
	}

	// Read as soon as the last answer is in: nothing waits to be written.
	after := auditLines(t, auditFile)
	if len(after) < len(before) {
		t.Fatalf("the audit file shrank from %d to %d lines", len(before), len(after))
	}
	events := map[string][]string{} // grant id -> its events, in file order
	for _, l := range after[len(before):] {
		if l["log"] != "audit" {
			t.Fatalf("not an audit line: %v", l)
		}
		id, _ := l["grant_id"].(string)
		events[id] = append(events[id], l["event"].(string))
	}
	issued, reused := 0, 0
	for id, evs := range events {
		switch {
		case spentGrants[id]:
			if !slices.Equal(evs, []string{"code_reuse_detected", "grant_revoked"}) {
				t.Errorf("replayed code's grant %s: events %v, want code_reuse_detected then grant_revoked", id, evs)
			}
			reused++
		default:
			if !slices.Equal(evs, []string{"grant_issued"}) {
				t.Errorf("exchanged grant %s: events %v, want one grant_issued", id, evs)
			}
			issued++
		}
	}
	if issued != n || reused != n {
		t.Fatalf("lines for %d exchanged and %d replayed grants, want %d and %d", issued, reused, n, n)
	}
}
