package catalog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// visitCounter counts, by the value's location, the subschemas the
// validator applies: a vocabulary whose keyword every subschema object
// has, so each visit that reaches the extensions calls it (a visit that
// fails before them is not counted: a lower bound, as exact as the
// instances are valid).
type visitCounter struct{ at map[string]int }

type countVisit struct{ c *visitCounter }

func (v countVisit) Validate(ctx *jsonschema.ValidatorContext, _ any) {
	v.c.at["/"+strings.Join(ctx.ValueLocation(), "/")]++
}

func (c *visitCounter) vocabulary(t *testing.T) *jsonschema.Vocabulary {
	const url = "https://schemas.sharedos.invalid/count-visits"
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	mc := jsonschema.NewCompiler()
	if err := mc.AddResource(url, meta); err != nil {
		t.Fatal(err)
	}
	sch, err := mc.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return &jsonschema.Vocabulary{URL: url, Schema: sch, Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
		return countVisit{c}, nil
	}}
}

// compileCounting compiles schema as compileSchemaUncached does, with the
// visit counter, and returns it with its work.
func compileCounting(t *testing.T, schema string, draft *jsonschema.Draft) (*jsonschema.Schema, work, *visitCounter) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	w := walker{}
	if err := w.walk("inputSchema", doc, 1, false); err != nil {
		t.Fatal(err)
	}
	counter := &visitCounter{at: map[string]int{}}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(draft)
	c.UseLoader(refusingLoader{})
	regexes := newRegexEngine()
	defer regexes.done()
	c.UseRegexpEngine(regexes.compile)
	c.RegisterVocabulary(counter.vocabulary(t))
	c.AssertVocabs()
	if err := c.AddResource(schemaBase, doc); err != nil {
		t.Fatal(err)
	}
	compiled, err := c.Compile(schemaBase)
	if err != nil {
		t.Fatal(err)
	}
	wk, refused := schemaWork(c, doc, compiled, w.dynamicAnchor, w.nestedRecursiveAnchor, regexes)
	if refused != nil {
		t.Fatal(refused)
	}
	return compiled, wk, counter
}

// chain is the attack's schema: $defs a0…a(n-1), each allOf [$ref next,
// $ref next], applied to the arguments object.
func chain(n int) string {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"a%d":{"type":"object"}`, n))
	return `{"type":"object","$ref":"#/$defs/a0","$defs":{` + strings.Join(defs, ",") + `}}`
}

// nestedC is {"c":{"c":…{}}}, depth levels deep.
func nestedC(depth int) string {
	return strings.Repeat(`{"c":`, depth) + `{}` + strings.Repeat(`}`, depth)
}

// The count is never below what the validator does: for each schema and
// instance, no value of the instance is visited by more subschemas than
// validationWork says one can be — and for the attack's schemas, whose
// every value the validator visits as often as the schema allows, it is
// exactly that many. The counts are the validator's own (a vocabulary
// counting its visits), not a model of it.
func TestValidationWorkBoundsTheValidatorsVisits(t *testing.T) {
	tree := `{"type":"object","$defs":{"t":{"type":"object","properties":{"left":{"$ref":"#/$defs/t"},"right":{"$ref":"#/$defs/t"},"and":{"type":"array","items":{"$ref":"#/$defs/t"}}}}},"properties":{"q":{"$ref":"#/$defs/t"}}}`
	var union []string
	for i := range 32 {
		union = append(union, fmt.Sprintf(`{"type":"object","properties":{"kind":{"type":"string"},"v%d":{"type":"integer"}}}`, i))
	}
	for _, c := range []struct {
		name, schema string
		draft        *jsonschema.Draft
		instances    []string
		exact        bool // the worst value is visited as often as the bound
		visits       int64
	}{
		// The root, then a0…a3 two ways each, a4 sixteen times: 1 + 61.
		{name: "the attack's allOf $ref graph, 4 levels", schema: chain(4), instances: []string{`{}`}, exact: true, visits: 62},
		// c's schema, its allOf entry, n.
		{name: "recursion through the arguments", exact: true, visits: 3,
			schema:    `{"type":"object","$defs":{"n":{"type":"object","properties":{"c":{"allOf":[{"$ref":"#/$defs/n"}]}}}},"$ref":"#/$defs/n"}`,
			instances: []string{nestedC(1), nestedC(10), nestedC(40)}},
		{name: "a tree recursing through properties and items", schema: tree, exact: true, visits: 2,
			instances: []string{`{"q":{"left":{"right":{"and":[{"left":{}},{}]}},"right":{}}}`}},
		// anyOf stops at the first match: the bound counts every shape.
		{name: "a union of 32 shapes sharing a property", visits: 33,
			schema:    `{"type":"object","properties":{"x":{"anyOf":[` + strings.Join(union, ",") + `]}}}`,
			instances: []string{`{"x":{"kind":"a","v1":1}}`}},
		{name: "every keyword at once", visits: 0,
			schema:    `{"type":"object","properties":{"a":{"type":"array","prefixItems":[{"$ref":"#/$defs/s"}],"items":{"$ref":"#/$defs/s"},"contains":{"$ref":"#/$defs/s"},"unevaluatedItems":{"$ref":"#/$defs/s"}}},"patternProperties":{"^a":{"$ref":"#/$defs/s"},"^.":{"$ref":"#/$defs/s"}},"additionalProperties":{"$ref":"#/$defs/s"},"propertyNames":{"$ref":"#/$defs/s"},"dependentSchemas":{"a":{"properties":{"a":{"$ref":"#/$defs/s"}}}},"if":{"properties":{"a":{"$ref":"#/$defs/s"}}},"then":{"properties":{"a":{"$ref":"#/$defs/s"}}},"else":{"$ref":"#/$defs/s"},"unevaluatedProperties":{"$ref":"#/$defs/s"},"$defs":{"s":{"anyOf":[{},{"not":{"type":"null"}}]}}}`,
			instances: []string{`{"a":[1,2,3],"b":{},"ab":[]}`}},
		{name: "draft-07 items, additionalItems, dependencies", draft: jsonschema.Draft7, visits: 0,
			schema:    `{"type":"object","definitions":{"s":{"allOf":[{},{}]}},"properties":{"a":{"type":"array","items":[{"$ref":"#/definitions/s"},{"$ref":"#/definitions/s"}],"additionalItems":{"$ref":"#/definitions/s"}}},"dependencies":{"a":{"properties":{"a":{"items":{"$ref":"#/definitions/s"}}}}}}`,
			instances: []string{`{"a":[1,2,3,4]}`}},
		// 2019-09: $recursiveRef resolves to the outermost schema in scope
		// whose resource has $recursiveAnchor: the root.
		{name: "a 2019-09 $recursiveRef to the root", draft: jsonschema.Draft2019, visits: 0,
			schema:    `{"$recursiveAnchor":true,"type":"object","properties":{"kids":{"type":"array","items":{"$recursiveRef":"#"}},"x":{"allOf":[{"$recursiveRef":"#"}]}}}`,
			instances: []string{`{"kids":[{"kids":[{}]},{"x":{"x":{}}}]}`}},
		// A $dynamicRef that resolves, through the scope, to a subschema
		// no keyword references: the root resource's anchor.
		{name: "a $dynamicRef to an anchor nothing references", visits: 0,
			schema: `{"type":"object","$defs":{"bomb":{"$dynamicAnchor":"node","allOf":[{"$ref":"#/$defs/b1"},{"$ref":"#/$defs/b1"}]},"b1":{"allOf":[{},{}]},` +
				`"e":{"$id":"urn:e","$dynamicAnchor":"node","type":"object","properties":{"next":{"$dynamicRef":"#node"}}}},"properties":{"x":{"$ref":"#/$defs/e"}}}`,
			instances: []string{`{"x":{"next":{"next":{}}}}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			draft := c.draft
			if draft == nil {
				draft = jsonschema.Draft2020
			}
			sch, wk, counter := compileCounting(t, c.schema, draft)
			if c.visits != 0 && wk.visits != c.visits {
				t.Errorf("work = %d visits a value, want %d", wk.visits, c.visits)
			}
			most := 0
			for _, inst := range c.instances {
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(inst))
				if err != nil {
					t.Fatal(err)
				}
				clear(counter.at)
				if err := sch.Validate(v); err != nil {
					t.Fatalf("%s: %v", inst, err)
				}
				for loc, n := range counter.at {
					most = max(most, n)
					if int64(n) > wk.visits {
						t.Errorf("%s: the value at %s was visited %d times; the bound says %d", inst, loc, n, wk.visits)
					}
				}
			}
			if c.exact && int64(most) != wk.visits {
				t.Errorf("the most a value was visited is %d; the bound is %d, want them equal", most, wk.visits)
			}
		})
	}
}

// The bound is cheap whatever the schema: the attack's 24 levels and its
// recursion through the arguments are counted, past the bound, in a
// handful of steps per subschema (saturating, never overflowing).
func TestValidationWorkOfTheAttacksSchemas(t *testing.T) {
	for name, schema := range map[string]string{
		"allOf $ref graph, 24 levels":     chain(24),
		"allOf $ref graph, 300 levels":    chain(300),
		"recursion through the arguments": `{"type":"object","$defs":{"n":{"type":"object","properties":{"c":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}},"properties":{"c":{"$ref":"#/$defs/n"}}}`,
	} {
		ps, err := compileSchemaUncached("inputSchema", []byte(schema), only2020)
		var ve *ValidationError
		if ps != nil || !asValidation(err, &ve) || ve.Rule != RuleValidationWork {
			t.Errorf("%s: %v, want a %s refusal", name, err, RuleValidationWork)
		}
	}
}

func asValidation(err error, ve **ValidationError) bool {
	v, ok := err.(*ValidationError)
	*ve = v
	return ok
}
