package cfn

import (
	"fmt"
	"regexp"
	"strings"
)

// Resolve is v as CloudFormation sees it under e's conditions: every Fn::If replaced by the
// branch its condition picks, and every AWS::NoValue left out of the mapping or list that holds
// it. Other intrinsic functions (Ref, Fn::Sub, Fn::GetAtt …) are kept as they are, so a test
// can still tell what a value refers to. v is not changed.
func (e *Evaluator) Resolve(v any) (any, error) {
	out, _, err := e.resolve(v)
	return out, err
}

// resolve returns v resolved, and whether it is AWS::NoValue (to be left out).
func (e *Evaluator) resolve(v any) (any, bool, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			if x["Ref"] == "AWS::NoValue" {
				return nil, true, nil
			}
			if arg, ok := x["Fn::If"]; ok {
				a := AsSlice(arg)
				name, _ := a[0].(string)
				if len(a) != 3 || name == "" {
					return nil, false, fmt.Errorf("Fn::If %v: want [condition, then, else]", arg)
				}
				yes, err := e.Cond(name)
				if err != nil {
					return nil, false, err
				}
				if yes {
					return e.resolve(a[1])
				}
				return e.resolve(a[2])
			}
		}
		out := make(map[string]any, len(x))
		for k, c := range x {
			r, none, err := e.resolve(c)
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", k, err)
			}
			if !none {
				out[k] = r
			}
		}
		return out, false, nil
	case []any:
		out := make([]any, 0, len(x))
		for i, c := range x {
			r, none, err := e.resolve(c)
			if err != nil {
				return nil, false, fmt.Errorf("[%d]: %w", i, err)
			}
			if !none {
				out = append(out, r)
			}
		}
		return out, false, nil
	}
	return v, false, nil
}

// Rendered is a template as CloudFormation creates it for one set of parameter values: only
// the resources and outputs whose Condition holds, each resolved (Resolve), without their
// Condition attribute.
type Rendered struct {
	Resources map[string]map[string]any
	Outputs   map[string]map[string]any
}

// Creates reports whether the deployment creates resource id: it has no Condition, or its
// condition holds. An id the template does not have is not created.
func (e *Evaluator) Creates(id string) (bool, error) {
	res, ok := e.tpl.Resources[id]
	if !ok {
		return false, nil
	}
	return e.holds(res)
}

// holds reports whether a resource's or output's Condition, if any, holds.
func (e *Evaluator) holds(res map[string]any) (bool, error) {
	c, ok := res["Condition"].(string)
	if !ok {
		return true, nil
	}
	return e.Cond(c)
}

// Render renders e's template under e's parameters and conditions.
func (e *Evaluator) Render() (*Rendered, error) {
	r := &Rendered{Resources: map[string]map[string]any{}, Outputs: map[string]map[string]any{}}
	for _, part := range []struct {
		from map[string]map[string]any
		to   map[string]map[string]any
	}{{e.tpl.Resources, r.Resources}, {e.tpl.Outputs, r.Outputs}} {
		for id, res := range part.from {
			yes, err := e.holds(res)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			if !yes {
				continue
			}
			out, err := e.Resolve(res)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			m := AsMap(out)
			delete(m, "Condition")
			part.to[id] = m
		}
	}
	return r, nil
}

// subRef matches a ${Name} or ${Name.Attribute} of Fn::Sub (not ${!Literal}).
var subRef = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// References are the logical ids, parameters and pseudo parameters that v names through Ref,
// Fn::GetAtt and Fn::Sub (both forms; a variable Fn::Sub defines itself is not a reference),
// each once.
func References(v any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 1 {
				switch {
				case x["Ref"] != nil:
					if s, ok := x["Ref"].(string); ok {
						seen[s] = true
					}
				case x["Fn::GetAtt"] != nil:
					switch g := x["Fn::GetAtt"].(type) {
					case string:
						seen[strings.SplitN(g, ".", 2)[0]] = true
					case []any:
						if s, ok := g[0].(string); ok {
							seen[s] = true
						}
					}
				case x["Fn::Sub"] != nil:
					s, _ := x["Fn::Sub"].(string)
					own := map[string]any{}
					if a := AsSlice(x["Fn::Sub"]); len(a) == 2 {
						s, _ = a[0].(string)
						own = AsMap(a[1])
						walk(a[1])
					}
					for _, m := range subRef.FindAllStringSubmatch(s, -1) {
						name := strings.SplitN(m[1], ".", 2)[0]
						if _, defined := own[name]; !defined {
							seen[name] = true
						}
					}
					return
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	return out
}
