package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// MaxBodyBytes bounds every request body the service reads.
const MaxBodyBytes = 64 << 10

// readParams reads a token, revoke or introspection request's body, form-encoded (what
// standard clients send) or a JSON object of strings (the documented usage). A parameter given
// twice is invalid_request (RFC 6749 3.1); so are other content types, bodies over
// MaxBodyBytes and malformed encodings.
func readParams(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, oauth.InvalidRequest("Content-Type must be application/x-www-form-urlencoded or application/json")
	}
	// One buffer of the announced length (bounded: the length is the client's word), rather
	// than io.ReadAll's doubling from 512 bytes.
	var buf bytes.Buffer
	buf.Grow(int(min(max(r.ContentLength, 0), MaxBodyBytes)) + bytes.MinRead)
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &oauth.Error{Code: oauth.ErrCodeInvalidRequest, Description: "the request body is too large", Status: http.StatusRequestEntityTooLarge}
		}
		return nil, oauth.InvalidRequest("the request body could not be read")
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		return parseForm(string(body))
	case "application/json":
		return parseJSONObject(body)
	default:
		return nil, oauth.InvalidRequest("Content-Type must be application/x-www-form-urlencoded or application/json")
	}
}

// parseForm decodes a form body with url.ParseQuery and refuses repeated parameters (RFC 6749
// 3.1). A malformed body is reported before a repeated parameter.
func parseForm(body string) (url.Values, error) {
	v, err := url.ParseQuery(body)
	if err != nil {
		return nil, oauth.InvalidRequest("the form body is malformed")
	}
	if err := NoRepeats(v); err != nil {
		return nil, err
	}
	return v, nil
}

// parseJSONObject decodes a flat JSON object whose values are strings (null counts as absent).
// Duplicate keys are refused like repeated form parameters.
// encoding/json alone would take the last of two equal keys, so the object is walked token by
// token to see every key.
func parseJSONObject(body []byte) (url.Values, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	bad := oauth.InvalidRequest("the JSON body must be an object of string values")
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad
	}
	v := url.Values{}
	seen := map[string]bool{} // keys with a null value count as given: null then a value is a repeat
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, bad
		}
		key, _ := kt.(string)
		if seen[key] {
			return nil, oauth.InvalidRequest("the %s parameter is repeated", key)
		}
		seen[key] = true
		vt, err := dec.Token()
		if err != nil {
			return nil, bad
		}
		switch val := vt.(type) {
		case string:
			v[key] = []string{val}
		case nil:
		default:
			return nil, bad
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, bad
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad
	}
	return v, nil
}

// clientCredentials reads how the client authenticates: HTTP Basic with form-encoded id and
// secret (RFC 6749 2.3.1), or client_id and client_secret in the body; never both. The
// certificate of a mutual-TLS connection is added when there is one (RFC 8705).
func clientCredentials(r *http.Request, v url.Values) (oauth.ClientCredentials, error) {
	var c oauth.ClientCredentials
	c.CertThumbprint, c.Cert = ClientCertificate(r)
	// private_key_jwt (RFC 7523 2.2): the assertion names the client; one method only.
	if c.Assertion, c.AssertionType = v.Get("client_assertion"), v.Get("client_assertion_type"); c.Assertion != "" || c.AssertionType != "" {
		if r.Header.Get("Authorization") != "" || v.Get("client_secret") != "" {
			return c, oauth.InvalidRequest("use one client authentication method, not client_assertion and a secret")
		}
		c.ID = oauth.AssertionClientID(c.Assertion)
		if id := v.Get("client_id"); id != "" && id != c.ID {
			return c, oauth.InvalidClient("client authentication failed: client_id is not the client_assertion's sub")
		}
		return c, nil
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, rest, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return c, oauth.InvalidClient("unsupported authentication scheme; use Basic")
		}
		var err error
		if c.ID, c.Secret, err = basicCredentials(rest); err != nil {
			return c, oauth.InvalidClient("malformed Basic credentials")
		}
		if v.Get("client_secret") != "" {
			return c, oauth.InvalidRequest("use one client authentication method, not Basic and client_secret both")
		}
		if id := v.Get("client_id"); id != "" && id != c.ID {
			return c, oauth.InvalidRequest("client_id does not match the Basic credentials")
		}
		return c, nil
	}
	c.ID, c.Secret = v.Get("client_id"), v.Get("client_secret")
	return c, nil
}

// NoRepeats refuses a parameter given more than once (RFC 6749 3.1, 3.2). When several are,
// the first in sorted order is named, so the answer does not depend on map order. A request
// without a repeat, every request a client means, costs one pass over the map and no
// allocation.
func NoRepeats(v url.Values) error {
	var repeated []string
	for k, vs := range v {
		if len(vs) > 1 {
			repeated = append(repeated, k)
		}
	}
	if len(repeated) == 0 {
		return nil
	}
	return oauth.InvalidRequest("the %s parameter is repeated", slices.Min(repeated))
}

// basicCredentials decodes the credentials of an Authorization: Basic header: base64, then
// id:secret, each form-encoded (RFC 6749 2.3.1: the id and secret are
// application/x-www-form-urlencoded before Basic encodes them, which r.BasicAuth does not
// undo). r.BasicAuth itself is not used because it takes exactly one space after the scheme,
// where RFC 7235 2.1 allows one or more.
func basicCredentials(b64 string) (id, secret string, err error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return "", "", err
	}
	id, secret, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", errors.New("no colon in the Basic credentials")
	}
	if id, err = url.QueryUnescape(id); err != nil {
		return "", "", err
	}
	if secret, err = url.QueryUnescape(secret); err != nil {
		return "", "", err
	}
	return id, secret, nil
}

// readClientRequest reads a token, PAR, revocation or introspection request: its parameters
// and how its client authenticates.
func readClientRequest(w http.ResponseWriter, r *http.Request) (url.Values, oauth.ClientCredentials, error) {
	v, err := readParams(w, r)
	if err != nil {
		return nil, oauth.ClientCredentials{}, err
	}
	cred, err := clientCredentials(r, v)
	if err != nil {
		return nil, cred, err
	}
	return v, cred, nil
}
