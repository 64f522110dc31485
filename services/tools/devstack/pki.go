package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"
)

// PKIDir is where `make run` keeps its throwaway CA's files, under the
// repository root (gitignored); sharedosctl finds its operator identity there.
const PKIDir = ".sharedos/dev/pki"

// Identity is one certificate of the local PKI: <File>.crt and <File>.key,
// for spiffe://sharedos.local/<Role>/<Name>.
type Identity struct {
	File string
	Role callers.Role
	Name string
}

// Identities are the certificates MakePKI issues, one per process role of
// the local stack.
var Identities = []Identity{
	{"operator", callers.Operator, "dev"},
	{"host", callers.Host, "dev"},
	{"bridge", callers.Bridge, "dev"},
	{"catalog", callers.Catalog, "dev"},
	{"authz", callers.Authz, "dev"},
	{"files", callers.Provider, "files"},
}

// GrantKeyFile is the kernel's turn-grant signing key MakePKI writes;
// StateKeyFile is the bridge's requestState key.
const (
	GrantKeyFile = "grant.key"
	StateKeyFile = "state.key"
)

// serviceIdentity is the certificate file each service of the stack runs with.
var serviceIdentity = map[string]string{
	"authz-svc": "authz", "files-provider": "files", "catalog-svc": "catalog", "bridge-svc": "bridge",
}

// MakePKI creates a throwaway CA (valid 30 days; its key never leaves
// memory) and writes ca.crt, every Identity and the kernel's grant signing
// key (GrantKeyFile) and the bridge's requestState key (StateKeyFile) into
// dir.
func MakePKI(dir string) (*pki.CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// A directory of this user's left from before, or made by hand, is
	// tightened (checked first: Chmod would follow a link, and a directory
	// of another user's is refused below, not changed).
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && ownedByMe(fi) && fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := CheckPrivateDir(dir); err != nil {
		return nil, err
	}
	ca, err := pki.New(pki.TrustDomain, 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := ca.WriteBundle(filepath.Join(dir, "ca.crt")); err != nil {
		return nil, err
	}
	for _, id := range Identities {
		if _, _, err := ca.IssueFiles(dir, id.File, pki.Leaf{Role: string(id.Role), Name: id.Name}); err != nil {
			return nil, fmt.Errorf("issue %s: %w", id.File, err)
		}
	}
	if err := pki.WriteSigningKey(filepath.Join(dir, GrantKeyFile)); err != nil {
		return nil, fmt.Errorf("grant key: %w", err)
	}
	if err := pki.WriteSigningKey(filepath.Join(dir, StateKeyFile)); err != nil {
		return nil, fmt.Errorf("state key: %w", err)
	}
	return ca, nil
}

// CheckPrivateDir refuses a directory another user could change, or swap:
// dir and the directory holding it (where a lookup of dir leads) must be
// this user's and not writable by group or others; every other directory
// a lookup of dir passes through — those of the targets of the links on
// the way too — must be this user's or root's, and writable by others only
// if sticky (as /tmp), and every link on the way this user's or root's.
// The local CA's directory holds the trust bundle every service re-reads
// and the operator's key: whoever can swap them is trusted, or is the
// server sharedosctl's operator commands go to.
func CheckPrivateDir(dir string) error {
	if !filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		dir = wd + "/" + dir // not filepath.Join: it cleans ".." by text
	}
	links := 0
	real, err := checkLookups("/", dir, &links)
	if err != nil {
		return err
	}
	for _, d := range []string{real, filepath.Dir(real)} {
		if err := checkOwnDir(d); err != nil {
			return err
		}
	}
	return nil
}

// maxLinks bounds the links checkLookups follows (as the kernel's 40).
const maxLinks = 40

// checkLookups resolves path from the directory cur (no link) as the
// kernel does, one name at a time — ".." is the parent of where the names
// before it led, not a word the text drops — checking each directory a
// name is looked up in (checkSwappable) and each link followed, and
// returns where it leads.
func checkLookups(cur, path string, links *int) (string, error) {
	if filepath.IsAbs(path) {
		cur = "/"
	}
	for _, name := range strings.Split(path, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		if err := checkSwappable(cur); err != nil {
			return "", err
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if *links++; *links > maxLinks {
			return "", fmt.Errorf("%s: more than %d symbolic links", path, maxLinks)
		}
		if uid, ok := ownedByMeOrRoot(fi); !ok {
			return "", fmt.Errorf("%s is a symbolic link of another user (uid %d): whoever owns it can point it elsewhere", next, uid)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if cur, err = checkLookups(cur, target, links); err != nil {
			return "", err
		}
	}
	return cur, nil
}

// checkSwappable refuses a directory d (no link) whose entries another
// user could swap: one not this user's or root's, or writable by others
// and not sticky.
func checkSwappable(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	if uid, ok := ownedByMeOrRoot(fi); !ok {
		return fmt.Errorf("%s belongs to another user (uid %d): whoever owns it can swap the directories below", d, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("%s is writable by others (%v): whoever can write it can swap the directories below", d, fi.Mode().Perm())
	}
	return nil
}

func checkOwnDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !ownedByMe(fi):
		return fmt.Errorf("%s belongs to another user than you (uid %d)", dir, os.Getuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (%v)", dir, fi.Mode().Perm())
	}
	return nil
}

func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}

// ownedByMeOrRoot reports whether fi is this user's or root's, and whose
// it is.
func ownedByMeOrRoot(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, true
	}
	return st.Uid, int(st.Uid) == os.Getuid() || st.Uid == 0
}

// TLSFiles is the mtls.Config of identity file in dir.
func TLSFiles(dir, file string) mtls.Config {
	return mtls.Config{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, file+".crt"), Key: filepath.Join(dir, file+".key")}
}

// TLSFlags are the command-line flags that give a process identity file.
func TLSFlags(dir, file string) []string {
	c := TLSFiles(dir, file)
	return []string{"--tls-ca", c.CA, "--tls-cert", c.Cert, "--tls-key", c.Key}
}

// operatorCredentials are what sharedos-dev itself calls the stack with.
func operatorCredentials(ctx context.Context, cfg Config) (*mtls.Credentials, error) {
	if cfg.Plaintext {
		return mtls.Plaintext(), nil
	}
	return mtls.Load(ctx, TLSFiles(cfg.PKIDir, "operator"))
}
