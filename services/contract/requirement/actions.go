package requirement

// The actions a requirement may name: the one set catalog-svc accepts at
// registration, the kernel resolves and authz-svc evaluates. A registration
// naming any other action is refused where it enters, rather than failing
// every call at authorization. Policies may rely on input.action being one
// of these.
const (
	ActionList    = "list"
	ActionRead    = "read"
	ActionWrite   = "write"
	ActionSearch  = "search"
	ActionCall    = "call"
	ActionExecute = "execute"
	// ActionGet is getting a prompt (ADR 0018); reading a resource is read.
	ActionGet = "get"
)

// Classes of the catalogue entries that are not tools (ADR 0018): a
// decision about one carries it as input.tool.class, its name being the
// prompt's name or the resource registration's URI (or URI template).
const (
	ClassPrompt   = "prompt"
	ClassResource = "resource"
)

// Actions lists every valid action, for error messages and documentation.
func Actions() []string {
	return []string{ActionList, ActionRead, ActionWrite, ActionSearch, ActionCall, ActionExecute, ActionGet}
}

// IsCallAction reports whether a tool's calls may need a: every action but
// list, which is reserved for catalogue filtering (FilterTools). A call is
// never authorized by the list rule of a policy, which may allow list
// before any resource check.
func IsCallAction(a string) bool { return a != ActionList && IsAction(a) }

// CallActions lists the actions IsCallAction accepts.
func CallActions() []string { return Actions()[1:] }

// IsAction reports whether a is one of Actions.
func IsAction(a string) bool {
	switch a {
	case ActionList, ActionRead, ActionWrite, ActionSearch, ActionCall, ActionExecute, ActionGet:
		return true
	}
	return false
}
