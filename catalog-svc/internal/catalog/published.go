package catalog

import (
	"encoding/json"
	"errors"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/projection"
)

// projectionTool is the kernel's view of a registration: only the fields
// that participate in the published projection.
func projectionTool(reg *sharedosv1.ToolRegistration) projection.Tool {
	return projection.Tool{
		Name:         reg.GetName(),
		Description:  reg.GetDescription(),
		InputSchema:  json.RawMessage(reg.GetInputSchemaJson()),
		OutputSchema: json.RawMessage(reg.GetOutputSchemaJson()),
		Annotations:  json.RawMessage(reg.GetAnnotationsJson()),
		Namespace:    reg.GetMetadata().GetNamespace(),
		Source:       reg.GetMetadata().GetSource(),
	}
}

// publish computes the published projection once, at write time. A
// refusal names the field and the rule the projection found broken.
func publish(reg *sharedosv1.ToolRegistration) (*sharedosv1.PublishedTool, string, error) {
	pub, err := projection.Publish(projectionTool(reg))
	var pe *projection.Error
	switch {
	case errors.As(err, &pe):
		detail := pe.Detail
		if detail == "" && pe.Err != nil {
			detail = pe.Err.Error()
		}
		return nil, "", invalid(pe.Field, catalogRule(pe.Rule), "cannot canonicalize the published projection: %s", detail)
	case err != nil:
		return nil, "", invalid("registration", RuleJSON, "cannot canonicalize the published projection: %v", err)
	}
	return pub, pub.GetDigest(), nil
}

// catalogRule is the catalogue's name of a rule projection reports (its
// toolname rules are the catalogue's already).
func catalogRule(rule string) string {
	switch rule {
	case projection.RuleJSON:
		return RuleJSON
	case projection.RuleJSONObject:
		return RuleJSONObject
	case projection.RuleUTF8:
		return RuleUTF8
	case projection.RuleRequired:
		return RuleRequired
	}
	return rule
}

// publishedFrom rebuilds the published tool from a stored registration and
// its stored canonical bytes, without re-canonicalizing. The JSON fields are
// the registered bytes verbatim. It must agree with projection.Publish for
// every valid registration (tested); prepare stores the JSON fields as
// Publish emits them (an annotations "{}" or outputSchema "null" is stored
// empty) so that holds.
func publishedFrom(reg *sharedosv1.ToolRegistration, canonical []byte, digest string) *sharedosv1.PublishedTool {
	pub := &sharedosv1.PublishedTool{
		Name:             reg.GetName(),
		Description:      reg.GetDescription(),
		InputSchemaJson:  reg.GetInputSchemaJson(),
		OutputSchemaJson: reg.GetOutputSchemaJson(),
		AnnotationsJson:  reg.GetAnnotationsJson(),
		Metadata:         &sharedosv1.ToolMetadata{Namespace: reg.GetMetadata().GetNamespace(), Source: reg.GetMetadata().GetSource()},
		CanonicalJson:    canonical,
		Digest:           digest,
	}
	return pub
}
