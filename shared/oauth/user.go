package oauth

import "time"

// User is a bank customer who signs in on our pages.
type User struct {
	UID              string    `json:"uid" dynamodbav:"uid"`
	Username         string    `json:"username" dynamodbav:"username"`
	PasswordHash     string    `json:"password_hash" dynamodbav:"password_hash"`
	CompanyProfileID string    `json:"companyProfileId" dynamodbav:"company_profile_id"`
	CompanyUserID    string    `json:"companyUserId" dynamodbav:"company_user_id"`
	Disabled         bool      `json:"disabled,omitempty" dynamodbav:"disabled,omitempty"`
	Claims           Claims    `json:"claims" dynamodbav:"claims"`
	CreatedAt        time.Time `json:"created_at" dynamodbav:"created_at"`
}

// Claims are a user's profile claims, released by scope (OIDC Core 5.4).
type Claims struct {
	Email         string `json:"email,omitempty" dynamodbav:"email,omitempty"`
	EmailVerified bool   `json:"email_verified,omitempty" dynamodbav:"email_verified,omitempty"`
	// Phone is in international (E.164) format.
	Phone      string `json:"phone,omitempty" dynamodbav:"phone,omitempty"`
	Name       string `json:"name,omitempty" dynamodbav:"name,omitempty"`
	GivenName  string `json:"given_name,omitempty" dynamodbav:"given_name,omitempty"`
	FamilyName string `json:"family_name,omitempty" dynamodbav:"family_name,omitempty"`
	// Birthdate is YYYY-MM-DD.
	Birthdate string `json:"birthdate,omitempty" dynamodbav:"birthdate,omitempty"`
	Gender    string `json:"gender,omitempty" dynamodbav:"gender,omitempty"`
	Picture   string `json:"picture,omitempty" dynamodbav:"picture,omitempty"`
	// Locale is a BCP 47 language tag.
	Locale string `json:"locale,omitempty" dynamodbav:"locale,omitempty"`
	// UpdatedAt is in epoch seconds.
	UpdatedAt int64  `json:"updated_at,omitempty" dynamodbav:"updated_at,omitempty"`
	ZoneInfo  string `json:"zone_info,omitempty" dynamodbav:"zone_info,omitempty"`
}

// ForScopes returns the claims the granted scopes release, as a JSON-ready map: email and
// email_verified for email; phone (the documented name) and phone_number (OIDC's) for phone;
// the profile claims for profile, with zone_info (documented) and zoneinfo (OIDC's).
func (c Claims) ForScopes(s Scopes) map[string]any {
	out := map[string]any{}
	c.putForScopes(out, s)
	return out
}

// putForScopes adds to out the claims that s releases (ForScopes), so that the id_token's
// claims are built in one map.
func (c Claims) putForScopes(out map[string]any, s Scopes) {
	put := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	if s.Has(ScopeEmail) && c.Email != "" {
		out["email"] = c.Email
		out["email_verified"] = c.EmailVerified
	}
	if s.Has(ScopePhone) && c.Phone != "" {
		out["phone"] = c.Phone
		out["phone_number"] = c.Phone
	}
	if s.Has(ScopeProfile) {
		put("name", c.Name)
		put("given_name", c.GivenName)
		put("family_name", c.FamilyName)
		put("birthdate", c.Birthdate)
		put("gender", c.Gender)
		put("picture", c.Picture)
		put("locale", c.Locale)
		put("zone_info", c.ZoneInfo)
		put("zoneinfo", c.ZoneInfo)
		if c.UpdatedAt != 0 {
			out["updated_at"] = c.UpdatedAt
		}
	}
}

// Only returns the claims that scopes release, the others emptied: what a grant keeps.
func (c Claims) Only(s Scopes) Claims {
	var out Claims
	if s.Has(ScopeEmail) {
		out.Email, out.EmailVerified = c.Email, c.EmailVerified
	}
	if s.Has(ScopePhone) {
		out.Phone = c.Phone
	}
	if s.Has(ScopeProfile) {
		out.Name, out.GivenName, out.FamilyName = c.Name, c.GivenName, c.FamilyName
		out.Birthdate, out.Gender, out.Picture = c.Birthdate, c.Gender, c.Picture
		out.Locale, out.UpdatedAt, out.ZoneInfo = c.Locale, c.UpdatedAt, c.ZoneInfo
	}
	return out
}
