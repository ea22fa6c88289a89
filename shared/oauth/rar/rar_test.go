package rar

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The RFC 9396 section 2 examples, with every optional member filled in.
const (
	payment = `{"type":"payment_initiation","locations":["https://api.acmebank.example/payments"],"actions":["initiate","status"],` +
		`"instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A",` +
		`"creditorAccount":{"iban":"DE02100100109307118603"},"remittanceInformationUnstructured":"Ref Number Merchant",` +
		`"requestedExecutionDate":"2026-12-01"}`
	accounts = `{"type":"account_information","locations":["https://api.acmebank.example/accounts"],` +
		`"accounts":[{"iban":"DE02100100109307118603"},{"schemeName":"UK.OBIE.SortCodeAccountNumber","identification":"20000319470104"}],` +
		`"permissions":["balances","transactions"],"expirationDate":"2027-01-31"}`
)

var bothTypes = []string{TypePaymentInitiation, TypeAccountInformation}

func shipped(t *testing.T) *Registry {
	t.Helper()
	r, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mutate returns the detail doc (a JSON object) with the member at the slash-separated path
// set to value (JSON), or deleted when value is "".
func mutate(t *testing.T, doc, path, value string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(path, "/")
	m := v
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	last := parts[len(parts)-1]
	if value == "" {
		delete(m, last)
	} else {
		var x any
		if err := json.Unmarshal([]byte(value), &x); err != nil {
			t.Fatal(err)
		}
		m[last] = x
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// withoutRule is the shipped registry with the schema keyword at pointer (in the type's schema)
// removed: what the registry would accept if that rule were not written.
func withoutRule(t *testing.T, typ, pointer string) *Registry {
	t.Helper()
	raw, err := fs.ReadFile(shippedSchemas, "schemas/"+typ+".json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	var node any = doc
	for _, p := range parts[:len(parts)-1] {
		switch n := node.(type) {
		case map[string]any:
			node = n[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil {
				t.Fatalf("pointer %s: %v", pointer, err)
			}
			node = n[i]
		}
	}
	last := parts[len(parts)-1]
	switch n := node.(type) {
	case map[string]any:
		if n[last] == nil || last == "required" { // the type must stay required (pinsType)
			t.Fatalf("no keyword at %s in %s (name a required member: /required/<name>)", pointer, typ)
		}
		delete(n, last)
	case []any: // a member of a required list: that member is no longer required
		parent := parts[len(parts)-2]
		kept := slices.DeleteFunc(slices.Clone(n), func(x any) bool { return x == last })
		if len(kept) == len(n) {
			t.Fatalf("%s is not in %s", last, pointer)
		}
		parentNode := any(doc)
		for _, p := range parts[:len(parts)-2] {
			parentNode = parentNode.(map[string]any)[p]
		}
		parentNode.(map[string]any)[parent] = kept
	default:
		t.Fatalf("no keyword at %s in %s", pointer, typ)
	}
	changed, _ := json.Marshal(doc)
	files := fstest.MapFS{}
	for _, other := range bothTypes {
		b, _ := fs.ReadFile(shippedSchemas, "schemas/"+other+".json")
		files[other+".json"] = &fstest.MapFile{Data: b}
	}
	files[typ+".json"] = &fstest.MapFile{Data: changed}
	r, err := Compile(files)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestShippedExamples_AreAccepted(t *testing.T) {
	r := shipped(t)
	for _, d := range []string{payment, accounts, `{"type":"account_information","permissions":["details"]}`,
		`{"type":"payment_initiation","instructedAmount":{"currency":"JPY","amount":"5000"},"creditorName":"A","creditorAccount":{"bban":"12345678"}}`,
		`{"type":"payment_initiation","instructedAmount":{"currency":"BHD","amount":"0.005"},"creditorName":"A","creditorAccount":{"iban":"GB82WEST12345698765432"}}`} {
		got, err := r.Validate(" [ "+d+" ] ", bothTypes)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if string(got) != "["+d+"]" {
			t.Errorf("kept %s, want the compacted value", got)
		}
	}
	if got := r.Types(); strings.Join(got, " ") != "account_information payment_initiation" {
		t.Errorf("Types() = %v", got)
	}
}

// Each case breaks one rule of a type's schema; without that keyword (rule, a JSON pointer into
// the schema) the same detail is accepted, so each case fails if its rule is removed.
func TestSchemaRules_EachRefusesItsViolation(t *testing.T) {
	tooLong := `"` + strings.Repeat("x", 141) + `"`
	var bbans []string
	for i := range 21 {
		bbans = append(bbans, fmt.Sprintf(`{"bban":"%d"}`, i))
	}
	many := "[" + strings.Join(bbans, ",") + "]"
	for _, c := range []struct {
		name, base, path, value, rule, at string
	}{
		{"payment needs an amount", payment, "instructedAmount", "", "/required/instructedAmount", "at / (required)"},
		{"payment needs a creditor name", payment, "creditorName", "", "/required/creditorName", "(required)"},
		{"payment needs a creditor account", payment, "creditorAccount", "", "/required/creditorAccount", "(required)"},
		{"payment has no other members", payment, "debtorAccount", `{"iban":"DE02100100109307118603"}`, "/additionalProperties", "(additionalProperties)"},
		{"payment actions are initiate, status, cancel", payment, "actions", `["refund"]`, "/properties/actions/items/enum", "at /actions/0 (enum)"},
		{"payment actions are not empty", payment, "actions", `[]`, "/properties/actions/minItems", "(minItems)"},
		{"payment actions are not repeated", payment, "actions", `["status","status"]`, "/properties/actions/uniqueItems", "(uniqueItems)"},
		{"locations are https", payment, "locations", `["http://api.acmebank.example/payments"]`, "/$defs/locations/items/pattern", "at /locations/0 (pattern)"},
		{"locations are URIs", payment, "locations", `["https://api acmebank.example/"]`, "/$defs/locations/items/format", "(format)"},
		{"locations are not empty", payment, "locations", `[]`, "/$defs/locations/minItems", "(minItems)"},
		{"currency is three capitals", payment, "instructedAmount/currency", `"eur"`, "/properties/instructedAmount/properties/currency/pattern", "at /instructedAmount/currency (pattern)"},
		{"amount has at most three decimals", payment, "instructedAmount/amount", `"12.3456"`, "/properties/instructedAmount/properties/amount/pattern", "at /instructedAmount/amount (pattern)"},
		{"amount is positive", payment, "instructedAmount/amount", `"0.00"`, "/properties/instructedAmount/properties/amount/pattern", "(pattern)"},
		{"amount has no sign", payment, "instructedAmount/amount", `"-5"`, "/properties/instructedAmount/properties/amount/pattern", "(pattern)"},
		{"amount has no leading zero", payment, "instructedAmount/amount", `"012"`, "/properties/instructedAmount/properties/amount/pattern", "(pattern)"},
		{"amount is a string", payment, "instructedAmount/amount", `12`, "/properties/instructedAmount/properties/amount/type", "(type)"},
		{"instructed amount needs a currency", payment, "instructedAmount/currency", "", "/properties/instructedAmount/required/currency", "at /instructedAmount (required)"},
		{"instructed amount has no other members", payment, "instructedAmount/fx", `"1"`, "/properties/instructedAmount/additionalProperties", "(additionalProperties)"},
		{"creditor name is not empty", payment, "creditorName", `""`, "/properties/creditorName/minLength", "(minLength)"},
		{"creditor name is at most 140", payment, "creditorName", tooLong, "/properties/creditorName/maxLength", "(maxLength)"},
		{"creditor IBAN has its check digits", payment, "creditorAccount/iban", `"DE02100100109307118604"`, "/$defs/account/oneOf/0/properties/iban/format", "at /creditorAccount"},
		{"creditor account names one scheme", payment, "creditorAccount", `{}`, "/$defs/account/oneOf", "at /creditorAccount (oneOf)"},
		{"remittance is at most 140", payment, "remittanceInformationUnstructured", tooLong, "/properties/remittanceInformationUnstructured/maxLength", "(maxLength)"},
		{"execution date is a date", payment, "requestedExecutionDate", `"2026-13-01"`, "/properties/requestedExecutionDate/format", "(format)"},
		{"account information needs permissions", accounts, "permissions", "", "/required/permissions", "(required)"},
		{"permissions are from the list", accounts, "permissions", `["payments"]`, "/properties/permissions/items/enum", "at /permissions/0 (enum)"},
		{"permissions are not empty", accounts, "permissions", `[]`, "/properties/permissions/minItems", "(minItems)"},
		{"permissions are not repeated", accounts, "permissions", `["balances","balances"]`, "/properties/permissions/uniqueItems", "(uniqueItems)"},
		{"accounts are not empty", accounts, "accounts", `[]`, "/properties/accounts/minItems", "(minItems)"},
		{"accounts are at most 20", accounts, "accounts", many, "/properties/accounts/maxItems", "(maxItems)"},
		{"accounts' IBANs have their check digits", accounts, "accounts", `[{"iban":"GB82WEST12345698765431"}]`, "/properties/accounts/items/oneOf/0/properties/iban/format", "at /accounts/0"},
		{"expiration is a date", accounts, "expirationDate", `"soon"`, "/properties/expirationDate/format", "(format)"},
		{"account information has no other members", accounts, "balance", `true`, "/additionalProperties", "(additionalProperties)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := mutate(t, c.base, c.path, c.value)
			var typ struct{ Type string }
			_ = json.Unmarshal([]byte(d), &typ)
			_, err := shipped(t).Validate("["+d+"]", bothTypes)
			if _, ok := err.(*Error); !ok || !strings.Contains(err.Error(), c.at) {
				t.Fatalf("Validate = %v, want a refusal %q", err, c.at)
			}
			if _, err := withoutRule(t, typ.Type, c.rule).Validate("["+d+"]", bothTypes); err != nil {
				t.Fatalf("without %s the detail is still refused: %v", c.rule, err)
			}
		})
	}
}

func TestValidate_RefusesWhatIsNotDetailsOfTheClientsTypes(t *testing.T) {
	r := shipped(t)
	big := `[` + strings.Repeat(" ", MaxBytes) + payment + `]`
	eleven := `[` + strings.TrimSuffix(strings.Repeat(payment+",", MaxDetails+1), ",") + `]`
	ten := `[` + strings.TrimSuffix(strings.Repeat(payment+",", MaxDetails), ",") + `]`
	if _, err := r.Validate(ten, bothTypes); err != nil {
		t.Fatalf("%d details refused: %v", MaxDetails, err)
	}
	for _, c := range []struct {
		name, raw string
		allowed   []string
		want      string
	}{
		{"over MaxBytes", big, bothTypes, "at most 8192 bytes"},
		{"over MaxDetails", eleven, bothTypes, "at most 10 details"},
		{"not JSON", `[{"type":`, bothTypes, "not valid JSON"},
		{"an object, not an array", payment, bothTypes, "must be a JSON array"},
		{"a JSON string of the array", `"[` + strings.ReplaceAll(payment, `"`, `\"`) + `]"`, bothTypes, "must be a JSON array"},
		{"an empty array", `[]`, bothTypes, "at least one detail"},
		{"an element that is not an object", `[` + payment + `,"x"]`, bothTypes, "authorization_details[1] is not a JSON object"},
		{"no type", `[{"permissions":["balances"]}]`, bothTypes, "has no type"},
		{"a type that is not a string", `[{"type":7}]`, bothTypes, "has no type"},
		{"an unknown type", `[{"type":"openid_credential"}]`, bothTypes, "unknown type"},
		{"a type the client is not registered for", `[` + payment + `]`, []string{TypeAccountInformation}, "not registered for the type payment_initiation"},
		{"a client registered for none", `[` + accounts + `]`, nil, "not registered for the type account_information"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Validate(c.raw, c.allowed)
			if _, ok := err.(*Error); !ok || !strings.Contains(err.Error(), c.want) || got != nil {
				t.Fatalf("Validate = %s, %v; want a refusal %q", got, err, c.want)
			}
		})
	}
}

func TestValidate_OfANilRegistryRefusesEveryType(t *testing.T) {
	var r *Registry
	if _, err := r.Validate("["+payment+"]", bothTypes); err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Fatalf("Validate = %v", err)
	}
	if r.Types() != nil {
		t.Fatal("a nil registry lists types")
	}
}

func TestCompile_RefusesASchemaThatDoesNotPinItsType(t *testing.T) {
	for name, schema := range map[string]string{
		"no const":        `{"type":"object","required":["type"],"properties":{"type":{"type":"string"}}}`,
		"another type":    `{"type":"object","required":["type"],"properties":{"type":{"const":"account_information"}}}`,
		"type not needed": `{"type":"object","properties":{"type":{"const":"x"}}}`,
	} {
		if _, err := Compile(fstest.MapFS{"x.json": {Data: []byte(schema)}}); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

func TestCovers_AllowsOnlyNarrowing(t *testing.T) {
	grant := `[` + payment + `,` + accounts + `]`
	for _, c := range []struct {
		name string
		want string
		ok   bool
	}{
		{"all of the grant", grant, true},
		{"the payment alone", `[` + payment + `]`, true},
		{"the accounts alone", `[` + accounts + `]`, true},
		{"fewer permissions", `[` + mutate(t, accounts, "permissions", `["balances"]`) + `]`, true},
		{"fewer accounts", `[` + mutate(t, accounts, "accounts", `[{"iban":"DE02100100109307118603"}]`) + `]`, true},
		{"an earlier expiry", `[` + mutate(t, accounts, "expirationDate", `"2026-12-31"`) + `]`, true},
		{"fewer locations", `[` + mutate(t, accounts, "locations", `["https://api.acmebank.example/accounts"]`) + `]`, true},
		{"another permission", `[` + mutate(t, accounts, "permissions", `["balances","details"]`) + `]`, false},
		{"another account", `[` + mutate(t, accounts, "accounts", `[{"iban":"GB82WEST12345698765432"}]`) + `]`, false},
		{"every account (accounts left out)", `[` + mutate(t, accounts, "accounts", "") + `]`, false},
		{"a later expiry", `[` + mutate(t, accounts, "expirationDate", `"2027-02-01"`) + `]`, false},
		{"no expiry", `[` + mutate(t, accounts, "expirationDate", "") + `]`, false},
		{"another location", `[` + mutate(t, accounts, "locations", `["https://evil.example/"]`) + `]`, false},
		{"a changed amount", `[` + mutate(t, payment, "instructedAmount/amount", `"123.49"`) + `]`, false},
		{"a changed payee", `[` + mutate(t, payment, "creditorName", `"Merchant B"`) + `]`, false},
		{"the payment without its remittance", `[` + mutate(t, payment, "remittanceInformationUnstructured", "") + `]`, false},
		{"the payment with fewer actions", `[` + mutate(t, payment, "actions", `["status"]`) + `]`, false},
		{"the payment with an added member", `[` + mutate(t, payment, "extra", `1`) + `]`, false},
		{"a type the grant does not have", `[{"type":"openid_credential"}]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Covers(json.RawMessage(grant), json.RawMessage(c.want))
			if (err == nil) != c.ok {
				t.Fatalf("Covers = %v, want ok %v", err, c.ok)
			}
		})
	}
	narrower := `[` + mutate(t, accounts, "permissions", `["balances"]`) + `]`
	if err := Covers(json.RawMessage(`[`+mutate(t, accounts, "accounts", "")+`]`), json.RawMessage(narrower)); err != nil {
		t.Errorf("naming accounts where the grant has every account: %v", err)
	}
	if err := Covers(nil, json.RawMessage(`[`+accounts+`]`)); err == nil {
		t.Error("a grant without details covers a detail")
	}
}
