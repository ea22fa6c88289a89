package oauth

import "time"

// Lifetimes of what the service issues; config.Defaults documents the defaults.
type Lifetimes struct {
	AccessToken time.Duration
	// PaymentAccessToken is the access token's lifetime for a payment grant (payment.go):
	// minutes; zero is DefaultPaymentTokenTTL.
	PaymentAccessToken time.Duration
	RefreshToken       time.Duration
	// Grant is absolute: no refresh succeeds after it, however often the client refreshed.
	Grant   time.Duration
	Code    time.Duration
	IDToken time.Duration
	// Session is how long a sign-in's session lasts (package authn keeps sessions).
	Session time.Duration
	// Request is how long a pending authorization request waits for the user on our pages.
	Request time.Duration
}
