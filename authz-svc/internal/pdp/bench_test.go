package pdp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sharedos/toolshare/services/contract/requirement"
)

func exampleFiles(b *testing.B) []sourceFile {
	b.Helper()
	files, err := readPolicyDir(filepath.Join("..", "..", "..", "deploy", "policies"))
	if err != nil {
		b.Fatal(err)
	}
	return files
}

func benchTools(n int) []Tool {
	tools := make([]Tool, n)
	for i := range tools {
		name := fmt.Sprintf("files.tool%03d", i)
		switch i % 10 {
		case 1:
			name = "files.read"
		case 2:
			name = "files.search"
		}
		tools[i] = Tool{Name: name, Namespace: "files", Class: "managed", Source: "provider:files"}
	}
	return tools
}

// BenchmarkFilterToolsEval compares, in process, 1,000 per-tool decisions
// (the fallback for policies without a visible rule) with one evaluation
// of the example policy's visible set rule (what DecideTools uses).
func BenchmarkFilterToolsEval(b *testing.B) {
	ctx := context.Background()
	snap, err := prepare(ctx, exampleFiles(b))
	if err != nil {
		b.Fatal(err)
	}
	e := &Engine{evalTimeout: DefaultEvalTimeout, logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	e.current.Store(snap)
	c := Context{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}}
	tools := benchTools(1000)

	b.Run("per-tool-decision/n=1000", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ct := contextTerm(c)
			ds := make([]Decision, len(tools))
			for j, t := range tools {
				d, err := evalOne(ctx, snap, inputValue(ct, toolTerm(t), requirement.ActionList, "", nil))
				if err != nil {
					b.Fatal(err)
				}
				ds[j] = d
			}
			if n := countAllowed(ds); n != 200 {
				b.Fatalf("allowed %d", n)
			}
		}
	})
	b.Run("visible-set-once/n=1000", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ds, _, err := e.DecideTools(ctx, c, requirement.ActionList, tools)
			if err != nil {
				b.Fatal(err)
			}
			if n := countAllowed(ds); n != 200 {
				b.Fatalf("allowed %d", n)
			}
		}
	})
}

func countAllowed(ds []Decision) int {
	n := 0
	for _, d := range ds {
		if d.Allow {
			n++
		}
	}
	return n
}

// BenchmarkDecideFileRead is one decision of the example policy for an
// allowed files.read with the arguments and annotations of the demo turn's
// call, input building included, in this process: the "one OPA decision"
// of the floor `make bench-quick` sets issue 20's goals against (it runs
// this benchmark with -test.cpu 1, so ns/op is CPU per decision).
func BenchmarkDecideFileRead(b *testing.B) {
	e, err := New(context.Background(), Options{Dir: "../../../deploy/policies"})
	if err != nil {
		b.Fatal(err)
	}
	args, err := ParseObject([]byte(`{"path":"/public/a.txt"}`))
	if err != nil {
		b.Fatal(err)
	}
	ann, err := ParseObject([]byte(`{"readOnlyHint":true}`))
	if err != nil {
		b.Fatal(err)
	}
	req := fileReadRequest(args, ann)
	for b.Loop() {
		if d, _, err := e.Decide(context.Background(), req); err != nil || !d.Allow {
			b.Fatalf("%+v %v", d, err)
		}
	}
}

// fileReadRequest is the demo turn's allowed files.read of /public/a.txt
// by an engineer, with args and ann as its arguments and annotations.
func fileReadRequest(args, ann ast.Value) Request {
	return Request{
		Context:   Context{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}},
		Tool:      Tool{Name: "files.read", Namespace: "files", Class: "managed", Source: "provider:files", Annotations: ann},
		Action:    "read",
		Resource:  "file:/public/a.txt",
		Arguments: args,
	}
}

// BenchmarkParseObject is ParseObject of a typical call's arguments
// (about 100 bytes): it runs on every Authorize.
func BenchmarkParseObject(b *testing.B) {
	raw := []byte(`{"path":"/public/reports/2024/q3-summary.txt","encoding":"utf-8","offset":0,"limit":4096,"follow":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseObject(raw); err != nil {
			b.Fatal(err)
		}
	}
}
