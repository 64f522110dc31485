package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/time/rate"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/mcptool"
	"github.com/sharedos/toolshare/services/platform/memo"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Meta keys the bridge adds.
const (
	// MetaToolMetadata is each listed tool's {namespace, source}.
	MetaToolMetadata = "io.sharedos/metadata"
	// MetaCatalogHash is the tools/list result's pinned catalogHash.
	MetaCatalogHash = "io.sharedos/catalogHash"
)

// Server identity in initialize / server/discover.
const (
	ServerName    = "sharedos-bridge"
	ServerVersion = "0.1.0"
)

// turnServer is one lease's MCP server.
type turnServer struct {
	turn *forward.Turn
	http *server.StreamableHTTPServer
	// sessions checks the turn's 2025-era session ids.
	sessions *sessionIDs
	// initialize is the turn's budget of 2025-era initialize requests on
	// this pod: a harness initializes a few times per turn, a flood is
	// refused 429 before mcp-go does any work for it.
	initialize *rate.Limiter
	// entries are the prompts and resources the turn pinned.
	entries pinnedEntries
}

// progressNotifier sends each progress report of a call to its client as
// notifications/progress for token, on the request's own response stream,
// ahead of the result (response.event). The kernel has already
// rate-limited them.
func progressNotifier(ctx context.Context, token mcp.ProgressToken) func(*sharedosv1.Progress) {
	st := stateFrom(ctx)
	return func(p *sharedosv1.Progress) {
		if st == nil || st.resp == nil || ctx.Err() != nil {
			return
		}
		params := map[string]any{"progressToken": token, "progress": p.GetProgress()}
		if p.GetTotal() > 0 {
			params["total"] = p.GetTotal()
		}
		if p.GetMessage() != "" {
			params["message"] = p.GetMessage()
		}
		msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
		if err == nil {
			st.resp.event(msg)
		}
	}
}

// forget drops the 2025-era session an initialize just registered on this
// pod, through mcp-go's own termination path (a DELETE of the session that
// nobody sees): sessions are stateless here — any pod checks an id from the
// lease alone and serves it with a per-request session — so keeping one
// would only hold memory until the turn closes (issue 17 item 8: 10 KiB per
// initialize, 249 MB for 20,000).
func (t *turnServer) forget(ctx context.Context, sessionID string) {
	if sessionID == "" {
		return
	}
	t.http.Handle(&discard{}, &server.HTTPRequest{
		Method:  http.MethodDelete,
		Header:  http.Header{server.HeaderKeySessionID: {sessionID}},
		Context: context.WithoutCancel(ctx),
	})
}

// mcpTool is the MCP definition of a pinned tool: schemas verbatim (raw),
// annotations through mcp-go's typed ToolAnnotation (the one field mcp-go
// cannot emit raw: keys outside title/readOnlyHint/destructiveHint/
// idempotentHint/openWorldHint are dropped, and absent annotations go out
// as {}), and _meta["io.sharedos/metadata"] = {namespace, source}.
func mcpTool(pt *sharedosv1.PublishedTool, portable bool) (mcp.Tool, error) {
	name := pt.GetName()
	if portable {
		name = forward.PortableName(name)
	}
	tool, err := mcptool.Build(pt, name) // what the catalogue checked at registration
	if err != nil {
		return tool, fmt.Errorf("tool %s: %w", pt.GetName(), err)
	}
	tool.Meta = &mcp.Meta{AdditionalFields: map[string]any{MetaToolMetadata: map[string]any{
		"namespace": pt.GetMetadata().GetNamespace(),
		"source":    pt.GetMetadata().GetSource(),
	}}}
	return tool, nil
}

// ValidateTools reports the first pinned tool this bridge could not serve;
// OpenTurn refuses such a catalogue rather than hand out a URL that fails.
// A tool is checked once per process: its digest (of its canonical form)
// names it, and one that served once serves again (≈ 28 % of OpenTurn's
// CPU with 50 tools went to checking the same tools every turn).
func ValidateTools(tools []*sharedosv1.PublishedTool) error {
	for _, pt := range tools {
		if servable.has(pt) {
			continue
		}
		if _, err := mcpTool(pt, false); err != nil {
			return err
		}
		servable.add(pt)
	}
	return nil
}

// servable is the set of tool digests ValidateTools passed, bounded: past
// maxServable it starts again empty.
var servable = digestSet{memo.New[string, struct{}](maxServable)}

const maxServable = 1 << 16

type digestSet struct {
	m *memo.Bounded[string, struct{}]
}

// servableKey is the tool's digest with its name (the digest covers the name; the
// name keeps a tool without a digest from sharing an entry).
func servableKey(pt *sharedosv1.PublishedTool) string { return pt.GetDigest() + "\x00" + pt.GetName() }

func (d digestSet) has(pt *sharedosv1.PublishedTool) bool {
	if pt.GetDigest() == "" {
		return false
	}
	_, ok := d.m.Get(servableKey(pt))
	return ok
}

func (d digestSet) add(pt *sharedosv1.PublishedTool) {
	if pt.GetDigest() == "" {
		return
	}
	d.m.Put(servableKey(pt), struct{}{})
}

// newTurnServer builds the MCP server of lease l.
func newTurnServer(l *leases.Lease, fwd *forward.Forwarder, logger *slog.Logger, initialize *rate.Limiter) (*turnServer, error) {
	tools := make([]server.ServerTool, 0, len(l.Tools)+1)
	published := make(map[string]bool, len(l.Tools))
	for _, pt := range l.Tools {
		tool, err := mcpTool(pt, l.PortableNames)
		if err != nil {
			return nil, err
		}
		name := tool.Name
		published[name] = true
		tools = append(tools, server.ServerTool{Tool: tool})
	}
	turn := forward.NewTurn(l.TurnID, l.Grant, l.CatalogHash, l.Tools, l.Prompts, l.Resources, l.Harness.GetName(), l.PortableNames)

	unknown := unknownNames{published: published}
	handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, id := requested(ctx, req)
		st := stateFrom(ctx)
		if st != nil {
			st.handled.Store(true)
		}
		var meta map[string]any
		if req.Params.Meta != nil {
			meta = req.Params.Meta.AdditionalFields
		}
		fr := inputRequest(st)
		fr.Name, fr.Arguments, fr.JSONRPCID, fr.Meta = name, req.Params.RawArguments, id, meta
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			fr.Progress = progressNotifier(ctx, req.Params.Meta.ProgressToken)
		}
		res, rerr := fwd.Call(ctx, turn, fr)
		if rerr != nil && st != nil {
			// Answered with a protocol error (recorded): mcp-go's answer to
			// the error returned here never reaches the client (response).
			if st.msg != nil {
				rerr.ID = st.msg.ID
			}
			st.replaced.Store(rerr)
			return nil, errReplaced
		}
		if res == nil {
			// Cancelled: nothing more is sent for the request (response).
			if st != nil {
				st.cancelled.Store(true)
			}
			return nil, errCancelled
		}
		return res, nil
	}
	for i := range tools {
		tools[i].Handler = handler
	}

	tools = append(tools, server.ServerTool{Tool: dispatcherTool(), Handler: handler})

	entries := pinnedOf(l)
	hooks := &server.Hooks{}
	hooks.AddBeforeCallTool(unknown.beforeCall)
	hooks.AddBeforeGetPrompt(func(ctx context.Context, _ any, _ *mcp.GetPromptRequest) { lookingUp(ctx) })
	hooks.AddBeforeReadResource(entries.beforeRead)
	hooks.AddAfterListTools(func(_ context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		if res == nil {
			return
		}
		if res.Meta == nil {
			res.Meta = &mcp.Meta{AdditionalFields: map[string]any{}}
		}
		if res.Meta.AdditionalFields == nil {
			res.Meta.AdditionalFields = map[string]any{}
		}
		res.Meta.AdditionalFields[MetaCatalogHash] = l.CatalogHash
	})

	mcpSrv := server.NewMCPServer(ServerName, ServerVersion,
		server.WithToolCapabilities(false),
		// A turn's prompts and resources are pinned: nothing changes to
		// announce, and no subscription is offered (route acknowledges a
		// 2025-era resources/subscribe; nothing is pushed).
		server.WithPromptCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completions{entries}),
		server.WithResourceCompletionProvider(completions{entries}),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithToolFilter(unknown.filter),
	)
	mcpSrv.AddTools(tools...)
	addEntries(mcpSrv, l, entryHandlers{fwd: fwd, turn: turn})

	sessions := &sessionIDs{turnID: l.TurnID, key: l.TokenHash[:]}
	httpSrv := server.NewStreamableHTTPServer(mcpSrv,
		server.WithSessionIdManagerResolver(sessions),
		// The standalone GET stream has nothing to carry for a fixed
		// per-turn catalogue; every CLI measured tolerates 405.
		server.WithDisableStreaming(true),
		// Host is checked by the edge on every socket, not only loopback.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(logger.With(slog.String(telemetry.LogTurnID, l.TurnID))),
	)
	return &turnServer{turn: turn, http: httpSrv, sessions: sessions, initialize: initialize, entries: entries}, nil
}
