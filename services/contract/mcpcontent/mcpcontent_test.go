package mcpcontent_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sharedos/toolshare/services/contract/mcpcontent"
)

// Check refuses exactly the items mcp.UnmarshalContent refuses, when what
// MCP types as base64 in them is base64 (TestBase64AgreesWithStdEncoding).
func TestCheckAgreesWithUnmarshalContent(t *testing.T) {
	for _, item := range []string{
		`{"type":"text","text":"hi"}`, `{"type":"text"}`, `{"type":"text","text":null}`, `{"type":"text","text":5}`,
		`{"type":"text","text":"x","annotations":{"priority":0.5}}`, `{"type":"text","text":"x","annotations":5}`,
		`{"type":"text","text":"x","_meta":{"k":1}}`, `{"type":"text","text":"x","_meta":[]}`, `{"type":"text","text":"x","extra":1}`,
		`{"type":"image","data":"AAAA","mimeType":"image/png"}`, `{"type":"image","data":1}`, `{"type":"audio","data":"AA","mimeType":7}`,
		`{"type":"resource_link","uri":"file:///x","name":"x"}`, `{"type":"resource","resource":{"uri":"x","text":"t"}}`,
		`{"type":"video"}`, `{"type":5}`, `{}`, `[]`, `"text"`, `{"type":"text","text":["a"]}`, `{"type":"text","text":{"a":1}}`,
		`{"type":"text","text":true}`,
		// What mcp-go's client takes and the bridge refused (attack run C2):
		// a number as text, an audience that is no array, a link's size
		// that is no number, a _meta that is no object.
		`{"type":"text","text":123}`, `{"type":"text","text":"x","annotations":{"audience":"user"}}`,
		`{"type":"resource_link","uri":"file:///x","name":"x","size":"big"}`, `{"type":"text","text":"x","_meta":"notanobject"}`,
		`{"type":"text","text":"x","annotations":{"audience":["user"]}}`, `{"type":"text","text":"x","annotations":{"audience":[5]}}`,
		`{"type":"text","text":"x","annotations":{"priority":"high"}}`, `{"type":"text","text":"x","annotations":{"lastModified":5}}`,
		`{"type":"image","data":"AAAA","mimeType":"image/png","annotations":{"audience":"user"}}`,
		`{"type":"audio","data":"AAAA","mimeType":"audio/wav","_meta":"notanobject"}`,
		`{"type":"resource_link","uri":"file:///x","name":"x","size":12}`, `{"type":"resource_link","uri":"file:///x","name":"x","_meta":"m"}`,
		`{"type":"resource_link","uri":5,"name":"x"}`, `{"type":"resource_link","uri":"file:///x","name":"x","annotations":{"audience":"user"}}`,
		`{"type":"resource","resource":{"uri":"x","text":"t"},"_meta":"notanobject"}`,
		`{"type":"resource","resource":{"uri":"x","text":"t"},"annotations":{"audience":"user"}}`,
		`{"type":"resource","resource":{"uri":"x","text":"t","_meta":"notanobject"}}`, `{"type":"resource","resource":{"uri":"x","text":5}}`,
		`{"type":"resource","resource":{"text":"t"}}`, `{"type":"resource","resource":"x"}`,
	} {
		_, want := mcp.UnmarshalContent([]byte(item))
		got := mcpcontent.Check([]byte(item))
		if (got == nil) != (want == nil) {
			t.Errorf("%s: Check %v, UnmarshalContent %v", item, got, want)
		}
	}
	// Sampling's items, which mcp.UnmarshalContent takes, are no tool's
	// content nor a prompt's message (review: a tool_result's own content,
	// another source's resource in it, was served unchecked).
	for _, item := range []string{
		`{"type":"tool_use","id":"x","name":"n","input":{}}`,
		`{"type":"tool_result","toolUseId":"x","content":[{"type":"resource","resource":{"uri":"test://static-text","text":"FORGED"}}]}`,
	} {
		if _, err := mcp.UnmarshalContent([]byte(item)); err != nil {
			t.Fatalf("%s: mcp-go no longer takes it: %v", item, err)
		}
		if err := mcpcontent.Check([]byte(item)); err == nil || !strings.Contains(err.Error(), "only in sampling") {
			t.Errorf("%s: Check %v, want it refused", item, err)
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

// base64Cases are data texts, as JSON string literals, around the rules
// of base64.StdEncoding: padding, line breaks (skipped), escapes, and the
// chunks Check decodes in (4096 characters).
var base64Cases = []string{
	`""`, `"AAAA"`, `"AA=="`, `"AAA="`, `"AA="`, `"A==="`, `"===="`, `"QQ"`, `"AAAA\nAAAA"`, `"AA\r\n=="`,
	`"AA==AAAA"`, `"AA==\n"`, `"AA\u003d\u003d"`, `"\/\/\/\/"`, `"\/+\/+"`, `"AA\tA"`, `"AA\bAAA"`, `"AA\fAAA"`,
	`"AAA\u00e9"`, `"!*@#"`, `"AA\"A"`, `"AA\\A"`, `"AAA\u000a"`, `"AB\u000dCD"`, `"-_-_"`, `"AAAA "`,
	`"` + strings.Repeat("A", 4096) + `"`, `"` + strings.Repeat("A", 4092) + `AA=="`,
	`"` + strings.Repeat("A", 4092) + `AA==AAAA"`, `"` + strings.Repeat("A", 4092) + `AA==\nAAAA"`,
	`"` + strings.Repeat("A", 4092) + `AA==\n\r"`, `"` + strings.Repeat("A", 4095) + `\nA"`,
	`"` + strings.Repeat("A", 4096) + `=="`, `"` + strings.Repeat("A", 8190) + `=="`, `"` + strings.Repeat("A", 8191) + `!"`,
	`"` + strings.Repeat(`AAAA\n`, 2000) + `"`, `"` + strings.Repeat("!*@#", 2000) + `"`,
}

// base64Valid is the oracle: the literal's string as encoding/json reads it
// is decoded by base64.StdEncoding.
func base64Valid(t testing.TB, lit string) bool {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(lit), &s); err != nil {
		t.Fatalf("%.40s: not a JSON string: %v", lit, err)
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}

// checkBase64Agrees checks lit as an image's and audio's data, an embedded
// resource's blob and a resources/read content's blob against the oracle.
func checkBase64Agrees(t testing.TB, lit string) {
	t.Helper()
	want := base64Valid(t, lit)
	for _, item := range []string{
		`{"type":"image","mimeType":"image/png","data":` + lit + `}`,
		`{"type":"audio","mimeType":"audio/wav","data":` + lit + `}`,
		`{"type":"resource","resource":{"uri":"test://r","blob":` + lit + `}}`,
	} {
		if err := mcpcontent.Check([]byte(item)); (err == nil) != want {
			t.Errorf("Check(%.60s…) = %v; base64.StdEncoding takes it: %t", item, err, want)
		}
	}
	if _, err := mcpcontent.CheckResource([]byte(`{"uri":"test://r","blob":` + lit + `}`)); (err == nil) != want {
		t.Errorf("CheckResource(blob %.40s…) = %v; base64.StdEncoding takes it: %t", lit, err, want)
	}
}

// What MCP types as base64 is refused unless base64.StdEncoding decodes
// it (attack run a1: a 50 MB blob of "!*@#" was passed on and recorded
// succeeded; mcp-go takes any string).
func TestBase64AgreesWithStdEncoding(t *testing.T) {
	for _, lit := range base64Cases {
		checkBase64Agrees(t, lit)
	}
	// A text or a null data is no base64 to check, as before.
	for _, item := range []string{`{"type":"text","text":"!*@#"}`, `{"type":"image","data":null,"mimeType":"image/png"}`} {
		if err := mcpcontent.Check([]byte(item)); err != nil {
			t.Errorf("Check(%s) = %v", item, err)
		}
	}
}

func FuzzBase64(f *testing.F) {
	for _, lit := range base64Cases {
		var s string
		_ = json.Unmarshal([]byte(lit), &s)
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, escaped bool) {
		if !utf8.ValidString(s) {
			return // encoding/json would read another string
		}
		lit, _ := json.Marshal(s)
		if escaped { // every character as an escape
			var b strings.Builder
			b.WriteByte('"')
			for _, r := range s {
				if r > 0xffff {
					return
				}
				fmt.Fprintf(&b, `\u%04x`, r)
			}
			b.WriteByte('"')
			lit = []byte(b.String())
		}
		checkBase64Agrees(t, string(lit))
	})
}

// A 50 MB blob is checked without a copy of it.
func TestBase64IsNotCopied(t *testing.T) {
	item := []byte(`{"uri":"test://r","blob":"` + strings.Repeat("QUJD", 50<<20/4) + `"}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := mcpcontent.CheckResource(item); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("checking a 50 MB blob allocated %d bytes", n)
	}
}

// CheckResource refuses exactly the contents the bridge refuses
// (mcp.ParseResourceContents of each item decoded into a map), and
// returns the uri of those it takes.
func TestCheckResourceAgreesWithParseResourceContents(t *testing.T) {
	for _, item := range []string{
		`{"uri":"test://a","text":"hi"}`, `{"uri":"test://a","blob":"AAAA","mimeType":"application/octet-stream"}`,
		`{"uri":"test://a","text":""}`, `{"uri":"test://a","blob":""}`, `{"uri":"test://a"}`, `{"uri":"test://a","text":null,"blob":"AA=="}`,
		`{"uri":"test://a","text":5}`, `{"uri":"test://a","text":null}`, `{"uri":"test://a","blob":5}`,
		`{"uri":"","text":"x"}`, `{"text":"x"}`, `{"uri":5,"text":"x"}`, `{"uri":null,"text":"x"}`, `{"URI":"test://a","text":"x"}`,
		`{"uri":"test://a","Text":"x"}`, `{"uri":"test://a","text":"x","_meta":{"k":1}}`, `{"uri":"test://a","text":"x","_meta":null}`,
		`{"uri":"test://a","text":"x","_meta":[]}`, `{"uri":"test://a","text":"x","mimeType":5}`, `{"uri":"test://a","text":"x","extra":[1]}`,
		`{"uri":"test://b","uri":"test://a","text":"x"}`, `{"evil":true}`, `42`, `"str"`, `null`, `[]`, `{}`,
	} {
		var m map[string]any
		var want error
		if err := json.Unmarshal([]byte(item), &m); err != nil {
			want = err
		} else if _, err := mcp.ParseResourceContents(m); err != nil {
			want = err
		}
		uri, got := mcpcontent.CheckResource([]byte(item))
		if (got == nil) != (want == nil) {
			t.Errorf("%s: CheckResource %v, ParseResourceContents %v", item, got, want)
		}
		if got == nil && uri != "test://a" {
			t.Errorf("%s: uri %q", item, uri)
		}
	}
}

// messageOracle is how the bridge serves a prompt message
// (mcpserver.entryHandlers.prompt: each decoded into a role and a raw
// content, the content by mcp.UnmarshalContent), and MCP's Role, which a
// client holds it to.
func messageOracle(item string) error {
	var m struct {
		Role    mcp.Role        `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal([]byte(item), &m); err != nil {
		return err
	}
	if m.Role != mcp.RoleUser && m.Role != mcp.RoleAssistant {
		return fmt.Errorf("role %q", m.Role)
	}
	_, err := mcp.UnmarshalContent(m.Content)
	return err
}

// CheckMessage refuses exactly the prompt messages the bridge cannot serve
// or a client refuses (attack run C2: an upstream's messages that mcp-go's
// client took were recorded succeeded, and the bridge then failed the
// request with a JSON-RPC error naming Go types), and returns the content
// the bridge serves.
func TestCheckMessageAgreesWithTheBridge(t *testing.T) {
	for _, item := range []string{
		`{"role":"user","content":{"type":"text","text":"hi"}}`, `{"role":"assistant","content":{"type":"text","text":"hi"}}`,
		`{"role":"user","content":{"type":"text","text":123}}`,
		`{"role":"user","content":{"type":"text","text":"x","annotations":{"audience":"user"}}}`,
		`{"role":"user","content":{"type":"resource_link","uri":"file:///x","name":"x","size":"big"}}`,
		`{"role":"user","content":{"type":"text","text":"x","_meta":"notanobject"}}`,
		`{"role":"system","content":{"type":"text","text":"hi"}}`, `{"role":"User","content":{"type":"text","text":"hi"}}`,
		`{"role":5,"content":{"type":"text","text":"hi"}}`, `{"content":{"type":"text","text":"hi"}}`, `{"role":null,"content":{"type":"text","text":"hi"}}`,
		`{"role":"user"}`, `{"role":"user","content":null}`, `{"role":"user","content":[]}`, `{"role":"user","content":"hi"}`,
		`{"role":"user","content":{"type":"image","data":"AAAA","mimeType":"image/png"}}`,
		`{"role":"user","content":{"type":"resource","resource":{"uri":"test://a","text":"t"}}}`,
		`{"Role":"user","CONTENT":{"type":"text","text":"hi"}}`, `{"role":"user","content":{"type":"text","text":5},"Content":{"type":"text","text":"hi"}}`,
		`{"role":"user","content":{"type":"text","text":"hi"},"Content":{"type":"text","text":5}}`,
		`{"role":"user","content":{"type":"text","text":"hi"},"extra":[1]}`, `null`, `5`, `[]`, `"user"`, `{}`,
	} {
		want := messageOracle(item)
		content, got := mcpcontent.CheckMessage([]byte(item))
		if (got == nil) != (want == nil) {
			t.Errorf("%s: CheckMessage %v, the bridge %v", item, got, want)
		}
		if got == nil && !bytes.HasPrefix(content, []byte(`{"type":`)) {
			t.Errorf("%s: content %s", item, content)
		}
	}
	// The content is a slice of the message: a large text is not copied.
	item := []byte(`{"role":"user","content":{"type":"text","text":"` + strings.Repeat("A", 1<<20) + `"}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	content, err := mcpcontent.CheckMessage(item)
	runtime.ReadMemStats(&after)
	if err != nil || &content[0] != &item[bytes.IndexByte(item[1:], '{')+1] {
		t.Fatalf("%v: the content is not a slice of the message", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("checking a message of a 1 MiB text allocated %d bytes", n)
	}
}

// EmbeddedURI is the URI of the embedded resource the bridge serves for an
// item (mcp.UnmarshalContent), under every spelling of its keys, and none
// for an item that embeds none.
func TestEmbeddedURIAgreesWithUnmarshalContent(t *testing.T) {
	for _, item := range []string{
		`{"type":"resource","resource":{"uri":"test://a","text":"t"}}`, `{"type":"resource","resource":{"uri":"test://a","blob":"AAAA"}}`,
		`{"type":"resource","resource":{"URI":"test://a","text":"t"}}`, `{"type":"resource","Resource":{"uri":"test://a","text":"t"}}`,
		`{"type":"resource","resource":{"uri":"test://b","text":"t","Uri":"test://a"}}`,
		`{"type":"resource","resource":{"uri":"test://b","text":"t"},"RESOURCE":{"uri":"test://a","text":"t"}}`,
		`{"Type":"text","text":"hi","type":"resource","resource":{"uri":"test://a","text":"t"}}`,
		`{"type":"resource","resource":{"uri":"test://a","text":"t"},"Type":"text","text":"hi"}`,
		`{"type":"resource","reſource":{"uri":"test://a","text":"t"}}`,
		`{"type":"text","text":"hi","resource":{"uri":"test://a","text":"t"}}`, `{"type":"resource_link","uri":"test://a","name":"a"}`,
		`{"type":"text","text":"hi"}`, `{"type":"image","data":"AAAA","mimeType":"image/png"}`,
	} {
		if err := mcpcontent.Check([]byte(item)); err != nil {
			t.Fatalf("%s: %v", item, err)
		}
		c, err := mcp.UnmarshalContent([]byte(item))
		if err != nil {
			t.Fatal(err)
		}
		want, embeds := "", false
		if r, ok := c.(mcp.EmbeddedResource); ok {
			embeds = true
			switch rc := r.Resource.(type) {
			case mcp.TextResourceContents:
				want = rc.URI
			case mcp.BlobResourceContents:
				want = rc.URI
			}
		}
		if got, ok := mcpcontent.EmbeddedURI([]byte(item)); got != want || ok != embeds {
			t.Errorf("%s: EmbeddedURI %q %t, the bridge serves %q %t", item, got, ok, want, embeds)
		}
	}
	item := []byte(`{"type":"resource","resource":{"uri":"test://a","text":"` + strings.Repeat("A", 1<<20) + `"}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	mcpcontent.EmbeddedURI(item)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("reading the URI of a 1 MiB embedded text allocated %d bytes", n)
	}
}

// BenchmarkContentCheck is what the kernel pays to check a result's
// content as the bridge serves it (Items, then Check of each item), beside
// what it paid before for holding it to be a JSON array (json.Valid): a
// 1 MiB text, and a small result of three items.
func BenchmarkContentCheck(b *testing.B) {
	for _, c := range []struct{ name, content string }{
		{"1MiB-text", `[{"type":"text","text":"` + strings.Repeat("A", 1<<20) + `"}]`},
		{"small", `[{"type":"text","text":"hello"},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"image","data":"AAAA","mimeType":"image/png"}]`},
	} {
		content := []byte(c.content)
		b.Run(c.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(content) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/Items+Check", func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			for b.Loop() {
				items, err := mcpcontent.Items(content)
				if err != nil {
					b.Fatal(err)
				}
				for _, item := range items {
					if err := mcpcontent.Check(item); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
