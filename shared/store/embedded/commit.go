package embedded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Group commit. bbolt runs one write transaction at a time and each commit pays two fsyncs
// (pages, then the meta page), so writers that each commit alone queue behind one another's
// fsyncs. Concurrent writes share a commit through bbolt's own DB.Batch: the writes that
// arrive within batchDelay of the first (or batchSize of them) run in one transaction and
// commit once. A write with no other in flight commits at once (DB.Update), so a lone writer
// never waits for a batch to fill.
//
// A write's fn may therefore run more than once, always in a fresh transaction: when a fn of a
// batch returns an error (a domain outcome such as oauth.ErrUsed, or a failure), bbolt rolls
// the whole transaction back, runs the rest again without it, and runs the one that failed
// alone; what it returns alone is its answer. So a refusal rolls back only its own writes,
// never a neighbour's, and is decided against committed data only. Every fn must be idempotent
// in effect and touch nothing outside the transaction, except results it resets at the start
// of each run (TestConformance_EveryWriteRunTwice runs every write twice).

// batchDelay and batchSize are bbolt's MaxBatchDelay and MaxBatchSize for the store. Measured
// (docs/benchmarks.md, "The embedded store on bbolt"): at 8 writers, a 1 ms delay gave about
// twice the rate of bbolt's default 10 ms with fsync, and seven times without. The size bounds
// what a refusal in a batch makes run again.
const (
	batchDelay = time.Millisecond
	batchSize  = 64
)

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
	if s.rehearse.Load() {
		// A test runs every fn once more on the same data first, rolled back, as a neighbour's
		// refusal in a batch would make it run (export_test.go).
		_ = s.db.Update(func(tx *bbolt.Tx) error {
			_ = fn(tx)
			return errRehearsal
		})
	}
	var fnErr error // fn's outcome in its last run
	run := func(tx *bbolt.Tx) error {
		if fnErr = fn(tx); fnErr == nil {
			if fault := s.commitFault.Load(); fault != nil {
				return *fault // rolled back, as a failed commit is
			}
		}
		return fnErr
	}
	var err error
	if s.writers.Add(1) == 1 {
		err = s.db.Update(run) // alone: commit at once, no batch to wait for
	} else {
		err = s.db.Batch(run)
	}
	s.writers.Add(-1)
	if err != nil && fnErr == nil {
		return fmt.Errorf("embedded store: write: %w: %w", oauth.ErrTransient, err)
	}
	return err
}

// errRehearsal rolls back the rehearsal of a write (see Store.rehearse).
var errRehearsal = errors.New("embedded store: rehearsal")
