package authorizer

import (
	"net/url"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// CheckPathParameter refuses a path parameter (an invoice id) that would name another
// resource once the backend decodes it: a path separator ("/", "\"), a dot segment ("." or
// ".."), a control character, or a "%" left after one decoding (a double-encoded separator).
// The value is checked as given and once percent-decoded, since the local server hands the
// decoded value and API Gateway the raw one. Every transport calls this through Authorize,
// before the token is checked, so a refused request costs no store access.
func CheckPathParameter(value string) error {
	decoded := value
	if strings.Contains(value, "%") {
		d, err := url.PathUnescape(value)
		if err != nil {
			return badPathParameter()
		}
		decoded = d
	}
	if decoded == "" || decoded == "." || decoded == ".." || strings.ContainsAny(decoded, `/\%`) {
		return badPathParameter()
	}
	for _, c := range decoded {
		if c < 0x20 || c == 0x7f {
			return badPathParameter()
		}
	}
	return nil
}

func badPathParameter() error {
	return oauth.InvalidRequest("a path parameter may not hold a path separator, a dot segment, a control character or an encoded percent sign")
}
