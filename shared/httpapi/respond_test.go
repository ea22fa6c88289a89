package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// The token response carries exactly the documented fields (id_token only when issued), with
// the headers of every JSON answer: JSON, never cached (RFC 6749 5.1).
func TestWriteJSON_TokenResponseFieldsAndHeaders(t *testing.T) {
	full := &oauth.TokenResponse{AccessToken: "at_x", TokenType: "Bearer", ExpiresIn: 3600, RefreshToken: "rt_x",
		Scope: "openid email", IDToken: "eyJ.eyJ.sig", Metadata: oauth.TokenMetadata{UID: "u", CompanyProfileID: "cp", CompanyUserID: "cu"}}
	noID := *full
	noID.IDToken = ""
	meta := map[string]any{"uid": "u", "companyProfileId": "cp", "companyUserId": "cu"}
	want := map[string]any{"access_token": "at_x", "token_type": "Bearer", "expires_in": 3600.0, "refresh_token": "rt_x",
		"scope": "openid email", "id_token": "eyJ.eyJ.sig", "metadata": meta}
	wantNoID := map[string]any{"access_token": "at_x", "token_type": "Bearer", "expires_in": 3600.0, "refresh_token": "rt_x",
		"scope": "openid email", "metadata": meta}
	for name, c := range map[string]struct {
		resp *oauth.TokenResponse
		want map[string]any
	}{"openid": {full, want}, "no id_token": {&noID, wantNoID}} {
		w := httptest.NewRecorder()
		writeJSON(w, 200, c.resp)
		var got map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: body %s (%v), want %v", name, w.Body, err, c.want)
		}
		for k, v := range map[string]string{"Content-Type": "application/json;charset=UTF-8", "Cache-Control": "no-store", "Pragma": "no-cache"} {
			if w.Header().Get(k) != v {
				t.Errorf("%s: %s = %q, want %q", name, k, w.Header().Get(k), v)
			}
		}
	}
}
