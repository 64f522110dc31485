//go:build linux

package upstream

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startConfined starts cmd unable to open anything under the paths of
// private (Landlock, ABI 1 and later): catalog-svc's keys, journal and
// secret references, which a stdio server — third-party code running as
// catalog-svc's own user — could otherwise read. The rest of the
// filesystem stays as open to it as to catalog-svc, but for the parents of
// those paths: what is in them may be read and listed, nothing added to or
// taken from them. So a private path is left open when it lies in a place
// the server writes in — its home or working directory (cmd.Env's HOME,
// cmd.Dir or this process's) — and warn says which. The restriction is
// made on an OS thread of its own, which cmd is started from and inherits
// it; that thread is never handed back to the runtime (a goroutine that
// ends locked ends its thread), so the rest of the process is untouched.
// Without Landlock in the kernel cmd starts unconfined and warn says so.
func startConfined(cmd *exec.Cmd, private []string, warn func(error)) error {
	private = keepable(private, writablePlaces(cmd), warn)
	if len(private) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		switch err := confineThread(private); {
		case errors.Is(err, errNoLandlock):
			warn(err)
		case err != nil:
			errc <- fmt.Errorf("confine the stdio server: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// writablePlaces are where the server of cmd writes: its home and working
// directories, resolved ("/" is none: no server expects to write there).
func writablePlaces(cmd *exec.Cmd) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if r := resolve(p); r != "/" {
			out = append(out, r)
		}
	}
	home := ""
	for _, kv := range cmd.Env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = h
		}
	}
	if home == "" { // as the server finds it then: the user's entry
		if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	}
	add(home)
	if cmd.Dir != "" {
		add(cmd.Dir)
	} else if wd, err := os.Getwd(); err == nil {
		add(wd)
	}
	return out
}

// keepable are the private paths a server can be kept from: each resolved,
// and neither "/" nor in a place it writes in (warned about).
func keepable(private, writable []string, warn func(error)) []string {
	var out []string
	for _, p := range private {
		r := resolve(p)
		switch {
		case r == "/":
			warn(fmt.Errorf("stdio servers are not kept from %s: it is the whole filesystem", p))
			continue
		case slices.ContainsFunc(writable, func(w string) bool { return within(r, w) }):
			warn(fmt.Errorf("stdio servers are not kept from %s: it lies in their home or working directory", p))
			continue
		}
		out = append(out, r)
	}
	return out
}

// within reports whether p is dir or beneath it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// resolve is p made absolute with its links resolved — of its deepest
// existing ancestor when p itself does not exist (yet): a journal
// directory created later under a linked parent is found where it will be.
func resolve(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == "/" {
			return abs
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// errNoLandlock: the kernel offers no Landlock (too old, or not enabled).
var errNoLandlock = errors.New("this kernel offers no Landlock")

// fileRights are the rights a rule on a file (not a directory) may carry.
const fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
	unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV | unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX

// confineThread restricts the calling thread (and what it starts) to every
// path but those under private.
func confineThread(private []string) error {
	abi, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 || int(abi) < 1 {
		return errNoLandlock
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handledFS(int(abi))}
	size := unsafe.Offsetof(attr.Scoped) // ABI 4 and 5: Handled_access_net (left 0) is known too
	if abi < 4 {
		size = unsafe.Offsetof(attr.Handled_access_net)
	}
	if abi >= 6 {
		// Nor may it signal catalog-svc, or reach its abstract sockets.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Offsetof(attr.Quiet_access_fs)
	}
	deny, split := privatePaths(private)
	r, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	fd := int(r)
	defer func() { _ = unix.Close(fd) }()
	if err := allowAllBut(fd, attr.Handled_access_fs, "/", deny, split); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// handledFS is every filesystem right Landlock ABI abi knows.
func handledFS(abi int) uint64 {
	switch {
	case abi >= 9:
		return 1<<17 - 1
	case abi >= 5:
		return 1<<16 - 1
	case abi >= 3:
		return 1<<15 - 1
	case abi == 2:
		return 1<<14 - 1
	}
	return 1<<13 - 1
}

// privatePaths are the paths to deny (resolved: keepable) and their
// ancestors, which are split: each entry of theirs is allowed on its own
// but the denied one.
func privatePaths(private []string) (deny, split map[string]bool) {
	deny, split = map[string]bool{}, map[string]bool{}
	for _, p := range private {
		deny[p] = true
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			split[d] = true
			if d == "/" {
				break
			}
		}
	}
	return deny, split
}

// allowAllBut adds rules allowing everything beneath dir but its denied
// paths: every entry of dir that is neither denied nor split is allowed
// whole, and each split one is divided in turn. A split directory itself
// may be listed (its names are not secret), nothing more: what is created
// in it later is closed to the server. A symbolic link gets no rule (what
// it leads to is reached by its own path's rules).
func allowAllBut(fd int, handled uint64, dir string, deny, split map[string]bool) error {
	if err := addRule(fd, dir, handled&unix.LANDLOCK_ACCESS_FS_READ_DIR); vanished(err) {
		return nil // not there (yet): nothing beneath it to open
	} else if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, unix.EACCES) {
		// A parent catalog-svc may pass through but not list: its other
		// entries stay closed to the server; the path on to the split
		// one is still opened below.
		entries = nil
		for p := range split {
			if filepath.Dir(p) == dir {
				entries = append(entries, splitEntry(filepath.Base(p)))
			}
		}
	} else if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case deny[p], e.Type()&os.ModeSymlink != 0:
		case split[p]:
			if err := allowAllBut(fd, handled, p, deny, split); err != nil {
				return err
			}
		case e.IsDir():
			if err := addRule(fd, p, handled); err != nil && !vanished(err) {
				return err
			}
		default:
			if err := addRule(fd, p, handled&fileRights); err != nil && !vanished(err) {
				return err
			}
		}
	}
	return nil
}

// vanished: the entry is not there (went between the listing and the
// rule, or was never made), or cannot be opened by catalog-svc either; it
// stays closed to the server.
func vanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ELOOP)
}

func addRule(fd int, path string, access uint64) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer func() { _ = unix.Close(pfd) }()
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	// The kernel reads the packed C struct: Allowed_access, then Parent_fd.
	if _, _, errno := syscall.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock rule for %s: %w", path, errno)
	}
	return nil
}

// splitEntry is a directory entry of a split directory that could not be
// listed: a directory on the way to a private path.
type splitEntry string

func (e splitEntry) Name() string             { return string(e) }
func (splitEntry) IsDir() bool                { return true }
func (splitEntry) Type() os.FileMode          { return os.ModeDir }
func (splitEntry) Info() (os.FileInfo, error) { return nil, os.ErrInvalid }
