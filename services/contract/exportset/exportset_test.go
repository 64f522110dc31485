package exportset_test

import (
	"testing"

	"github.com/sharedos/toolshare/services/contract/exportset"
)

// The digest is SHA-256 over "<sequence>\n" lines: the
// migration's SQL computes the same bytes (the postgres store suite checks
// the two agree).
func TestDigest(t *testing.T) {
	if got := exportset.New().Sum(); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("empty set = %s", got)
	}
	d := exportset.New()
	d.Add(1)
	d.Add(12)
	// printf '1\n12\n' | sha256sum
	if got := d.Sum(); got != "8f23f724d30f28e87e75b9f18080012e3d57877ca121e79e2568da552c885422" {
		t.Errorf("two records = %s", got)
	}
}
