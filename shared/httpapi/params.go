package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/acmebank/authserver/shared/oauth"
)

// MaxBodyBytes bounds every request body the service reads.
const MaxBodyBytes = 64 << 10

// readParams reads a token, revoke or introspection request's body, form-encoded (what
// standard clients send) or a JSON object of strings (the documented usage). A parameter given
// twice is invalid_request (RFC 6749 3.1); so are other content types, bodies over
// MaxBodyBytes and malformed encodings.
func readParams(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	mt, err := mediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, oauth.InvalidRequest("Content-Type must be application/x-www-form-urlencoded or application/json")
	}
	body, err := readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &oauth.Error{Code: oauth.ErrCodeInvalidRequest, Description: "the request body is too large", Status: http.StatusRequestEntityTooLarge}
		}
		return nil, oauth.InvalidRequest("the request body could not be read")
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		return parseForm(body)
	case "application/json":
		return parseJSONObject(body)
	default:
		return nil, oauth.InvalidRequest("Content-Type must be application/x-www-form-urlencoded or application/json")
	}
}

// mediaType is mime.ParseMediaType's media type, without its parsing (and allocations) for the
// two exact values clients send.
func mediaType(contentType string) (string, error) {
	switch contentType {
	case "application/x-www-form-urlencoded", "application/json":
		return contentType, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return mt, err
}

// bodyPool holds the buffers request bodies are read into before they become a string.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// readBody reads the request body, at most MaxBodyBytes (beyond, the error is
// *http.MaxBytesError and the server closes the connection after the answer), as io.ReadAll
// would, into a pooled buffer: the returned string is the only allocation.
func readBody(w http.ResponseWriter, r *http.Request) (string, error) {
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	lr := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	var err error
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		var n int
		n, err = lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			break
		}
	}
	body := string(b)
	if cap(b) <= 2*MaxBodyBytes {
		*bp = b
		bodyPool.Put(bp)
	}
	if err == io.EOF {
		return body, nil
	}
	return "", err
}

// parseForm decodes a form body as url.ParseQuery does (the same pairs, the same malformed
// bodies refused), refusing repeated parameters. A malformed body is reported before a
// repeated parameter. The values share one backing array, so a body of n parameters costs the
// map and one slice rather than n slices.
func parseForm(body string) (url.Values, error) {
	n := strings.Count(body, "&") + 1
	v := make(url.Values, min(n, 16))
	vals := make([]string, 0, n)
	malformed, hasRepeat, repeated := false, false, ""
	for rest := body; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			malformed = true
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(key)
		if err != nil {
			malformed = true
			continue
		}
		value, err = url.QueryUnescape(value)
		if err != nil {
			malformed = true
			continue
		}
		if _, dup := v[key]; dup {
			if !hasRepeat {
				hasRepeat, repeated = true, key
			}
			continue
		}
		vals = append(vals, value)
		v[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	switch {
	case malformed:
		return nil, oauth.InvalidRequest("the form body is malformed")
	case hasRepeat:
		return nil, oauth.InvalidRequest("the %s parameter is repeated", repeated)
	}
	return v, nil
}

// parseJSONObject decodes a flat JSON object whose values are strings (null counts as absent).
// Duplicate keys are refused like repeated form parameters.
func parseJSONObject(body string) (url.Values, error) {
	dec := json.NewDecoder(strings.NewReader(body))
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
	c.CertThumbprint, c.CertSubjectDN = ClientCertificate(r)
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, rest, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return c, oauth.InvalidClient("unsupported authentication scheme; use Basic")
		}
		raw, err := decodeBasic(strings.TrimSpace(rest))
		if err != nil {
			return c, oauth.InvalidClient("malformed Basic credentials")
		}
		id, secret, ok := strings.Cut(raw, ":")
		if !ok {
			return c, oauth.InvalidClient("malformed Basic credentials")
		}
		if c.ID, err = url.QueryUnescape(id); err != nil {
			return c, oauth.InvalidClient("malformed Basic credentials")
		}
		if c.Secret, err = url.QueryUnescape(secret); err != nil {
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

// noRepeats refuses a parameter given more than once (RFC 6749 3.1).
func noRepeats(v url.Values) error {
	for k, vs := range v {
		if len(vs) > 1 {
			return oauth.InvalidRequest("the %s parameter is repeated", k)
		}
	}
	return nil
}

// decodeBasic decodes standard base64 credentials into a string, through a stack buffer when
// they are short (as credentials are), so that the string is the only allocation.
func decodeBasic(b64 string) (string, error) {
	var src [340]byte
	var dst [255]byte // base64.StdEncoding.DecodedLen(len(src))
	if len(b64) > len(src) {
		raw, err := base64.StdEncoding.DecodeString(b64)
		return string(raw), err
	}
	n := copy(src[:], b64)
	n, err := base64.StdEncoding.Decode(dst[:], src[:n])
	if err != nil {
		return "", err
	}
	return string(dst[:n]), nil
}

// authenticatedRequest reads a token, revocation or introspection request and authenticates
// its client: the one sequence every client-authenticated endpoint starts with.
func authenticatedRequest(w http.ResponseWriter, r *http.Request, svc *oauth.Service) (url.Values, *oauth.Client, oauth.ClientCredentials, error) {
	v, err := readParams(w, r)
	if err != nil {
		return nil, nil, oauth.ClientCredentials{}, err
	}
	cred, err := clientCredentials(r, v)
	if err != nil {
		return nil, nil, cred, err
	}
	client, err := svc.AuthenticateClient(r.Context(), cred)
	if err != nil {
		return nil, nil, cred, err
	}
	return v, client, cred, nil
}
