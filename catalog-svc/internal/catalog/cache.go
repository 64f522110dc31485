package catalog

import (
	"bytes"
	"sort"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/mcptool"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// Resolved is what the kernel needs to run one tool: the admin view (with the
// authority), the published projection it was advertised as, that
// projection's digest and the compiled input and output schemas. Values
// handed out are shared and read-only.
type Resolved struct {
	Registration *sharedosv1.ToolRegistration
	Published    *sharedosv1.PublishedTool // canonical_json filled
	Digest       string                    // projection.Digest(Published.CanonicalJson)
	InputSchema  *jsonschema.Schema        // compiled (santhosh-tekuri/jsonschema/v6)
	// OutputSchema is the outputSchema the tool declares, compiled; nil
	// when it declares none (a result is then held to nothing more).
	OutputSchema *jsonschema.Schema
	// ReadOnly: the operator confirmed the tool only reads (see
	// ReadOnly); the kernel runs its calls in parallel.
	ReadOnly bool
}

// entry is one published tool in the cache, with everything a request needs
// precomputed so that listing and hashing only copy pointers.
type entry struct {
	resolved *Resolved
	facts    *sharedosv1.ToolFacts
	hash     cataloghash.Entry
	// unservable says why the bridge could not serve the tool over MCP (a
	// registration from before the catalogue checked it): never listed.
	unservable error

	// The input schema is compiled on first Resolve (or handed over by the
	// single-tool write that just compiled it; a batch hands none over, see
	// prepareAll), not when the cache is built: a
	// replica reloading 10k tools after a batch must stay within the 1 s
	// visibility bound, and compiling is the dominant cost of a reload.
	schema *lazySchema
	// output is the output schema, nil when the tool declares none:
	// compiled with the input schema on first Resolve, the same way, and
	// shared the same way by the entries with the same bytes.
	output      *lazySchema
	resolveOnce sync.Once
	resolveErr  error
}

// resolved returns the Resolved with InputSchema and OutputSchema filled.
func (e *entry) resolve() (*Resolved, error) {
	e.resolveOnce.Do(func() {
		e.resolved.InputSchema, e.resolveErr = e.schema.get()
		if e.resolveErr == nil && e.output != nil {
			e.resolved.OutputSchema, e.resolveErr = e.output.get()
		}
	})
	return e.resolved, e.resolveErr
}

// lazySchema is one schema (field: inputSchema, outputSchema), compiled at
// most once and shared by the entries (old and new cache generations) with
// the same bytes.
type lazySchema struct {
	field   string
	raw     []byte
	dialect dialect
	once    sync.Once
	sch     *jsonschema.Schema
	err     error
}

func newLazySchema(field string, raw []byte, d dialect, compiled *jsonschema.Schema) *lazySchema {
	l := &lazySchema{field: field, raw: raw, dialect: d}
	if compiled != nil {
		l.once.Do(func() { l.sch = compiled })
	}
	return l
}

// uncompiled is the same schema, to be compiled on first use (nil for nil).
func (l *lazySchema) uncompiled() *lazySchema {
	if l == nil {
		return nil
	}
	return newLazySchema(l.field, l.raw, l.dialect, nil)
}

func (l *lazySchema) get() (*jsonschema.Schema, error) {
	l.once.Do(func() {
		ps, err := compileSchema(l.field, l.raw, l.dialect)
		if err != nil {
			l.err = err
			return
		}
		l.sch = ps.compiled
	})
	return l.sch, l.err
}

func (e *entry) name() string { return e.hash.Name }

// snapshot is an immutable view of the catalogue. Writers build a new one
// and swap it atomically; readers never lock.
type snapshot struct {
	entries []*entry       // every registered tool, ascending by name
	byName  map[string]int // name → index into entries
	// listed are the tools ListTools publishes: managed ones only (a
	// harness-local or external-direct tool is never SharedOS's to serve,
	// and every call of it would be refused) that the bridge can serve over
	// MCP, ascending by name; facts and listedByName index them.
	listed       []*entry
	facts        []*sharedosv1.ToolFacts
	factBytes    []int // each fact's encoded size, for FilterTools pages
	listedByName map[string]int

	allOnce sync.Once
	allHash string
}

func newSnapshot(entries []*entry) *snapshot {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name() < entries[j].name() })
	s := &snapshot{
		entries:      entries,
		byName:       make(map[string]int, len(entries)),
		listedByName: make(map[string]int, len(entries)),
	}
	for i, e := range entries {
		s.byName[e.name()] = i
		if e.resolved.Registration.GetClass() == sharedosv1.ToolClass_TOOL_CLASS_MANAGED && e.unservable == nil {
			s.listedByName[e.name()] = len(s.listed)
			s.listed = append(s.listed, e)
			s.facts = append(s.facts, e.facts)
			s.factBytes = append(s.factBytes, proto.Size(e.facts))
		}
	}
	return s
}

func (s *snapshot) lookup(name string) (*entry, bool) {
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return s.entries[i], true
}

// withChange returns a copy of s with name replaced by e, or removed when e is
// nil. Entries are shared; only the index structures are copied.
func (s *snapshot) withChange(name string, e *entry) *snapshot {
	entries := make([]*entry, 0, len(s.entries)+1)
	for _, old := range s.entries {
		if old.name() != name {
			entries = append(entries, old)
		}
	}
	if e != nil {
		entries = append(entries, e)
	}
	return newSnapshot(entries)
}

// withChanges returns a copy of s with each of es in place of the entry of
// the same name, or added.
func (s *snapshot) withChanges(es []*entry) *snapshot {
	changed := make(map[string]bool, len(es))
	for _, e := range es {
		changed[e.name()] = true
	}
	entries := make([]*entry, 0, len(s.entries)+len(es))
	for _, old := range s.entries {
		if !changed[old.name()] {
			entries = append(entries, old)
		}
	}
	return newSnapshot(append(entries, es...))
}

// hashAll is the catalogHash of every listed tool, computed on first use.
func (s *snapshot) hashAll() string {
	s.allOnce.Do(func() {
		hs := make([]cataloghash.Entry, len(s.listed))
		for i, e := range s.listed {
			hs[i] = e.hash
		}
		s.allHash = cataloghash.SumSorted(hs)
	})
	return s.allHash
}

// hints are input schemas the write path has just compiled, by tool name.
type hints map[string]*lazySchema

// buildEntry turns a stored record into a cache entry. The compiled input
// schema is taken from prev or the hints when they hold the same bytes,
// the output schema from prev, so unchanged tools are never recompiled.
func buildEntry(rec store.Record, prev *entry, h hints) *entry {
	reg := rec.Registration
	raw := reg.GetInputSchemaJson()
	var schema *lazySchema
	switch {
	case h[reg.GetName()] != nil && bytes.Equal(h[reg.GetName()].raw, raw) && h[reg.GetName()].dialect == dialectOf(reg):
		schema = h[reg.GetName()]
	case prev != nil && bytes.Equal(prev.schema.raw, raw) && prev.schema.dialect == dialectOf(reg):
		schema = prev.schema
	default:
		schema = newLazySchema("inputSchema", raw, dialectOf(reg), nil)
	}
	var output *lazySchema
	if out := reg.GetOutputSchemaJson(); len(out) > 0 {
		if prev != nil && prev.output != nil && bytes.Equal(prev.output.raw, out) && prev.output.dialect == dialectOf(reg) {
			output = prev.output
		} else {
			output = newLazySchema("outputSchema", out, dialectOf(reg), nil)
		}
	}
	pub := publishedFrom(reg, rec.Canonical, rec.Digest)
	var unservable error
	if prev != nil && bytes.Equal(prev.hash.Canonical, rec.Canonical) {
		unservable = prev.unservable
	} else {
		unservable = mcptool.Check(pub)
	}
	return &entry{
		unservable: unservable,
		schema:     schema,
		output:     output,
		resolved:   &Resolved{Registration: reg, Published: pub, Digest: rec.Digest, ReadOnly: ReadOnly(reg)},
		facts: &sharedosv1.ToolFacts{
			Name:            reg.GetName(),
			Namespace:       reg.GetMetadata().GetNamespace(),
			Class:           className(reg.GetClass()),
			AnnotationsJson: reg.GetAnnotationsJson(),
			Source:          reg.GetMetadata().GetSource(),
		},
		hash: cataloghash.Entry{Name: reg.GetName(), Canonical: rec.Canonical},
	}
}

// className is the ToolFacts spelling of a class.
func className(c sharedosv1.ToolClass) string {
	switch c {
	case sharedosv1.ToolClass_TOOL_CLASS_MANAGED:
		return "managed"
	case sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL:
		return "harness_local"
	case sharedosv1.ToolClass_TOOL_CLASS_EXTERNAL_DIRECT:
		return "external_direct"
	default:
		return "unspecified"
	}
}
