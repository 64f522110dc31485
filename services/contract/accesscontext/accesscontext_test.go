package accesscontext_test

import (
	"fmt"
	"strings"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/contract/accesscontext/accesscontexttest"
)

func ok() *sharedosv1.AccessContext {
	return &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"dept": "r&d"}}
}

// Every way a context breaks the rules is refused, naming the field; the
// services' tests share the cases (accesscontexttest.Bad).
func TestCheckRefusesNamingTheField(t *testing.T) {
	for _, c := range accesscontexttest.Bad() {
		t.Run(c.Name, func(t *testing.T) {
			actx := ok()
			c.Edit(actx)
			e := accesscontext.Check(actx)
			if e == nil {
				t.Fatalf("Check(%v) = nil, want a refusal of %s", actx, c.Field)
			}
			if e.Field != c.Field || !strings.Contains(e.Rule, c.Rule) {
				t.Errorf("Check = %q: %q, want %q: …%s…", e.Field, e.Rule, c.Field, c.Rule)
			}
		})
	}
	if e := accesscontext.Check(nil); e == nil || e.Field != "context" {
		t.Errorf("Check(nil) = %v, want context is required", e)
	}
}

// Letters of every script, emoji and punctuation are printable: names are
// not ASCII.
func TestCheckAcceptsLegitimateUnicode(t *testing.T) {
	for _, s := range []string{"José Ñúñez", "张伟", "Ωmega-ops", "r&d / müller@acme.example", "🙂", "שלום", "a b\u00a0c",
		strings.Repeat("p", accesscontext.MaxStringBytes)} {
		actx := &sharedosv1.AccessContext{Principal: s, Tenant: s, Roles: []string{s}, Attributes: map[string]string{s: s}}
		if e := accesscontext.Check(actx); e != nil {
			t.Errorf("Check(%q) = %v", s, e)
		}
	}
	roles := make([]string, accesscontext.MaxRoles)
	for i := range roles {
		roles[i] = fmt.Sprint("r", i)
	}
	if e := accesscontext.Check(&sharedosv1.AccessContext{Principal: "p", Roles: roles}); e != nil {
		t.Errorf("%d roles: %v", len(roles), e)
	}
}

func TestPrintable(t *testing.T) {
	for _, s := range []string{"\x1b[31m", "a\x00", "\x7f", "\u0085", "\u009b", "\u202e", "\u200b", "\u2066", "\ufeff", "\U000E0041", "\xff"} {
		if accesscontext.Printable("x"+s) == "" {
			t.Errorf("Printable(%q) accepted", s)
		}
	}
}
