package embedded

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// The items written on every request (codes, tokens, grants, pending requests, sessions) are
// logged in a compact binary form rather than JSON: JSON's reflection and its time formatting
// were most of a code exchange's cost in this store. Each value starts with codecVersion;
// fields follow in declaration order: strings and string lists length-prefixed (uvarint),
// times as a presence byte and Unix nanoseconds (varint), bools as one byte, integers as
// varints. TestCodec_RoundTripsEveryField fills every field of every type, so a field added to
// a type and forgotten here fails it.

const codecVersion = 1

var errCodec = errors.New("bad binary value")

type enc []byte

func (e enc) str(s string) enc {
	e = binary.AppendUvarint(e, uint64(len(s)))
	return append(e, s...)
}

func (e enc) strs(v []string) enc {
	e = binary.AppendUvarint(e, uint64(len(v)))
	for _, s := range v {
		e = e.str(s)
	}
	return e
}

func (e enc) time(t time.Time) enc {
	if t.IsZero() {
		return append(e, 0)
	}
	return binary.AppendVarint(append(e, 1), t.UnixNano())
}

func (e enc) boolean(v bool) enc {
	if v {
		return append(e, 1)
	}
	return append(e, 0)
}

func (e enc) int(v int64) enc { return binary.AppendVarint(e, v) }

func (e enc) claims(c *oauth.Claims) enc {
	return e.str(c.Email).boolean(c.EmailVerified).str(c.Phone).str(c.Name).str(c.GivenName).
		str(c.FamilyName).str(c.Birthdate).str(c.Gender).str(c.Picture).str(c.Locale).
		int(c.UpdatedAt).str(c.ZoneInfo)
}

func (e enc) grant(g *oauth.Grant) enc {
	e = e.str(g.ID).str(g.ClientID).str(g.UID).strs(g.Scopes).str(g.CompanyProfileID).
		str(g.CompanyUserID).time(g.AuthTime).str(g.Nonce)
	return e.claims(&g.Claims).str(g.CertThumbprint).time(g.CreatedAt).time(g.ExpiresAt)
}

func appendCode(b []byte, c *oauth.Code) []byte {
	e := enc(append(b, codecVersion)).str(c.Hash).grant(&c.Grant)
	return e.str(c.RedirectURI).str(c.CodeChallenge).time(c.ExpiresAt)
}

func appendToken(b []byte, t *oauth.Token) []byte {
	e := enc(append(b, codecVersion)).str(t.Hash).str(t.Kind).strs(t.Scopes).time(t.IssuedAt).
		time(t.ExpiresAt).grant(&t.Grant)
	return e.strs(t.Live).boolean(t.Spent)
}

func appendGrantRecord(b []byte, g *oauth.Grant, revoked bool, tokens []string) []byte {
	return enc(append(b, codecVersion)).grant(g).boolean(revoked).strs(tokens)
}

func appendRequest(b []byte, r *oauth.AuthRequest) []byte {
	e := enc(append(b, codecVersion)).str(r.ID).str(r.ClientID).str(r.RedirectURI).strs(r.Scopes).
		str(r.State).str(r.Nonce).str(r.CodeChallenge).str(r.CodeChallengeMethod).str(r.Prompt)
	return e.str(r.UILocales).int(r.MaxAge).str(r.CSRFHash).time(r.CreatedAt).time(r.ExpiresAt)
}

func appendSession(b []byte, x *oauth.Session) []byte {
	return enc(append(b, codecVersion)).str(x.Hash).str(x.UID).time(x.AuthTime).time(x.ExpiresAt)
}

// dec reads a binary value; the first error sticks and every later read returns zero values.
type dec struct {
	b   []byte
	err error
}

func newDec(b []byte) *dec {
	d := &dec{b: b}
	if len(b) == 0 || b[0] != codecVersion {
		d.err = errCodec
		return d
	}
	d.b = b[1:]
	return d
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCodec
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCodec
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errCodec
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) str() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCodec
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) strs() []string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) { // each string takes a byte at least
		d.err = errCodec
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *dec) time() time.Time {
	if d.byte() == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.int()).UTC()
}

func (d *dec) boolean() bool { return d.byte() != 0 }

// end reports the decoder's error, or errCodec when bytes are left over.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		return errCodec
	}
	return d.err
}

func (d *dec) claims() oauth.Claims {
	return oauth.Claims{Email: d.str(), EmailVerified: d.boolean(), Phone: d.str(), Name: d.str(),
		GivenName: d.str(), FamilyName: d.str(), Birthdate: d.str(), Gender: d.str(), Picture: d.str(),
		Locale: d.str(), UpdatedAt: d.int(), ZoneInfo: d.str()}
}

func (d *dec) grant() oauth.Grant {
	return oauth.Grant{ID: d.str(), ClientID: d.str(), UID: d.str(), Scopes: d.strs(),
		CompanyProfileID: d.str(), CompanyUserID: d.str(), AuthTime: d.time(), Nonce: d.str(),
		Claims: d.claims(), CertThumbprint: d.str(), CreatedAt: d.time(), ExpiresAt: d.time()}
}

func decodeCode(b []byte) (oauth.Code, error) {
	d := newDec(b)
	c := oauth.Code{Hash: d.str(), Grant: d.grant(), RedirectURI: d.str(), CodeChallenge: d.str(), ExpiresAt: d.time()}
	return c, d.end()
}

func decodeToken(b []byte) (oauth.Token, error) {
	d := newDec(b)
	t := oauth.Token{Hash: d.str(), Kind: d.str(), Scopes: d.strs(), IssuedAt: d.time(), ExpiresAt: d.time(),
		Grant: d.grant(), Live: d.strs(), Spent: d.boolean()}
	return t, d.end()
}

func decodeGrantRecord(b []byte) (grantItem, error) {
	d := newDec(b)
	g := grantItem{grant: d.grant(), revoked: d.boolean(), tokens: d.strs()}
	return g, d.end()
}

func decodeRequest(b []byte) (oauth.AuthRequest, error) {
	d := newDec(b)
	r := oauth.AuthRequest{ID: d.str(), ClientID: d.str(), RedirectURI: d.str(), Scopes: d.strs(),
		State: d.str(), Nonce: d.str(), CodeChallenge: d.str(), CodeChallengeMethod: d.str(), Prompt: d.str(),
		UILocales: d.str(), MaxAge: d.int(), CSRFHash: d.str(), CreatedAt: d.time(), ExpiresAt: d.time()}
	return r, d.end()
}

func decodeSession(b []byte) (oauth.Session, error) {
	d := newDec(b)
	x := oauth.Session{Hash: d.str(), UID: d.str(), AuthTime: d.time(), ExpiresAt: d.time()}
	return x, d.end()
}

// appendBinary appends an opPut entry whose value is built by value, without an intermediate
// copy: the value is built after the entry's header with room for a 3-byte length, which is
// then written in place (values are far below 2 MiB; a larger one is moved).
func appendBinary(body []byte, kind byte, key string, value func([]byte) []byte) []byte {
	body = append(body, kind, opPut)
	body = binary.AppendUvarint(body, uint64(len(key)))
	body = append(body, key...)
	at := len(body)
	body = append(body, 0, 0, 0)
	body = value(body)
	n := len(body) - at - 3
	if n >= 1<<21 {
		val := append([]byte(nil), body[at+3:]...)
		return append(binary.AppendUvarint(body[:at], uint64(n)), val...)
	}
	// A 3-byte uvarint, padded: continuation bits on the first two bytes.
	body[at] = byte(n) | 0x80
	body[at+1] = byte(n>>7) | 0x80
	body[at+2] = byte(n >> 14)
	return body
}
