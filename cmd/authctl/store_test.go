package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestStoreCompact_ShrinksTheFileRefusesWhileTheServerRuns: `authctl store compact` gives back
// the space of expired pending requests (the file ends under a tenth of its size, the
// registered client kept), reports both sizes, and refuses with exit 1 and a message while the
// store is open in another process's place (the local server), changing nothing.
func TestStoreCompact_ShrinksTheFileRefusesWhileTheServerRuns(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "books", "--name", "Books", "--redirect-uri", "https://books.example/cb", "--scope", "openid")
	dir := tl.env[config.EnvDataDir]
	st, err := embedded.OpenWith(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	for i := range 2000 {
		r := oauth.AuthRequest{ID: fmt.Sprintf("ar_%05d", i), ClientID: "books", UILocales: strings.Repeat("fr ", 2500),
			CSRFHash: "h", CreatedAt: past.Add(-time.Minute), ExpiresAt: past}
		if err := st.PutAuthRequest(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, embedded.FileName)
	before, _ := os.Stat(path)

	out, errOut, code := tl.run("", "store", "compact")
	if code != exitFailure || !strings.Contains(errOut, "in use by another process") || !strings.Contains(errOut, "nothing was changed") {
		t.Fatalf("compact of an open store: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if now, _ := os.Stat(path); now.Size() != before.Size() || !now.ModTime().Equal(before.ModTime()) {
		t.Fatal("a refused compaction changed the file")
	}
	st.Close()

	var res struct {
		File   string `json:"file"`
		Before int64  `json:"bytes_before"`
		After  int64  `json:"bytes_after"`
	}
	tl.okJSON(&res, "", "store", "compact")
	after, _ := os.Stat(path)
	if res.File != path || res.Before != before.Size() || res.After != after.Size() || res.After*10 > res.Before {
		t.Fatalf("compact reported %+v (file now %d bytes, was %d); want under a tenth", res, after.Size(), before.Size())
	}
	if out := tl.ok("", "clients", "show", "books"); !strings.Contains(out, "books") {
		t.Fatalf("the client is gone after compaction: %s", out)
	}
	if out := tl.ok("", "store", "compact"); !strings.Contains(out, "compacted "+path) {
		t.Fatalf("text output %q", out)
	}
}
