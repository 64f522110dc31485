package projection

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The wire structs are the only shape the projection can write. Their JSON
// keys must be exactly CATALOG_HASH_FIELDS (and namespace/source), declared
// in canonical order, each omitted when empty.
func TestWireStructsAreTheContract(t *testing.T) {
	check := func(typ reflect.Type, want []string) {
		t.Helper()
		var keys []string
		for f := range typ.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if opts != "omitempty" {
				t.Errorf("%s.%s: tag options %q, want omitempty", typ.Name(), f.Name, opts)
			}
			keys = append(keys, name)
		}
		if !slices.Equal(keys, want) {
			t.Errorf("%s JSON keys = %v, want exactly %v", typ.Name(), keys, want)
		}
	}
	check(reflect.TypeFor[wire](), CatalogHashFields())
	check(reflect.TypeFor[wireMetadata](), MetadataFields())
	if !slices.IsSorted(CatalogHashFields()) || !slices.IsSorted(MetadataFields()) {
		t.Error("field lists are not in canonical order")
	}
}
