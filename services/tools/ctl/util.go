package ctl

import (
	"bytes"
	"encoding/json"
	"errors"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// emitProto prints a message as protojson (camelCase field names), or as a
// FIELD/VALUE table.
func (e *env) emitProto(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	if e.g.output == "table" {
		return e.emit(json.RawMessage(b), nil, nil)
	}
	_, err = e.stdout.Write(append(b, '\n'))
	return err
}

// decodeStrictYAMLOrJSON decodes b (YAML or JSON) refusing unknown keys.
func decodeStrictYAMLOrJSON(b []byte, v any) error {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
