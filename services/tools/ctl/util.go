package ctl

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// emitProto prints a message as protojson (camelCase field names; hidden
// characters escaped, escapeJSON), or as a FIELD/VALUE table.
func (e *env) emitProto(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	if e.g.output == "table" {
		return e.emit(json.RawMessage(b), nil, nil)
	}
	_, err = e.stdout.Write(escapeJSON(append(b, '\n')))
	return err
}
