package inputround

import "slices"

// Method is one input request and the client capability that answers it.
type Method struct {
	// Name is the request's JSON-RPC method.
	Name string
	// Capability is the member of ClientCapabilities a client declares to
	// say it answers Name.
	Capability string
}

// Methods are every input request MCP defines, sorted by Name.
var Methods = []Method{
	{Name: "elicitation/create", Capability: "elicitation"},
	{Name: "roots/list", Capability: "roots"},
	{Name: "sampling/createMessage", Capability: "sampling"},
}

// Known reports whether name is an input request.
func Known(name string) bool {
	return slices.ContainsFunc(Methods, func(m Method) bool { return m.Name == name })
}

// Names are the names of every input request, sorted.
func Names() []string {
	out := make([]string, len(Methods))
	for i, m := range Methods {
		out[i] = m.Name
	}
	return out
}

// Answerable are the input requests a client that declared the
// capabilities caps can answer (or that the capabilities caps a -32021
// error names would answer), sorted; capabilities that answer none are
// left out.
func Answerable(caps []string) []string {
	var out []string
	for _, m := range Methods {
		if slices.Contains(caps, m.Capability) {
			out = append(out, m.Name)
		}
	}
	return out
}

// Capabilities are the capabilities that answer names, in the order of
// Methods; names that are no input request are left out.
func Capabilities(names []string) []string {
	var out []string
	for _, m := range Methods {
		if slices.Contains(names, m.Name) {
			out = append(out, m.Capability)
		}
	}
	return out
}
