package catalog

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// refCycle returns the location of a subschema that reaches itself through
// keywords applied to the same instance ($ref, allOf, anyOf, oneOf, not,
// if/then/else, dependentSchemas), or "" if none does. The compiler takes
// such a schema, but validation refuses every instance that reaches it
// ("reference cycle"): a tool registered with one would fail its calls.
// Recursion through properties or items descends into the instance and
// ends; it is not a cycle. $dynamicRef and $recursiveRef resolve at
// validation time and are followed only to find more subschemas.
func refCycle(root *jsonschema.Schema) string {
	const (
		unseen = iota
		open
		done
	)
	state := map[*jsonschema.Schema]int{}
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var collect func(s *jsonschema.Schema)
	collect = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		all = append(all, s)
		for _, c := range inPlace(s) {
			collect(c)
		}
		for _, c := range descending(s) {
			collect(c)
		}
	}
	collect(root)
	var found string
	var visit func(s *jsonschema.Schema) bool
	visit = func(s *jsonschema.Schema) bool {
		switch state[s] {
		case open:
			found = s.Location
			return true
		case done:
			return false
		}
		state[s] = open
		for _, c := range inPlace(s) {
			if visit(c) {
				return true
			}
		}
		state[s] = done
		return false
	}
	for _, s := range all {
		if visit(s) {
			return found
		}
	}
	return ""
}

// inPlace are the subschemas s applies to the instance it is given.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return nonNil(out)
}

// descending are the other subschemas of s: those applied to a part of
// the instance (or resolved at validation time).
func descending(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.RecursiveRef, s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return nonNil(out)
}

func nonNil(ss []*jsonschema.Schema) []*jsonschema.Schema {
	out := ss[:0]
	for _, s := range ss {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}
