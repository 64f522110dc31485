package catalog

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
)

// Validation-work bounds (max_validation_work). The validator takes no
// context; what a call costs is the subschemas it applies to each value of
// the arguments — a keyword applied to the same value ($ref, allOf, anyOf,
// oneOf, not, if/then/else, dependentSchemas, ...) adds its subschemas to
// that value, one that descends (properties, items, additionalProperties,
// patternProperties, ...) adds its to the values beneath — and the
// regular-expression instructions each character is matched against.
// Without a bound both grow exponentially with a small schema (attack
// run: $defs a0…a24, each allOf [$ref next, $ref next], 1.4 KB and
// acyclic, took 31 s and 10 GB to validate the arguments {}; recursing
// through properties, 1.3 s for arguments 20 deep) and multiply with the
// arguments' width (a value visited 2,048 times took 23 s for a 40 KB
// array of zeros: ~0.5 µs a visit). So both are bounded when a schema is
// compiled, for the costliest value at every depth the arguments may reach
// (jsonlimits.MaxDepth): a call's validation then costs at most
// MaxValueVisits visits per value and MaxRegexPerChar instructions per
// character of its arguments — linear in their size, whatever the schema.
const (
	// MaxValueVisits bounds the subschemas applied to one value of the
	// arguments. A union of 32 object shapes that share a property name
	// gives that property's value 33; the attack's schema gave {} 2^25. At
	// the bound, 1 MiB of [0,0,…] costs ~15 s of CPU (~0.5 µs a visit),
	// against ~0.5 s for a schema that visits each value twice.
	MaxValueVisits = 64
	// MaxRegexPerChar bounds the regular-expression instructions one
	// character of the arguments is matched against ("pattern",
	// "patternProperties", "propertyNames"; a draft-07 "format": "regex"
	// parses it, counted as formatRegexPerChar), every subschema applied
	// to it together: one pattern at MaxRegexInsts.
	MaxRegexPerChar = MaxRegexInsts
)

// formatRegexPerChar is what a "format": "regex" check costs a character
// of the string it parses, in regex instructions matched: parsing takes up
// to ~270 ns a byte (`(?:)` repeated), ~18 instructions' matching.
const formatRegexPerChar = 32

// work is the most one value of the arguments can cost to validate
// against a schema, over every depth down to jsonlimits.MaxDepth and
// every value there. Counts saturate past the bounds.
type work struct {
	visits int64 // subschemas applied to the value
	depth  int   // the depth of the value with the most visits
	regex  int64 // regex instructions each of its characters is matched against
	// wild: a dynamic reference may resolve to any subschema, so its
	// cost is not bounded (visits saturated, wherever one is reached).
	wild bool
}

// validationWork is the work of validating a value against root (the
// input or output schema); anchors are the subschemas of the document
// holding a $dynamicAnchor (a $dynamicRef may resolve to one no keyword
// reaches); wild: a $dynamicRef or $recursiveRef may resolve to a
// subschema not known here (a $recursiveAnchor below the document's top,
// or an anchor that did not compile), which makes its cost unbounded.
//
// It follows the validator: a subschema applied to a value is one visit,
// and applies its in-place subschemas to the same value — a path of them
// ends where it would apply one a second time, a visit the validator
// refuses as a cycle — and its descending ones to the values beneath: one
// property name's (properties are per key), every pattern property,
// additionalProperties, unevaluatedProperties and propertyNames; or, in an
// array, one item's (prefixItems or items), additionalItems, contains and
// unevaluatedItems. An object is never an array, a dynamic reference
// resolves to one of its candidates: the costlier counts.
//
// Each subschema's in-place expansion is built once (past maxSteps it is
// not: the subschema is past the bound wherever it applies), then its
// cost at each depth beneath the value it applies to is summed over it,
// depth by depth: (jsonlimits.MaxDepth+1) × maxSteps steps per subschema
// at most.
func validationWork(root *jsonschema.Schema, anchors []*jsonschema.Schema, wild bool, regexInsts func(jsonschema.Regexp) int) work {
	g := newWorkGraph(root, anchors, wild, regexInsts)
	n := len(g.nodes)
	// The subschemas applied to a value as they are first (root, and
	// those a keyword descends to from one applied), and their expansions.
	expansion := make([]*step, n)
	var first []int
	seen := make([]bool, n)
	onPath := make([]bool, n)
	need := func(i int) {
		if !seen[i] {
			seen[i] = true
			first = append(first, i)
		}
	}
	need(0)
	for k := 0; k < len(first); k++ {
		i := first[k]
		expansion[i] = g.expand(i, onPath)
		expansion[i].each(func(j int) {
			nd := &g.nodes[j]
			for _, d := range [][]int{nd.props, nd.objAll, nd.items, nd.arrAll} {
				for _, c := range d {
					need(c)
				}
			}
		})
	}
	w := work{wild: wild}
	// own[j] is what subschema j costs a value d levels beneath the one
	// it applies to by itself, at[i] with its in-place expansion.
	own, below, at := make([]cost, n), make([]cost, n), make([]cost, n)
	for d := 0; d <= jsonlimits.MaxDepth; d++ {
		for j := range n {
			if d == 0 {
				own[j] = cost{visits: 1, regex: g.nodes[j].pattern}
			} else {
				own[j] = g.beneath(&g.nodes[j], below, d == 1)
			}
		}
		for _, i := range first {
			if expansion[i] == nil {
				at[i] = cost{visits: workCap, regex: workCap}
				continue
			}
			at[i] = expansion[i].cost(own, d == 0)
		}
		if at[0].visits > w.visits {
			w.visits, w.depth = at[0].visits, d
		}
		w.regex = max(w.regex, at[0].regex)
		below, at = at, below
		if allZero(below) {
			break // nothing reaches deeper
		}
	}
	return w
}

// workCap is where counts saturate: far past every bound, far from
// overflow.
const workCap = 1 << 40

// cost is what applying a subschema costs one value.
type cost struct{ visits, regex int64 }

func (c cost) plus(o cost) cost {
	return cost{visits: min(c.visits+o.visits, workCap), regex: min(c.regex+o.regex, workCap)}
}

func (c cost) or(o cost) cost {
	return cost{visits: max(c.visits, o.visits), regex: max(c.regex, o.regex)}
}

func allZero(cs []cost) bool {
	for _, c := range cs {
		if c != (cost{}) {
			return false
		}
	}
	return true
}

// workGraph is a schema's subschemas as indices, the root first.
type workGraph struct{ nodes []workNode }

type workNode struct {
	inPlace []int // applied to the same value
	// choice: a dynamic reference, which resolves to one of these.
	choice []int
	// unbounded: a dynamic reference that may resolve to a subschema not
	// known here.
	unbounded bool
	pattern   int64 // "pattern" instructions
	keys      int64 // "patternProperties" instructions, matched against each key
	// The values beneath: one of props applies to a property's value
	// (properties are per name), each of objAll to every one; one of
	// items to an item, each of arrAll to every one.
	props, objAll, items, arrAll []int
}

func newWorkGraph(root *jsonschema.Schema, anchors []*jsonschema.Schema, wild bool, regexInsts func(jsonschema.Regexp) int) *workGraph {
	g := &workGraph{}
	index := map[*jsonschema.Schema]int{}
	var queue []*jsonschema.Schema
	ids := func(ss ...*jsonschema.Schema) []int {
		var out []int
		for _, s := range ss {
			if s == nil {
				continue
			}
			i, ok := index[s]
			if !ok {
				i = len(queue)
				index[s] = i
				queue = append(queue, s)
			}
			out = append(out, i)
		}
		return out
	}
	ids(root)
	ids(anchors...)
	for k := 0; k < len(queue); k++ {
		s := queue[k]
		var nd workNode
		nd.inPlace = ids(inPlace(s)...)
		if d := s.DynamicRef; d != nil {
			// Dynamic only when its first target holds its anchor (the
			// validator's validateRefs).
			if d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
				nd.choice = ids(d.Ref)
				nd.unbounded = wild
			} else {
				nd.inPlace = append(nd.inPlace, ids(d.Ref)...)
			}
		}
		if r := s.RecursiveRef; r != nil {
			if r.RecursiveAnchor {
				nd.choice = append(nd.choice, ids(r, root)...)
				nd.unbounded = nd.unbounded || wild
			} else {
				nd.inPlace = append(nd.inPlace, ids(r)...)
			}
		}
		nd.pattern = int64(regexInsts(s.Pattern))
		if s.Format != nil && s.Format.Name == "regex" {
			nd.pattern += formatRegexPerChar
		}
		for re, p := range s.PatternProperties {
			nd.keys += int64(regexInsts(re))
			nd.objAll = append(nd.objAll, ids(p)...)
		}
		for _, p := range s.Properties {
			nd.props = append(nd.props, ids(p)...)
		}
		nd.objAll = append(nd.objAll, ids(schemaOf(s.AdditionalProperties), s.UnevaluatedProperties, s.PropertyNames)...)
		nd.items = ids(append([]*jsonschema.Schema{s.Items2020, schemaOf(s.Items)}, s.PrefixItems...)...)
		if list, ok := s.Items.([]*jsonschema.Schema); ok {
			nd.items = append(nd.items, ids(list...)...)
		}
		nd.arrAll = ids(schemaOf(s.AdditionalItems), s.Contains, s.UnevaluatedItems, s.ContentSchema)
		g.nodes = append(g.nodes, nd)
	}
	// Every subschema is known now: where a $dynamicRef may resolve.
	byAnchor := map[string][]int{}
	for i, s := range queue {
		if s.DynamicAnchor != "" {
			byAnchor[s.DynamicAnchor] = append(byAnchor[s.DynamicAnchor], i)
		}
	}
	for i, s := range queue {
		if d := s.DynamicRef; d != nil && d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
			for _, j := range byAnchor[d.Anchor] {
				if !slices.Contains(g.nodes[i].choice, j) {
					g.nodes[i].choice = append(g.nodes[i].choice, j)
				}
			}
		}
	}
	return g
}

// maxSteps bounds a subschema's in-place expansion: what its dynamic
// references may resolve to counts there, though one applies.
const maxSteps = 4 * MaxValueVisits

// step is a subschema applied to a value in an in-place expansion, and
// what it applies to the same value in turn.
type step struct {
	node   int     // the subschema; -1: none, only cycles
	cycles int64   // references back onto the path: a visit each, refused
	then   []*step // applied after it
	choice []*step // a dynamic reference: one of them applies
}

// expand is the in-place expansion of subschema i: the subschemas it
// applies to the value it is applied to, each as many times as the
// validator would, along every in-place path from i, each cut where it
// would apply a subschema already on it (a cycle: the validator refuses
// the value there, after a visit). nil past maxSteps, or when a dynamic
// reference in it is unbounded.
func (g *workGraph) expand(i int, onPath []bool) *step {
	budget := maxSteps
	var visit func(j int) *step
	visit = func(j int) *step {
		if budget == 0 || g.nodes[j].unbounded {
			return nil
		}
		budget--
		st := &step{node: j}
		onPath[j] = true
		defer func() { onPath[j] = false }()
		for _, k := range g.nodes[j].inPlace {
			if onPath[k] {
				st.cycles++
				continue
			}
			t := visit(k)
			if t == nil {
				return nil
			}
			st.then = append(st.then, t)
		}
		for _, k := range g.nodes[j].choice {
			t := &step{node: -1, cycles: 1}
			if !onPath[k] {
				if t = visit(k); t == nil {
					return nil
				}
			}
			st.choice = append(st.choice, t)
		}
		return st
	}
	return visit(i)
}

// each calls f with every subschema of st (none for nil).
func (st *step) each(f func(int)) {
	if st == nil {
		return
	}
	if st.node >= 0 {
		f(st.node)
	}
	for _, t := range st.then {
		t.each(f)
	}
	for _, t := range st.choice {
		t.each(f)
	}
}

// cost is what st costs a value, own being what each subschema costs it
// by itself; top: the value is the one st applies to (where a cycle costs
// its visit).
func (st *step) cost(own []cost, top bool) cost {
	var c cost
	if st.node >= 0 {
		c = own[st.node]
	}
	if top {
		c = c.plus(cost{visits: st.cycles})
	}
	for _, t := range st.then {
		c = c.plus(t.cost(own, top))
	}
	var alt cost
	for _, t := range st.choice {
		alt = alt.or(t.cost(own, top))
	}
	return c.plus(alt)
}

// beneath is what nd costs one value one level beneath the value it is
// applied to, from below (each subschema's cost one level further down);
// child: that value is the one whose key patternProperties matches.
func (g *workGraph) beneath(nd *workNode, below []cost, child bool) cost {
	var prop, item cost
	for _, j := range nd.props {
		prop = prop.or(below[j])
	}
	for _, j := range nd.objAll {
		prop = prop.plus(below[j])
	}
	if child {
		prop = prop.plus(cost{regex: nd.keys})
	}
	for _, j := range nd.items {
		item = item.or(below[j])
	}
	for _, j := range nd.arrAll {
		item = item.plus(below[j])
	}
	return prop.or(item)
}

// schemaOf is v when it is a subschema (additionalProperties and
// additionalItems may be a boolean; items a list).
func schemaOf(v any) *jsonschema.Schema {
	s, _ := v.(*jsonschema.Schema)
	return s
}

// checkWork refuses schema (compiled by c from doc; w its walk) when
// validating a value against it could cost past MaxValueVisits or
// MaxRegexPerChar (max_validation_work).
func checkWork(field string, c *jsonschema.Compiler, doc any, schema *jsonschema.Schema, w *walker, regexes *regexEngine) error {
	work, refused := schemaWork(c, doc, schema, w.dynamicAnchor, w.nestedRecursiveAnchor, regexes)
	if refused != nil {
		return w.regexTooLarge(field, refused)
	}
	if work.visits > MaxValueVisits {
		visits := fmt.Sprint(work.visits)
		if work.visits >= workCap {
			visits = "too many"
			if work.wild {
				visits = "too many (a $recursiveRef or $dynamicRef may resolve to a subschema past counting: a $recursiveAnchor below the top, an anchor that does not compile)"
			}
		}
		return invalid(field, RuleValidationWork, "%s subschemas could apply to one value of the arguments %s (through $ref, allOf, anyOf, oneOf, not, if/then/else and the like, applying theirs to the same value); at most %d may: validating would cost as much for every such value of every call",
			visits, atDepth(work.depth), MaxValueVisits)
	}
	if work.regex > MaxRegexPerChar {
		return invalid(field, RuleValidationWork, "a character of the arguments could be matched against patterns of %d regular-expression instructions together; at most %d may be: matching costs time in proportion to them for every character",
			work.regex, MaxRegexPerChar)
	}
	return nil
}

// schemaWork is validationWork for schema, compiled by c from doc, whose
// subschemas hold a "$dynamicAnchor" (dynamic), or a "$recursiveAnchor"
// below the top (recursive); a subschema holding a dynamic anchor is
// compiled to be counted (refused: one of its patterns was refused for its
// size).
func schemaWork(c *jsonschema.Compiler, doc any, schema *jsonschema.Schema, dynamic, recursive bool, regexes *regexEngine) (work, *regexRefusal) {
	var anchors []*jsonschema.Schema
	wild := recursive
	if dynamic {
		for _, ptr := range dynamicAnchorPointers(doc, "", nil) {
			s, err := c.Compile(schemaBase + "#" + ptr)
			if err != nil {
				if r := regexes.refused; r != nil {
					return work{}, r
				}
				wild = true // where its references land is not known: anywhere
				continue
			}
			anchors = append(anchors, s)
		}
	}
	return validationWork(schema, anchors, wild, regexes.instsOf), nil
}

// atDepth says where a value at depth d of the arguments is.
func atDepth(d int) string {
	switch d {
	case 0:
		return "(the arguments object itself)"
	case 1:
		return "(a top-level argument)"
	default:
		return fmt.Sprintf("(one nested %d levels deep)", d)
	}
}

// dynamicAnchorPointers are the JSON pointers (URL-fragment encoded) of the
// objects of doc, at ptr, that hold a "$dynamicAnchor", outside the
// keywords that hold instance data.
func dynamicAnchorPointers(v any, ptr string, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$dynamicAnchor"].(string); ok {
			out = append(out, ptr)
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if !dataKeywords[k] {
				out = dynamicAnchorPointers(v[k], ptr+"/"+pointerToken(k), out)
			}
		}
	case []any:
		for i, x := range v {
			out = dynamicAnchorPointers(x, ptr+"/"+strconv.Itoa(i), out)
		}
	}
	return out
}

// pointerToken is k as a JSON-pointer token in a URL fragment.
func pointerToken(k string) string {
	return url.PathEscape(strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
}
