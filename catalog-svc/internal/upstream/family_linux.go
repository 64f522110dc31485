package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// family keeps what stdio servers leave behind from outliving them. Each
// server starts in a session of its own (ownProcessGroup), which none of
// its descendants can leave for catalog-svc's: they stay in the server's
// session or start sessions of their own. catalog-svc is a child
// subreaper (PR_SET_CHILD_SUBREAPER), so a descendant whose parent exits
// — a setsid child that outlived its server, a daemon's grandchild — is
// re-parented to catalog-svc instead of init, where a teardown finds and
// kills it (killLeft: with its server when it is still known as the
// server's, else once no other server runs), and catalog-svc reaps it
// once it exited (reapAdopted).
//
// Reaping never takes another child's exit status: os/exec waits for its
// own child by its id, and a process adopted here is reaped by its id
// too (waitid(P_PID), never wait(-1)), and only when it is a child of this
// process in a session other than this process's and is not a server
// started here and not yet reaped (live, registered under mu from before
// it is forked until cmd.Wait reaped it). That is every adopted
// descendant of the servers, and nothing else as long as this process
// starts no other child in a session of its own — catalog-svc starts
// none. A child of this process in its own session (started by other
// code, without a session of its own) is never touched: what it leaves is
// adopted but never reaped here.
var family struct {
	once sync.Once
	// adopting: this process is a subreaper.
	adopting bool
	sid      int

	mu   sync.Mutex
	live map[int]bool
	// ending: the servers of live whose session ended (killLeft ran for
	// them): what they leave is killed, nothing of theirs is wanted.
	ending map[int]bool
}

// adopt makes this process a child subreaper and starts reaping what it
// adopts, once. Without it (an error, logged by warn) a process a server
// leaves goes to init, and teardown kills only what it finds of the
// server's tree and session.
func adopt(warn func(error)) {
	family.once.Do(func() {
		family.mu.Lock()
		defer family.mu.Unlock()
		family.live = map[int]bool{}
		family.ending = map[int]bool{}
		family.sid, _ = unix.Getsid(0)
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			warn(fmt.Errorf("what a stdio server leaves running may outlive it: prctl(PR_SET_CHILD_SUBREAPER): %w", err))
			return
		}
		family.adopting = true
		exited := make(chan os.Signal, 1)
		signal.Notify(exited, syscall.SIGCHLD)
		go reapOnExit(exited)
	})
}

// reapGap is the least time between two reapAdopted scans on SIGCHLD: a
// server that keeps leaving short-lived orphans sends a SIGCHLD for each,
// and a scan for each kept catalog-svc busy (a core's worth). The signals
// that arrive meanwhile are taken by the next scan, and a zombie adopted
// here lingers at most that long.
var reapGap = 100 * time.Millisecond

// reapScans counts reapOnExit's scans (tests).
var reapScans atomic.Int64

// reapOnExit reaps what exited each time exited (SIGCHLD) is signalled,
// at most once each reapGap.
func reapOnExit(exited <-chan os.Signal) {
	var last time.Time
	for range exited {
		if wait := time.Until(last.Add(reapGap)); wait > 0 {
			time.Sleep(wait)
			select {
			case <-exited: // arrived meanwhile: this scan takes it
			default:
			}
		}
		last = time.Now()
		reapScans.Add(1)
		reapAdopted()
	}
}

// startTracked starts cmd, a stdio server, registered as live: what
// reapAdopted never reaps.
func startTracked(cmd *exec.Cmd, start func() error, warn func(error)) error {
	adopt(warn)
	family.mu.Lock()
	defer family.mu.Unlock()
	if err := start(); err != nil {
		return err
	}
	family.live[cmd.Process.Pid] = true
	return nil
}

// reapTracked reaps cmd's process, which exited (awaitExit), and forgets
// it: its id may be another's from then on.
func reapTracked(cmd *exec.Cmd) {
	family.mu.Lock()
	defer family.mu.Unlock()
	_ = cmd.Wait()
	delete(family.live, cmd.Process.Pid)
	delete(family.ending, cmd.Process.Pid)
}

// proc is what /proc/<pid>/stat says of a process.
type proc struct {
	ppid, sid int
	zombie    bool
	start     uint64 // since boot: with the id, names the process
}

// killLeft kills what server (a stdio server's process, live or exited
// but not reaped) leaves running outside its process group: its
// descendants and the members of its session — and, when no other
// server is running, every process adopted here that no live server's
// session holds. Such an orphan (a descendant that left its server's
// session and lost its parent: a daemon forked the usual way, setsid and
// the parent exits) names no server any more; while another server runs
// it may be that one's helper (an ssh-agent, a credential cache), so it
// is left running (and reaped when it exits) until a teardown finds every
// server alive ending (killLeft ran for each): this one, the last, or all
// of them as the manager closes. Each is killed by a pidfd opened while
// it was still the process found (its id and start time), never an id
// that came free and was taken again. Its rounds end when none is left
// running (a process forking as it is killed is found in the next).
func killLeft(server int) {
	self := os.Getpid()
	family.mu.Lock()
	if family.ending != nil {
		family.ending[server] = true
	}
	family.mu.Unlock()
	for range 16 {
		procs := scan()
		family.mu.Lock()
		live := maps.Clone(family.live) // servers, and so their sessions
		orphans := family.adopting && allEnding()
		sid := family.sid
		family.mu.Unlock()
		children := map[int][]int{}
		var roots []int
		for pid, p := range procs {
			children[p.ppid] = append(children[p.ppid], pid)
			switch {
			case pid == server:
			case p.sid == server:
				roots = append(roots, pid)
			case p.ppid == self && orphans && p.sid != sid && !live[pid] && !live[p.sid]:
				roots = append(roots, pid) // adopted, in no live server's session, no other server running
			}
		}
		roots = append(roots, children[server]...)
		seen := map[int]bool{}
		var kill []int
		for len(roots) > 0 {
			pid := roots[len(roots)-1]
			roots = roots[:len(roots)-1]
			if seen[pid] || pid == self || pid == server {
				continue
			}
			seen[pid] = true
			if p, ok := procs[pid]; ok && !p.zombie {
				kill = append(kill, pid)
			}
			roots = append(roots, children[pid]...)
		}
		if len(kill) == 0 {
			break
		}
		for _, pid := range kill {
			if killing != nil {
				killing(pid)
			}
			signalFound(pid, procs[pid].start)
		}
	}
	reapAdopted()
}

// killing, when set (tests), is told each process killLeft kills, as it
// kills it.
var killing func(pid int)

// allEnding reports whether every server started here and not yet
// reaped ended its session (killLeft ran for it). family.mu is held.
func allEnding() bool {
	for pid := range family.live {
		if !family.ending[pid] {
			return false
		}
	}
	return true
}

// signalFound kills pid if it is still the process that started at start.
func signalFound(pid int, start uint64) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) { // before Linux 5.3: by id, after checking it once more
			if p, ok := stat(pid); ok && p.start == start {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		return // gone
	}
	defer func() { _ = unix.Close(fd) }()
	if p, ok := stat(pid); ok && p.start == start {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}

// reapAdopted reaps every process adopted here that exited (see family):
// by its id, and only one that no other code of this process waits for.
// It looks among this process's children only (children), without mu: a
// server's start waits on mu for what it takes to check and reap the
// exited, not for a look at every process.
func reapAdopted() {
	family.mu.Lock()
	adopting, sid := family.adopting, family.sid
	family.mu.Unlock()
	if !adopting {
		return
	}
	self := os.Getpid()
	var exited []int
	for _, pid := range children() {
		if p, ok := stat(pid); ok && p.ppid == self && p.zombie && p.sid != sid {
			exited = append(exited, pid)
		}
	}
	if len(exited) == 0 {
		return
	}
	family.mu.Lock()
	defer family.mu.Unlock()
	for _, pid := range exited {
		// Again under mu: the id may have been reaped and taken since
		// (by a server started meanwhile, which live now names).
		if p, ok := stat(pid); !ok || p.ppid != self || !p.zombie || p.sid == sid || family.live[pid] {
			continue
		}
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
	}
}

// childrenListed: /proc lists each thread's children (Linux 3.5 and
// later, CONFIG_PROC_CHILDREN).
var childrenListed = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
	return err == nil
})

// children lists this process's children: those of each of its threads
// (/proc/self/task/<tid>/children; an adopted process is the child of a
// thread too), or, where /proc lists no children, those a scan of every
// process finds.
func children() []int {
	if !childrenListed() {
		return ownOf(scan())
	}
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return ownOf(scan())
	}
	tids, _ := d.Readdirnames(-1)
	_ = d.Close()
	var pids []int
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + tid + "/children")
		if err != nil {
			continue // the thread exited
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// ownOf lists the children of this process among procs.
func ownOf(procs map[int]proc) []int {
	self := os.Getpid()
	var pids []int
	for pid, p := range procs {
		if p.ppid == self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// scan reads every process's stat.
func scan() map[int]proc {
	procs := map[int]proc{}
	d, err := os.Open("/proc")
	if err != nil {
		return procs
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, ok := stat(pid); ok {
			procs[pid] = p
		}
	}
	return procs
}

// stat reads /proc/<pid>/stat: fields after the command's closing
// parenthesis (the command may hold any byte).
func stat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	sid, err2 := strconv.Atoi(string(f[3]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return proc{}, false
	}
	return proc{ppid: ppid, sid: sid, zombie: f[0][0] == 'Z' || f[0][0] == 'X', start: start}, true
}
