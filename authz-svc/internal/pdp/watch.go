package pdp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ReloadDebounce is how long Watch waits after the last change before it
// reloads: saving a policy usually touches several files (or one file
// several times), and one reload should see all of it.
const ReloadDebounce = 100 * time.Millisecond

// newWatcher makes Watch's watcher (a variable for tests).
var newWatcher = fsnotify.NewWatcher

// errWatchEnded: the watcher stopped delivering events while ctx was not
// done.
var errWatchEnded = errors.New("pdp: the policy watch ended: policy changes no longer apply")

// Watch reloads the policy whenever something under the directory changes,
// until ctx is done. It returns an error when the watch cannot be set up or
// ends before ctx (policy changes would no longer apply: the caller must not
// go on serving as if they did); reload failures are handled by Reload (the
// previous policy serves).
func (e *Engine) Watch(ctx context.Context) error {
	w, err := newWatcher()
	if err != nil {
		return fmt.Errorf("pdp: watch %s: %w", e.dir, err)
	}
	defer func() { _ = w.Close() }()
	// addTree takes a root that is gone for a directory removed after its
	// event: the policy directory itself must be there.
	if st, err := os.Stat(e.dir); err != nil || !st.IsDir() {
		return fmt.Errorf("pdp: watch %s: %w", e.dir, errors.Join(err, errNotDir(st)))
	}
	if err := addTree(w, e.dir); err != nil {
		return fmt.Errorf("pdp: watch %s: %w", e.dir, err)
	}

	timer := time.NewTimer(ReloadDebounce)
	if !timer.Stop() {
		<-timer.C
	}
	defer timer.Stop()
	// A change made before the watch was in place (between New's load and
	// now) sent no event: the directory is compared with what serves once,
	// and a difference is reloaded as an event would be.
	if e.behind() {
		timer.Reset(ReloadDebounce)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errWatchEnded
			}
			if ev.Name == e.dir && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
				// Its watch is gone with it: nothing written there later,
				// or into a directory made in its place, would be seen.
				return fmt.Errorf("pdp: the policy directory %s was removed or renamed: %w", e.dir, errWatchEnded)
			}
			// fsnotify does not recurse: a new directory must be added so
			// files later written into it are seen.
			if ev.Has(fsnotify.Create) {
				if err := addTree(w, ev.Name); err != nil {
					e.logger.Warn("policy watch: cannot watch new directory",
						slog.String("path", ev.Name), slog.String("error", err.Error()))
				}
			}
			timer.Reset(ReloadDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return errWatchEnded
			}
			e.logger.Warn("policy watch error", slog.String("error", err.Error()))
			timer.Reset(ReloadDebounce)
		case <-timer.C:
			// Reload logs and records its own failure.
			_ = e.Reload(ctx)
		}
	}
}

// behind tells whether the directory holds something else than the policy
// serving (or cannot be read, which a reload reports).
func (e *Engine) behind() bool {
	files, err := readPolicyDir(e.dir)
	return err != nil || revisionOf(files) != e.Revision()
}

// errNotDir is why st, which exists, cannot be watched as a directory
// (nil when it is one, or was not found).
func errNotDir(st os.FileInfo) error {
	if st != nil && !st.IsDir() {
		return errors.New("not a directory")
	}
	return nil
}

// addTree watches root and every directory below it (root may be a file,
// in which case nothing is added).
func addTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// A file removed between the event and the walk is not an error.
			if p == root {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}
