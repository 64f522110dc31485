package mcpcontent_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sharedos/toolshare/services/contract/mcpcontent"
)

// Check refuses exactly the items mcp.UnmarshalContent refuses.
func TestCheckAgreesWithUnmarshalContent(t *testing.T) {
	for _, item := range []string{
		`{"type":"text","text":"hi"}`, `{"type":"text"}`, `{"type":"text","text":null}`, `{"type":"text","text":5}`,
		`{"type":"text","text":"x","annotations":{"priority":0.5}}`, `{"type":"text","text":"x","annotations":5}`,
		`{"type":"text","text":"x","_meta":{"k":1}}`, `{"type":"text","text":"x","_meta":[]}`, `{"type":"text","text":"x","extra":1}`,
		`{"type":"image","data":"AAAA","mimeType":"image/png"}`, `{"type":"image","data":1}`, `{"type":"audio","data":"AA","mimeType":7}`,
		`{"type":"resource_link","uri":"file:///x","name":"x"}`, `{"type":"resource","resource":{"uri":"x","text":"t"}}`,
		`{"type":"video"}`, `{"type":5}`, `{}`, `[]`, `"text"`, `{"type":"text","text":["a"]}`, `{"type":"text","text":{"a":1}}`,
		`{"type":"text","text":true}`,
	} {
		_, want := mcp.UnmarshalContent([]byte(item))
		got := mcpcontent.Check([]byte(item))
		if (got == nil) != (want == nil) {
			t.Errorf("%s: Check %v, UnmarshalContent %v", item, got, want)
		}
	}
}

// Items are slices of the content itself: a large text is not copied.
func TestItemsAreNotCopied(t *testing.T) {
	content := []byte(`[{"type":"text","text":"` + strings.Repeat("A", 1<<20) + `"}, {"type":"text","text":"b"}]`)
	items, err := mcpcontent.Items(content)
	if err != nil || len(items) != 2 {
		t.Fatalf("%d items, %v", len(items), err)
	}
	if &items[0][0] != &content[1] || !bytes.HasSuffix(items[1], []byte(`"b"}`)) {
		t.Error("the first item is not a slice of the content")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := mcpcontent.Check(items[0]); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("checking a 1 MiB text allocated %d bytes", n)
	}
	if _, err := mcpcontent.Items([]byte(`{"type":"text"}`)); err == nil {
		t.Error("an object taken for an array")
	}
}
