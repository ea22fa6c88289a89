package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
)

// Import file formats.
const (
	FormatJSON = "json"
	FormatCSV  = "csv"
)

// ImportRow is one user of an import file: its place in the file (for the report) and either
// the user or the reason it could not be read.
type ImportRow struct {
	// Where names the row in the operator's terms: "line 7" (CSV) or "users[3]" (JSON).
	Where string
	User  seed.User
	Err   error
}

// ParseImport reads an import file. JSON is an array of users or a seed file's
// {"users": [...]}, each user an object with the seed file's fields (seed.User). CSV has a
// header row naming the same fields (uid, username, password, email, email_verified, phone,
// name, given_name, family_name, birthdate, gender, picture, locale, updated_at, zone_info,
// companyProfileId, companyUserId), in any order; uid may be left out. A row that cannot be
// read is returned with its Err set and the others still are; only a file that cannot be read
// at all (bad JSON syntax, unknown CSV column) is an error.
func ParseImport(r io.Reader, format string) ([]ImportRow, error) {
	switch format {
	case FormatJSON:
		return parseJSON(r)
	case FormatCSV:
		return parseCSV(r)
	default:
		return nil, invalid("unknown import format %q: want json or csv", format)
	}
}

// SniffFormat guesses an import file's format from its first non-blank byte.
func SniffFormat(head []byte) string {
	t := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(t) > 0 && (t[0] == '[' || t[0] == '{') {
		return FormatJSON
	}
	return FormatCSV
}

func parseJSON(r io.Reader) ([]ImportRow, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read import file: %w", err)
	}
	var items []json.RawMessage
	prefix := "item"
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		var f struct {
			Users []json.RawMessage `json:"users"`
		}
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, invalid("import file: want an array of users or {\"users\": [...]}: %v", err)
		}
		items, prefix = f.Users, "users"
	} else if err := json.Unmarshal(data, &items); err != nil {
		return nil, invalid("import file: want an array of users or {\"users\": [...]}: %v", err)
	}
	rows := make([]ImportRow, len(items))
	for i, raw := range items {
		rows[i].Where = fmt.Sprintf("%s[%d]", prefix, i)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rows[i].User); err != nil {
			rows[i].Err = invalid("%v", err)
		}
	}
	return rows, nil
}

// csvFields sets a seed.User field from a CSV cell, by the field's JSON name.
var csvFields = map[string]func(u *seed.User, v string) error{
	"uid":              func(u *seed.User, v string) error { u.UID = v; return nil },
	"username":         func(u *seed.User, v string) error { u.Username = v; return nil },
	"password":         func(u *seed.User, v string) error { u.Password = v; return nil },
	"email":            func(u *seed.User, v string) error { u.Email = v; return nil },
	"phone":            func(u *seed.User, v string) error { u.Phone = v; return nil },
	"name":             func(u *seed.User, v string) error { u.Name = v; return nil },
	"given_name":       func(u *seed.User, v string) error { u.GivenName = v; return nil },
	"family_name":      func(u *seed.User, v string) error { u.FamilyName = v; return nil },
	"birthdate":        func(u *seed.User, v string) error { u.Birthdate = v; return nil },
	"gender":           func(u *seed.User, v string) error { u.Gender = v; return nil },
	"picture":          func(u *seed.User, v string) error { u.Picture = v; return nil },
	"locale":           func(u *seed.User, v string) error { u.Locale = v; return nil },
	"zone_info":        func(u *seed.User, v string) error { u.ZoneInfo = v; return nil },
	"companyProfileId": func(u *seed.User, v string) error { u.CompanyProfileID = v; return nil },
	"companyUserId":    func(u *seed.User, v string) error { u.CompanyUserID = v; return nil },
	"email_verified": func(u *seed.User, v string) error {
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("email_verified %q: want true or false", v)
		}
		u.EmailVerified = b
		return nil
	},
	"updated_at": func(u *seed.User, v string) error {
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("updated_at %q: want epoch seconds", v)
		}
		u.UpdatedAt = n
		return nil
	},
}

func parseCSV(r io.Reader) ([]ImportRow, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1 // a short or long row is that row's error, not the file's
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, invalid("import file: CSV header: %v", err)
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff") // spreadsheets write a BOM
	}
	seen := map[string]bool{}
	for _, h := range header {
		if csvFields[h] == nil {
			return nil, invalid("import file: unknown CSV column %q", h)
		}
		if seen[h] {
			return nil, invalid("import file: CSV column %q appears twice", h)
		}
		seen[h] = true
	}
	if !seen["username"] || !seen["password"] {
		return nil, invalid("import file: the CSV header needs the columns username and password")
	}
	var rows []ImportRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		var perr *csv.ParseError
		if err != nil && !(errors.As(err, &perr) && perr.Err == csv.ErrFieldCount) {
			// A quoting error: the reader cannot find where the next row starts reliably.
			// (Checked before FieldPos, which panics when the read returned no record.)
			return nil, invalid("import file: %v", err)
		}
		line, _ := cr.FieldPos(0)
		row := ImportRow{Where: fmt.Sprintf("line %d", line)}
		switch {
		case len(rec) != len(header):
			row.Err = invalid("%d fields, the header has %d", len(rec), len(header))
		default:
			for i, v := range rec {
				if ferr := csvFields[header[i]](&row.User, strings.TrimSpace(v)); ferr != nil {
					row.Err = invalid("%v", ferr)
					break
				}
			}
		}
		rows = append(rows, row)
	}
}

// Import outcomes of one row.
const (
	ImportCreated = "created"
	ImportUpdated = "updated"
	ImportFailed  = "failed"
)

// ImportResult is what happened to one row.
type ImportResult struct {
	Where    string `json:"where"`
	UID      string `json:"uid,omitempty"`
	Username string `json:"username,omitempty"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error,omitempty"`
	// Err is the row's error for errors.Is (not serialised).
	Err error `json:"-"`
}

// ImportReport sums up an import; Results are in file order.
type ImportReport struct {
	Total   int            `json:"total"`
	Created int            `json:"created"`
	Updated int            `json:"updated"`
	Failed  int            `json:"failed"`
	Results []ImportResult `json:"results"`
}

// ImportOptions tune ImportUsers.
type ImportOptions struct {
	// Workers is how many rows are hashed and written at once (default GOMAXPROCS): hashing a
	// password with argon2id is the cost of a row.
	Workers int
	// Progress, when set, is called after each row with the counts so far, one call at a time.
	Progress func(done int, rep *ImportReport)
}

// ImportUsers creates or updates each row's user and goes on past failed rows. It is
// idempotent: a row is matched to an existing user by its uid, or when it has none by its
// username; an existing user is updated to match the row (seed.Load's rules: the password is
// re-hashed only when it changed, disabled users stay disabled), so importing a file twice
// changes nothing. A username that belongs to another uid fails its row (ErrAlreadyExists).
func (s *Service) ImportUsers(ctx context.Context, rows []ImportRow, opt ImportOptions) ImportReport {
	rep := ImportReport{Total: len(rows), Results: make([]ImportResult, len(rows))}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var mu sync.Mutex
	done := 0
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(len(rows), 1)) {
		wg.Go(func() {
			for i := range next {
				res := s.importRow(ctx, rows[i])
				mu.Lock()
				rep.Results[i] = res
				switch res.Outcome {
				case ImportCreated:
					rep.Created++
				case ImportUpdated:
					rep.Updated++
				default:
					rep.Failed++
				}
				done++
				if opt.Progress != nil {
					opt.Progress(done, &rep)
				}
				mu.Unlock()
			}
		})
	}
	for i := range rows {
		next <- i
	}
	close(next)
	wg.Wait()
	return rep
}

func (s *Service) importRow(ctx context.Context, row ImportRow) ImportResult {
	u := row.User
	res := ImportResult{Where: row.Where, UID: u.UID, Username: authn.NormalizeUsername(u.Username)}
	fail := func(err error) ImportResult {
		res.Outcome, res.Err, res.Error = ImportFailed, err, err.Error()
		return res
	}
	if row.Err != nil {
		return fail(row.Err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := ValidatePassword(u.Password); err != nil {
		return fail(err)
	}
	if u.UID == "" {
		existing, err := s.Store.GetUserByUsername(ctx, res.Username)
		switch {
		case err == nil:
			u.UID = existing.UID
		case errors.Is(err, oauth.ErrNotFound):
			u.UID = oauth.NewID(PrefixUID)
		default:
			return fail(fmt.Errorf("look up username: %w", err))
		}
		res.UID = u.UID
	} else if existing, err := s.Store.GetUser(ctx, u.UID); err == nil && existing.Username != res.Username {
		return fail(fmt.Errorf("uid %q belongs to username %q: %w", u.UID, existing.Username, oauth.ErrAlreadyExists))
	}
	candidate := oauth.User{UID: u.UID, Username: res.Username, Claims: oauth.Claims{
		Email: u.Email, EmailVerified: u.EmailVerified, Phone: u.Phone, Name: u.Name, GivenName: u.GivenName,
		FamilyName: u.FamilyName, Birthdate: u.Birthdate, Gender: u.Gender, Picture: u.Picture, Locale: u.Locale,
		UpdatedAt: u.UpdatedAt, ZoneInfo: u.ZoneInfo,
	}}
	if err := validUser(candidate); err != nil {
		return fail(err)
	}
	rep, err := seed.Load(ctx, s.Store, &seed.File{Users: []seed.User{u}}, s.Passwords, s.now().UTC())
	switch {
	case errors.Is(err, oauth.ErrAlreadyExists):
		return fail(fmt.Errorf("username %q belongs to another user: %w", res.Username, oauth.ErrAlreadyExists))
	case err != nil:
		return fail(err)
	case rep.UsersCreated == 1:
		res.Outcome = ImportCreated
	default:
		res.Outcome = ImportUpdated
	}
	return res
}
