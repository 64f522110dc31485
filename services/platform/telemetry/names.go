package telemetry

// Every span, attribute, metric and service name used across SharedOS lives
// here, so a rename is one edit and dashboards have one reference. Attribute
// names under "sharedos." are ours; "mcp." and "gen_ai." follow the
// OpenTelemetry semantic conventions for MCP and GenAI tool execution.

// Log keys: every service's structured logs and the decision log use these,
// so one turn's or one call's lines join across processes by key. (Span
// attributes have their own names below.)
const (
	LogTurnID      = "turn_id"
	LogCallID      = "call_id"
	LogAttemptID   = "attempt_id"
	LogTool        = "tool"
	LogCatalogHash = "catalog_hash"
	LogHarness     = "harness"
	LogRPCMethod   = "rpc_method"
	LogCaller      = "caller"
	// LogPrincipal, LogTenant and LogRoles are a turn's access context
	// (the grant and open lines: who a turn acts for, and who asked).
	LogPrincipal = "principal"
	LogTenant    = "tenant"
	LogRoles     = "roles"
	// LogUpstream is an upstream MCP server's namespace (ADR 0019).
	LogUpstream = "upstream"
)

// Service names (resource attribute service.name).
const (
	ServiceBridge  = "sharedos-bridge"
	ServiceCatalog = "sharedos-catalog"
	ServiceAuthz   = "sharedos-authz"
	ServiceFiles   = "sharedos-files"
)

// Instrumentation scope names for otel.Tracer / otel.Meter, one per service
// module, so spans can be filtered by the code that produced them.
const (
	ScopeBridge  = "github.com/sharedos/toolshare/bridge-svc"
	ScopeCatalog = "github.com/sharedos/toolshare/catalog-svc"
	ScopeAuthz   = "github.com/sharedos/toolshare/authz-svc"
	ScopeFiles   = "github.com/sharedos/toolshare/services/providers/files"
	// ScopePGDB names the pgx query tracer installed by pgdb.Open in every
	// service's pool.
	ScopePGDB = "github.com/sharedos/toolshare/services/platform/pgdb"
	// ScopePlatform names what services/platform records in every process
	// (the caller authorization of the internal plane).
	ScopePlatform = "github.com/sharedos/toolshare/services/platform"
)

// Span names. gRPC server/client spans come from otelgrpc and are named after
// the RPC; these name the work inside them.
const (
	// The bridge's span per MCP JSON-RPC request is named
	// "{mcp.method.name} {target}" per the semantic conventions; build it
	// with MCPSpanName.

	// MCPMethodOther is the mcp.method.name (and the span name) of a
	// request whose method is none of MCP's: as the semantic conventions
	// do for an unknown HTTP method, one fixed value stands for every
	// string a client may send there.
	MCPMethodOther = "_OTHER"

	// SpanOpenTurn / SpanCloseTurn wrap lease creation and closing.
	SpanOpenTurn  = "sharedos.turn.open"
	SpanCloseTurn = "sharedos.turn.close"
	// SpanListTools covers catalog filtering + projection + hashing.
	SpanListTools = "sharedos.catalog.list_tools"
	// SpanInvokeTool is the kernel pipeline for one ToolCall.
	SpanInvokeTool = "sharedos.runtime.invoke_tool"
	// SpanValidateArguments is argument validation against inputSchema.
	SpanValidateArguments = "sharedos.runtime.validate_arguments"
	// SpanAuthorize is one policy decision (client and PDP side).
	SpanAuthorize = "sharedos.authz.authorize"
	// SpanFilterTools is one batched visibility decision.
	SpanFilterTools = "sharedos.authz.filter_tools"
	// SpanExecuteTool is the handler dispatch; GenAI conventions name it
	// "execute_tool {gen_ai.tool.name}", built with ExecuteToolSpanName.
	SpanExecuteTool = "execute_tool"
	// SpanPolicyReload is one policy bundle (re)load.
	SpanPolicyReload = "sharedos.authz.policy_reload"
)

// MCPSpanName returns the MCP semantic-convention span name
// "{mcp.method.name} {target}" (target omitted when empty), e.g.
// "tools/call files.read". Both parts become an operation name in a trace
// backend: the caller passes a method of MCP (else MCPMethodOther) and a
// target that follows the tool naming rule (else none), never a string as
// a client sent it.
func MCPSpanName(method, target string) string {
	if target == "" {
		return method
	}
	return method + " " + target
}

// ExecuteToolSpanName returns "execute_tool {tool}" per the GenAI conventions.
func ExecuteToolSpanName(tool string) string {
	if tool == "" {
		return SpanExecuteTool
	}
	return SpanExecuteTool + " " + tool
}

// Attribute keys.
const (
	AttrTurnID        = "sharedos.turn.id"
	AttrCallID        = "sharedos.call.id"
	AttrCatalogHash   = "sharedos.catalog.hash"
	AttrToolRequested = "sharedos.tool.requested"
	AttrToolResolved  = "sharedos.tool.resolved"
	AttrOutcomeStatus = "sharedos.outcome.status"
	AttrOutcomeCode   = "sharedos.outcome.code"
	// AttrAuthzKind and AttrAuthzResult label MetricAuthzDecisionDuration:
	// authorize or filter_tools; allow, deny or error.
	AttrAuthzKind      = "sharedos.authz.kind"
	AttrAuthzResult    = "sharedos.authz.result"
	AttrDecisionID     = "sharedos.authz.decision_id"
	AttrPolicyRevision = "sharedos.authz.policy_revision"
	AttrHarnessName    = "sharedos.harness.name"
	AttrAuthzAction    = "sharedos.authz.action"
	AttrAuthzAllowed   = "sharedos.authz.allowed"
	AttrTenant         = "sharedos.tenant"
	AttrMCPMethod      = "mcp.method.name"
	AttrMCPSessionID   = "mcp.session.id"
	AttrMCPProtocol    = "mcp.protocol.version"
	AttrGenAIToolName  = "gen_ai.tool.name"
	AttrGenAIOperation = "gen_ai.operation.name"

	// Bridge diagnostics on the tools/call span: the harness alias a raw
	// name resembles, the harness-injected argument keys stripped (keys
	// only, never values), the JSON-RPC request id and client call ids.
	AttrBridgeAliasOf         = "sharedos.bridge.alias_of"
	AttrBridgeStrippedArgKeys = "sharedos.bridge.stripped_argument_keys"
	AttrBridgeJSONRPCID       = "sharedos.bridge.jsonrpc_id"
	AttrBridgeClientCallIDs   = "sharedos.bridge.client_call_ids"

	// Database client spans (pgdb's pgx tracer) follow the OpenTelemetry
	// database semantic conventions. Query text and arguments are never
	// recorded: an argument could be a tool argument value or a token hash.
	AttrDBSystemName         = "db.system.name"
	AttrDBOperationName      = "db.operation.name"
	AttrDBCollectionName     = "db.collection.name"
	AttrDBNamespace          = "db.namespace"
	AttrDBResponseStatusCode = "db.response.status_code"
	AttrDBBatchSize          = "db.operation.batch.size"
	AttrErrorType            = "error.type"
	// AttrRPCMethod is the full gRPC method of a refused internal call.
	AttrRPCMethod = "rpc.method"
)

// DBSystemPostgreSQL is the db.system.name value of PostgreSQL client spans.
const DBSystemPostgreSQL = "postgresql"

// Metric names.
const (
	// MetricToolCallCount counts ToolCalls by outcome status and code.
	MetricToolCallCount = "sharedos.toolcall.count"
	// MetricToolCallDuration is the kernel time per ToolCall, in seconds.
	MetricToolCallDuration = "sharedos.toolcall.duration"
	// MetricAuthzDecisionDuration is the PDP time per decision, in seconds.
	MetricAuthzDecisionDuration = "sharedos.authz.decision.duration"
	// MetricTurnsOpen is an up-down counter of open turn leases.
	MetricTurnsOpen = "sharedos.turns.open"
	// MetricPolicyReloadFailures counts policy reloads that kept the previous policy.
	MetricPolicyReloadFailures = "sharedos.policy.reload.failures"
	// MetricPolicyStale is 1 while the last policy reload failed (the policy
	// serving is older than its directory), else 0.
	MetricPolicyStale = "sharedos.policy.stale"
	// MetricDecisionLogDropped counts decision records never written: the
	// queue to a stalled decision-log sink was full, or the write failed.
	MetricDecisionLogDropped = "sharedos.authz.decision_log.dropped"
	// MetricCallerDenied counts internal RPCs refused by the callers table.
	MetricCallerDenied = "sharedos.rpc.caller.denied"
)
