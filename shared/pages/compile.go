package pages

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template/parse"
)

// The pages are compiled once, at New, from the .html templates (still the source anyone
// edits) into programs: static byte chunks with the catalogue's strings already escaped in,
// and typed holes that a switch fills from the page's data. Rendering runs no template engine:
// html/template executes by reflection (method calls by name keep every method of every
// reachable type in the binary, and each field access costs allocations); the programs read
// fields directly.
//
// The compiler knows where each hole lands: it follows the HTML of the static text with a
// small state machine (text, tag, quoted attribute value, RCDATA) and picks the escaper
// html/template would pick there. It accepts only the contexts it can escape exactly as
// html/template does (HTML text, <title>, quoted values of known plain attributes, a whole
// quoted URL attribute value) and only the template language the pages use (fields, string
// constants, printf with %s, if/else/with/range, or/and/not, {{template "x" .}}); anything
// else (a hole in a script, a style, an event handler, an unquoted or unknown attribute, the
// middle of a URL, a comment) fails New with an error naming the template, so a template edit
// cannot silently produce an unescaped page.

// field names a value of a page's data the programs can read.
type field uint8

const (
	fNone field = iota
	fLang
	fTitle
	fAssetsPath
	fAction
	fRequestID
	fCSRF
	fRedirectURI
	fReturnTo
	fClientName
	fClientLogoURI
	fUsername
	fMissingUsername
	fMissingPassword
	fFailed
	fProblemAny
	fFocusPassword
	fUserName
	fScopes
	fHeading
	fMessage
	fErrorAction
	fScopeTitle
	fScopeDescription
	fScopeMovesMoney
	fDot // the string dot inside {{with}}
)

// kind is what a field holds.
type kind uint8

const (
	kString kind = iota + 1
	kBool
	kScopes
)

func (f field) kind() kind {
	switch f {
	case fMissingUsername, fMissingPassword, fFailed, fProblemAny, fFocusPassword, fScopeMovesMoney:
		return kBool
	case fScopes:
		return kScopes
	}
	return kString
}

// dotKind is the type of the template's dot at a point of a page.
type dotKind uint8

const (
	dotLogin dotKind = iota + 1
	dotConsent
	dotError
	dotScope
	dotString
)

var (
	commonFields = map[string]field{"Lang": fLang, "Title": fTitle, "AssetsPath": fAssetsPath}
	formFields   = map[string]field{"Action": fAction, "RequestID": fRequestID, "CSRF": fCSRF, "RedirectURI": fRedirectURI,
		"ReturnTo": fReturnTo, "Client.Name": fClientName, "Client.LogoURI": fClientLogoURI}
	dotFields = map[dotKind][]map[string]field{
		dotLogin: {commonFields, formFields, {"Username": fUsername, "Problem.MissingUsername": fMissingUsername,
			"Problem.MissingPassword": fMissingPassword, "Problem.Failed": fFailed, "Problem.Any": fProblemAny,
			"FocusPassword": fFocusPassword}},
		dotConsent: {commonFields, formFields, {"UserName": fUserName, "Scopes": fScopes}},
		dotError:   {commonFields, {"Heading": fHeading, "Message": fMessage, "Action": fErrorAction}},
		dotScope:   {{"Title": fScopeTitle, "Description": fScopeDescription, "MovesMoney": fScopeMovesMoney}},
	}
)

func lookupField(dot dotKind, path []string) (field, error) {
	name := strings.Join(path, ".")
	for _, m := range dotFields[dot] {
		if f, ok := m[name]; ok {
			return f, nil
		}
	}
	return fNone, fmt.Errorf("no field .%s here", name)
}

// opKind is what a step of a program does.
type opKind uint8

const (
	opStatic opKind = iota + 1 // write text
	opHTML                     // write a string field escaped for text or a quoted attribute
	opURL                      // write a string field as a whole URL attribute value
	opIf                       // run body if cond holds, else alt
	opWith                     // run body with the string field as dot if it is not empty, else alt
	opRange                    // run body for each scope (as dot), alt if there is none
)

type op struct {
	kind      opKind
	text      []byte
	field     field
	cond      *cond
	body, alt []op
}

// condKind is a node of a condition: a field's truth, a constant, or a function of conditions.
type condKind uint8

const (
	condField condKind = iota + 1
	condConst
	condNot
	condAnd
	condOr
)

type cond struct {
	kind  condKind
	field field
	value bool
	args  []*cond
}

// hstate is where the compiler stands in the HTML of a page.
type hstate uint8

const (
	stText hstate = iota
	stRCDATA
	stTag
	stAttrValue
)

// hctx is the HTML context at a point of a template; two branches of a conditional must end
// in the same one.
type hctx struct {
	state hstate
	// elem is the element of the tag being read, or of the RCDATA content.
	elem string
	// attr and quote are the attribute whose quoted value is being read.
	attr  string
	quote byte
	// filled is set once a URL attribute's value has content: a hole may only be the whole
	// value (html/template escapes the middle of a URL differently).
	filled bool
}

func (c hctx) String() string {
	switch c.state {
	case stText:
		return "text"
	case stRCDATA:
		return "<" + c.elem + "> content"
	case stTag:
		return "inside a <" + c.elem + "> tag"
	default:
		return fmt.Sprintf("value of attribute %s=%c", c.attr, c.quote)
	}
}

// attrClass is how the compiler treats a hole in a quoted attribute value.
type attrClass uint8

const (
	attrUnsupported attrClass = iota
	attrPlain
	attrURL
)

// holeAttrs are the attributes a hole may fill: plain ones (html/template's attrEscaper) and
// URL ones (urlFilter, urlNormalizer, attrEscaper). An attribute not listed here, event
// handlers, style and srcset among them, refuses holes.
var holeAttrs = map[string]attrClass{
	"lang": attrPlain, "value": attrPlain, "alt": attrPlain, "class": attrPlain, "id": attrPlain, "name": attrPlain,
	"title": attrPlain, "for": attrPlain, "placeholder": attrPlain, "autocomplete": attrPlain,
	"action": attrURL, "href": attrURL, "src": attrURL, "formaction": attrURL,
}

func classOf(attr string) attrClass {
	if strings.HasPrefix(attr, "aria-") {
		// html/template reads a name with src, uri or url in it as a URL attribute.
		if strings.Contains(attr, "src") || strings.Contains(attr, "uri") || strings.Contains(attr, "url") {
			return attrUnsupported
		}
		return attrPlain
	}
	return holeAttrs[attr]
}

// rcdataElements hold text only, up to their end tag; scriptElements would need JavaScript or
// CSS escaping, which the pages do not do.
var (
	rcdataElements = map[string]bool{"title": true, "textarea": true}
	scriptElements = map[string]bool{"script": true, "style": true}
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isAlnum(c byte) bool { return isAlpha(c) || '0' <= c && c <= '9' }

// tagName returns the length of the tag name at the start of s, as html/template reads it.
func tagName(s string) int {
	if s == "" || !isAlpha(s[0]) {
		return 0
	}
	j := 1
	for j < len(s) {
		if isAlnum(s[j]) {
			j++
		} else if (s[j] == ':' || s[j] == '-') && j+1 < len(s) && isAlnum(s[j+1]) {
			j += 2
		} else {
			break
		}
	}
	return j
}

// advance follows static text s from context c.
func advance(c hctx, s string) (hctx, error) {
	for i := 0; i < len(s); {
		switch c.state {
		case stText:
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				return c, nil
			}
			i += j + 1
			if strings.HasPrefix(s[i:], "!--") {
				return c, errors.New("HTML comment (not supported)")
			}
			end := strings.HasPrefix(s[i:], "/")
			if end {
				i++
			}
			if i == len(s) {
				return c, errors.New("a tag cut by a template action")
			}
			n := tagName(s[i:])
			if n == 0 {
				continue // "<" that opens no tag: text
			}
			name := strings.ToLower(s[i : i+n])
			i += n
			if end {
				c = hctx{state: stTag}
				continue
			}
			if scriptElements[name] {
				return c, fmt.Errorf("<%s> element (not supported)", name)
			}
			c = hctx{state: stTag, elem: name}
		case stRCDATA:
			j := indexFold(s[i:], "</"+c.elem)
			if j < 0 {
				return c, nil
			}
			i += j + 2 + len(c.elem)
			c = hctx{state: stTag}
		case stTag:
			for i < len(s) && (isSpace(s[i]) || s[i] == '/') {
				i++
			}
			if i == len(s) {
				return c, nil
			}
			if s[i] == '>' {
				i++
				if rcdataElements[c.elem] {
					c = hctx{state: stRCDATA, elem: c.elem}
				} else {
					c = hctx{state: stText}
				}
				continue
			}
			j := i
			for j < len(s) && !isSpace(s[j]) && s[j] != '=' && s[j] != '>' && s[j] != '/' {
				if s[j] == '"' || s[j] == '\'' || s[j] == '<' {
					return c, fmt.Errorf("%q in an attribute name", s[j])
				}
				j++
			}
			if j == i {
				return c, fmt.Errorf("attribute value with no name in <%s>", c.elem)
			}
			name := strings.ToLower(s[i:j])
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j == len(s) || s[j] != '=' {
				i = j // an attribute without a value
				continue
			}
			j++
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j == len(s) {
				return c, fmt.Errorf("attribute %s: unquoted value cut by a template action", name)
			}
			if q := s[j]; q == '"' || q == '\'' {
				c = hctx{state: stAttrValue, elem: c.elem, attr: name, quote: q}
				i = j + 1
				continue
			}
			for j < len(s) && !isSpace(s[j]) && s[j] != '>' {
				j++
			}
			if j == len(s) {
				return c, fmt.Errorf("attribute %s: unquoted value cut by a template action", name)
			}
			i = j
		case stAttrValue:
			j := strings.IndexByte(s[i:], c.quote)
			if j < 0 {
				if i < len(s) && classOf(c.attr) == attrURL {
					c.filled = true
				}
				return c, nil
			}
			i += j + 1
			c = hctx{state: stTag, elem: c.elem}
		}
	}
	return c, nil
}

// indexFold is strings.Index for an ASCII needle, ignoring case.
func indexFold(s, needle string) int {
	for i := 0; i+len(needle) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(needle)], needle) {
			return i
		}
	}
	return -1
}

// compiler turns the parsed templates of one language into programs.
type compiler struct {
	trees map[string]*parse.Tree
	// calls are the templates being expanded, to refuse recursion.
	calls []string
}

func (c *compiler) errorf(format string, args ...any) error {
	return fmt.Errorf("template %s: %s", strings.Join(c.calls, " > "), fmt.Sprintf(format, args...))
}

// page compiles the template name for data of type dot; the page must end where it started,
// in HTML text.
func (c *compiler) page(name string, dot dotKind) ([]op, error) {
	t, ok := c.trees[name]
	if !ok || t.Root == nil {
		return nil, fmt.Errorf("no template %q", name)
	}
	c.calls = []string{name}
	prog, end, err := c.list(nil, t.Root, hctx{}, dot)
	if err != nil {
		return nil, err
	}
	if end.state != stText {
		return nil, c.errorf("ends in %s", end)
	}
	return prog, nil
}

// list appends the program of the nodes n to prog.
func (c *compiler) list(prog []op, n *parse.ListNode, ctx hctx, dot dotKind) ([]op, hctx, error) {
	if n == nil {
		return prog, ctx, nil
	}
	var err error
	for _, node := range n.Nodes {
		prog, ctx, err = c.node(prog, node, ctx, dot)
		if err != nil {
			return nil, ctx, err
		}
	}
	return prog, ctx, nil
}

// static appends text to the program, merged with the static step before it.
func static(prog []op, text []byte) []op {
	if len(text) == 0 {
		return prog
	}
	if n := len(prog); n > 0 && prog[n-1].kind == opStatic {
		prog[n-1].text = append(prog[n-1].text, text...)
		return prog
	}
	return append(prog, op{kind: opStatic, text: append([]byte(nil), text...)})
}

func (c *compiler) node(prog []op, node parse.Node, ctx hctx, dot dotKind) ([]op, hctx, error) {
	switch n := node.(type) {
	case *parse.TextNode:
		next, err := advance(ctx, string(n.Text))
		if err != nil {
			return nil, ctx, c.errorf("%v", err)
		}
		return static(prog, n.Text), next, nil
	case *parse.ActionNode:
		return c.action(prog, n, ctx, dot)
	case *parse.IfNode:
		return c.branch(prog, opIf, &n.BranchNode, ctx, dot)
	case *parse.WithNode:
		return c.branch(prog, opWith, &n.BranchNode, ctx, dot)
	case *parse.RangeNode:
		return c.branch(prog, opRange, &n.BranchNode, ctx, dot)
	case *parse.TemplateNode:
		if n.Pipe == nil || len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
			return nil, ctx, c.errorf("{{template %q}} must pass the dot", n.Name)
		}
		if _, ok := n.Pipe.Cmds[0].Args[0].(*parse.DotNode); !ok {
			return nil, ctx, c.errorf("{{template %q}} must pass the dot", n.Name)
		}
		t, ok := c.trees[n.Name]
		if !ok || t.Root == nil {
			return nil, ctx, c.errorf("no template %q", n.Name)
		}
		for _, called := range c.calls {
			if called == n.Name {
				return nil, ctx, c.errorf("template %q calls itself", n.Name)
			}
		}
		c.calls = append(c.calls, n.Name)
		prog, ctx, err := c.list(prog, t.Root, ctx, dot)
		c.calls = c.calls[:len(c.calls)-1]
		return prog, ctx, err
	case *parse.CommentNode:
		return prog, ctx, nil
	}
	return nil, ctx, c.errorf("%s: not supported", node)
}

// branch compiles if, with and range: each branch starts in ctx and must end in the same
// context (a range's body also ends where it starts, as it may run again).
func (c *compiler) branch(prog []op, k opKind, n *parse.BranchNode, ctx hctx, dot dotKind) ([]op, hctx, error) {
	if len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 {
		return nil, ctx, c.errorf("%s: only a single command is supported", n.Pipe)
	}
	o := op{kind: k}
	bodyDot := dot
	switch k {
	case opIf:
		cd, err := c.cond(n.Pipe.Cmds[0], dot)
		if err != nil {
			return nil, ctx, err
		}
		o.cond = cd
	case opWith, opRange:
		args := n.Pipe.Cmds[0].Args
		if len(args) != 1 {
			return nil, ctx, c.errorf("%s: only a field is supported", n.Pipe)
		}
		f, err := c.fieldOf(args[0], dot)
		if err != nil {
			return nil, ctx, err
		}
		switch {
		case k == opWith && f.kind() == kString:
			bodyDot = dotString
		case k == opRange && f.kind() == kScopes:
			bodyDot = dotScope
		default:
			return nil, ctx, c.errorf("%s: cannot range or with over this field", n.Pipe)
		}
		o.field = f
	}
	body, end, err := c.list(nil, n.List, ctx, bodyDot)
	if err != nil {
		return nil, ctx, err
	}
	if k == opRange && end != ctx {
		return nil, ctx, c.errorf("%s: the body ends in %s, but starts in %s", n.Pipe, end, ctx)
	}
	alt, altEnd, err := c.list(nil, n.ElseList, ctx, dot) // no else: ends where it starts
	if err != nil {
		return nil, ctx, err
	}
	if altEnd != end {
		return nil, ctx, c.errorf("%s: the branches end in different contexts, %s and %s", n.Pipe, end, altEnd)
	}
	o.body, o.alt = body, alt
	return append(prog, o), end, nil
}

// fieldOf resolves a field, $.field or the string dot.
func (c *compiler) fieldOf(n parse.Node, dot dotKind) (field, error) {
	var f field
	var err error
	switch n := n.(type) {
	case *parse.FieldNode:
		f, err = lookupField(dot, n.Ident)
	case *parse.VariableNode:
		if len(n.Ident) < 2 || n.Ident[0] != "$" {
			return fNone, c.errorf("%s: only $.field is supported", n)
		}
		f, err = lookupField(rootDot[c.calls[0]], n.Ident[1:])
	case *parse.DotNode:
		if dot != dotString {
			return fNone, c.errorf("the dot is not a string here")
		}
		f = fDot
	default:
		return fNone, c.errorf("%s: not a field", n)
	}
	if err != nil {
		return fNone, c.errorf("%v", err)
	}
	return f, nil
}

// rootDot is the data of each page, which $ names in every template the page calls.
var rootDot = map[string]dotKind{"login": dotLogin, "consent": dotConsent, "error": dotError}

// cond compiles the condition of an if.
func (c *compiler) cond(cmd *parse.CommandNode, dot dotKind) (*cond, error) {
	if id, ok := cmd.Args[0].(*parse.IdentifierNode); ok {
		var k condKind
		switch id.Ident {
		case "not":
			k = condNot
			if len(cmd.Args) != 2 {
				return nil, c.errorf("%s: not takes one argument", cmd)
			}
		case "and":
			k = condAnd
		case "or":
			k = condOr
		default:
			return nil, c.errorf("%s: function %s not supported in a condition", cmd, id.Ident)
		}
		if len(cmd.Args) < 2 {
			return nil, c.errorf("%s: no arguments", cmd)
		}
		out := &cond{kind: k}
		for _, a := range cmd.Args[1:] {
			var sub *cond
			var err error
			if p, ok := a.(*parse.PipeNode); ok {
				if len(p.Decl) > 0 || len(p.Cmds) != 1 {
					return nil, c.errorf("%s: only a single command is supported", p)
				}
				sub, err = c.cond(p.Cmds[0], dot)
			} else {
				sub, err = c.cond(&parse.CommandNode{NodeType: parse.NodeCommand, Args: []parse.Node{a}}, dot)
			}
			if err != nil {
				return nil, err
			}
			out.args = append(out.args, sub)
		}
		return out, nil
	}
	if len(cmd.Args) != 1 {
		return nil, c.errorf("%s: not a condition", cmd)
	}
	switch a := cmd.Args[0].(type) {
	case *parse.StringNode:
		return &cond{kind: condConst, value: a.Text != ""}, nil
	case *parse.BoolNode:
		return &cond{kind: condConst, value: a.True}, nil
	}
	f, err := c.fieldOf(cmd.Args[0], dot)
	if err != nil {
		return nil, err
	}
	return &cond{kind: condField, field: f}, nil
}

// action compiles an output action: a string constant, a string field, or printf of a
// constant format with %s verbs over constants and string fields.
func (c *compiler) action(prog []op, n *parse.ActionNode, ctx hctx, dot dotKind) ([]op, hctx, error) {
	if len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 {
		return nil, ctx, c.errorf("%s: only a single command is supported", n)
	}
	var hole opKind
	switch ctx.state {
	case stText, stRCDATA:
		hole = opHTML
	case stAttrValue:
		switch classOf(ctx.attr) {
		case attrPlain:
			hole = opHTML
		case attrURL:
			if ctx.filled {
				return nil, ctx, c.errorf("%s: a hole must be the whole value of URL attribute %s", n, ctx.attr)
			}
			hole = opURL
			ctx.filled = true
		default:
			return nil, ctx, c.errorf("%s: no hole allowed in attribute %s", n, ctx.attr)
		}
	default:
		return nil, ctx, c.errorf("%s: no hole allowed %s", n, ctx)
	}
	parts, err := c.value(n.Pipe.Cmds[0], dot)
	if err != nil {
		return nil, ctx, err
	}
	if hole == opURL && len(parts) != 1 {
		return nil, ctx, c.errorf("%s: a URL attribute takes one field or constant", n)
	}
	for _, p := range parts {
		switch {
		case p.field != fNone:
			prog = append(prog, op{kind: hole, field: p.field})
		case hole == opURL:
			prog = static(prog, appendURL(nil, p.text))
		default:
			prog = static(prog, appendHTML(nil, p.text))
		}
	}
	return prog, ctx, nil
}

// unwrap returns what a parenthesised single value, such as ("constant"), holds.
func unwrap(n parse.Node) parse.Node {
	for {
		p, ok := n.(*parse.PipeNode)
		if !ok || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
			return n
		}
		n = p.Cmds[0].Args[0]
	}
}

// part is a piece of an action's output: constant text or a string field.
type part struct {
	text  string
	field field
}

func (c *compiler) value(cmd *parse.CommandNode, dot dotKind) ([]part, error) {
	args := cmd.Args
	if id, ok := args[0].(*parse.IdentifierNode); ok {
		if id.Ident != "printf" {
			return nil, c.errorf("%s: function %s not supported in output", cmd, id.Ident)
		}
		if len(args) < 2 {
			return nil, c.errorf("%s: printf without a format", cmd)
		}
		format, ok := unwrap(args[1]).(*parse.StringNode)
		if !ok {
			return nil, c.errorf("%s: the format must be a constant", cmd)
		}
		var operands []part
		for _, a := range args[2:] {
			p, err := c.operand(a, dot)
			if err != nil {
				return nil, err
			}
			operands = append(operands, p)
		}
		parts, err := splitFormat(format.Text, operands)
		if err != nil {
			return nil, c.errorf("%s: %v", cmd, err)
		}
		return parts, nil
	}
	if len(args) != 1 {
		return nil, c.errorf("%s: not a value", cmd)
	}
	p, err := c.operand(args[0], dot)
	if err != nil {
		return nil, err
	}
	return []part{p}, nil
}

func (c *compiler) operand(n parse.Node, dot dotKind) (part, error) {
	n = unwrap(n)
	if s, ok := n.(*parse.StringNode); ok {
		return part{text: s.Text}, nil
	}
	f, err := c.fieldOf(n, dot)
	if err != nil {
		return part{}, err
	}
	if f.kind() != kString {
		return part{}, c.errorf("%s: not a string", n)
	}
	return part{field: f}, nil
}

// splitFormat splits a printf format into constants and operands, as fmt.Sprintf would join
// them for string operands. Only %s, %[n]s and %% are supported; every operand must be used
// (or the format reorder them), so that no %!(EXTRA) or %!s(MISSING) can ever be printed.
func splitFormat(format string, operands []part) ([]part, error) {
	var out []part
	var lit strings.Builder
	next, reordered := 0, false
	used := make([]bool, len(operands))
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, part{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			lit.WriteByte(format[i])
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			lit.WriteByte('%')
			continue
		}
		if i < len(format) && format[i] == '[' {
			end := strings.IndexByte(format[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("bad argument index in %q", format)
			}
			n, err := strconv.Atoi(format[i+1 : i+end])
			if err != nil || n < 1 || n > len(operands) {
				return nil, fmt.Errorf("bad argument index in %q", format)
			}
			next, reordered = n-1, true
			i += end + 1
		}
		if i >= len(format) || format[i] != 's' {
			return nil, fmt.Errorf("only %%s verbs are supported: %q", format)
		}
		if next >= len(operands) {
			return nil, fmt.Errorf("missing operand in %q", format)
		}
		flush()
		used[next] = true
		out = append(out, operands[next])
		next++
	}
	flush()
	if !reordered && next != len(operands) {
		return nil, fmt.Errorf("extra operands for %q", format)
	}
	for i, u := range used {
		if !u {
			return nil, fmt.Errorf("operand %d unused by %q", i+1, format)
		}
	}
	// Constants next to each other are one constant.
	merged := out[:0]
	for _, p := range out {
		if n := len(merged); n > 0 && p.field == fNone && merged[n-1].field == fNone {
			merged[n-1].text += p.text
			continue
		}
		merged = append(merged, p)
	}
	return merged, nil
}
