package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/oauth"
)

func (c *cli) usersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "users",
		Aliases: []string{"user"},
		Short:   "Create, import and manage users",
		Long: `Create, import and manage the users who sign in on the login page. A USER argument is a
uid or a username (usernames are compared trimmed and lower-cased, as the login page does).`,
		RunE: groupRun,
	}
	cmd.AddCommand(c.usersCreate(), c.usersImport(), c.usersList(), c.usersShow(), c.usersUpdate(),
		c.usersSetPassword(), c.usersDisable(), c.usersEnable(), c.usersDelete(), c.usersFactors())
	return cmd
}

// claimFlags are the flags of a user's claims and company ids, shared by create and update.
type claimFlags struct {
	profileID, userID                                string
	email, phone, name, given, family, birth, gender string
	picture, locale, zone                            string
	emailVerified                                    bool
}

func (f *claimFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.profileID, "company-profile-id", "", "companyProfileId carried by the user's tokens")
	fs.StringVar(&f.userID, "company-user-id", "", "companyUserId carried by the user's tokens")
	fs.StringVar(&f.email, "email", "", "email claim")
	fs.BoolVar(&f.emailVerified, "email-verified", false, "the email address is verified")
	fs.StringVar(&f.phone, "phone", "", "phone claim, E.164 (+33612345678)")
	fs.StringVar(&f.name, "name", "", "name claim (full name)")
	fs.StringVar(&f.given, "given-name", "", "given_name claim")
	fs.StringVar(&f.family, "family-name", "", "family_name claim")
	fs.StringVar(&f.birth, "birthdate", "", "birthdate claim, YYYY-MM-DD")
	fs.StringVar(&f.gender, "gender", "", "gender claim")
	fs.StringVar(&f.picture, "picture", "", "picture claim (https URL)")
	fs.StringVar(&f.locale, "locale", "", "locale claim, a BCP 47 tag (fr-FR)")
	fs.StringVar(&f.zone, "zone-info", "", "zone_info claim, an IANA time zone (Europe/Paris)")
}

// claimFlagNames maps flag names to the fields they set, for update's "what changed".
var claimFlagNames = []string{"company-profile-id", "company-user-id", "email", "email-verified", "phone", "name",
	"given-name", "family-name", "birthdate", "gender", "picture", "locale", "zone-info"}

func (f *claimFlags) claims(now time.Time) oauth.Claims {
	c := oauth.Claims{Email: f.email, EmailVerified: f.emailVerified, Phone: f.phone, Name: f.name, GivenName: f.given,
		FamilyName: f.family, Birthdate: f.birth, Gender: f.gender, Picture: f.picture, Locale: f.locale, ZoneInfo: f.zone}
	if c != (oauth.Claims{}) {
		c.UpdatedAt = now.Unix()
	}
	return c
}

// changes turns the flags given on the command line into an update.
func (f *claimFlags) changes(changed func(string) bool) admin.UserChanges {
	pick := func(name string, v *string) *string {
		if changed(name) {
			return v
		}
		return nil
	}
	ch := admin.UserChanges{
		CompanyProfileID: pick("company-profile-id", &f.profileID), CompanyUserID: pick("company-user-id", &f.userID),
		Email: pick("email", &f.email), Phone: pick("phone", &f.phone), Name: pick("name", &f.name),
		GivenName: pick("given-name", &f.given), FamilyName: pick("family-name", &f.family),
		Birthdate: pick("birthdate", &f.birth), Gender: pick("gender", &f.gender), Picture: pick("picture", &f.picture),
		Locale: pick("locale", &f.locale), ZoneInfo: pick("zone-info", &f.zone),
	}
	if changed("email-verified") {
		ch.EmailVerified = &f.emailVerified
	}
	return ch
}

// readPassword gets a new password: from stdin with --password-stdin (one line, the newline
// dropped), else from a no-echo prompt on the terminal, asked twice. Never from a flag, where
// it would land in the shell history and the process list.
func (c *cli) readPassword(fromStdin bool) (string, error) {
	if fromStdin {
		r := bufio.NewReader(io.LimitReader(c.std.in, admin.MaxPasswordLength+3))
		line, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the password from stdin: %w", err)
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			return "", usagef("--password-stdin: stdin held no password")
		}
		return line, nil
	}
	f, ok := c.std.in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usagef("stdin is not a terminal to ask the password on: pipe it in with --password-stdin")
	}
	ask := func(prompt string) (string, error) {
		fmt.Fprint(c.std.err, prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.std.err)
		if err != nil {
			return "", fmt.Errorf("read the password: %w", err)
		}
		return string(b), nil
	}
	p1, err := ask("New password: ")
	if err != nil {
		return "", err
	}
	if err := admin.ValidatePassword(p1); err != nil {
		return "", err
	}
	p2, err := ask("Repeat the password: ")
	if err != nil {
		return "", err
	}
	if p1 != p2 {
		return "", usagef("the two passwords differ")
	}
	return p1, nil
}

func (c *cli) usersCreate() *cobra.Command {
	var uid string
	var fromStdin bool
	var cf claimFlags
	cmd := &cobra.Command{
		Use:   "create USERNAME [flags]",
		Short: "Create a user; the password is asked for, or read from stdin",
		Long: fmt.Sprintf(`Create a user. The password is asked for on the terminal (twice, not echoed), or read from
stdin with --password-stdin; it is never a flag. It needs %d to %d characters and is stored as
an argon2id hash at the service's cost (AUTH_ARGON2_*). The uid, the tokens' subject, is
generated (%s...) unless --uid is given.`, admin.MinPasswordLength, admin.MaxPasswordLength, admin.PrefixUID),
		Example: `  authctl users create alice --uid 0012345 --email alice@example.com --email-verified \
    --phone +33612345678 --name "Alice Martin" --company-profile-id cp-1 --company-user-id cu-1
  printf '%s\n' "$PASSWORD" | authctl users create bob --password-stdin`,
		Args: exactArgs("USERNAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			password, err := c.readPassword(fromStdin)
			if err != nil {
				return err
			}
			adm, err := c.admin(cmd.Context(), newStoreAllowed)
			if err != nil {
				return err
			}
			u, err := adm.CreateUser(cmd.Context(), admin.UserSpec{
				UID: uid, Username: args[0], Password: password, CompanyProfileID: cf.profileID,
				CompanyUserID: cf.userID, Claims: cf.claims(time.Now()),
			})
			if err != nil {
				return err
			}
			v := viewUser(u)
			return c.emit(v, v.text)
		},
	}
	cmd.Flags().StringVar(&uid, "uid", "", "the user's uid (default: generated)")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from stdin (first line) instead of a prompt")
	cf.register(cmd.Flags())
	return cmd
}

func (c *cli) usersImport() *cobra.Command {
	var format string
	var workers int
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Create or update many users from a JSON or CSV file (idempotent)",
		Long: `Create or update users from a file ("-" reads stdin). JSON is an array of users or a seed
file's {"users": [...]}; CSV has a header row. Fields (JSON keys and CSV columns alike): uid,
username, password (required), email, email_verified, phone, name, given_name, family_name,
birthdate, gender, picture, locale, updated_at, zone_info, companyProfileId, companyUserId.

A row is matched to an existing user by its uid, or without one by its username, and the user
is made to match the row; importing the same file twice changes nothing (a password is
re-hashed only when it changed; disabled users stay disabled). A bad row is reported and the
import goes on; the exit code is then 5. Progress goes to stderr.

The file holds passwords: keep it out of version control and delete it afterwards.`,
		Example: `  authctl users import users.csv
  authctl users import users.json -o json > report.json`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(c.std.in)
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return fmt.Errorf("read import file: %w", err)
			}
			switch format {
			case "":
				switch strings.ToLower(filepath.Ext(args[0])) {
				case ".json":
					format = admin.FormatJSON
				case ".csv":
					format = admin.FormatCSV
				default:
					format = admin.SniffFormat(data)
				}
			case admin.FormatJSON, admin.FormatCSV:
			default:
				return usagef("--format %q: want json or csv", format)
			}
			rows, err := admin.ParseImport(bytes.NewReader(data), format)
			if err != nil {
				return err
			}
			adm, err := c.admin(cmd.Context(), newStoreAllowed)
			if err != nil {
				return err
			}
			p := newProgress(c.std.err, len(rows))
			rep := adm.ImportUsers(cmd.Context(), rows, admin.ImportOptions{Workers: workers, Progress: p.update})
			p.finish(&rep)
			for _, r := range rep.Results {
				if r.Outcome == admin.ImportFailed {
					c.note("%s: %s", r.Where, r.Error)
				}
			}
			if err := c.emit(rep, func(w io.Writer) {
				fmt.Fprintf(w, "%d user(s): %d created, %d updated, %d failed\n", rep.Total, rep.Created, rep.Updated, rep.Failed)
			}); err != nil {
				return err
			}
			if rep.Failed > 0 {
				return partialError{msg: fmt.Sprintf("%d of %d row(s) failed (listed above)", rep.Failed, rep.Total)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "json or csv (default: from the file name, else sniffed)")
	cmd.Flags().IntVar(&workers, "workers", 0, "rows processed at once (default: number of CPUs; hashing a password is the cost)")
	return cmd
}

// progress writes the import's progress line on stderr: rewritten in place on a terminal, a
// line every few percent otherwise (logs of a CI job), and always a last line.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	step  int
	last  time.Time
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, tty: isTerminal(w), total: total, step: max(100, total/20)}
}

func (p *progress) line(done int, rep *admin.ImportReport) string {
	return fmt.Sprintf("import: %d/%d rows (%d created, %d updated, %d failed)", done, p.total, rep.Created, rep.Updated, rep.Failed)
}

// update is called after each row, one call at a time.
func (p *progress) update(done int, rep *admin.ImportReport) {
	if done == p.total {
		return // finish writes the last line
	}
	if p.tty {
		if time.Since(p.last) >= 100*time.Millisecond {
			p.last = time.Now()
			fmt.Fprintf(p.w, "\r%s", p.line(done, rep))
		}
		return
	}
	if done%p.step == 0 {
		fmt.Fprintln(p.w, p.line(done, rep))
	}
}

func (p *progress) finish(rep *admin.ImportReport) {
	if p.tty {
		fmt.Fprint(p.w, "\r")
	}
	fmt.Fprintln(p.w, p.line(rep.Created+rep.Updated+rep.Failed, rep))
}

func (c *cli) usersList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the users",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			list, err := adm.ListUsers(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]userView, 0, len(list))
			for _, u := range list {
				views = append(views, viewUser(u))
			}
			return c.emit(views, func(w io.Writer) {
				rows := make([][]string, 0, len(views))
				for _, v := range views {
					rows = append(rows, []string{v.UID, v.Username, state(v.Disabled), v.Claims.Email, v.CompanyProfileID})
				}
				table(w, []string{"UID", "USERNAME", "STATE", "EMAIL", "COMPANY_PROFILE_ID"}, rows)
			})
		},
	}
}

func (c *cli) usersShow() *cobra.Command {
	return &cobra.Command{
		Use:   "show USER",
		Short: "Show a user (by uid or username; never the password hash)",
		Args:  exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, err := adm.FindUser(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := viewUser(u)
			return c.emit(v, v.text)
		},
	}
}

func (c *cli) usersUpdate() *cobra.Command {
	var cf claimFlags
	cmd := &cobra.Command{
		Use:   "update USER [flags]",
		Short: "Change a user's claims or company ids",
		Long: `Change a user's claims or company ids; only the flags given change ("" clears a field).
The uid and the username do not change. Grants already given keep the claims they were
consented with; new authorizations see the change.`,
		Example: `  authctl users update alice --phone +33698765432 --email-verified=false`,
		Args:    exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !anyChanged(cmd.Flags().Changed, claimFlagNames...) {
				return usagef("nothing to update: give at least one claim flag (see --help)")
			}
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, err := adm.UpdateUser(cmd.Context(), args[0], cf.changes(cmd.Flags().Changed))
			if err != nil {
				return err
			}
			v := viewUser(u)
			return c.emit(v, v.text)
		},
	}
	cf.register(cmd.Flags())
	return cmd
}

func (c *cli) usersSetPassword() *cobra.Command {
	var fromStdin, revoke bool
	cmd := &cobra.Command{
		Use:   "set-password USER [--password-stdin] [--revoke-grants]",
		Short: "Set a user's password (asked for, or read from stdin)",
		Long: `Set a user's password, asked for on the terminal or read from stdin with --password-stdin.
After a suspected compromise add --revoke-grants: every grant of the user is revoked and the
tokens of every application they authorised fail at once.`,
		Args: exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			password, err := c.readPassword(fromStdin)
			if err != nil {
				return err
			}
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			revoked, err := adm.SetPassword(cmd.Context(), args[0], password, revoke)
			if err != nil && len(revoked) == 0 {
				return err
			}
			res := struct {
				User          string   `json:"user"`
				PasswordSet   bool     `json:"password_set"`
				RevokedGrants []string `json:"revoked_grants"`
			}{args[0], true, nonNil(revoked)}
			if eerr := c.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "password of %s set", args[0])
				if revoke {
					fmt.Fprintf(w, "; %d grant(s) revoked", len(revoked))
				}
				fmt.Fprintln(w)
			}); eerr != nil {
				return eerr
			}
			return partial(err)
		},
	}
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from stdin (first line) instead of a prompt")
	cmd.Flags().BoolVar(&revoke, "revoke-grants", false, "also revoke every grant of the user (suspected compromise)")
	return cmd
}

func (c *cli) usersDisable() *cobra.Command {
	var resweep bool
	cmd := &cobra.Command{
		Use:   "disable USER [--resweep]",
		Short: "Disable a user and revoke all the user's grants (their tokens fail at once)",
		Long: `Disable a user: they can no longer sign in, their open sessions stop working, and every
grant they gave is revoked, so the applications' access and refresh tokens fail at once.

A code issued just before can still be exchanged until it expires (AUTH_CODE_TTL, 2m). With
--resweep the command waits that long and revokes again, closing that window.`,
		Args: exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, revoked, err := adm.DisableUser(cmd.Context(), args[0])
			if err != nil && u.UID == "" {
				return err
			}
			if resweep {
				wait := c.cfg.Lifetimes.Code
				c.note("user %s disabled, %d grant(s) revoked; waiting %s to revoke grants from codes issued before ...", u.UID, len(revoked), wait)
				more, rerr := adm.Resweep(cmd.Context(), oauth.GrantFilter{UID: u.UID}, admin.ReasonUserDisabled, wait)
				revoked, err = append(revoked, more...), errors.Join(err, rerr)
			}
			res := disabledResult{UID: u.UID, Username: u.Username, Disabled: true, RevokedGrants: nonNil(revoked)}
			if eerr := c.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "user %s (%s) disabled; %d grant(s) revoked\n", u.Username, u.UID, len(revoked))
			}); eerr != nil {
				return eerr
			}
			return partial(err)
		},
	}
	cmd.Flags().BoolVar(&resweep, "resweep", false, "wait AUTH_CODE_TTL, then revoke the user's grants again")
	return cmd
}

func (c *cli) usersEnable() *cobra.Command {
	return &cobra.Command{
		Use:   "enable USER",
		Short: "Enable a disabled user (revoked grants stay revoked)",
		Args:  exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, err := adm.EnableUser(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.emit(disabledResult{UID: u.UID, Username: u.Username, RevokedGrants: []string{}}, func(w io.Writer) {
				fmt.Fprintf(w, "user %s (%s) enabled\n", u.Username, u.UID)
			})
		},
	}
}

func (c *cli) usersDelete() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete USER --yes",
		Short: "Revoke all of a user's grants and delete the user",
		Long: `Delete a user: disabled first, every grant revoked (tokens fail at once), then removed, which
frees the username. If a revocation fails the user is left disabled; run the command again.`,
		Args: exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usagef("deleting user %s cannot be undone: confirm with --yes", args[0])
			}
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, revoked, err := adm.DeleteUser(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.emit(disabledResult{UID: u.UID, Username: u.Username, Disabled: true, Deleted: true, RevokedGrants: nonNil(revoked)}, func(w io.Writer) {
				fmt.Fprintf(w, "user %s (%s) deleted; %d grant(s) revoked\n", u.Username, u.UID, len(revoked))
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "confirm the deletion")
	return cmd
}
