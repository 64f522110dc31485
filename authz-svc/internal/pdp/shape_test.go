package pdp

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// arrayOf is {"a":[elem, elem, …]} with n elements.
func arrayOf(elem string, n int) []byte {
	return []byte(`{"a":[` + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + `]}`)
}

// allocated is the bytes f allocates (TotalAlloc: collections do not
// lower it).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// What parsing builds is bounded before it is built: 1 MiB of {"x":{}}
// elements cost 112 MB and 173 ms (review D5), 1 MiB of ones 78 MB. Past
// MaxJSONValues values or MaxJSONContainers objects and arrays the input is
// refused by the depth scan, allocating next to nothing; at the bounds it
// costs at most 32 MiB (22 MB measured: 4,000 objects of 15 keys), and
// large arguments that are mostly strings still pass.
func TestParseObjectBoundsWhatItBuilds(t *testing.T) {
	// The document and the array are two values, two containers.
	refused := map[string]struct {
		raw  []byte
		rule string
	}{
		"1 MiB of {\"x\":{}}":    {arrayOf(`{"x":{}}`, (MaxJSONBytes-16)/9), "must hold at most 16384 objects and arrays"},
		"1 MiB of ones":          {arrayOf(`1`, (MaxJSONBytes-16)/2), "must hold at most 65536 JSON values"},
		"one value too many":     {arrayOf(`1`, MaxJSONValues-1), "must hold at most 65536 JSON values"},
		"one container too many": {arrayOf(`{}`, MaxJSONContainers-1), "must hold at most 16384 objects and arrays"},
		"deep beyond the count":  {[]byte(`{"a":[` + strings.Repeat("1,", MaxJSONValues) + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `]}`), "must hold at most 65536 JSON values"},
	}
	for name, c := range refused {
		var err error
		// An average: under the race detector sync.Pool drops items at
		// random, and one run may build json.Valid's scanner anew (review:
		// 11 allocations once in five -race runs).
		allocs := testing.AllocsPerRun(20, func() { _, err = ParseObject(c.raw) })
		var je *JSONError
		if !errors.As(err, &je) || je.Rule != c.rule {
			t.Errorf("%s: err = %v, want rule %q", name, err, c.rule)
		}
		if allocs > 10 {
			t.Errorf("%s: refusing it allocated %.0f times", name, allocs)
		}
	}

	accepted := map[string][]byte{
		"values at the bound":     arrayOf(`1`, MaxJSONValues-2),
		"containers at the bound": arrayOf(`{}`, MaxJSONContainers-2),
		"objects of 15 keys":      arrayOf(`{"a":1,"b":2,"c":3,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"n":1,"o":1}`, 4000),
		"5,000 rows of 10 fields": arrayOf(`{"a":"xxxxxxxx","b":"xxxxxxxxx","c":12,"d":true,"e":"xxxxxxxxxxxx","f":"x","g":1.5,"h":"yy","i":null,"j":"zzzzzzzzzz"}`, 5000),
		"1 MiB of text":           []byte(`{"content":"` + strings.Repeat("x", MaxJSONBytes-16) + `"}`),
		"10,000 paths":            arrayOf(`"/public/`+strings.Repeat("p", 90)+`"`, 10_000),
	}
	for name, raw := range accepted {
		var err error
		n := allocated(func() { _, err = ParseObject(raw) })
		if err != nil {
			t.Errorf("%s (%d bytes): %v", name, len(raw), err)
		}
		t.Logf("%s: %d bytes parsed with %.1f MB allocated", name, len(raw), float64(n)/1e6)
		if n > 32<<20 {
			t.Errorf("%s: %d bytes parsed with %d bytes allocated", name, len(raw), n)
		}
	}
}
