package template_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/test/template/cfn"
)

// ownHeaders are the headers the bank backend receives from us alone: the identity the
// authorizer passes on, the caller's address, and the forwarding headers.
var ownHeaders = []string{httpapi.HeaderUID, httpapi.HeaderCompanyProfileID, httpapi.HeaderCompanyUserID, httpapi.HeaderClientID,
	httpapi.HeaderScope, httpapi.HeaderPayment, httpapi.HeaderRealIP, "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// spellings are every way of writing name with "-" or "_" between its words; header names are
// case-insensitive in API Gateway's mappings, so case needs no spelling of its own.
func spellings(name string) []string {
	out := []string{""}
	for i, word := range strings.Split(name, "-") {
		var next []string
		for _, prefix := range out {
			if i == 0 {
				next = append(next, word)
				continue
			}
			next = append(next, prefix+"-"+word, prefix+"_"+word)
		}
		out = next
	}
	return out
}

// TestRoutes_BankRoutesGiveTheBackendOnlyOurIdentityHeaders checks the transformed template:
// every protected route's integration overwrites the identity headers with the authorizer's
// context and X-Real-Ip with the caller's source address, and removes every other spelling of
// them (and of the forwarding headers, whose own spelling API Gateway reserves and sets), so a
// CGI or WSGI backend, which reads "_" as "-", cannot be handed a caller's X_Auth_Uid.
func TestRoutes_BankRoutesGiveTheBackendOnlyOurIdentityHeaders(t *testing.T) {
	out := samTransform(t)
	paths := cfn.AsMap(cfn.Path(out.Resources["HttpApi"], "Properties", "Body", "paths"))
	overwrite := map[string]string{
		httpapi.HeaderUID: "$context.authorizer.uid", httpapi.HeaderCompanyProfileID: "$context.authorizer.companyProfileId",
		httpapi.HeaderCompanyUserID: "$context.authorizer.companyUserId", httpapi.HeaderClientID: "$context.authorizer.client_id",
		httpapi.HeaderScope: "$context.authorizer.scope", httpapi.HeaderPayment: "$context.authorizer.payment", httpapi.HeaderRealIP: "$context.identity.sourceIp",
	}
	seen := 0
	for route := range protectedRoutes {
		method, path, _ := strings.Cut(route, " ")
		op := cfn.AsMap(cfn.AsMap(paths[path])[strings.ToLower(method)])
		if op == nil {
			t.Errorf("%s: not in the transformed API", route)
			continue
		}
		seen++
		params := map[string]any{}
		for k, v := range cfn.AsMap(cfn.AsMap(op["x-amazon-apigateway-integration"])["requestParameters"]) {
			params[strings.ToLower(k)] = v
		}
		for _, name := range ownHeaders {
			if want, ok := overwrite[name]; ok {
				if got := params["overwrite:header."+strings.ToLower(name)]; got != want {
					t.Errorf("%s: overwrite:header.%s = %v, want %s", route, name, got, want)
				}
			}
			for _, s := range spellings(name) {
				if s == name {
					continue
				}
				if _, ok := params["remove:header."+strings.ToLower(s)]; !ok {
					t.Errorf("%s: the caller's %s reaches the backend (no remove:header.%s)", route, s, s)
				}
			}
		}
	}
	if seen != len(protectedRoutes) {
		t.Errorf("%d protected routes checked, want %d", seen, len(protectedRoutes))
	}
	// As CloudFormation evaluates the integrations for each value of their one condition
	// (HasSunset: the deprecated routes' Sunset response header): the identity headers are the
	// same either way, and Sunset is sent exactly when a date is set.
	for _, sunset := range []string{"", "Wed, 30 Jun 2027 00:00:00 GMT"} {
		ev := out.NewEvaluator(map[string]string{"DeprecationSunset": sunset})
		sunsets := 0
		for route := range protectedRoutes {
			method, path, _ := strings.Cut(route, " ")
			integration := cfn.AsMap(cfn.AsMap(cfn.AsMap(paths[path])[strings.ToLower(method)])["x-amazon-apigateway-integration"])
			for k, v := range cfn.AsMap(integration["requestParameters"]) {
				got, err := ev.Eval(v)
				if err != nil {
					t.Errorf("Sunset %q, %s: %s does not evaluate: %v", sunset, route, k, err)
				}
				for own, want := range overwrite {
					if strings.EqualFold(k, "overwrite:header."+own) && got != want {
						t.Errorf("Sunset %q, %s: %s = %q, want %q", sunset, route, k, got, want)
					}
				}
			}
			for status, rp := range cfn.AsMap(integration["responseParameters"]) {
				v, ok := cfn.AsMap(rp)["overwrite:header.Sunset"]
				if !ok {
					continue
				}
				sunsets++
				got, err := ev.Eval(v)
				switch {
				case sunset == "" && !errors.Is(err, cfn.ErrNoValue):
					t.Errorf("no sunset date, %s %s: Sunset = %q (%v), want it left out", route, status, got, err)
				case sunset != "" && got != sunset:
					t.Errorf("Sunset %q, %s %s: Sunset = %q (%v)", sunset, route, status, got, err)
				}
			}
		}
		if sunsets == 0 {
			t.Errorf("Sunset %q: no deprecated route's answer carries a Sunset header", sunset)
		}
	}
}
