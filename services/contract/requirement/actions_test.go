package requirement_test

import (
	"testing"

	"github.com/sharedos/toolshare/services/contract/requirement"
)

func TestActions(t *testing.T) {
	for _, a := range requirement.Actions() {
		if !requirement.IsAction(a) {
			t.Errorf("IsAction(%q) = false", a)
		}
	}
	for _, a := range []string{"", "LIST", "delete", "read ", "invoke"} {
		if requirement.IsAction(a) {
			t.Errorf("IsAction(%q) = true", a)
		}
	}
}
