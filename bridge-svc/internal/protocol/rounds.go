package protocol

import (
	"slices"
	"strings"
)

// capabilityMethods are the input requests (SEP-2322) and the client
// capability that answers each.
var capabilityMethods = []struct{ capability, method string }{
	{"elicitation", "elicitation/create"},
	{"roots", "roots/list"},
	{"sampling", "sampling/createMessage"},
}

// InputMethods are the input requests a client that declared caps can
// answer, sorted.
func InputMethods(caps []string) []string {
	var out []string
	for _, cm := range capabilityMethods {
		if slices.Contains(caps, cm.capability) {
			out = append(out, cm.method)
		}
	}
	slices.Sort(out)
	return out
}

// MissingCapability is the -32021 error for input requests the client
// cannot answer: data.requiredCapabilities is a ClientCapabilities object
// naming the capability of each.
func MissingCapability(methods []string) *RPCError {
	required := map[string]any{}
	var names []string
	for _, cm := range capabilityMethods {
		if slices.Contains(methods, cm.method) {
			required[cm.capability] = map[string]any{}
			names = append(names, cm.capability)
		}
	}
	msg := "missing required client capability"
	if len(names) > 0 {
		msg += ": " + strings.Join(names, ", ")
	}
	return &RPCError{Code: CodeMissingCapability, Message: msg,
		Data: map[string]any{"requiredCapabilities": required}}
}
