// Package columns is the evidence-column tier of SharedOS toolshare (`make
// column`, build tag `column`; issue 21, docs/columns.md). It has no
// library code: its tests run every column kind against the make run stack
// with the scripted fake model of the shared harness-column tool (used from
// ../shared/tools/harness-column beside the repository, never copied): the
// four installed agent CLIs (mcp), the vendor-shape driver (scripted) and
// the driver's turn loop (live), each through `sharedosctl column run`
// with deploy/columns' manifest and host configuration, and compares the
// reports. The CLIs come from services/systemtest/columns/npm at the
// versions the shared tool verified. Slow (real CLIs): not part of
// `make test`, which runs the scripted columns.
package columns
