package cataloghash_test

import (
	"encoding/json"
	"fmt"

	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/projection"
)

func ExampleSum() {
	var entries []cataloghash.Entry
	for _, t := range []projection.Tool{
		{Name: "files.search", Description: "Search file contents.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "files.read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object"}`)},
	} {
		c, err := projection.Canonical(t) // once, at registration
		if err != nil {
			panic(err)
		}
		entries = append(entries, cataloghash.Entry{Name: t.Name, Canonical: c})
	}
	fmt.Println(string(cataloghash.AppendCanonical(nil, entries)))
	fmt.Println(cataloghash.Sum(entries))
	fmt.Println(cataloghash.Sum(nil))
	// Output:
	// [{"description":"Read a file.","inputSchema":{"type":"object"},"name":"files.read"},{"description":"Search file contents.","inputSchema":{"type":"object"},"name":"files.search"}]
	// 8b839e5a304d1e443ae01fcdb512de31484c77ea00544072f48f7be2e487c2d0
	// 4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945
}
