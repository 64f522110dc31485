package upstream

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// defaultScreening is the rule set catalog-svc screens acquired tools with
// unless --upstream-screening names another.
//
//go:embed screening.json
var defaultScreening []byte

// Rule is one screening rule: data, not code.
type Rule struct {
	ID      string `json:"id"`
	Reason  string `json:"reason"`
	Pattern string `json:"pattern"`
	re      *regexp.Regexp
}

// Screening is a compiled rule set.
type Screening struct{ rules []Rule }

// DefaultScreening is the built-in rule set.
func DefaultScreening() *Screening {
	s, err := ParseScreening(defaultScreening)
	if err != nil {
		panic("upstream: built-in screening rules: " + err.Error())
	}
	return s
}

// LoadScreening reads a rule set file (the format of screening.json).
func LoadScreening(path string) (*Screening, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScreening(b)
}

// ParseScreening compiles a rule set, naming the first bad rule.
func ParseScreening(b []byte) (*Screening, error) {
	var doc struct {
		Rules []Rule `json:"rules"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	for i := range doc.Rules {
		r := &doc.Rules[i]
		if r.ID == "" || r.Pattern == "" {
			return nil, fmt.Errorf("rule %d: id and pattern are required", i)
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", r.ID, err)
		}
		r.re = re
	}
	return &Screening{rules: doc.Rules}, nil
}

// Finding is a rule that matched a text of a tool's definition.
type Finding struct {
	Rule, Reason, Field, Excerpt string
}

func (f Finding) String() string {
	return fmt.Sprintf("screening rule %s matched %s (%s): %q", f.Rule, f.Field, f.Reason, f.Excerpt)
}

// Screen returns the first finding in the texts a model reads of reg: its
// name, description, annotations' title, and every title, description
// and property name in its schemas. ok is false when nothing matched.
func (s *Screening) Screen(reg *sharedosv1.ToolRegistration) (Finding, bool) {
	return s.screen(texts(reg))
}

// screen returns the first finding in ts, each read as written and, when
// that differs, folded.
func (s *Screening) screen(ts []text) (Finding, bool) {
	if s == nil {
		return Finding{}, false
	}
	for _, t := range ts {
		if f, ok := s.match(t); ok {
			return f, true
		}
		if f := folded(t.text); f != "" {
			if f, ok := s.match(text{t.field + " (folded)", f}); ok {
				return f, true
			}
		}
	}
	return Finding{}, false
}

// match returns the first rule that matches t.
func (s *Screening) match(t text) (Finding, bool) {
	for _, r := range s.rules {
		if loc := r.re.FindStringIndex(t.text); loc != nil {
			return Finding{Rule: r.ID, Reason: r.Reason, Field: t.field, Excerpt: excerpt(t.text, loc)}, true
		}
	}
	return Finding{}, false
}

// folded is s as the ASCII letters a model reads in it, so that rules
// written in ASCII match text that only looks like it: compatibility forms
// (fullwidth, mathematical letters, ligatures) by NFKC, and every other
// character whose confusable skeleton (Unicode TR39: Cyrillic о, Greek ο,
// Latin ó once its marks are dropped) is ASCII, as that. "" when it is s.
func folded(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return ""
	}
	var b strings.Builder
	for _, r := range norm.NFKC.String(s) {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		if a, ok := asciiLookalike(r); ok {
			b.WriteString(a)
			continue
		}
		b.WriteRune(r)
	}
	if out := b.String(); out != s {
		return out
	}
	return ""
}

// asciiLookalike is r's confusable skeleton without its combining marks,
// when that is ASCII; false when it holds anything else.
func asciiLookalike(r rune) (string, bool) {
	var b strings.Builder
	for _, c := range confusables.Skeleton(string(r)) {
		switch {
		case unicode.Is(unicode.Mn, c):
		case c >= utf8.RuneSelf:
			return "", false
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), b.Len() > 0
}

type text struct{ field, text string }

func texts(reg *sharedosv1.ToolRegistration) []text {
	// The upstream's name: the namespace before it is the operator's.
	_, name, _ := strings.Cut(reg.GetName(), ".")
	out := append(nameTexts("name", name), text{"description", reg.GetDescription()})
	var ann struct {
		Title string `json:"title"`
	}
	if json.Unmarshal(reg.GetAnnotationsJson(), &ann) == nil && ann.Title != "" {
		out = append(out, text{"annotations.title", ann.Title})
	}
	for _, s := range []struct {
		field string
		raw   []byte
	}{{"inputSchema", reg.GetInputSchemaJson()}, {"outputSchema", reg.GetOutputSchemaJson()}} {
		var doc any
		if json.Unmarshal(s.raw, &doc) == nil {
			out = schemaTexts(s.field, doc, out)
		}
	}
	return out
}

// schemaTexts collects the titles and descriptions of a schema document
// (under enum/const/default/examples too: a model reads those as well).
func schemaTexts(field string, v any, out []text) []text {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			c := x[k]
			if s, ok := c.(string); ok && (k == "description" || k == "title") {
				out = append(out, text{field + "." + k, s})
				continue
			}
			if props, ok := c.(map[string]any); ok && (k == "properties" || k == "patternProperties") {
				// A property's name is read by the model too.
				for _, name := range slices.Sorted(maps.Keys(props)) {
					out = append(out, nameTexts(field+"."+k+" name", name)...)
				}
			}
			out = schemaTexts(field+"."+k, c, out)
		}
	case []any:
		for i, c := range x {
			out = schemaTexts(fmt.Sprintf("%s[%d]", field, i), c, out)
		}
	case string:
		out = append(out, text{field, x})
	}
	return out
}

// nameTexts are the texts a name (of a tool, a property, a prompt, an
// argument, a resource, or a URI) holds for a model: as written (a path
// or an address the rules look for) and as its words.
func nameTexts(field, name string) []text {
	if name == "" {
		return nil
	}
	return []text{{field, name}, {field + " (as words)", words(name)}}
}

// words is an identifier as the words a model reads in it, percent-escapes
// decoded, every character that is not a letter a space, and camelCase
// split: "doNotTellTheUser", "do_not-tell%20the.user", "do1not2tell" →
// "do Not Tell The User", "do not tell the user", "do not tell". The
// rules match words; without this an identifier's separators hide them.
func words(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		s = u
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	var prev rune
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r):
			r = ' '
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

func excerpt(s string, loc []int) string {
	const most = 120
	m := s[loc[0]:loc[1]]
	if len(m) > most {
		m = m[:most] + "…"
	}
	return m
}
