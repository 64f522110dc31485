package column

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/tools/opsjson"
)

// Grades of a declared attempt.
const (
	Exercised    = "exercised"
	NotExercised = "not_exercised"
)

// Report is one column run: what it was, what it did, and how each
// declared attempt was graded.
type Report struct {
	Kind           string                 `json:"kind"`
	Harness        string                 `json:"harness"`
	TurnID         string                 `json:"turnId"`
	SystemIdentity opsjson.SystemIdentity `json:"systemIdentity"`
	// Tools are the turn's pinned tools (name → digest): what Compare names
	// when two columns were not given the same tool set.
	Tools      map[string]string   `json:"tools"`
	Attempts   []GradedAttempt     `json:"attempts"`
	Operations []opsjson.Operation `json:"operations"`
	Counts     Counts              `json:"counts"`
	// Notes say what the run saw that the grades do not (a harness that
	// exited non-zero, timed out, a call the driver could not make).
	Notes []string `json:"notes,omitempty"`
}

// GradedAttempt is a declared attempt and its grade.
type GradedAttempt struct {
	Tool     string `json:"tool"`
	Resource string `json:"resource"`
	Expected string `json:"expected"`
	// Grade is exercised or not_exercised; Observed is set when exercised.
	Grade    string    `json:"grade"`
	Observed *Observed `json:"observed,omitempty"`
	// CallID is the kernel's id of the record the attempt was matched to.
	CallID string `json:"callId,omitempty"`
}

// Observed is the outcome an exercised attempt's record holds.
type Observed struct {
	Status string `json:"status"`
	Code   string `json:"code"`
}

// Counts are the turn's operations by outcome.
type Counts struct {
	Denied    int `json:"denied"`
	Failed    int `json:"failed"`
	Succeeded int `json:"succeeded"`
}

// Match is one call the column saw made: its record's call id (when known)
// with the tool and arguments it was made with.
type Match struct {
	// Ref is what the manifest may name the call by (a script call's id).
	Ref       string
	CallID    string
	Tool      string
	Arguments json.RawMessage
}

// Grade grades each declared attempt against the operations of the turn.
// In a scripted column (byScript) an attempt naming a script call
// (Attempt.Call) is matched to that call's record by call id; otherwise
// (and in mcp and live columns, whose harness or model mints its own ids)
// to the first record, not matched before, of a call of its tool whose
// arguments hold its resource as a value. An attempt with no such record
// is not_exercised: a call the column did not make is never made up.
func Grade(attempts []Attempt, calls []Match, ops []opsjson.Operation, byScript bool) []GradedAttempt {
	byID := map[string]opsjson.Operation{}
	for _, o := range ops {
		byID[o.CallID] = o
	}
	used := map[string]bool{}
	out := make([]GradedAttempt, 0, len(attempts))
	for _, a := range attempts {
		g := GradedAttempt{Tool: a.Tool, Resource: a.Resource, Expected: a.Expected, Grade: NotExercised}
		for _, c := range calls {
			if used[c.CallID] || c.CallID == "" || c.Tool != a.Tool {
				continue
			}
			if byScript && a.Call != "" {
				if c.Ref != a.Call {
					continue
				}
			} else if !holds(c.Arguments, a.Resource) {
				continue
			}
			o, ok := byID[c.CallID]
			if !ok || o.Tool != a.Tool {
				continue
			}
			used[c.CallID] = true
			g.Grade, g.CallID, g.Observed = Exercised, c.CallID, &Observed{Status: o.Status, Code: o.Code}
			break
		}
		out = append(out, g)
	}
	return out
}

// holds reports whether the JSON value args holds s as a string value at
// any depth.
func holds(args json.RawMessage, s string) bool {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return v == s
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// CountOf counts ops by outcome.
func CountOf(ops []opsjson.Operation) Counts {
	var c Counts
	for _, o := range ops {
		switch o.Status {
		case outcome.StatusName(sharedosv1.OperationStatus_OPERATION_STATUS_DENIED):
			c.Denied++
		case outcome.StatusName(sharedosv1.OperationStatus_OPERATION_STATUS_FAILED):
			c.Failed++
		case outcome.StatusName(sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED):
			c.Succeeded++
		}
	}
	return c
}

// ReadReport reads a report file.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// WriteReport writes r to path (a new file: a report is never overwritten).
func WriteReport(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Compare lays reports side by side: a header row naming each column, then
// one row per declared attempt (tool, resource, expected, then each
// column's grade and observed outcome), then the counts. Columns whose
// catalogHash differs were not given the same tool set: Compare refuses
// them, naming the tools that differ.
func Compare(names []string, reports []*Report) ([][]string, error) {
	if len(reports) < 2 {
		return nil, fmt.Errorf("compare needs at least two reports")
	}
	first := reports[0]
	for i, r := range reports[1:] {
		if r.SystemIdentity.CatalogHash != first.SystemIdentity.CatalogHash {
			return nil, fmt.Errorf("%s and %s were not given the same tool set (catalogHash %s vs %s): %s",
				names[0], names[i+1], first.SystemIdentity.CatalogHash, r.SystemIdentity.CatalogHash, toolDiff(first.Tools, r.Tools))
		}
	}
	header := []string{"TOOL", "RESOURCE", "EXPECTED"}
	for i, r := range reports {
		header = append(header, fmt.Sprintf("%d:%s (%s %s)", i+1, names[i], r.Kind, r.Harness))
	}
	rows := [][]string{header}
	type key struct{ tool, resource, expected string }
	var keys []key
	seen := map[key]bool{}
	for _, r := range reports {
		for _, a := range r.Attempts {
			k := key{a.Tool, a.Resource, a.Expected}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		row := []string{k.tool, k.resource, k.expected}
		for _, r := range reports {
			cell := "—"
			for _, a := range r.Attempts {
				if (key{a.Tool, a.Resource, a.Expected}) == k {
					cell = a.Grade
					if a.Observed != nil {
						cell += ": " + strings.TrimSuffix(a.Observed.Status+"/"+a.Observed.Code, "/")
					}
					break
				}
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	counts := []string{"(operations)", "", ""}
	for _, r := range reports {
		counts = append(counts, fmt.Sprintf("succeeded %d, denied %d, failed %d", r.Counts.Succeeded, r.Counts.Denied, r.Counts.Failed))
	}
	return append(rows, counts), nil
}

// toolDiff names the tools one set has and the other lacks or holds with
// another digest.
func toolDiff(a, b map[string]string) string {
	var diffs []string
	for n, d := range a {
		switch bd, ok := b[n]; {
		case !ok:
			diffs = append(diffs, n+" only in the first")
		case bd != d:
			diffs = append(diffs, n+" differs")
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			diffs = append(diffs, n+" only in the second")
		}
	}
	if len(diffs) == 0 {
		return "the same tool names and digests (the hashes differ in prompts, order or format)"
	}
	slices.Sort(diffs)
	return strings.Join(diffs, ", ")
}
