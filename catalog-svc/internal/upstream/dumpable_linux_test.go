package upstream_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// kernelSecretEnv is the variable the kernel's re-run starts with: in its
// /proc/<pid>/environ, which holds the environment it was started with.
const kernelSecretEnv = "UPSTREAM_TEST_KERNEL_SECRET"

// A stdio server is catalog-svc's child, of its user: once the kernel
// called ProtectFromChildren the server can read neither its parent's
// environment nor its memory in /proc, while the kernel still lists its
// own descriptors and reads its own stat (the process metrics). Root reads
// any process's, so as root the kernel here is a re-run of this test as
// user nobody; otherwise a re-run as this user (the call is process-wide).
func TestAStdioServerCannotReadTheKernel(t *testing.T) {
	if secret := os.Getenv(kernelSecretEnv); secret != "" {
		kernelReadByItsServer(t, secret)
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	rerunUnprivileged(t, "TestAStdioServerCannotReadTheKernel", kernelSecretEnv+"="+hex.EncodeToString(b[:]))
}

// rerunUnprivileged runs the test name again, in a process of its own
// with env added: as user nobody when this is root (whom DAC does not
// stop), else as this user; it fails when the re-run does not pass.
func rerunUnprivileged(t *testing.T, name string, env ...string) {
	t.Helper()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	// The test binary where nobody may run it (go test's build directory
	// is root's alone): a directory of this test's own.
	dir := t.TempDir()
	bin := filepath.Join(dir, "upstream.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir's own two
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("the re-run of %s: %v\n%s", name, err, out)
	}
}

// kernelReadByItsServer is the kernel's side: it protects itself, starts
// the fixture as a stdio upstream and asks it what it read of the kernel.
func kernelReadByItsServer(t *testing.T, secret string) {
	if os.Geteuid() == 0 {
		t.Fatal("the kernel's re-run runs as root, which reads any process's /proc files")
	}
	if err := upstream.ProtectFromChildren(); err != nil {
		t.Fatal(err)
	}
	h, _ := stdioUpstream(t, 0)
	resp, err := h.call("sx", "sx.parent", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var content []struct{ Text string }
	var r parentRead
	if err := json.Unmarshal(resp.GetContentJson(), &content); err != nil || len(content) != 1 || json.Unmarshal([]byte(content[0].Text), &r) != nil {
		t.Fatalf("parent answered %s: %v", resp.GetContentJson(), err)
	}
	if !r.EnvironDenied || strings.Contains(r.Environ, secret) {
		t.Errorf("the stdio server read its parent's environment (%d bytes, secret in it: %v; error %q), want permission denied",
			len(r.Environ), strings.Contains(r.Environ, secret), r.EnvironErr)
	}
	if !r.MemDenied {
		t.Errorf("the stdio server opened its parent's memory (error %q), want permission denied", r.MemErr)
	}
	// What the kernel reads of itself: the process collector's open file
	// descriptors and stat.
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Errorf("the kernel lists its own descriptors: %v", err)
	}
	if _, err := os.ReadFile("/proc/self/stat"); err != nil {
		t.Errorf("the kernel reads its own stat: %v", err)
	}
}
