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
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: "published", ToFile: "pending", Context: 3,
	})
}

func (m *Manager) pretty(reg *sharedosv1.ToolRegistration) (string, error) {
	if reg == nil {
		return "", nil
	}
	pub, err := m.cfg.Registry.Check(reg)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, pub.GetCanonicalJson(), "", "  "); err != nil {
		return "", err
	}
	buf.WriteByte('\n')
	return buf.String(), nil
}
