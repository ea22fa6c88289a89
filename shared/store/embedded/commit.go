package embedded

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Group commit. bbolt runs one write transaction at a time and each commit pays two fsyncs
// (pages, then the meta page), so writers that each commit alone queue behind one another's
// fsyncs. Here concurrent writes share a commit: a write joins the queue, and whoever holds the
// lead (the first writer to find no commit in progress, or the next one waiting when a commit
// ends) takes every queued write, up to maxGroup, runs them in order in one bbolt transaction
// and commits it once. A writer alone commits at once: no write waits for a timer, unlike
// bbolt's DB.Batch, whose MaxBatchDelay a lone writer would wait out.
//
// A write's fn may therefore run more than once, always in a fresh transaction: when a fn of
// the group returns an error (a domain outcome such as oauth.ErrUsed, or a failure), the whole
// transaction rolls back, that write leaves the group and the rest run again without it; the
// write that failed then runs alone, after the group's commit, and what it returns alone is its
// answer. So a refusal rolls back only its own writes, never a neighbour's, and is decided
// against committed data only. Every fn must be idempotent in effect and touch nothing outside
// the transaction, except results it resets at the start of each run.

// maxGroup caps the writes that share one transaction: a refusal in a group runs the rest
// again, so the cap bounds that work. Measured (docs/benchmarks.md, "The embedded store on
// bbolt"): groups stay well under it at 32 concurrent writers (about 17 writes per commit).
const maxGroup = 64

// write is one call of update waiting for its commit.
type write struct {
	fn   func(*bbolt.Tx) error
	err  error         // fn's outcome, or its commit's failure; read once done is closed
	done chan struct{} // closed when err is final
}

// committer holds the writes waiting for a commit and the lead.
type committer struct {
	lead  chan struct{} // capacity 1: whoever sends into it commits for everyone
	mu    sync.Mutex    // guards queue
	queue []*write
}

func newCommitter() committer {
	return committer{lead: make(chan struct{}, 1)}
}

// update runs fn in a read-write transaction, committed (and fsynced) before update returns
// when fn returns nil, rolled back otherwise: an fn that returns a domain outcome (ErrUsed,
// ErrRevoked…) writes nothing. The transaction may carry other writers' fns too (group commit,
// above): their refusals never undo fn's writes, nor fn's theirs. A commit that fails (the
// disk is full, the file may not grow, an I/O error) is rolled back by bbolt, which stays
// usable; it is returned as oauth.ErrTransient, so the request is answered 503 and may be
// retried, and the next write that finds room succeeds without a restart.
func (s *Store) update(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &write{fn: fn, done: make(chan struct{})}
	c := &s.commits
	c.mu.Lock()
	c.queue = append(c.queue, w)
	c.mu.Unlock()
	select {
	case <-w.done: // a leader committed it
	case c.lead <- struct{}{}:
		// Holding the lead, w is done or still queued: commit groups until it is done.
		for !isDone(w) {
			s.commitGroup(s.takeGroup())
		}
		<-c.lead // the next waiting writer, if any, takes the lead
	}
	return w.err
}

// takeGroup takes up to maxGroup writes from the head of the queue.
func (s *Store) takeGroup() []*write {
	c := &s.commits
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), maxGroup)
	group := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	return group
}

func isDone(w *write) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// errRehearsal rolls back the rehearsal of a group (see Store.rehearse).
var errRehearsal = errors.New("embedded store: rehearsal")

// commitGroup runs group's fns in one transaction and commits it, then answers each write.
func (s *Store) commitGroup(group []*write) {
	if s.rehearse.Load() {
		// A test runs every fn once more on the same data first, rolled back, as a neighbour's
		// refusal would make it run (export_test.go).
		_ = s.db.Update(func(tx *bbolt.Tx) error {
			for _, w := range group {
				if safeCall(w.fn, tx) != nil {
					break
				}
			}
			return errRehearsal
		})
	}
	var alone []*write
	for len(group) > 0 {
		failed := -1
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i, w := range group {
				if w.err = safeCall(w.fn, tx); w.err != nil {
					failed = i
					return w.err
				}
			}
			if fault := s.commitFault.Load(); fault != nil {
				return *fault // rolled back, as a failed commit is
			}
			return nil
		})
		if failed >= 0 && len(group) > 1 {
			// Rolled back for everyone: the rest run again without it, and it runs alone after.
			alone = append(alone, group[failed])
			group = slices.Delete(group, failed, failed+1)
			continue
		}
		for _, w := range group {
			if err != nil && failed < 0 {
				w.err = fmt.Errorf("embedded store: write: %w: %w", oauth.ErrTransient, err)
			}
			close(w.done)
		}
		break
	}
	for _, w := range alone {
		s.commitGroup([]*write{w})
	}
}

// safeCall runs fn, turning a panic into an error so that one write's bug rolls back its group
// and fails that write alone, instead of leaving the queue without a leader.
func safeCall(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("embedded store: a write panicked: %v", p)
		}
	}()
	return fn(tx)
}
