package embedded

import (
	"fmt"
	"io"

	"go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the whole file to w from a read transaction (bbolt's
// Tx.WriteTo), while the store keeps serving. The copy holds the file's last committed state,
// its transaction id included: two backups are equal byte for byte exactly when no write
// transaction committed between them, which is how the tests prove that a refused request
// wrote nothing.
func (s *Store) Backup(w io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("embedded store: backup: %w", err)
	}
	return n, nil
}
