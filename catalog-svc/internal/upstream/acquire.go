package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
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

// listTools lists every tool of the upstream, page by page.
func (c *conn) listTools(ctx context.Context) ([]listedTool, serverInfo, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, serverInfo{}, err
	}
	cl, info := s.cl, s.info
	if cl.GetServerCapabilities().Tools == nil {
		return nil, info, nil // it offers none
	}
	var out []listedTool
	var cursor mcp.Cursor
	for range maxPages {
		rctx, raw := withRaw(ctx, string(mcp.MethodToolsList))
		req := mcp.ListToolsRequest{}
		req.Params.Cursor = cursor
		res, err := cl.ListToolsByPage(rctx, req)
		if err != nil {
			if ctx.Err() == nil && sessionLost(s, err) { // a listing cut short ends no session
				c.broken(cl)
			}
			return nil, info, fmt.Errorf("tools/list: %w", err)
		}
		var page struct {
			Tools []listedTool `json:"tools"`
		}
		body := raw.get()
		if body == nil {
			return nil, info, fmt.Errorf("tools/list: %w", errNoRaw)
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, info, fmt.Errorf("tools/list: %w", err)
		}
		out = append(out, page.Tools...)
		if err := tooMany(len(out), "tools"); err != nil {
			return nil, info, fmt.Errorf("tools/list: %w", err)
		}
		if res.NextCursor == "" {
			return out, info, nil
		}
		cursor = res.NextCursor
	}
	return nil, info, fmt.Errorf("tools/list: more than %d pages", maxPages)
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
		return nil, fmt.Sprintf("%q is not a valid tool name once qualified: %v", name, err)
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
