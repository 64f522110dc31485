package regfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/jsonlimits"
)

// Registration is the file shape of one tool registration.
type Registration struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Metadata     *Metadata       `json:"metadata,omitempty"`
	Class        string          `json:"class,omitempty"`
	Requirement  *Requirement    `json:"requirement,omitempty"`
	Handler      *Handler        `json:"handler,omitempty"`
}

// Metadata is the hashed metadata of a tool.
type Metadata struct {
	Namespace string `json:"namespace,omitempty"`
	Source    string `json:"source,omitempty"`
}

// Requirement is the authority a call needs: an action and a resource
// template whose {arg} placeholders name top-level arguments.
type Requirement struct {
	Action   string `json:"action"`
	Resource string `json:"resource,omitempty"`
	// OpenArguments: the tool takes argument keys its inputSchema does not
	// list although resource names arguments (requirement.open_arguments).
	OpenArguments bool `json:"openArguments,omitempty"`
}

// Handler names the ToolHandlerService serving the tool.
type Handler struct {
	Target  string `json:"target"`
	Timeout string `json:"timeout,omitempty"`
}

var classes = map[string]sharedosv1.ToolClass{
	"managed":         sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
	"harness_local":   sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL,
	"external_direct": sharedosv1.ToolClass_TOOL_CLASS_EXTERNAL_DIRECT,
}

// ClassName is the file spelling of a tool class.
func ClassName(c sharedosv1.ToolClass) string {
	for n, v := range classes {
		if v == c {
			return n
		}
	}
	return ""
}

// ReadFile parses path (".json" as JSON, anything else as YAML).
func ReadFile(path string) ([]Registration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	regs, err := Parse(b, strings.EqualFold(filepath.Ext(path), ".json"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return regs, nil
}

// ReadDir parses every *.yaml, *.yml and *.json file of dir, in name order.
func ReadDir(dir string) ([]Registration, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	var all []Registration
	for _, n := range names {
		regs, err := ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		all = append(all, regs...)
	}
	return all, nil
}

// Parse decodes one registration or a list of them. isJSON keeps the raw
// bytes of schemas; otherwise the input is YAML.
func Parse(b []byte, isJSON bool) ([]Registration, error) {
	if !isJSON {
		j, err := YAMLToJSON(b)
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: %w", err)
		}
		b = j
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, errors.New("empty registration file")
	}
	if b[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(b, &raws); err != nil {
			return nil, fmt.Errorf("invalid registration list: %w", err)
		}
		out := make([]Registration, 0, len(raws))
		for i, r := range raws {
			reg, err := decodeOne(r)
			if err != nil {
				return nil, fmt.Errorf("registration %d: %w", i, err)
			}
			out = append(out, reg)
		}
		return out, nil
	}
	reg, err := decodeOne(b)
	if err != nil {
		return nil, err
	}
	return []Registration{reg}, nil
}

func decodeOne(b []byte) (Registration, error) {
	var r Registration
	if err := decodeJSON(b, &r); err != nil {
		return r, fmt.Errorf("invalid registration: %w", err)
	}
	return r, nil
}

// DecodeStrict decodes an operator's file, YAML or JSON, into v, refusing
// unknown keys and trailing data: the one reading of every file
// sharedosctl takes (registrations, policies, column manifests and host
// configurations).
func DecodeStrict(b []byte, v any) error {
	j, err := YAMLToJSON(b)
	if err != nil {
		return err
	}
	return decodeJSON(j, v)
}

// YAMLToJSON converts an operator's YAML file to JSON. A file holds one
// document: a second one (after "---") is refused, not dropped — several
// entries go in one list.
func YAMLToJSON(b []byte) ([]byte, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(b))
	docs, first := 0, true
	for ; ; first = false {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch {
		case emptyDocument(&doc):
		case !first || docs > 0:
			return nil, errors.New(`more than one YAML document ("---"): a file holds one; put several entries in one list`)
		default:
			docs++
			if err := keyTwice(&doc); err != nil {
				return nil, err
			}
		}
	}
	return yaml.YAMLToJSON(b)
}

// emptyDocument reports whether doc holds nothing (or null).
func emptyDocument(doc *yamlv3.Node) bool {
	return len(doc.Content) == 0 || doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].Tag == "!!null"
}

// keyTwice refuses a mapping that gives one key twice, not the last kept.
// Keys are compared as the JSON conversion reads them (YAML 1.1, as v2:
// y, yes and true are one key, 1 and 0x1 another), and a merge (<<: *base,
// any number of them) is no key: a key overriding one a merge brought in is
// YAML, which v2's strict mode refused.
func keyTwice(n *yamlv3.Node) error {
	if n.Kind == yamlv3.MappingNode {
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yamlv3.ScalarNode || k.Tag == "!!merge" {
				continue
			}
			name := k.Value
			if k.Style&(yamlv3.SingleQuotedStyle|yamlv3.DoubleQuotedStyle) == 0 {
				var v any
				if yamlv2.Unmarshal([]byte(k.Value), &v) == nil && v != nil {
					name = fmt.Sprint(v)
				}
			}
			if line, ok := seen[name]; ok {
				return fmt.Errorf("line %d: key %q is given twice in one mapping (line %d reads as the same key)", k.Line, k.Value, line)
			}
			seen[name] = k.Line
		}
	}
	if n.Kind == yamlv3.AliasNode {
		return nil // walked where its anchor is
	}
	for _, c := range n.Content {
		if err := keyTwice(c); err != nil {
			return err
		}
	}
	return nil
}

// decodeJSON decodes b into v, refusing unknown keys, a key given twice in
// one object (the reader would see one value, the decoder keep the other)
// and anything after the value.
func decodeJSON(b []byte, v any) error {
	var doc any
	if json.Unmarshal(b, &doc) == nil && jsonlimits.RepeatsKey(b, doc) {
		return errors.New("a key appears twice in one object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

// ToProto converts a file registration into the wire message. Values are not
// validated here beyond their shape: catalog-svc is the one place that
// validates registrations, so a CLI can never disagree with it.
func (r Registration) ToProto() (*sharedosv1.ToolRegistration, error) {
	out := &sharedosv1.ToolRegistration{
		Name:             r.Name,
		Description:      r.Description,
		InputSchemaJson:  nonNull(r.InputSchema),
		OutputSchemaJson: nonNull(r.OutputSchema),
		AnnotationsJson:  nonNull(r.Annotations),
		Class:            sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
	}
	if r.Metadata != nil {
		out.Metadata = &sharedosv1.ToolMetadata{Namespace: r.Metadata.Namespace, Source: r.Metadata.Source}
	}
	if r.Class != "" {
		c, ok := classes[r.Class]
		if !ok {
			return nil, fmt.Errorf("tool %q: class %q is not one of managed, harness_local, external_direct", r.Name, r.Class)
		}
		out.Class = c
	}
	if r.Requirement != nil {
		out.Requirement = &sharedosv1.Requirement{
			Action:        r.Requirement.Action,
			Resource:      r.Requirement.Resource,
			OpenArguments: r.Requirement.OpenArguments,
			// Resource templates clean path-valued arguments by default
			// (docs/adr/0006-requirements.md): a file can't opt out of it.
			PathCleaning: sharedosv1.PathCleaning_PATH_CLEANING_POSIX,
		}
	}
	if r.Handler != nil {
		out.Handler = &sharedosv1.HandlerRef{Target: r.Handler.Target}
		if r.Handler.Timeout != "" {
			d, err := time.ParseDuration(r.Handler.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("tool %q: handler.timeout %q is not a positive duration like 30s", r.Name, r.Handler.Timeout)
			}
			out.Handler.Timeout = durationpb.New(d)
		}
	}
	return out, nil
}

// FromProto is the inverse of ToProto, for printing a registration.
func FromProto(p *sharedosv1.ToolRegistration) Registration {
	r := Registration{
		Name:         p.GetName(),
		Description:  p.GetDescription(),
		InputSchema:  raw(p.GetInputSchemaJson()),
		OutputSchema: raw(p.GetOutputSchemaJson()),
		Annotations:  raw(p.GetAnnotationsJson()),
		Class:        ClassName(p.GetClass()),
	}
	if m := p.GetMetadata(); m != nil {
		r.Metadata = &Metadata{Namespace: m.GetNamespace(), Source: m.GetSource()}
	}
	if q := p.GetRequirement(); q != nil {
		r.Requirement = &Requirement{Action: q.GetAction(), Resource: q.GetResource(), OpenArguments: q.GetOpenArguments()}
	}
	if h := p.GetHandler(); h != nil {
		r.Handler = &Handler{Target: h.GetTarget()}
		if h.GetTimeout() != nil {
			r.Handler.Timeout = h.GetTimeout().AsDuration().String()
		}
	}
	return r
}

func nonNull(m json.RawMessage) []byte {
	t := bytes.TrimSpace(m)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return []byte(t)
}

func raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
