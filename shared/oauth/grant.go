package oauth

import (
	"encoding/json"
	"time"
)

// Grant is what a user granted a client: the unit of revocation. Codes, access tokens and
// refresh tokens all point to one grant; revoking the grant ends every one of them.
type Grant struct {
	ID       string `json:"id" dynamodbav:"id"`
	ClientID string `json:"client_id" dynamodbav:"client_id"`
	UID      string `json:"uid" dynamodbav:"uid"`
	// Scopes are the granted scopes as the client spelled them.
	Scopes           Scopes    `json:"scopes" dynamodbav:"scopes"`
	CompanyProfileID string    `json:"companyProfileId,omitempty" dynamodbav:"company_profile_id,omitempty"`
	CompanyUserID    string    `json:"companyUserId,omitempty" dynamodbav:"company_user_id,omitempty"`
	AuthTime         time.Time `json:"auth_time" dynamodbav:"auth_time"`
	// AMR are the authentication methods of the sign-in (RFC 8176), for the id_token's amr
	// and acr.
	AMR []string `json:"amr,omitempty" dynamodbav:"amr,omitempty"`
	// SID is the session the grant was given in (Session.SID), the id_token's sid.
	SID string `json:"sid,omitempty" dynamodbav:"sid,omitempty"`
	// Nonce goes into the first id_token only (OIDC Core 3.1.2.1); refreshed ones carry none.
	Nonce string `json:"nonce,omitempty" dynamodbav:"nonce,omitempty"`
	// Claims are the user's claims that Scopes release, taken at consent (the others left
	// empty), so that issuing an id_token needs no read of the user.
	Claims Claims `json:"claims" dynamodbav:"claims"`
	// CertThumbprint binds the grant's tokens to a client certificate (RFC 8705 x5t#S256).
	CertThumbprint string `json:"cert_thumbprint,omitempty" dynamodbav:"cert_thumbprint,omitempty"`
	// DPoPJKT binds the grant's tokens to a DPoP key (RFC 9449 cnf.jkt: the key's RFC 7638
	// thumbprint). On a code's grant it is the key the authorization request named (dpop_jkt,
	// or the proof of the pushed request): the code is then redeemable only with that key.
	DPoPJKT string `json:"dpop_jkt,omitempty" dynamodbav:"dpop_jkt,omitempty"`
	// AuthorizationDetails are the granted authorization_details (RFC 9396): the JSON array
	// the request carried, validated against the types' schemas (package rar) and compacted,
	// at most rar.MaxBytes; empty when none were asked for.
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty" dynamodbav:"authorization_details,omitempty"`
	// PaymentEvidence is, on a payment grant, what the customer's step proved about its
	// details (dynamic linking, dynamic_linking.go); the code exchange checks it again.
	PaymentEvidence *PaymentEvidence `json:"payment_evidence,omitempty" dynamodbav:"payment_evidence,omitempty"`
	CreatedAt       time.Time        `json:"created_at" dynamodbav:"created_at"`
	// ExpiresAt is the grant's absolute end: no refresh succeeds after it.
	ExpiresAt time.Time `json:"expires_at" dynamodbav:"expires_at"`
	// Managed marks a grant its client asked for with grant_management_action (Grant
	// Management for OAuth 2.0, grantmanagement.go): its token responses carry grant_id.
	Managed bool `json:"managed,omitempty" dynamodbav:"managed,omitempty"`
	// Revision counts the rewrites of the grant by a merge or a replace (0: as first
	// issued); a rewrite is written only over the revision it was computed from (Rewrite).
	Revision int `json:"revision,omitempty" dynamodbav:"revision,omitempty"`
	// UpdatedAt is when a merge or a replace last rewrote the grant; zero: never.
	UpdatedAt time.Time `json:"updated_at,omitzero" dynamodbav:"updated_at,omitempty"`
	// ClientOnly marks a grant of the client_credentials grant (flow_client_credentials.go):
	// the client's own, with no user (UID, the company fields, AuthTime and Claims empty).
	// Its tokens reach only the bank API routes that accept client-only tokens; they carry no
	// refresh token, no id_token and no user metadata.
	ClientOnly bool `json:"client_only,omitempty" dynamodbav:"client_only,omitempty"`
}

// HasNoUser reports whether the grant's tokens act for no user: a client_credentials grant,
// or any grant without a uid, which is treated the same way rather than as some user's.
func (g *Grant) HasNoUser() bool { return g.ClientOnly || g.UID == "" }

// Code is an authorization code: single use, short-lived, bound to its client, redirect URI
// and PKCE challenge. It carries the grant it will start.
type Code struct {
	Hash          string    `json:"hash" dynamodbav:"hash"`
	Grant         Grant     `json:"grant" dynamodbav:"grant"`
	RedirectURI   string    `json:"redirect_uri" dynamodbav:"redirect_uri"`
	CodeChallenge string    `json:"code_challenge,omitempty" dynamodbav:"code_challenge,omitempty"`
	ExpiresAt     time.Time `json:"expires_at" dynamodbav:"expires_at"`
	// Rewrite, on the code of a merge or a replace (grantmanagement.go), says which revision
	// of the stored grant Grant was computed from: the exchange rewrites that grant
	// (Issue.Rewrite). Nil: the code starts a new grant.
	Rewrite *Rewrite `json:"rewrite,omitempty" dynamodbav:"rewrite,omitempty"`
}

// Rewrite is a first issuance that rewrites a stored grant under its id (a Grant Management
// merge or replace) instead of writing a new one: GrantStore.IssueTokens states what the
// store checks and does.
type Rewrite struct {
	// Action is the grant_management_action, merge or replace (for the audit).
	Action string `json:"action" dynamodbav:"action"`
	// Revision is the stored grant's Revision the new grant was computed from.
	Revision int `json:"revision" dynamodbav:"revision"`
}

// Token kinds.
const (
	KindAccess  = "access"
	KindRefresh = "refresh"
)

// Token is an access or refresh token record, keyed by the SHA-256 of the token. It carries a
// copy of its grant so that validating an access token, or spending a refresh token, is one read.
type Token struct {
	Hash string `json:"hash" dynamodbav:"hash"`
	Kind string `json:"kind" dynamodbav:"kind"`
	// Scopes of this token: the grant's, or fewer when a refresh narrowed them.
	Scopes Scopes `json:"scopes" dynamodbav:"scopes"`
	// AuthorizationDetails are, on an access token a refresh narrowed them for (RFC 9396
	// 7.2), the ones it carries; empty, the token carries its grant's (Details).
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty" dynamodbav:"authorization_details,omitempty"`
	IssuedAt             time.Time       `json:"issued_at" dynamodbav:"issued_at"`
	ExpiresAt            time.Time       `json:"expires_at" dynamodbav:"expires_at"`
	Grant                Grant           `json:"grant" dynamodbav:"grant"`
	// Live lists, on a refresh token, the hashes of the grant's access tokens that may still be
	// valid when it is spent: the one issued with it and the one before. The refresh that spends
	// it revokes the older one, so a grant never has more than two live access tokens.
	Live []string `json:"live,omitempty" dynamodbav:"live,omitempty"`
	// Spent marks a refresh token already exchanged; it is kept until it expires so that a
	// replay is recognised (RFC 9700 4.14.2).
	Spent bool `json:"spent,omitempty" dynamodbav:"spent,omitempty"`
	// SpentAt is when the refresh token was spent (zero while it is not): a client's retry
	// window (Client.RefreshReuseInterval) runs from it and never restarts.
	SpentAt time.Time `json:"spent_at,omitzero" dynamodbav:"spent_at,omitempty"`
	// Successors are, on a spent refresh token, the hashes of the access token and the refresh
	// token (in that order) that its spend issued, written by the same write that spent it; a
	// retry within the window replaces them with the pair it issues, and retires them. Empty on
	// a token spent before spend and issuance were one write (an issuance that never completed).
	Successors []string `json:"successors,omitempty" dynamodbav:"successors,omitempty"`
	// Retried marks a spent refresh token whose one retry within the window has been issued.
	Retried bool `json:"retried,omitempty" dynamodbav:"retried,omitempty"`
}

// Details are the authorization_details the token carries (RFC 9396 7, 9.1): its own when a
// refresh narrowed them, else its grant's.
func (t *Token) Details() json.RawMessage {
	if len(t.AuthorizationDetails) > 0 {
		return t.AuthorizationDetails
	}
	return t.Grant.AuthorizationDetails
}

// Issue is one issuance of tokens for a grant: the first, from a code, or a refresh.
type Issue struct {
	Grant   Grant
	Access  Token
	Refresh Token
	// FromCode is true for the first issuance: the grant must not exist yet (a tombstone left by
	// a revocation or a code replay blocks it), unless Rewrite is set. Otherwise the grant must
	// exist and be live.
	FromCode bool
	// Rewrite, with FromCode, makes the issuance rewrite the stored grant Grant.ID (a merge or
	// a replace): see GrantStore.IssueTokens.
	Rewrite *Rewrite
	// Retire lists access-token hashes the issuance revokes (the grant's oldest live one).
	Retire []string
	// Tokens is the grant's list of live token hashes after this issuance: what revoking the
	// grant must delete.
	Tokens []string
	// Spent is, for a refresh, the hash of the refresh token the refresh spends: the issuance's
	// write marks that token spent and records on it the new access and refresh token hashes
	// as its Successors, together with the rest (GrantStore.IssueTokens). For a retry it is the
	// token spent before (Retry.Token.Hash).
	Spent string
	// Retry, when set, makes this refresh issuance a retry of a refresh token spent before
	// (GrantStore.IssueTokens states what the store checks); Spent is then Retry.Token.Hash.
	Retry *Retry
	// Keep, when set, makes this a refresh that does not rotate (Client.RotatesRefreshTokens
	// false): the refresh token presented stays valid and Refresh is empty (no new refresh
	// token is written). GrantStore.IssueTokens states what the store checks.
	Keep *Keep
	// Once are the request's one-time values (a DPoP proof's and a client assertion's jti),
	// recorded in the issuance's write or not at all (GrantStore.IssueTokens).
	Once []Once
}

// Keep is the refresh token a non-rotating refresh keeps, and the change of its Live list: the
// new access token and the one before replace what the token listed when the caller read it.
type Keep struct {
	// Hash is the refresh token's.
	Hash string
	// Read is the token's Live list as the caller read it: the write is conditioned on it, so
	// of racing refreshes of one token the first to write wins and the others change nothing.
	Read []string
	// Live is the list the write sets.
	Live []string
}

// Retry is a repeat, within the client's retry window, of a refresh token already spent: a
// new rotation whose write retires the tokens the first spend issued (its Successors).
type Retry struct {
	// Token is the spent refresh token as GetToken returned it: its SpentAt and Successors are
	// what the write is conditioned on.
	Token Token
	// Window is the client's RefreshReuseInterval: the retry must come within it of SpentAt.
	Window time.Duration
}

// AuthRequest is a pending authorization request between the authorize call and the user's
// answer on our pages. It is keyed by an id the pages carry, and bound to a CSRF token.
type AuthRequest struct {
	ID                  string `json:"id" dynamodbav:"id"`
	ClientID            string `json:"client_id" dynamodbav:"client_id"`
	RedirectURI         string `json:"redirect_uri" dynamodbav:"redirect_uri"`
	Scopes              Scopes `json:"scopes" dynamodbav:"scopes"`
	State               string `json:"state,omitempty" dynamodbav:"state,omitempty"`
	Nonce               string `json:"nonce,omitempty" dynamodbav:"nonce,omitempty"`
	CodeChallenge       string `json:"code_challenge,omitempty" dynamodbav:"code_challenge,omitempty"`
	CodeChallengeMethod string `json:"code_challenge_method,omitempty" dynamodbav:"code_challenge_method,omitempty"`
	Prompt              string `json:"prompt,omitempty" dynamodbav:"prompt,omitempty"`
	UILocales           string `json:"ui_locales,omitempty" dynamodbav:"ui_locales,omitempty"`
	MaxAge              int64  `json:"max_age,omitempty" dynamodbav:"max_age,omitempty"`
	// DPoPJKT is the DPoP key the request binds its code to (RFC 9449 10).
	DPoPJKT string `json:"dpop_jkt,omitempty" dynamodbav:"dpop_jkt,omitempty"`
	// ACRValues are the authentication context classes asked for (OIDC Core 3.1.2.1).
	ACRValues string `json:"acr_values,omitempty" dynamodbav:"acr_values,omitempty"`
	// AuthorizationDetails are the validated authorization_details asked for (RFC 9396), as
	// the grant will keep them.
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty" dynamodbav:"authorization_details,omitempty"`
	// GrantManagementAction and GrantID are the request's grant_management_action and grant_id
	// (Grant Management for OAuth 2.0, grantmanagement.go), as checked at the request.
	GrantManagementAction string `json:"grant_management_action,omitempty" dynamodbav:"grant_management_action,omitempty"`
	GrantID               string `json:"grant_id,omitempty" dynamodbav:"grant_id,omitempty"`
	// Step, UID and SessionHash are the sign-in's state (package signin owns their meaning):
	// the step the request stands at, and, from the first factor on, the user it is bound to
	// and the hash of that user's session. Empty: no one has signed in on it yet.
	Step        string `json:"step,omitempty" dynamodbav:"step,omitempty"`
	UID         string `json:"uid,omitempty" dynamodbav:"uid,omitempty"`
	SessionHash string `json:"session_hash,omitempty" dynamodbav:"session_hash,omitempty"`
	// PendingTOTP is the secret of an authenticator being enrolled by the bound user, shown to
	// them and kept here until a code proves the app holds it (the request's lifetime at most).
	PendingTOTP string `json:"pending_totp,omitempty" dynamodbav:"pending_totp,omitempty"`
	// Ceremony is the state of a WebAuthn ceremony of this request's step, taken once when the
	// browser answers.
	Ceremony  []byte    `json:"ceremony,omitempty" dynamodbav:"ceremony,omitempty"`
	CSRFHash  string    `json:"csrf_hash" dynamodbav:"csrf_hash"`
	CreatedAt time.Time `json:"created_at" dynamodbav:"created_at"`
	ExpiresAt time.Time `json:"expires_at" dynamodbav:"expires_at"`

	// PaymentNonce is, on a payment request at its payment step, the fresh nonce the passkey
	// challenge is derived from with the details (dynamic linking, dynamic_linking.go).
	PaymentNonce []byte `json:"payment_nonce,omitempty" dynamodbav:"payment_nonce,omitempty"`
	// PaymentEvidence is set by the sign-in at a payment's decision, for Approve to keep on
	// the grant; it is never stored with the request.
	PaymentEvidence *PaymentEvidence `json:"-" dynamodbav:"-"`

	// PushedID and PushedHome name the pushed request (PAR) a pending request of the pages was
	// opened from: the key of its request_uri's record and the home it is kept at. The decision
	// on the request spends that request_uri, once (Service.Approve, Service.Deny). Empty: the
	// request came through the browser.
	PushedID   string `json:"pushed_id,omitempty" dynamodbav:"pushed_id,omitempty"`
	PushedHome string `json:"pushed_home,omitempty" dynamodbav:"pushed_home,omitempty"`
	// ResponseMode is the response mode the request asked for: "" or "query", or "jwt" or
	// "query.jwt" for a signed response (JARM). Every answer to the request uses it.
	ResponseMode string `json:"response_mode,omitempty" dynamodbav:"response_mode,omitempty"`
	// BackchannelRef is, on the local bank app page's approval ceremony (package bankapp),
	// the CIBA request it approves (oauth.BackchannelRequestID); empty on every other request.
	BackchannelRef string `json:"backchannel_ref,omitempty" dynamodbav:"backchannel_ref,omitempty"`
}

// Session is a signed-in user on our pages, keyed by the hash of the session cookie's value.
type Session struct {
	Hash string `json:"hash" dynamodbav:"hash"`
	// SID identifies the session without being its secret (OIDC Front-Channel Logout 1.0 3,
	// Back-Channel Logout 1.0 2.4): id_tokens issued within it carry it as sid, so a logout
	// can name the session; it is not the cookie and cannot be used as one.
	SID       string    `json:"sid,omitempty" dynamodbav:"sid,omitempty"`
	UID       string    `json:"uid" dynamodbav:"uid"`
	AuthTime  time.Time `json:"auth_time" dynamodbav:"auth_time"`
	ExpiresAt time.Time `json:"expires_at" dynamodbav:"expires_at"`
	// AMR are the methods the user signed in with (RFC 8176): pwd; otp, hwk or swk, user and
	// mfa once a second factor was checked.
	AMR []string `json:"amr,omitempty" dynamodbav:"amr,omitempty"`
}
