package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Regular-expression bounds (max_regex_size). Go's regexp runs in time
// linear in the text, but the factor is the compiled program: its NFA
// steps through up to every instruction for each character (measured:
// ~15 ns per instruction per character, so the 2,003 instructions of
// `[a-y]{0,1000}z` take 0.3 s over 10 KB), and compiling builds the whole
// program in memory (attack run: `.{1000}` repeated, a 253 KB
// registration, took 4.25 GB to compile; `[a-y]{0,1000}` 100 times, 1.3
// KB, took 26 s to match a 10 KB argument). So a pattern is parsed and
// sized before it is compiled, and refused past MaxRegexInsts: twice the
// largest of the common idioms (the widely copied IPv6 pattern is 967
// instructions, `^.{1,255}$` 513, an e-mail or UUID pattern under 50), and
// `^.{0,1000}$` (2,004) still fits. Parsing costs what its text holds,
// but for a Unicode class (\pL: 1,292 code points, ~0.1 ms merged into a
// bracket; 4 KB of them 0.1 s and 42 MB): those are bounded per schema.
const (
	// MaxRegexInsts bounds one pattern's compiled program (a "pattern", a
	// "patternProperties" name, or a string a draft-07 "format": "regex"
	// checks), in regexp/syntax instructions.
	MaxRegexInsts = 2048
	// MaxSchemaRegexInsts bounds the programs of one schema's distinct
	// patterns together: what compiling the schema costs, and what it
	// keeps in memory (a pattern written twice is compiled once).
	MaxSchemaRegexInsts = 8 * MaxRegexInsts
	// MaxRegexBytes bounds a regular expression's text.
	MaxRegexBytes = 16 << 10
	// MaxSchemaUnicodeClasses bounds the Unicode class escapes (\pL,
	// \p{Greek}, \P{...}) of one schema's distinct patterns together.
	MaxSchemaUnicodeClasses = 256
)

// errRegexTooLarge is what the regex engine refuses a pattern past the
// bounds with.
var errRegexTooLarge = errors.New("regular expression too large")

// regexRefusal is a pattern the engine refused for its size, and why
// (completing "the pattern …").
type regexRefusal struct {
	source, why string
}

func (r *regexRefusal) Error() string {
	return fmt.Sprintf("%v: the pattern %s", errRegexTooLarge, r.why)
}

func (r *regexRefusal) Unwrap() error { return errRegexTooLarge }

// regexEngine is the compiler's regexp engine for one schema
// (jsonschema.Compiler.UseRegexpEngine). While the schema compiles it
// compiles each distinct pattern once, counting its instructions and
// Unicode classes against the schema's bounds, and keeps the first
// refusal; done ends that. The engine then only checks a string's syntax
// within the bounds, building nothing: a draft-07 "format": "regex" calls
// it for an argument's string on every call, concurrently, so it keeps
// nothing then.
type regexEngine struct {
	compiling bool
	total     int // instructions
	classes   int // Unicode class escapes
	compiled  map[string]*regexp.Regexp
	insts     map[string]int
	refused   *regexRefusal
}

func newRegexEngine() *regexEngine {
	return &regexEngine{compiling: true, compiled: map[string]*regexp.Regexp{}, insts: map[string]int{}}
}

// compile is the jsonschema.RegexpEngine.
func (e *regexEngine) compile(source string) (jsonschema.Regexp, error) {
	if !e.compiling {
		if err := checkRegexSyntax(source); err != nil {
			return nil, err
		}
		return &lazyRegexp{source: source}, nil
	}
	if re, ok := e.compiled[source]; ok {
		return re, nil
	}
	n, classes, err := regexSize(source, MaxSchemaUnicodeClasses-e.classes)
	switch {
	case err != nil:
	case e.total+n > MaxSchemaRegexInsts:
		err = &regexRefusal{source, fmt.Sprintf("brings the schema's patterns to more than %d regular-expression instructions together; at most %d are allowed (each is compiled and kept in memory)", MaxSchemaRegexInsts, MaxSchemaRegexInsts)}
	}
	if err != nil {
		var r *regexRefusal
		if errors.As(err, &r) && e.refused == nil {
			e.refused = r
		}
		return nil, err
	}
	re, err := regexp.Compile(source)
	if err != nil {
		return nil, err
	}
	e.total, e.classes = e.total+n, e.classes+classes
	e.compiled[source], e.insts[source] = re, n
	return re, nil
}

// instsOf is the size of a pattern compiled while the schema compiled.
func (e *regexEngine) instsOf(re jsonschema.Regexp) int {
	if re == nil {
		return 0
	}
	return e.insts[re.String()]
}

// done ends the schema's compilation: the engine keeps nothing after it.
func (e *regexEngine) done() {
	e.compiling, e.compiled, e.insts = false, nil, nil
}

// lazyRegexp is a regular expression whose syntax was checked, compiled
// only if it is ever matched: a format check only asks whether a string
// is one.
type lazyRegexp struct {
	source string
	once   sync.Once
	re     *regexp.Regexp
}

func (l *lazyRegexp) String() string { return l.source }

func (l *lazyRegexp) MatchString(s string) bool {
	l.once.Do(func() { l.re, _ = regexp.Compile(l.source) })
	return l.re != nil && l.re.MatchString(s)
}

// regexSize parses source as regexp.Compile does and returns its
// program's size in instructions and its Unicode class escapes, refusing
// (a *regexRefusal) one past MaxRegexBytes, MaxRegexInsts or classes
// Unicode class escapes before it is parsed or its program built: the
// size is first estimated on the parsed tree, where a repetition is still
// one node, so `(?:.{1000}){1000}` costs no more than its text to refuse.
// A syntax error is regexp.Compile's.
func regexSize(source string, maxClasses int) (insts, classes int, err error) {
	if len(source) > MaxRegexBytes {
		return 0, 0, &regexRefusal{source, fmt.Sprintf("is %d bytes long; at most %d are allowed", len(source), MaxRegexBytes)}
	}
	classes = len(unicodeClasses(source))
	if classes > maxClasses {
		return 0, 0, &regexRefusal{source, fmt.Sprintf("brings the schema's patterns to more than %d Unicode class escapes (\\pL, \\p{Greek}, …) together; at most %d are allowed (parsing one merges its whole table of code points)", MaxSchemaUnicodeClasses, MaxSchemaUnicodeClasses)}
	}
	re, err := parseRegex(source, source)
	if err != nil {
		return 0, 0, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, 0, err
	}
	if len(prog.Inst) > MaxRegexInsts {
		return 0, 0, tooManyInsts(source)
	}
	return len(prog.Inst), classes, nil
}

// checkRegexSyntax is what a format check asks of an argument's string:
// is it a regular expression regexp.Compile takes, within MaxRegexBytes
// and MaxRegexInsts. It builds no program and no Unicode table (a string
// of \pL, 3 bytes each, would make parsing it cost 4 KB a byte): each
// Unicode class escape is checked once in the process and parsed as \d,
// which Go's syntax takes wherever it takes one.
func checkRegexSyntax(source string) error {
	if len(source) > MaxRegexBytes {
		return &regexRefusal{source, fmt.Sprintf("is %d bytes long; at most %d are allowed", len(source), MaxRegexBytes)}
	}
	escapes := unicodeClasses(source)
	if len(escapes) == 0 {
		_, err := parseRegex(source, source)
		return err
	}
	var b strings.Builder
	at := 0
	for _, esc := range escapes {
		seq := source[esc[0]:esc[1]]
		if err := checkUnicodeClass(seq); err != nil {
			return err
		}
		b.WriteString(source[at:esc[0]])
		b.WriteString(`\d`)
		at = esc[1]
	}
	b.WriteString(source[at:])
	_, err := parseRegex(b.String(), source)
	return err
}

// parseRegex parses text (source, or source with its Unicode classes
// replaced) as regexp.Compile does, refusing it when its program is
// estimated past MaxRegexInsts.
func parseRegex(text, source string) (*syntax.Regexp, error) {
	re, err := syntax.Parse(text, syntax.Perl)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) && se.Code == syntax.ErrLarge {
			return nil, tooManyInsts(source)
		}
		if se != nil && text != source {
			return nil, fmt.Errorf("error parsing regexp: %v", se.Code) // not quoting the text parsed in its place
		}
		return nil, err
	}
	if estimateInsts(re, MaxRegexInsts) > MaxRegexInsts {
		return nil, tooManyInsts(source)
	}
	return re, nil
}

func tooManyInsts(source string) *regexRefusal {
	return &regexRefusal{source, fmt.Sprintf("compiles to more than %d regular-expression instructions: matching takes time in proportion to them for every character of an argument", MaxRegexInsts)}
}

// unicodeClasses are the byte spans of the Unicode class escapes of
// source (\pL, \p{Greek}, \P{^Greek}, and a malformed \p…) as Go's parser
// finds them: outside \Q…\E, the name one rune or up to the next '}'.
func unicodeClasses(source string) [][2]int {
	var out [][2]int
	for i := 0; i < len(source); i++ {
		if source[i] != '\\' || i+1 == len(source) {
			continue
		}
		switch c := source[i+1]; c {
		case 'Q':
			end := strings.Index(source[i+2:], `\E`)
			if end < 0 {
				return out
			}
			i += 2 + end + 1
		case 'p', 'P':
			j := i + 2
			switch {
			case j == len(source):
			case source[j] == '{':
				if end := strings.IndexByte(source[j:], '}'); end >= 0 {
					j += end + 1
				} else {
					j = len(source)
				}
			default:
				_, size := utf8.DecodeRuneInString(source[j:])
				j += size
			}
			out = append(out, [2]int{i, j})
			i = j - 1
		default:
			i++ // the escaped byte
		}
	}
	return out
}

// validUnicodeClasses are the Unicode class names Go's regexp took, by
// unicodeClassKey: at most the names of package unicode's tables.
var validUnicodeClasses sync.Map

// checkUnicodeClass checks one Unicode class escape (\pL, \p{Greek}),
// parsing it only when its name was never seen valid.
func checkUnicodeClass(seq string) error {
	key := unicodeClassKey(seq)
	if _, ok := validUnicodeClasses.Load(key); ok {
		return nil
	}
	if _, err := syntax.Parse(seq, syntax.Perl); err != nil {
		return err
	}
	validUnicodeClasses.Store(key, true)
	return nil
}

// unicodeClassKey is the name of a Unicode class escape as Go's parser
// looks it up (canonicalName): without a leading ^, '_', '-' or ' ', in
// ASCII lower case. "" for a malformed escape.
func unicodeClassKey(seq string) string {
	name := seq[2:]
	if strings.HasPrefix(name, "{") {
		if !strings.HasSuffix(name, "}") {
			return ""
		}
		name = strings.TrimPrefix(name[1:len(name)-1], "^")
	}
	var b strings.Builder
	for i := range len(name) {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == ' ':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String()
}

// estimateInsts is the size regexp/syntax's parser estimates for re's
// program (its calcSize: a repetition is its body times its count), at
// most limit+1.
func estimateInsts(re *syntax.Regexp, limit int) int {
	over := limit + 1
	var size int
	switch re.Op {
	case syntax.OpLiteral:
		size = len(re.Rune)
	case syntax.OpCapture, syntax.OpStar:
		size = 2 + estimateInsts(re.Sub[0], limit)
	case syntax.OpPlus, syntax.OpQuest:
		size = 1 + estimateInsts(re.Sub[0], limit)
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			size += estimateInsts(sub, limit)
			if size > limit {
				return over
			}
		}
		if re.Op == syntax.OpAlternate && len(re.Sub) > 1 {
			size += len(re.Sub) - 1
		}
	case syntax.OpRepeat:
		sub := estimateInsts(re.Sub[0], limit)
		switch {
		case re.Max == -1 && re.Min == 0:
			size = 2 + sub
		case re.Max == -1:
			size = 1 + re.Min*sub // Min ≤ 1000, sub ≤ limit+1: no overflow
		default:
			size = re.Max*sub + re.Max - re.Min
		}
	}
	return min(max(1, size), over)
}
