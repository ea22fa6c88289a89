package embedded_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestBackup_ChangesExactlyWhenAWriteCommits: a read leaves the backup as it was; a write,
// even one that stores what was there, changes it.
func TestBackup_ChangesExactlyWhenAWriteCommits(t *testing.T) {
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, now := context.Background(), time.Now()
	backup := func() []byte {
		var b bytes.Buffer
		if _, err := st.Backup(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	req := oauth.AuthRequest{ID: "ar_1", ClientID: "c", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := st.PutAuthRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	before := backup()
	if _, err := st.GetAuthRequest(ctx, req.ID, now); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, backup()) {
		t.Fatal("a read changed the backup")
	}
	if err := st.PutAuthRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, backup()) {
		t.Fatal("a committed write left the backup as it was")
	}
}
