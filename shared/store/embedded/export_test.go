package embedded

// Hooks for the package's own tests.

// SetCompactMin sets the log size from which a running store compacts, and returns the undo.
func SetCompactMin(n int64) (undo func()) {
	old := compactMin
	compactMin = n
	return func() { compactMin = old }
}

// BreakLog closes the log's file under the store, so that its next write fails.
func BreakLog(s *Store) {
	s.log.fileMu.Lock()
	defer s.log.fileMu.Unlock()
	s.log.f.Close()
}

// Compactions returns how many snapshots the store has written since it was opened.
func Compactions(s *Store) int {
	s.log.fileMu.Lock()
	defer s.log.fileMu.Unlock()
	return s.log.compactions
}
