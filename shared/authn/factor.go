package authn

import (
	"context"
	"errors"
	"slices"

	"github.com/acmebank/authserver/shared/oauth"
)

// factorAttempts is how many times a factor update is tried when racing requests change the
// same user's factors; the loser of a race re-reads and re-decides (a TOTP code already
// accepted is then refused as replayed).
const factorAttempts = 5

// updateFactors runs fn against the user's factors with retries on a lost race.
func (s *Service) updateFactors(ctx context.Context, uid string, fn func(oauth.UserFactors) (oauth.UserFactors, error)) error {
	var err error
	for range factorAttempts {
		err = s.factors.UpdateFactors(ctx, uid, fn)
		if !errors.Is(err, oauth.ErrConflict) {
			return err
		}
	}
	return err
}

// addAMR merges methods into amr, and adds mfa once two independent factors are in it: a
// knowledge factor (pwd) with a possession one (otp, hwk, swk), or a passkey verified by the
// user (hwk/swk with user: possession and inherence or a PIN, RFC 8176 and the RTS).
func addAMR(amr []string, methods ...string) []string {
	out := slices.Clone(amr)
	for _, m := range methods {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	possession := slices.Contains(out, oauth.AMROTP) || slices.Contains(out, oauth.AMRHardware) || slices.Contains(out, oauth.AMRSoftware)
	passkeyUV := (slices.Contains(out, oauth.AMRHardware) || slices.Contains(out, oauth.AMRSoftware)) && slices.Contains(out, oauth.AMRUser)
	if (slices.Contains(out, oauth.AMRPassword) && possession || passkeyUV) && !slices.Contains(out, oauth.AMRMFA) {
		out = append(out, oauth.AMRMFA)
	}
	return out
}
