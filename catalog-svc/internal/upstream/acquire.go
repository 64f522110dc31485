package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/toolname"
)

// Source is the metadata.source of every tool acquired from namespace ns,
// and Target its handler target: what routes a call to the upstream.
func Source(ns string) string { return sourcePrefix + ns }

// Target is the handler target of ns's tools (see Handlers).
func Target(ns string) string { return sourcePrefix + ns }

const sourcePrefix = projection.UpstreamSourcePrefix

// listedTool is one entry of an upstream's tools/list result, its JSON
// values kept as the upstream sent them.
type listedTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	// unreadable, when set, is why the entry could not be read: the
	// tool is skipped, with its name when it has one.
	unreadable string
}

// maxPages bounds one listing: an upstream whose cursors never end is
// refused, not followed forever.
const maxPages = 100

// maxListed bounds what one upstream lists of each kind (tools; prompts;
// resources and templates together): a listing past it is refused whole,
// its error in the provider's status and nothing changed, not registered
// in part. Each acquired definition is a catalogue entry every replica
// keeps; an upstream listing thousands is a fault or an attack.
const maxListed = 1000

// tooMany is a listing's refusal past maxListed.
func tooMany(n int, what string) error {
	if n > maxListed {
		return fmt.Errorf("more than %d %s (SharedOS acquires at most %d of one upstream)", maxListed, what, maxListed)
	}
	return nil
}

// listTools lists every tool of the upstream, page by page. A tool whose
// entry cannot be read is listed with why (unreadable), the others as
// they were sent.
func (c *conn) listTools(ctx context.Context) ([]listedTool, serverInfo, error) {
	var out []listedTool
	var info serverInfo
	err := c.listed(ctx, func(s session) error {
		out, info = nil, s.info
		if s.cl.GetServerCapabilities().Tools == nil {
			return nil // it offers none
		}
		return c.pages(ctx, s, string(mcp.MethodToolsList), func(body json.RawMessage) (mcp.Cursor, error) {
			items, next, err := pageOf(body, "tools")
			if err != nil {
				return "", err
			}
			for _, b := range items {
				var t listedTool
				if why := readEntry(b, &t); why != "" {
					t = listedTool{Name: nameOf(b, "name"), unreadable: why}
				}
				out = append(out, t)
			}
			return next, tooMany(len(out), "tools")
		})
	})
	if err != nil {
		return nil, info, err
	}
	return out, info, nil
}

// listed runs list on the live session. A listing that lost its session
// (sessionLost: pages dropped it; an HTTP upstream restarted and no longer
// knows it) runs once more, from its first page, on a new one: a listing
// changes nothing, so the upstream may well see it twice. Over stdio only
// a listing on a session it found runs again: one on a session it started
// itself (the server had exited) lost it to the listing — a server that
// crashes on it — and the next request starts that server anew, not this
// listing a second time: one crash, one start.
func (c *conn) listed(ctx context.Context, list func(session) error) error {
	for again := true; ; again = false {
		s, connected, err := c.dial(ctx)
		if err != nil {
			return err
		}
		err = list(s)
		if err == nil || !again || connected && s.stdio || ctx.Err() != nil || !sessionLost(s, err) {
			return err
		}
	}
}

// pages lists every page of method on s, from the first on, handing each
// raw result to page, which returns the page's nextCursor. The pages
// together are bounded as one message is (maxResponseBytes): what a
// listing keeps, its entries and what it skips, is read from them.
func (c *conn) pages(ctx context.Context, s session, method string, page func(json.RawMessage) (mcp.Cursor, error)) error {
	var cursor mcp.Cursor
	var total int64
	for range maxPages {
		body, err := c.listPage(ctx, s, method, cursor)
		if err != nil {
			if ctx.Err() == nil && sessionLost(s, err) || c.wedged(ctx, s) { // a listing cut short ends no session
				c.broken(s.cl)
			}
			return fmt.Errorf("%s: %w", method, err)
		}
		if total += int64(len(body)); total > maxResponseBytes {
			return fmt.Errorf("%s: more than %d bytes over its pages (SharedOS reads at most that of one listing)", method, maxResponseBytes)
		}
		next, err := page(body)
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
	return fmt.Errorf("%s: more than %d pages", method, maxPages)
}

// wedged: a listing on s let its own timeout pass over stdio
// (errListTimeout, the manager's: not its caller's deadline, which may well
// be shorter — sharedosctl's is) while no call ran on that server. A page
// is the server's to answer at once, and one server serves every call of
// its upstream, so one that let a listing's timeout pass with nothing else
// to do is taken for wedged (alive, reading, answering nothing): its
// session is dropped and the server started anew at the next request,
// rather than every call and refresh waiting out its timeout for as long
// as catalog-svc runs. A server running a call may be busy with it (a
// single-threaded server), and dropping it would end that call; a call's
// timeout drops nothing either: a tool may well run that long, beside
// others on the same server. Over HTTP the upstream's other sessions and
// requests are its own to serve.
func (c *conn) wedged(ctx context.Context, s session) bool {
	if !s.stdio || !errors.Is(context.Cause(ctx), errListTimeout) {
		return false
	}
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	return len(c.running) == 0
}

// errListTimeout is the cause of a listing's context ending at the
// listing's own timeout (listTimeout). It is a context.DeadlineExceeded,
// as that context's error is, for whatever reads the cause instead (an
// HTTP request's error does).
var errListTimeout = fmt.Errorf("the upstream's listing timed out: %w", context.DeadlineExceeded)

// A listing's pages are requested on the session's transport by SharedOS
// itself, as a tools/call is (send.go), not through mcp-go's typed
// ListToolsByPage and the others: those decode the whole page into mcp-go's
// types first, so one entry mcp-go cannot type ({"icons":"x"}, an
// inputSchema that is a string) failed the whole listing, every other
// entry with it. SharedOS reads each entry on its own (pageOf); the one it
// cannot read is skipped with why. The request is the one mcp-go's client
// would send: on a 2026-07-28 session its _meta declares every input
// capability (capabilities) and it carries the Mcp-Method header.

// listParams are a listing request's params.
type listParams struct {
	Cursor mcp.Cursor      `json:"cursor,omitempty"`
	Meta   json.RawMessage `json:"_meta,omitempty"`
}

// listPage requests the page of method at cursor on s and returns its raw
// result. A failure to get an answer is a transport.Error; a JSON-RPC
// error is the error mcp-go makes of it.
func (c *conn) listPage(ctx context.Context, s session, method string, cursor mcp.Cursor) (json.RawMessage, error) {
	meta, err := s.metaWith("", inputround.Names())
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(listParams{Cursor: cursor, Meta: meta})
	if err != nil {
		return nil, fmt.Errorf("%s params: %w", method, err)
	}
	var header http.Header
	if std := mcp.StandardHeaders(s.info.protocol, mcp.MCPMethod(method), params); len(std) > 0 {
		header = http.Header{}
		for k, v := range std {
			header.Set(k, v)
		}
	}
	resp, err := c.send(ctx, s, c.direct(method, params, header))
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	return resp.Result, nil
}

// pageOf reads a listing's page: the entries of its array field, each as
// sent, and its nextCursor. Only a page that is not an object, an array
// field that is not an array or a cursor that is not a string refuse the
// page; an entry is read on its own.
func pageOf(body json.RawMessage, field string) ([]json.RawMessage, mcp.Cursor, error) {
	var page map[string]json.RawMessage
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, "", fmt.Errorf("the result is not an object: %w", err)
	}
	var items []json.RawMessage
	if raw := page[field]; raw != nil {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, "", fmt.Errorf("%s is not an array: %w", field, err)
		}
	}
	var next mcp.Cursor
	if raw := page["nextCursor"]; raw != nil {
		if err := json.Unmarshal(raw, &next); err != nil {
			return nil, "", fmt.Errorf("nextCursor is not a string: %w", err)
		}
	}
	return items, next, nil
}

// readEntry decodes the listed entry b into v; why it cannot, or "".
func readEntry(b json.RawMessage, v any) string {
	const why = "the upstream's definition cannot be read: "
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return why + "it is not an object"
	}
	if err := json.Unmarshal(b, v); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) && te.Field != "" {
			return fmt.Sprintf("%sits %s is a JSON %s", why, te.Field, te.Value)
		}
		return why + err.Error()
	}
	return ""
}

// nameOf is the first of fields that is a string in the object b, "" when
// none is.
func nameOf(b json.RawMessage, fields ...string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	for _, f := range fields {
		var s string
		if json.Unmarshal(m[f], &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// What a listing skips is kept in the provider's record, which every
// spec check and providers get reads: an upstream's name (2 MiB of it, as
// a listing's page allows) is kept to maxSkippedName bytes and the reason
// to maxSkippedReason, each marked where it was cut.
const (
	maxSkippedName   = 256
	maxSkippedReason = 1024
)

// maxServerInfoBytes bounds each of the upstream's own strings a
// provider's status keeps: its protocol version, server name and version
// (serverString).
const maxServerInfoBytes = 256

// serverString is one of the upstream's own strings (protocol version,
// server name and version) as the status keeps it: within
// maxServerInfoBytes, marked where it was cut (so cutting it again leaves
// it as it is). Like every upstream string it is kept as sent otherwise;
// sharedosctl escapes what it shows.
func serverString(s string) string {
	if len(s) <= maxServerInfoBytes {
		return s
	}
	return clip(s, maxServerInfoBytes-48) // the mark takes at most 48
}

// reported is a failed listing's error as the provider's record and the
// log keep it: cut to maxSkippedReason, since its text is the upstream's
// (mcp-go quotes a refused POST's whole body: 8 MiB of it went into
// every providers get and a log line per refresh).
func reported(err error) string { return clip(err.Error(), maxSkippedReason) }

// skipped is the record of an entry of kind ("" a tool) skipped for why.
func skipped(kind, name, why string) *sharedosv1.SkippedTool {
	return &sharedosv1.SkippedTool{Kind: kind, UpstreamName: clip(name, maxSkippedName), Reason: clip(why, maxSkippedReason)}
}

// clip is s cut to at most max bytes, at a character's start, and marked
// with the length it had; s itself when it fits.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…[cut: %d bytes in all]", s[:cut], len(s))
}

// DefaultRequirement is what a call to an acquired tool needs unless the
// operator says otherwise: action call on mcp:<namespace>/<upstream name>.
func DefaultRequirement(ns, upstreamName string) *sharedosv1.Requirement {
	return &sharedosv1.Requirement{Action: requirement.ActionCall, Resource: sourcePrefix + ns + "/" + upstreamName}
}

// registration is t as the registration of upstream spec; "" and a reason
// when its qualified name is not one SharedOS can register.
func registration(spec *sharedosv1.UpstreamProvider, t listedTool) (*sharedosv1.ToolRegistration, string) {
	ns := spec.GetNamespace()
	name := ns + "." + t.Name
	if err := toolname.Validate(name); err != nil {
		return nil, fmt.Sprintf("%q is not a valid tool name once qualified: %v", clip(name, maxSkippedName), err)
	}
	req := DefaultRequirement(ns, t.Name)
	if o := spec.GetRequirements()[name]; o != nil {
		// The upstream's schema is not SharedOS's to close: arguments the
		// requirement names are governed, whatever else the schema admits.
		req = proto.CloneOf(o)
		req.OpenArguments = true
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	reg := &sharedosv1.ToolRegistration{
		Name:             name,
		Description:      desc,
		InputSchemaJson:  nonNull(t.InputSchema),
		OutputSchemaJson: nonNull(t.OutputSchema),
		AnnotationsJson:  nonNull(t.Annotations),
		Metadata:         &sharedosv1.ToolMetadata{Namespace: ns, Source: Source(ns)},
		Class:            sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
		Requirement:      req,
		Handler:          handlerOf(spec),
		ReadOnly:         slices.Contains(spec.GetReadOnly(), name),
	}
	return reg, ""
}

func nonNull(b json.RawMessage) []byte {
	if t := bytes.TrimSpace(b); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return b
}
