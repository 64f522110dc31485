package catalog

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/projection"
	"github.com/sharedos/toolshare/services/contract/requirement"
	"github.com/sharedos/toolshare/services/contract/toolname"
)

// MaxHandlerTimeout bounds HandlerRef.timeout: a longer call would outlive
// any turn lease.
const MaxHandlerTimeout = 15 * time.Minute

// MaxSourceBytes bounds metadata.source, a provenance label
// ("provider:files", "mcp:NS") published with every tool, prompt and
// resource: every listing carries it.
const MaxSourceBytes = 256

// validate checks a registration before anything is stored. It returns the
// compiled input schema so callers need not compile twice.
func validate(reg *sharedosv1.ToolRegistration) (*parsedSchema, error) {
	if reg == nil {
		return nil, invalid("registration", RuleRequired, "a registration is required")
	}
	name := reg.GetName()
	q, err := toolname.Parse(name)
	if err != nil {
		return nil, nameError(err)
	}
	class := reg.GetClass()
	switch class {
	case sharedosv1.ToolClass_TOOL_CLASS_MANAGED, sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, sharedosv1.ToolClass_TOOL_CLASS_EXTERNAL_DIRECT:
	default:
		return nil, invalid("class", RuleClass, "must be managed, harness_local or external_direct, got %s", class)
	}
	managed := class == sharedosv1.ToolClass_TOOL_CLASS_MANAGED
	// Provider-qualified names (files.read) are the norm and the namespace
	// must then be the first segment; an unqualified name (the MCP
	// conformance fixtures' test_simple_text) is allowed with no namespace.
	// Either way it is one identity: the collision-key and case-fold
	// uniqueness rules stop a bare "search" from existing twice.
	if err := checkNamespace(name, q, reg.GetMetadata().GetNamespace()); err != nil {
		return nil, err
	}
	if err := checkBoundedText("metadata.source", reg.GetMetadata().GetSource(), MaxSourceBytes); err != nil {
		return nil, err
	}
	if err := checkBoundedText("description", reg.GetDescription(), MaxDescriptionBytes); err != nil {
		return nil, err
	}
	input, err := compileSchema("inputSchema", reg.GetInputSchemaJson(), dialectOf(reg))
	if err != nil {
		return nil, err
	}
	if err := input.registrable("inputSchema"); err != nil {
		return nil, err
	}
	if len(reg.GetOutputSchemaJson()) > 0 {
		output, err := compileSchema("outputSchema", reg.GetOutputSchemaJson(), dialectOf(reg))
		if err != nil {
			return nil, err
		}
		if err := output.registrable("outputSchema"); err != nil {
			return nil, err
		}
	}
	if err := checkAnnotations(reg.GetAnnotationsJson()); err != nil {
		return nil, err
	}
	if managed {
		if err := validateAuthority(reg, input); err != nil {
			return nil, err
		}
	} else if err := checkAuthorityIdentifiers(reg); err != nil {
		return nil, err
	}
	if ref := reg.GetCredentialRef(); ref != "" {
		if err := toolname.ValidateIdentifierField("credential_ref", ref); err != nil {
			return nil, identifierError(err)
		}
	}
	if err := checkTimeout(reg.GetHandler()); err != nil {
		return nil, err
	}
	return input, nil
}

// nameError is the validation error of a name toolname.Parse refused.
func nameError(err error) error {
	var te *toolname.Error
	if errors.As(err, &te) {
		return invalid("name", te.Rule, "%s", te.Detail)
	}
	return invalid("name", RuleToolName, "%v", err)
}

// checkNamespace: a provider-qualified name's namespace is its first
// segment; an unqualified one has none.
func checkNamespace(name string, q toolname.Qualified, ns string) error {
	if ns == q.Namespace {
		return nil
	}
	if q.Namespace == "" {
		return invalid("metadata.namespace", RuleNamespace, "is %q but the unqualified name %q has no namespace segment; leave it empty", ns, name)
	}
	return invalid("metadata.namespace", RuleNamespace, "is %q but must equal the name's first segment %q (a provider registers only in its own namespace)", ns, q.Namespace)
}

// checkTimeout checks a handler timeout (0 or absent: the service default).
func checkTimeout(h *sharedosv1.HandlerRef) error {
	t := h.GetTimeout()
	if t == nil {
		return nil
	}
	if err := t.CheckValid(); err != nil {
		return invalid("handler.timeout", RuleTimeout, "%v", err)
	}
	if d := t.AsDuration(); d < 0 || d > MaxHandlerTimeout {
		return invalid("handler.timeout", RuleTimeout, "%s is outside 0..%s (0 means the service default)", d, MaxHandlerTimeout)
	}
	return nil
}

// validateAuthority checks what SharedOS needs to authorize and route a
// managed tool's calls.
func validateAuthority(reg *sharedosv1.ToolRegistration, input *parsedSchema) error {
	req := reg.GetRequirement()
	if req.GetAction() == "" {
		return invalid("requirement.action", RuleRequired, "a managed tool must declare the action its calls need, e.g. \"read\"")
	}
	if err := toolname.ValidateIdentifierField("requirement.action", req.GetAction()); err != nil {
		return identifierError(err)
	}
	if req.GetAction() == requirement.ActionList {
		return invalid("requirement.action", RuleAction, "%q is reserved for catalogue filtering; a call needs one of %s",
			req.GetAction(), strings.Join(requirement.CallActions(), ", "))
	}
	if !requirement.IsCallAction(req.GetAction()) {
		// The set authz-svc evaluates: any other action fails every call.
		return invalid("requirement.action", RuleAction, "%q is not one of %s", req.GetAction(), strings.Join(requirement.CallActions(), ", "))
	}
	if _, ok := sharedosv1.PathCleaning_name[int32(req.GetPathCleaning())]; !ok {
		return invalid("requirement.path_cleaning", RuleTemplate, "unknown value %d", req.GetPathCleaning())
	}
	if err := checkTemplate(req.GetResource(), input); err != nil {
		return err
	}
	if names, _ := requirement.Placeholders(req.GetResource()); len(names) > 0 && !input.closed && !req.GetOpenArguments() {
		return invalid("inputSchema.additionalProperties", RuleClosedArguments,
			"must be false when requirement.resource names arguments ({%s}): a key the schema does not list is one the policy never saw; set requirement.open_arguments to accept such keys", names[0])
	}
	if reg.GetHandler().GetTarget() == "" {
		return invalid("handler.target", RuleRequired, "a managed tool needs the gRPC address of its ToolHandlerService")
	}
	if err := toolname.ValidateIdentifierField("handler.target", reg.GetHandler().GetTarget()); err != nil {
		return identifierError(err)
	}
	return nil
}

// checkAuthorityIdentifiers applies the identifier rule to the authority
// fields a harness_local or external_direct tool may leave empty: they are
// stored all the same, and a byte PostgreSQL refuses (NUL) would be kept by
// the embedded store alone. validateAuthority checks a managed tool's.
func checkAuthorityIdentifiers(reg *sharedosv1.ToolRegistration) error {
	for _, f := range []struct{ field, value string }{
		{"requirement.action", reg.GetRequirement().GetAction()},
		{"requirement.resource", reg.GetRequirement().GetResource()},
		{"handler.target", reg.GetHandler().GetTarget()},
	} {
		if f.value == "" {
			continue
		}
		if err := toolname.ValidateIdentifierField(f.field, f.value); err != nil {
			return identifierError(err)
		}
	}
	return nil
}

// checkTemplate requires the resource template to parse with the kernel's
// own grammar (services/contract/requirement, the code that resolves it at call
// time, so a template accepted here always resolves) and every {arg}
// placeholder to name a top-level property of the input schema: any other
// name could never be resolved from a call's arguments.
func checkTemplate(tmpl string, input *parsedSchema) error {
	const field = "requirement.resource"
	if tmpl == "" {
		return nil
	}
	if err := toolname.ValidateIdentifierField(field, tmpl); err != nil {
		return identifierError(err)
	}
	names, err := requirement.Placeholders(tmpl)
	if err != nil {
		var re *requirement.Error
		if errors.As(err, &re) {
			return invalid(field, RuleTemplate, "%s", re.Detail)
		}
		return invalid(field, RuleTemplate, "%v", err)
	}
	for _, arg := range names {
		if !input.topProps[arg] {
			return invalid(field, RuleTemplate, "placeholder {%s} does not name a top-level property of inputSchema", arg)
		}
	}
	return nil
}

func identifierError(err error) error {
	var te *toolname.Error
	if errors.As(err, &te) {
		return invalid(te.Field, te.Rule, "%s", te.Detail)
	}
	return invalid("registration", RuleIdentifier, "%v", err)
}

// Acquired reports whether reg was acquired from an upstream MCP server:
// its texts and annotations are the upstream's, not the operator's.
func Acquired(reg *sharedosv1.ToolRegistration) bool {
	return AcquiredSource(reg.GetMetadata().GetSource())
}

// AcquiredSource reports whether metadata.source names an upstream MCP
// server (a tool's, a prompt's or a resource's).
func AcquiredSource(source string) bool {
	return strings.HasPrefix(source, projection.UpstreamSourcePrefix)
}

// dialectOf: a tool acquired from an upstream MCP server may declare an
// earlier JSON Schema dialect.
func dialectOf(reg *sharedosv1.ToolRegistration) dialect {
	if Acquired(reg) {
		return upstreamDraft
	}
	return only2020
}

// ReadOnly is the tool's concurrency class: read_only, or — for a tool
// whose annotations the operator wrote, not an upstream — readOnlyHint.
func ReadOnly(reg *sharedosv1.ToolRegistration) bool {
	if reg.GetReadOnly() {
		return true
	}
	if Acquired(reg) {
		return false
	}
	var ann struct {
		ReadOnlyHint bool `json:"readOnlyHint"`
	}
	return json.Unmarshal(reg.GetAnnotationsJson(), &ann) == nil && ann.ReadOnlyHint
}
