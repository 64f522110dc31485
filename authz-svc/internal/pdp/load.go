package pdp

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"
)

// DecisionQuery is the query every decision is made with (package doc).
const DecisionQuery = "data.sharedos.authz.decision"

// VisibleQuery is the optional FilterTools shortcut (package doc): a set of
// the tool names, among input.tools, the context may list.
const VisibleQuery = "data.sharedos.authz.visible"

// visibleSetQuery evaluates VisibleQuery and tells whether its value is a
// set: an array, which OPA hands out as the same Go value, is not.
const visibleSetQuery = "names := " + VisibleQuery + "; set := is_set(names)"

// maxPolicyFileBytes bounds one policy or data file so that a stray large
// file in the directory fails the load instead of exhausting memory.
const maxPolicyFileBytes = 64 << 20

// sourceFile is one file read from the policy directory.
type sourceFile struct {
	rel     string // slash-separated path relative to the root
	content []byte
}

// snapshot is one successfully loaded and prepared policy. It is immutable
// once published, so a request that loaded it keeps a consistent
// (query, revision) pair even if a reload swaps it mid-evaluation.
type snapshot struct {
	query rego.PreparedEvalQuery
	// visible evaluates VisibleQuery; a policy without the rule leaves it
	// undefined, and FilterTools then decides tool by tool.
	visible  rego.PreparedEvalQuery
	revision string
	files    []string
}

// readPolicyDir reads every served file under dir, sorted by relative path.
// An entry that would be served but is not a regular file (a symbolic link,
// a FIFO), or a link to a directory, fails it (notRegular).
func readPolicyDir(dir string) ([]sourceFile, error) {
	var files []sourceFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Hidden directories (.git, editor state) are never policy.
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !isServedFile(d.Name()) {
			if d.Type()&fs.ModeSymlink != 0 && !strings.HasPrefix(d.Name(), ".") {
				// A link to a directory is not walked: its files would
				// be dropped as silently.
				if st, err := os.Stat(p); err == nil && st.IsDir() {
					return notRegular(p, d.Type())
				}
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return notRegular(p, info.Mode())
		}
		if info.Size() > maxPolicyFileBytes {
			return fmt.Errorf("%s: larger than %d bytes", p, maxPolicyFileBytes)
		}
		content, err := readRegular(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, sourceFile{rel: filepath.ToSlash(rel), content: content})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read policy dir %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, nil
}

// readRegular reads the regular file at p, at most maxPolicyFileBytes:
// opened without following a link and without blocking (openNoFollow),
// then checked on the open file, so an entry swapped for a FIFO or a link
// after the walk looked at it fails the load rather than hang it (review:
// a FIFO renamed over a policy file between the check and the read held
// the load, and the reload lock, for ever).
func readRegular(p string) ([]byte, error) {
	f, err := openNoFollow(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(p, info.Mode())
	}
	content, err := io.ReadAll(io.LimitReader(f, maxPolicyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(content) > maxPolicyFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxPolicyFileBytes)
	}
	return content, nil
}

// notRegular is the load error of an entry that would be served but is not
// a regular file. Skipped, a link's rules — a deny among them — would be
// dropped without a word, and what they denied allowed; so the load fails,
// naming it (on reload the previous policy keeps serving).
func notRegular(p string, mode fs.FileMode) error {
	what := "not a regular file (" + mode.Type().String() + ")"
	if mode&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		what = "a symbolic link (to " + target + ")"
	}
	return fmt.Errorf("%s is %s: policy and data files, and the directories holding them, must be regular files and directories, not links to them", p, what)
}

// isServedFile reports whether a file name is loaded for serving. Rego unit
// tests (*_test.rego) are run by `go test`, never served.
func isServedFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch {
	case strings.HasSuffix(name, "_test.rego"):
		return false
	case strings.HasSuffix(name, ".rego"):
		return true
	default:
		return isDataFile(name)
	}
}

func isDataFile(name string) bool {
	switch path.Ext(name) {
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// revisionOf digests the sorted (path, content) pairs. Each field is length
// prefixed so that no two different file sets can produce the same stream.
func revisionOf(files []sourceFile) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.rel)))
		h.Write(n[:])
		h.Write([]byte(f.rel))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.content)))
		h.Write(n[:])
		h.Write(f.content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// prepare parses, compiles and prepares the decision query over files.
func prepare(ctx context.Context, files []sourceFile) (*snapshot, error) {
	snap, err := prepareQuery(ctx, files, DecisionQuery)
	if err != nil {
		return nil, err
	}
	vis, err := prepareQuery(ctx, files, visibleSetQuery)
	if err != nil {
		return nil, err
	}
	snap.visible = vis.query
	return snap, nil
}

// A policy decides on its input and data alone — and the clock: a built-in
// OPA marks nondeterministic (its result depends on something else) is
// refused unless it is admitted below, and so is every one refusedWhy
// names whatever OPA marks it. A policy that calls one does not load
// (refusalError names it); the capabilities leave them out, so no other
// path reaches them, and allow no host (AllowNet empty: nil would allow
// every one).

// admitted are the nondeterministic built-ins a policy may call, and why.
var admitted = map[string]string{
	// A rule may depend on the time (office hours, a grant that ends): the
	// clock reaches nothing and reads nothing of the host.
	"time.now_ns": "reads the clock only",
}

// refusedWhy says why the built-ins that reach past the input and data are
// refused; any other nondeterministic one is refused for notDetermined.
var refusedWhy = map[string]string{
	"http.send":          "it sends requests anywhere: a call's arguments could leave with them",
	"net.lookup_ip_addr": "it asks a resolver: a call's arguments could leave in the name, and a decision wait on it",
	"opa.runtime":        "it reads the process's environment, secrets included",
	"json.match_schema":  "a schema's $ref is fetched over the network or read from a local file (file://)",
	"json.verify_schema": "a schema's $ref is fetched over the network or read from a local file (file://)",
	// Nondeterministic only through the clock; not admitted for want of a
	// use: a caller's identity is verified before a decision, by the host.
	"io.jwt.decode_verify": "tokens are verified before a decision (the context is the host's), not by a policy",
}

// notDetermined is why any other nondeterministic built-in is refused.
const notDetermined = "its result depends on more than the input, the data and the clock (OPA marks it nondeterministic)"

// refusedBuiltins maps every refused built-in of this OPA to why.
var refusedBuiltins = func() map[string]string {
	out := map[string]string{}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if b.Nondeterministic && admitted[b.Name] == "" {
			out[b.Name] = notDetermined
		}
	}
	for name, why := range refusedWhy {
		out[name] = why
	}
	return out
}()

// capabilities are OPA's built-ins but the refused ones, and no host.
var capabilities = func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if refusedBuiltins[b.Name] == "" {
			kept = append(kept, b)
		}
	}
	c.Builtins = kept
	c.AllowNet = []string{}
	return c
}()

// refusalError is err, a compile error, said as the refusal it is when a
// module calls a refused built-in (OPA, which was not given them, calls
// such a call an "undefined function"); other errors are kept after it.
func refusalError(err error) error {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return err
	}
	var refused, other []string
	for _, e := range errs {
		name, ok := strings.CutPrefix(e.Message, "undefined function ")
		why := refusedBuiltins[name]
		if !ok || why == "" {
			other = append(other, e.Error())
			continue
		}
		at := ""
		if e.Location != nil {
			at = fmt.Sprintf("%s:%d: ", e.Location.File, e.Location.Row)
		}
		refused = append(refused, fmt.Sprintf("%sbuilt-in %s is refused: %s", at, name, why))
	}
	if len(refused) == 0 {
		return err
	}
	msg := "a policy decides on its input, its data and the clock: " + strings.Join(refused, "; ")
	if len(other) > 0 {
		msg += "; " + strings.Join(other, "; ")
	}
	return errors.New(msg)
}

func prepareQuery(ctx context.Context, files []sourceFile, query string) (*snapshot, error) {
	opts := []func(*rego.Rego){
		rego.Query(query),
		rego.Capabilities(capabilities),
		// Builtin errors must surface as errors: without this they evaluate
		// to undefined and a `default` rule silently turns them into a deny.
		rego.StrictBuiltinErrors(true),
		rego.SetRegoVersion(ast.RegoV1),
	}
	data := map[string]any{}
	modules := 0
	var parsed []*ast.Module
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, f.rel)
		if strings.HasSuffix(f.rel, ".rego") {
			m, err := ast.ParseModuleWithOpts(f.rel, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				return nil, fmt.Errorf("parse %s: %w", f.rel, err)
			}
			opts = append(opts, rego.ParsedModule(m))
			parsed = append(parsed, m)
			modules++
			continue
		}
		var doc any
		// util.Unmarshal reads JSON and YAML and keeps numbers as json.Number.
		if err := util.Unmarshal(f.content, &doc); err != nil {
			return nil, fmt.Errorf("parse data %s: %w", f.rel, err)
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("data %s: top level must be an object", f.rel)
		}
		if err := mergeAt(data, dataPath(f.rel), obj, f.rel); err != nil {
			return nil, err
		}
	}
	if modules == 0 {
		return nil, errors.New("no policy modules (*.rego) found")
	}
	if query == DecisionQuery && !defines(parsed, data, decisionPath) {
		// Every call would be "no policy decision": a package misspelt is
		// refused here, and a reload of it leaves the previous policy serving.
		return nil, fmt.Errorf("no module defines %s (package sharedos.authz, rule decision)", DecisionQuery)
	}
	// The data is converted to OPA values once, here: a store of Go values
	// converts what a decision reads on every read (a decision over 50,000
	// entries took 10.1 ms and 2.7 MB; as values 462 µs and 8 KB). The data
	// is util.Unmarshal's JSON values, which convert without a round trip.
	opts = append(opts, rego.Store(inmem.NewFromObjectWithOpts(data, inmem.OptReturnASTValuesOnRead(true))))
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", refusalError(err))
	}
	return &snapshot{query: pq, revision: revisionOf(files), files: names}, nil
}

// decisionPath is DecisionQuery's path below data.
var decisionPath = []string{"sharedos", "authz", "decision"}

// defines tells whether a rule of mods, or a document of data, can give the
// document at path a value: a rule at the path, below it (a package
// sharedos.authz.decision of allow and reason rules) or above it (a rule
// authz in package sharedos), as far as the rule's path is ground.
func defines(mods []*ast.Module, data map[string]any, path []string) bool {
	for _, m := range mods {
		for _, r := range m.Rules {
			if related(rulePath(m, r), path) {
				return true
			}
		}
	}
	var node any = data
	for _, seg := range path {
		obj, ok := node.(map[string]any)
		if !ok {
			return false
		}
		if node, ok = obj[seg]; !ok {
			return false
		}
	}
	return true
}

// rulePath is the ground prefix of r's path below data, as strings.
func rulePath(m *ast.Module, r *ast.Rule) []string {
	var out []string
	for _, t := range m.Package.Path[1:] {
		s, ok := t.Value.(ast.String)
		if !ok {
			return out
		}
		out = append(out, string(s))
	}
	for i, t := range r.Head.Ref() {
		switch v := t.Value.(type) {
		case ast.Var:
			if i != 0 {
				return out
			}
			out = append(out, string(v))
		case ast.String:
			out = append(out, string(v))
		default:
			return out
		}
	}
	return out
}

// related tells whether one of a and b is a prefix of the other.
func related(a, b []string) bool {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// dataPath is the data path of a data file: its directory's segments.
func dataPath(rel string) []string {
	dir := path.Dir(rel)
	if dir == "." {
		return nil
	}
	return strings.Split(dir, "/")
}

// mergeAt merges obj into root under the path segments. Two files that set
// the same leaf fail the load rather than letting file order decide.
func mergeAt(root map[string]any, segs []string, obj map[string]any, file string) error {
	node := root
	for _, s := range segs {
		next, ok := node[s]
		if !ok {
			child := map[string]any{}
			node[s] = child
			node = child
			continue
		}
		child, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("data %s: path %s conflicts with another data file", file, strings.Join(segs, "."))
		}
		node = child
	}
	return mergeObjects(node, obj, file, segs)
}

func mergeObjects(dst, src map[string]any, file string, at []string) error {
	for k, v := range src {
		cur, exists := dst[k]
		if !exists {
			dst[k] = v
			continue
		}
		a, aok := cur.(map[string]any)
		b, bok := v.(map[string]any)
		if !aok || !bok {
			return fmt.Errorf("data %s: key %s conflicts with another data file", file, strings.Join(append(append([]string(nil), at...), k), "."))
		}
		if err := mergeObjects(a, b, file, append(at, k)); err != nil {
			return err
		}
	}
	return nil
}
