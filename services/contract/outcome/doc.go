// Package outcome is the refusal contract of SharedOS toolshare, in one place
// for the kernel (which decides) and the bridge (which tells a harness).
//
// Every tools/call ends in one of four statuses. succeeded is the handler's
// answer. denied (permission_denied, tool_unavailable, duplicate_call,
// invalid_grant) is a correct answer of "no". failed (invalid_arguments, invalid_request,
// handler_error, timeout, authz_unavailable, authz_error, missing_capability,
// tool_error, upstream_unavailable, record_unavailable, internal) means the
// call could not be carried out. cancelled means the client gave up; nothing more is sent.
//
// denied and failed are both MCP results with isError true, except the
// refusals ARCHITECTURE.md's table answers as JSON-RPC errors (a request the
// edge cannot take, a missing capability, a refused prompts/get or
// resources/read, whose results have no error form; the error's data
// carries the same outcome). They stay distinguishable in two channels: the text a model
// reads starts with "denied:" or "failed:" (some harnesses drop isError, so
// the text must carry the meaning on its own), and
// _meta["io.sharedos/outcome"] carries {status, code, callId, decisionId}.
// A succeeded answer carries the same _meta (status "succeeded", the
// record's callId): every answer names the record that backs it.
package outcome
