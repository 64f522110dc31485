package catalog

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
)

var (
	// ErrNotFound is wrapped by every error reporting a tool that does not
	// exist (Resolve, Get, Update, Deregister).
	ErrNotFound = errors.New("catalog: tool not found")
	// ErrAlreadyExists: a tool with that exact name is registered.
	ErrAlreadyExists = errors.New("catalog: tool already exists")
	// ErrRevisionMismatch: UpdateTool's expected_revision is stale.
	ErrRevisionMismatch = errors.New("catalog: revision mismatch")
	// ErrAuthzUnavailable: the policy decision point could not filter the
	// catalogue, so no catalogue is returned.
	ErrAuthzUnavailable = errors.New("catalog: authorization service unavailable")
	// ErrNotReady: the cache has not been loaded yet (Start not finished).
	ErrNotReady = errors.New("catalog: catalogue not loaded yet")
	// ErrInvalid matches every *ValidationError.
	ErrInvalid = errors.New("catalog: invalid registration")
)

// Validation rules, as reported in ValidationError.Rule.
const (
	RuleRequired        = "required"
	RuleToolName        = "ToolNameSchema"
	RuleNamespace       = "namespace_is_first_segment"
	RuleCollisionKey    = "collision_key_unique"
	RuleCaseInsensitive = "case_insensitive_unique"
	RuleJSON            = "valid_json"
	RuleJSONObject      = "json_object"
	RuleJSONSchema      = "json_schema_2020_12"
	RuleObjectSchema    = "object_schema"
	RuleNetworkRef      = "no_network_ref"
	RuleSchemaSize      = "max_size"
	RuleSchemaDepth     = "max_depth"
	RuleSubschemaCount  = "max_subschemas"
	RulePoisoning       = "no_hidden_characters"
	RuleUTF8            = "valid_utf8"
	RuleUniqueKeys      = "unique_keys"
	RuleTemplate        = "resource_template"
	RuleAction          = "known_action"
	RuleClass           = "tool_class"
	RuleTimeout         = "timeout_range"
	RuleIdentifier      = "IdentifierSchema"
	RuleUniqueInBatch   = "unique_in_batch"
	// Prompts and resources (ADR 0018).
	RuleLength         = "max_length"
	RulePromptArgument = "prompt_argument"
	RuleURI            = "resource_uri"
	RuleMIMEType       = "mime_type"
	// RuleResourceOverlap: a resource URI or template one of whose URIs
	// may also be read through another source's (resourceuri.Overlap).
	RuleResourceOverlap = "no_overlap_across_sources"
	// RuleClosedArguments: a requirement that names arguments needs an
	// inputSchema that lists every key (additionalProperties false), or
	// requirement.open_arguments.
	RuleClosedArguments = "closed_arguments"
	// RuleMCPServable: the bridge could not serve the tool over MCP
	// (annotations of the wrong MCP types, a bad x-mcp-header).
	RuleMCPServable = "mcp_servable"
	// RuleNumberRange: a JSON number the catalogue cannot keep as written:
	// PostgreSQL's jsonb refuses it, or the published canonical form (whose
	// numbers are doubles) cannot write it.
	RuleNumberRange = "number_range"
	// RuleRefCycle: a subschema reaches itself through keywords applied to
	// the same instance ($ref, allOf, ...), which validation refuses.
	RuleRefCycle = "no_ref_cycle"
	// RuleNoNUL: a schema holds U+0000 (an escaped \u0000) in a value or
	// a key, which PostgreSQL's jsonb cannot hold.
	RuleNoNUL = "no_nul"
	// RuleRegexSize: a regular expression of a schema ("pattern",
	// "patternProperties") compiles to more than MaxRegexInsts
	// instructions, or the schema's together to more than
	// MaxSchemaRegexInsts.
	RuleRegexSize = "max_regex_size"
	// RuleValidationWork: validating one value of the arguments could
	// apply more than MaxValueVisits subschemas to it, or match one of its
	// characters against more than MaxRegexPerChar regex instructions.
	RuleValidationWork = "max_validation_work"
	// RuleNestedDialect: a subschema below the top declares "$schema".
	RuleNestedDialect = "no_nested_dialect"
)

// ValidationError names the field and the rule a registration broke. It is
// gRPC InvalidArgument.
type ValidationError struct {
	Field  string // e.g. "name", "metadata.namespace", "inputSchema"
	Rule   string // one of the Rule* constants
	Detail string // human-readable, safe to show an operator
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%s: violates %s: %s", e.Field, e.Rule, e.Detail)
}

// Unwrap lets callers test errors.Is(err, ErrInvalid).
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func invalid(field, rule, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// checkContext refuses a context authz-svc would refuse (its rules are
// accesscontext's): the caller's fault, an *accesscontext.Error
// (InvalidArgument on the wire), never ErrAuthzUnavailable. nil is the
// admin listing.
func checkContext(actx *sharedosv1.AccessContext) error {
	if actx == nil {
		return nil
	}
	if e := accesscontext.Check(actx); e != nil {
		return e
	}
	return nil
}

// filterError is a failed FilterTools call as the catalogue reports it:
// authz-svc's InvalidArgument naming the context (a rule this build's
// accesscontext does not know yet) is the caller's, an
// *accesscontext.Error; anything else is ErrAuthzUnavailable, err wrapped.
func filterError(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
		for _, d := range st.Details() {
			br, ok := d.(*errdetails.BadRequest)
			if !ok {
				continue
			}
			for _, v := range br.GetFieldViolations() {
				if f := v.GetField(); f == "context" || strings.HasPrefix(f, "context.") {
					return &accesscontext.Error{Field: f, Rule: v.GetDescription()}
				}
			}
		}
	}
	return fmt.Errorf("%w: %w", ErrAuthzUnavailable, err)
}
