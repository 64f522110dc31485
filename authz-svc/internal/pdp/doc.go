// Package pdp is the policy decision point: it loads Rego policies and data
// from a directory, prepares one query per load, swaps the prepared query
// atomically when the directory changes, and evaluates decisions against it.
//
// # Policy contract
//
// The engine evaluates exactly one query, data.sharedos.authz.decision, which
// must be a complete rule (a policy that defines nothing there does not
// load) whose value is an object
//
//	{"allow": <boolean>, "reason": <string>}
//
// reason is shown to a model, so it must not leak secrets. Anything else is a
// deny with reason NoDecisionReason: an undefined result, more or fewer than
// one result, a value that is not an object, or allow that is not a boolean.
// An evaluation error (a builtin error — builtins run with strict errors —, a
// type error on an argument, a cancelled or timed-out evaluation) is never a
// deny and never an allow: Decide returns it as an error and the caller
// reports "no decision". There is no fail-open mode.
//
// FilterTools with action "list" first evaluates the optional set rule
// data.sharedos.authz.visible once, with input
//
//	{"context": ..., "tools": [<tool>, ...], "action": "list"}
//
// and allows exactly the tools whose names are in the set. It must agree
// with decision for action "list" (the example policy's Rego tests check
// that); it exists because one evaluation over 1,000 tools costs about a
// tenth of 1,000 decisions. A policy without the rule (undefined result) is
// evaluated tool by tool with decision; a value that is not a set of names
// (an array included) hides every tool; an evaluation error fails the call.
//
// # Input document
//
// docs/authz-input.md owns it: context, tool, action (one of
// requirement.Actions; never "list" for Authorize), resource, arguments
// exactly as the client sent them (numbers keep their decimal text), and,
// for a "file:" resource, the file facts FileFactsOf derives from it. The
// input is built as an ast.Value by hand and passed with
// rego.EvalParsedInput, which skips OPA's JSON round trip of Go values.
//
// # Loading
//
// Every *.rego file under the directory except *_test.rego is a module
// (Rego v1 syntax). Every *.json, *.yaml or *.yml file is data, placed at
// the path of its directory relative to the root (a root data.json is the
// data root), the way `opa run <dir>` places it; overlapping keys from two
// files fail the load, and so does a served name that is not a regular
// file (a symbolic link, a FIFO) or a link to a directory: skipped, its
// rules would be dropped without a word. A module that calls a refused built-in — every one
// OPA marks nondeterministic but time.now_ns: the network, the host's
// files, the process, chance (docs/authz-input.md) — does not load, and
// the error names it. The policy revision is
// "sha256:" + the hex SHA-256 over the sorted (path, content) pairs of the
// loaded files, so it changes exactly when something that is served changes.
package pdp
