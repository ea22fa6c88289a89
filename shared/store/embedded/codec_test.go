package embedded

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// fill sets every field of v (a pointer to a struct), recursively, to a distinct non-zero
// value, so that a field the codec forgets comes back zero and fails the comparison.
func fill(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("v" + string(rune('a'+*n%26)) + string(rune('A'+*n/26%26)) + " é<&>\"")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * 1_000_003)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			t.Fatalf("fill: slice of %s", v.Type().Elem())
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(t, s.Index(0), n)
		fill(t, s.Index(1), n)
		v.Set(s)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(*n), int64(*n)*1001).UTC()))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fill: kind %s", v.Kind())
	}
}

func TestCodec_RoundTripsEveryField(t *testing.T) {
	n := 0
	var code oauth.Code
	var tok oauth.Token
	var req oauth.AuthRequest
	var sess oauth.Session
	var grant oauth.Grant
	for _, p := range []any{&code, &tok, &req, &sess, &grant} {
		fill(t, reflect.ValueOf(p).Elem(), &n)
	}
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", name, got, want)
		}
	}
	gotCode, err := decodeCode(appendCode(nil, &code))
	check("Code", gotCode, code, err)
	gotTok, err := decodeToken(appendToken(nil, &tok))
	check("Token", gotTok, tok, err)
	gotReq, err := decodeRequest(appendRequest(nil, &req))
	check("AuthRequest", gotReq, req, err)
	gotSess, err := decodeSession(appendSession(nil, &sess))
	check("Session", gotSess, sess, err)
	hashes := []string{"h1", "h2"}
	gotGrant, err := decodeGrantRecord(appendGrantRecord(nil, &grant, true, hashes))
	check("GrantRecord", gotGrant, grantItem{grant: grant, revoked: true, tokens: hashes}, err)

	// Zero values: empty strings, nil lists and zero times come back as they went.
	var zero oauth.Token
	gotZero, err := decodeToken(appendToken(nil, &zero))
	check("zero Token", gotZero, zero, err)
}

// A value cut short, with bytes left over, or of another codec version is an error, never a
// panic or a half-filled item.
func TestCodec_RefusesDamagedValues(t *testing.T) {
	var tok oauth.Token
	n := 0
	fill(t, reflect.ValueOf(&tok).Elem(), &n)
	good := appendToken(nil, &tok)
	for i := range len(good) {
		if _, err := decodeToken(good[:i]); !errors.Is(err, errCodec) {
			t.Fatalf("decode of the first %d of %d bytes: %v, want errCodec", i, len(good), err)
		}
	}
	if _, err := decodeToken(append(append([]byte{}, good...), 0)); !errors.Is(err, errCodec) {
		t.Fatalf("decode with a byte left over: %v", err)
	}
	other := append([]byte{codecVersion + 1}, good[1:]...)
	if _, err := decodeToken(other); !errors.Is(err, errCodec) {
		t.Fatalf("decode of another version: %v", err)
	}
}

// appendBinary's in-place length must read back as the value's length for every size,
// including the rare value too large for its three reserved bytes.
func TestAppendBinary_LengthPrefixReadsBack(t *testing.T) {
	for _, size := range []int{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<21 + 5} {
		val := make([]byte, size)
		for i := range val {
			val[i] = byte(i)
		}
		body := appendBinary([]byte("prefix"), kindSession, "key", func(b []byte) []byte { return append(b, val...) })
		e, rest, err := nextEntry(body[len("prefix"):])
		if err != nil || len(rest) != 0 || e.key != "key" || len(e.val) != size || (size > 0 && e.val[size-1] != val[size-1]) {
			t.Fatalf("size %d: entry %v/%d bytes, rest %d, err %v", size, e.key, len(e.val), len(rest), err)
		}
	}
}
