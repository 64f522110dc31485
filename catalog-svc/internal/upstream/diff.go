package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/pmezard/go-difflib/difflib"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// diff is the unified diff of the published projections of from and to,
// each its canonical JSON indented one member per line; from nil diffs
// against nothing (a new tool).
func (m *Manager) diff(from, to *sharedosv1.ToolRegistration) (string, error) {
	a, err := m.pretty(from)
	if err != nil {
		return "", err
	}
	b, err := m.pretty(to)
	if err != nil {
		return "", err
	}
	return unified(a, b)
}

// unified is the unified diff from a (published) to b (pending).
func unified(a, b string) (string, error) {
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: "published", ToFile: "pending", Context: 3,
	})
}

// indent is canonical JSON one member per line.
func indent(canonical []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, canonical, "", "  "); err != nil {
		return "", err
	}
	buf.WriteByte('\n')
	return buf.String(), nil
}

func (m *Manager) pretty(reg *sharedosv1.ToolRegistration) (string, error) {
	if reg == nil {
		return "", nil
	}
	pub, err := m.cfg.Registry.Check(reg)
	if err != nil {
		return "", err
	}
	return indent(pub.GetCanonicalJson())
}
