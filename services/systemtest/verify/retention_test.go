//go:build verify

package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exportSummary is what `sharedosctl ops export --out` prints.
type exportSummary struct {
	File            string `json:"file"`
	Rows            int64  `json:"rows"`
	AfterSequence   int64  `json:"afterSequence"`
	ThroughSequence int64  `json:"throughSequence"`
	SHA256          string `json:"sha256"`
	ExportID        int64  `json:"exportId"`
}

// TestRecordRetention (issue 17, item 15): records stay append-only; an
// export archives them to a file (stopping before a record still pending)
// and notes it in the ledger; the owner's purge deletes exactly the noted
// records and never one that is not in an archive.
func TestRecordRetention(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	dir := t.TempDir()
	echo := func(n int) {
		for range n {
			expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
		}
	}
	export := func(name string) exportSummary {
		t.Helper()
		out, errOut, code := s.ctl("ops", "export", "--since", "1h", "--out", filepath.Join(dir, name), "--page-size", "4")
		if code != 0 {
			t.Fatalf("ops export: exit %d: %s", code, errOut)
		}
		var sum exportSummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("ops export printed %q: %v", out, err)
		}
		b, err := os.ReadFile(sum.File)
		if err != nil {
			t.Fatal(err)
		}
		digest := sha256.Sum256(b)
		lines := int64(0)
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); lines++ {
			var row opRow
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Status == "pending" {
				t.Fatalf("archive line %q: %v", sc.Text(), err)
			}
			// An archived record keeps the run's SystemIdentity (ADR 0022).
			if id := row.SystemIdentity; id.Harness != "verify" || id.MCPSupport != "native" || !strings.HasPrefix(id.ToolPolicy, "sha256:") {
				t.Fatalf("archive line %q: systemIdentity %+v", sc.Text(), id)
			}
		}
		if lines != sum.Rows || hex.EncodeToString(digest[:]) != sum.SHA256 || sum.ExportID == 0 {
			t.Fatalf("archive %s: %d lines, sha256 %x; summary %+v", name, lines, digest, sum)
		}
		return sum
	}
	purge := func() int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var n int64
		if err := s.db.QueryRow(ctx, `SELECT catalog.purge_exported_operations(now() + interval '1 minute')`).Scan(&n); err != nil {
			t.Fatalf("purge: %v", err)
		}
		return n
	}

	echo(10)
	// A call still running: its record is pending, and the export stops
	// before it.
	slowCtx, stopSlow := context.WithCancel(context.Background())
	slowDone := make(chan callResult, 1)
	go func() {
		slowDone <- callTool(slowCtx, tr.URL, tr.Token, "verify.slow", `{"path":"/public/x","ms":20000}`)
	}()
	select {
	case <-s.provider.started:
	case <-time.After(20 * time.Second):
		t.Fatal("verify.slow did not start")
	}
	echo(5)
	first := export("first.jsonl")
	if first.Rows != 10 {
		t.Fatalf("first export holds %d records, want the 10 before the pending one: %+v", first.Rows, first)
	}
	if n := purge(); n != 10 {
		t.Fatalf("purge deleted %d records, want the 10 exported", n)
	}
	if n := s.rowCount(tr.ID); n != 6 {
		t.Fatalf("%d records left, want the pending one and the 5 after it", n)
	}
	// Nothing outside an archive can be deleted, even by the owner.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.db.Exec(ctx, `DELETE FROM catalog.operations`); err == nil {
		t.Fatal("the owner deleted unexported records")
	}

	stopSlow()
	if c := <-slowDone; c.succeeded() {
		t.Fatal("the cancelled call succeeded")
	}
	s.waitSettled(tr.ID, 10*time.Second)
	second := export("second.jsonl")
	if second.Rows != 6 || second.AfterSequence != first.ThroughSequence {
		t.Fatalf("second export %+v, want the 6 records after the first (from sequence %d)", second, first.ThroughSequence)
	}
	echo(3) // after the second export: in no archive
	if n := purge(); n != 6 {
		t.Fatalf("second purge deleted %d records, want 6", n)
	}
	if n := s.rowCount(tr.ID); n != 3 {
		t.Fatalf("%d records left, want the 3 not yet exported", n)
	}
	if n := purge(); n != 0 {
		t.Fatalf("a purge with nothing new exported deleted %d records", n)
	}
	// An existing archive is never overwritten.
	if _, _, code := s.ctl("ops", "export", "--since", "1h", "--out", first.File); code == 0 {
		t.Error("ops export overwrote an archive")
	}
}
