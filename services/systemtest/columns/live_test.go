//go:build column

package columns

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/systemtest/launch"
	"github.com/sharedos/toolshare/services/tools/column/driver"
	"github.com/sharedos/toolshare/services/tools/opsjson"
)

// TestColumnDriverLive runs the driver's Loop (the live column) for each
// vendor with an endpoint against the scripted fake model of the shared
// harness-column tool (../shared/tools/harness-column/fake-model.mjs, run
// from there by node, non-streaming JSON) and the demo turn of the real
// stack. The fake model's default script asks for files.read of
// /public/a.txt, then /private/a.txt, then github.search, which the
// catalogue does not have, under the alias it forges from files_read. Each
// run ends with the model's final answer; the observations are the kernel's
// records: succeeded, denied/permission_denied, denied/tool_unavailable
// (matched on tool and outcome, as a live column matches).
func TestColumnDriverLive(t *testing.T) {
	root := launch.RepoRoot(t)
	fake := filepath.Join(filepath.Dir(root), "shared", "tools", "harness-column", "fake-model.mjs")
	if _, err := os.Stat(fake); err != nil {
		t.Fatalf("the scripted fake model of the live column: %v (it is used from ../shared/tools/harness-column beside the repository)", err)
	}
	base := startFakeModel(t, nodeBinary(t, root), fake)
	s := launch.Start(t, launch.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	turn, err := driver.Open(ctx, s.Demo.MCPURL, s.Demo.Token, driver.Options{})
	if err != nil {
		t.Fatalf("open the demo turn: %v", err)
	}
	defer turn.Close()

	want := []struct{ tool, status, code string }{
		{"files.read", "succeeded", ""},
		{"files.read", "denied", "permission_denied"},
		{"github_search", "denied", "tool_unavailable"},
	}
	var observed []driver.Observation
	for _, v := range []driver.Vendor{driver.Anthropic, driver.OpenAIResponses} {
		loop := &driver.Loop{Turn: turn, MaxSteps: 6, Model: driver.Model{Vendor: v, BaseURL: base, Name: "fake-model"}}
		tr, err := loop.Run(ctx, "Read /public/a.txt, then /private/a.txt, and report what you could read.")
		if err != nil {
			t.Fatalf("%s loop: %v (transcript %+v)", v, err, tr)
		}
		t.Logf("%s: %d steps, final answer: %s", v, tr.Steps, tr.Final)
		if tr.Stop != driver.StopFinal || tr.Steps != 4 || !strings.HasPrefix(tr.Final, "FAKE-FINAL: I saw 3 tool result(s)") {
			t.Errorf("%s: transcript %+v", v, tr)
		}
		if len(tr.Observations) != len(want) {
			t.Fatalf("%s: observations %+v, want %d", v, tr.Observations, len(want))
		}
		for i, w := range want {
			if o := tr.Observations[i]; o.Tool != w.tool || o.Status != w.status || o.Code != w.code || o.VendorCallID == "" {
				t.Errorf("%s: observation %d = %+v, want %+v", v, i, o, w)
			}
		}
		observed = append(observed, tr.Observations...)
	}

	var ops []opsjson.Operation
	ctlJSON(t, s, &ops, "ops", "list", "--turn", s.Demo.TurnID)
	if len(ops) != len(observed) {
		t.Fatalf("%d records for %d calls: %+v", len(ops), len(observed), ops)
	}
	for i, o := range observed {
		r := ops[i]
		if r.Tool != o.Tool || r.Status != o.Status || r.Code != o.Code || r.CallID != o.CallID || o.CallID == "" {
			t.Errorf("record %d %+v, observed %+v", i, r, o)
		}
	}
}

// nodeBinary is the Node that runs the fake model: the pinned Node 22 of
// services/systemtest/npm when `make npm-deps` installed it, else node on
// PATH.
func nodeBinary(t *testing.T, root string) string {
	t.Helper()
	pinned := filepath.Join(root, "services", "systemtest", "npm", "node_modules", ".bin", "node")
	if _, err := os.Stat(pinned); err == nil {
		return pinned
	}
	if p, err := exec.LookPath("node"); err == nil {
		return p
	}
	t.Fatalf("node not found: run `make npm-deps` (Node 22 into services/systemtest/npm) or put Node.js >= 18 on PATH")
	return ""
}

// startFakeModel runs `node fake-model.mjs PORT` (its log on stdout, which
// says when it listens) and returns its base URL; the process is killed in
// the test's cleanup, its log printed when the test failed.
func startFakeModel(t *testing.T, node, script string) string {
	t.Helper()
	addr := launch.FreeAddrs(t, 1)[0]
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, port)
	// The default script, its log on stdout, no dumps.
	cmd.Env = append(os.Environ(), "FAKE_SCRIPT=", "FAKE_LOG=", "FAKE_DUMP_DIR=", "FAKE_PORT=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %s: %v", node, script, err)
	}
	var mu sync.Mutex
	var log strings.Builder
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), `"kind":"listening"`) {
				once.Do(func() { close(ready) })
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("---- fake model log ----\n%s%s", log.String(), stderr.String())
			mu.Unlock()
		}
	})
	select {
	case <-ready:
	case <-done:
		t.Fatalf("the fake model exited before listening: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the fake model did not listen within 30s")
	}
	return "http://" + addr
}
