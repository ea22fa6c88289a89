package embedded

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// SetMaxSize changes the cap on the data file of a running store, as freeing or filling a disk
// would. It runs inside a write transaction: bbolt reads MaxSize only while it holds the
// writer's lock, so the change races with no write.
func (s *Store) SetMaxSize(n int) error {
	return s.db.Update(func(*bbolt.Tx) error {
		s.db.MaxSize = n
		return nil
	})
}

// FailCommits makes every commit fail with err after its transaction ran (nil: commits
// succeed again), as a disk that refuses writes and then has room again would.
func (s *Store) FailCommits(err error) {
	if err == nil {
		s.commitFault.Store(nil)
		return
	}
	s.commitFault.Store(&err)
}

// SetGCLimits makes garbage collection's batches small (see gcScan), for a test that must
// cross them; restore puts the limits back.
func SetGCLimits(scan, batch, perCall int) (restore func()) {
	old := [3]int{gcScan, gcBatch, gcMaxPerCall}
	gcScan, gcBatch, gcMaxPerCall = scan, batch, perCall
	return func() { gcScan, gcBatch, gcMaxPerCall = old[0], old[1], old[2] }
}

// PutExpired writes n one-time values that expired before now in one transaction: work for a
// sweep, without n commits.
func (s *Store) PutExpired(n int, now time.Time) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		for i := range n {
			key := fmt.Sprintf("dpop:expired:%d:%d", now.UnixNano(), i)
			if err := put(tx, bReplay, key, replayed{ExpiresAt: now.Add(-time.Second)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// RunWritesTwice makes every write run once, rolled back, before it runs for real, as a
// neighbour's refusal in a shared commit makes it run: each fn must come out the same.
func (s *Store) RunWritesTwice() { s.rehearse.Store(true) }

// Commits is the id of the last committed write transaction: bbolt counts every commit.
func (s *Store) Commits() (int, error) {
	var id int
	err := s.db.View(func(tx *bbolt.Tx) error {
		id = tx.ID()
		return nil
	})
	return id, err
}
