// Package rar validates rich authorization requests (RFC 9396): the authorization_details a
// client sends at PAR, at the authorization endpoint and at refresh. The deployment declares the
// types it accepts, each with a JSON Schema (draft 2020-12) embedded as a file of schemas/ named
// after the type; they are compiled once, at start, and every detail is checked against its
// type's schema with github.com/santhosh-tekuri/jsonschema/v6. The package knows nothing of
// clients or stores: the caller passes the types a client may use, and gets back the details as
// validated JSON, to keep with the pending request and the grant, or a refusal whose message is
// safe to send (the caller makes it an invalid_authorization_details).
package rar

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds on one authorization_details value, checked before it is parsed: it is stored with the
// pending request (before anyone has authenticated, at the authorization endpoint), the grant
// and every token of the grant, so these bound what a request can make the server keep.
const (
	// MaxBytes bounds the parameter as sent (a JSON array).
	MaxBytes = 8 << 10
	// MaxDetails bounds the number of details in it.
	MaxDetails = 10
)

// The types that ship with the service (schemas/<type>.json).
const (
	TypePaymentInitiation  = "payment_initiation"
	TypeAccountInformation = "account_information"
)

//go:embed schemas/*.json
var shippedSchemas embed.FS

// Registry is the set of authorization details types a deployment accepts, each with its
// compiled schema. It is read-only after Compile, so one is shared by every request.
type Registry struct {
	schemas map[string]*jsonschema.Schema
	names   []string
}

// Shipped is the registry of the types that ship with the service (payment_initiation and
// account_information), compiled on the first call and shared after.
var Shipped = sync.OnceValues(func() (*Registry, error) {
	sub, err := fs.Sub(shippedSchemas, "schemas")
	if err != nil {
		return nil, fmt.Errorf("rar: shipped schemas: %w", err)
	}
	return Compile(sub)
})

// Compile compiles every <type>.json of fsys as the schema of the type it is named after. A
// schema must be draft 2020-12 and must pin its type member to its name (a const), so that a
// detail can never be checked against another type's schema.
func Compile(fsys fs.FS) (*Registry, error) {
	files, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, fmt.Errorf("rar: list schemas: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date, uri and iban are rules here, not annotations
	c.RegisterFormat(&jsonschema.Format{Name: "iban", Validate: validateIBAN})
	r := &Registry{schemas: map[string]*jsonschema.Schema{}}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".json")
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("rar: read schema %s: %w", f, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("rar: parse schema %s: %w", f, err)
		}
		if err := pinsType(doc, name); err != nil {
			return nil, fmt.Errorf("rar: schema %s: %w", f, err)
		}
		loc := "urn:acmebank:authorization_details:" + name
		if err := c.AddResource(loc, doc); err != nil {
			return nil, fmt.Errorf("rar: add schema %s: %w", f, err)
		}
		sch, err := c.Compile(loc)
		if err != nil {
			return nil, fmt.Errorf("rar: compile schema %s: %w", f, err)
		}
		r.schemas[name] = sch
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

// pinsType checks that a schema requires its type member to be name.
func pinsType(doc any, name string) error {
	obj, _ := doc.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	typ, _ := props["type"].(map[string]any)
	required, _ := obj["required"].([]any)
	if typ["const"] != name || !slices.Contains(required, any("type")) {
		return fmt.Errorf("its type member must be required and be the const %q", name)
	}
	return nil
}

// Types are the registered types, sorted (discovery's authorization_details_types_supported).
func (r *Registry) Types() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.names)
}

// Has reports whether typ is a registered type.
func (r *Registry) Has(typ string) bool {
	return r != nil && r.schemas[typ] != nil
}

// Error is a refused authorization_details value; its message is safe to send to the client
// (it names the detail and where it fails, never quoting the value).
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &Error{msg: fmt.Sprintf(format, args...)} }

// Validate checks an authorization_details value raw, as sent (a JSON array of objects, each
// with a type), for a client that may use the types allowed, and returns it compacted, as it
// is kept. The rules, in order, each a refusal (*Error): at most MaxBytes; a JSON array of 1
// to MaxDetails objects; each with a string type that is registered, that the client may use,
// and that its type's schema accepts.
func (r *Registry) Validate(raw string, allowed []string) (json.RawMessage, error) {
	if len(raw) > MaxBytes {
		return nil, refuse("authorization_details may be at most %d bytes", MaxBytes)
	}
	details, err := parse([]byte(raw))
	if err != nil {
		return nil, err
	}
	if len(details) > MaxDetails {
		return nil, refuse("authorization_details may hold at most %d details", MaxDetails)
	}
	for i, d := range details {
		obj, ok := d.(map[string]any)
		if !ok {
			return nil, refuse("authorization_details[%d] is not a JSON object", i)
		}
		typ, ok := obj["type"].(string)
		switch {
		case !ok:
			return nil, refuse("authorization_details[%d] has no type (a string)", i)
		case !r.Has(typ):
			return nil, refuse("authorization_details[%d] is of an unknown type", i)
		case !slices.Contains(allowed, typ):
			return nil, refuse("authorization_details[%d]: the client is not registered for the type %s", i, typ)
		}
		if err := r.schemas[typ].Validate(d); err != nil {
			return nil, refuse("authorization_details[%d] (%s) does not match its schema: %s", i, typ, schemaFault(err))
		}
	}
	var out bytes.Buffer
	if err := json.Compact(&out, []byte(raw)); err != nil {
		return nil, refuse("authorization_details is not valid JSON") // parse accepted it: not reached
	}
	return out.Bytes(), nil
}

// parse reads an authorization_details value as a non-empty JSON array, numbers kept exact.
func parse(raw []byte) ([]any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, refuse("authorization_details is not valid JSON")
	}
	details, ok := v.([]any)
	switch {
	case !ok:
		return nil, refuse("authorization_details must be a JSON array of objects")
	case len(details) == 0:
		return nil, refuse("authorization_details must hold at least one detail")
	}
	return details, nil
}

// schemaFault names where a detail fails its schema and the keyword it fails: the single
// deepest failure, or the first point where the failures branch (a oneOf none of whose
// alternatives match). The value itself is not quoted.
func schemaFault(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "invalid"
	}
	for len(ve.Causes) == 1 {
		ve = ve.Causes[0]
	}
	at := "/" + strings.Join(ve.InstanceLocation, "/")
	kw := "schema"
	if ve.ErrorKind != nil {
		if p := ve.ErrorKind.KeywordPath(); len(p) > 0 {
			kw = p[len(p)-1]
		}
	}
	return fmt.Sprintf("at %s (%s)", at, kw)
}

// ibanShape is an IBAN's form (ISO 13616): a country code, two check digits and 11 to 30
// capital letters or digits.
var ibanShape = regexp.MustCompile(`^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`)

// validateIBAN is the iban format: ibanShape, and the checksum (mod 97) that catches a mistyped
// character. A value that is not a string is left to the schema's type keyword.
func validateIBAN(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if !ibanShape.MatchString(s) {
		return errors.New("an IBAN is a country code, two check digits and 11 to 30 capital letters or digits")
	}
	var digits strings.Builder
	for _, c := range s[4:] + s[:4] {
		if c >= 'A' && c <= 'Z' {
			fmt.Fprintf(&digits, "%d", c-'A'+10)
		} else {
			digits.WriteRune(c)
		}
	}
	n, _ := new(big.Int).SetString(digits.String(), 10)
	if new(big.Int).Mod(n, big.NewInt(97)).Int64() != 1 {
		return errors.New("the IBAN's check digits are wrong")
	}
	return nil
}

// narrowable are, per type, the members a refresh may narrow and how (Covers); every other
// member of a detail must be the granted one's, unchanged. A payment_initiation has none: a
// payment is narrowed only by leaving it out.
var narrowable = map[string]map[string]func(granted, want any) bool{
	TypeAccountInformation: {
		"permissions":    subset,
		"accounts":       subset,
		"locations":      subset,
		"expirationDate": notLater,
	},
}

// Covers checks that want, details a refresh asks for (already Validated), only narrow
// granted (RFC 9396 7.2): each detail of want must be covered by one granted detail of its
// type. A detail covers another when every member of the granted one is in the wanted one and
// equal, except the narrowable members of its type (account_information's permissions,
// accounts and locations, each a subset of the granted list, and expirationDate, on or before
// the granted one), which the wanted one may also add where the granted one has none (an
// absent list is every value; an absent date, no end). So a payment_initiation is covered only
// by itself. A refusal is an *Error.
func Covers(granted, want json.RawMessage) error {
	if len(granted) == 0 {
		return refuse("the grant has no authorization_details to narrow")
	}
	g, err := parse(granted)
	if err != nil {
		return err
	}
	w, err := parse(want)
	if err != nil {
		return err
	}
	for i, d := range w {
		if !slices.ContainsFunc(g, func(gd any) bool { return covers(gd, d) }) {
			return refuse("authorization_details[%d] is not within the grant's authorization_details", i)
		}
	}
	return nil
}

// covers reports whether the granted detail g covers the wanted detail w.
func covers(g, w any) bool {
	gm, ok1 := g.(map[string]any)
	wm, ok2 := w.(map[string]any)
	if !ok1 || !ok2 || gm["type"] != wm["type"] {
		return false
	}
	typ, _ := gm["type"].(string)
	rules := narrowable[typ]
	for k, gv := range gm {
		wv, ok := wm[k]
		if !ok {
			return false // leaving out a member can widen (an absent list is every value)
		}
		if rule := rules[k]; rule != nil {
			if !rule(gv, wv) {
				return false
			}
		} else if !reflect.DeepEqual(gv, wv) {
			return false
		}
	}
	for k := range wm {
		if _, ok := gm[k]; !ok && rules[k] == nil {
			return false
		}
	}
	return true
}

// subset reports whether every element of the list want is in the list granted.
func subset(granted, want any) bool {
	gl, ok1 := granted.([]any)
	wl, ok2 := want.([]any)
	if !ok1 || !ok2 {
		return false
	}
	for _, x := range wl {
		if !slices.ContainsFunc(gl, func(y any) bool { return reflect.DeepEqual(x, y) }) {
			return false
		}
	}
	return true
}

// notLater reports whether the date want (YYYY-MM-DD, checked by the schema) is on or before
// granted: such dates order as strings.
func notLater(granted, want any) bool {
	gs, ok1 := granted.(string)
	ws, ok2 := want.(string)
	return ok1 && ok2 && ws <= gs
}
