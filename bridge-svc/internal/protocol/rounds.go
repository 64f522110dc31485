package protocol

import (
	"strings"

	"github.com/sharedos/toolshare/services/contract/inputround"
)

// InputMethods are the input requests a client that declared caps can
// answer, sorted.
func InputMethods(caps []string) []string { return inputround.Answerable(caps) }

// MissingCapability is the -32021 error for input requests the client
// cannot answer: data.requiredCapabilities is a ClientCapabilities object
// naming the capability of each.
func MissingCapability(methods []string) *RPCError {
	required := map[string]any{}
	names := inputround.Capabilities(methods)
	for _, c := range names {
		required[c] = map[string]any{}
	}
	msg := "missing required client capability"
	if len(names) > 0 {
		msg += ": " + strings.Join(names, ", ")
	}
	return &RPCError{Code: CodeMissingCapability, Message: msg,
		Data: map[string]any{"requiredCapabilities": required}}
}
