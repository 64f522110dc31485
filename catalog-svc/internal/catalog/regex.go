package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Regular-expression bounds (max_regex_size). Go's regexp runs in time
// linear in the text, but the factor is the compiled program: its NFA
// steps through up to every instruction for each character (measured:
// 7–10 ns per instruction per character, so a 2,003-instruction
// `(?:[a-y]{0,40}){25}z` took 15 s over a 1 MiB string), and compiling
// builds the whole program in memory (attack run: `.{1000}` repeated, a
// 253 KB registration, took 4.25 GB to compile; `(?:[a-y]{0,1000}){100}z`,
// 1.3 KB, took 26 s to match a 10 KB argument). So a pattern is parsed
// and sized before it is compiled, and refused past MaxRegexInsts: twice
// the largest of the common idioms (the widely copied IPv6 pattern is 967
// instructions, `^.{1,255}$` 513, an e-mail or UUID pattern under 50), and
// `^.{0,1000}$` (2,004) still fits.
const (
	// MaxRegexInsts bounds one pattern's compiled program (a "pattern", a
	// "patternProperties" name, or a string a draft-07 "format": "regex"
	// checks), in regexp/syntax instructions.
	MaxRegexInsts = 2048
	// MaxSchemaRegexInsts bounds the programs of one schema's distinct
	// patterns together: what compiling the schema costs, and what it
	// keeps in memory (a pattern written twice is compiled once).
	MaxSchemaRegexInsts = 8 * MaxRegexInsts
)

// errRegexTooLarge is what the regex engine refuses a pattern with when
// its program is past MaxRegexInsts, or the schema's past
// MaxSchemaRegexInsts.
var errRegexTooLarge = errors.New("regular expression too large")

// regexRefusal is a pattern the engine refused for its size.
type regexRefusal struct {
	source string
	total  bool // refused for the schema's total, not for itself
}

func (r *regexRefusal) Error() string {
	if r.total {
		return fmt.Sprintf("%v: the schema's patterns compile to more than %d regular-expression instructions together", errRegexTooLarge, MaxSchemaRegexInsts)
	}
	return fmt.Sprintf("%v: it compiles to more than %d instructions", errRegexTooLarge, MaxRegexInsts)
}

func (r *regexRefusal) Unwrap() error { return errRegexTooLarge }

// regexEngine is the compiler's regexp engine for one schema
// (jsonschema.Compiler.UseRegexpEngine). While the schema compiles it
// compiles each distinct pattern once, counting its instructions against
// MaxSchemaRegexInsts, and keeps the first refusal; done ends that, and
// the engine then only bounds each pattern on its own: a draft-07 "format":
// "regex" calls it for an argument's string on every call, concurrently,
// so it keeps nothing then.
type regexEngine struct {
	compiling bool
	total     int
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
		if _, err := regexSize(source); err != nil {
			return nil, err
		}
		return regexp.Compile(source)
	}
	if re, ok := e.compiled[source]; ok {
		return re, nil
	}
	n, err := regexSize(source)
	if err == nil && e.total+n > MaxSchemaRegexInsts {
		err = &regexRefusal{source: source, total: true}
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
	e.total += n
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

// regexSize parses source as regexp.Compile does and returns its
// program's size in instructions, refusing (a *regexRefusal) one past
// MaxRegexInsts before the program is built: the size is first estimated
// on the parsed tree, where a repetition is still one node, so
// `(?:.{1000}){1000}` costs no more than its text to refuse. A syntax
// error is regexp.Compile's.
func regexSize(source string) (int, error) {
	re, err := syntax.Parse(source, syntax.Perl)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) && se.Code == syntax.ErrLarge {
			return 0, &regexRefusal{source: source}
		}
		return 0, err
	}
	if estimateInsts(re, MaxRegexInsts) > MaxRegexInsts {
		return 0, &regexRefusal{source: source}
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	if len(prog.Inst) > MaxRegexInsts {
		return 0, &regexRefusal{source: source}
	}
	return len(prog.Inst), nil
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
