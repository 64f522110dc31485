package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/tools/column"
)

// columnFlags are `column run`'s flags.
type columnFlags struct {
	kind, harness, manifest, hostConfig, out string
	timeout                                  time.Duration
}

func (f *columnFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.kind, "kind", "", "column kind: mcp, scripted or live")
	fs.StringVar(&f.harness, "harness", "", "harness: claude-code, codex, gemini-cli, pi (mcp); anthropic, openai-responses, pi (scripted, live)")
	fs.StringVar(&f.manifest, "manifest", "", "column manifest (YAML or JSON): context, toolPolicy, prompt or script, attempts")
	fs.StringVar(&f.hostConfig, "host-config", "", "host configuration (YAML or JSON): per harness its executable, args, env, declared model")
	fs.StringVar(&f.out, "out", "", "report file to write (never overwritten)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "bound of the whole run: the harness is stopped (its turn closed first) when it passes")
}

func init() {
	var f columnFlags
	register(&command{path: "column run",
		usage:    "--kind mcp|scripted|live --harness NAME --manifest FILE --host-config FILE --out REPORT.json [--timeout 5m]",
		flags:    f.bind,
		deadline: columnDeadline,
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return runColumn(ctx, e, &f, args)
		}})
	register(&command{path: "column compare", usage: "A.json B.json [C.json]...", run: runColumnCompare})
}

// columnDeadline bounds `column run` as a whole: its --timeout (at most
// this) bounds the run, the rest is for closing the turn and the report.
const columnDeadline = time.Hour

func runColumn(ctx context.Context, e *env, f *columnFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if f.timeout <= 0 || f.timeout > columnDeadline-time.Minute {
		return usagef("--timeout must be positive and at most %s", columnDeadline-time.Minute)
	}
	// An interrupt ends the run the way its deadline does: the turn is
	// closed and the harness stopped, never left running with a bearer.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var missing []string
	for _, m := range []struct{ flag, v string }{{"--kind", f.kind}, {"--harness", f.harness}, {"--manifest", f.manifest},
		{"--host-config", f.hostConfig}, {"--out", f.out}} {
		if m.v == "" {
			missing = append(missing, m.flag)
		}
	}
	if len(missing) > 0 {
		return usagef("%s required", strings.Join(missing, ", "))
	}
	// A report is never overwritten: refused before the run, not after.
	switch _, err := os.Stat(f.out); {
	case err == nil:
		return usagef("--out %s exists: a report is never overwritten", f.out)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--out: %w", err)
	}
	m, err := column.ReadManifest(f.manifest)
	if err != nil {
		return err
	}
	hosts, err := column.ReadHostConfig(f.hostConfig)
	if err != nil {
		return err
	}
	h, err := hosts.For(f.kind, f.harness)
	if err != nil {
		return usagef("%v", err)
	}
	bc, err := e.conn(e.g.bridge, callers.Bridge)
	if err != nil {
		return err
	}
	cc, err := e.conn(e.g.catalog, callers.Catalog)
	if err != nil {
		return err
	}
	// The turn outlives the run's bound by the time its close and report
	// take, never by the bridge's default lease.
	run := &column.Run{Kind: f.kind, Harness: f.harness, Manifest: m, Host: h, TTL: f.timeout + 2*time.Minute,
		Bridge: sharedosv1.NewBridgeServiceClient(bc), Records: sharedosv1.NewRuntimeServiceClient(cc)}
	var rep *column.Report
	switch f.kind {
	case column.KindScripted:
		rep, err = run.Scripted(ctx)
	case column.KindLive:
		rep, err = run.Live(ctx)
	case column.KindMCP:
		rep, err = run.MCP(ctx)
	}
	if rep == nil {
		return errors.New(describe(err))
	}
	runErr := err // the run completed; its turn may not have closed
	if err := column.WriteReport(f.out, rep); err != nil {
		return err
	}
	abs, err := filepath.Abs(f.out)
	if err != nil {
		abs = f.out
	}
	if _, err := fmt.Fprintln(e.stdout, abs); err != nil {
		return err
	}
	if runErr != nil {
		return errors.New(describe(runErr))
	}
	return nil
}

func runColumnCompare(_ context.Context, e *env, _ *flag.FlagSet, args []string) error {
	if len(args) < 2 {
		return usagef("want two or more reports")
	}
	reports := make([]*column.Report, 0, len(args))
	names := make([]string, 0, len(args))
	for _, a := range args {
		r, err := column.ReadReport(a)
		if err != nil {
			return err
		}
		reports = append(reports, r)
		names = append(names, filepath.Base(a))
	}
	rows, err := column.Compare(names, reports)
	if err != nil {
		return err
	}
	return writeTable(e.stdout, rows)
}
