package admin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/oauth"
)

const importCSV = `uid,username,password,email,email_verified,phone,companyProfileId,companyUserId
u-1,Alice,correct-horse-battery,alice@example.com,true,+33612345678,cp-1,cu-1
u-2,bob,short,bob@example.com,false,,cp-1,cu-2
,carol,another-long-passphrase,carol@example.com,yes-please,,cp-2,cu-3
,dave,another-long-passphrase,dave@example.com,,,cp-2
,erin,another-long-passphrase,erin@example.com,,,cp-2,cu-5
`

const importJSON = `[
  {"uid": "u-1", "username": "alice", "password": "correct-horse-battery", "email": "alice@example.com", "email_verified": true},
  {"uid": "u-2", "username": "bob", "password": "short"},
  {"username": "carol", "password": "another-long-passphrase", "emial": "typo@example.com"},
  {"username": "dave", "password": "another-long-passphrase", "phone": "0612"},
  {"username": "erin", "password": "another-long-passphrase", "companyProfileId": "cp-2"}
]`

func TestParseImport_ReportsBadRowsAndKeepsTheOthers(t *testing.T) {
	cases := []struct {
		format, data string
		wantBad      []string // Where of the rows that cannot be read
	}{
		{admin.FormatCSV, importCSV, []string{"line 4", "line 5"}},
		{admin.FormatJSON, importJSON, []string{"item[2]"}},
		{admin.FormatJSON, `{"users": ` + importJSON + `}`, []string{"users[2]"}},
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			rows, err := admin.ParseImport(strings.NewReader(tc.data), tc.format)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 5 {
				t.Fatalf("%d rows, want 5", len(rows))
			}
			var bad []string
			for _, r := range rows {
				if r.Err != nil {
					bad = append(bad, r.Where)
				}
			}
			if strings.Join(bad, ",") != strings.Join(tc.wantBad, ",") {
				t.Errorf("unreadable rows %v, want %v", bad, tc.wantBad)
			}
			if rows[0].User.Username == "" || rows[0].User.Password == "" {
				t.Errorf("first row not read: %+v", rows[0].User)
			}
		})
	}
}

func TestParseImport_RefusesUnreadableFiles(t *testing.T) {
	cases := map[string]struct{ format, data string }{
		"unknown CSV column":      {admin.FormatCSV, "username,password,pasword\n"},
		"CSV without a password":  {admin.FormatCSV, "username,email\n"},
		"JSON that is not a list": {admin.FormatJSON, `"alice"`},
		"JSON syntax error":       {admin.FormatJSON, `[{"username": }]`},
		"unknown format":          {"xml", "<users/>"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := admin.ParseImport(strings.NewReader(tc.data), tc.format); !errors.Is(err, admin.ErrInvalid) {
				t.Fatalf("ParseImport = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestImportUsers_IsIdempotentAndGoesOnPastBadRows(t *testing.T) {
	for _, format := range []string{admin.FormatCSV, admin.FormatJSON} {
		t.Run(format, func(t *testing.T) {
			s, _ := newService(t)
			ctx := context.Background()
			// A user the file does not name, who must stay as they are.
			mustUser(t, s, admin.UserSpec{UID: "u-other", Username: "x"})
			data := map[string]string{admin.FormatCSV: importCSV, admin.FormatJSON: importJSON}[format]
			rows, err := admin.ParseImport(strings.NewReader(data), format)
			if err != nil {
				t.Fatal(err)
			}
			var calls, lastDone int
			rep := s.ImportUsers(ctx, rows, admin.ImportOptions{Workers: 3, Progress: func(done int, _ *admin.ImportReport) {
				calls++
				lastDone = done
			}})
			if calls != len(rows) || lastDone != len(rows) {
				t.Errorf("progress called %d times, last %d; want %d", calls, lastDone, len(rows))
			}
			const wantCreated = 2 // alice and erin; bob (short password), carol and dave (bad fields) fail
			if rep.Total != 5 || rep.Created != wantCreated || rep.Updated != 0 || rep.Failed != 5-wantCreated {
				t.Fatalf("first import: %+v", rep)
			}
			alice, err := s.FindUser(ctx, "alice")
			if err != nil {
				t.Fatalf("alice not imported: %v", err)
			}
			if alice.UID != "u-1" || alice.Claims.Email != "alice@example.com" || !alice.Claims.EmailVerified {
				t.Errorf("alice imported as %+v", alice)
			}
			for _, r := range rep.Results {
				if r.Outcome == admin.ImportFailed && r.Error == "" {
					t.Errorf("%s failed without a reason", r.Where)
				}
			}

			// A second run changes nothing: same users, same password hashes, updates only.
			erin, _ := s.FindUser(ctx, "erin")
			again := s.ImportUsers(ctx, rows, admin.ImportOptions{})
			if again.Created != 0 || again.Updated != wantCreated || again.Failed != rep.Failed {
				t.Fatalf("second import: %+v, want %d updated and the same failures", again, wantCreated)
			}
			alice2, _ := s.FindUser(ctx, "alice")
			erin2, _ := s.FindUser(ctx, "erin")
			if alice2.PasswordHash != alice.PasswordHash || erin2.UID != erin.UID {
				t.Error("a second import re-hashed an unchanged password or gave a user a new uid")
			}
			users, _ := s.ListUsers(ctx)
			if len(users) != 1+wantCreated {
				t.Errorf("%d users after two imports, want %d", len(users), 1+wantCreated)
			}
		})
	}
}

func TestImportUsers_ConflictingRowsFailWithConflict(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	mustUser(t, s, admin.UserSpec{UID: "u-1", Username: "alice"})
	rows, err := admin.ParseImport(strings.NewReader(`[
		{"uid": "u-9", "username": "ALICE", "password": "correct-horse-battery"},
		{"uid": "u-1", "username": "mallory", "password": "correct-horse-battery"}
	]`), admin.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	rep := s.ImportUsers(ctx, rows, admin.ImportOptions{})
	for _, r := range rep.Results {
		if r.Outcome != admin.ImportFailed || !errors.Is(r.Err, oauth.ErrAlreadyExists) {
			t.Errorf("%s: %s %v, want a conflict", r.Where, r.Outcome, r.Err)
		}
	}
	u, _ := s.FindUser(ctx, "u-1")
	if u.Username != "alice" {
		t.Errorf("a conflicting row renamed u-1 to %q", u.Username)
	}
}
