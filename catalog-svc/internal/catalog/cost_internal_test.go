package catalog

import (
	"fmt"
	"strings"
	"testing"
)

// The memo of compiled schemas is bounded in the memory its schemas hold
// (as schemaSize estimates it), not only in their count: 30 distinct
// schemas of 200 KB, 2.4 MB each as estimated, are never all kept
// (attack run: each refresh of an upstream whose large schemas changed
// added 400 MB of live heap, kept after providers remove, until 4,096
// schemas had been compiled).
func TestCompiledSchemasAreBoundedInBytes(t *testing.T) {
	compiled.Clear()
	t.Cleanup(compiled.Clear)
	const n = 30
	for i := range n {
		raw := fmt.Sprintf(`{"type":"object","title":"schema %d","properties":{"e":{"type":"string","description":"%s"}}}`, i, strings.Repeat("d", 200<<10))
		if _, err := compileSchema("inputSchema", []byte(raw), only2020); err != nil {
			t.Fatal(err)
		}
		if got := compiled.Bytes(); got > maxMemoBytes {
			t.Fatalf("after %d schemas the memo holds %d bytes, past its %d", i+1, got, maxMemoBytes)
		}
	}
	if got := compiled.Len(); got >= n {
		t.Errorf("the memo keeps all %d schemas of 200 KB; want fewer, within %d bytes", got, maxMemoBytes)
	}
}
