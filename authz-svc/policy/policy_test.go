package policy_test

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
)

func TestRegoUnitTests(t *testing.T) {
	dir, err := app.ResolvePolicyDir(app.DefaultPolicyDir)
	if err != nil {
		t.Fatalf("example policies: %v", err)
	}
	modules, store, err := tester.Load([]string{dir}, nil)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	ctx := context.Background()
	txn := storage.NewTransactionOrDie(ctx, store)
	defer store.Abort(ctx, txn)
	results, err := tester.NewRunner().
		SetStore(store).
		SetModules(modules).
		RaiseBuiltinErrors(true).
		RunTests(ctx, txn)
	if err != nil {
		t.Fatalf("run rego tests: %v", err)
	}
	n := 0
	for r := range results {
		n++
		switch {
		case r.Error != nil:
			t.Errorf("%s.%s: error: %v", r.Package, r.Name, r.Error)
		case r.Fail:
			t.Errorf("%s.%s: FAIL (%s)", r.Package, r.Name, r.Location)
		case r.Skip:
			t.Errorf("%s.%s: skipped (todo_ tests are not allowed)", r.Package, r.Name)
		default:
			t.Logf("%s.%s: PASS", r.Package, r.Name)
		}
	}
	// The example policy ships 19 tests; fewer means a test file went missing.
	if n < 19 {
		t.Errorf("ran %d Rego tests, want at least 19", n)
	}
}
