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
type Screening struct {
	rules []Rule
	// abbreviations are the words (lower case, without their period)
	// whose period does not end a sentence: "Dr. Smith", "etc. And".
	abbreviations map[string]bool
}

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
		// Abbreviations (optional) are words whose trailing period is
		// read as inside a sentence even before a capital letter.
		Abbreviations []string `json:"abbreviations"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	abbr := map[string]bool{}
	for _, a := range doc.Abbreviations {
		abbr[strings.ToLower(strings.TrimSuffix(a, "."))] = true
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
	return &Screening{rules: doc.Rules, abbreviations: abbr}, nil
}

// Finding is a rule that matched a text of a tool's definition.
type Finding struct {
	Rule, Reason, Field, Excerpt string
}

func (f Finding) String() string {
	return fmt.Sprintf("screening rule %s matched %s (%s): %q", f.Rule, f.Field, f.Reason, f.Excerpt)
}

// Screen returns the first finding in the texts a model reads of reg: its
// name, description, and every string and every object key (as a name) of
// its input and output schemas and its annotations. ok is false when
// nothing matched.
func (s *Screening) Screen(reg *sharedosv1.ToolRegistration) (Finding, bool) {
	return s.screen(texts(reg))
}

// screen returns the first finding in ts, each read as written and, when
// that differs, folded; and each of those, when it differs, with the
// periods that end no sentence read as spaces (the rules' windows stop at
// a period: "Ignore, e.g., all previous instructions" would pass them).
func (s *Screening) screen(ts []text) (Finding, bool) {
	if s == nil {
		return Finding{}, false
	}
	for _, t := range ts {
		if f, ok := s.matchJoined(t); ok {
			return f, true
		}
		if f := folded(t.text); f != "" {
			if f, ok := s.matchJoined(text{t.field + " (folded)", f}); ok {
				return f, true
			}
		}
	}
	return Finding{}, false
}

// matchJoined matches t, then t with its mid-sentence periods as spaces.
func (s *Screening) matchJoined(t text) (Finding, bool) {
	if f, ok := s.match(t); ok {
		return f, true
	}
	if j := s.joined(t.text); j != "" {
		return s.match(text{t.field + " (mid-sentence periods as spaces)", j})
	}
	return Finding{}, false
}

// joined is t with every period that ends no sentence as a space; "" when
// it has none. A period ends a sentence when it ends the text, or is
// followed by white space (past closing quotes and brackets) and then
// anything but a lower-case letter, unless the word it ends holds a period
// of its own ("e.g.", "U.S."), is one letter ("J. Doe"), or is one of the
// rule set's abbreviations ("Dr.", "etc."). So "v1.2", "e.g., all",
// "Ignore. all", "per Dr. Smith" read on; "Done. Ignore" does not. A
// period that begins a word (".eslintignore", "(.env") is kept: it ends
// nothing, and a space for it would join what it kept apart.
func (s *Screening) joined(t string) string {
	if !strings.Contains(t, ".") {
		return ""
	}
	b := []byte(t)
	changed := false
	for i := 0; i < len(b); i++ {
		if b[i] != '.' || s.endsSentence(t, i) {
			continue
		}
		b[i] = ' '
		changed = true
	}
	if !changed {
		return ""
	}
	return string(b)
}

// endsSentence reports whether the period at t[i] ends a sentence (see
// joined).
func (s *Screening) endsSentence(t string, i int) bool {
	if i == 0 {
		return true // a word's own first character (".eslintignore")
	}
	if p, _ := utf8.DecodeLastRuneInString(t[:i]); unicode.IsSpace(p) || strings.ContainsRune(`"'([{`, p) {
		return true
	}
	j := i + 1
	for j < len(t) && strings.IndexByte(`"')]}`, t[j]) >= 0 {
		j++
	}
	if j == len(t) {
		return true
	}
	r, n := utf8.DecodeRuneInString(t[j:])
	if !unicode.IsSpace(r) {
		// "v1.2", "e.g.,", "a.b", "...": inside a word or a clause.
		return false
	}
	for j += n; j < len(t); j += n {
		if r, n = utf8.DecodeRuneInString(t[j:]); !unicode.IsSpace(r) {
			break
		}
	}
	if j == len(t) {
		return true
	}
	if unicode.IsLower(r) {
		return false
	}
	// The word the period ends, without the quotes or brackets before it.
	k := i
	for k > 0 {
		p, m := utf8.DecodeLastRuneInString(t[:k])
		if unicode.IsSpace(p) {
			break
		}
		k -= m
	}
	w := strings.TrimLeft(t[k:i], `"'([{`)
	if strings.Contains(w, ".") {
		return false
	}
	if r, n := utf8.DecodeRuneInString(w); n == len(w) && unicode.IsLetter(r) {
		return false
	}
	return !s.abbreviations[strings.ToLower(w)]
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
	seen := map[string]bool{}
	for _, s := range []struct {
		field string
		raw   []byte
	}{{"annotations", reg.GetAnnotationsJson()}, {"inputSchema", reg.GetInputSchemaJson()}, {"outputSchema", reg.GetOutputSchemaJson()}} {
		var doc any
		if json.Unmarshal(s.raw, &doc) == nil {
			out = schemaTexts(s.field, doc, out, seen)
		}
	}
	return out
}

// schemaTexts collects the texts of a JSON document a harness hands the
// model whole (a schema, annotations): every string at any depth — titles,
// descriptions, enum, const, default, examples and any other keyword's or
// extension's — and every object key at any depth as a name (nameTexts):
// a property's, a $defs or definitions entry's, an x-* extension's, a key
// of a default or an example. seen holds the keys already collected: each
// is screened once.
func schemaTexts(field string, v any, out []text, seen map[string]bool) []text {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if !seen[k] {
				seen[k] = true
				out = append(out, nameTexts(field+" key", k)...)
			}
			out = schemaTexts(field+"."+k, x[k], out, seen)
		}
	case []any:
		for i, c := range x {
			out = schemaTexts(fmt.Sprintf("%s[%d]", field, i), c, out, seen)
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
