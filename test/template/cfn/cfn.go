// Package cfn reads template.yaml for the tests: it decodes CloudFormation's YAML with its short
// tags into plain Go values and evaluates the intrinsic functions that parameter-driven values
// use, so the template tests and the Lambda harness can compare the template with the code.
package cfn

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Root is the module root: the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// shortTags maps CloudFormation's YAML short forms to their long function names.
var shortTags = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition",
	"!Sub": "Fn::Sub", "!GetAtt": "Fn::GetAtt", "!If": "Fn::If", "!Equals": "Fn::Equals",
	"!Not": "Fn::Not", "!And": "Fn::And", "!Or": "Fn::Or", "!Join": "Fn::Join",
	"!Select": "Fn::Select", "!Split": "Fn::Split", "!FindInMap": "Fn::FindInMap",
	"!Base64": "Fn::Base64", "!ImportValue": "Fn::ImportValue", "!GetAZs": "Fn::GetAZs",
	"!Cidr": "Fn::Cidr", "!Transform": "Fn::Transform",
}

// decodeNode turns a yaml.Node into maps, slices and scalars, expanding short tags.
func decodeNode(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		return decodeNode(n.Content[0])
	case yaml.AliasNode:
		return decodeNode(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := decodeNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := decodeNode(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int", "!!float", "!!bool", "!!null":
			if err := n.Decode(&v); err != nil {
				return nil, err
			}
		default:
			v = n.Value
		}
		if n.Tag == "!GetAtt" {
			a, b, _ := strings.Cut(n.Value, ".")
			v = []any{a, b}
		}
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		fn, ok := shortTags[n.Tag]
		if !ok {
			return nil, fmt.Errorf("line %d: unknown tag %s", n.Line, n.Tag)
		}
		return map[string]any{fn: v}, nil
	}
	return v, nil
}

// Template is template.yaml, decoded.
type Template struct {
	Raw        map[string]any
	Parameters map[string]map[string]any
	Conditions map[string]any
	Resources  map[string]map[string]any
	Outputs    map[string]map[string]any
	Globals    map[string]any
	Rules      map[string]any
}

// Load reads and decodes template.yaml at the module root.
func Load() (*Template, error) {
	dir, err := Root()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "template.yaml"))
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse decodes a template's YAML.
func Parse(b []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("template is not YAML: %w", err)
	}
	v, err := decodeNode(&doc)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("template is not a mapping")
	}
	tpl := &Template{Raw: raw, Parameters: map[string]map[string]any{}, Resources: map[string]map[string]any{}, Outputs: map[string]map[string]any{}}
	for k, p := range AsMap(raw["Parameters"]) {
		tpl.Parameters[k] = AsMap(p)
	}
	for k, r := range AsMap(raw["Resources"]) {
		tpl.Resources[k] = AsMap(r)
	}
	for k, o := range AsMap(raw["Outputs"]) {
		tpl.Outputs[k] = AsMap(o)
	}
	tpl.Conditions = AsMap(raw["Conditions"])
	tpl.Rules = AsMap(raw["Rules"])
	tpl.Globals = AsMap(AsMap(raw["Globals"])["Function"])
	return tpl, nil
}

// AsMap is v as a mapping (nil when it is not one).
func AsMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// AsSlice is v as a sequence (nil when it is not one).
func AsSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// path walks nested maps: Path(v, "Properties", "Events").
func Path(v any, keys ...string) any {
	for _, k := range keys {
		v = AsMap(v)[k]
	}
	return v
}

// Functions returns the AWS::Serverless::Function resources by logical id.
func (tpl *Template) Functions() map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl.Resources {
		if r["Type"] == "AWS::Serverless::Function" {
			out[id] = r
		}
	}
	return out
}

// GoFunctions are the functions built by the Makefile (BuildMethod makefile).
func (tpl *Template) GoFunctions() map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl.Functions() {
		if Path(r, "Metadata", "BuildMethod") == "makefile" {
			out[id] = r
		}
	}
	return out
}

// FunctionProp is a function property with the Globals' value as fallback.
func (tpl *Template) FunctionProp(fn map[string]any, name string) any {
	if v, ok := AsMap(fn["Properties"])[name]; ok {
		return v
	}
	return tpl.Globals[name]
}

// Env is a function's environment: Globals merged with its own variables.
func (tpl *Template) Env(fn map[string]any) map[string]any {
	env := map[string]any{}
	for k, v := range AsMap(Path(tpl.Globals, "Environment", "Variables")) {
		env[k] = v
	}
	for k, v := range AsMap(Path(fn, "Properties", "Environment", "Variables")) {
		env[k] = v
	}
	return env
}

// Evaluator resolves the intrinsic functions of parameter-driven values for one set of
// parameter values: Ref (parameters, pseudo parameters, resources as their logical id),
// Fn::If with the template's conditions, Fn::Sub (both forms), Fn::Equals/Not/And/Or; and it
// checks the parameters (AllowedPattern, AllowedValues) and the Rules the way CloudFormation
// does before it creates anything.
type Evaluator struct {
	tpl    *Template
	params map[string]string
	// conds are conditions given a value (WithConditions) instead of evaluated.
	conds map[string]bool
}

// WithConditions is e with the named conditions taking the values given, whatever the
// parameters say: to evaluate a value for each value of the conditions it uses.
func (e *Evaluator) WithConditions(conds map[string]bool) *Evaluator {
	return &Evaluator{tpl: e.tpl, params: e.params, conds: conds}
}

// ConditionsIn are the names of the conditions v's Fn::If choose by, nested ones included,
// sorted.
func ConditionsIn(v any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, arg := range x {
				if a := AsSlice(arg); k == "Fn::If" && len(a) == 3 {
					if name, ok := a[0].(string); ok {
						seen[name] = true
					}
				}
				walk(arg)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return slices.Sorted(maps.Keys(seen))
}

// Params are the parameter values e evaluates with (defaults included), for messages.
func (e *Evaluator) Params() map[string]string { return maps.Clone(e.params) }

// NewEvaluator uses the parameters' defaults, overridden by params.
func (tpl *Template) NewEvaluator(params map[string]string) *Evaluator {
	all := map[string]string{"AWS::StackName": "authserver-test", "AWS::Region": "eu-west-1",
		"AWS::AccountId": "123456789012", "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
	for k, p := range tpl.Parameters {
		all[k] = fmt.Sprint(p["Default"])
	}
	for k, v := range params {
		all[k] = v
	}
	return &Evaluator{tpl: tpl, params: all}
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// Eval resolves v to a string, or reports what it cannot resolve.
// ErrNoValue is Eval's answer for a value that evaluates to AWS::NoValue: CloudFormation
// leaves the property out.
var ErrNoValue = errors.New("AWS::NoValue: the property is left out")

func (e *Evaluator) Eval(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int, float64, bool:
		return fmt.Sprint(x), nil
	case map[string]any:
		for fn, arg := range x {
			switch fn {
			case "Ref":
				name := arg.(string)
				if name == "AWS::NoValue" {
					return "", ErrNoValue
				}
				if p, ok := e.params[name]; ok {
					return p, nil
				}
				if _, ok := e.tpl.Resources[name]; ok {
					return "ref-" + name, nil
				}
				return "", fmt.Errorf("Ref to unknown %q", name)
			case "Fn::Join":
				j := AsSlice(arg)
				if len(j) != 2 {
					return "", fmt.Errorf("cannot evaluate Fn::Join %v", arg)
				}
				var parts []string
				for _, v := range AsSlice(j[1]) {
					r, err := e.Eval(v)
					if err != nil {
						return "", err
					}
					parts = append(parts, r)
				}
				return strings.Join(parts, fmt.Sprint(j[0])), nil
			case "Fn::GetAtt":
				// <resource>.Arn of a role (a SAM function's implicit <Function>Role
				// included): the ARN CloudFormation gives it, under the stack's name.
				g := AsSlice(arg)
				if len(g) == 2 && g[1] == "Arn" {
					name := fmt.Sprint(g[0])
					// An EventBridge bus's ARN names it by its Name (CIBA's bus).
					if r := e.tpl.Resources[name]; r != nil && r["Type"] == "AWS::Events::EventBus" {
						bus, err := e.Eval(AsMap(r["Properties"])["Name"])
						if err != nil {
							return "", err
						}
						return "arn:" + e.params["AWS::Partition"] + ":events:" + e.params["AWS::Region"] + ":" + e.params["AWS::AccountId"] + ":event-bus/" + bus, nil
					}
					_, isResource := e.tpl.Resources[name]
					fn, isRole := strings.CutSuffix(name, "Role")
					if _, isFunction := e.tpl.Resources[fn]; isResource || (isRole && isFunction) {
						return "arn:" + e.params["AWS::Partition"] + ":iam::" + e.params["AWS::AccountId"] + ":role/" + e.params["AWS::StackName"] + "-" + name, nil
					}
				}
				return "", fmt.Errorf("cannot evaluate Fn::GetAtt %v", arg)
			case "Fn::FindInMap":
				a := AsSlice(arg)
				if len(a) != 3 {
					return "", fmt.Errorf("cannot evaluate Fn::FindInMap %v", arg)
				}
				var v any = AsMap(e.tpl.Raw["Mappings"])
				for _, k := range a {
					key, err := e.Eval(k)
					if err != nil {
						return "", err
					}
					next, ok := AsMap(v)[key]
					if !ok {
						return "", fmt.Errorf("Fn::FindInMap %v: no %q", arg, key)
					}
					v = next
				}
				return e.Eval(v)
			case "Fn::Select":
				a := AsSlice(arg)
				if len(a) != 2 {
					return "", fmt.Errorf("cannot evaluate Fn::Select %v", arg)
				}
				idx, err := e.Eval(a[0])
				if err != nil {
					return "", err
				}
				list, err := e.EvalList(a[1])
				if err != nil {
					return "", err
				}
				i, err := strconv.Atoi(idx)
				if err != nil || i < 0 || i >= len(list) {
					return "", fmt.Errorf("Fn::Select index %s out of %v", idx, list)
				}
				return list[i], nil
			case "Fn::If":
				a := AsSlice(arg)
				ok, err := e.Cond(a[0].(string))
				if err != nil {
					return "", err
				}
				if ok {
					return e.Eval(a[1])
				}
				return e.Eval(a[2])
			case "Fn::Sub":
				s, _ := arg.(string)
				vars := map[string]string{}
				if a := AsSlice(arg); len(a) == 2 { // [template, {Name: value}]
					s, _ = a[0].(string)
					for k, v := range AsMap(a[1]) {
						r, err := e.Eval(v)
						if err != nil {
							return "", err
						}
						vars[k] = r
					}
				}
				var err error
				out := subVar.ReplaceAllStringFunc(s, func(m string) string {
					name := subVar.FindStringSubmatch(m)[1]
					if v, ok := vars[name]; ok {
						return v
					}
					r, e2 := e.Eval(map[string]any{"Ref": name})
					if e2 != nil {
						err = e2
					}
					return r
				})
				return out, err
			}
			return "", fmt.Errorf("cannot evaluate %s", fn)
		}
	}
	return "", fmt.Errorf("cannot evaluate %T", v)
}

// EvalList resolves v to a list of strings: a YAML list of values, or Fn::Split of one.
func (e *Evaluator) EvalList(v any) ([]string, error) {
	if a, ok := v.([]any); ok {
		out := make([]string, 0, len(a))
		for _, x := range a {
			s, err := e.Eval(x)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	if a := AsSlice(AsMap(v)["Fn::Split"]); len(a) == 2 {
		sep, err := e.Eval(a[0])
		if err != nil {
			return nil, err
		}
		s, err := e.Eval(a[1])
		if err != nil {
			return nil, err
		}
		return strings.Split(s, sep), nil
	}
	return nil, fmt.Errorf("cannot evaluate %v as a list", v)
}

// Cond evaluates a named condition.
func (e *Evaluator) Cond(name string) (bool, error) {
	if v, ok := e.conds[name]; ok {
		return v, nil
	}
	c, ok := e.tpl.Conditions[name]
	if !ok {
		return false, fmt.Errorf("unknown condition %q", name)
	}
	return e.condExpr(c)
}

func (e *Evaluator) condExpr(v any) (bool, error) {
	for fn, arg := range AsMap(v) {
		a := AsSlice(arg)
		switch fn {
		case "Condition":
			return e.Cond(arg.(string))
		case "Fn::Equals":
			l, err := e.Eval(a[0])
			if err != nil {
				return false, err
			}
			r, err := e.Eval(a[1])
			return l == r, err
		case "Fn::Not":
			b, err := e.condExpr(a[0])
			return !b, err
		case "Fn::And", "Fn::Or":
			and := fn == "Fn::And"
			for _, x := range a {
				b, err := e.condExpr(x)
				if err != nil {
					return false, err
				}
				if and && !b {
					return false, nil
				}
				if !and && b {
					return true, nil
				}
			}
			return and, nil
		}
	}
	return false, fmt.Errorf("cannot evaluate condition %v", v)
}

// Output evaluates an output's value; ok is false when its Condition leaves it out.
func (e *Evaluator) Output(name string) (value string, ok bool, err error) {
	o, exists := e.tpl.Outputs[name]
	if !exists {
		return "", false, fmt.Errorf("no output %q", name)
	}
	if c, has := o["Condition"].(string); has {
		if ok, err := e.Cond(c); err != nil || !ok {
			return "", false, err
		}
	}
	v, err := e.Eval(o["Value"])
	return v, err == nil, err
}

// patterns are the AllowedPatterns compiled so far: tests check thousands of values.
var patterns sync.Map // string → *regexp.Regexp

func compilePattern(pat string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(pat); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(pat)
	if err == nil {
		patterns.Store(pat, re)
	}
	return re, err
}

// CheckParameters returns what CloudFormation would refuse in the parameter values before
// anything else: a value outside AllowedValues or not matching AllowedPattern.
func (e *Evaluator) CheckParameters() []string {
	var bad []string
	for name, p := range e.tpl.Parameters {
		v := e.params[name]
		if pat, ok := p["AllowedPattern"].(string); ok {
			re, err := compilePattern(pat)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q: AllowedPattern %s: %v", name, v, pat, err))
			} else if !re.MatchString(v) {
				bad = append(bad, fmt.Sprintf("%s=%q does not match %s", name, v, pat))
			}
		}
		if vals := AsSlice(p["AllowedValues"]); vals != nil {
			found := false
			for _, a := range vals {
				found = found || fmt.Sprint(a) == v
			}
			if !found {
				bad = append(bad, fmt.Sprintf("%s=%q is not one of %v", name, v, vals))
			}
		}
	}
	return bad
}

// FailedRules returns the AssertDescription of every assertion of the template's Rules that
// the parameter values break (rules whose RuleCondition is false are skipped), as
// CloudFormation refuses such a stack before it creates anything.
func (e *Evaluator) FailedRules() ([]string, error) {
	var failed []string
	for name, r := range e.tpl.Rules {
		rule := AsMap(r)
		if c, ok := rule["RuleCondition"]; ok {
			applies, err := e.condExpr(c)
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if !applies {
				continue
			}
		}
		for _, a := range AsSlice(rule["Assertions"]) {
			holds, err := e.condExpr(AsMap(a)["Assert"])
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if !holds {
				failed = append(failed, fmt.Sprint(AsMap(a)["AssertDescription"]))
			}
		}
	}
	return failed, nil
}

// Refs reports whether v (anywhere inside) references name by Ref or GetAtt.
func Refs(v any, name string) bool {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["Ref"]; ok && r == name {
			return true
		}
		if g, ok := x["Fn::GetAtt"]; ok {
			if s := AsSlice(g); len(s) > 0 && s[0] == name {
				return true
			}
		}
		for _, c := range x {
			if Refs(c, name) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if Refs(c, name) {
				return true
			}
		}
	}
	return false
}

// Strs turns a YAML list (or a single string) into strings.
func Strs(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, x := range AsSlice(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// makeTarget matches a build-<LogicalId> target of the root Makefile and the function it builds.
var makeTarget = regexp.MustCompile(`(?m)^build-(\w+):\s*\n\t\$\(call lambda_build,(\w+),\$\(ARTIFACTS_DIR\)\)`)

// BuildTargets reads the root Makefile's build-<LogicalId> targets (what `sam build` runs for
// BuildMethod makefile) and returns, for each logical id, the ./functions/<name> it builds.
func BuildTargets() (map[string]string, error) {
	dir, err := Root()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out, nil
}

// Statement is one IAM statement of a function's inline policies.
type Statement struct {
	Sid       string
	Effect    string
	Actions   []string
	Resources []any
	Condition map[string]any
}

// Statements returns a function's inline policy statements. A policy that is not an inline
// document (a SAM policy template or a managed policy ARN) is an error: those grant more than
// the code needs, and the tests cannot see what.
// Policies chosen with Fn::If take the branch of the template's default parameters;
// StatementsIn evaluates them under other parameters.
func (tpl *Template) Statements(fn map[string]any) ([]Statement, error) {
	return tpl.StatementsIn(tpl.NewEvaluator(nil), fn)
}

// StatementsIn is Statements with the conditions of Fn::If policies (a policy per
// configuration, such as the signing mode's KMS statements) evaluated by ev; a branch that is
// AWS::NoValue adds nothing.
func (tpl *Template) StatementsIn(ev *Evaluator, fn map[string]any) ([]Statement, error) {
	var out []Statement
	var docs []any
	for _, p := range AsSlice(Path(fn, "Properties", "Policies")) {
		if m := AsMap(p); m != nil && m["Fn::If"] != nil {
			a := AsSlice(m["Fn::If"])
			if len(a) != 3 {
				return nil, fmt.Errorf("policy %v: Fn::If needs three arguments", p)
			}
			name, _ := a[0].(string)
			ok, err := ev.Cond(name)
			if err != nil {
				return nil, err
			}
			p = a[2]
			if ok {
				p = a[1]
			}
			if ref := AsMap(p); ref != nil && ref["Ref"] == "AWS::NoValue" {
				continue
			}
		}
		docs = append(docs, p)
	}
	// Policies of their own (AWS::IAM::Policy) attached to the function's role: SAM names it
	// <logical id>Role.
	for id, r := range tpl.Resources {
		if !sameMap(r, fn) {
			continue
		}
		for pid, pol := range tpl.Resources {
			if pol["Type"] != "AWS::IAM::Policy" || !Refs(Path(pol, "Properties", "Roles"), id+"Role") {
				continue
			}
			if c, ok := pol["Condition"].(string); ok {
				yes, err := ev.Cond(c)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", pid, err)
				}
				if !yes {
					continue
				}
			}
			docs = append(docs, Path(pol, "Properties", "PolicyDocument"))
		}
	}
	for _, p := range docs {
		doc := AsMap(p)
		if doc == nil || doc["Statement"] == nil {
			return nil, fmt.Errorf("policy %v is not an inline policy document", p)
		}
		for _, s := range AsSlice(doc["Statement"]) {
			m := AsMap(s)
			st := Statement{Effect: fmt.Sprint(m["Effect"]), Condition: AsMap(m["Condition"])}
			st.Sid, _ = m["Sid"].(string)
			st.Actions = Strs(m["Action"])
			if r, ok := m["Resource"].([]any); ok {
				st.Resources = r
			} else {
				st.Resources = []any{m["Resource"]}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// sameMap reports whether a and b are the same map (not equal ones).
func sameMap(a, b map[string]any) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// LeadingKeys returns the partition-key patterns of a ForAllValues:StringLike
// dynamodb:LeadingKeys condition (nil when the statement has none).
func (s Statement) LeadingKeys() []string {
	return Strs(Path(s.Condition, "ForAllValues:StringLike", "dynamodb:LeadingKeys"))
}
