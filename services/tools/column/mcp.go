package column

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// ServerName is the name the harness knows the turn's MCP server by (its
// tools are then mcp__sharedos__files_read in Claude Code, and so on).
const ServerName = "sharedos"

// MCP runs the mcp column: the installed CLI, its own loop and MCP client,
// against the turn. The harness's own MCP configuration, pointing at the
// turn with its bearer token, is written into a private home (HOME and the
// CLI's config directory); the host's files, env and args are passed
// through unchanged; the CLI runs with the prompt until it exits or the
// command's deadline (--timeout) passes. The turn is closed the moment the
// CLI exits or times out: a CLI that outlives its turn meets a closed door.
//
// The CLI reaches the turn through a loopback pass-through that keeps what
// each tools/call asked for and the record its answer names, so declared
// attempts are graded on tool and resource like a live column's.
func (r *Run) MCP(ctx context.Context) (*Report, error) {
	if strings.TrimSpace(r.Manifest.Prompt) == "" {
		return nil, errors.New("prompt: an mcp column needs the prompt its harness is given")
	}
	home, err := os.MkdirTemp("", "sharedos-column-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(home) }()
	lease, h, err := r.turn(ctx)
	if err != nil {
		return nil, err
	}
	closeTurn := r.closer(ctx, lease.GetTurnId())
	rec, err := newRecorder(lease.GetMcpUrl())
	if err != nil {
		return r.finish(ctx, lease, h, closeTurn, nil, nil, err)
	}
	notes, err := r.runCLI(ctx, home, rec.url, lease.GetToken(), closeTurn)
	// Shutdown waits for the pass-through's requests in flight: every
	// answer the CLI got has been kept.
	rec.close()
	return r.finish(ctx, lease, h, closeTurn, rec.calls(), append(notes, rec.notes()...), err)
}

// runCLI starts the harness and waits for it, or for ctx: then it closes
// the turn first and stops the CLI's process group.
func (r *Run) runCLI(ctx context.Context, home, mcpURL, token string, closeTurn func() error) ([]string, error) {
	argv, env, err := r.invocation(home, mcpURL, token)
	if err != nil {
		return nil, err
	}
	work := filepath.Join(home, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = work, env
	cmd.Stdin = nil
	out := &lastBytes{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A descendant that keeps the output pipe open does not hold Wait.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", r.Harness, err)
	}
	// Whatever ends the run, nothing the CLI started outlives it.
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var notes []string
	select {
	case err := <-done:
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s exited: %v; its last output: %s", r.Harness, err, out.tail(600)))
		}
	case <-ctx.Done():
		_ = closeTurn() // first: a CLI that outlives its turn meets a closed door
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := <-done
		notes = append(notes, fmt.Sprintf("%s did not finish before the deadline (--timeout or an interrupt): its turn was closed, then it was stopped (%v); its last output: %s",
			r.Harness, err, out.tail(600)))
	}
	return notes, nil
}

// lastBytes keeps the last max bytes written to it (a CLI's output).
type lastBytes struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > l.max {
		l.b = append(l.b[:0], l.b[len(l.b)-l.max:]...)
	}
	return len(p), nil
}

func (l *lastBytes) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return tail(string(l.b), n)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// invocation writes the harness's MCP configuration and the host's files
// into home and returns its command line and environment: the host's
// executable, then what SharedOS needs the harness to do (the prompt, the
// configuration, unattended tool use) around the host's args, and the
// host's env over a minimal one whose HOME is the private home.
func (r *Run) invocation(home, mcpURL, token string) ([]string, []string, error) {
	if err := r.checkHostServers(); err != nil {
		return nil, nil, err
	}
	for rel, content := range r.Host.Files {
		if err := writeHomeFile(home, rel, content); err != nil {
			return nil, nil, err
		}
	}
	prompt := r.Manifest.Prompt
	bearer := "Bearer " + token
	env := map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}
	var pre, post []string
	switch r.Harness {
	case "claude-code":
		cfg := filepath.Join(home, "work", ".mcp.json")
		if err := mergeJSON(cfg, map[string]any{"mcpServers": map[string]any{ServerName: map[string]any{
			"type": "http", "url": mcpURL, "headers": map[string]string{"Authorization": bearer}}}}); err != nil {
			return nil, nil, err
		}
		post = []string{"-p", prompt, "--mcp-config", cfg, "--strict-mcp-config", "--allowedTools", "mcp__" + ServerName}
	case "codex":
		dir := filepath.Join(home, ".codex")
		env["CODEX_HOME"] = dir
		if err := appendFile(filepath.Join(dir, "config.toml"), codexServer(mcpURL, bearer)); err != nil {
			return nil, nil, err
		}
		pre = []string{"exec"}
		post = []string{"--skip-git-repo-check", prompt}
	case "gemini-cli":
		if err := mergeJSON(filepath.Join(home, ".gemini", "settings.json"), map[string]any{"mcpServers": map[string]any{ServerName: map[string]any{
			"httpUrl": mcpURL, "headers": map[string]string{"Authorization": bearer}, "trust": true}}}); err != nil {
			return nil, nil, err
		}
		post = []string{"-p", prompt, "--approval-mode", "yolo"}
	case "pi":
		dir := filepath.Join(home, ".pi", "agent")
		env["PI_CODING_AGENT_DIR"] = dir
		if err := mergeJSON(filepath.Join(dir, "mcp.json"), map[string]any{"mcpServers": map[string]any{ServerName: map[string]any{
			"url": mcpURL, "headers": map[string]string{"Authorization": bearer}, "directTools": true, "lifecycle": "eager"}}}); err != nil {
			return nil, nil, err
		}
		post = []string{"-e", r.Host.ExtensionPath, "-p", prompt}
	default:
		return nil, nil, fmt.Errorf("--harness for an mcp column must be one of %s, not %q", strings.Join(Harnesses[KindMCP], ", "), r.Harness)
	}
	maps.Copy(env, r.Host.Env)
	argv := append(append(append([]string{r.Host.Executable}, pre...), r.Host.Args...), post...)
	keys := slices.Sorted(maps.Keys(env))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return argv, out, nil
}

// codexSection is a Codex config.toml section naming an MCP server.
var codexSection = regexp.MustCompile(`(?m)^\s*\[mcp_servers\.("?)([^\]"]+)("?)\]`)

// checkHostServers refuses host files that declare MCP servers of their
// own where the run's record would not say so: the server name SharedOS
// writes is its own, and a strict ToolPolicy names no external_direct
// tools, so a harness given another server would run a column its record
// misdeclares. A permissive run may carry them (its policy says so).
func (r *Run) checkHostServers() error {
	strict := r.Manifest.Policy.GetMode() == sharedosv1.PolicyMode_POLICY_MODE_STRICT
	for _, rel := range slices.Sorted(maps.Keys(r.Host.Files)) {
		var names []string
		var doc struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		if json.Unmarshal([]byte(r.Host.Files[rel]), &doc) == nil {
			names = slices.Sorted(maps.Keys(doc.MCPServers))
		}
		for _, m := range codexSection.FindAllStringSubmatch(r.Host.Files[rel], -1) {
			names = append(names, m[2])
		}
		for _, n := range names {
			switch {
			case n == ServerName:
				return fmt.Errorf("mcp.%s.files.%s: the MCP server %q is the one SharedOS writes (the turn)", r.Harness, rel, n)
			case strict:
				return fmt.Errorf("mcp.%s.files.%s: declares the MCP server %q, but the manifest's ToolPolicy is strict (no external_direct tools)", r.Harness, rel, n)
			}
		}
	}
	return nil
}

// codexServer is Codex's config.toml section for the turn's server.
func codexServer(mcpURL, bearer string) string {
	return fmt.Sprintf("\n[mcp_servers.%s]\nurl = %s\nhttp_headers = { Authorization = %s }\n"+
		"# Unattended: the kernel, not an approval prompt, decides each call.\ndefault_tools_approval_mode = \"approve\"\n",
		ServerName, strconv.Quote(mcpURL), strconv.Quote(bearer))
}

// writeHomeFile writes a host file under home; its path must stay there.
func writeHomeFile(home, rel, content string) error {
	if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
		return fmt.Errorf("files: %q must be a relative path inside the harness's home", rel)
	}
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o600)
}

func appendFile(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mergeJSON adds add's keys (one level deep into objects) to the JSON
// object in path, which may not exist yet.
func mergeJSON(path string, add map[string]any) error {
	cur := map[string]any{}
	switch b, err := os.ReadFile(path); {
	case err == nil:
		if err := json.Unmarshal(b, &cur); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	for k, v := range add {
		old, ok1 := cur[k].(map[string]any)
		nv, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			maps.Copy(old, nv)
			continue
		}
		cur[k] = v
	}
	b, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// recorder is the loopback pass-through between the CLI and the turn: it
// forwards every request unchanged and keeps, for each tools/call, the
// name and arguments asked for and the record its answer names.
type recorder struct {
	url string
	srv *http.Server
	ln  net.Listener

	mu   sync.Mutex
	seen []Match
	odd  []string
}

func newRecorder(turnURL string) (*recorder, error) {
	target, err := url.Parse(turnURL)
	if err != nil {
		return nil, fmt.Errorf("the turn's URL: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recorder{ln: ln, url: "http://" + ln.Addr().String() + target.Path}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = target.Scheme, target.Host, target.Host
		},
		ModifyResponse: r.answered,
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			// Read whole before forwarding (the Transport's late body read
			// after an answer began cuts it short: golang/go#40747).
			body, err := io.ReadAll(req.Body)
			if err != nil {
				http.Error(w, "request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			req = req.WithContext(context.WithValue(req.Context(), requestBodyKey{}, body))
		}
		proxy.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

type requestBodyKey struct{}

// answered keeps a tools/call with the record its answer names. The
// answer passes through as it comes (progress and input requests of an
// event stream reach the CLI at once); a copy is read when the proxy has
// passed it all on and closes it.
func (r *recorder) answered(resp *http.Response) error {
	body, _ := resp.Request.Context().Value(requestBodyKey{}).([]byte)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil || req.Method != "tools/call" {
		return nil
	}
	resp.Body = &teeAnswer{ReadCloser: resp.Body, done: func(answer []byte) {
		m := Match{Tool: req.Params.Name, Arguments: req.Params.Arguments, CallID: recordOf(answer, req.ID)}
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.CallID == "" {
			r.odd = append(r.odd, fmt.Sprintf("a tools/call of %q got an answer naming no record (HTTP %d)", m.Tool, resp.StatusCode))
		}
		r.seen = append(r.seen, m)
	}}
	return nil
}

// maxAnswer bounds the copy of one answer the recorder reads.
const maxAnswer = 4 << 20

// teeAnswer passes an answer through and hands a copy to done when it is
// closed.
type teeAnswer struct {
	io.ReadCloser
	copy []byte
	once sync.Once
	done func([]byte)
}

func (t *teeAnswer) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if len(t.copy)+n <= maxAnswer {
		t.copy = append(t.copy, p[:n]...)
	}
	return n, err
}

func (t *teeAnswer) Close() error {
	t.once.Do(func() { t.done(t.copy) })
	return t.ReadCloser.Close()
}

// recordOf is the callId of _meta["io.sharedos/outcome"] in the JSON-RPC
// answer to id, in a JSON body or any event of an event stream.
func recordOf(answer, id json.RawMessage) string {
	msgs := [][]byte{answer}
	if !bytes.HasPrefix(bytes.TrimSpace(answer), []byte("{")) {
		msgs = nil
		for _, line := range bytes.Split(answer, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
				msgs = append(msgs, bytes.TrimSpace(d))
			}
		}
	}
	for _, b := range msgs {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"result"`
		}
		if json.Unmarshal(b, &msg) != nil || !bytes.Equal(bytes.TrimSpace(msg.ID), bytes.TrimSpace(id)) {
			continue
		}
		var o struct {
			CallID string `json:"callId"`
		}
		if json.Unmarshal(msg.Result.Meta[outcome.MetaKey], &o) == nil {
			return o.CallID
		}
	}
	return ""
}

func (r *recorder) calls() []Match {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func (r *recorder) notes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.odd)
}

func (r *recorder) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.srv.Shutdown(ctx) != nil {
		_ = r.srv.Close()
	}
}
