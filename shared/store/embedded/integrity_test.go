package embedded_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// Damage to the data file, as a crash, a bad disk or an attacker could make it: Open must
// refuse the file, naming it and saying what to do, and never panic or open on part of it.

// filledStore writes enough tokens that the tokens bucket is a tree of branch and leaf pages,
// closes the store and returns its directory and file.
func filledStore(t *testing.T) (dir, path string) {
	t.Helper()
	s, dir := openTemp(t, embedded.Options{NoSync: true})
	ctx := t.Context()
	now := time.Now()
	if err := s.CreateClient(ctx, client("c1")); err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		g := oauth.Grant{ID: fmt.Sprintf("g%03d", i), ClientID: "c1", UID: "u1", Scopes: oauth.Scopes{oauth.ScopeOpenID},
			CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		tok := func(kind string) oauth.Token {
			return oauth.Token{Hash: oauth.HashToken(oauth.NewSecret("x_")), Kind: kind, Scopes: g.Scopes, Grant: g, ExpiresAt: now.Add(time.Hour)}
		}
		in := oauth.Issue{Grant: g, Access: tok(oauth.KindAccess), Refresh: tok(oauth.KindRefresh), FromCode: true}
		in.Tokens = []string{in.Access.Hash, in.Refresh.Hash}
		if err := s.IssueTokens(ctx, in, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, embedded.FileName)
}

// fileLayout is where things are in a closed data file, read with bbolt.
type fileLayout struct {
	pageSize int
	used     int64 // bytes up to the high-water mark: the pages in use or free
	branch   int64 // the root page of the tokens bucket, a branch page
	leaf     int64 // a leaf page
}

func layoutOf(t *testing.T, path string) fileLayout {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var l fileLayout
	l.pageSize = db.Info().PageSize
	err = db.View(func(tx *bbolt.Tx) error {
		l.used = tx.Size()
		branch := int64(tx.Bucket([]byte("tokens")).Root())
		l.branch = branch
		// The first leaf: the page the branch's first element points to.
		p, err := tx.Page(int(branch))
		if err != nil || p == nil || p.Type != "branch" {
			return fmt.Errorf("tokens root page %d is %+v, %v: the fixture needs a branch page", branch, p, err)
		}
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return fmt.Errorf("no leaf page found: %v", err)
			}
			if p.Type == "leaf" {
				l.leaf = int64(id)
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeAt overwrites the file at off with b.
func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// flipByte inverts the byte at off.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, path, off, []byte{^raw[off]})
}

// mustRefuse opens dir and expects the damaged-file error.
func mustRefuse(t *testing.T, dir, path string) {
	t.Helper()
	s, err := embedded.Open(dir)
	if err == nil {
		s.Close()
		t.Fatal("Open of a damaged file succeeded")
	}
	t.Log(err)
	for _, want := range []string{path, "is damaged", "restore", "move it away"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open error %q does not say %q", err, want)
		}
	}
	if errors.Is(err, embedded.ErrLocked) {
		t.Errorf("Open error %v is ErrLocked", err)
	}
}

func TestOpen_RefusesATruncatedFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		size func(l fileLayout) int64
	}{
		{"to half", func(l fileLayout) int64 { return l.used / 2 }},
		{"by its last page", func(l fileLayout) int64 { return l.used - int64(l.pageSize) }},
		{"by a few bytes", func(l fileLayout) int64 { return l.used - 10 }},
		{"into the meta pages", func(l fileLayout) int64 { return int64(l.pageSize) + 100 }},
		{"to nothing", func(fileLayout) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := filledStore(t)
			if err := os.Truncate(path, tc.size(layoutOf(t, path))); err != nil {
				t.Fatal(err)
			}
			mustRefuse(t, dir, path)
		})
	}
}

func TestOpen_RefusesADamagedMetaPage(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  func(pageSize int) int64 // from the start of the file
	}{
		{"first, its high-water mark", func(int) int64 { return 16 + 48 }},
		{"second, its root bucket", func(ps int) int64 { return int64(ps) + 16 + 16 }},
		{"first, its magic", func(int) int64 { return 16 }},
		{"second, its checksum", func(ps int) int64 { return int64(ps) + 16 + 56 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := filledStore(t)
			flipByte(t, path, tc.off(layoutOf(t, path).pageSize))
			mustRefuse(t, dir, path)
		})
	}
}

func TestOpen_RefusesADamagedTreePage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, ps int, branch, leaf int64)
	}{
		{"branch page type", func(t *testing.T, path string, ps int, branch, _ int64) {
			writeAt(t, path, branch*int64(ps)+8, []byte{0x10, 0}) // flags: a freelist page
		}},
		{"leaf page type", func(t *testing.T, path string, ps int, _, leaf int64) {
			writeAt(t, path, leaf*int64(ps)+8, []byte{0x01, 0}) // flags: a branch page
		}},
		{"leaf element count", func(t *testing.T, path string, ps int, _, leaf int64) {
			writeAt(t, path, leaf*int64(ps)+10, binary.LittleEndian.AppendUint16(nil, 0xFFFF))
		}},
		{"branch child page id", func(t *testing.T, path string, ps int, branch, _ int64) {
			// The first element of a branch page: pos (4), ksize (4), pgid (8) after the header.
			writeAt(t, path, branch*int64(ps)+16+8, binary.LittleEndian.AppendUint64(nil, 1<<40))
		}},
		{"branch page zeroed", func(t *testing.T, path string, ps int, branch, _ int64) {
			writeAt(t, path, branch*int64(ps), make([]byte, ps))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := filledStore(t)
			l := layoutOf(t, path)
			tc.damage(t, path, l.pageSize, l.branch, l.leaf)
			mustRefuse(t, dir, path)
		})
	}
}

// The limit of the checks, as docs/storage.md states it: bbolt keeps no checksum of values, so
// a damaged value inside a sound page is not seen at Open. Reading it fails, loudly: never an
// ErrNotFound, which a caller could take for "no such item".
func TestOpen_ADamagedValueIsSeenOnlyWhenRead(t *testing.T) {
	dir, path := filledStore(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy of the client's name (bbolt leaves old copies in free pages) loses its opening
	// quote: the value is no longer JSON.
	name := []byte(`"App c1"`)
	if !bytes.Contains(raw, name) {
		t.Fatal("the client's name is not in the file")
	}
	for off := 0; ; {
		at := bytes.Index(raw[off:], name)
		if at < 0 {
			break
		}
		writeAt(t, path, int64(off+at), []byte{'x'})
		off += at + len(name)
	}
	s, err := embedded.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v (if bbolt now checks values, update docs/storage.md and this test)", err)
	}
	defer s.Close()
	if _, err := s.GetClient(t.Context(), "c1"); err == nil || errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("GetClient of the damaged client: %v, want a decoding error", err)
	}
}
