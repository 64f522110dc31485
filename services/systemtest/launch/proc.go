package launch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Proc is one process of a stack started from bin/: a service, or
// sharedos-dev itself. Every system test starts, signals, kills and restarts
// processes through it, so process handling is written once.
type Proc struct {
	Name string
	Path string
	Args []string
	// Env is added to the test's environment.
	Env []string
	// Log collects stdout and stderr of every incarnation (a file).
	Log *Output

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts a new incarnation. The process is SIGKILLed if the test
// process dies (Pdeathsig), so a crashed test never leaves one behind.
func (p *Proc) Start(tb testing.TB) {
	tb.Helper()
	if p.Log == nil {
		p.Log = &Output{}
	}
	log, err := p.Log.file(tb.TempDir(), filepath.Base(p.Path))
	if err != nil {
		tb.Fatalf("log of %s: %v", p.Name, err)
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { p.err = cmd.Wait(); close(done) }()
}

// PID is the current incarnation's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when the current incarnation has exited; Err then says how.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit of the current incarnation once Done is closed.
func (p *Proc) Err() error { return p.err }

// Running reports whether the current incarnation is alive.
func (p *Proc) Running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process (only to the pid this test started); for
// SIGSTOP it returns once the process is stopped.
func (p *Proc) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("signal %v to %s: %v", sig, p.Name, err)
	}
	if sig == syscall.SIGSTOP {
		p.waitStopped(tb)
	}
}

// waitStopped waits until every thread of the process is stopped: kill(2)
// returns before a SIGSTOP has taken effect, and a request racing that
// window would still be answered.
func (p *Proc) waitStopped(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p.cmd.Process.Pid))
		stopped := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			// state is the field after the parenthesised command name
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not stopped 10s after SIGSTOP", p.Name)
		}
		time.Sleep(time.Millisecond)
	}
}

// Kill SIGKILLs the process and waits for it to be gone.
func (p *Proc) Kill(tb testing.TB) {
	tb.Helper()
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		tb.Fatalf("%s (pid %d) still alive 10s after SIGKILL", p.Name, p.PID())
	}
}

// Stop is a graceful stop: sig (SIGTERM or SIGINT), then SIGKILL after
// grace. It returns the exit, or an error when the process had to be killed.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) error {
	if !p.Running() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s still running %s after %v: killed", p.Name, grace, sig)
	}
}
