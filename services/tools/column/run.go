package column

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
	"github.com/sharedos/toolshare/services/platform/secretref"
	"github.com/sharedos/toolshare/services/tools/column/driver"
	"github.com/sharedos/toolshare/services/tools/opsjson"
)

// Bridge opens and closes the column's turn (BridgeService).
type Bridge interface {
	OpenTurn(ctx context.Context, in *sharedosv1.OpenTurnRequest, opts ...grpc.CallOption) (*sharedosv1.TurnLease, error)
	CloseTurn(ctx context.Context, in *sharedosv1.CloseTurnRequest, opts ...grpc.CallOption) (*sharedosv1.CloseTurnResponse, error)
}

// Records lists the turn's operation records (RuntimeService).
type Records interface {
	ListOperations(ctx context.Context, in *sharedosv1.ListOperationsRequest, opts ...grpc.CallOption) (*sharedosv1.ListOperationsResponse, error)
}

// Run is one column to run.
type Run struct {
	Kind     string
	Harness  string
	Manifest *Manifest
	Host     Harness
	Bridge   Bridge
	Records  Records
	// TTL is the turn's lease (0: the bridge's default).
	TTL time.Duration
}

// turn opens the column's turn with the run's SystemIdentity: the harness
// as the host configured it (its MCP client an extension only for an mcp
// column whose host names one: a scripted or live column's MCP client is
// the driver's) and the manifest's context and policy.
func (r *Run) turn(ctx context.Context) (*sharedosv1.TurnLease, *sharedosv1.HarnessIdentity, error) {
	h := &sharedosv1.HarnessIdentity{Name: r.Harness, Version: r.Host.Version, McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_NATIVE}
	if r.Kind == KindMCP && r.Host.ExtensionPath != "" {
		h.McpSupport, h.ExtensionName = sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION, r.Host.Extension
	}
	req := &sharedosv1.OpenTurnRequest{Context: r.Manifest.Context, Policy: r.Manifest.Policy, Harness: h,
		DeclaredModel: r.Host.DeclaredModel}
	if r.TTL > 0 {
		req.Ttl = durationpb.New(r.TTL)
	}
	lease, err := r.Bridge.OpenTurn(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("open the column's turn: %w", err)
	}
	return lease, h, nil
}

// report lists the turn's operations and grades the attempts on calls.
func (r *Run) report(ctx context.Context, lease *sharedosv1.TurnLease, h *sharedosv1.HarnessIdentity, calls []Match, notes []string) (*Report, error) {
	resp, err := r.Records.ListOperations(ctx, &sharedosv1.ListOperationsRequest{TurnId: lease.GetTurnId()})
	if err != nil {
		return nil, fmt.Errorf("list the turn's operations: %w", err)
	}
	ops := make([]opsjson.Operation, 0, len(resp.GetOperations()))
	for _, o := range resp.GetOperations() {
		ops = append(ops, opsjson.Of(o))
	}
	tools := make(map[string]string, len(lease.GetTools()))
	for _, t := range lease.GetTools() {
		tools[t.GetName()] = t.GetDigest()
	}
	id := opsjson.SystemIdentity{
		CatalogHash: lease.GetCatalogHash(), Harness: h.GetName(), HarnessVersion: h.GetVersion(),
		MCPSupport: systemidentity.MCPSupportName(h.GetMcpSupport()), Extension: h.GetExtensionName(),
		DeclaredModel: r.Host.DeclaredModel, ToolPolicy: systemidentity.PolicyDigest(r.Manifest.Policy),
	}
	for _, o := range ops {
		// The records are the kernel's word on the run (from its grant); a
		// record that says otherwise than what the run declared is shown.
		if o.SystemIdentity != id {
			notes = append(notes, fmt.Sprintf("record %s carries systemIdentity %+v, the run declared %+v", o.CallID, o.SystemIdentity, id))
		}
	}
	return &Report{
		Kind: r.Kind, Harness: r.Harness, TurnID: lease.GetTurnId(),
		SystemIdentity: id,
		Tools:          tools,
		Attempts:       Grade(r.Manifest.Attempts, calls, ops, r.Kind == KindScripted),
		Operations:     ops,
		Counts:         CountOf(ops),
		Notes:          notes,
	}, nil
}

// Scripted runs the scripted column: SharedOS in the model provider's
// seat, writing each script call as the vendor's model would (a tool_use
// block, a function_call item, a toolCall block), translated by the driver
// into a tools/call on the turn, its result rendered back in the vendor's
// shape. The turn is closed before the report is made.
func (r *Run) Scripted(ctx context.Context) (*Report, error) {
	v := driver.Vendor(r.Harness)
	if !v.Valid() {
		return nil, fmt.Errorf("--harness for a scripted column must be one of %s, not %q", strings.Join(Harnesses[KindScripted], ", "), r.Harness)
	}
	if len(r.Manifest.Script) == 0 {
		return nil, errors.New("script: a scripted column needs at least one script call")
	}
	lease, h, err := r.turn(ctx)
	if err != nil {
		return nil, err
	}
	closeTurn := r.closer(ctx, lease.GetTurnId())
	calls, notes, err := r.script(ctx, v, lease)
	return r.finish(ctx, lease, h, closeTurn, calls, notes, err)
}

// closeTimeout bounds closing the column's turn and reading its records,
// which happen even after the run's deadline passed.
const closeTimeout = 30 * time.Second

// closer returns the close of the column's turn: made once, however often
// called, and even after ctx ended; an Unavailable answer (the bridge could
// not revoke the turn's grant yet) is retried within closeTimeout.
func (r *Run) closer(ctx context.Context, turn string) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			defer cancel()
			for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
				_, cerr := r.Bridge.CloseTurn(cctx, &sharedosv1.CloseTurnRequest{TurnId: turn})
				if cerr == nil {
					return
				}
				if status.Code(cerr) != codes.Unavailable || cctx.Err() != nil {
					err = fmt.Errorf("close the column's turn %s: %w", turn, cerr)
					return
				}
				select {
				case <-cctx.Done():
					err = fmt.Errorf("close the column's turn %s: %w", turn, cerr)
					return
				case <-time.After(backoff):
				}
			}
		})
		return err
	}
}

// ErrTurnNotClosed is returned with a report whose turn could not be
// closed: the evidence is kept, and the caller must not take the run as
// finished cleanly.
var ErrTurnNotClosed = errors.New("the column's turn could not be closed")

// finish closes the turn and, when the column ran (runErr nil), reports
// on what it did. A turn that would not close still gets its report, with
// a note, and ErrTurnNotClosed.
func (r *Run) finish(ctx context.Context, lease *sharedosv1.TurnLease, h *sharedosv1.HarnessIdentity, closeTurn func() error,
	calls []Match, notes []string, runErr error) (*Report, error) {
	closeErr := closeTurn()
	if runErr != nil {
		return nil, errors.Join(runErr, closeErr)
	}
	if closeErr != nil {
		notes = append(notes, closeErr.Error()+": it stays open until its lease expires")
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	rep, err := r.report(rctx, lease, h, calls, notes)
	if err == nil && closeErr != nil {
		err = fmt.Errorf("%w: %w", ErrTurnNotClosed, closeErr)
	}
	return rep, err
}

func (r *Run) script(ctx context.Context, v driver.Vendor, lease *sharedosv1.TurnLease) ([]Match, []string, error) {
	t, err := driver.Open(ctx, lease.GetMcpUrl(), lease.GetToken(), driver.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the turn: %w", err)
	}
	defer func() { _ = t.Close() }()
	cat, err := t.Catalogue(v)
	if err != nil {
		return nil, nil, err
	}
	var calls []Match
	var notes []string
	for _, sc := range r.Manifest.Script {
		_, obs, err := t.Execute(ctx, cat, cat.CallItem(sc.ID, sc.Tool, sc.Arguments))
		if err != nil {
			notes = append(notes, fmt.Sprintf("script call %s: %v", sc.ID, err))
			continue
		}
		// Every answer names its record (_meta io.sharedos/outcome callId).
		calls = append(calls, Match{Ref: sc.ID, CallID: obs.CallID, Tool: obs.Tool, Arguments: sc.Arguments})
	}
	return calls, notes, nil
}

// Live runs the live column: the driver's turn loop against the model
// endpoint the host configured (live.NAME.vendor, baseURL,
// credentialRef; the declared model is sent as the request's model and
// recorded). What the model calls is matched to its records by the call
// ids the turn answered with; the attempts are graded on tool and resource,
// since a live model mints its own call ids.
func (r *Run) Live(ctx context.Context) (*Report, error) {
	wire := driver.Vendor(r.Host.Vendor)
	if wire == "" {
		wire = driver.Vendor(r.Harness)
	}
	if wire != driver.Anthropic && wire != driver.OpenAIResponses {
		return nil, fmt.Errorf("live.%s.vendor: the endpoint's API must be %s or %s, not %q", r.Harness,
			driver.Anthropic, driver.OpenAIResponses, wire)
	}
	if strings.TrimSpace(r.Manifest.Prompt) == "" {
		return nil, errors.New("prompt: a live column needs the prompt its model is given")
	}
	var credential string
	if r.Host.CredentialRef != "" {
		var err error
		if credential, err = secretref.Resolve(r.Host.CredentialRef); err != nil {
			return nil, fmt.Errorf("live.%s.credentialRef: %w", r.Harness, err)
		}
	}
	lease, h, err := r.turn(ctx)
	if err != nil {
		return nil, err
	}
	closeTurn := r.closer(ctx, lease.GetTurnId())
	calls, notes, err := r.live(ctx, lease, driver.Model{Vendor: wire, BaseURL: r.Host.BaseURL,
		Credential: credential, Name: r.Host.DeclaredModel})
	return r.finish(ctx, lease, h, closeTurn, calls, notes, err)
}

func (r *Run) live(ctx context.Context, lease *sharedosv1.TurnLease, m driver.Model) ([]Match, []string, error) {
	t, err := driver.Open(ctx, lease.GetMcpUrl(), lease.GetToken(), driver.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the turn: %w", err)
	}
	defer func() { _ = t.Close() }()
	loop := &driver.Loop{Turn: t, Model: m}
	tr, err := loop.Run(ctx, r.Manifest.Prompt)
	if tr == nil {
		return nil, nil, fmt.Errorf("the live turn loop: %w", err)
	}
	calls := make([]Match, 0, len(tr.Observations))
	for _, o := range tr.Observations {
		calls = append(calls, Match{CallID: o.CallID, Tool: o.Tool, Arguments: o.Arguments})
	}
	notes := []string{fmt.Sprintf("the model stopped (%s) after %d requests", tr.Stop, tr.Steps)}
	if err != nil {
		// What the model did before the loop failed is graded all the same.
		notes = []string{fmt.Sprintf("the live turn loop stopped after %d requests: %v", tr.Steps, err)}
	}
	if tr.InvalidArguments > 0 {
		notes = append(notes, fmt.Sprintf("%d calls had arguments that were not a JSON object (answered as errors, never sent)", tr.InvalidArguments))
	}
	return calls, notes, nil
}
