package driver

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// object writes one JSON object with its keys in the order they are added
// and raw values verbatim: vendor shapes are written by hand so that key
// order is the documented one and embedded JSON (schemas, arguments) keeps
// its bytes.
type object struct {
	b bytes.Buffer
}

func (o *object) key(k string) {
	if o.b.Len() == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	writeString(&o.b, k)
	o.b.WriteByte(':')
}

func (o *object) str(k, v string) *object {
	o.key(k)
	writeString(&o.b, v)
	return o
}

func (o *object) raw(k string, v []byte) *object {
	o.key(k)
	o.b.Write(v)
	return o
}

func (o *object) boolean(k string, v bool) *object {
	o.key(k)
	o.b.WriteString(strconv.FormatBool(v))
	return o
}

func (o *object) bytes() json.RawMessage {
	if o.b.Len() == 0 {
		return json.RawMessage(`{}`)
	}
	o.b.WriteByte('}')
	return json.RawMessage(o.b.Bytes())
}

// array writes raw JSON values as one array.
func array(items []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// writeString writes s as a JSON string: encoding/json's escaping without
// its HTML escaping, so "<", ">" and "&" reach the model as themselves.
func writeString(b *bytes.Buffer, s string) {
	var q bytes.Buffer
	enc := json.NewEncoder(&q)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Write(bytes.TrimSuffix(q.Bytes(), []byte{'\n'}))
}
