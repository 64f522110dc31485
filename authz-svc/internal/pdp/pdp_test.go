package pdp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/open-policy-agent/opa/v1/ast"
)

func TestParseObjectKeepsNumberText(t *testing.T) {
	v, err := ParseObject([]byte(`{"n":12345678901234567890,"f":1.0000000000000000001,"e":1e400}`))
	if err != nil {
		t.Fatal(err)
	}
	obj := v.(ast.Object)
	for k, want := range map[string]string{"n": "12345678901234567890", "f": "1.0000000000000000001", "e": "1e400"} {
		if got := obj.Get(ast.StringTerm(k)).Value.String(); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
}

func TestParseObjectRules(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n-1) + "{}" + strings.Repeat("]", n-1) }
	tests := []struct {
		in   string
		rule string // "" means accepted
	}{
		{``, ""},
		{` {"a":[1,{"b":null}]} `, ""},
		{`{"s":"` + strings.Repeat("[", 200) + `"}`, ""}, // brackets in strings are not nesting
		{`{"s":"\"[[[["}`, ""},
		{`[` + nest(63) + `]`, "must be a JSON object"}, // 64 deep but an array
		{`{"a":` + nest(63) + `}`, ""},
		{`{"a":` + nest(64) + `}`, "nested at most 64"},
		{`[]`, "must be a JSON object"},
		{`null`, "must be a JSON object"},
		{`{"a":1}x`, "must be valid JSON"},
		{`{"a":1}{}`, "must be valid JSON"},
		{`{'a':1}`, "must be valid JSON"},
		{"{\"a\":\"\xc3\"}", "valid UTF-8"},
		{`{"a":"` + strings.Repeat("x", MaxJSONBytes) + `"}`, "at most 1048576 bytes"},
		// A number is at most MaxNumberChars long, however deep.
		{`{"n":` + strings.Repeat("9", MaxNumberChars) + `}`, ""},
		{`{"n":[{"m":` + strings.Repeat("9", MaxNumberChars+1) + `}]}`, "numbers must be at most 128 characters"},
		{`{"n":"` + strings.Repeat("9", 1000) + `"}`, ""}, // a string of digits is a string
	}
	for i, tt := range tests {
		_, err := ParseObject([]byte(tt.in))
		switch {
		case tt.rule == "" && err != nil:
			t.Errorf("#%d: unexpected error %v", i, err)
		case tt.rule != "":
			var je *JSONError
			if !errors.As(err, &je) || !strings.Contains(je.Rule, tt.rule) {
				t.Errorf("#%d: err = %v, want rule containing %q", i, err, tt.rule)
			}
		}
	}
}

// TestParseObjectRefusesRepeatedKeys: encoding/json keeps the last of a
// repeated key and another parser may keep the first, so the policy could
// decide on a value the handler never reads. Keys are compared decoded.
func TestParseObjectRefusesRepeatedKeys(t *testing.T) {
	for _, in := range []string{
		`{"path":"/public/a.txt","path":"/private/b.txt"}`,
		`{"a":{"x":1,"y":2,"x":3}}`,
		`{"a":[1,{"b":[{"c":true,"c":false}]}]}`,
		`{"path":1,"p\u0061th":2}`,
	} {
		_, err := ParseObject([]byte(in))
		var je *JSONError
		if !errors.As(err, &je) || je.Rule != "keys must not appear twice in one object" {
			t.Errorf("%s: err = %v, want a repeated-key refusal", in, err)
		}
	}
	for _, in := range []string{
		`{"a":{"x":1},"b":{"x":1},"x":[{"x":1},{"x":2}]}`, // one key in several objects
		`{"a:b":"c:d","k":"\":\"","e":"\\"}`,              // colons and escapes inside strings
		`{"a":{},"b":[]}`,
	} {
		if _, err := ParseObject([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	// A catalogue's annotations are its published bytes: one tool's
	// repeated key must not fail a listing of every tool.
	if _, err := ParseSharedObject([]byte(`{"readOnlyHint":true,"readOnlyHint":false}`)); err != nil {
		t.Errorf("annotations with a repeated key: %v", err)
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const readsData = `package sharedos.authz

import rego.v1

decision := {"allow": data.root.ok == true, "reason": sprintf("%v/%v", [data.root.ok, data.sub.dir.flag])}
`

func TestLoadPlacesDataAndSkipsTests(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"p/policy.rego":      readsData,
		"p/policy_test.rego": "this would not parse",
		"data.json":          `{"root":{"ok":true}}`,
		"sub/dir/data.yaml":  "flag: 7\n",
		".git/x.rego":        "neither would this",
		"README.md":          "not loaded",
	})
	files, err := readPolicyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.rel)
	}
	if got := strings.Join(names, ","); got != "data.json,p/policy.rego,sub/dir/data.yaml" {
		t.Fatalf("loaded %s", got)
	}
	snap, err := prepare(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	d, err := evalOne(context.Background(), snap, inputValue(contextTerm(Context{}), toolTerm(Tool{}), "", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allow || d.Reason != "true/7" {
		t.Errorf("decision = %+v", d)
	}
}

func TestLoadRejectsConflictsAndEmpty(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no modules":    {"data.json": `{}`},
		"conflict":      {"p.rego": readsData, "data.json": `{"sub":{"dir":{"flag":1}}}`, "sub/dir/data.json": `{"flag":2}`},
		"not an object": {"p.rego": readsData, "data.json": `[1]`},
		"bad rego":      {"p.rego": "package x\n\nallow if {"},
		// Every call would be "no policy decision", with the reload taken.
		"package misspelt": {"p.rego": strings.Replace(readsData, "sharedos.authz", "sharedos.authx", 1)},
		"rule misspelt":    {"p.rego": strings.Replace(readsData, "decision :=", "decisions :=", 1)},
	} {
		fs, err := readPolicyDir(writeTree(t, files))
		if err == nil {
			_, err = prepare(context.Background(), fs)
		}
		if err == nil {
			t.Errorf("%s: loaded without error", name)
		}
	}
}

func TestRevision(t *testing.T) {
	a := []sourceFile{{"a.rego", []byte("x")}, {"b.json", []byte("{}")}}
	same := []sourceFile{{"a.rego", []byte("x")}, {"b.json", []byte("{}")}}
	moved := []sourceFile{{"a.regox", []byte("")}, {"b.json", []byte("{}")}}
	changed := []sourceFile{{"a.rego", []byte("y")}, {"b.json", []byte("{}")}}
	r := revisionOf(a)
	if !strings.HasPrefix(r, "sha256:") || len(r) != len("sha256:")+64 {
		t.Fatalf("revision %q", r)
	}
	if revisionOf(same) != r {
		t.Error("revision is not deterministic")
	}
	if revisionOf(moved) == r || revisionOf(changed) == r {
		t.Error("revision did not change with the files")
	}
}

// TestParseSharedObject: the same bytes give the same value back, shared;
// refused input is refused every time and never kept; the memo is bounded;
// and shared values are evaluated by many requests at once (run with -race).
func TestParseSharedObject(t *testing.T) {
	raw := []byte(`{"readOnlyHint":true,"title":"Read a file"}`)
	a, err := ParseSharedObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSharedObject(append([]byte(nil), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same bytes parsed twice: want the value parsed first, shared")
	}
	if want, _ := ParseObject(raw); a.Compare(want) != 0 {
		t.Fatalf("shared %v, want %v", a, want)
	}
	for range 2 {
		if _, err := ParseSharedObject([]byte(`[1]`)); err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
			t.Fatalf("an array: %v, want refused", err)
		}
	}
	shared.mu.RLock()
	_, kept := shared.m[`[1]`]
	shared.mu.RUnlock()
	if kept {
		t.Fatal("refused input was kept")
	}
	for i := range maxShared + 10 {
		if _, err := ParseSharedObject(fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	shared.mu.RLock()
	n := len(shared.m)
	shared.mu.RUnlock()
	if n > maxShared {
		t.Fatalf("%d objects kept, want at most %d", n, maxShared)
	}

	e, err := New(context.Background(), Options{Dir: "../../../deploy/policies"})
	if err != nil {
		t.Fatal(err)
	}
	args, err := ParseObject([]byte(`{"path":"/public/a.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				ann, err := ParseSharedObject(raw)
				if err != nil {
					t.Error(err)
					return
				}
				d, _, err := e.Decide(context.Background(), fileReadRequest(args, ann))
				if err != nil || !d.Allow {
					t.Errorf("decision on a shared annotations value: %+v, %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// seenAtLog is a slog handler that records, at each record it handles, what
// the engine's readers see at that moment.
type seenAtLog struct {
	engine func() *Engine
	mu     sync.Mutex
	seen   map[string]error // message → LastReloadError while it was logged
}

func (h *seenAtLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *seenAtLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *seenAtLog) WithGroup(string) slog.Handler            { return h }
func (h *seenAtLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.engine(); e != nil {
		h.seen[r.Message] = e.LastReloadError()
	}
	return nil
}

// TestAReloadFailureIsLoggedBeforeItShows: LastReloadError shows a failure
// only once it is logged, so whoever waits on it finds the log line (the
// app test TestReloadGoodAndBroken once read the log in between).
func TestAReloadFailureIsLoggedBeforeItShows(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.rego": readsData})
	var engine *Engine
	h := &seenAtLog{engine: func() *Engine { return engine }, seen: map[string]error{}}
	e, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	engine = e
	if err := os.WriteFile(filepath.Join(dir, "broken.rego"), []byte("package x\n\nallow if {"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(context.Background()); err == nil {
		t.Fatal("a broken policy reloaded")
	}
	const msg = "policy reload failed; previous policy keeps serving"
	h.mu.Lock()
	got, logged := h.seen[msg]
	h.mu.Unlock()
	if !logged {
		t.Fatalf("the failure was not logged (logged %v)", h.seen)
	}
	if got != nil {
		t.Errorf("LastReloadError showed %v before the failure was logged", got)
	}
	if e.LastReloadError() == nil {
		t.Error("LastReloadError is nil after a failed reload")
	}
}

// A watch that cannot be set up (inotify instances used up) is an error,
// not a silent absence of reloads.
func TestWatchSetupFailureIsAnError(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.rego": readsData, "data.json": `{"root":{"ok":true},"sub":{"dir":{"flag":1}}}`})
	e, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func() (*fsnotify.Watcher, error)) { newWatcher = f }(newWatcher)
	newWatcher = func() (*fsnotify.Watcher, error) { return nil, errors.New("too many open files") }
	if err := e.Watch(t.Context()); err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Errorf("Watch = %v, want the setup error", err)
	}
}

// The visible rule answers names: two entries of one name (a tool and a
// prompt) are each decided on their own, not both by the name.
func TestVisibleShortcutNeedsDistinctNames(t *testing.T) {
	policy := `package sharedos.authz

import rego.v1

visible contains t.name if {
	some t in input.tools
	t.class == "prompt"
}

decision := {"allow": input.tool.class == "prompt", "reason": ""}
`
	e, err := New(context.Background(), Options{Dir: writeTree(t, map[string]string{"p.rego": policy}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tools := []Tool{{Name: "same", Class: "managed"}, {Name: "same", Class: "prompt"}, {Name: "other", Class: "prompt"}}
	ds, _, err := e.DecideTools(context.Background(), Context{Principal: "p"}, "list", tools)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Allow || !ds[1].Allow || !ds[2].Allow {
		t.Errorf("decisions %+v, want the managed tool hidden and the prompts visible", ds)
	}
}

// A reload takes the directory only once it has settled: a change landing
// while it loads (a file truncated mid-write) fails that reload — the
// previous policy keeps serving — and the next one, on a settled directory,
// takes it.
func TestReloadTakesOnlyASettledDirectory(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.rego": readsData, "data.json": `{"root":{"ok":true},"sub":{"dir":{"flag":1}}}`})
	e, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	before := e.Revision()
	t.Cleanup(func() { loaded = nil })
	loaded = func() {
		if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"root":{"ok":false},"sub":{"dir":{"flag":2}}}`), 0o644); err != nil {
			t.Error(err)
		}
	}
	if err := e.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "changed while it was loaded") {
		t.Fatalf("Reload during a change = %v", err)
	}
	if e.Revision() != before {
		t.Fatal("a reload of an unsettled directory was taken")
	}
	loaded = nil
	if err := e.Reload(context.Background()); err != nil || e.Revision() == before {
		t.Fatalf("Reload of the settled directory = %v (revision %s)", err, e.Revision())
	}
}

// A change made after the policy loaded but before its watch was in place
// sent no event the watch could see; Watch still takes it, rather than
// serving the older policy until some later change.
func TestWatchTakesAChangeMadeBeforeItStarted(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.rego": readsData, "data.json": `{"root":{"ok":true},"sub":{"dir":{"flag":1}}}`})
	e, err := New(context.Background(), Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	before := e.Revision()
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"root":{"ok":false},"sub":{"dir":{"flag":1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Watch(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(30 * time.Second)
	for e.Revision() == before {
		select {
		case err := <-done:
			t.Fatalf("Watch ended: %v", err)
		case <-deadline:
			t.Fatal("the change made before the watch started never served")
		case <-time.After(10 * time.Millisecond):
		}
	}
	d, _, err := e.Decide(context.Background(), Request{Action: "read"})
	if err != nil || d.Allow {
		t.Errorf("decision after the change = %+v, %v; want a deny", d, err)
	}
}

// A directory renamed into place at the policy directory's path (the old one
// renamed away) ends the watch however the path was spelled: its watch
// followed the old directory, and every later change would have gone unseen.
func TestWatchEndsWhenTheDirectoryIsSwapped(t *testing.T) {
	for name, spell := range map[string]func(t *testing.T, dir string) string{
		"clean":          func(_ *testing.T, dir string) string { return dir },
		"trailing slash": func(_ *testing.T, dir string) string { return dir + "/" },
		"relative": func(t *testing.T, dir string) string {
			t.Chdir(filepath.Dir(dir))
			return "./" + filepath.Base(dir)
		},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"p.rego": readsData, "data.json": `{"root":{"ok":true},"sub":{"dir":{"flag":1}}}`}
			dir, next := writeTree(t, files), writeTree(t, files)
			e, err := New(context.Background(), Options{Dir: spell(t, dir), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			watchers := make(chan *fsnotify.Watcher, 1)
			defer func(f func() (*fsnotify.Watcher, error)) { newWatcher = f }(newWatcher)
			newWatcher = func() (*fsnotify.Watcher, error) {
				w, err := fsnotify.NewWatcher()
				if err == nil {
					watchers <- w
				}
				return w, err
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.Watch(ctx) }()
			defer cancel()
			var w *fsnotify.Watcher
			select {
			case w = <-watchers:
			case err := <-done:
				t.Fatalf("Watch ended before watching: %v", err)
			}
			// Swapped once the directory is watched (the swap is not an
			// event before that: the new directory would be watched).
			for len(w.WatchList()) == 0 {
				select {
				case err := <-done:
					t.Fatalf("Watch ended before watching: %v", err)
				case <-time.After(10 * time.Millisecond):
				}
			}
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(next, dir); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, errWatchEnded) {
					t.Errorf("Watch = %v, want the watch ended", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the watch went on after its directory was renamed away")
			}
		})
	}
}

// A symbolic link is not a policy directory: retargeting it would send no
// event, and New says so rather than finding no policy in the link.
func TestPolicyDirIsNotASymlink(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.rego": readsData, "data.json": `{"root":{"ok":true},"sub":{"dir":{"flag":1}}}`})
	link := filepath.Join(t.TempDir(), "policies")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Options{Dir: link, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link (to "+dir+")") {
		t.Errorf("New(a link) = %v, want it refused as a symbolic link", err)
	}
}

// The decision may come from a rule at its path or from the rules of a
// package at it: both load.
func TestLoadTakesEveryWayToDefineTheDecision(t *testing.T) {
	for name, policy := range map[string]string{
		"rule":    readsData,
		"package": "package sharedos.authz.decision\n\nimport rego.v1\n\nallow := true\n\nreason := \"ok\"\n",
	} {
		fs, err := readPolicyDir(writeTree(t, map[string]string{"p.rego": policy, "data.json": `{"root":{"ok":true},"sub":{"dir":{"flag":1}}}`}))
		if err != nil {
			t.Fatal(err)
		}
		snap, err := prepare(context.Background(), fs)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d, err := evalOne(context.Background(), snap, inputValue(contextTerm(Context{}), toolTerm(Tool{}), "", "", nil)); err != nil || !d.Allow {
			t.Errorf("%s: decision %+v, %v", name, d, err)
		}
	}
}

// visible is a set of names: any other value, an array of the same names
// included, hides every tool.
func TestVisibleMustBeASet(t *testing.T) {
	for rule, want := range map[string]bool{
		`visible := {"files.read"}`: true,
		`visible := ["files.read"]`: false,
		`visible := "files.read"`:   false,
	} {
		policy := "package sharedos.authz\n\nimport rego.v1\n\n" + rule + "\n\ndecision := {\"allow\": true, \"reason\": \"\"}\n"
		e, err := New(context.Background(), Options{Dir: writeTree(t, map[string]string{"p.rego": policy}), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ds, _, err := e.DecideTools(context.Background(), Context{Principal: "p"}, "list", []Tool{{Name: "files.read"}})
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Allow != want {
			t.Errorf("%s: files.read visible = %v, want %v", rule, ds[0].Allow, want)
		}
	}
}
