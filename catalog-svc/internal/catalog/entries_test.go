package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/services/contract/resourceuri"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
)

func prompt(name string) *sharedosv1.PromptRegistration {
	ns, _, _ := strings.Cut(name, ".")
	if !strings.Contains(name, ".") {
		ns = ""
	}
	return &sharedosv1.PromptRegistration{
		Name: name, Title: "Review", Description: "Reviews a change.\n\tWith care.",
		Arguments: []*sharedosv1.PromptArgument{{Name: "change", Description: "what to review", Required: true}, {Name: "tone"}},
		Metadata:  &sharedosv1.ToolMetadata{Namespace: ns, Source: "provider:" + ns},
		Handler:   &sharedosv1.HandlerRef{Target: "127.0.0.1:7405"},
	}
}

func resource(uri string) *sharedosv1.ResourceRegistration {
	return &sharedosv1.ResourceRegistration{Uri: uri, Name: "data", Title: "Data", Description: "Some data.", MimeType: "application/json",
		Metadata: &sharedosv1.ToolMetadata{Source: "provider:test"}, Handler: &sharedosv1.HandlerRef{Target: "127.0.0.1:7405"}}
}

// TestPromptsAndResourcesRegistry (ADR 0018): a prompt or resource is
// registered with its published projection (canonical bytes and digest),
// replaced by registering it again (revision + 1, new digest), listed in
// byte order, and deregistered once; a URI with a {var} is a template.
func TestPromptsAndResourcesRegistry(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)

	reg, pub, err := svc.RegisterPrompt(ctx, prompt("code.review"))
	if err != nil {
		t.Fatal(err)
	}
	wantCanon := `{"arguments":[{"description":"what to review","name":"change","required":true},{"name":"tone"}],` +
		`"description":"Reviews a change.\n\tWith care.","name":"code.review","title":"Review"}`
	if reg.GetRevision() != 1 || string(pub.GetCanonicalJson()) != wantCanon || len(pub.GetDigest()) != 64 || len(pub.GetArguments()) != 2 {
		t.Fatalf("registered %v, published %s %s", reg, pub.GetCanonicalJson(), pub.GetDigest())
	}
	changed := prompt("code.review")
	changed.Title = "Review, again"
	reg2, pub2, err := svc.RegisterPrompt(ctx, changed)
	if err != nil || reg2.GetRevision() != 2 || pub2.GetDigest() == pub.GetDigest() {
		t.Fatalf("replace: %v, %v, %v", reg2, pub2, err)
	}
	if _, _, err := svc.RegisterPrompt(ctx, prompt("test_simple_prompt")); err != nil {
		t.Fatalf("an unqualified name: %v", err)
	}
	regs, err := svc.PromptRegistrations(ctx)
	if err != nil || len(regs) != 2 || regs[0].GetName() != "code.review" || regs[0].GetTitle() != "Review, again" ||
		regs[0].GetRevision() != 2 || regs[0].GetHandler().GetTarget() != "127.0.0.1:7405" || regs[1].GetName() != "test_simple_prompt" {
		t.Fatalf("PromptRegistrations = %v, %v", regs, err)
	}
	if err := svc.DeregisterPrompt(ctx, "code.review"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeregisterPrompt(ctx, "code.review"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("second deregister: %v, want ErrNotFound", err)
	}

	_, direct, err := svc.RegisterResource(ctx, resource("test://static-text"))
	if err != nil || direct.GetTemplate() || !strings.Contains(string(direct.GetCanonicalJson()), `"uri":"test://static-text"`) {
		t.Fatalf("direct resource: %v, %v", direct, err)
	}
	_, tmpl, err := svc.RegisterResource(ctx, resource("test://template/{id}/data"))
	if err != nil || !tmpl.GetTemplate() || !strings.Contains(string(tmpl.GetCanonicalJson()), `"uriTemplate":"test://template/{id}/data"`) {
		t.Fatalf("template: %v, %v", tmpl, err)
	}
	rs, err := svc.ResourceRegistrations(ctx)
	if err != nil || len(rs) != 2 || rs[0].GetUri() != "test://static-text" {
		t.Fatalf("ResourceRegistrations = %v, %v", rs, err)
	}
	if err := svc.DeregisterResource(ctx, "test://nope"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("deregister unknown: %v", err)
	}
}

// TestPromptsAndResourcesRejects: a bad registration names the field and
// the rule, and nothing is stored.
func TestPromptsAndResourcesRejects(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)
	const tagged = "\U000E0049\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065" // "Ignore" in Unicode tag characters
	for _, c := range []struct {
		name   string
		mutate func(*sharedosv1.PromptRegistration)
		field  string
		rule   string
	}{
		{"bad name", func(p *sharedosv1.PromptRegistration) { p.Name = "code review" }, "name", "ToolNameSchema"},
		{"foreign namespace", func(p *sharedosv1.PromptRegistration) { p.Metadata.Namespace = "github" }, "metadata.namespace", catalog.RuleNamespace},
		{"hidden text", func(p *sharedosv1.PromptRegistration) { p.Description = "ok\u202eevil" }, "description", catalog.RulePoisoning},
		{"long title", func(p *sharedosv1.PromptRegistration) { p.Title = strings.Repeat("t", 300) }, "title", catalog.RuleLength},
		{"long source", func(p *sharedosv1.PromptRegistration) { p.Metadata.Source = strings.Repeat("s", 300) }, "metadata.source", catalog.RuleLength},
		{"argument name", func(p *sharedosv1.PromptRegistration) { p.Arguments[0].Name = "a b" }, "arguments[0].name", catalog.RulePromptArgument},
		{"argument twice", func(p *sharedosv1.PromptRegistration) { p.Arguments[1].Name = "change" }, "arguments[1].name", catalog.RulePromptArgument},
		// The kernel refuses argument keys that differ only in case: such a
		// prompt could never be given both.
		{"argument twice in another case", func(p *sharedosv1.PromptRegistration) { p.Arguments[1].Name = "Change" }, "arguments[1].name", catalog.RulePromptArgument},
		{"no handler", func(p *sharedosv1.PromptRegistration) { p.Handler = nil }, "handler.target", catalog.RuleRequired},
		// A tool's rule (found by review: any bytes were stored, NUL and
		// invalid UTF-8 too).
		{"handler with a NUL", func(p *sharedosv1.PromptRegistration) { p.Handler.Target = "a\x00b" }, "handler.target", catalog.RuleIdentifier},
		{"handler with a space", func(p *sharedosv1.PromptRegistration) { p.Handler.Target = "a b" }, "handler.target", catalog.RuleIdentifier},
		{"handler not UTF-8", func(p *sharedosv1.PromptRegistration) { p.Handler.Target = "a\xffb" }, "handler.target", catalog.RuleIdentifier},
		{"long handler", func(p *sharedosv1.PromptRegistration) { p.Handler.Target = strings.Repeat("h", 257) }, "handler.target", catalog.RuleIdentifier},
		{"timeout", func(p *sharedosv1.PromptRegistration) { p.Handler.Timeout = durationpb.New(-1) }, "handler.timeout", catalog.RuleTimeout},
	} {
		p := prompt("code.review")
		c.mutate(p)
		_, _, err := svc.RegisterPrompt(ctx, p)
		var ve *catalog.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || ve.Rule != c.rule {
			t.Errorf("prompt %s: %v, want %s/%s", c.name, err, c.field, c.rule)
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(*sharedosv1.ResourceRegistration)
		field  string
		rule   string
	}{
		{"no uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "" }, "uri", catalog.RuleRequired},
		{"relative", func(r *sharedosv1.ResourceRegistration) { r.Uri = "static-text" }, "uri", catalog.RuleURI},
		{"space", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://a b" }, "uri", catalog.RuleURI},
		{"level 2 template", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/{+path}" }, "uri", catalog.RuleURI},
		{"unbalanced", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/{id" }, "uri", catalog.RuleURI},
		{"variable twice", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://{id}/{id}" }, "uri", catalog.RuleURI},
		// A URI parser takes these literals; RFC 6570 (and the bridge's MCP
		// library, which panicked on them) does not.
		{"template literal '|'", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://pipe/{id}|raw" }, "uri", catalog.RuleURI},
		{"template literal '^'", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/{id}^x" }, "uri", catalog.RuleURI},
		// One spelling per URI, so a read in another finds it (RFC 3986 6.2.2).
		{"encoded unreserved character", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/%68idden" }, "uri", catalog.RuleURI},
		{"lower-case escape", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/a%2fb" }, "uri", catalog.RuleURI},
		{"a password", func(r *sharedosv1.ResourceRegistration) { r.Uri = "http://user:pw@host/x" }, "uri", catalog.RuleURI},
		{"too long", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://" + strings.Repeat("a", 2100) }, "uri", catalog.RuleLength},
		{"no name", func(r *sharedosv1.ResourceRegistration) { r.Name = "" }, "name", catalog.RuleRequired},
		{"mime", func(r *sharedosv1.ResourceRegistration) { r.MimeType = "not a type" }, "mime_type", catalog.RuleMIMEType},
		{"hidden title", func(r *sharedosv1.ResourceRegistration) { r.Title = "a\u200bb" }, "title", catalog.RulePoisoning},
		// A URI and a media type are published text as a title is (found
		// by review: each took any character a URI or media type parser
		// takes, invisible ones too).
		{"bidi override in the uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/\u202eevil" }, "uri", catalog.RulePoisoning},
		{"bidi override in the host", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://host\u202e/x" }, "uri", catalog.RulePoisoning},
		{"zero-width space in the uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/a\u200bb" }, "uri", catalog.RulePoisoning},
		{"soft hyphen in the uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/a\u00adb" }, "uri", catalog.RulePoisoning},
		{"tag characters in the uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/" + tagged }, "uri", catalog.RulePoisoning},
		{"C1 control in the uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/\u009b31m" }, "uri", catalog.RulePoisoning},
		{"bidi override in a template", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/{id}\u202e" }, "uri", catalog.RulePoisoning},
		{"invalid UTF-8 in the uri", func(r *sharedosv1.ResourceRegistration) { r.Uri = "test://t/\xff" }, "uri", catalog.RuleUTF8},
		{"bidi override in the mime type", func(r *sharedosv1.ResourceRegistration) { r.MimeType = "text/plain; a=\"\u202eevil\"" }, "mime_type", catalog.RulePoisoning},
		{"tag characters in the mime type", func(r *sharedosv1.ResourceRegistration) { r.MimeType = "text/plain; a=\"" + tagged + "\"" }, "mime_type", catalog.RulePoisoning},
		{"C1 control in the mime type", func(r *sharedosv1.ResourceRegistration) { r.MimeType = "text/plain; a=\"x\u009by\"" }, "mime_type", catalog.RulePoisoning},
		{"no handler", func(r *sharedosv1.ResourceRegistration) { r.Handler.Target = "" }, "handler.target", catalog.RuleRequired},
		{"handler with a NUL", func(r *sharedosv1.ResourceRegistration) { r.Handler.Target = "a\x00b" }, "handler.target", catalog.RuleIdentifier},
		{"handler not UTF-8", func(r *sharedosv1.ResourceRegistration) { r.Handler.Target = "a\xffb" }, "handler.target", catalog.RuleIdentifier},
		{"handler of 8 MiB", func(r *sharedosv1.ResourceRegistration) { r.Handler.Target = strings.Repeat("h", 8<<20) }, "handler.target", catalog.RuleIdentifier},
	} {
		r := resource("test://static-text")
		c.mutate(r)
		_, _, err := svc.RegisterResource(ctx, r)
		var ve *catalog.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || ve.Rule != c.rule {
			t.Errorf("resource %s: %v, want %s/%s", c.name, err, c.field, c.rule)
		}
		// An upstream's resources are checked so before they are stored.
		if _, err := svc.CheckResource(r); !errors.As(err, &ve) || ve.Field != c.field || ve.Rule != c.rule {
			t.Errorf("CheckResource, %s: %v, want %s/%s", c.name, err, c.field, c.rule)
		}
	}
	if ps, _ := svc.PromptRegistrations(ctx); len(ps) != 0 {
		t.Errorf("refused prompts were stored: %v", ps)
	}
	if rs, _ := svc.ResourceRegistrations(ctx); len(rs) != 0 {
		t.Errorf("refused resources were stored: %v", rs)
	}
}

// TestListPromptsResources (ADR 0018): a context lists the prompts and
// resources the policy lets it see, in one FilterTools call naming each by
// its kind, with a hash over exactly those; the hash changes with what is
// published and with what is visible; no filter means no listing.
func TestListPromptsResources(t *testing.T) {
	f := &fakeFilter{allow: func(actx *sharedosv1.AccessContext, e *sharedosv1.ToolFacts) bool {
		return actx.GetPrincipal() == "ci" || e.GetClass() == "prompt"
	}}
	svc := newService(t, nil, f)
	ctx := testCtx(t)
	for _, n := range []string{"test_simple_prompt", "code.review"} {
		if _, _, err := svc.RegisterPrompt(ctx, prompt(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.RegisterResource(ctx, resource("test://template/{id}/data")); err != nil {
		t.Fatal(err)
	}
	ci, err := svc.ListPromptsResources(ctx, &sharedosv1.AccessContext{Principal: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ci.Prompts) != 2 || ci.Prompts[0].GetName() != "code.review" || len(ci.Resources) != 1 || !ci.Resources[0].GetTemplate() ||
		len(ci.Hash) != 64 || f.calls != 1 {
		t.Fatalf("ci lists %+v (%d filter calls)", ci, f.calls)
	}
	alice, err := svc.ListPromptsResources(ctx, &sharedosv1.AccessContext{Principal: "alice"})
	if err != nil || len(alice.Prompts) != 2 || len(alice.Resources) != 0 || alice.Hash == ci.Hash {
		t.Fatalf("alice lists %+v, %v: want the prompts only, another hash", alice, err)
	}
	changed := prompt("code.review")
	changed.Description = "v2"
	if _, _, err := svc.RegisterPrompt(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if again, _ := svc.ListPromptsResources(ctx, &sharedosv1.AccessContext{Principal: "alice"}); again.Hash == alice.Hash {
		t.Error("the hash did not change with a published prompt")
	}
	f.err = errors.New("pdp down")
	if _, err := svc.ListPromptsResources(ctx, &sharedosv1.AccessContext{Principal: "ci"}); !errors.Is(err, catalog.ErrAuthzUnavailable) {
		t.Fatalf("with the filter down: %v, want ErrAuthzUnavailable", err)
	}
}

// RegisteredResource finds a concrete resource by any spelling a reader
// may take for its URI, through the key written with it; one stored
// without a key (before match keys, or by an older kernel in a rolling
// upgrade) or with another version's key is found too (found by review:
// an older version's key was trusted), and KeyResources keys it once —
// never one of a newer version. A second spelling of a registered URI is
// refused.
func TestRegisteredResourceByKey(t *testing.T) {
	st := memory.New()
	svc := newService(t, st, nil)
	ctx := testCtx(t)
	for _, u := range []string{"test://t/a%2Bb", "test://t/{id}"} {
		if _, _, err := svc.RegisterResource(ctx, resource(u)); err != nil {
			t.Fatal(err)
		}
	}
	// As older and newer kernels store them.
	for key, mk := range map[string]string{"test://t/caf%C3%A9": "", "file://localhost/srv/hidden": "v0:file://localhost/srv/hidden", "test://t/n": "v9:whatever", "test://t/p": "v+2:whatever"} {
		if _, err := st.PutEntry(ctx, store.KindResource, store.Entry{Key: key, Registration: []byte("x"), Canonical: []byte("{}"), Digest: "d", MatchKey: mk}); err != nil {
			t.Fatal(err)
		}
	}
	for read, want := range map[string]string{
		"test://t/a+b": "test://t/a%2Bb", "test://T/a%2bb": "test://t/a%2Bb", "test://t/a%2Bb": "test://t/a%2Bb",
		"test://t/cafe%CC%81": "test://t/caf%C3%A9", "file:///srv/hidden": "file://localhost/srv/hidden", "TEST://t/n": "test://t/n",
		"test://t/7": "", "test://t/{id}": "",
	} {
		got, err := svc.RegisteredResource(ctx, read)
		if want == "" && !errors.Is(err, catalog.ErrNotFound) || want != "" && (err != nil || got != want) {
			t.Errorf("RegisteredResource(%q) = %q, %v; want %q", read, got, err, want)
		}
	}
	for round, want := range []int{3, 0} { // no key, v0, and v+2 (no version)
		if n, err := svc.KeyResources(ctx); err != nil || n != want {
			t.Errorf("KeyResources, round %d: %d, %v; want %d keyed", round, n, err, want)
		}
	}
	scope := fmt.Sprintf("v%d:", resourceuri.KeyVersion)
	if es, err := st.EntriesMatching(ctx, store.KindResource, scope, scope+resourceuri.Key("test://t/cafe%CC%81")); err != nil || len(es) != 2 ||
		es[0].Key != "test://t/caf%C3%A9" || es[1].Key != "test://t/n" {
		t.Errorf("after KeyResources the unkeyed resource is found by its key, and only the newer one besides: %+v, %v", es, err)
	}
	var v *catalog.ValidationError
	alias := resource("test://t/a+b")
	alias.Metadata.Source = "upstream:elsewhere"
	if _, _, err := svc.RegisterResource(ctx, alias); !errors.As(err, &v) || v.Rule != catalog.RuleURI || !strings.Contains(err.Error(), "test://t/a%2Bb") {
		t.Errorf("another source's spelling of a registered URI: %v, want %s naming it", err, catalog.RuleURI)
	}
	if _, _, err := svc.RegisterResource(ctx, resource("test://t/a%2Bb")); err != nil {
		t.Errorf("registering the URI again: %v", err)
	}
	// The same source respells it (an upstream whose listing changed).
	if _, _, err := svc.RegisterResource(ctx, resource("test://t/a+b")); err != nil {
		t.Errorf("the same source's new spelling: %v", err)
	}
}

// registerSpellingsAtOnce registers, for each of rounds URIs, two
// spellings of it by two sources at the same moment, a on one replica and
// b on another (or the same), and fails unless exactly one of each pair
// landed.
func registerSpellingsAtOnce(t *testing.T, a, b *catalog.Service, rounds int) {
	t.Helper()
	registerPairsAtOnce(t, a, b, rounds, "two spellings of one URI", func(i int) (*sharedosv1.ResourceRegistration, *sharedosv1.ResourceRegistration) {
		one, two := resource(fmt.Sprintf("test://race/r%d/a%%2Bb", i)), resource(fmt.Sprintf("test://race/r%d/a+b", i))
		two.Metadata.Source = "upstream:elsewhere"
		return one, two
	})
}

// registerPairsAtOnce registers, in each of rounds, pair(round)'s two
// resources — by two sources, which may not both hold them — at the same
// moment, the first on a and the second on b, and fails unless exactly
// one of each pair landed.
func registerPairsAtOnce(t *testing.T, a, b *catalog.Service, rounds int, what string,
	pair func(round int) (*sharedosv1.ResourceRegistration, *sharedosv1.ResourceRegistration)) {
	t.Helper()
	ctx := testCtx(t)
	for i := range rounds {
		one, two := pair(i)
		start := make(chan struct{})
		var errs [2]error
		var wg sync.WaitGroup
		for j, p := range []struct {
			svc *catalog.Service
			reg *sharedosv1.ResourceRegistration
		}{{a, one}, {b, two}} {
			wg.Go(func() {
				<-start
				_, _, errs[j] = p.svc.RegisterResource(ctx, p.reg)
			})
		}
		close(start)
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: %s by two sources at once: %v and %v; want exactly one registered", i, what, errs[0], errs[1])
		}
	}
}

// Two spellings of one URI registered by two sources at the same moment:
// one lands, the other is refused (the check and the write are one step
// under the URI's lock).
func TestResourceSpellingsRegisteredAtOnce(t *testing.T) {
	svc := newService(t, nil, nil)
	registerSpellingsAtOnce(t, svc, svc, 300)
}

// entriesHook runs hook (once) after the store answers EntriesMatching: in
// the middle of a registration's check of the other spellings.
type entriesHook struct {
	store.Store
	hook func()
}

func (h *entriesHook) EntriesMatching(ctx context.Context, kind store.Kind, scope, mk string) ([]store.Entry, error) {
	es, err := h.Store.EntriesMatching(ctx, kind, scope, mk)
	if f := h.hook; f != nil {
		h.hook = nil
		f()
	}
	return es, err
}

// A source respells its resource (X, then Y) and withdraws X while another
// source registers a third spelling Z: the withdrawal waits for Z's check,
// which still finds the URI held, so Z is refused (found by review: X
// going between the check's two reads let Z land beside Y).
func TestWithdrawalWaitsForASpellingCheck(t *testing.T) {
	st := &entriesHook{Store: memory.New()}
	svc := newService(t, st, nil)
	ctx := testCtx(t)
	x, y, z := resource("TEST://race/a+b"), resource("test://race/a+b"), resource("test://race/a%2Bb")
	x.Metadata.Source, y.Metadata.Source, z.Metadata.Source = "upstream:s", "upstream:s", "upstream:t"
	for _, r := range []*sharedosv1.ResourceRegistration{x, y} {
		if _, _, err := svc.RegisterResource(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	withdrawn := make(chan error, 1)
	waiting := make(chan struct{}, 1)
	svc.OnLockingResource(func(string) {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	st.hook = func() {
		<-waiting // Z's own lock: drained, so the next is the withdrawal's
		go func() { withdrawn <- svc.DeregisterResource(ctx, x.GetUri()) }()
		select { // the withdrawal either waits for the lock or (unlocked) is done
		case <-waiting:
		case err := <-withdrawn:
			withdrawn <- err
		}
	}
	_, _, err := svc.RegisterResource(ctx, z)
	if werr := <-withdrawn; werr != nil {
		t.Fatalf("withdrawing X: %v", werr)
	}
	if err == nil {
		t.Errorf("Z by upstream:t landed beside Y by upstream:s, while X was withdrawn")
	}
}

// ForeignResource finds the URIs another source's resource registration
// serves — in any spelling a reader takes for it, or through a template —
// and the source's own do not: those an upstream's content may not embed a
// resource under (attack run S2: an upstream's prompt embedded "FORGED"
// contents as test://static-text, a native provider's resource).
func TestForeignResource(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)
	for uri, source := range map[string]string{
		"test://static-text": "provider:test", "test://t/{id}": "provider:test",
		"ev://mine": "mcp:ev", "ev://dir/{name}": "mcp:ev",
	} {
		r := resource(uri)
		r.Metadata.Source = source
		if _, _, err := svc.RegisterResource(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		source string
		uris   []string
		i      int
		reg    string
	}{
		{"mcp:ev", nil, -1, ""},
		{"mcp:ev", []string{"ev://mine", "EV://mine", "ev://dir/a", "ev://dir/%61", "elsewhere://x", "file:///etc/passwd"}, -1, ""},
		{"mcp:ev", []string{"test://static-text"}, 0, "test://static-text"},
		{"mcp:ev", []string{"ev://mine", "TEST://static-text"}, 1, "test://static-text"},
		{"mcp:ev", []string{"test://static-text#x"}, 0, "test://static-text"},
		{"mcp:ev", []string{"test://t/7"}, 0, "test://t/{id}"},
		{"mcp:ev", []string{"TEST://t/7"}, 0, "test://t/{id}"},
		{"mcp:other", []string{"ev://dir/a"}, 0, "ev://dir/{name}"},
		{"provider:test", []string{"test://static-text", "test://t/7"}, -1, ""},
	} {
		i, reg, err := svc.ForeignResource(ctx, c.source, c.uris)
		if err != nil || i != c.i || reg != c.reg {
			t.Errorf("ForeignResource(%s, %q) = %d %q, %v; want %d %q", c.source, c.uris, i, reg, err, c.i, c.reg)
		}
	}
}
