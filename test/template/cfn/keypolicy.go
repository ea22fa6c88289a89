package cfn

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// KeyStatement is one statement of a KMS key policy with its values evaluated.
type KeyStatement struct {
	Sid, Effect string
	// Principals are the AWS principals' ARNs, or "*" for everyone.
	Principals []string
	Actions    []string
	// Conditions are operator → condition key → values.
	Conditions map[string]map[string][]string
}

// KeyPolicy evaluates the KeyPolicy of the KMS key resource key under e's parameters and
// conditions. Fn::GetAtt <resource>.Arn is roleARN(resource) (the tests name the functions'
// roles), Fn::Split and the other intrinsics as CloudFormation evaluates them.
func (e *Evaluator) KeyPolicy(key map[string]any, roleARN func(logicalID string) string) ([]KeyStatement, error) {
	doc, err := e.Resolve(Path(key, "Properties", "KeyPolicy"))
	if err != nil {
		return nil, err
	}
	var values func(v any) ([]string, error)
	values = func(v any) ([]string, error) {
		switch x := v.(type) {
		case nil:
			return nil, nil
		case string:
			return []string{x}, nil
		case []any:
			var out []string
			for _, y := range x {
				vs, err := values(y)
				if err != nil {
					return nil, err
				}
				out = append(out, vs...)
			}
			return out, nil
		case map[string]any:
			if g := AsSlice(x["Fn::GetAtt"]); len(g) == 2 && g[1] == "Arn" {
				return []string{roleARN(fmt.Sprint(g[0]))}, nil
			}
			if sp := AsSlice(x["Fn::Split"]); len(sp) == 2 {
				s, err := e.Eval(sp[1])
				if err != nil {
					return nil, err
				}
				return strings.Split(s, fmt.Sprint(sp[0])), nil
			}
			s, err := e.Eval(x)
			if err != nil {
				return nil, err
			}
			return []string{s}, nil
		}
		return nil, fmt.Errorf("key policy value %v (%T)", v, v)
	}
	var out []KeyStatement
	for _, s := range AsSlice(Path(doc, "Statement")) {
		m := AsMap(s)
		st := KeyStatement{Sid: fmt.Sprint(m["Sid"]), Effect: fmt.Sprint(m["Effect"]), Conditions: map[string]map[string][]string{}}
		if st.Actions, err = values(m["Action"]); err != nil {
			return nil, fmt.Errorf("%s: %w", st.Sid, err)
		}
		if m["Principal"] == "*" {
			st.Principals = []string{"*"}
		} else if st.Principals, err = values(Path(m, "Principal", "AWS")); err != nil {
			return nil, fmt.Errorf("%s: %w", st.Sid, err)
		}
		if r := fmt.Sprint(m["Resource"]); r != "*" {
			return nil, fmt.Errorf("%s: Resource %s, want * (the key itself)", st.Sid, r)
		}
		for op, kv := range AsMap(m["Condition"]) {
			st.Conditions[op] = map[string][]string{}
			for k, v := range AsMap(kv) {
				if st.Conditions[op][k], err = values(v); err != nil {
					return nil, fmt.Errorf("%s: %w", st.Sid, err)
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// KMSRequest is one request to a key as its key policy sees it.
type KMSRequest struct {
	// Principal is the caller's ARN (a role's, as aws:PrincipalArn gives it).
	Principal string
	// IAMAllows: the caller's IAM policies allow the request (AdministratorAccess does). A
	// statement allowing the account's root delegates to them.
	IAMAllows bool
	Action    string
	// Context are the request's condition keys (kms:EncryptionContext:…).
	Context map[string]string
}

// KeyPolicyAllows decides as KMS does: an explicit Deny that applies wins; otherwise a
// statement allowing the principal by name allows, and one allowing the account's root allows
// when the caller's IAM policies do. Actions match with IAM's wildcards. Operators other than
// StringEquals, ArnEquals and ArnNotEquals are an error, so a new one cannot pass unchecked.
func KeyPolicyAllows(stmts []KeyStatement, r KMSRequest) (bool, error) {
	applies := func(s KeyStatement) (byName, byAccount bool, err error) {
		if !slices.ContainsFunc(s.Actions, func(a string) bool { ok, _ := path.Match(a, r.Action); return ok }) {
			return false, false, nil
		}
		for op, kv := range s.Conditions {
			for k, want := range kv {
				got, ok := r.Context[k]
				if k == "aws:PrincipalArn" {
					got, ok = r.Principal, true
				}
				switch op {
				case "StringEquals", "ArnEquals":
					if !ok || !slices.Contains(want, got) {
						return false, false, nil
					}
				case "ArnNotEquals":
					if ok && slices.Contains(want, got) {
						return false, false, nil
					}
				default:
					return false, false, fmt.Errorf("%s: condition operator %s is not understood", s.Sid, op)
				}
			}
		}
		for _, p := range s.Principals {
			switch {
			case p == "*" || p == r.Principal:
				byName = true
			case strings.HasSuffix(p, ":root"):
				byAccount = true
			}
		}
		return byName, byAccount, nil
	}
	allowed := false
	for _, s := range stmts {
		byName, byAccount, err := applies(s)
		if err != nil {
			return false, err
		}
		if s.Effect == "Deny" && (byName || byAccount) {
			return false, nil
		}
		if s.Effect == "Allow" && (byName || (byAccount && r.IAMAllows)) {
			allowed = true
		}
	}
	return allowed, nil
}
