// Package mcpcontent reads an MCP result's content array as the kernel and
// the bridge check it, without copying it: a result may be tens of MiB,
// and every copy of it on the way is paid per call in flight (reliability
// row 48).
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
// that may be large, are checked to be strings without being copied.
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
			Data     stringOnly `json:"data"`
			MIMEType string     `json:"mimeType"`
		}
		return json.Unmarshal(item, &c)
	}
	_, err := mcp.UnmarshalContent(item)
	return err
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
