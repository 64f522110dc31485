package driver

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// block is one piece of an MCP result as the vendors can carry it: a text,
// or an image (base64 data and its MIME type).
type block struct {
	text            string
	image           bool
	data, mediaType string
}

// blocks maps an MCP result's content, in order, to text and image blocks:
//
//   - text → its text;
//   - image → an image block (openai-responses, which has no image in a
//     function_call_output string, gets the text "[image MIME]");
//   - audio → the text "[audio MIME]";
//   - resource_link → the text "[resource_link URI name=NAME mimeType=MIME]"
//     (name and mimeType only when set, the name quoted as a Go string);
//   - embedded text resource → "[resource URI mimeType=MIME]" and, on the
//     next line, its text;
//   - embedded blob resource → "[resource URI mimeType=MIME blob]";
//   - anything else → "[TYPE content]".
//
// structuredContent, when the content holds no text block, is added last
// as a text block of its JSON (the bytes the server sent).
func blocks(res *mcp.CallToolResult) []block {
	out := make([]block, 0, len(res.Content)+1)
	hasText := false
	for _, c := range res.Content {
		switch c := value(c).(type) {
		case mcp.TextContent:
			hasText = true
			out = append(out, block{text: c.Text})
		case mcp.ImageContent:
			out = append(out, block{image: true, data: c.Data, mediaType: c.MIMEType})
		case mcp.AudioContent:
			out = append(out, block{text: "[audio " + c.MIMEType + "]"})
		case mcp.ResourceLink:
			out = append(out, block{text: "[resource_link " + c.URI + attrs("name", quoteIfSet(c.Name), "mimeType", c.MIMEType) + "]"})
		case mcp.EmbeddedResource:
			r := c.Resource
			switch p := r.(type) {
			case *mcp.TextResourceContents:
				r = *p
			case *mcp.BlobResourceContents:
				r = *p
			}
			switch r := r.(type) {
			case mcp.TextResourceContents:
				out = append(out, block{text: "[resource " + r.URI + attrs("mimeType", r.MIMEType) + "]\n" + r.Text})
			case mcp.BlobResourceContents:
				out = append(out, block{text: "[resource " + r.URI + attrs("mimeType", r.MIMEType) + " blob]"})
			default:
				out = append(out, block{text: "[resource content]"})
			}
		default:
			out = append(out, block{text: "[" + contentType(c) + " content]"})
		}
	}
	if !hasText {
		if sc := structured(res); sc != nil {
			out = append(out, block{text: string(sc)})
		}
	}
	return out
}

// value is c itself for content held by pointer, so both spellings map alike.
func value(c mcp.Content) mcp.Content {
	switch p := c.(type) {
	case *mcp.TextContent:
		if p != nil {
			return *p
		}
	case *mcp.ImageContent:
		if p != nil {
			return *p
		}
	case *mcp.AudioContent:
		if p != nil {
			return *p
		}
	case *mcp.ResourceLink:
		if p != nil {
			return *p
		}
	case *mcp.EmbeddedResource:
		if p != nil {
			return *p
		}
	}
	return c
}

func structured(res *mcp.CallToolResult) json.RawMessage {
	if len(res.RawStructuredContent) > 0 {
		return res.RawStructuredContent
	}
	if res.StructuredContent == nil {
		return nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil
	}
	return b
}

func contentType(c mcp.Content) string {
	b, err := json.Marshal(c)
	if err == nil {
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(b, &t) == nil && t.Type != "" {
			return t.Type
		}
	}
	return "unknown"
}

// attrs renders " k=v" for each pair whose value is set.
func attrs(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			b.WriteString(" " + kv[i] + "=" + kv[i+1])
		}
	}
	return b.String()
}

func quoteIfSet(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

// errorPrefix starts an openai-responses output whose result is an error
// but whose text does not say so itself: a function_call_output has no
// error flag, so the text has to carry it. SharedOS refusals already begin
// with "denied: " or "failed: " and get nothing added.
const errorPrefix = "error: "

// RenderResult renders the MCP result of call in the vendor's shape:
//
//   - anthropic: {"type":"tool_result","tool_use_id":ID,"content":[...],"is_error":B}
//     with text blocks {"type":"text","text":T} (empty texts left out: the
//     Messages API refuses empty text blocks) and image blocks
//     {"type":"image","source":{"type":"base64","media_type":M,"data":D}};
//   - openai-responses: {"type":"function_call_output","call_id":ID,"output":TEXT},
//     TEXT the blocks' texts joined by "\n", images as "[image MIME]", and
//     "error: " in front when the result is an error whose text does not
//     already begin with "denied: " or "failed: ";
//   - pi: {"role":"toolResult","toolCallId":ID,"toolName":NAME,"content":[...],"isError":B}
//     with {"type":"text","text":T} and {"type":"image","data":D,"mimeType":M};
//     NAME is the name the model called. pi-ai's ToolResultMessage also has
//     a timestamp (milliseconds), which belongs to the caller's transcript
//     and is not rendered here.
//
// Texts keep their content and order exactly; how other MCP content maps
// to text is the rule of blocks (see the package documentation).
func (c *Catalogue) RenderResult(call Call, res *mcp.CallToolResult) json.RawMessage {
	return render(c.vendor, call, blocks(res), res.IsError)
}

// RenderInvalidArguments is the answer to a call whose arguments are not a
// JSON object (ParseCall's *ArgumentsError): an error result in the
// vendor's shape whose text is "failed: the call was not sent: invalid
// arguments: " and what is wrong. The call was not sent to the turn and
// left no record.
func (c *Catalogue) RenderInvalidArguments(call Call, err *ArgumentsError) json.RawMessage {
	text := outcome.FailedPrefix + "the call was not sent: invalid arguments: " + err.Detail
	return render(c.vendor, call, []block{{text: text}}, true)
}

func render(v Vendor, call Call, bs []block, isError bool) json.RawMessage {
	var o object
	switch v {
	case Anthropic:
		items := make([]json.RawMessage, 0, len(bs))
		for _, b := range bs {
			switch {
			case b.image:
				var src object
				src.str("type", "base64").str("media_type", b.mediaType).str("data", b.data)
				var img object
				items = append(items, img.str("type", "image").raw("source", src.bytes()).bytes())
			case b.text != "":
				var t object
				items = append(items, t.str("type", "text").str("text", b.text).bytes())
			}
		}
		o.str("type", "tool_result").str("tool_use_id", call.ID).raw("content", array(items)).boolean("is_error", isError)
	case OpenAIResponses:
		texts := make([]string, len(bs))
		for i, b := range bs {
			texts[i] = b.text
			if b.image {
				texts[i] = "[image " + b.mediaType + "]"
			}
		}
		out := strings.Join(texts, "\n")
		if isError && !strings.HasPrefix(out, outcome.DeniedPrefix) && !strings.HasPrefix(out, outcome.FailedPrefix) {
			out = errorPrefix + out
		}
		o.str("type", "function_call_output").str("call_id", call.ID).str("output", out)
	case Pi:
		items := make([]json.RawMessage, 0, len(bs))
		for _, b := range bs {
			var it object
			if b.image {
				it.str("type", "image").str("data", b.data).str("mimeType", b.mediaType)
			} else {
				it.str("type", "text").str("text", b.text)
			}
			items = append(items, it.bytes())
		}
		o.str("role", "toolResult").str("toolCallId", call.ID).str("toolName", call.VendorName).
			raw("content", array(items)).boolean("isError", isError)
	}
	return o.bytes()
}

// Observation is what one executed call did, for grading: the vendor's call
// id beside the kernel's, from the result's _meta["io.sharedos/outcome"].
type Observation struct {
	// VendorCallID is the model's id for the call (Call.ID).
	VendorCallID string `json:"vendorCallId"`
	// Tool is the tools/call name (Call.Tool: canonical when rendered).
	Tool string `json:"tool"`
	// Arguments are the call's arguments as sent (Call.Arguments): what a
	// live or mcp column matches a declared attempt's resource in.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Status is the outcome's status ("succeeded", "denied", "failed", …);
	// "" when the call was not sent (invalid arguments) or the result is an
	// error that carries no outcome.
	Status string `json:"status,omitempty"`
	// Code is the outcome's code (permission_denied, tool_unavailable, …).
	Code string `json:"code,omitempty"`
	// CallID and DecisionID are the kernel's ids of the attempt's record and
	// of its authorization decision.
	CallID     string `json:"callId,omitempty"`
	DecisionID string `json:"decisionId,omitempty"`
	// Outcome reports whether the result carried _meta["io.sharedos/outcome"]
	// (every SharedOS answer does, a success too). A result without it (not
	// from SharedOS, or from a bridge before the success carried it) is
	// observed as Status "succeeded" when it is not an error, with no CallID.
	Outcome bool `json:"outcome"`
}

// outcomeMeta is the value of _meta[outcome.MetaKey] as outcome.Meta
// writes it.
type outcomeMeta struct {
	Status     string `json:"status"`
	Code       string `json:"code"`
	CallID     string `json:"callId"`
	DecisionID string `json:"decisionId"`
}

// Observe reads the outcome of call from its MCP result.
func Observe(call Call, res *mcp.CallToolResult) Observation {
	obs := Observation{VendorCallID: call.ID, Tool: call.Tool, Arguments: call.Arguments}
	if res.Meta != nil {
		if v, ok := res.Meta.AdditionalFields[outcome.MetaKey]; ok {
			var m outcomeMeta
			if b, err := json.Marshal(v); err == nil && json.Unmarshal(b, &m) == nil {
				obs.Status, obs.Code, obs.CallID, obs.DecisionID, obs.Outcome = m.Status, m.Code, m.CallID, m.DecisionID, true
				return obs
			}
		}
	}
	if !res.IsError && res.ResultType != mcp.ResultTypeInputRequired {
		obs.Status = outcome.StatusName(sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED)
	}
	return obs
}
