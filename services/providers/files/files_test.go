package files_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/providers/files"
	"github.com/sharedos/toolshare/services/providers/providertest"
)

// fixture builds a root with /public and /private plus the symbolic links
// the provider must refuse, created at test time so the tests do not rely on
// how a checkout stores links.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"public/sub", "private", "publicity"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for name, content := range map[string]string{
		"public/a.txt":       "public a: kiwi\n",
		"public/sub/b.txt":   "line one\nkiwi two\n",
		"public/binary.bin":  "\xff\xfe\x00",
		"private/a.txt":      "PRIVATE-A kiwi\n",
		"private/secret.txt": "SECRET kiwi\n",
		"publicity/a.txt":    "publicity\n",
		"../outside.txt":     "OUTSIDE kiwi\n",
	} {
		must(os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}
	must(os.Symlink("../private/a.txt", filepath.Join(root, "public/link-to-private")))
	must(os.Symlink("../private", filepath.Join(root, "public/dir-link")))
	must(os.Symlink("a.txt", filepath.Join(root, "public/inside-link")))
	must(os.Symlink("../../outside.txt", filepath.Join(root, "public/escape")))
	must(os.Symlink("/etc/passwd", filepath.Join(root, "public/abs-escape")))
	// A FIFO blocks open(2) until a writer comes; a hard link is another
	// name of a private file (issue 17, item 18).
	must(syscall.Mkfifo(filepath.Join(root, "public/fifo"), 0o644))
	must(os.Link(filepath.Join(root, "private/secret.txt"), filepath.Join(root, "public/hardlink.txt")))
	return root
}

func serve(t *testing.T, root string) sharedosv1.ToolHandlerServiceClient {
	t.Helper()
	return sharedosv1.NewToolHandlerServiceClient(serveConn(t, root))
}

func serveConn(t *testing.T, root string) *grpc.ClientConn {
	t.Helper()
	srv, err := files.Config{Listen: "127.0.0.1:0", Root: root}.Complete(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	cc, err := grpcx.Dial(srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestHealth(t *testing.T) {
	hc := healthpb.NewHealthClient(serveConn(t, fixture(t)))
	for _, svc := range []string{"", files.LivenessService, "sharedos.v1.ToolHandlerService"} {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v", svc, resp.GetStatus(), err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := (files.Config{}).Complete(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "listen") || !strings.Contains(err.Error(), "root") {
		t.Fatalf("empty config: %v", err)
	}
	if _, err := (files.Config{Listen: "127.0.0.1:0", Root: filepath.Join(t.TempDir(), "missing")}).Complete(context.Background()); err == nil {
		t.Fatal("missing root accepted")
	}
}

func TestContract(t *testing.T) {
	client := serve(t, fixture(t))
	providertest.Run(t, client, []providertest.Case{
		{Name: "read public", Tool: files.ToolRead, Args: `{"path":"/public/a.txt"}`, WantText: "public a: kiwi"},
		{Name: "read relative", Tool: files.ToolRead, Args: `{"path":"public/a.txt"}`, WantText: "public a: kiwi"},
		{Name: "read private (provider does not authorize)", Tool: files.ToolRead, Args: `{"path":"/private/a.txt"}`, WantText: "PRIVATE-A"},
		{Name: "traversal is cleaned, not escaped", Tool: files.ToolRead, Args: `{"path":"/../../outside.txt"}`, WantError: true, NotText: "OUTSIDE"},
		{Name: "backslash traversal", Tool: files.ToolRead, Args: `{"path":"\\public\\..\\..\\outside.txt"}`, WantError: true, NotText: "OUTSIDE"},
		{Name: "percent dots stay literal", Tool: files.ToolRead, Args: `{"path":"/public/%2e%2e/private/a.txt"}`, WantError: true, WantText: "not found", NotText: "PRIVATE"},
		{Name: "fullwidth dots stay literal", Tool: files.ToolRead, Args: `{"path":"/public/\uff0e\uff0e/private/a.txt"}`, WantError: true, NotText: "PRIVATE"},
		{Name: "symlink into private refused", Tool: files.ToolRead, Args: `{"path":"/public/link-to-private"}`, WantError: true, WantText: "symbolic link", NotText: "PRIVATE"},
		{Name: "directory symlink refused", Tool: files.ToolRead, Args: `{"path":"/public/dir-link/secret.txt"}`, WantError: true, WantText: "symbolic link", NotText: "SECRET"},
		{Name: "symlink inside public refused", Tool: files.ToolRead, Args: `{"path":"/public/inside-link"}`, WantError: true, WantText: "symbolic link"},
		{Name: "symlink out of root refused", Tool: files.ToolRead, Args: `{"path":"/public/escape"}`, WantError: true, NotText: "OUTSIDE"},
		{Name: "absolute symlink refused", Tool: files.ToolRead, Args: `{"path":"/public/abs-escape"}`, WantError: true, NotText: "root:"},
		{Name: "nul refused", Tool: files.ToolRead, Args: `{"path":"/public/a.txt\u0000.png"}`, WantError: true, WantText: "NUL"},
		{Name: "missing", Tool: files.ToolRead, Args: `{"path":"/public/none.txt"}`, WantError: true, WantText: "not found: /public/none.txt"},
		{Name: "directory", Tool: files.ToolRead, Args: `{"path":"/public"}`, WantError: true, WantText: "is a directory"},
		{Name: "binary", Tool: files.ToolRead, Args: `{"path":"/public/binary.bin"}`, WantError: true, WantText: "not a UTF-8"},
		{Name: "missing path", Tool: files.ToolRead, Args: `{}`, WantError: true, WantText: "path is required"},
		{Name: "unknown key", Tool: files.ToolRead, Args: `{"path":"/public/a.txt","mode":"x"}`, WantError: true},
		{Name: "wrong type", Tool: files.ToolRead, Args: `{"path":7}`, WantError: true},
		// Keys match exactly (issue 17, item 1): encoding/json alone reads
		// "PATH" into path, a key the policy never saw.
		{Name: "case-folded key", Tool: files.ToolRead, Args: `{"PATH":"/private/secret.txt"}`, WantError: true, WantText: `unknown key "PATH"`, NotText: "SECRET"},
		{Name: "case-folded key smuggled beside the real one", Tool: files.ToolRead, Args: `{"path":"/public/a.txt","Path":"/private/secret.txt"}`, WantError: true, NotText: "SECRET"},
		{Name: "Kelvin-sign key", Tool: files.ToolSearch, Args: "{\"query\":\"kiwi\",\"path\":\"/public\",\"limit\":1,\"\u212aey\":1}", WantError: true},
		// encoding/json takes the last of two keys; another reader (the
		// kernel's policy input, a log) may take the first.
		{Name: "repeated key", Tool: files.ToolRead, Args: `{"path":"/public/a.txt","path":"/private/secret.txt"}`, WantError: true, WantText: `key "path" given more than once`, NotText: "SECRET"},
		{Name: "repeated key, escaped", Tool: files.ToolRead, Args: `{"path":"/public/a.txt","pa\u0074h":"/private/secret.txt"}`, WantError: true, WantText: "more than once", NotText: "SECRET"},
		{Name: "case-folded write key", Tool: files.ToolWrite, Args: `{"PATH":"/private/a.txt","content":"x"}`, WantError: true, WantText: "unknown key"},
		{Name: "search public", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public"}`, WantText: "/public/sub/b.txt:2: kiwi two", NotText: "PRIVATE"},
		{Name: "search skips links", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public"}`, NotText: "SECRET"},
		{Name: "search limit", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public","limit":1}`, WantText: "stopped at 1"},
		{Name: "search prefix collision", Tool: files.ToolSearch, Args: `{"query":"publicity","path":"/publicity"}`, WantText: "/publicity/a.txt:1"},
		{Name: "search via link refused", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public/dir-link"}`, WantError: true, NotText: "SECRET"},
		{Name: "search no match", Tool: files.ToolSearch, Args: `{"query":"zebra","path":"/public"}`, WantText: "no matches"},
		{Name: "search bad limit", Tool: files.ToolSearch, Args: `{"query":"x","path":"/public","limit":0}`, WantError: true},
		{Name: "search null limit is the default", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public","limit":null}`, WantText: "/public/sub/b.txt:2: kiwi two"},
		{Name: "search empty query", Tool: files.ToolSearch, Args: `{"query":"","path":"/public"}`, WantError: true},
		{Name: "write", Tool: files.ToolWrite, Args: `{"path":"/public/new.txt","content":"fresh"}`, WantText: "wrote 5 bytes to /public/new.txt"},
		{Name: "write through link refused", Tool: files.ToolWrite, Args: `{"path":"/public/link-to-private","content":"x"}`, WantError: true, WantText: "symbolic link"},
		{Name: "write through dir link refused", Tool: files.ToolWrite, Args: `{"path":"/public/dir-link/x.txt","content":"x"}`, WantError: true, WantText: "symbolic link"},
		{Name: "write missing dir", Tool: files.ToolWrite, Args: `{"path":"/nope/x.txt","content":"x"}`, WantError: true, WantText: "not found"},
		{Name: "write directory", Tool: files.ToolWrite, Args: `{"path":"/public","content":"x"}`, WantError: true, WantText: "is a directory"},
		{Name: "write root", Tool: files.ToolWrite, Args: `{"path":"/","content":"x"}`, WantError: true},
		{Name: "write missing content", Tool: files.ToolWrite, Args: `{"path":"/public/y.txt"}`, WantError: true, WantText: "content is required"},
		{Name: "read a FIFO refused at once", Tool: files.ToolRead, Args: `{"path":"/public/fifo"}`, WantError: true, WantText: "not a regular file"},
		{Name: "write a FIFO refused at once", Tool: files.ToolWrite, Args: `{"path":"/public/fifo","content":"x"}`, WantError: true, WantText: "not a regular file"},
		{Name: "read through a hard link refused", Tool: files.ToolRead, Args: `{"path":"/public/hardlink.txt"}`, WantError: true, WantText: "hard links", NotText: "SECRET"},
		{Name: "write through a hard link refused", Tool: files.ToolWrite, Args: `{"path":"/public/hardlink.txt","content":"clobbered"}`, WantError: true, WantText: "hard links"},
	})
}

// searchSchema is files.search's input schema from deploy/catalog/files.yaml,
// compiled as the kernel compiles a registration's schema.
func searchSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "catalog", "files.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var regs []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	if err := yaml.Unmarshal(b, &regs); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	for _, r := range regs {
		if r.Name != files.ToolSearch {
			continue
		}
		if err := c.AddResource("mem://search", r.InputSchema); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("mem://search")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Fatalf("files.yaml has no %s", files.ToolSearch)
	return nil
}

// files.search takes what its catalogue schema admits and refuses what it
// refuses (found by review: the kernel passed a limit of 5.0 and a query of
// 1024 "é", which the provider refused). JSON Schema's integer is any
// number without a fraction, however written, and maxLength counts
// characters, not bytes. The provider checks again, not relying on the
// kernel, so a value the schema refuses is refused here too.
func TestSearchArgumentsAreReadAsTheSchemaReadsThem(t *testing.T) {
	schema := searchSchema(t)
	client := serve(t, fixture(t))
	for _, tc := range []struct {
		name, args string
		// admitted: the schema and the provider take the arguments;
		// stopped: the limit the search then stopped at (0: none).
		admitted bool
		stopped  int
	}{
		{"limit 1", `{"query":"kiwi","path":"/public","limit":1}`, true, 1},
		{"limit 1.0", `{"query":"kiwi","path":"/public","limit":1.0}`, true, 1},
		{"limit 1e0", `{"query":"kiwi","path":"/public","limit":1e0}`, true, 1},
		{"limit 0.1e1", `{"query":"kiwi","path":"/public","limit":0.1e1}`, true, 1},
		{"limit 1e1", `{"query":"kiwi","path":"/public","limit":1e1}`, true, 0},
		{"limit 100.0", `{"query":"kiwi","path":"/public","limit":100.0}`, true, 0},
		{"limit 1.5", `{"query":"kiwi","path":"/public","limit":1.5}`, false, 0},
		{"limit 1.0000000000000000001", `{"query":"kiwi","path":"/public","limit":1.0000000000000000001}`, false, 0},
		{"limit 0", `{"query":"kiwi","path":"/public","limit":0}`, false, 0},
		{"limit 101", `{"query":"kiwi","path":"/public","limit":101}`, false, 0},
		{"limit 1e400", `{"query":"kiwi","path":"/public","limit":1e400}`, false, 0},
		{"limit as a string", `{"query":"kiwi","path":"/public","limit":"5"}`, false, 0},
		{"limit as a boolean", `{"query":"kiwi","path":"/public","limit":true}`, false, 0},
		{"query of 1024 two-byte characters", `{"query":"` + strings.Repeat("é", 1024) + `","path":"/public"}`, true, 0},
		{"query of 1025 characters", `{"query":"` + strings.Repeat("é", 1025) + `","path":"/public"}`, false, 0},
		{"query of 1025 bytes", `{"query":"` + strings.Repeat("k", 1025) + `","path":"/public"}`, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if verr := schema.Validate(doc); (verr == nil) != tc.admitted {
				t.Fatalf("the schema's verdict on %.80s is %v; the test expects admitted=%v", tc.args, verr, tc.admitted)
			}
			resp, err := client.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: files.ToolSearch, ArgumentsJson: []byte(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			got := providertest.Text(resp)
			if resp.GetIsError() == tc.admitted {
				t.Fatalf("provider: is_error %v, %.120q", resp.GetIsError(), got)
			}
			if resp.GetIsError() && !strings.HasPrefix(got, "invalid arguments: ") {
				t.Errorf("refusal %q does not say the arguments are invalid", got)
			}
			if stopped := strings.Contains(got, "(stopped at "); stopped != (tc.stopped > 0) ||
				stopped && !strings.Contains(got, fmt.Sprintf("(stopped at %d matches)", tc.stopped)) {
				t.Errorf("search: %q, want it stopped at %d matches (0: not stopped)", got, tc.stopped)
			}
		})
	}
}

func TestWriteThenReadAndLinksUntouched(t *testing.T) {
	root := fixture(t)
	client := serve(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	handle := func(tool, args string) *sharedosv1.HandleResponse {
		resp, err := client.Handle(ctx, &sharedosv1.HandleRequest{Tool: tool, ArgumentsJson: []byte(args)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	handle(files.ToolWrite, `{"path":"/public/w.txt","content":"written"}`)
	if got := providertest.Text(handle(files.ToolRead, `{"path":"/public/w.txt"}`)); got != "written" {
		t.Fatalf("read back %q", got)
	}
	handle(files.ToolWrite, `{"path":"/public/link-to-private","content":"clobbered"}`)
	b, err := os.ReadFile(filepath.Join(root, "private/a.txt"))
	if err != nil || !bytes.Contains(b, []byte("PRIVATE-A")) {
		t.Fatalf("write through a link reached /private: %q %v", b, err)
	}
	handle(files.ToolWrite, `{"path":"/public/hardlink.txt","content":"clobbered"}`)
	if b, err := os.ReadFile(filepath.Join(root, "private/secret.txt")); err != nil || string(b) != "SECRET kiwi\n" {
		t.Fatalf("write through a hard link changed /private/secret.txt: %q %v", b, err)
	}
}

func TestDemoTree(t *testing.T) {
	root := filepath.Join("..", "..", "..", "deploy", "demo")
	client := serve(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for args, want := range map[string]string{
		`{"path":"/public/a.txt"}`:           "Hello from /public/a.txt",
		`{"path":"/private/a.txt"}`:          "Private:",
		`{"path":"/public/link-to-private"}`: "symbolic link",
	} {
		resp, err := client.Handle(ctx, &sharedosv1.HandleRequest{Tool: files.ToolRead, ArgumentsJson: []byte(args)})
		if err != nil {
			t.Fatal(err)
		}
		if got := providertest.Text(resp); !strings.Contains(got, want) {
			t.Errorf("%s: %q does not contain %q", args, got, want)
		}
	}
}

// TestCatalogueYAML keeps deploy/catalog/files.yaml in step with the
// provider: the same tools, schemas that compile, and a path requirement on
// every tool that reads or writes a path.
func TestCatalogueYAML(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "catalog", "files.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var regs []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
		Annotations map[string]any `json:"annotations"`
		Metadata    struct {
			Namespace string `json:"namespace"`
			Source    string `json:"source"`
		} `json:"metadata"`
		Class       string `json:"class"`
		Requirement struct {
			Action   string `json:"action"`
			Resource string `json:"resource"`
		} `json:"requirement"`
		Handler struct {
			Target  string `json:"target"`
			Timeout string `json:"timeout"`
		} `json:"handler"`
	}
	if err := yaml.UnmarshalStrict(b, &regs); err != nil {
		t.Fatalf("files.yaml: %v", err)
	}
	want := map[string]string{files.ToolRead: "read", files.ToolSearch: "search", files.ToolWrite: "write"}
	if len(regs) != len(want) {
		t.Fatalf("files.yaml has %d tools, want %d", len(regs), len(want))
	}
	for _, r := range regs {
		action, ok := want[r.Name]
		if !ok {
			t.Errorf("unexpected tool %s", r.Name)
			continue
		}
		if r.Requirement.Action != action || r.Requirement.Resource != "file:{path}" {
			t.Errorf("%s: requirement %+v", r.Name, r.Requirement)
		}
		if r.Class != "managed" || r.Metadata.Namespace != "files" || r.Handler.Target == "" || r.Description == "" {
			t.Errorf("%s: incomplete registration %+v", r.Name, r)
		}
		if _, err := time.ParseDuration(r.Handler.Timeout); err != nil {
			t.Errorf("%s: handler.timeout: %v", r.Name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem://"+r.Name, r.InputSchema); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile("mem://" + r.Name); err != nil {
			t.Errorf("%s: inputSchema: %v", r.Name, err)
		}
		req, _ := r.InputSchema["required"].([]any)
		if len(req) == 0 || req[0] != "path" && req[1] != "path" {
			t.Errorf("%s: path must be required (the requirement needs it): %v", r.Name, req)
		}
	}
	if regs[0].Annotations["readOnlyHint"] != true || regs[2].Annotations["destructiveHint"] != true {
		t.Errorf("annotations: read must be readOnlyHint, write destructiveHint")
	}
}

// A file of exactly MaxFileBytes, which files.read returns, is searched too
// (found by review: its one line filled the scanner's buffer before the end
// of the file was seen, and the file was skipped without a word).
func TestSearchReadsAFileOfTheMaximumSize(t *testing.T) {
	root := fixture(t)
	body := "kiwi" + strings.Repeat("x", files.MaxFileBytes-len("kiwi"))
	if err := os.WriteFile(filepath.Join(root, "public", "big.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	client := serve(t, root)
	providertest.Run(t, client, []providertest.Case{
		{Name: "read", Tool: files.ToolRead, Args: `{"path":"/public/big.txt"}`, WantText: "kiwixxx"},
		{Name: "search the file", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public/big.txt"}`, WantText: "/public/big.txt:1: kiwixxx", NotText: "not searched"},
		{Name: "search its directory", Tool: files.ToolSearch, Args: `{"query":"kiwi","path":"/public"}`, WantText: "/public/big.txt:1: kiwixxx"},
	})
}

// A file the search cannot read is named as not searched, as a directory it
// cannot read is, and the rest is searched (found by review: such a file
// was skipped without a word, so "no matches" could stand for a file never
// read). Here one is larger than MaxFileBytes and one is a hard link, which
// the provider refuses to open.
func TestSearchNamesAFileItCouldNotSearch(t *testing.T) {
	root := fixture(t)
	body := "kiwi" + strings.Repeat("x", files.MaxFileBytes)
	if err := os.WriteFile(filepath.Join(root, "public", "huge.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	client := serve(t, root)
	resp, err := client.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: files.ToolSearch, ArgumentsJson: []byte(`{"query":"kiwi","path":"/public"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := providertest.Text(resp)
	_, note, _ := strings.Cut(got, "(not searched, unreadable: ")
	if resp.GetIsError() || !strings.Contains(got, "/public/a.txt:1: public a: kiwi") ||
		!strings.Contains(note, "/public/huge.txt") || !strings.Contains(note, "/public/hardlink.txt") {
		t.Errorf("search: %q, want /public/a.txt's match and /public/huge.txt and /public/hardlink.txt named as not searched", got)
	}
	resp, err = client.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: files.ToolSearch, ArgumentsJson: []byte(`{"query":"kiwi","path":"/public/huge.txt"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := providertest.Text(resp); !strings.Contains(got, "no matches") || !strings.Contains(got, "(not searched, unreadable: /public/huge.txt)") {
		t.Errorf("search of the file itself: %q, want it named as not searched", got)
	}
}

// unreadable is a file system whose directory bad cannot be read (as one
// without permission for this user: the tests may run as root, which
// reads every directory).
type unreadable struct {
	fs.FS
	bad string
}

func (u unreadable) ReadDir(name string) ([]fs.DirEntry, error) {
	if name == u.bad {
		return nil, &fs.PathError{Op: "readdirent", Path: name, Err: fs.ErrPermission}
	}
	return fs.ReadDir(u.FS, name)
}

// A directory below the one searched that cannot be read is skipped and
// named; the rest is searched (found by review: one such directory failed
// the whole search). The directory searched itself failing is the error.
func TestSearchSkipsAnUnreadableDirectory(t *testing.T) {
	root := fixture(t)
	p, err := files.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	files.WalkWith(p, unreadable{FS: os.DirFS(root), bad: "public/sub"})
	search := func(path string) *sharedosv1.HandleResponse {
		t.Helper()
		resp, err := p.Handle(t.Context(), &sharedosv1.HandleRequest{Tool: files.ToolSearch, ArgumentsJson: []byte(`{"query":"kiwi","path":"` + path + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	got := providertest.Text(search("/public"))
	// The note names /public/hardlink.txt too: a file the search refuses.
	_, note, _ := strings.Cut(got, "(not searched, unreadable: ")
	if !strings.Contains(got, "/public/a.txt:1: public a: kiwi") || !strings.Contains(note, "/public/sub") {
		t.Errorf("search with /public/sub unreadable: %q, want /public/a.txt's match and /public/sub named", got)
	}
	if resp := search("/public/sub"); !resp.GetIsError() {
		t.Errorf("search of the unreadable directory itself: %q, want an error", providertest.Text(resp))
	}
}
