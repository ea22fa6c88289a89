package oauth

import "errors"

// ErrBackchannelUnstorable is a BackchannelRequest that no store may keep, because the port's
// rules could not hold for it: without an ID or a client, without an Interval of at least a
// second (racing polls at one instant would all move NextPollAt), or kept for less time than
// its auth_req_id lives (KeepUntil before ExpiresAt, or either missing).
var ErrBackchannelUnstorable = errors.New("backchannel request cannot be stored")

// Storable reports whether r may be stored (BackchannelStore.PutBackchannelRequest): nil, or
// ErrBackchannelUnstorable. Both store adapters call it before they write anything.
func (r *BackchannelRequest) Storable() error {
	if r.ID == "" || r.ClientID == "" || r.Interval < 1 || r.ExpiresAt.IsZero() || r.KeepUntil.Before(r.ExpiresAt) {
		return ErrBackchannelUnstorable
	}
	return nil
}
