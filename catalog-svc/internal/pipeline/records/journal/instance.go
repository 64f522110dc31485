package journal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

const instanceSuffix = ".instance"

// Instance is this kernel's claim on its instance id in a journal
// directory: <hex id>.instance, flock(2)ed for as long as the process
// runs. A claim file whose lock can be taken belongs to a kernel that
// stopped: its pending operation records cannot still be in flight, so
// they may be marked interrupted at once (ReconcileAtStartup), and it can
// never belong to a live sibling — two kernels on one host no longer mark
// each other's calls interrupted.
type Instance struct {
	dir string
	own *os.File
	// mu guards dead: the reconciler takes and forgets claims while
	// shutdown closes them.
	mu   sync.Mutex
	dead map[string]*os.File // id → its claim file, locked by us
}

// ClaimInstance claims id in dir (created 0700) and takes the claims of
// every stopped kernel found there.
func ClaimInstance(dir, id string) (*Instance, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	inst := &Instance{dir: dir, dead: map[string]*os.File{}}
	unlock, err := lockClaims(dir)
	if err != nil {
		return nil, err
	}
	own, err := os.OpenFile(filepath.Join(dir, hex.EncodeToString([]byte(id))+instanceSuffix), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("journal: claim instance: %w", err)
	}
	if err := syscall.Flock(int(own.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		unlock()
		_ = own.Close()
		return nil, fmt.Errorf("journal: instance id %q is held by a running kernel: %w", id, err)
	}
	unlock()
	inst.own = own
	if err := inst.TakeStopped(); err != nil {
		_ = inst.Close()
		return nil, err
	}
	return inst, nil
}

// TakeStopped takes the claims of the kernels that stopped on the
// directory (their lock can be taken) and are not held yet.
func (i *Instance) TakeStopped() error {
	unlock, err := i.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if i.dead == nil {
		return nil // closed
	}
	ents, err := os.ReadDir(i.dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), instanceSuffix)
		if !ok || e.IsDir() {
			continue
		}
		raw, err := hex.DecodeString(name)
		if err != nil || filepath.Join(i.dir, e.Name()) == i.own.Name() {
			continue
		}
		if _, held := i.dead[string(raw)]; held {
			continue
		}
		f, err := os.OpenFile(filepath.Join(i.dir, e.Name()), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close() // a live kernel holds it
			continue
		}
		i.dead[string(raw)] = f
	}
	return nil
}

// claimsLock is the file whose lock orders claiming against taking stopped
// kernels' claims: a claim file is made, then locked, and between the two
// another kernel would take it for a stopped one's.
const claimsLock = "claims.lock"

// lockClaims takes the directory's claims lock (waiting for it: every
// holder holds it for a directory listing at most).
func lockClaims(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, claimsLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// lock takes the directory's claims lock, then i.mu.
func (i *Instance) lock() (unlock func(), err error) {
	unlockClaims, err := lockClaims(i.dir)
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	return func() { i.mu.Unlock(); unlockClaims() }, nil
}

// Dead are the instance ids of stopped kernels whose claims this one holds.
func (i *Instance) Dead() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]string, 0, len(i.dead))
	for id := range i.dead {
		out = append(out, id)
	}
	return out
}

// Forget removes a stopped kernel's claim once its records are reconciled,
// under the claims lock: a kernel restarting under that id opens and locks
// its claim file in one step against it (never a file removed meanwhile).
func (i *Instance) Forget(id string) error {
	unlock, err := i.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, ok := i.dead[id]
	if !ok {
		return nil
	}
	delete(i.dead, id)
	return errors.Join(os.Remove(f.Name()), f.Close())
}

// Release lets go of the stopped kernels' claims this one took, keeping
// their files: a kernel restarting under one of those ids claims it again,
// and a kernel starting later takes the rest.
func (i *Instance) Release() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for id, f := range i.dead {
		_ = f.Close()
		delete(i.dead, id)
	}
}

// Close releases every claim this process holds; its own file stays, for
// its successor to find.
func (i *Instance) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	var errs []error
	for _, f := range i.dead {
		errs = append(errs, f.Close())
	}
	i.dead = nil // closed: TakeStopped takes nothing more
	if i.own != nil {
		errs = append(errs, i.own.Close())
	}
	return errors.Join(errs...)
}
