package canonjson_test

import (
	"fmt"

	"github.com/sharedos/toolshare/services/contract/canonjson"
)

func ExampleCanonicalize() {
	out, err := canonjson.Canonicalize([]byte(`{
		"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 1e-7, -0],
		"text": "<b> & \u00e9",
		"\uff61": "halfwidth full stop", "\ud83d\ude00": "emoji"
	}`))
	fmt.Println(string(out), err)
	// Output: {"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-7,0],"text":"<b> & é","😀":"emoji","｡":"halfwidth full stop"} <nil>
}

func ExampleCanonicalize_duplicateKey() {
	_, err := canonjson.Canonicalize([]byte(`{"path":"/public","path":"/private"}`))
	fmt.Println(err)
	// Output: canonjson: duplicate object key at byte 18: key "path" appears more than once in one object
}

func ExampleMarshal() {
	out, _ := canonjson.Marshal(map[string]any{"b": 1e21, "a": "<&>"})
	fmt.Println(string(out))
	// Output: {"a":"<&>","b":1e+21}
}

func ExampleAppendNumber() {
	for _, f := range []float64{100, 1e21, 1e-7, 0.000001, 123456789012345678901} {
		fmt.Println(string(canonjson.AppendNumber(nil, f)))
	}
	// Output:
	// 100
	// 1e+21
	// 1e-7
	// 0.000001
	// 123456789012345680000
}
