package admin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
)

// Password rules of the operator's tool. The login page accepts up to 1024 characters; the
// minimum follows NIST SP 800-63B's advice to favour length over composition rules.
const (
	MinPasswordLength = 12
	MaxPasswordLength = 1024
	// MaxUsernameLength is what the login page accepts.
	MaxUsernameLength = 256
)

// PrefixUID starts the uids the tool generates when the operator gives none.
const PrefixUID = "usr_"

// UserSpec is a user to create.
type UserSpec struct {
	// UID is the user's stable id (the tokens' uid); empty means a generated one.
	UID              string
	Username         string
	Password         string
	CompanyProfileID string
	CompanyUserID    string
	Claims           oauth.Claims
}

// CreateUser creates a user with the password hashed (argon2id) and the username normalised
// (authn.NormalizeUsername), as the login page compares it. A taken username or uid is
// oauth.ErrAlreadyExists, and the message says which.
func (s *Service) CreateUser(ctx context.Context, spec UserSpec) (oauth.User, error) {
	if spec.UID == "" {
		spec.UID = oauth.NewID(PrefixUID)
	}
	u := oauth.User{
		UID: spec.UID, Username: authn.NormalizeUsername(spec.Username),
		CompanyProfileID: spec.CompanyProfileID, CompanyUserID: spec.CompanyUserID,
		Claims: spec.Claims, CreatedAt: s.now().UTC(),
	}
	if err := validUser(u); err != nil {
		return oauth.User{}, err
	}
	if err := ValidatePassword(spec.Password); err != nil {
		return oauth.User{}, err
	}
	u.PasswordHash = s.Passwords.Hash(spec.Password)
	if err := s.Store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, oauth.ErrAlreadyExists) {
			return oauth.User{}, s.whichTaken(ctx, u)
		}
		return oauth.User{}, fmt.Errorf("create user %s: %w", u.UID, err)
	}
	s.audit(ctx, "user_create", "", u.UID)
	return u, nil
}

// whichTaken tells a taken username from a taken uid, for the operator's message.
func (s *Service) whichTaken(ctx context.Context, u oauth.User) error {
	if _, err := s.Store.GetUserByUsername(ctx, u.Username); err == nil {
		return fmt.Errorf("username %q is taken: %w", u.Username, oauth.ErrAlreadyExists)
	}
	return fmt.Errorf("uid %q is taken: %w", u.UID, oauth.ErrAlreadyExists)
}

// FindUser returns the user whose uid, or else whose (normalised) username, is ref.
func (s *Service) FindUser(ctx context.Context, ref string) (oauth.User, error) {
	u, err := s.Store.GetUser(ctx, ref)
	if err == nil {
		return u, nil
	}
	if !errors.Is(err, oauth.ErrNotFound) {
		return oauth.User{}, fmt.Errorf("get user %s: %w", ref, err)
	}
	u, err = s.Store.GetUserByUsername(ctx, authn.NormalizeUsername(ref))
	if errors.Is(err, oauth.ErrNotFound) {
		return oauth.User{}, fmt.Errorf("user %q (no such uid or username): %w", ref, oauth.ErrNotFound)
	}
	if err != nil {
		return oauth.User{}, fmt.Errorf("get user %s: %w", ref, err)
	}
	return u, nil
}

// ListUsers returns every user, ordered by username.
func (s *Service) ListUsers(ctx context.Context) ([]oauth.User, error) {
	list, err := s.Store.ListUsers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	slices.SortFunc(list, func(a, b oauth.User) int { return strings.Compare(a.Username, b.Username) })
	return list, nil
}

// UserChanges is an update of a user's claims and company ids; nil fields stay as they are,
// and a pointer to "" clears the field. The uid and username never change (the store's
// username index depends on them): delete and create instead.
type UserChanges struct {
	CompanyProfileID *string
	CompanyUserID    *string
	Email            *string
	EmailVerified    *bool
	Phone            *string
	Name             *string
	GivenName        *string
	FamilyName       *string
	Birthdate        *string
	Gender           *string
	Picture          *string
	Locale           *string
	ZoneInfo         *string
}

// UpdateUser applies ch to the user ref names (uid or username) and returns the user as
// stored. A change of a claim sets the claims' updated_at (OIDC Core 5.1). Grants already
// given keep the claims they were given with; new consents and refreshed id_tokens of new
// grants see the change.
func (s *Service) UpdateUser(ctx context.Context, ref string, ch UserChanges) (oauth.User, error) {
	cur, err := s.FindUser(ctx, ref)
	if err != nil {
		return oauth.User{}, err
	}
	var out oauth.User
	err = s.Store.UpdateUser(ctx, cur.UID, func(u oauth.User) (oauth.User, error) {
		before := u.Claims
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = strings.TrimSpace(*v)
			}
		}
		set(&u.CompanyProfileID, ch.CompanyProfileID)
		set(&u.CompanyUserID, ch.CompanyUserID)
		c := &u.Claims
		set(&c.Email, ch.Email)
		if ch.EmailVerified != nil {
			c.EmailVerified = *ch.EmailVerified
		}
		set(&c.Phone, ch.Phone)
		set(&c.Name, ch.Name)
		set(&c.GivenName, ch.GivenName)
		set(&c.FamilyName, ch.FamilyName)
		set(&c.Birthdate, ch.Birthdate)
		set(&c.Gender, ch.Gender)
		set(&c.Picture, ch.Picture)
		set(&c.Locale, ch.Locale)
		set(&c.ZoneInfo, ch.ZoneInfo)
		if u.Claims != before {
			u.Claims.UpdatedAt = s.now().Unix()
		}
		if err := validUser(u); err != nil {
			return u, err
		}
		out = u
		return u, nil
	})
	if err != nil {
		return oauth.User{}, userErr("update", cur.UID, err)
	}
	s.audit(ctx, "user_update", "", cur.UID)
	return out, nil
}

// SetPassword replaces a user's password. With revokeGrants (a suspected compromise) every
// grant of the user is revoked too, and the revoked ids are returned.
func (s *Service) SetPassword(ctx context.Context, ref, password string, revokeGrants bool) ([]string, error) {
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	u, err := s.FindUser(ctx, ref)
	if err != nil {
		return nil, err
	}
	hash := s.Passwords.Hash(password)
	err = s.Store.UpdateUser(ctx, u.UID, func(u oauth.User) (oauth.User, error) {
		u.PasswordHash = hash
		return u, nil
	})
	if err != nil {
		return nil, userErr("set the password of", u.UID, err)
	}
	s.audit(ctx, "user_set_password", "", u.UID)
	if !revokeGrants {
		return nil, nil
	}
	return s.RevokeAll(ctx, oauth.GrantFilter{UID: u.UID}, ReasonPasswordReset)
}

// DisableUser marks a user disabled (no login, and open sessions stop working) and revokes all
// the user's grants, so their tokens fail at once. It returns the user and the revoked ids.
func (s *Service) DisableUser(ctx context.Context, ref string) (oauth.User, []string, error) {
	u, err := s.setUserDisabled(ctx, ref, true)
	if err != nil {
		return oauth.User{}, nil, err
	}
	revoked, err := s.RevokeAll(ctx, oauth.GrantFilter{UID: u.UID}, ReasonUserDisabled)
	return u, revoked, err
}

// EnableUser lifts a user's disablement. Grants revoked by the disablement stay revoked.
func (s *Service) EnableUser(ctx context.Context, ref string) (oauth.User, error) {
	return s.setUserDisabled(ctx, ref, false)
}

func (s *Service) setUserDisabled(ctx context.Context, ref string, disabled bool) (oauth.User, error) {
	u, err := s.FindUser(ctx, ref)
	if err != nil {
		return oauth.User{}, err
	}
	var out oauth.User
	err = s.Store.UpdateUser(ctx, u.UID, func(u oauth.User) (oauth.User, error) {
		u.Disabled = disabled
		out = u
		return u, nil
	})
	if err != nil {
		return oauth.User{}, userErr("update", u.UID, err)
	}
	action := "user_enable"
	if disabled {
		action = "user_disable"
	}
	s.audit(ctx, action, "", u.UID)
	return out, nil
}

// DeleteUser disables a user, revokes all the user's grants, then deletes the user (which
// frees the username). If a revocation fails the user is left disabled, not deleted.
func (s *Service) DeleteUser(ctx context.Context, ref string) (oauth.User, []string, error) {
	u, revoked, err := s.DisableUser(ctx, ref)
	if err != nil {
		if u.UID != "" {
			return u, revoked, fmt.Errorf("user %s left disabled, not deleted: %w", u.UID, err)
		}
		return u, revoked, err
	}
	if err := s.Store.DeleteUser(ctx, u.UID); err != nil && !errors.Is(err, oauth.ErrNotFound) {
		return u, revoked, fmt.Errorf("delete user %s: %w", u.UID, err)
	}
	s.audit(ctx, "user_delete", "", u.UID)
	return u, revoked, nil
}

func userErr(verb, uid string, err error) error { return itemErr("user", verb, uid, err) }

// ValidatePassword applies the tool's password rules: MinPasswordLength to
// MaxPasswordLength characters, not all whitespace, no control characters.
func ValidatePassword(p string) error {
	n := utf8.RuneCountInString(p)
	switch {
	case !utf8.ValidString(p):
		return invalid("the password is not valid UTF-8")
	case n < MinPasswordLength:
		return invalid("the password must have at least %d characters", MinPasswordLength)
	case len(p) > MaxPasswordLength:
		return invalid("the password must have at most %d bytes", MaxPasswordLength)
	case strings.TrimSpace(p) == "":
		return invalid("the password cannot be only whitespace")
	case strings.ContainsFunc(p, unicode.IsControl):
		return invalid("the password cannot hold control characters (a stray newline?)")
	}
	return nil
}

var (
	e164      = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	birthdate = regexp.MustCompile(`^[0-9]{4}(-[0-9]{2}-[0-9]{2})?$`)
)

// validUser checks what the token endpoint will hand out: the uid and username the tokens and
// login page carry, and the claims whose formats the documentation promises.
func validUser(u oauth.User) error {
	if u.UID == "" || len(u.UID) > 128 || strings.ContainsFunc(u.UID, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return invalid("uid %q must be 1 to 128 characters without spaces", u.UID)
	}
	if u.Username == "" || len(u.Username) > MaxUsernameLength || strings.ContainsFunc(u.Username, unicode.IsControl) {
		return invalid("username %q must be 1 to %d characters without control characters", u.Username, MaxUsernameLength)
	}
	c := u.Claims
	if c.Phone != "" && !e164.MatchString(c.Phone) {
		return invalid("phone %q must be in international E.164 format, like +33612345678", c.Phone)
	}
	if c.Birthdate != "" {
		if !birthdate.MatchString(c.Birthdate) {
			return invalid("birthdate %q must be YYYY-MM-DD (or YYYY)", c.Birthdate)
		}
		if len(c.Birthdate) == 10 {
			if _, err := time.Parse(time.DateOnly, c.Birthdate); err != nil {
				return invalid("birthdate %q is not a date", c.Birthdate)
			}
		}
	}
	if c.Email != "" && (!strings.Contains(c.Email, "@") || strings.ContainsFunc(c.Email, unicode.IsSpace)) {
		return invalid("email %q is not an email address", c.Email)
	}
	if c.Picture != "" && !strings.HasPrefix(c.Picture, "https://") {
		return invalid("picture %q must be an https URL", c.Picture)
	}
	return nil
}
