package catalog_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/storetest"
)

// A draft-07 "format": "regex" (an upstream's dialect asserts formats)
// compiles the argument's string as a regular expression on every call:
// the regex bound holds for it too (attack run: a 21 KB argument took
// 0.53 s and 126 MB a call). A string past the bound is refused as not a
// regex the catalogue takes; one within it is checked as before.
func TestFormatRegexArgumentIsBounded(t *testing.T) {
	svc := newService(t, nil, nil)
	r := reg("fx.check")
	r.Metadata.Source = "mcp:fx"
	r.InputSchemaJson = []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string"},"re":{"type":"string","format":"regex"}},"additionalProperties":false}`)
	if _, _, err := svc.Register(testCtx(t), r); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Resolve(testCtx(t), "fx.check")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		re    string
		valid bool
	}{
		{`^[a-z]+\.txt$`, true},
		{`^.{0,1000}$`, true},
		{`(`, false},
		// 3,000 instructions: a valid regular expression, past the bound.
		{`a{1000}b{1000}c{1000}`, false},
		{strings.Repeat(`(?:x{1000})`, 20), false},
	} {
		err := res.InputSchema.Validate(map[string]any{"path": "/a", "re": c.re})
		if c.valid {
			if err != nil {
				t.Errorf("%.40q: %v, want it valid", c.re, err)
			}
			continue
		}
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) || !hasFormatError(ve) {
			t.Errorf("%.40q: %v, want a format error", c.re, err)
		}
	}
	// A bracket of Unicode classes (\pL: 1,292 code points each): parsing
	// 15 KB of them cost 250 MB and 0.6 s. Its syntax is checked without
	// their tables, and it is a regular expression.
	arg := "[" + strings.Repeat(`\pL`, 5000) + "]"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = res.InputSchema.Validate(map[string]any{"path": "/a", "re": arg})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Errorf("a bracket of \\pL: %v, want it valid", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("checking a %d-byte regular expression allocated %d bytes", len(arg), n)
	}
}

func hasFormatError(ve *jsonschema.ValidationError) bool {
	if _, ok := ve.ErrorKind.(*kind.Format); ok {
		return true
	}
	for _, c := range ve.Causes {
		if hasFormatError(c) {
			return true
		}
	}
	return false
}

// The bounds hold where a schema is compiled, not only where it is
// registered: a stored schema past them (registered before them) is
// withheld from calls, not validated at the cost it would have.
func TestResolveWithholdsStoredSchemaPastTheCostBounds(t *testing.T) {
	for name, schema := range map[string]string{
		"regex": `{"type":"object","properties":{"s":{"type":"string","pattern":"` + strings.Repeat(`[a-y]{0,1000}`, 100) + `z"}}}`,
		"work":  refGraph(24, `"$ref":"#/$defs/a0"`),
	} {
		t.Run(name, func(t *testing.T) {
			st := memory.New()
			rec := storetest.Record("files.read")
			rec.Registration.InputSchemaJson = []byte(schema)
			if _, err := st.Create(testCtx(t), rec); err != nil {
				t.Fatal(err)
			}
			svc := newService(t, st, nil)
			if _, err := svc.Resolve(testCtx(t), "files.read"); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "withheld") {
				t.Fatalf("Resolve = %v, want a withheld ErrNotFound", err)
			}
		})
	}
}
