package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// gcChunk bounds the deletions of one GarbageCollect transaction, so that a large backlog does
// not hold the writer lock (and the request paths behind it) for long.
const gcChunk = 1000

// GarbageCollect deletes the items that have expired at now and returns how many it deleted.
// Reads already ignore expired items, so this only reclaims space; the local server calls it
// periodically. It walks the expiry index in order and stops at the first entry still live,
// deleting in small transactions. An index entry whose item has since been rewritten with a
// later expiry (or deleted) is dropped without touching the item.
func (s *Store) GarbageCollect(now time.Time) (int, error) {
	limit := make([]byte, 8)
	binary.BigEndian.PutUint64(limit, expiryOf(now))
	total := 0
	for {
		n, more, err := s.gcChunk(now, limit)
		total += n
		if err != nil {
			return total, fmt.Errorf("bolt: garbage collect: %w", err)
		}
		if !more {
			return total, nil
		}
	}
}

// gcChunk deletes up to gcChunk expired items and reports whether more may remain.
func (s *Store) gcChunk(now time.Time, limit []byte) (deleted int, more bool, err error) {
	err = s.db.Update(func(tx *bbolt.Tx) error {
		deleted, more = 0, false
		idx := tx.Bucket(bExpiry)
		var done [][]byte
		c := idx.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0; k, _ = c.Next() {
			if len(done) == gcChunk {
				more = true
				break
			}
			done = append(done, bytes.Clone(k))
		}
		for _, k := range done {
			if err := idx.Delete(k); err != nil {
				return err
			}
			if len(k) < 9 {
				continue
			}
			bucket, ok := expiring[k[8]]
			if !ok {
				continue
			}
			n, err := deleteIfExpired(tx, bucket, k[9:], now)
			if err != nil {
				return err
			}
			deleted += n
		}
		return nil
	})
	return deleted, more, err
}

// deleteIfExpired deletes one item if it has expired at now, a grant with its token list and
// index entries.
func deleteIfExpired(tx *bbolt.Tx, bucket, key []byte, now time.Time) (int, error) {
	b := tx.Bucket(bucket)
	r, ok, err := getRaw(b, key)
	if err != nil || !ok || r.live(now) {
		return 0, err
	}
	if bytes.Equal(bucket, bGrants) {
		err = dropGrant(tx, key, r)
	} else {
		err = b.Delete(key)
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}
