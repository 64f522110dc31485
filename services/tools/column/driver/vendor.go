package driver

import (
	"errors"
	"fmt"

	"github.com/sharedos/toolshare/services/contract/toolname"
)

// Vendor names a model provider's API-layer tool-call shape.
type Vendor string

// The vendor shapes the driver speaks.
const (
	// Anthropic is the Anthropic Messages API: tool definitions
	// {name, description, input_schema}, tool_use content blocks and
	// tool_result blocks with is_error.
	Anthropic Vendor = "anthropic"
	// OpenAIResponses is the OpenAI Responses API: function tools, function_call
	// output items whose arguments are JSON text in a string, and
	// function_call_output items (which have no error flag).
	OpenAIResponses Vendor = "openai-responses"
	// Pi is pi-ai (@mariozechner/pi-ai): Tool {name, description, parameters},
	// toolCall content blocks and toolResult messages with isError.
	Pi Vendor = "pi"
)

// Vendors are the vendor shapes the driver speaks, in a fixed order.
func Vendors() []Vendor { return []Vendor{Anthropic, OpenAIResponses, Pi} }

// Valid reports whether v is one of Vendors.
func (v Vendor) Valid() bool { return v == Anthropic || v == OpenAIResponses || v == Pi }

func (v Vendor) check() error {
	if !v.Valid() {
		return fmt.Errorf("vendor %q: must be one of %q, %q, %q", string(v), Anthropic, OpenAIResponses, Pi)
	}
	return nil
}

// MaxNameLen is the longest function name the vendors accept: Anthropic and
// OpenAI allow ^[a-zA-Z0-9_-]{1,64}$, and the driver holds pi to the same rule
// (its tools end up on one of those APIs).
const MaxNameLen = 64

// fitsVendor reports whether name satisfies ^[a-zA-Z0-9_-]{1,64}$.
func fitsVendor(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// portableName is the vendor name of a canonical tool name that does not
// fit the vendor rule. It is the bridge's own portable spelling
// (bridge-svc/internal/forward.PortableName, which is exactly
// toolname.CollisionKey): every character outside [A-Za-z0-9_] becomes '_',
// so files.read is files_read. Names that fit are never rewritten.
func portableName(name string) string { return toolname.CollisionKey(name) }

// NameError says why a catalogue cannot be rendered for a vendor: a tool
// whose vendor name breaks the vendor rule, or two tools that would share
// one vendor name. The driver never rewrites a name to make it fit.
type NameError struct {
	Vendor Vendor
	// Tool is the canonical name of the tool at fault.
	Tool string
	// Other is the canonical name of the tool Tool collides with ("" when
	// the error is about Tool alone).
	Other string
	// VendorName is the name Tool would have on the vendor's wire.
	VendorName string
	// Detail is the rule broken.
	Detail string
}

func (e *NameError) Error() string {
	if e.Other != "" {
		return fmt.Sprintf("%s catalogue: tools %q and %q would both be named %q: %s", e.Vendor, e.Other, e.Tool, e.VendorName, e.Detail)
	}
	return fmt.Sprintf("%s catalogue: tool %q (vendor name %q): %s", e.Vendor, e.Tool, e.VendorName, e.Detail)
}

// ShapeError says which field of a vendor tool-call item is not of the
// vendor's shape. Nothing was sent to the turn and nothing can be answered:
// the item has no call id and name to answer to.
type ShapeError struct {
	Vendor Vendor
	// Field is the JSON field at fault ("" for the item as a whole).
	Field  string
	Detail string
}

func (e *ShapeError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s tool call: %s", e.Vendor, e.Detail)
	}
	return fmt.Sprintf("%s tool call: field %q: %s", e.Vendor, e.Field, e.Detail)
}

// ErrInvalidArguments matches every *ArgumentsError with errors.Is.
var ErrInvalidArguments = errors.New("tool call arguments are not a JSON object")

// ArgumentsError is a tool call whose arguments are not a JSON object (MCP's
// params.arguments must be one): invalid JSON text in a Responses arguments
// string, or any JSON value other than an object. The call is not sent to
// the turn; it is answered to the model as an error result in the vendor's
// shape (Catalogue.RenderInvalidArguments), and the caller can count it.
type ArgumentsError struct {
	Vendor Vendor
	// CallID is the vendor's call id.
	CallID string
	// Field is the vendor field holding the arguments ("input", "arguments").
	Field  string
	Detail string
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("%s tool call %q: field %q: %s; the call was not sent", e.Vendor, e.CallID, e.Field, e.Detail)
}

// Unwrap makes errors.Is(err, ErrInvalidArguments) true.
func (e *ArgumentsError) Unwrap() error { return ErrInvalidArguments }
