// Package mcpcontent reads an MCP result's content array, a prompts/get
// result's messages, and a resources/read result's contents, as the kernel
// and the bridge check them, without copying them: a result may be tens of MiB, and every copy
// of it on the way is paid per call in flight (reliability row 48).
package mcpcontent

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// Raw is a JSON value kept as a slice of the bytes it was decoded from,
// not copied: json.RawMessage copies, where the input of json.Unmarshal
// already holds the value. Only for inputs that are not changed while it
// is in use.
type Raw []byte

// UnmarshalJSON keeps b itself (encoding/json hands an Unmarshaler a
// slice of its input).
func (r *Raw) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// Items are the items of content, a JSON array, each a slice of content.
func Items(content []byte) ([]Raw, error) {
	var items []Raw
	if err := json.Unmarshal(content, &items); err != nil {
		return nil, err
	}
	return items, nil
}

// Check refuses what mcp.UnmarshalContent refuses of item — a missing or
// unknown type, a member of the wrong JSON type — and reports the same
// errors; a text item's text and an image's or audio's data, the members
// that may be large, are checked to be strings without being copied. It
// also refuses what MCP types as base64 and base64.StdEncoding does not
// decode — an image's or audio's data, an embedded resource's blob — which
// mcp.UnmarshalContent takes as any string, and a client that decodes it
// fails on; and tool_use and tool_result items, which mcp.UnmarshalContent
// takes and MCP has only in sampling messages.
func Check(item []byte) error {
	var head struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(item, &head); err != nil {
		return err
	}
	switch head.Type {
	case mcp.ContentTypeText:
		var c struct {
			mcp.Annotated
			Meta *mcp.Meta  `json:"_meta,omitempty"`
			Type string     `json:"type"`
			Text stringOnly `json:"text"`
		}
		return json.Unmarshal(item, &c)
	case mcp.ContentTypeImage, mcp.ContentTypeAudio:
		var c struct {
			mcp.Annotated
			Meta     *mcp.Meta  `json:"_meta,omitempty"`
			Type     string     `json:"type"`
			Data     base64Only `json:"data"`
			MIMEType string     `json:"mimeType"`
		}
		return json.Unmarshal(item, &c)
	}
	c, err := mcp.UnmarshalContent(item)
	if err != nil {
		return err
	}
	switch c.(type) {
	case mcp.ToolUseContent, mcp.ToolResultContent:
		// Sampling's, never a tool's content or a prompt's message (MCP's
		// ContentBlock); a tool_result's own content would be served
		// unchecked (review: an embedded resource of another source's, a
		// blob that is not base64, inside one).
		return fmt.Errorf("a %s item, which MCP has only in sampling messages", head.Type)
	}
	if r, ok := c.(mcp.EmbeddedResource); ok {
		if b, ok := r.Resource.(mcp.BlobResourceContents); ok {
			if err := checkBase64(b.Blob); err != nil {
				return fmt.Errorf("resource.blob: %w", err)
			}
		}
	}
	return nil
}

// CheckResource refuses an item of a resources/read result's contents
// that the bridge cannot serve — what mcp.ParseResourceContents refuses of
// it decoded into a map: no object, no uri string (or an empty one), a
// _meta that is no object, neither a text string nor a blob string — and
// a blob (read when there is no text string, as that parser reads it)
// that base64.StdEncoding does not decode. It returns the item's uri. Its
// text and blob are not copied.
func CheckResource(item []byte) (uri string, err error) {
	var members map[string]Raw // exact keys, as the bridge's map reads them
	if err := json.Unmarshal(item, &members); err != nil {
		return "", err
	}
	if members == nil {
		return "", errors.New("resource contents are not an object")
	}
	if u := members["uri"]; len(u) > 0 && u[0] == '"' {
		if err := json.Unmarshal(u, &uri); err != nil {
			return "", err
		}
	}
	if uri == "" {
		return "", errors.New("resource uri is missing")
	}
	if m, present := members["_meta"]; present && (len(m) == 0 || m[0] != '{') {
		return "", errors.New("_meta must be an object")
	}
	if t := members["text"]; len(t) > 0 && t[0] == '"' {
		return uri, nil
	}
	b := members["blob"]
	if len(b) == 0 || b[0] != '"' {
		return "", errors.New("resource contents have neither a text nor a blob string")
	}
	if err := checkBase64Literal(b); err != nil {
		return "", fmt.Errorf("blob: %w", err)
	}
	return uri, nil
}

// stringOnly checks that a member is what json.Unmarshal takes into a
// string (a string, or null) without keeping it.
type stringOnly struct{}

var errNotString = errors.New("json: cannot unmarshal into Go value of type string")

func (stringOnly) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && (b[0] == '"' || string(b) == "null") {
		return nil
	}
	return fmt.Errorf("%w: %.20s", errNotString, b)
}

// base64Only checks, as stringOnly does, that a member is what json.Unmarshal
// takes into a string, and that the string is base64 (checkBase64Literal),
// without keeping it.
type base64Only struct{}

func (base64Only) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	return checkBase64Literal(b)
}
