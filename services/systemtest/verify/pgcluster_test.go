//go:build verify

package verify

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is a private PostgreSQL cluster in a temporary directory, on a free
// loopback port with trust auth. Tests may stop it (even -m immediate): it is
// never the shared server on 5432.
type cluster struct {
	bin, dir, data string
	port           int
	started        bool                // once: a restart must keep the port
	cred           *syscall.Credential // the postgres user when we run as root
}

// pgBinDir finds /usr/lib/postgresql/<v>/bin (newest version).
func pgBinDir(t testing.TB) string {
	t.Helper()
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p)
		}
		t.Fatal("initdb not found (/usr/lib/postgresql/*/bin): install PostgreSQL server binaries (apt-get install postgresql)")
	}
	return filepath.Dir(m[len(m)-1])
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newCluster runs initdb and starts the cluster; t.Cleanup stops it and
// removes its directory.
func newCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{bin: pgBinDir(t), port: freePort(t)}
	dir, err := os.MkdirTemp("", "verify-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.data = dir, filepath.Join(dir, "data")
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user for initdb: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	})
	if err := c.run("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	c.Start(t)
	return c
}

func (c *cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts (or restarts) the server and waits until it accepts
// connections. On the first start a port taken in the meantime (parallel
// fuzz workers) is replaced, up to 3 tries; a restart keeps its port.
func (c *cluster) Start(t testing.TB) {
	t.Helper()
	for try := 1; ; try++ {
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300", c.port, c.data)
		err := c.run("pg_ctl", "-D", c.data, "-o", opts, "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "30", "start")
		if err == nil {
			c.started = true
			return
		}
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		if try < 3 && !c.started && strings.Contains(string(log), "could not bind") {
			c.port = freePort(t)
			continue
		}
		t.Fatalf("pg_ctl start: %v\n%s", err, log)
	}
}

// StopImmediate is `pg_ctl stop -m immediate`: no shutdown checkpoint, every
// backend killed.
func (c *cluster) StopImmediate(t testing.TB) {
	t.Helper()
	if err := c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("pg_ctl stop: %v", err)
	}
}

// DSN names database db on the cluster.
func (c *cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// NewDatabase creates a fresh database and returns its DSN.
func (c *cluster) NewDatabase(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect to the private cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return c.DSN(name)
}

// Signal sends sig to every process of the cluster: the postmaster (its pid
// is the first line of postmaster.pid) and each of its children, so SIGSTOP
// hangs the whole server — open connections included — as a frozen VM or
// a stalled disk would, without closing a socket.
func (c *cluster) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("postmaster.pid: %q", line)
	}
	pids := []int{pm}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		st := string(b)
		fields := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pm) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			t.Fatalf("kill %d %s: %v", pid, sig, err)
		}
	}
}
