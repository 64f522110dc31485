package journal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// StoreFile names the marker in a journal directory that says which record
// store its completions belong to.
const StoreFile = "store-identity"

// BindStore ties dir to the record store named identity (one line: the
// PostgreSQL system identifier and database, say): the first kernel to use
// the directory writes the marker StoreFile, and every later one must name
// the same store. A journaled completion replayed against another store
// finds no such record there and is dropped — and with it the outcome its
// client was told, the record in its own store left pending, then
// interrupted — so a kernel of another store is refused before it opens the
// journal, the error naming both stores.
func BindStore(dir, identity string) error {
	identity = strings.TrimSpace(identity)
	if identity == "" || strings.ContainsAny(identity, "\n\r") {
		return fmt.Errorf("journal: store identity %q is not one line", identity)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	marker := filepath.Join(dir, StoreFile)
	// Written whole under another name and linked into place: a marker is
	// never seen half written, and of two kernels binding an empty
	// directory at once exactly one link succeeds; the other reads it.
	var id [8]byte
	_, _ = rand.Read(id[:])
	tmp := marker + "." + hex.EncodeToString(id[:]) + ".tmp"
	if err := writeSynced(tmp, []byte(identity+"\n")); err != nil {
		return err
	}
	lerr := os.Link(tmp, marker)
	_ = os.Remove(tmp)
	switch {
	case lerr == nil:
		return syncDir(dir)
	case !errors.Is(lerr, os.ErrExist):
		return fmt.Errorf("journal: %w", lerr)
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if bound := strings.TrimSpace(string(b)); bound != identity {
		return fmt.Errorf("journal: %s is the journal of another record store: its %s names %s, this kernel's store is %s; "+
			"replayed here its completions would be dropped as unknown records (their records left pending, then interrupted, "+
			"though their clients were answered). Give each database its own journal directory; if it is the same database "+
			"under a new identity (pg_upgrade, a restore) and no *%s file in the directory holds a line, remove %s",
			dir, StoreFile, bound, identity, fileSuffix, marker)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
