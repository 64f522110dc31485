package mcpserver

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// The unknown-name workaround, whole. ADR 0004: a tools/call for a name the
// turn did not publish must reach the kernel, to be refused as a result and
// recorded. mcp-go answers such a call with JSON-RPC -32602 before any code
// of ours runs, so a BeforeCallTool hook rewrites the name to a reserved
// dispatcher tool and keeps the requested name in the request's context;
// the tool handler forwards the requested name, and the tool filter hides
// the dispatcher from tools/list.

// dispatcherName is the reserved tool every unpublished name is rewritten
// to. It contains a space, which ToolNameSchema never admits, so it can
// never shadow a catalogue tool.
const dispatcherName = "sharedos dispatch"

// callState travels in a request's context (withCallState) so the hook, the
// tool filter, the handler and the response writer of one request share
// what each learned.
type callState struct {
	requested string
	rewritten bool
	jsonrpcID any
	// handled is set once the tool handler runs: the call is then recorded
	// by the kernel; a tools/call mcp-go refused before is recorded by route.
	handled atomic.Bool
	// lookedUp is set when mcp-go, its checks of the request passed, looks
	// the prompt or resource up (its hook runs just before): a refusal
	// after it is of the name alone.
	lookedUp atomic.Bool
	// resourceURI is the URI a resources/read requested when mcp-go was
	// handed a stand-in for it (pinnedEntries.beforeRead): the one read.
	resourceURI string
	// cancelled is set by the handler of a call that was cancelled: nothing
	// more is sent for the request (response).
	cancelled atomic.Bool
	// resp is the request's response writer (progress events go to it).
	resp *response
	// msg is the request as route pre-parsed it; modern: it is 2026-07-28.
	msg    *protocol.Message
	modern bool
	// ask relays an input round to a 2025-era session's client, which
	// declared it can answer inputMethods (nil: not such a call).
	ask          func(context.Context, json.RawMessage, time.Time) (json.RawMessage, error)
	inputMethods []string
	// replaced, set by the handler, is the protocol error the request is
	// answered with instead of mcp-go's answer (response).
	replaced atomic.Pointer[protocol.RPCError]
}

type callStateKey struct{}

func stateFrom(ctx context.Context) *callState {
	s, _ := ctx.Value(callStateKey{}).(*callState)
	return s
}

// withCallState returns ctx carrying a fresh state for one request.
func withCallState(ctx context.Context) (context.Context, *callState) {
	st := &callState{}
	return context.WithValue(ctx, callStateKey{}, st), st
}

// dispatcherTool is the hidden tool unpublished names are served by.
func dispatcherTool() mcp.Tool {
	return mcp.NewToolWithRawSchema(dispatcherName, "", json.RawMessage(`{"type":"object"}`))
}

// unknownNames knows the names a turn published.
type unknownNames struct {
	published map[string]bool
}

// beforeCall is the BeforeCallTool hook: it notes the JSON-RPC id and
// rewrites an unpublished name to the dispatcher.
func (u unknownNames) beforeCall(ctx context.Context, id any, req *mcp.CallToolRequest) {
	st := stateFrom(ctx)
	if st == nil {
		return
	}
	st.jsonrpcID = id
	if !u.published[req.Params.Name] {
		st.requested, st.rewritten = req.Params.Name, true
		req.Params.Name = dispatcherName
	}
}

// filter hides the dispatcher from tools/list; a rewritten call must still
// find it (mcp-go filters the tools it looks a call up in too).
func (u unknownNames) filter(ctx context.Context, in []mcp.Tool) []mcp.Tool {
	if st := stateFrom(ctx); st != nil && st.rewritten {
		return in
	}
	out := in[:0:0]
	for _, t := range in {
		if t.Name != dispatcherName {
			out = append(out, t)
		}
	}
	return out
}

// requested is the name the client asked for (undoing the rewrite) and the
// JSON-RPC id of the call.
func requested(ctx context.Context, req mcp.CallToolRequest) (name string, jsonrpcID any) {
	name = req.Params.Name
	if st := stateFrom(ctx); st != nil {
		jsonrpcID = st.jsonrpcID
		if st.rewritten {
			name = st.requested
		}
	}
	return name, jsonrpcID
}
