package protocol

import (
	"encoding/json"
	"testing"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
)

// decodedValues counts the values and containers of doc as encoding/json
// decodes them into any (what mcp-go does): the oracle of countValues.
func decodedValues(doc any) (values, containers int) {
	values = 1
	switch x := doc.(type) {
	case map[string]any:
		containers = 1
		for _, e := range x {
			v, c := decodedValues(e)
			values, containers = values+v, containers+c
		}
	case []any:
		containers = 1
		for _, e := range x {
			v, c := decodedValues(e)
			values, containers = values+v, containers+c
		}
	}
	return values, containers
}

// FuzzCountValues: for valid JSON without a repeated key (a decoded
// object keeps one value per key), countValues counts what encoding/json
// decodes.
func FuzzCountValues(f *testing.F) {
	for _, doc := range []string{
		`1`, `"s"`, `{}`, `[]`, `[ ]`, `{ "a" : [ 1 , { } , [ [ ] ] ] }`,
		`{"a":"[{,}]","b":"\"[\\\\","c":[null,true,false,-1.5e3]}`,
		"[\n\t{\r\n}\n]",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var doc any
		if json.Unmarshal(raw, &doc) != nil || jsonlimits.RepeatsKey(raw, doc) {
			return
		}
		wantV, wantC := decodedValues(doc)
		if wantV > MaxValues || wantC > MaxContainers {
			return // the scan stops past a bound
		}
		if v, c := countValues(raw); v != wantV || c != wantC {
			t.Fatalf("countValues(%s) = %d values, %d containers; decoded %d, %d", raw, v, c, wantV, wantC)
		}
	})
}
