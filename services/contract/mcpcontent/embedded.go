package mcpcontent

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// EmbeddedURI is the URI item, one content item Check takes, embeds a
// resource's contents under, as the bridge reads it (mcp.UnmarshalContent:
// keys matched folded, the last of those repeated) and so serves it; ok is
// false when item is no embedded resource. Nothing of item is copied but
// the URI.
func EmbeddedURI(item []byte) (uri string, ok bool) {
	var c struct {
		Type     any `json:"type"`
		Resource struct {
			URI string `json:"uri"`
		} `json:"resource"`
	}
	if json.Unmarshal(item, &c) != nil || c.Type != mcp.ContentTypeResource {
		return "", false
	}
	return c.Resource.URI, true
}
