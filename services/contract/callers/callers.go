// Package callers is who may call what on the internal plane: the roles a
// peer's SPIFFE identity carries (spiffe://<trust-domain>/<role>/<name>)
// and the one table of which roles may call each gRPC method (ADR 0012,
// docs/security.md). A method missing from the table is refused to every
// caller: a new RPC is closed until someone decides who may call it.
package callers

import "slices"

// Role is the second-to-last path segment of a peer's SPIFFE ID.
type Role string

// The roles of the internal plane.
const (
	Bridge   Role = "bridge"   // bridge-svc pods
	Catalog  Role = "catalog"  // catalog-svc, the kernel
	Authz    Role = "authz"    // authz-svc
	Provider Role = "provider" // a ToolHandlerService
	Host     Role = "host"     // the SharedOS host that opens turns for its users
	Operator Role = "operator" // people and automation administering the system
)

// Roles are every role, in the order above.
var Roles = []Role{Bridge, Catalog, Authz, Provider, Host, Operator}

// Known reports whether r is one of Roles.
func Known(r Role) bool { return slices.Contains(Roles, r) }

// table: full gRPC method name → the roles that may call it.
var table = map[string][]Role{
	"/sharedos.v1.RuntimeService/InvokeTool":       {Bridge},
	"/sharedos.v1.RuntimeService/InvokeToolStream": {Bridge},
	"/sharedos.v1.RuntimeService/GetPrompt":        {Bridge},
	"/sharedos.v1.RuntimeService/ReadResource":     {Bridge},
	"/sharedos.v1.RuntimeService/ListOperations":   {Operator, Host},
	"/sharedos.v1.RuntimeService/GrantTurn":        {Bridge},
	"/sharedos.v1.RuntimeService/RevokeTurn":       {Bridge},
	"/sharedos.v1.RuntimeService/ExportOperations": {Operator},
	"/sharedos.v1.RuntimeService/RecordExport":     {Operator},

	"/sharedos.v1.CatalogService/ListTools":         {Bridge, Operator},
	"/sharedos.v1.CatalogService/RegisterTool":      {Operator},
	"/sharedos.v1.CatalogService/RegisterTools":     {Operator},
	"/sharedos.v1.CatalogService/UpdateTool":        {Operator},
	"/sharedos.v1.CatalogService/DeregisterTool":    {Operator},
	"/sharedos.v1.CatalogService/GetTool":           {Operator},
	"/sharedos.v1.CatalogService/ListRegistrations": {Operator},

	"/sharedos.v1.CatalogService/RegisterPrompt":            {Operator},
	"/sharedos.v1.CatalogService/DeregisterPrompt":          {Operator},
	"/sharedos.v1.CatalogService/ListPromptRegistrations":   {Operator},
	"/sharedos.v1.CatalogService/RegisterResource":          {Operator},
	"/sharedos.v1.CatalogService/DeregisterResource":        {Operator},
	"/sharedos.v1.CatalogService/ListResourceRegistrations": {Operator},

	"/sharedos.v1.UpstreamService/AddProvider":     {Operator},
	"/sharedos.v1.UpstreamService/ListProviders":   {Operator},
	"/sharedos.v1.UpstreamService/GetProvider":     {Operator},
	"/sharedos.v1.UpstreamService/RefreshProvider": {Operator},
	"/sharedos.v1.UpstreamService/RemoveProvider":  {Operator},
	"/sharedos.v1.UpstreamService/ApproveTool":     {Operator},
	"/sharedos.v1.UpstreamService/RejectTool":      {Operator},
	"/sharedos.v1.UpstreamService/DiffTool":        {Operator},

	"/sharedos.v1.BridgeService/OpenTurn":  {Host, Operator},
	"/sharedos.v1.BridgeService/CloseTurn": {Host, Operator},
	"/sharedos.v1.BridgeService/GetTurn":   {Host, Operator},

	"/sharedos.v1.AuthzService/Authorize":   {Catalog},
	"/sharedos.v1.AuthzService/FilterTools": {Catalog},

	"/sharedos.v1.ToolHandlerService/Handle": {Catalog},
	"/sharedos.v1.ToolHandlerService/Invoke": {Catalog},

	"/sharedos.v1.ToolHandlerService/GetPrompt":    {Catalog},
	"/sharedos.v1.ToolHandlerService/ReadResource": {Catalog},
}

// Open methods need an authenticated peer of any role, or none at all:
// health is probed by kubelets and load balancers.
var open = []string{
	"/grpc.health.v1.Health/Check",
	"/grpc.health.v1.Health/Watch",
	"/grpc.health.v1.Health/List",
}

// Reflection is the gRPC reflection service's method prefix; a server
// serves it only when told (--reflection), to any authenticated peer.
const Reflection = "/grpc.reflection."

// Open reports whether method needs no caller identity.
func Open(method string) bool { return slices.Contains(open, method) }

// Allowed are the roles that may call method (nil: none may).
func Allowed(method string) []Role { return table[method] }

// May reports whether a peer of role may call method.
func May(role Role, method string) bool { return slices.Contains(table[method], role) }

// Methods are every method of the table, for tests and docs.
func Methods() []string {
	out := make([]string, 0, len(table))
	for m := range table {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}
