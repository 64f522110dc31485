package cataloghash_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/sharedos/toolshare/services/contract/internal/specvectors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/projection"
)

type hashCase struct {
	Name        string            `json:"name"`
	Canonical   string            `json:"canonical"`
	CatalogHash string            `json:"catalogHash"`
	Tools       []json.RawMessage `json:"tools"`
}

func entriesOf(t testing.TB, tools []json.RawMessage) []cataloghash.Entry {
	t.Helper()
	entries := make([]cataloghash.Entry, 0, len(tools))
	for _, raw := range tools {
		tool, err := projection.FromJSON(raw)
		if err != nil {
			t.Fatalf("FromJSON: %v", err)
		}
		c, err := projection.Canonical(tool)
		if err != nil {
			t.Fatalf("Canonical(%s): %v", tool.Name, err)
		}
		entries = append(entries, cataloghash.Entry{Name: tool.Name, Canonical: c})
	}
	return entries
}

// The contract: every case's canonical text and catalogHash, exactly.
func TestVectors(t *testing.T) {
	var doc struct {
		Cases []hashCase `json:"cases"`
	}
	if err := json.Unmarshal(specvectors.Read(t, "cataloghash-vectors.json"), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("no cases in the vectors")
	}
	for _, c := range doc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			if sum := sha256.Sum256([]byte(c.Canonical)); hex.EncodeToString(sum[:]) != c.CatalogHash {
				t.Fatalf("vector is inconsistent: sha256(canonical) != catalogHash")
			}
			entries := entriesOf(t, c.Tools)
			if got := cataloghash.AppendCanonical(nil, entries); string(got) != c.Canonical {
				t.Fatalf("canonical text\n got %s\nwant %s", got, c.Canonical)
			}
			if got := cataloghash.Sum(entries); got != c.CatalogHash {
				t.Fatalf("Sum = %s, want %s", got, c.CatalogHash)
			}
			sorted := slices.Clone(entries)
			slices.SortFunc(sorted, func(a, b cataloghash.Entry) int { return strings.Compare(a.Name, b.Name) })
			if got := cataloghash.SumSorted(sorted); got != c.CatalogHash {
				t.Fatalf("SumSorted = %s, want %s", got, c.CatalogHash)
			}
			slices.Reverse(entries)
			if got := cataloghash.Sum(entries); got != c.CatalogHash {
				t.Fatalf("Sum of reversed entries = %s, want %s", got, c.CatalogHash)
			}
			// SumSorted given an unsorted slice still gets it right.
			if got := cataloghash.SumSorted(entries); got != c.CatalogHash {
				t.Fatalf("SumSorted of unsorted entries = %s, want %s", got, c.CatalogHash)
			}
		})
	}
}

func TestOrderIndependentAndInputUntouched(t *testing.T) {
	entries := synthetic(200)
	want := cataloghash.SumSorted(entries)
	r := rand.New(rand.NewPCG(3, 4))
	for range 5 {
		shuffled := slices.Clone(entries)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		before := slices.Clone(shuffled)
		if got := cataloghash.Sum(shuffled); got != want {
			t.Fatalf("Sum depends on order: %s vs %s", got, want)
		}
		if !slices.EqualFunc(before, shuffled, func(a, b cataloghash.Entry) bool { return a.Name == b.Name }) {
			t.Fatal("Sum reordered the caller's slice")
		}
	}
	if got := cataloghash.Sum(entries[:199]); got == want {
		t.Fatal("dropping a tool did not change the hash")
	}
	if len(want) != 64 || strings.ToLower(want) != want {
		t.Fatalf("hash %q is not 64 lowercase hex digits", want)
	}
	all := cataloghash.AppendCanonical(nil, entries)
	if !json.Valid(all) {
		t.Fatal("canonical catalogue text is not JSON")
	}
	if sum := sha256.Sum256(all); hex.EncodeToString(sum[:]) != want {
		t.Fatal("hash is not sha256 of the canonical text")
	}
}

// Two entries with one name should never reach here, but if they do the
// hash must still not depend on the order they came in.
func TestDuplicateNamesDeterministic(t *testing.T) {
	a := cataloghash.Entry{Name: "x", Canonical: []byte(`{"description":"a","name":"x"}`)}
	b := cataloghash.Entry{Name: "x", Canonical: []byte(`{"description":"b","name":"x"}`)}
	if cataloghash.Sum([]cataloghash.Entry{a, b}) != cataloghash.Sum([]cataloghash.Entry{b, a}) {
		t.Fatal("duplicate names make the hash order-dependent")
	}
	if cataloghash.SumSorted([]cataloghash.Entry{b, a}) != cataloghash.Sum([]cataloghash.Entry{a, b}) {
		t.Fatal("SumSorted disagrees with Sum on duplicate names")
	}
}

// Allocations must not grow with the catalogue: the hash of 10 tools and of
// 2,000 tools allocate the same number of times.
func TestAllocationsIndependentOfSize(t *testing.T) {
	small, large := synthetic(10), synthetic(2000)
	sortedAllocs := func(e []cataloghash.Entry) float64 {
		return testing.AllocsPerRun(20, func() { _ = cataloghash.SumSorted(e) })
	}
	if s, l := sortedAllocs(small), sortedAllocs(large); s != l {
		t.Errorf("SumSorted allocs: %v for 10 tools, %v for 2000", s, l)
	}
	rev := func(e []cataloghash.Entry) []cataloghash.Entry { e = slices.Clone(e); slices.Reverse(e); return e }
	rs, rl := rev(small), rev(large)
	unsortedAllocs := func(e []cataloghash.Entry) float64 {
		return testing.AllocsPerRun(20, func() { _ = cataloghash.Sum(e) })
	}
	if s, l := unsortedAllocs(rs), unsortedAllocs(rl); s != l {
		t.Errorf("Sum allocs: %v for 10 tools, %v for 2000", s, l)
	}
}

// synthetic builds n tools whose canonical projections are about 1.2 KB
// each, like the corpus the performance anchors were measured on, sorted by
// name.
func synthetic(n int) []cataloghash.Entry {
	entries := make([]cataloghash.Entry, n)
	for i := range n {
		ns := fmt.Sprintf("provider%02d", i%50)
		tool := projection.Tool{
			Name: fmt.Sprintf("%s.operation_%06d", ns, i),
			Description: fmt.Sprintf("Synthetic operation %d of %s: looks up records by key, filters them by state and "+
				"returns a page of matching items with their identifiers, titles and timestamps.", i, ns),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{`+
				`"query":{"type":"string","description":"free-text query for tool %d","maxLength":512},`+
				`"state":{"type":"string","enum":["open","closed","all"],"default":"open"},`+
				`"limit":{"type":"integer","minimum":1,"maximum":100,"default":20},`+
				`"cursor":{"type":"string","description":"opaque pagination cursor"},`+
				`"since":{"type":"string","format":"date-time","description":"only items updated after this time"}}}`, i)),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object",` +
				`"properties":{"id":{"type":"string"},"title":{"type":"string"},"updatedAt":{"type":"string","format":"date-time"}}}},` +
				`"nextCursor":{"type":"string"}}}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":false,"title":"Synthetic lookup"}`),
			Namespace:   ns,
			Source:      "provider:" + ns,
		}
		c, err := projection.Canonical(tool)
		if err != nil {
			panic(err)
		}
		entries[i] = cataloghash.Entry{Name: tool.Name, Canonical: c}
	}
	slices.SortFunc(entries, func(a, b cataloghash.Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries
}

func TestSyntheticSize(t *testing.T) {
	e := synthetic(100)
	total := 0
	for _, x := range e {
		total += len(x.Canonical)
	}
	if avg := total / len(e); avg < 1100 || avg > 1300 {
		t.Fatalf("synthetic tools average %d canonical bytes, want about 1.2 KB", avg)
	}
}

// BenchmarkCatalogHash compares catalogHash over cached canonical bytes
// with the physical floor, SHA-256 over the same bytes already
// concatenated; the ratio of the two ns/op is the overhead of the hash.
func BenchmarkCatalogHash(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		entries := synthetic(n)
		all := cataloghash.AppendCanonical(nil, entries)
		shuffled := slices.Clone(entries)
		rand.New(rand.NewPCG(5, 6)).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		want := cataloghash.SumSorted(entries)
		b.Run(fmt.Sprintf("n=%d/SumSorted_cached_canonical", n), func(b *testing.B) {
			b.SetBytes(int64(len(all)))
			b.ReportAllocs()
			for b.Loop() {
				if cataloghash.SumSorted(entries) != want {
					b.Fatal("hash changed")
				}
			}
		})
		b.Run(fmt.Sprintf("n=%d/Sum_cached_canonical_unsorted", n), func(b *testing.B) {
			b.SetBytes(int64(len(all)))
			b.ReportAllocs()
			for b.Loop() {
				if cataloghash.Sum(shuffled) != want {
					b.Fatal("hash changed")
				}
			}
		})
		b.Run(fmt.Sprintf("n=%d/baseline_sha256_concatenated", n), func(b *testing.B) {
			b.SetBytes(int64(len(all)))
			b.ReportAllocs()
			for b.Loop() {
				_ = sha256.Sum256(all)
			}
		})
	}
}
