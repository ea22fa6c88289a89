package embedded

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// The log is a sequence of frames: a 4-byte little-endian body length, the CRC-32C of the
// body, then the body. A body is one or more entries: the item's kind, the operation, the key
// and a value, each length-prefixed with a uvarint. The first frame of a file is the header,
// which names the layout, so that a file of another layout is refused rather than misread.
//
// Values: a put carries the item's JSON (the same field names as the DynamoDB items and the
// API), so the log stays readable by anyone with a hex dump and jq; the small operations on a
// request path (a code used, a refresh token spent, a grant's live tokens, a revocation) carry
// only what changes.

// Kinds of items.
const (
	kindHeader byte = iota + 1
	kindCode
	kindToken
	kindGrant
	kindClient
	kindUser
	kindRequest
	kindSession
	kindFailure
	kindKeys
)

// Operations of an entry.
const (
	opPut    byte = iota + 1 // value: the item's JSON
	opDelete                 // value: empty
	opUse                    // a code consumed or a refresh token spent; value: empty
	opTokens                 // a grant's live token hashes; value: the hashes, each uvarint-length-prefixed
	opRevoke                 // a grant revoked and its tokens deleted; value: its new end, Unix nanoseconds (8 bytes)
)

const (
	frameHeaderLen = 8
	// maxFrame bounds a frame's length, so that a corrupt length cannot make a replay allocate
	// gigabytes.
	maxFrame = 64 << 20
	// layoutVersion is the layout this package reads and writes.
	layoutVersion = "embedded-log/1"
	// compactFactor: beyond compactMin, the log is compacted when it has grown to
	// compactFactor times its last snapshot.
	compactFactor = 4
)

// compactMin is the smallest log worth compacting while running (a variable for tests).
var compactMin int64 = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendEntry appends one entry to a frame body.
func appendEntry(body []byte, kind, op byte, key string, val []byte) []byte {
	body = append(body, kind, op)
	body = binary.AppendUvarint(body, uint64(len(key)))
	body = append(body, key...)
	body = binary.AppendUvarint(body, uint64(len(val)))
	return append(body, val...)
}

// appendJSON appends an entry whose value is v's JSON.
func appendJSON(body []byte, kind byte, key string, v any) ([]byte, error) {
	val, err := json.Marshal(v)
	if err != nil {
		return body, fmt.Errorf("encode %T: %w", v, err)
	}
	return appendEntry(body, kind, opPut, key, val), nil
}

// appendHashes encodes a list of token hashes as an opTokens value.
func appendHashes(val []byte, hashes []string) []byte {
	for _, h := range hashes {
		val = binary.AppendUvarint(val, uint64(len(h)))
		val = append(val, h...)
	}
	return val
}

func appendFrame(dst, body []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(body)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(body, castagnoli))
	return append(dst, body...)
}

// entry is one decoded entry; key and val alias the frame.
type entry struct {
	kind, op byte
	key      string
	val      []byte
}

// nextEntry decodes the entry at the start of body and returns the rest.
func nextEntry(body []byte) (entry, []byte, error) {
	if len(body) < 2 {
		return entry{}, nil, errors.New("short entry")
	}
	e := entry{kind: body[0], op: body[1]}
	body = body[2:]
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return entry{}, nil, errors.New("bad key length")
	}
	e.key = string(body[k : k+int(n)])
	body = body[k+int(n):]
	n, k = binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return entry{}, nil, errors.New("bad value length")
	}
	e.val = body[k : k+int(n)]
	return e, body[k+int(n):], nil
}

// decodeHashes decodes an opTokens value.
func decodeHashes(val []byte) ([]string, error) {
	var out []string
	for len(val) > 0 {
		n, k := binary.Uvarint(val)
		if k <= 0 || n > uint64(len(val)-k) {
			return nil, errors.New("bad token list")
		}
		out = append(out, string(val[k:k+int(n)]))
		val = val[k+int(n):]
	}
	return out, nil
}

// wal is the log of a Store: the file, and the frames waiting to be written to it.
type wal struct {
	path   string
	noSync bool
	s      *Store

	// fileMu is held while the file is written: by a committing writer from the moment it
	// takes the pending frames until they are written and their writers released, and by a
	// compaction. So a compaction never races a frame that was taken but not yet written, and
	// a writer holding fileMu finds its own frame either written or still pending.
	fileMu      sync.Mutex
	f           *os.File
	lock        *os.File // LockName, flock'd while the store is open
	size        int64    // bytes in the file
	snapSize    int64    // bytes of the last snapshot
	compactions int      // snapshots written since Open (the first one included)
	compacting  bool     // a live compaction is running
	bg          sync.WaitGroup

	// Guarded by s.mu.
	pending []byte // frames appended since a committer last took them
	spare   []byte // the previous buffer, reused
	batch   *batch // what the writers of pending wait for
	failed  error  // set for good when writing the log failed
	closed  bool
}

// batch is one group commit: closed done once its frames are durable, err its outcome.
type batch struct {
	done chan struct{}
	err  error
}

// openWAL takes the store's lock, opens or creates the log, replays it into s and compacts it.
func openWAL(path string, noSync bool, s *Store) (*wal, error) {
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(path), LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded store: open lock file: %w", err)
	}
	if err := lockFile(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("embedded store: %s: %w", path, err)
	}
	w := &wal{path: path, noSync: noSync, s: s, lock: lock}
	fail := func(what string, err error) (*wal, error) {
		lock.Close()
		return nil, fmt.Errorf("embedded store: %s %s: %w", what, path, err)
	}
	f, err := os.Open(path)
	switch {
	case err == nil:
		err = w.replay(f)
		f.Close()
		if err != nil {
			return fail("replay", err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fail("open", err)
	}
	s.gc(time.Now())
	if err := w.compact(); err != nil {
		return fail("compact", err)
	}
	return w, nil
}

// lockFile takes an exclusive flock of f, trying for a second.
func lockFile(f *os.File) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock: %w", err)
		}
		if time.Now().After(deadline) {
			return ErrLocked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replay applies every frame of f to the store. A torn last frame (a crash in the middle of a
// write) ends the replay: its operation never returned, so it is dropped, and the compaction
// that follows rewrites the file without it. A bad frame followed by more data is corruption,
// and the store refuses to open rather than lose what follows.
func (w *wal) replay(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [frameHeaderLen]byte
	var body []byte
	for off < size {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil // torn frame header at the end
		}
		n := int64(binary.LittleEndian.Uint32(hdr[:4]))
		end := off + frameHeaderLen + n
		switch {
		case n == 0 || n > maxFrame:
			if zeros, err := allZero(r); err != nil || !zeros {
				return fmt.Errorf("corrupt frame at offset %d", off)
			}
			return nil // zeros left by a crash after the file grew
		case end > size:
			return nil // the last frame was cut short
		}
		body = slices.Grow(body[:0], int(n))[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil
		}
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			if end == size {
				return nil // a torn last frame
			}
			return fmt.Errorf("corrupt frame at offset %d (checksum)", off)
		}
		if off == 0 {
			if err := checkHeader(body); err != nil {
				return err
			}
		} else if err := w.s.apply(body); err != nil {
			return fmt.Errorf("frame at offset %d: %w", off, err)
		}
		off = end
	}
	return nil
}

// allZero reports whether everything left in r is zero bytes.
func allZero(r io.Reader) (bool, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

func headerBody() []byte {
	return appendEntry(nil, kindHeader, opPut, "layout", []byte(layoutVersion))
}

func checkHeader(body []byte) error {
	e, rest, err := nextEntry(body)
	if err != nil || e.kind != kindHeader || e.key != "layout" || len(rest) != 0 {
		return errors.New("not an embedded store log")
	}
	if string(e.val) != layoutVersion {
		return fmt.Errorf("the log has layout %q, this build reads %q", e.val, layoutVersion)
	}
	return nil
}

// compact writes a snapshot of the store in place of the log, at Open, before anyone else can
// use the store.
func (w *wal) compact() error {
	s := w.s
	s.mu.Lock()
	snap := s.capture()
	s.mu.Unlock()
	tmp := w.path + ".tmp"
	size, err := writeSnapshot(tmp, snap)
	if err != nil {
		return err
	}
	f, err := w.install(tmp)
	if err != nil {
		return err
	}
	w.f = f
	w.size, w.snapSize = size, size
	w.compactions++
	return nil
}

// compactLive compacts the log of a running store, in its own goroutine (started by a flush
// that found the log large). Neither lock is held while the snapshot is written: the store's
// lock only while it is taken (pointers to items, which are never changed once stored), fileMu
// only to note how far the log was written then, and at the end to move the frames written
// since then behind the snapshot and put the result in place of the log. Those frames include
// the ones that were pending when the snapshot was taken, whose changes it already holds; a
// replay applies them again harmlessly, since every entry sets an item to a value (or deletes
// it) and nothing else comes between.
func (w *wal) compactLive() {
	defer w.bg.Done()
	s := w.s
	w.fileMu.Lock()
	s.mu.Lock()
	snap, mark, closed := s.capture(), w.size, w.closed
	s.mu.Unlock()
	w.fileMu.Unlock()

	tmp := w.path + ".tmp"
	var size, tail int64
	err := errClosed
	if !closed {
		if compactionHook != nil {
			compactionHook()
		}
		size, err = writeSnapshot(tmp, snap)
	}
	w.fileMu.Lock()
	defer w.fileMu.Unlock()
	w.compacting = false
	if err == nil {
		tail, err = appendTail(tmp, w.path, mark, w.size)
	}
	var f *os.File
	if err == nil {
		f, err = w.install(tmp)
	}
	if err != nil {
		// Nothing was put in place: the old log is whole and in use, and the next try waits
		// until it has grown as much again.
		os.Remove(tmp)
		w.snapSize = w.size
		return
	}
	w.f.Close()
	w.f = f
	w.size, w.snapSize = size+tail, size
	w.compactions++
}

// compactionHook, when set (by tests), runs in a live compaction after the snapshot is taken
// and before it is written.
var compactionHook func()

// appendTail appends the bytes [from, to) of the log at src to the file dst and syncs it,
// returning how many it appended.
func appendTail(dst, src string, from, to int64) (int64, error) {
	if to <= from {
		return 0, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.NewSectionReader(in, from, to-from))
	if err == nil && n != to-from {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// install puts the file tmp in place of the log and opens it for appending.
func (w *wal) install(tmp string) (*os.File, error) {
	err := os.Rename(tmp, w.path)
	if err == nil {
		err = syncDir(filepath.Dir(w.path))
	}
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND, 0o600)
}

// writeSnapshot writes snap to path, fsynced, and returns its size.
func writeSnapshot(path string, snap *snapshot) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var size int64
	var frame []byte
	err = snap.write(func(body []byte) error {
		frame = appendFrame(frame[:0], body)
		size += int64(len(frame))
		_, err := bw.Write(frame)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return 0, err
	}
	return size, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// usable returns why the log takes no more writes, if it does not. The caller holds s.mu.
func (w *wal) usable() error {
	switch {
	case w.failed != nil:
		return w.failed
	case w.closed:
		return errClosed
	}
	return nil
}

// append queues a frame and returns the commit to wait for with commit. The caller holds s.mu
// for writing, has checked usable, and has already made the frame's change in memory.
func (w *wal) append(body []byte) *batch {
	if w.batch == nil {
		w.batch = &batch{done: make(chan struct{})}
	}
	w.pending = appendFrame(w.pending, body)
	return w.batch
}

// commit returns once b's frames are durable: a group commit without a goroutine of its own.
// The writer that gets fileMu first writes and syncs everything pending, its own frame and
// those of the writers that queued meanwhile; they find their frame written when they get
// fileMu in turn, or write what has queued since. A lone writer pays one write and one fsync,
// and no hand-off to another goroutine. commit does not give up when a context ends: the
// change is already made, and reporting a failure for it would be a lie.
func (w *wal) commit(b *batch) error {
	w.fileMu.Lock()
	select {
	case <-b.done:
	default:
		w.flushLocked()
	}
	w.fileMu.Unlock()
	return b.err
}

// flushLocked writes and syncs the pending frames, releases their writers, and compacts the
// log when it has grown enough. The caller holds fileMu.
func (w *wal) flushLocked() {
	s := w.s
	s.mu.Lock()
	data, b := w.take()
	closed := w.closed
	s.mu.Unlock()
	if b == nil {
		return
	}
	if err := w.write(data, b); err == nil && !closed && !w.compacting && w.size > max(compactMin, compactFactor*w.snapSize) {
		w.compacting = true
		w.bg.Add(1)
		go w.compactLive()
	}
}

// take takes the pending frames and their commit, leaving an empty buffer in their place. The
// caller holds s.mu.
func (w *wal) take() ([]byte, *batch) {
	data, b := w.pending, w.batch
	w.pending, w.batch = w.spare[:0], nil
	w.spare = nil
	return data, b
}

// write writes taken frames to the log and syncs it, then releases their writers with the
// outcome. The caller holds fileMu.
func (w *wal) write(data []byte, b *batch) error {
	if b == nil {
		return nil
	}
	var err error
	if w.f == nil {
		err = errClosed
	} else if _, err = w.f.Write(data); err == nil && !w.noSync {
		err = w.f.Sync()
	}
	w.size += int64(len(data))
	if err != nil {
		err = fmt.Errorf("embedded store: write log: %w", err)
	}
	w.release(data, b, err)
	return err
}

// release hands the frames' writers their outcome and gives the buffer back for reuse; an
// error stops the store for good.
func (w *wal) release(data []byte, b *batch, err error) {
	if b != nil {
		b.err = err
		close(b.done)
	}
	s := w.s
	s.mu.Lock()
	if w.spare == nil {
		w.spare = data[:0]
	}
	if err != nil && w.failed == nil {
		w.failed = err
	}
	s.mu.Unlock()
}

// close stops taking writes, writes what is pending and closes the file.
func (w *wal) close() error {
	s := w.s
	s.mu.Lock()
	if w.closed {
		s.mu.Unlock()
		return errClosed
	}
	w.closed = true
	s.mu.Unlock()
	w.bg.Wait() // a compaction in flight finishes first
	w.fileMu.Lock()
	defer w.fileMu.Unlock()
	w.flushLocked()
	err := w.f.Close()
	w.f = nil
	w.lock.Close() // releases the flock
	if err != nil {
		return fmt.Errorf("embedded store: close: %w", err)
	}
	s.mu.Lock()
	failed := w.failed
	s.mu.Unlock()
	return failed
}
