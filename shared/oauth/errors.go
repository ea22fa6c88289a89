package oauth

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes of RFC 6749 (4.1.2.1, 5.2), RFC 6750 (3.1) and RFC 7009 (2.2.1).
const (
	ErrCodeInvalidRequest          = "invalid_request"
	ErrCodeInvalidClient           = "invalid_client"
	ErrCodeInvalidGrant            = "invalid_grant"
	ErrCodeUnauthorizedClient      = "unauthorized_client"
	ErrCodeUnsupportedGrantType    = "unsupported_grant_type"
	ErrCodeUnsupportedResponseType = "unsupported_response_type"
	ErrCodeUnsupportedTokenType    = "unsupported_token_type"
	ErrCodeInvalidScope            = "invalid_scope"
	ErrCodeAccessDenied            = "access_denied"
	ErrCodeServerError             = "server_error"
	ErrCodeTemporarilyUnavailable  = "temporarily_unavailable"
	ErrCodeInvalidToken            = "invalid_token"
	ErrCodeInsufficientScope       = "insufficient_scope"
	ErrCodeLoginRequired           = "login_required"
	// OIDC Core 3.1.2.6: request objects, by value or by reference, are not supported.
	ErrCodeRequestNotSupported    = "request_not_supported"
	ErrCodeRequestURINotSupported = "request_uri_not_supported"
	// RFC 9396 5: authorization_details that are malformed, of an unknown type or one the
	// client may not use, that fail their type's schema, or that ask for more than the grant.
	ErrCodeInvalidAuthorizationDetails = "invalid_authorization_details"
	// CIBA Core 11: a poll of a request the customer has not decided yet, one sooner than the
	// interval, and one of a request that expired undecided.
	ErrCodeAuthorizationPending = "authorization_pending"
	ErrCodeSlowDown             = "slow_down"
	ErrCodeExpiredToken         = "expired_token"
)

// Error is the one error type of the protocol: an RFC error code, a description safe to show to
// the caller, and the HTTP status it is answered with. Internal causes are kept in Cause for the
// logs and never sent to a client.
type Error struct {
	Code        string
	Description string
	Status      int
	Cause       error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Description, e.Cause)
	}
	return e.Code + ": " + e.Description
}

func (e *Error) Unwrap() error { return e.Cause }

func newError(code string, status int, format string, args ...any) *Error {
	desc := format
	if len(args) > 0 {
		desc = fmt.Sprintf(format, args...)
	}
	return &Error{Code: code, Description: cleanDescription(desc), Status: status}
}

// cleanDescription keeps error_description within the characters RFC 6749 5.2 allows
// (%x20-21 / %x23-5B / %x5D-7E) and short, since descriptions may quote the caller's input.
// A description that is already clean (every fixed one) is returned as it is.
func cleanDescription(s string) string {
	const max = 200
	if len(s) <= max && isCleanDescription(s) {
		return s
	}
	b := make([]byte, 0, min(len(s), max))
	for i := 0; i < len(s) && len(b) < max; i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			c = '?'
		}
		b = append(b, c)
	}
	return string(b)
}

func isCleanDescription(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// InvalidRequest is RFC 6749's invalid_request: a missing, repeated or malformed parameter.
func InvalidRequest(format string, args ...any) *Error {
	return newError(ErrCodeInvalidRequest, http.StatusBadRequest, format, args...)
}

// InvalidAuthorizationDetails is RFC 9396's invalid_authorization_details (rules: package rar).
func InvalidAuthorizationDetails(format string, args ...any) *Error {
	return newError(ErrCodeInvalidAuthorizationDetails, http.StatusBadRequest, format, args...)
}

// InvalidClient is a failed client authentication; always 401 (RFC 6749 5.2).
func InvalidClient(format string, args ...any) *Error {
	return newError(ErrCodeInvalidClient, http.StatusUnauthorized, format, args...)
}

// InvalidGrant is a code or refresh token that is unknown, expired, spent, revoked or not the
// caller's.
func InvalidGrant(format string, args ...any) *Error {
	return newError(ErrCodeInvalidGrant, http.StatusBadRequest, format, args...)
}

// UnauthorizedClient is a client that may not use the grant or response type it asked for.
func UnauthorizedClient(format string, args ...any) *Error {
	return newError(ErrCodeUnauthorizedClient, http.StatusBadRequest, format, args...)
}

// UnsupportedGrantType is a grant_type the token endpoint does not serve.
func UnsupportedGrantType(format string, args ...any) *Error {
	return newError(ErrCodeUnsupportedGrantType, http.StatusBadRequest, format, args...)
}

// UnsupportedResponseType is a response_type other than code.
func UnsupportedResponseType(format string, args ...any) *Error {
	return newError(ErrCodeUnsupportedResponseType, http.StatusBadRequest, format, args...)
}

// InvalidScope is an unknown scope, or one the client may not ask for.
func InvalidScope(format string, args ...any) *Error {
	return newError(ErrCodeInvalidScope, http.StatusBadRequest, format, args...)
}

// AccessDenied is the user's refusal.
func AccessDenied(format string, args ...any) *Error {
	return newError(ErrCodeAccessDenied, http.StatusForbidden, format, args...)
}

// AuthorizationPending is a CIBA poll of a request the customer has not decided yet (CIBA
// Core 11): the client polls again after the interval.
func AuthorizationPending(format string, args ...any) *Error {
	return newError(ErrCodeAuthorizationPending, http.StatusBadRequest, format, args...)
}

// SlowDown is a CIBA poll sooner than the request's interval (CIBA Core 11).
func SlowDown(format string, args ...any) *Error {
	return newError(ErrCodeSlowDown, http.StatusBadRequest, format, args...)
}

// ExpiredToken is a CIBA poll of a request that expired before the customer decided (CIBA
// Core 11): the client starts a new one.
func ExpiredToken(format string, args ...any) *Error {
	return newError(ErrCodeExpiredToken, http.StatusBadRequest, format, args...)
}

// DeniedAtToken is access_denied answered by the token endpoint (CIBA Core 11: the customer
// denied the request): 400, as every token error of RFC 6749 5.2, where AccessDenied (the
// authorization endpoint's) is 403.
func DeniedAtToken(format string, args ...any) *Error {
	return newError(ErrCodeAccessDenied, http.StatusBadRequest, format, args...)
}

// InvalidToken is a bearer token that is unknown, expired, revoked or bound to another
// certificate (RFC 6750 3.1).
func InvalidToken(format string, args ...any) *Error {
	return newError(ErrCodeInvalidToken, http.StatusUnauthorized, format, args...)
}

// InsufficientScope is a valid bearer token without the scope a resource needs (RFC 6750 3.1).
func InsufficientScope(format string, args ...any) *Error {
	return newError(ErrCodeInsufficientScope, http.StatusForbidden, format, args...)
}

// ServerError wraps an internal failure that retrying will not fix. The cause is logged, never
// shown.
func ServerError(cause error) *Error {
	return &Error{Code: ErrCodeServerError, Description: "the server could not complete the request", Status: http.StatusInternalServerError, Cause: cause}
}

// Unavailable wraps a transient failure of a dependency (store or key service): the client may
// retry later.
func Unavailable(cause error) *Error {
	return &Error{Code: ErrCodeTemporarilyUnavailable, Description: "the service is temporarily unavailable, retry later", Status: http.StatusServiceUnavailable, Cause: cause}
}

// ErrTransient marks a dependency failure worth retrying (throttling, timeouts, 5xx of AWS).
// Adapters wrap such failures with it; AsError turns them into temporarily_unavailable.
var ErrTransient = errors.New("transient dependency failure")

// ErrCapacity is a store refusing a new item because it keeps as much of that kind as it may
// (the embedded store's cap on pending requests): transient, since items are answered or
// expire, so it is answered temporarily_unavailable (503 with Retry-After).
var ErrCapacity = fmt.Errorf("the store is full for now: %w", ErrTransient)

// AsError turns any error into a protocol Error: protocol errors pass through, transient
// dependency failures become temporarily_unavailable, anything else server_error.
func AsError(err error) *Error {
	var oe *Error
	if errors.As(err, &oe) {
		return oe
	}
	if errors.Is(err, ErrTransient) {
		return Unavailable(err)
	}
	return ServerError(err)
}
