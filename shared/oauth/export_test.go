package oauth

import "encoding/json"

// ClientKeySetParses counts the registered key sets parsed since the process started (the
// cache of clientKeys missed).
func ClientKeySetParses() int64 { return registeredKeySets.parses.Load() }

// CachedClientKeySets is how many clients' parsed keys are cached.
func CachedClientKeySets() int {
	registeredKeySets.mu.Lock()
	defer registeredKeySets.mu.Unlock()
	return registeredKeySets.entries.Len()
}

// CheckPaymentLink is checkPaymentLink, for the tests of package oauth_test.
func CheckPaymentLink(details json.RawMessage, e *PaymentEvidence) error {
	return checkPaymentLink(details, e)
}
