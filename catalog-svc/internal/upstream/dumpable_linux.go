package upstream

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ProtectFromChildren makes this process non-dumpable, for the stdio
// upstreams it starts: they run as its user, and a process of the same
// user could otherwise read /proc/<its parent>/environ (SHAREDOS_* and
// the rest of catalog-svc's own environment, which childEnv keeps from
// them) and its memory through /proc/<pid>/mem or ptrace. Non-dumpable,
// the kernel makes those files root's and refuses such access to other
// processes of the user (root with CAP_SYS_PTRACE still has it); this
// process still reads its own stat and fd listing. No core dumps are
// written for it either. Files this process may read (its key files) stay
// readable by its children: only the process is closed.
//
// It is process-wide and for the process that serves: catalog-svc calls
// it once at start, before any upstream runs.
func ProtectFromChildren() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
