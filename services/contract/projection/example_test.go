package projection_test

import (
	"encoding/json"
	"fmt"

	"github.com/sharedos/toolshare/services/contract/projection"
)

func ExampleCanonical() {
	c, err := projection.Canonical(projection.Tool{
		Name:        "files.read",
		Description: "Read a UTF-8 text file by absolute path.",
		InputSchema: json.RawMessage(`{"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}`),
		Annotations: json.RawMessage(`{"readOnlyHint": true}`),
		Namespace:   "files",
		Source:      "builtin",
	})
	fmt.Println(string(c), err)
	// Output: {"annotations":{"readOnlyHint":true},"description":"Read a UTF-8 text file by absolute path.","inputSchema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"metadata":{"namespace":"files","source":"builtin"},"name":"files.read"} <nil>
}

func ExampleFromJSON() {
	// Authority in a registration has nowhere to go.
	t, _ := projection.FromJSON([]byte(`{
		"name": "files.read", "inputSchema": {"type": "object"},
		"grants": ["files.read"], "handler": {"grpc": "files:7404"}, "credentials": {"token": "x"}
	}`))
	c, _ := projection.Canonical(t)
	fmt.Println(string(c))
	// Output: {"inputSchema":{"type":"object"},"name":"files.read"}
}

func ExamplePublish() {
	p, err := projection.Publish(projection.Tool{
		Name:        "github.search",
		InputSchema: json.RawMessage(`{ "type": "object" }`),
		Annotations: json.RawMessage(`{}`),
		Namespace:   "github",
		Source:      "mcp:github",
	})
	fmt.Printf("%s | %q | %s | %v\n", p.GetInputSchemaJson(), p.GetAnnotationsJson(), p.GetCanonicalJson(), err)
	fmt.Println(projection.Digest(p.GetCanonicalJson()))
	// Output:
	// { "type": "object" } | "" | {"inputSchema":{"type":"object"},"metadata":{"namespace":"github","source":"mcp:github"},"name":"github.search"} | <nil>
	// 59275d83cd03c229e7be46d0bb7b6f9aae26169b0e9feba8a014ea14ee920a7d
}
