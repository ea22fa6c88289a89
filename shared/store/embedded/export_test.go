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

// WaitCompaction waits for a live compaction in flight, if any.
func WaitCompaction(s *Store) { s.log.bg.Wait() }

// PauseCompactions makes every live compaction wait, after it has taken its snapshot and
// before it writes it, until release is closed; paused is told each time one starts waiting.
func PauseCompactions(paused chan<- struct{}, release <-chan struct{}) (undo func()) {
	compactionHook = func() {
		select {
		case paused <- struct{}{}:
		default: // the test has not taken the last one: it knows already
		}
		<-release
	}
	return func() { compactionHook = nil }
}
