package rar

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
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
	at := func(path []string) any {
		var node any = doc
		for _, p := range path {
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
		return node
	}
	last := parts[len(parts)-1]
	switch n := at(parts[:len(parts)-1]).(type) {
	case map[string]any:
		if n[last] == nil || last == "required" { // the type must stay required (pinsType)
			t.Fatalf("no keyword at %s in %s (name a required member: /required/<name>)", pointer, typ)
		}
		delete(n, last)
	case []any: // a member of a required list: that member is no longer required
		kept := slices.DeleteFunc(slices.Clone(n), func(x any) bool { return x == last })
		if len(kept) == len(n) {
			t.Fatalf("%s is not in %s", last, pointer)
		}
		at(parts[:len(parts)-2]).(map[string]any)[parts[len(parts)-2]] = kept
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

// schemaRule is a detail that breaks one rule of its type's schema: base with the member at
// path set to value (deleted when ""), refused with a description containing at; rule is the
// JSON pointer of that rule's keyword in the schema (a member of a required list for required).
type schemaRule struct {
	name, base, path, value, rule, at string
}

var (
	tooLong            = `"` + strings.Repeat("x", 141) + `"`
	sixLocations       = `["https://a.example/1","https://a.example/2","https://a.example/3","https://a.example/4","https://a.example/5","https://a.example/6"]`
	longLocation       = `["https://a.example/` + strings.Repeat("x", 500) + `"]`
	longIdentification = `{"schemeName":"X","identification":"` + strings.Repeat("1", 257) + `"}`
	many               = func() string {
		var bbans []string
		for i := range 21 {
			bbans = append(bbans, fmt.Sprintf(`{"bban":"%d"}`, i))
		}
		return "[" + strings.Join(bbans, ",") + "]"
	}()
)

// schemaRules are the cases of every rule of the shipped schemas
// (TestSchemaRules_EveryRuleHasACase).
var schemaRules = []schemaRule{
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
	{"instructed amount needs an amount", payment, "instructedAmount/amount", "", "/properties/instructedAmount/required/amount", "at /instructedAmount (required)"},
	{"remittance is not empty", payment, "remittanceInformationUnstructured", `""`, "/properties/remittanceInformationUnstructured/minLength", "(minLength)"},
	{"locations are at most 5", payment, "locations", sixLocations, "/$defs/locations/maxItems", "(maxItems)"},
	{"locations are not repeated", payment, "locations", `["https://a.example/","https://a.example/"]`, "/$defs/locations/uniqueItems", "(uniqueItems)"},
	{"a location is at most 512", payment, "locations", longLocation, "/$defs/locations/items/maxLength", "(maxLength)"},
	{"an IBAN account needs its iban", payment, "creditorAccount", `{}`, "/$defs/account/oneOf/0/required/iban", "at /creditorAccount (oneOf)"},
	{"an IBAN account has nothing else", payment, "creditorAccount", `{"iban":"DE02100100109307118603","note":"x"}`, "/$defs/account/oneOf/0/additionalProperties", "at /creditorAccount (oneOf)"},
	{"a BBAN account needs its bban", payment, "creditorAccount", `{}`, "/$defs/account/oneOf/1/required/bban", "at /creditorAccount (oneOf)"},
	{"a BBAN account has nothing else", payment, "creditorAccount", `{"bban":"123","note":"x"}`, "/$defs/account/oneOf/1/additionalProperties", "at /creditorAccount (oneOf)"},
	{"a BBAN is capitals and digits", payment, "creditorAccount", `{"bban":"12-34"}`, "/$defs/account/oneOf/1/properties/bban/pattern", "at /creditorAccount (oneOf)"},
	{"another scheme needs its name", payment, "creditorAccount", `{"identification":"1"}`, "/$defs/account/oneOf/2/required/schemeName", "at /creditorAccount (oneOf)"},
	{"another scheme needs the identification", payment, "creditorAccount", `{"schemeName":"X"}`, "/$defs/account/oneOf/2/required/identification", "at /creditorAccount (oneOf)"},
	{"another scheme has nothing else", payment, "creditorAccount", `{"schemeName":"X","identification":"1","note":"x"}`, "/$defs/account/oneOf/2/additionalProperties", "at /creditorAccount (oneOf)"},
	{"a scheme name is letters, digits and dots", payment, "creditorAccount", `{"schemeName":"X Y","identification":"1"}`, "/$defs/account/oneOf/2/properties/schemeName/pattern", "at /creditorAccount (oneOf)"},
	{"an identification is not empty", payment, "creditorAccount", `{"schemeName":"X","identification":""}`, "/$defs/account/oneOf/2/properties/identification/minLength", "at /creditorAccount (oneOf)"},
	{"an identification is at most 256", payment, "creditorAccount", longIdentification, "/$defs/account/oneOf/2/properties/identification/maxLength", "at /creditorAccount (oneOf)"},
	{"account locations are not empty", accounts, "locations", `[]`, "/properties/locations/minItems", "(minItems)"},
	{"account locations are at most 5", accounts, "locations", sixLocations, "/properties/locations/maxItems", "(maxItems)"},
	{"account locations are not repeated", accounts, "locations", `["https://a.example/","https://a.example/"]`, "/properties/locations/uniqueItems", "(uniqueItems)"},
	{"account locations are URIs", accounts, "locations", `["https://api acmebank.example/"]`, "/properties/locations/items/format", "(format)"},
	{"account locations are https", accounts, "locations", `["http://a.example/"]`, "/properties/locations/items/pattern", "(pattern)"},
	{"an account location is at most 512", accounts, "locations", longLocation, "/properties/locations/items/maxLength", "(maxLength)"},
	{"accounts are not repeated", accounts, "accounts", `[{"iban":"DE02100100109307118603"},{"iban":"DE02100100109307118603"}]`, "/properties/accounts/uniqueItems", "(uniqueItems)"},
	{"an account names one scheme", accounts, "accounts", `[{}]`, "/properties/accounts/items/oneOf", "at /accounts/0 (oneOf)"},
	{"an IBAN account (accounts) needs its iban", accounts, "accounts", `[{}]`, "/properties/accounts/items/oneOf/0/required/iban", "at /accounts/0 (oneOf)"},
	{"an IBAN account (accounts) has nothing else", accounts, "accounts", `[{"iban":"DE02100100109307118603","note":"x"}]`, "/properties/accounts/items/oneOf/0/additionalProperties", "at /accounts/0 (oneOf)"},
	{"a BBAN account (accounts) needs its bban", accounts, "accounts", `[{}]`, "/properties/accounts/items/oneOf/1/required/bban", "at /accounts/0 (oneOf)"},
	{"a BBAN account (accounts) has nothing else", accounts, "accounts", `[{"bban":"123","note":"x"}]`, "/properties/accounts/items/oneOf/1/additionalProperties", "at /accounts/0 (oneOf)"},
	{"a BBAN (accounts) is capitals and digits", accounts, "accounts", `[{"bban":"12-34"}]`, "/properties/accounts/items/oneOf/1/properties/bban/pattern", "at /accounts/0 (oneOf)"},
	{"another scheme (accounts) needs its name", accounts, "accounts", `[{"identification":"1"}]`, "/properties/accounts/items/oneOf/2/required/schemeName", "at /accounts/0 (oneOf)"},
	{"another scheme (accounts) needs the identification", accounts, "accounts", `[{"schemeName":"X"}]`, "/properties/accounts/items/oneOf/2/required/identification", "at /accounts/0 (oneOf)"},
	{"another scheme (accounts) has nothing else", accounts, "accounts", `[{"schemeName":"X","identification":"1","note":"x"}]`, "/properties/accounts/items/oneOf/2/additionalProperties", "at /accounts/0 (oneOf)"},
	{"a scheme name (accounts) is letters, digits and dots", accounts, "accounts", `[{"schemeName":"X Y","identification":"1"}]`, "/properties/accounts/items/oneOf/2/properties/schemeName/pattern", "at /accounts/0 (oneOf)"},
	{"an identification (accounts) is not empty", accounts, "accounts", `[{"schemeName":"X","identification":""}]`, "/properties/accounts/items/oneOf/2/properties/identification/minLength", "at /accounts/0 (oneOf)"},
	{"an identification (accounts) is at most 256", accounts, "accounts", "[" + longIdentification + "]", "/properties/accounts/items/oneOf/2/properties/identification/maxLength", "at /accounts/0 (oneOf)"},
}

// Each case breaks one rule of a type's schema; without that keyword the same detail is
// accepted, so each case fails if its rule is removed.
func TestSchemaRules_EachRefusesItsViolation(t *testing.T) {
	for _, c := range schemaRules {
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

// TestSchemaRules_EveryRuleHasACase: every assertion keyword of the shipped schemas (each
// member of a required list counted apart) has a case in schemaRules, but the type member's
// const and requirement, which Compile insists on (pinsType) and which choose the schema, and
// the JSON type keywords, of which one case shows the working (an amount as a number).
func TestSchemaRules_EveryRuleHasACase(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range schemaRules {
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(c.base), &typ)
		covered[typ.Type+c.rule] = true
	}
	keywords := map[string]bool{"required": true, "additionalProperties": true, "enum": true, "const": true, "minItems": true,
		"maxItems": true, "uniqueItems": true, "pattern": true, "format": true, "minLength": true, "maxLength": true, "oneOf": true}
	for _, typ := range bothTypes {
		raw, _ := fs.ReadFile(shippedSchemas, "schemas/"+typ+".json")
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var walk func(n any, at string)
		walk = func(n any, at string) {
			switch n := n.(type) {
			case map[string]any:
				for k, v := range n {
					p := at + "/" + k
					switch {
					case k == "required":
						for _, r := range v.([]any) {
							if q := p + "/" + r.(string); q != "/required/type" && !covered[typ+q] {
								t.Errorf("%s: no case breaks %s", typ, q)
							}
						}
						continue
					case k == "enum" || k == "const":
						if p != "/properties/type/const" && !covered[typ+p] {
							t.Errorf("%s: no case breaks %s", typ, p)
						}
						continue
					case keywords[k] && !covered[typ+p]:
						t.Errorf("%s: no case breaks %s", typ, p)
					}
					walk(v, p)
				}
			case []any:
				for i, v := range n {
					walk(v, fmt.Sprintf("%s/%d", at, i))
				}
			}
		}
		walk(doc, "")
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

func TestShipped_IsCompiledOnceAndShared(t *testing.T) {
	a, errA := Shipped()
	b, errB := Shipped()
	if errA != nil || errB != nil || a != b {
		t.Fatalf("Shipped() = %p, %p (%v, %v): want one registry", a, b, errA, errB)
	}
}

// TestValidate_FiftyConcurrentCallsShareOneRegistry: the compiled registry is shared by every
// request of a function; 50 goroutines validating and narrowing at once (run with -race) each
// get their own answer.
func TestValidate_FiftyConcurrentCallsShareOneRegistry(t *testing.T) {
	r := shipped(t)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			d := fmt.Sprintf(`{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"%d.00"},"creditorName":"A","creditorAccount":{"bban":"%d"}}`, i+1, i)
			got, err := r.Validate("["+d+"]", bothTypes)
			if err != nil || string(got) != "["+d+"]" {
				errs <- fmt.Errorf("%d: %s, %v", i, got, err)
				return
			}
			if _, err := r.Validate(`[{"type":"payment_initiation"}]`, bothTypes); err == nil {
				errs <- fmt.Errorf("%d: an incomplete payment accepted", i)
			}
			if err := Covers(got, got); err != nil {
				errs <- fmt.Errorf("%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkValidate_Payment is the cost of one payment_initiation detail's validation (the
// JSON parse, the schema, the compaction) on the shared registry.
func BenchmarkValidate_Payment(b *testing.B) {
	r, err := Shipped()
	if err != nil {
		b.Fatal(err)
	}
	raw := "[" + payment + "]"
	for b.Loop() {
		if _, err := r.Validate(raw, bothTypes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompile_Shipped is what a function's start pays to compile the shipped schemas.
func BenchmarkCompile_Shipped(b *testing.B) {
	sub, _ := fs.Sub(shippedSchemas, "schemas")
	for b.Loop() {
		if _, err := Compile(sub); err != nil {
			b.Fatal(err)
		}
	}
}
