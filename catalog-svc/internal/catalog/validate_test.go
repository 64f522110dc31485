package catalog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
)

func nested(depth int) string {
	return `{"type":"object","properties":{"x":` + strings.Repeat(`{"type":"array","items":`, depth) + `{}` + strings.Repeat(`}`, depth) + `}}`
}

// refGraph is an object schema whose $defs a0…a(n-1) each apply the next
// twice (allOf [$ref next, $ref next]), with the members top besides.
func refGraph(n int, top string) string {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"a%d":{}`, n))
	return `{"type":"object","$defs":{` + strings.Join(defs, ",") + `},` + top + `}`
}

// manyPatterns is an input schema of n properties, each with its own
// pattern of about 2,000 regular-expression instructions.
func manyPatterns(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","pattern":"^p%d.{0,999}$"}`, i, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

func manyProps(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// ipv6Pattern is the IPv6 address pattern found on many a web page, JSON
// escaped.
const ipv6Pattern = `^(([0-9a-fA-F]{1,4}:){7,7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:)|fe80:(:[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]{1,}|::(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])|([0-9a-fA-F]{1,4}:){1,4}:((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9]))$`

// samePatterns is an input schema of n string properties p0…, property i
// with the pattern format (a fmt format of i).
func samePatterns(n int, format string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","pattern":"`+format+`"}`, i, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// samePattern is a closed input schema of n string properties p0… with
// one pattern.
func samePattern(n int, pattern string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","pattern":%q}`, i, pattern)
	}
	b.WriteString(`},"additionalProperties":false}`)
	return b.String()
}

// Every rejection rule, through the public Register path: InvalidArgument
// (a *ValidationError) naming the field and the rule.
func TestRegisterRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *sharedosv1.ToolRegistration)
		field  string
		rule   string
		detail string // substring of the detail, when it matters
	}{
		{"empty name", func(r *sharedosv1.ToolRegistration) { r.Name = "" }, "name", "ToolNameSchema", "empty"},
		{"name with space", func(r *sharedosv1.ToolRegistration) { r.Name = "files.read file" }, "name", "ToolNameSchema", "U+0020"},
		{"name too long", func(r *sharedosv1.ToolRegistration) { r.Name = "files." + strings.Repeat("a", 123) }, "name", "ToolNameSchema", "129"},
		{"name with slash", func(r *sharedosv1.ToolRegistration) { r.Name = "files/read" }, "name", "ToolNameSchema", ""},
		{"leading dot", func(r *sharedosv1.ToolRegistration) { r.Name = ".read" }, "name", "QualifiedToolName", ""},
		{"foreign namespace", func(r *sharedosv1.ToolRegistration) { r.Name = "github.search"; r.Metadata.Namespace = "notion" }, "metadata.namespace", catalog.RuleNamespace, `"github"`},
		{"missing namespace", func(r *sharedosv1.ToolRegistration) { r.Metadata.Namespace = "" }, "metadata.namespace", catalog.RuleNamespace, ""},
		{"unspecified class", func(r *sharedosv1.ToolRegistration) { r.Class = 0 }, "class", catalog.RuleClass, ""},
		{"missing input schema", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = nil }, "inputSchema", catalog.RuleRequired, ""},
		{"input not JSON", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = []byte(`{"type":`) }, "inputSchema", catalog.RuleJSON, ""},
		{"input not UTF-8", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte("{\"type\":\"object\",\"description\":\"\xff\"}")
		}, "inputSchema", catalog.RuleUTF8, ""},
		{"input repeats a key", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"}},"properties":{}}`)
		}, "inputSchema", catalog.RuleUniqueKeys, "repeats a key"},
		{"annotations repeat a key", func(r *sharedosv1.ToolRegistration) {
			r.AnnotationsJson = []byte(`{"readOnlyHint":true,"readOnlyHint":false}`)
		}, "annotations", catalog.RuleUniqueKeys, ""},
		// Read case-blind (encoding/json: ReadOnly, the bridge's MCP tool)
		// this is read-only; read exactly (a policy), it is not.
		{"annotations keys differing only in case", func(r *sharedosv1.ToolRegistration) {
			r.AnnotationsJson = []byte(`{"readOnlyHint":false,"ReadOnlyHint":true}`)
		}, "annotations", catalog.RuleUniqueKeys, `"ReadOnlyHint" and "readOnlyHint" differ only in letter case`},
		// Exactly 1, but longer than authz-svc takes a number: one such
		// tool would fail every context's listing.
		{"annotations number longer than a policy input's", func(r *sharedosv1.ToolRegistration) {
			r.AnnotationsJson = []byte(`{"x-weight":1.` + strings.Repeat("0", 128) + `}`)
		}, "annotations.x-weight", catalog.RuleNumberRange, "longer than the 128 characters"},
		{"nested annotations keys differing only in case", func(r *sharedosv1.ToolRegistration) {
			r.AnnotationsJson = []byte(`{"title":"Read file","x-scope":[{"kelvin":1,"\u212Aelvin":2}]}`)
		}, "annotations.x-scope[0]", catalog.RuleUniqueKeys, "letter case"},
		{"input an array", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = []byte(`[]`) }, "inputSchema", catalog.RuleObjectSchema, "an array"},
		{"input without type object", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = []byte(`{"type":"string"}`) }, "inputSchema.type", catalog.RuleObjectSchema, `"string"`},
		{"input type missing", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = []byte(`{"properties":{}}`) }, "inputSchema.type", catalog.RuleObjectSchema, ""},
		{"input invalid keyword value", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"strin"}}}`)
		}, "inputSchema", catalog.RuleJSONSchema, ""},
		{"input minLength negative", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","minLength":-1}}}`)
		}, "inputSchema", catalog.RuleJSONSchema, ""},
		{"older draft", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)
		}, "inputSchema.$schema", catalog.RuleJSONSchema, "2020-12"},
		{"an upstream tool's unknown dialect", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`)
		}, "inputSchema.$schema", catalog.RuleJSONSchema, "draft-07"},
		{"an upstream draft-07 schema invalid in draft-07", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"strin"}}}`)
		}, "inputSchema", catalog.RuleJSONSchema, ""},
		// Only the top declares the dialect: a draft-07 resource inside a
		// 2020-12 schema asserted "format": "regex" on every call.
		{"a subschema declaring draft-07", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","$defs":{"x":{"$id":"urn:x","$schema":"http://json-schema.org/draft-07/schema#","format":"regex"}},"properties":{"path":{"$ref":"#/$defs/x"}},"additionalProperties":false}`)
		}, "inputSchema.$defs.x.$schema", catalog.RuleNestedDialect, `"http://json-schema.org/draft-07/schema#": only the top`},
		{"an upstream's subschema declaring 2020-12", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.OutputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"$id":"urn:x","$schema":"https://json-schema.org/draft/2020-12/schema"}}}`)
		}, "outputSchema.properties.x.$schema", catalog.RuleNestedDialect, ""},
		{"a remote metaschema below the top", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","$defs":{"x":{"$id":"urn:x","$schema":"https://evil.example/meta#"}},"properties":{"path":{"type":"string"}},"additionalProperties":false}`)
		}, "inputSchema.$defs.x.$schema", catalog.RuleNetworkRef, "evil.example"},
		{"network $ref", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"$ref":"https://evil.example/s.json"}}}`)
		}, "inputSchema.properties.path.$ref", catalog.RuleNetworkRef, "evil.example"},
		{"relative $ref", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"$ref":"other.json#/x"}}}`)
		}, "inputSchema.properties.path.$ref", catalog.RuleNetworkRef, ""},
		{"local $ref under a remote $id stays local", func(r *sharedosv1.ToolRegistration) {
			// The "#..." ref resolves inside the embedded resource; nothing
			// is fetched from evil.example (the loader refuses every URL).
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"$id":"https://evil.example/x.json","$ref":"#/$defs/nope"}}}`)
		}, "inputSchema", catalog.RuleJSONSchema, "not found"},
		{"dangling local $ref", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"$ref":"#/$defs/missing"}}}`)
		}, "inputSchema", catalog.RuleJSONSchema, ""},
		// The compiler takes a cycle the validator then refuses on every
		// call that reaches it.
		{"$ref cycle", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"path":{"$ref":"#/$defs/a"}},"additionalProperties":false}`)
		}, "inputSchema", catalog.RuleRefCycle, "#/$defs/a reaches itself"},
		{"$ref cycle through allOf", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"properties":{"x":{"$ref":"#/$defs/a"}}}`)
		}, "outputSchema", catalog.RuleRefCycle, ""},
		// A pattern's program is bounded before it is built (attack run:
		// 1.3 KB of pattern took 26 s to match a 10 KB argument; `.{1000}`
		// repeated, a 253 KB registration, 4.25 GB to compile).
		{"pattern past the regex bound", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","pattern":"` + strings.Repeat(`[a-y]{0,1000}`, 100) + `z"}},"additionalProperties":false}`)
		}, "inputSchema.properties.path.pattern", catalog.RuleRegexSize, "more than 2048 regular-expression instructions"},
		{"pattern property past the regex bound", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","patternProperties":{"^x":{},".{1000}.{1000}.{1000}":{"type":"string"}}}`)
		}, "outputSchema.patternProperties..{1000}.{1000}.{1000}", catalog.RuleRegexSize, ""},
		// Past what the parser itself takes (its 3.3M-instruction limit).
		{"pattern the parser calls too large", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","pattern":"` + strings.Repeat(`.{1000}`, 3400) + `"}},"additionalProperties":false}`)
		}, "inputSchema.properties.path.pattern", catalog.RuleRegexSize, ""},
		{"an upstream draft-07 pattern past the regex bound", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"p":{"pattern":".{1000}.{1000}.{1000}"}},"properties":{"path":{"$ref":"#/definitions/p"}}}`)
		}, "inputSchema.definitions.p.pattern", catalog.RuleRegexSize, ""},
		// Parsing merges a Unicode class's table (\pL: 1,292 code points;
		// 4 KB of them in a bracket took 0.1 s and 42 MB).
		{"a pattern past the schema's Unicode classes", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","pattern":"^[` + strings.Repeat(`\\pL`, 300) + `]$"}},"additionalProperties":false}`)
		}, "inputSchema.properties.path.pattern", catalog.RuleRegexSize, "more than 256 Unicode class escapes"},
		{"patterns past the schema's Unicode classes together", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(samePatterns(5, `^[%d`+strings.Repeat(`\\pL`, 60)+`]$`))
		}, "", catalog.RuleRegexSize, "more than 256 Unicode class escapes"},
		{"pattern past 16 KiB", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","pattern":"` + strings.Repeat("a|", 8200) + `a"}},"additionalProperties":false}`)
		}, "inputSchema.properties.path.pattern", catalog.RuleRegexSize, "at most 16384"},
		{"patterns past the schema's regex bound together", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(manyPatterns(catalog.MaxSchemaRegexInsts/2000 + 1))
		}, "", catalog.RuleRegexSize, "together"},
		// Validation work is bounded where the schema is compiled (attack
		// run: this graph, 24 levels and 1.4 KB, acyclic, took 31 s and
		// 10 GB to validate {}; recursing through the arguments, 1.3 s for
		// arguments 20 deep).
		{"an allOf $ref graph doubling at every level", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(refGraph(24, `"$ref":"#/$defs/a0","properties":{"path":{"type":"string"}},"additionalProperties":false`))
		}, "inputSchema", catalog.RuleValidationWork, "one value of the arguments (the arguments object itself)"},
		{"recursion doubling through the arguments", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","$defs":{"n":{"type":"object","properties":{"c":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}},"properties":{"c":{"$ref":"#/$defs/n"}}}`)
		}, "outputSchema", catalog.RuleValidationWork, "at most 64"},
		// Width multiplies what one value costs: 254 visits an item, and
		// 1 MiB of arguments holds 500,000 items (~1 min).
		{"items each visited 254 times", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(refGraph(6, `"properties":{"path":{"type":"string"},"n":{"type":"array","items":{"$ref":"#/$defs/a0"}}},"additionalProperties":false`))
		}, "inputSchema", catalog.RuleValidationWork, "(one nested 2 levels deep)"},
		{"a string matched against two large patterns", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","pattern":"^.{0,700}$","allOf":[{"pattern":"^[a-z/]{0,700}$"}]}},"additionalProperties":false}`)
		}, "inputSchema", catalog.RuleValidationWork, "regular-expression instructions together"},
		// A draft-07 "format": "regex" parses the string on every call:
		// counted with its patterns (2,028 instructions here, and 32 a
		// character for the parse).
		{"a string parsed as a regex and matched against a large pattern", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string","format":"regex","pattern":"^[a-z]{0,1000}[0-9]{0,12}$"}},"additionalProperties":false}`)
		}, "inputSchema", catalog.RuleValidationWork, "2060 regular-expression instructions together"},
		// A $recursiveAnchor below the top: the validator may resolve a
		// $recursiveRef to any subschema in scope of its resource.
		{"a 2019-09 $recursiveRef that may resolve anywhere", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object","$defs":{"t":{"$id":"urn:t","$recursiveAnchor":true,"type":"object","properties":{"c":{"$recursiveRef":"#"}}}},"properties":{"path":{"$ref":"#/$defs/t"}},"additionalProperties":false}`)
		}, "inputSchema", catalog.RuleValidationWork, "$recursiveAnchor below the top"},
		{"too deep", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = []byte(nested(40)) }, "", catalog.RuleSchemaDepth, ""},
		{"too big", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","description":"` + strings.Repeat("a", catalog.MaxSchemaBytes) + `"}`)
		}, "inputSchema", catalog.RuleSchemaSize, ""},
		{"too many subschemas", func(r *sharedosv1.ToolRegistration) { r.InputSchemaJson = []byte(manyProps(catalog.MaxSubschemas + 1)) }, "", catalog.RuleSubschemaCount, ""},
		{"output not an object schema", func(r *sharedosv1.ToolRegistration) { r.OutputSchemaJson = []byte(`{"type":"array"}`) }, "outputSchema.type", catalog.RuleObjectSchema, ""},
		{"output network $ref", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","$ref":"http://x.example/a"}`)
		}, "outputSchema.$ref", catalog.RuleNetworkRef, ""},
		// What only the published projection refuses names its field too.
		{"annotations lone surrogate", func(r *sharedosv1.ToolRegistration) { r.AnnotationsJson = []byte(`{"title":"\ud800"}`) },
			"annotations", catalog.RuleJSON, "surrogate"},
		{"annotations not an object", func(r *sharedosv1.ToolRegistration) { r.AnnotationsJson = []byte(`[1]`) }, "annotations", catalog.RuleJSONObject, ""},
		{"description RLO", func(r *sharedosv1.ToolRegistration) { r.Description = "Reads a file\u202e.txt" }, "description", catalog.RulePoisoning, "U+202E RIGHT-TO-LEFT OVERRIDE at byte 12 (tool-poisoning marker)"},
		{"description ANSI", func(r *sharedosv1.ToolRegistration) { r.Description = "ok \x1b[8mhidden\x1b[0m" }, "description", catalog.RulePoisoning, "U+001B ESCAPE"},
		{"description CSI C1", func(r *sharedosv1.ToolRegistration) { r.Description = "ok \u009b8m" }, "description", catalog.RulePoisoning, "U+009B"},
		{"description NUL", func(r *sharedosv1.ToolRegistration) { r.Description = "a\x00b" }, "description", catalog.RulePoisoning, "U+0000"},
		{"description CR", func(r *sharedosv1.ToolRegistration) { r.Description = "line\roverwrite" }, "description", catalog.RulePoisoning, "U+000D"},
		{"description DEL", func(r *sharedosv1.ToolRegistration) { r.Description = "a\x7fb" }, "description", catalog.RulePoisoning, "U+007F"},
		{"description zero-width space", func(r *sharedosv1.ToolRegistration) { r.Description = "a\u200bb" }, "description", catalog.RulePoisoning, "U+200B ZERO WIDTH SPACE at byte 1"},
		{"description ZWJ", func(r *sharedosv1.ToolRegistration) { r.Description = "a\u200db" }, "description", catalog.RulePoisoning, "U+200D"},
		{"description BOM", func(r *sharedosv1.ToolRegistration) { r.Description = "\ufeffa" }, "description", catalog.RulePoisoning, "U+FEFF"},
		{"description word joiner", func(r *sharedosv1.ToolRegistration) { r.Description = "a\u2060" }, "description", catalog.RulePoisoning, "U+2060"},
		{"description LRI isolate", func(r *sharedosv1.ToolRegistration) { r.Description = "a\u2066b\u2069" }, "description", catalog.RulePoisoning, "U+2066 LEFT-TO-RIGHT ISOLATE"},
		{"description RLM", func(r *sharedosv1.ToolRegistration) { r.Description = "a\u200fb" }, "description", catalog.RulePoisoning, "U+200F"},
		{"description ALM", func(r *sharedosv1.ToolRegistration) { r.Description = "a\u061cb" }, "description", catalog.RulePoisoning, "U+061C"},
		{"description tag characters", func(r *sharedosv1.ToolRegistration) { r.Description = "read\U000E0069\U000E0067\U000E006E" }, "description", catalog.RulePoisoning, "U+E0069 TAG CHARACTER at byte 4"},
		{"description invalid UTF-8", func(r *sharedosv1.ToolRegistration) { r.Description = "a\xc3" }, "description", catalog.RuleUTF8, ""},
		{"title bidi", func(r *sharedosv1.ToolRegistration) { r.AnnotationsJson = []byte(`{"title":"Read \u202Efile"}`) }, "annotations.title", catalog.RulePoisoning, "U+202E"},
		{"schema property description zero-width", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","description":"path\u200b"}}}`)
		}, "inputSchema.properties.path.description", catalog.RulePoisoning, "U+200B"},
		{"schema property name tag char", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path\uDB40\uDC41":{"type":"string"}}}`)
		}, `inputSchema.properties."path\U000e0041"`, catalog.RulePoisoning, "TAG CHARACTER"},
		// Every string and key of a schema is published text: a harness
		// hands the model the whole schema (attack run: tag characters in
		// enum[0] spelled an instruction, bidi controls in a default, a C1
		// CSI in an example).
		{"schema enum tag chars", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"mode":{"type":"string","enum":["fast\uDB40\uDC49\uDB40\uDC67","slow"]}}}`)
		}, "inputSchema.properties.mode.enum[0]", catalog.RulePoisoning, "TAG CHARACTER"},
		{"schema default bidi", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"mode":{"type":"string","default":"a\u2066b\u202e"}}}`)
		}, "inputSchema.properties.mode.default", catalog.RulePoisoning, "U+2066"},
		{"schema example C1", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"mode":{"type":"string","examples":["ok\u009b2J"]}}}`)
		}, "inputSchema.properties.mode.examples[0]", catalog.RulePoisoning, "U+009B"},
		{"schema const key zero-width", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"o":{"type":"object","const":{"k\u200b":1}}}}`)
		}, `inputSchema.properties.o.const."k\u200b"`, catalog.RulePoisoning, "U+200B"},
		{"schema extension keyword", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","x-note":"see\u202efile"}`)
		}, "inputSchema.x-note", catalog.RulePoisoning, "U+202E"},
		{"schema enum CR beside ESC", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"eol":{"type":"string","enum":["\n","\r\n","\u001b[2J"]}}}`)
		}, "inputSchema.properties.eol.enum[2]", catalog.RulePoisoning, "U+001B"},
		{"output schema enum", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","properties":{"s":{"type":"string","enum":["a\u200db"]}}}`)
		}, "outputSchema.properties.s.enum[0]", catalog.RulePoisoning, "U+200D"},
		// Every listing and every turn's pin carries them: bounded as a
		// prompt's are.
		{"description too long", func(r *sharedosv1.ToolRegistration) {
			r.Description = strings.Repeat("Ignore previous instructions. ", catalog.MaxDescriptionBytes/30+1)
		}, "description", catalog.RuleLength, "at most 16384"},
		{"source too long", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = strings.Repeat("s", catalog.MaxSourceBytes+1)
		}, "metadata.source", catalog.RuleLength, "at most 256"},
		{"source control char", func(r *sharedosv1.ToolRegistration) { r.Metadata.Source = "x\x1b" }, "metadata.source", catalog.RulePoisoning, ""},
		// Numbers PostgreSQL's jsonb cannot hold, or a double cannot: refused
		// where they are, on every store.
		{"default too small to store", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"number","default":1e-20000}},"additionalProperties":false}`)
		}, "inputSchema.properties.n.default", catalog.RuleNumberRange, "20000 digits after the decimal point"},
		{"output examples too small to store", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","properties":{"n":{"examples":[1,1.0e-16383]}}}`)
		}, "outputSchema.properties.n.examples[1]", catalog.RuleNumberRange, "16384 digits"},
		{"annotations number too small to store", func(r *sharedosv1.ToolRegistration) {
			r.AnnotationsJson = []byte(`{"title":"Read file","x-scale":{"v":[0e-16384]}}`)
		}, "annotations.x-scale.v[0]", catalog.RuleNumberRange, ""},
		{"exponent too large to store", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"},"n":{"const":0e1073741823}},"additionalProperties":false}`)
		}, "inputSchema.properties.n.const", catalog.RuleNumberRange, "exponent"},
		// U+0000 anywhere in a schema: PostgreSQL's jsonb refuses it.
		{"NUL in an enum", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","enum":["a","a\u0000b"]}},"additionalProperties":false}`)
		}, "inputSchema.properties.path.enum[1]", catalog.RuleNoNUL, `"a\x00b" holds U+0000 (NUL) at byte 1`},
		{"NUL in required", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path","\u0000"],"additionalProperties":false}`)
		}, "inputSchema.required[1]", catalog.RuleNoNUL, ""},
		{"NUL in a pattern", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","properties":{"text":{"type":"string","pattern":"^[^\u0000]*$"}}}`)
		}, "outputSchema.properties.text.pattern", catalog.RuleNoNUL, ""},
		{"NUL in a default's key", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","default":{"ok":1,"a\u0000":1}}`)
		}, "outputSchema.default", catalog.RuleNoNUL, "the key"},
		{"NUL in a keyword", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","x-\u0000":true}`)
		}, "outputSchema", catalog.RuleNoNUL, "the key"},
		{"number beyond a double", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"},"n":{"maximum":-1e400}},"additionalProperties":false}`)
		}, "inputSchema.properties.n.maximum", catalog.RuleNumberRange, "double"},
		{"managed without action", func(r *sharedosv1.ToolRegistration) { r.Requirement.Action = "" }, "requirement.action", catalog.RuleRequired, ""},
		{"managed without requirement", func(r *sharedosv1.ToolRegistration) { r.Requirement = nil }, "requirement.action", catalog.RuleRequired, ""},
		{"action authz does not know", func(r *sharedosv1.ToolRegistration) { r.Requirement.Action = "delete" }, "requirement.action", catalog.RuleAction, "read, write, search, call, execute"},
		// list is reserved for catalogue filtering: the shipped policy allows
		// it before any resource check (issue 17, item 3).
		{"action list", func(r *sharedosv1.ToolRegistration) { r.Requirement.Action = "list" }, "requirement.action", catalog.RuleAction, "reserved for catalogue filtering"},
		// What the bridge could not serve is refused where it enters, not at
		// every OpenTurn (issue 17, item 2).
		// A requirement naming arguments needs every key listed (issue 17,
		// item 1): a case-folded or unlisted key is one the policy never saw.
		{"open schema under a placeholder", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)
		}, "inputSchema.additionalProperties", catalog.RuleClosedArguments, "requirement.open_arguments"},
		{"readOnlyHint a string", func(r *sharedosv1.ToolRegistration) { r.AnnotationsJson = []byte(`{"readOnlyHint":"yes"}`) }, "annotations", catalog.RuleMCPServable, "readOnlyHint"},
		{"title a number", func(r *sharedosv1.ToolRegistration) { r.AnnotationsJson = []byte(`{"title":7}`) }, "annotations", catalog.RuleMCPServable, ""},
		{"x-mcp-header on an object", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"object","x-mcp-header":"Path"}},"additionalProperties":false}`)
		}, "inputSchema", catalog.RuleMCPServable, ""},
		{"placeholder not a property", func(r *sharedosv1.ToolRegistration) { r.Requirement.Resource = "file:{file}" }, "requirement.resource", catalog.RuleTemplate, "{file}"},
		{"nested placeholder not top-level", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"opts":{"type":"object","properties":{"path":{}}}}}`)
		}, "requirement.resource", catalog.RuleTemplate, "{path}"},
		{"unterminated placeholder", func(r *sharedosv1.ToolRegistration) { r.Requirement.Resource = "file:{path" }, "requirement.resource", catalog.RuleTemplate, "unclosed"},
		{"empty placeholder", func(r *sharedosv1.ToolRegistration) { r.Requirement.Resource = "file:{}" }, "requirement.resource", catalog.RuleTemplate, "placeholder {}"},
		// A property name the kernel cannot substitute would fail every call.
		{"placeholder outside the kernel's grammar", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"a.b":{"type":"string"}}}`)
			r.Requirement.Resource = "file:{a.b}"
		}, "requirement.resource", catalog.RuleTemplate, "{a.b}"},
		{"stray brace", func(r *sharedosv1.ToolRegistration) { r.Requirement.Resource = "file:}path" }, "requirement.resource", catalog.RuleTemplate, ""},
		{"managed without handler", func(r *sharedosv1.ToolRegistration) { r.Handler = nil }, "handler.target", catalog.RuleRequired, ""},
		{"negative timeout", func(r *sharedosv1.ToolRegistration) { r.Handler.Timeout = durationpb.New(-1) }, "handler.timeout", catalog.RuleTimeout, ""},
		{"huge timeout", func(r *sharedosv1.ToolRegistration) {
			r.Handler.Timeout = durationpb.New(catalog.MaxHandlerTimeout + 1)
		}, "handler.timeout", catalog.RuleTimeout, ""},
		// Every class's authority fields are stored: the identifier rule
		// holds for all, or PostgreSQL alone refuses a NUL (valid_json,
		// naming no field) that the embedded store keeps.
		{"harness_local action with NUL", func(r *sharedosv1.ToolRegistration) {
			r.Class, r.Requirement.Action = sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, "read\x00x"
		}, "requirement.action", "IdentifierSchema", ""},
		{"external_direct resource with spaces", func(r *sharedosv1.ToolRegistration) {
			r.Class, r.Requirement.Resource = sharedosv1.ToolClass_TOOL_CLASS_EXTERNAL_DIRECT, "anything goes {nope}"
		}, "requirement.resource", "IdentifierSchema", ""},
		{"harness_local handler target with NUL", func(r *sharedosv1.ToolRegistration) {
			r.Class, r.Requirement, r.Handler.Target = sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, nil, "host\x00:1"
		}, "handler.target", "IdentifierSchema", ""},
		{"credential ref with space", func(r *sharedosv1.ToolRegistration) { r.CredentialRef = "my secret" }, "credential_ref", "IdentifierSchema", ""},
	}
	svc := newService(t, nil, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := reg("files.read")
			c.mutate(r)
			_, _, err := svc.Register(testCtx(t), r)
			var ve *catalog.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, catalog.ErrInvalid) {
				t.Fatalf("Register error = %v, want a *ValidationError", err)
			}
			if c.field != "" && ve.Field != c.field {
				t.Errorf("field = %q, want %q (%v)", ve.Field, c.field, err)
			}
			if c.rule != "" && ve.Rule != c.rule {
				t.Errorf("rule = %q, want %q (%v)", ve.Rule, c.rule, err)
			}
			if !strings.Contains(ve.Detail, c.detail) {
				t.Errorf("detail = %q, want it to contain %q", ve.Detail, c.detail)
			}
			if _, err := svc.Resolve(testCtx(t), r.GetName()); !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("rejected tool is resolvable: %v", err)
			}
		})
	}
}

func TestRegisterAccepts(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *sharedosv1.ToolRegistration)
	}{
		{"as is", func(r *sharedosv1.ToolRegistration) {}},
		{"newline and tab in description", func(r *sharedosv1.ToolRegistration) { r.Description = "a\n\tb — café 日本 😀" }},
		{"description and source at their bounds", func(r *sharedosv1.ToolRegistration) {
			r.Description = strings.Repeat("d", catalog.MaxDescriptionBytes)
			r.Metadata.Source = strings.Repeat("s", catalog.MaxSourceBytes)
		}},
		{"local refs", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"p":{"type":"string"}},"properties":{"path":{"$ref":"#/$defs/p"}},"additionalProperties":false}`)
		}},
		{"an upstream tool's draft-07 schemas (ADR 0019)", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"p":{"type":"string"}},"properties":{"path":{"$ref":"#/definitions/p"}},"additionalProperties":false}`)
			r.OutputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)
		}},
		{"no output schema", func(r *sharedosv1.ToolRegistration) { r.OutputSchemaJson = nil }},
		// Recursion that descends into the instance ends: not a cycle.
		{"recursive schema", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","$defs":{"n":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}},"items":{"anyOf":[{"$ref":"#/$defs/n"}]}}},"properties":{"x":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}`)
		}},
		{"no annotations", func(r *sharedosv1.ToolRegistration) { r.AnnotationsJson = nil }},
		// What validation work a schema may cause: a recursive tree (a
		// filter of and/or/not), a union of 32 shapes that share a key, a
		// graph of $refs at the bound's edge.
		{"a recursive filter", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","$defs":{"f":{"type":"object","properties":{"field":{"type":"string"},"eq":{},"and":{"type":"array","items":{"$ref":"#/$defs/f"}},"or":{"type":"array","items":{"$ref":"#/$defs/f"}},"not":{"$ref":"#/$defs/f"}}}},"properties":{"filter":{"$ref":"#/$defs/f"}}}`)
		}},
		{"a union of 32 shapes", func(r *sharedosv1.ToolRegistration) {
			var shapes []string
			for i := range 32 {
				shapes = append(shapes, fmt.Sprintf(`{"type":"object","properties":{"kind":{"const":"k%d"},"v":{"type":"string"}},"required":["kind"]}`, i))
			}
			r.OutputSchemaJson = []byte(`{"type":"object","properties":{"block":{"anyOf":[` + strings.Join(shapes, ",") + `]}}}`)
		}},
		{"a draft-07 format regex beside a pattern", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string","format":"regex","pattern":"^[a-z]{0,100}$"}},"additionalProperties":false}`)
		}},
		{"a 2019-09 tree through $recursiveRef", func(r *sharedosv1.ToolRegistration) {
			r.Metadata.Source = "mcp:files"
			r.OutputSchemaJson = []byte(`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"type":"object","properties":{"kids":{"type":"array","items":{"$recursiveRef":"#"}},"x":{"allOf":[{"$recursiveRef":"#"}]}}}`)
		}},
		{"a 2020-12 tree through $dynamicRef", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"$dynamicAnchor":"node","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}},"x":{"allOf":[{"$dynamicRef":"#node"}]}}}`)
		}},
		{"a $ref graph at the bound", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(refGraph(4, `"$ref":"#/$defs/a0"`))
		}},
		// Common patterns fit the regex bounds: the widely copied IPv6
		// pattern (967 instructions), ^.{0,1000}$ (2,004) — written on 100
		// properties, compiled and counted once.
		{"common patterns", func(r *sharedosv1.ToolRegistration) {
			r.OutputSchemaJson = []byte(`{"type":"object","properties":{"ip":{"type":"string","pattern":"` + ipv6Pattern + `"},"id":{"type":"string","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}},"patternProperties":{"^x-[a-z]{0,63}$":{"type":"string","pattern":"^.{1,255}$"}}}`)
			r.InputSchemaJson = []byte(samePattern(100, `^.{0,1000}$`))
			r.Requirement.Resource = "file:{p0}"
		}},
		{"a property named $schema", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"path":{"type":"string"},"$schema":{"type":"string"}},"additionalProperties":false}`)
		}},
		{"data keywords may hold any strings", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"const":{"$ref":"https://x.example"}}},"additionalProperties":false}`)
		}},
		{"depth at the cap", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(nested(28))
			r.Requirement.Resource = "file:{x}"
			r.Requirement.OpenArguments = true // nested() leaves the top level open
		}},
		{"escaped braces in the template", func(r *sharedosv1.ToolRegistration) { r.Requirement.Resource = "file:{{literal}}{path}" }},
		{"action-only requirement", func(r *sharedosv1.ToolRegistration) { r.Requirement.Resource = "" }},
		{"open schema without placeholders", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson, r.Requirement.Resource = []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`), "search:all"
		}},
		{"open schema opted out", func(r *sharedosv1.ToolRegistration) {
			r.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)
			r.Requirement.OpenArguments = true
		}},
		{"managed unqualified without namespace", func(r *sharedosv1.ToolRegistration) {
			r.Name, r.Metadata.Namespace, r.Requirement.Resource = "test_simple_text", "", ""
		}},
		{"harness_local unqualified", func(r *sharedosv1.ToolRegistration) {
			r.Name, r.Metadata.Namespace, r.Class, r.Requirement, r.Handler = "patch", "", sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, nil, nil
		}},
		{"external_direct qualified", func(r *sharedosv1.ToolRegistration) {
			r.Name, r.Metadata.Namespace, r.Class, r.Requirement, r.Handler = "jira.create", "jira", sharedosv1.ToolClass_TOOL_CLASS_EXTERNAL_DIRECT, nil, nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := newService(t, nil, nil)
			r := reg("files.read")
			c.mutate(r)
			if _, _, err := svc.Register(testCtx(t), r); err != nil {
				t.Fatalf("Register: %v", err)
			}
		})
	}
}

// The concurrency class (ADR 0019): an operator's readOnlyHint confirms a
// tool is read-only; an upstream's does not, only read_only does.
func TestReadOnlyClass(t *testing.T) {
	native := reg("files.read")
	if !catalog.ReadOnly(native) {
		t.Error("the operator's readOnlyHint is not read-only")
	}
	native.AnnotationsJson = []byte(`{"readOnlyHint":false}`)
	if catalog.ReadOnly(native) {
		t.Error("readOnlyHint false is read-only")
	}
	up := reg("fs.read")
	up.Metadata.Source = "mcp:fs"
	if catalog.ReadOnly(up) {
		t.Error("an upstream's readOnlyHint alone made its tool read-only")
	}
	up.ReadOnly = true
	if !catalog.ReadOnly(up) {
		t.Error("read_only (the operator's confirmation) is not read-only")
	}
}
