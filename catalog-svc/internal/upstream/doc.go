// Package upstream brokers existing MCP servers as SharedOS providers
// (ADR 0019). An upstream — a Streamable HTTP endpoint or a stdio command
// catalog-svc starts — is acquired by listing its tools once: each becomes
// the registration <namespace>.<upstream name> with source
// "mcp:<namespace>", its schemas and annotations as the upstream gave them
// (annotations are untrusted facts, never authority) and a requirement the
// operator chose. Calls reach it only through the kernel pipeline: the
// handler target "mcp:<namespace>" is served by Handlers, an in-process
// ToolHandlerService client that forwards one tools/call to the upstream.
//
// Acquired definitions are pinned by their published digest. A refresh
// that finds a changed definition does not publish it: the tool is
// quarantined (deregistered, so new turns cannot see it and calls of turns
// that pinned the old one are refused) until an operator approves the new
// digest. Secrets are references, resolved when connecting, and sent only
// to their upstream.
//
// A stdio server is third-party code running as catalog-svc's own user:
// it gets a minimal environment, catalog-svc is non-dumpable
// (ProtectFromChildren), and on Linux it starts confined by Landlock from
// what Guard.Private names — the kernel's keys, journal and secret
// references' directories (confine_linux.go), with none of catalog-svc's
// descriptors but its pipes (fds_linux.go), in a session of its own: what
// it leaves running when its session ends is killed and reaped — but
// for a helper it daemonized (one that names no server any more), which
// ends with the last server running (family_linux.go).
package upstream
